"""Comparing traced arrays as wholes: isclose, allclose, array_equal, array_equiv."""
from __future__ import annotations

import numpy as np

from . import lax
from .registry import EXPORTS, numpy_function
from .tracer import Tracer
from .ufuncs import apply_ufunc


def _u(ufunc, *args):
    return apply_ufunc(ufunc, args)


@numpy_function(np.isclose)
def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    trace = lax.trace_of([a, b])
    x = a if isinstance(a, Tracer) else lax.lift(trace, a)
    y = b if isinstance(b, Tracer) else lax.lift(trace, b)
    dt = np.result_type(y.dtype if not y.weak_type else 0.0, 1.0)
    y = lax.convert(y, dt, y.weak_type)
    finite_y = _u(np.isfinite, y)
    close = _u(
        np.less_equal,
        _u(np.absolute, _u(np.subtract, x, y)),
        _u(np.add, atol, _u(np.multiply, rtol, _u(np.absolute, y))),
    )
    result = _u(np.logical_or, _u(np.logical_and, close, finite_y), _u(np.equal, x, y))
    if equal_nan:
        result = _u(np.logical_or, result, _u(np.logical_and, _u(np.isnan, x), _u(np.isnan, y)))
    return result


@numpy_function(np.allclose)
def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    return EXPORTS["all"](isclose(a, b, rtol, atol, equal_nan))


@numpy_function(np.array_equal)
def array_equal(a1, a2, equal_nan=False):
    trace = lax.trace_of([a1, a2])
    x = a1 if isinstance(a1, Tracer) else lax.lift(trace, a1, weak=False)
    y = a2 if isinstance(a2, Tracer) else lax.lift(trace, a2, weak=False)
    if x.shape != y.shape:
        return lax.full(trace, (), False, np.bool_)
    same = _u(np.equal, x, y)
    if equal_nan and x.dtype.kind == "f" and y.dtype.kind == "f":
        same = _u(np.logical_or, same, _u(np.logical_and, _u(np.isnan, x), _u(np.isnan, y)))
    return EXPORTS["all"](same)


@numpy_function(np.array_equiv)
def array_equiv(a1, a2):
    trace = lax.trace_of([a1, a2])
    x = a1 if isinstance(a1, Tracer) else lax.lift(trace, a1, weak=False)
    y = a2 if isinstance(a2, Tracer) else lax.lift(trace, a2, weak=False)
    try:
        np.broadcast_shapes(x.shape, y.shape)
    except ValueError:
        return lax.full(trace, (), False, np.bool_)
    return EXPORTS["all"](_u(np.equal, x, y))
