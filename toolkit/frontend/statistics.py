"""Statistics on traced arrays: average, cov, corrcoef, ptp, count_nonzero."""
from __future__ import annotations

import builtins

import numpy as np

from . import lax
from .arguments import as_tracer as _t
from .arguments import no_out_or_where as _no
from .arguments import normalize_axes
from .errors import UnsupportedNumpyError, UserValueError
from .registry import EXPORTS, numpy_function
from .tracer import Tracer
from .ufuncs import apply_ufunc


def _u(ufunc, *args):
    return apply_ufunc(ufunc, args)


@numpy_function(np.average)
def average(a, axis=None, weights=None, returned=False, *, keepdims=False):
    a = _t(a)
    if weights is None:
        avg = EXPORTS["mean"](a, axis=axis, keepdims=keepdims)
        scale = lax.full(a.trace, avg.shape, a.size // builtins.max(avg.size, 1), avg.dtype)
        return (avg, scale) if returned else avg
    w = weights if isinstance(weights, Tracer) else lax.lift(a.trace, weights, weak=False)
    if w.shape != a.shape:
        if axis is None:
            raise UserValueError("Axis must be specified when shapes of a and weights differ.")
        axes = normalize_axes(axis, a.ndim)
        if w.ndim != len(axes) or tuple(a.shape[x] for x in axes) != tuple(w.shape):
            raise UserValueError(
                "Shape of weights must be consistent with shape of a along specified axis."
            )
        w = lax.broadcast_in_dim(w, a.shape, axes)
    result_dtype = (
        np.result_type(a.dtype, w.dtype, np.float64)
        if a.dtype.kind in "iub"
        else np.result_type(a.dtype, w.dtype)
    )
    w = lax.convert(w, result_dtype)
    scale = EXPORTS["sum"](w, axis=axis, keepdims=keepdims)
    total = EXPORTS["sum"](
        _u(np.multiply, lax.convert(a, result_dtype), w), axis=axis, keepdims=keepdims
    )
    lax.add_check(_u(np.equal, scale, 0), ZeroDivisionError,
                  "Weights sum to zero, can't be normalized")
    avg = _u(np.true_divide, total, scale)
    return (avg, lax.broadcast_to(scale, avg.shape)) if returned else avg


@numpy_function(np.cov)
def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *, dtype=None):
    if fweights is not None or aweights is not None:
        raise UnsupportedNumpyError(
            "np.cov(fweights=, aweights=) is not supported on traced arrays"
        )
    x = _t(m)
    if x.ndim > 2:
        raise UserValueError("m has more than 2 dimensions")
    x = EXPORTS["atleast_2d"](x)
    if not rowvar and x.shape[0] != 1:
        x = lax.transpose(x, (1, 0))
    if y is not None:
        yy = EXPORTS["atleast_2d"](y if isinstance(y, Tracer) else lax.lift(x.trace, y, weak=False))
        if not rowvar and yy.shape[0] != 1:
            yy = lax.transpose(yy, (1, 0))
        x = EXPORTS["concatenate"]([x, yy], axis=0)
    out_dtype = np.result_type(x.dtype, np.float64) if dtype is None else np.dtype(dtype)
    x = lax.convert(x, out_dtype)
    if ddof is None:
        ddof = 0 if bias else 1
    n = x.shape[1]
    centred = _u(np.subtract, x, EXPORTS["mean"](x, axis=1, keepdims=True))
    c = EXPORTS["matmul"](centred, lax.transpose(centred, (1, 0)))
    fact = n - ddof
    # NumPy's ``c *= np.true_divide(1, fact)``: a multiplication by the float64 reciprocal (not
    # a division), computed in float64 and stored back in c's type
    with np.errstate(divide="ignore"):
        scale = np.true_divide(1, fact if fact > 0 else 0.0)
    c = lax.convert(_u(np.multiply, c, scale), c.dtype)
    return EXPORTS["squeeze"](c) if c.shape == (1, 1) or x.shape[0] == 1 else c


@numpy_function(np.corrcoef)
def corrcoef(x, y=None, rowvar=True, *, dtype=None):
    c = cov(x, y, rowvar, dtype=dtype)
    if c.ndim == 0:
        return _u(np.true_divide, c, c)
    d = EXPORTS["diagonal"](c)
    s = _u(np.sqrt, d)
    c = _u(np.true_divide, c, lax.broadcast_in_dim(s, c.shape, (0,)))
    c = _u(np.true_divide, c, lax.broadcast_in_dim(s, c.shape, (1,)))
    return EXPORTS["clip"](c, -1, 1)


@numpy_function(np.ptp)
def ptp(a, axis=None, out=None, keepdims=False):
    _no(out, None, "ptp")
    return _u(
        np.subtract,
        EXPORTS["max"](a, axis=axis, keepdims=keepdims),
        EXPORTS["min"](a, axis=axis, keepdims=keepdims),
    )


@numpy_function(np.count_nonzero)
def count_nonzero(a, axis=None, *, keepdims=False):
    a = _t(a)
    nonzero = a if a.dtype == np.bool_ else _u(np.not_equal, a, 0)
    return EXPORTS["sum"](nonzero, axis=axis, keepdims=keepdims).astype(np.int64)
