"""Functions of floating-point values on traced arrays: nan_to_num, isposinf, isneginf, sinc."""
from __future__ import annotations

import math

import numpy as np

from . import complex_ufuncs
from .arguments import as_tracer as _t
from .registry import EXPORTS, numpy_function
from .tracer import Tracer
from .ufuncs import apply_ufunc


def _u(ufunc, *args):
    return apply_ufunc(ufunc, args)


@numpy_function(np.nan_to_num)
def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """NumPy's: NaN and infinities replaced, in the real and imaginary parts of a complex
    array each; ``copy=False`` writes into ``x`` (an array) and returns it."""
    given = x
    x = _t(x)
    if x.dtype.kind == "c":
        parts = [_finite(EXPORTS["real"](x), nan, posinf, neginf),
                 _finite(EXPORTS["imag"](x), nan, posinf, neginf)]
        result = complex_ufuncs.make(*parts)  # (from the parts: no arithmetic)
    elif x.dtype.kind == "f":
        result = _finite(x, nan, posinf, neginf)
    else:  # (integers and bools: nothing to replace)
        return EXPORTS["copy"](x) if copy else given
    if copy or type(given) is not Tracer or given._scalar or given.weak_type:
        return result
    from .inplace import check_writable, write

    check_writable(given, "np.nan_to_num(copy=False)")
    write(given, result)
    return given


def _finite(x, nan, posinf, neginf):
    info = np.finfo(x.dtype)
    x = EXPORTS["where"](_u(np.isnan, x), nan, x).astype(x.dtype)
    x = EXPORTS["where"](_u(np.equal, x, np.inf), info.max if posinf is None else posinf, x) \
        .astype(x.dtype)
    return EXPORTS["where"](_u(np.equal, x, -np.inf), info.min if neginf is None else neginf,
                            x).astype(x.dtype)


@numpy_function(np.isposinf)
def isposinf(x, out=None):
    x = _t(x)
    return _u(np.logical_and, _u(np.isinf, x), _u(np.logical_not, _u(np.signbit, x)))


@numpy_function(np.isneginf)
def isneginf(x, out=None):
    x = _t(x)
    return _u(np.logical_and, _u(np.isinf, x), _u(np.signbit, x))


@numpy_function(np.sinc)
def sinc(x):
    # NumPy's: y = pi * x, where it is 0 the dtype's eps instead (1e-20 was 0 in float16: 0/0)
    x = _u(np.multiply, math.pi, _t(x))
    eps = np.finfo(x.dtype).eps  # (a NumPy scalar of x's float type)
    y = EXPORTS["where"](_u(np.not_equal, x, 0), x, eps)
    return _u(np.true_divide, _u(np.sin, y), y)
