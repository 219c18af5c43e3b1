"""Rounding traced arrays: round (around), fix."""
from __future__ import annotations

import operator

import numpy as np

from . import lax
from .arguments import as_tracer as _t
from .arguments import no_out_or_where as _no
from .errors import UserTypeError
from .registry import EXPORTS, FUNCTIONS, numpy_function
from .ufuncs import apply_ufunc


def _u(ufunc, *args):
    return apply_ufunc(ufunc, args)


@numpy_function(np.round)
def round(a, decimals=0, out=None):
    _no(out, None, "round")
    a = _t(a)
    decimals = operator.index(decimals)
    if a.dtype.kind in "iu":
        if decimals >= 0:
            return EXPORTS["copy"](a)
        scale = 10 ** (-decimals)  # NumPy rounds integers half to even too
        return (_u(np.multiply, _u(np.rint, _u(np.true_divide, a, scale)), scale)).astype(a.dtype)
    if a.dtype == np.bool_:  # NumPy rounds booleans through float16 (and refuses decimals)
        if decimals:
            raise UserTypeError("Cannot cast ufunc 'multiply' output from dtype('float64') to "
                                "dtype('bool') with casting rule 'same_kind'")
        return lax.convert(a, np.float16)
    if decimals == 0:
        return _u(np.rint, a)
    if decimals > 0:
        scale = _power_of_ten(decimals)
        return _u(np.true_divide, _u(np.rint, _u(np.multiply, a, scale)), scale)
    scale = _power_of_ten(-decimals)
    return _u(np.multiply, _u(np.rint, _u(np.true_divide, a, scale)), scale)


def _power_of_ten(n: int) -> float:
    """10**n as NumPy's round computes it (multiarray/calculation.c): exact to 1e22, then by
    repeated multiplication from 1e9, which rounds differently from ``10.0 ** n`` (1e23 on)."""
    if n < 9:
        return 10.0 ** n
    scale = 1e9
    for _ in range(n - 9):
        scale *= 10.0
    return scale


EXPORTS["around"] = EXPORTS["round"]
FUNCTIONS[np.around] = FUNCTIONS[np.round]


@numpy_function(np.fix)
def fix(x, out=None):
    """Round toward zero as NumPy's fix does: ceil, then floor where x >= 0 (so -0.5 -> -0.0)."""
    _no(out, None, "fix")
    x = _t(x)
    return EXPORTS["where"](_u(np.greater_equal, x, 0), _u(np.floor, x), _u(np.ceil, x))
