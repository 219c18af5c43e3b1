"""Polynomials on traced arrays, coefficients highest power first as np.poly*: polyval,
polyadd, polysub, polymul, polyder, polyint."""
from __future__ import annotations

import builtins
import operator

import numpy as np

from . import lax
from .registry import EXPORTS, numpy_function
from .tracer import Tracer
from .ufuncs import apply_ufunc


def _u(ufunc, *args):
    return apply_ufunc(ufunc, args)


# ---- polynomials (coefficients highest power first, as np.poly*) -------------------------------
@numpy_function(np.polyval)
def polyval(p, x):
    trace = lax.trace_of([p, x])
    p = p if isinstance(p, Tracer) else lax.lift(trace, np.asarray(p), weak=False)
    x = x if isinstance(x, Tracer) else lax.lift(trace, np.asarray(x), weak=False)
    y = _u(np.multiply, x, 0)
    y = lax.convert(y, np.result_type(p.dtype, y.dtype))
    for i in range(p.shape[0]):  # Horner's rule, as NumPy
        y = _u(np.add, _u(np.multiply, y, x), p[i])
    return y


def _coefficients(*ps):
    trace = lax.trace_of(list(ps))
    out = [
        p if isinstance(p, Tracer) else lax.lift(trace, np.atleast_1d(np.asarray(p)), weak=False)
        for p in ps
    ]
    return [EXPORTS["atleast_1d"](p) for p in out]


@numpy_function(np.polyadd)
def polyadd(a1, a2):
    a, b = _coefficients(a1, a2)
    n = builtins.max(a.shape[0], b.shape[0])
    a = EXPORTS["pad"](a, (n - a.shape[0], 0))
    b = EXPORTS["pad"](b, (n - b.shape[0], 0))
    return _u(np.add, a, b)


@numpy_function(np.polysub)
def polysub(a1, a2):
    a, b = _coefficients(a1, a2)
    n = builtins.max(a.shape[0], b.shape[0])
    return _u(
        np.subtract, EXPORTS["pad"](a, (n - a.shape[0], 0)), EXPORTS["pad"](b, (n - b.shape[0], 0))
    )


@numpy_function(np.polymul)
def polymul(a1, a2):
    a, b = _coefficients(a1, a2)
    return EXPORTS["convolve"](a, b)


@numpy_function(np.polyder)
def polyder(p, m=1):
    (p,) = _coefficients(p)
    for _ in range(operator.index(m)):
        n = p.shape[0] - 1
        if n <= 0:
            return lax.full(p.trace, (1,), 0, np.result_type(p.dtype, np.int64))
        p = _u(np.multiply, p[:-1], np.arange(n, 0, -1))
    return p


@numpy_function(np.polyint)
def polyint(p, m=1, k=None):
    (p,) = _coefficients(p)
    m = operator.index(m)
    ks = np.zeros(m) if k is None else np.broadcast_to(np.asarray(k, dtype=float), (m,))
    for i in range(m):
        n = p.shape[0]
        scaled = _u(np.true_divide, p, np.arange(n, 0, -1).astype(float))
        p = EXPORTS["concatenate"]([scaled, lax.lift(p.trace, np.asarray([ks[i]]), weak=False)])
    return p
