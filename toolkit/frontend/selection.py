"""Selecting elements of traced arrays: np.where, np.clip, np.select, np.choose, np.compress and
np.extract."""
from __future__ import annotations

import builtins

import numpy as np

from . import lax
from .arguments import as_tracer, reject
from .arguments import no_out_or_where as _no
from .errors import UnsupportedNumpyError, UserValueError
from .promotion import result_dtype
from .registry import EXPORTS, numpy_function
from .tracer import Tracer, can_break, concrete_or_raise, strongly_typed
from .ufuncs import apply_ufunc, broadcast_all


@numpy_function(np.where)
def where(condition, x=None, y=None):
    if x is None and y is None and isinstance(condition, Tracer) and can_break(condition):
        return EXPORTS["nonzero"](condition)  # the count crosses a graph break
    if x is None or y is None:
        raise UnsupportedNumpyError("np.where(condition) with one argument (indices of nonzero "
                                    "elements) has a data-dependent shape and cannot be traced; "
                                    "pass both x and y")
    cond = as_tracer(condition)
    cond = cond if cond.dtype == np.bool_ else lax.compare(cond, lax.full_like(cond, 0), "NE")
    trace = cond.trace
    dtype = result_dtype([x, y])
    weak = builtins.all(
        isinstance(v, Tracer) and v.weak_type or type(v) in (int, float) for v in (x, y)
    )
    # np.where casts its branches (unsafely): a Python int that does not fit wraps, as in NumPy
    a = lax.lift(trace, x, dtype, weak=weak, wrap_ints=True)
    b = lax.lift(trace, y, dtype, weak=weak, wrap_ints=True)
    cond, a, b = broadcast_all([cond, a, b], "np.where", [condition, x, y])
    return lax.select(cond, a, b)


@numpy_function(np.clip)
def clip(
    a, a_min=np._NoValue, a_max=np._NoValue, out=None, *, min=np._NoValue, max=np._NoValue, **kwargs
):
    reject(out=out)
    lo = a_min if a_min is not np._NoValue else min
    hi = a_max if a_max is not np._NoValue else max
    lo = None if lo is np._NoValue else lo
    hi = None if hi is np._NoValue else hi
    kind = (a.dtype if isinstance(a, Tracer) else np.asarray(a).dtype).kind
    if kind in "iu" and not (isinstance(a, Tracer) and a.weak_type):
        info = np.iinfo(a.dtype if isinstance(a, Tracer) else np.asarray(a).dtype)
        lo, hi = _int_bound(lo, int(info.min), "maximum"), _int_bound(hi, int(info.max), "minimum")
        if lo is None and hi is None:
            return apply_ufunc(np.positive, (a,))
    if lo is None or hi is None:  # NumPy 2 computes a one-sided clip with np.maximum/np.minimum
        result = a
        if lo is not None:
            result = apply_ufunc(np.maximum, [result, lo])
        if hi is not None:
            result = apply_ufunc(np.minimum, [result, hi])
        return result
    return _clip_both(a, lo, hi)


def _int_bound(bound, limit: int, toward: str):
    """NumPy's clip of an integer array: a Python-int bound at or beyond the array's range
    (``limit``) clips nothing and is dropped, where the ufunc would refuse to convert it; one
    beyond the other end still raises OverflowError. A traced Python int is moved to the range's
    end it passes (clipping at the limit changes nothing), leaving the other end to the check
    every Python int meeting a narrower integer gets."""
    if type(bound) is int:
        return None if (bound <= limit if toward == "maximum" else bound >= limit) else bound
    if (isinstance(bound, Tracer) and bound.weak_type and bound.dtype.kind in "iu"
            and bound.ndim == 0):
        own = np.iinfo(bound.dtype)
        if not own.min <= limit <= own.max:  # (a uint64 array's end: no int64 passes it)
            return bound
        return lax.elementwise(toward, bound, lax.lift(bound.trace, limit, bound.dtype, weak=True),
                               weak=True)
    return bound


def _clip_both(a, lo, hi):
    """NumPy's clip ufunc, zeros' signs and NaNs included. Its loop has two behaviours: with
    bounds constant over the loop (scalars) it keeps ``x`` when ``x`` equals a bound and any NaN
    bound makes every element NaN; with bounds that vary it is MIN(MAX(x, lo), hi) where
    MAX(a, b) = a if isnan(a) or a > b else b, so a bound equal to ``x`` is what comes out."""
    trace = lax.trace_of([a, lo, hi])
    with trace.op_scope("clip"):
        dtype = result_dtype([a, lo, hi])
        lax.check_supported_dtype(dtype, "the result of np.clip")
        weak = builtins.all(
            isinstance(v, Tracer) and v.weak_type or type(v) in (int, float) for v in (a, lo, hi)
        )
        x, low, high = broadcast_all(
            [lax.lift(trace, v, dtype, weak=weak, what="operand of np.clip") for v in (a, lo, hi)],
            "np.clip",
            [a, lo, hi],
        )
        if dtype.kind != "f":  # no signed zeros or NaNs: the order of comparisons is invisible
            return lax.elementwise(
                "minimum", lax.elementwise("maximum", x, low, weak=weak), high, weak=weak
            )
        if builtins.all(np.size(v) == 1 for v in (lo, hi)):
            t = lax.select(lax.compare(x, low, "LT"), low, x)
            clipped = lax.select(lax.compare(t, high, "GT"), high, t)
            nan_bound = lax.elementwise(
                "or", lax.compare(low, low, "NE"), lax.compare(high, high, "NE")
            )
            return lax.select(nan_bound, lax.elementwise("add", low, high, weak=weak), clipped)
        t = lax.select(
            lax.elementwise("or", lax.compare(x, x, "NE"), lax.compare(x, low, "GT")), x, low
        )
        return lax.select(
            lax.elementwise("or", lax.compare(t, t, "NE"), lax.compare(t, high, "LT")), t, high
        )


def _u(ufunc, *args):
    return apply_ufunc(ufunc, args)


# ---- selection ---------------------------------------------------------------------------------
@numpy_function(np.select)
def select(condlist, choicelist, default=0):
    if len(condlist) != len(choicelist):
        raise UserValueError("list of cases must be same length as list of conditions")
    if not condlist:
        raise UserValueError("select with an empty condition list is not possible")
    trace = lax.trace_of(list(condlist) + list(choicelist))
    choices = [c if isinstance(c, Tracer) else lax.lift(trace, c) for c in choicelist]
    dtype = np.result_type(
        *[c.dtype if not c.weak_type else c.dtype.type(0).item() for c in choices],
        np.asarray(default).dtype if not isinstance(default, (int, float)) else default,
    )
    result = default
    for cond, choice in zip(reversed(list(condlist)), reversed(choices)):
        c = cond if isinstance(cond, Tracer) else lax.lift(trace, cond)
        if c.dtype != np.bool_:
            raise UserValueError(
                f"invalid entry in condlist: should be boolean ndarray, got {c.dtype}"
            )
        result = EXPORTS["where"](c, choice, result)
    return lax.convert(as_tracer(result), dtype)


@numpy_function(np.choose)
def choose(a, choices, out=None, mode="raise"):
    _no(out, None, "choose")
    trace = lax.trace_of([a] + list(choices))
    dtype = result_dtype(list(choices))  # (NEP 50: np.choose(i, [x_int8, 5]) is int8)
    stacked = EXPORTS["stack"](
        list(
            EXPORTS["broadcast_arrays"](
                *[strongly_typed(lax.lift(trace, c, dtype, weak=False, wrap_ints=True))
                  for c in choices]
            )
        )
    )
    index = a if isinstance(a, Tracer) else np.asarray(a)
    n = stacked.shape[0]
    if mode == "wrap":
        index = _u(np.mod, index, n) if isinstance(index, Tracer) else np.mod(index, n)
    elif isinstance(index, Tracer):
        if mode != "clip":  # 'raise': NumPy's error, after the call (a runtime check)
            lax.add_check(_u(np.logical_or, _u(np.less, index, 0), _u(np.greater_equal, index, n)),
                          UserValueError, "invalid entry in choice array")
        index = EXPORTS["clip"](index, 0, n - 1)
    elif mode == "clip":
        index = np.clip(index, 0, n - 1)
    elif (index < 0).any() or (index >= n).any():
        raise UserValueError("invalid entry in choice array")
    shape = np.broadcast_shapes(np.shape(index), stacked.shape[1:])
    stacked = lax.broadcast_to(stacked, (n,) + shape)
    index = (
        EXPORTS["broadcast_to"](index, shape)
        if isinstance(index, Tracer)
        else np.broadcast_to(index, shape)
    )
    return EXPORTS["take_along_axis"](
        stacked,
        EXPORTS["expand_dims"](index, 0) if isinstance(index, Tracer) else index[None],
        axis=0,
    )[0]


def _static_mask(condition, what):
    """The condition's value: a traced one through a graph break where one can happen."""
    error = UnsupportedNumpyError(
        f"{what} with a traced condition has a data-dependent size; use "
        "np.where(condition, a, 0) for a same-shaped result")
    return np.asarray(concrete_or_raise(condition, what, error))


@numpy_function(np.compress)
def compress(condition, a, axis=None, out=None):
    _no(out, None, "compress")
    cond = _static_mask(condition, "np.compress")
    return EXPORTS["take"](a, np.nonzero(cond)[0], axis=axis)


@numpy_function(np.extract)
def extract(condition, arr):
    cond = _static_mask(condition, "np.extract")
    return EXPORTS["take"](EXPORTS["ravel"](arr), np.nonzero(np.ravel(cond))[0])
