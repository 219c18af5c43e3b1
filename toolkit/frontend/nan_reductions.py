"""NumPy's NaN-ignoring reductions on traced arrays: nansum, nanprod, nanmax, nanmin, nanmean,
nanvar, nanstd."""
from __future__ import annotations

import numpy as np

from . import lax
from .arguments import as_tracer as _t
from .arguments import no_out_or_where as _no
from .registry import EXPORTS, numpy_function
from .tracer import Tracer
from .ufuncs import apply_ufunc


def _u(ufunc, *args):
    return apply_ufunc(ufunc, args)


def _is_nan(a: Tracer) -> Tracer:
    return _u(np.isnan, a)


def _replace_nan(a: Tracer, value) -> Tracer:
    if a.dtype.kind not in "fc":  # (a complex number with a NaN part is NaN to np.isnan)
        return a
    return EXPORTS["where"](_is_nan(a), lax.full(a.trace, a.shape, value, a.dtype), a)


def _not_nan_count(a: Tracer, axis, keepdims) -> Tracer:
    valid = (
        _u(np.logical_not, _is_nan(a))
        if a.dtype.kind in "fc"
        else lax.full(a.trace, a.shape, True, np.bool_)
    )
    return EXPORTS["sum"](valid, axis=axis, keepdims=keepdims)


@numpy_function(np.nansum)
def nansum(
    a, axis=None, dtype=None, out=None, keepdims=False, initial=np._NoValue, where=np._NoValue
):
    _no(out, where, "nansum")
    return EXPORTS["sum"](_replace_nan(_t(a), 0), axis=axis, dtype=dtype, keepdims=keepdims,
                          **_initial(initial))


@numpy_function(np.nanprod)
def nanprod(
    a, axis=None, dtype=None, out=None, keepdims=False, initial=np._NoValue, where=np._NoValue
):
    _no(out, where, "nanprod")
    return EXPORTS["prod"](_replace_nan(_t(a), 1), axis=axis, dtype=dtype, keepdims=keepdims,
                           **_initial(initial))


def _initial(initial) -> dict:
    return {} if initial is np._NoValue else {"initial": initial}


def _nan_extreme(a, axis, keepdims, name, fill, initial):
    a = _t(a)
    if a.dtype.kind != "f":
        return EXPORTS[name](a, axis=axis, keepdims=keepdims, **_initial(initial))
    result = EXPORTS[name](_replace_nan(a, fill), axis=axis, keepdims=keepdims,
                           **_initial(initial))
    if initial is not np._NoValue:  # (NumPy's fmax.reduce from initial: no all-NaN slice)
        return result
    all_nan = _u(np.equal, _not_nan_count(a, axis, keepdims), 0)
    return EXPORTS["where"](all_nan, np.nan, result).astype(a.dtype)


@numpy_function(np.nanmax)
def nanmax(a, axis=None, out=None, keepdims=False, initial=np._NoValue, where=np._NoValue):
    _no(out, where, "nanmax")
    return _nan_extreme(a, axis, keepdims, "max", -np.inf, initial)


@numpy_function(np.nanmin)
def nanmin(a, axis=None, out=None, keepdims=False, initial=np._NoValue, where=np._NoValue):
    _no(out, where, "nanmin")
    return _nan_extreme(a, axis, keepdims, "min", np.inf, initial)


@numpy_function(np.nanmean)
def nanmean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=np._NoValue):
    _no(out, where, "nanmean")
    a = _t(a)
    if a.dtype.kind not in "fc":
        return EXPORTS["mean"](a, axis=axis, dtype=dtype, keepdims=keepdims)
    total = EXPORTS["sum"](_replace_nan(a, 0), axis=axis, dtype=dtype, keepdims=keepdims)
    return _u(np.true_divide, total, _not_nan_count(a, axis, keepdims)).astype(total.dtype)


@numpy_function(np.nanvar)
def nanvar(
    a,
    axis=None,
    dtype=None,
    out=None,
    ddof=0,
    keepdims=False,
    *,
    where=np._NoValue,
    mean=np._NoValue,
    correction=np._NoValue,
):
    _no(out, where, "nanvar")
    if correction is not np._NoValue:
        ddof = correction
    a = _t(a)
    if a.dtype.kind not in "fc":
        return EXPORTS["var"](a, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims)
    centre = nanmean(a, axis=axis, dtype=dtype, keepdims=True)
    # NumPy writes the deviations and their squares into the data's own array (out=arr,
    # casting='unsafe'): in its type, whatever dtype= sums them in
    dev = _replace_nan(lax.convert(_u(np.subtract, a, centre), a.dtype), 0)
    sqr = (_u(np.real, _u(np.multiply, dev, _u(np.conjugate, dev))) if a.dtype.kind == "c"
           else _u(np.multiply, dev, dev))
    total = EXPORTS["sum"](sqr, axis=axis, dtype=dtype, keepdims=keepdims)
    count = _u(np.subtract, _not_nan_count(a, axis, keepdims), ddof)
    count = EXPORTS["where"](_u(np.less_equal, count, 0), np.nan, count)
    return _u(np.true_divide, total, count).astype(total.dtype)


@numpy_function(np.nanstd)
def nanstd(
    a,
    axis=None,
    dtype=None,
    out=None,
    ddof=0,
    keepdims=False,
    *,
    where=np._NoValue,
    mean=np._NoValue,
    correction=np._NoValue,
):
    return _u(
        np.sqrt, nanvar(a, axis, dtype, out, ddof, keepdims, where=where, correction=correction)
    )
