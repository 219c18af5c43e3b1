"""Searching and binning on traced arrays: searchsorted (an unrolled binary search of gathers),
digitize, interp (NumPy's own routine, a library call), bincount (with a static ``length``)."""
from __future__ import annotations

import builtins
import math
import operator

import numpy as np

from . import lax
from ..ir.custom_calls import interp_options
from .errors import UnsupportedNumpyError, UserTypeError, UserValueError
from .registry import EXPORTS, FUNCTIONS, numpy_function
from .tracer import Tracer, can_break, concrete_or_raise
from .ufuncs import apply_ufunc


def _nan_last_less(x: Tracer, y: Tracer) -> Tracer:
    """x < y in NumPy's sort order, where NaN is after every number."""
    lt = lax.compare(x, y, "LT")
    if x.dtype.kind != "f":
        return lt
    x_nan, y_nan = lax.compare(x, x, "NE"), lax.compare(y, y, "NE")
    return lax.elementwise("or", lt, lax.elementwise("and", y_nan, lax.elementwise("not", x_nan)))


def search_sorted(a: Tracer, v: Tracer, side: str) -> Tracer:
    """Insertion points of ``v`` into the sorted 1-d ``a``: a binary search unrolled over
    ceil(log2(n + 1)) rounds, each a gather of the midpoints."""
    n = a.shape[0]
    trace = a.trace
    lo = lax.full(trace, v.shape, 0, np.int64)
    hi = lax.full(trace, v.shape, n, np.int64)
    if n == 0:
        return lo
    one = lax.full(trace, v.shape, 1, np.int64)
    for _ in range(max(1, math.ceil(math.log2(n + 1)))):
        mid = lax.elementwise("shift-right-logical", lax.elementwise("add", lo, hi), one)
        safe = lax.elementwise("minimum", mid, lax.full(trace, v.shape, n - 1, np.int64))
        # (0 <= safe < n by construction: no bounds check, whose reduction would split the
        # rounds into kernels of their own)
        at_mid = EXPORTS["take"](a, safe, mode="clip")
        go_right = (
            _nan_last_less(at_mid, v)
            if side == "left"
            else lax.elementwise("not", _nan_last_less(v, at_mid))
        )
        go_right = lax.elementwise("and", go_right, lax.compare(lo, hi, "LT"))
        lo = lax.select(go_right, lax.elementwise("add", mid, one), lo)
        hi = lax.select(go_right, hi, lax.select(lax.compare(lo, hi, "LT"), mid, hi))
    return lo


@numpy_function(np.searchsorted)
def searchsorted(a, v, side="left", sorter=None):
    if side not in ("left", "right"):
        raise UserValueError(f"side must be 'left' or 'right' (got {side!r})")
    trace = lax.trace_of([a, v])
    a = a if isinstance(a, Tracer) else lax.lift(trace, a, weak=False)
    if a.ndim != 1:
        raise UserValueError("object too deep for desired array")
    if sorter is not None:
        if np.size(sorter) != a.size:
            raise UserValueError("sorter.size must equal a.size")
        a = EXPORTS["take"](a, sorter)
    dtype = np.result_type(a.dtype, v.dtype if isinstance(v, Tracer) else np.asarray(v).dtype)
    vv = lax.convert(v if isinstance(v, Tracer) else lax.lift(trace, v, weak=False), dtype)
    return search_sorted(lax.convert(a, dtype), vv, side)


@numpy_function(np.digitize)
def digitize(x, bins, right=False):
    trace = lax.trace_of([x, bins])
    b = bins if isinstance(bins, Tracer) else lax.lift(trace, bins, weak=False)
    if b.ndim != 1:
        raise UserValueError("bins must be one-dimensional")
    side = "left" if right else "right"
    if not isinstance(bins, Tracer):
        d = np.diff(np.asarray(bins))
        if not (np.all(d >= 0) or np.all(d <= 0)):
            raise UserValueError("bins must be monotonically increasing or decreasing")
        if np.all(d >= 0):
            return searchsorted(b, x, side)
        return apply_ufunc(np.subtract, (b.shape[0], searchsorted(lax.rev(b, (0,)), x, side)))
    increasing = searchsorted(b, x, side)
    decreasing = apply_ufunc(np.subtract, (b.shape[0], searchsorted(lax.rev(b, (0,)), x, side)))
    up = apply_ufunc(np.less_equal, (b[0], b[-1])) if b.shape[0] else True
    return EXPORTS["where"](up, increasing, decreasing)


@numpy_function(np.interp)
def interp(x, xp, fp, left=None, right=None, period=None):
    """NumPy's own np.interp as a library call (a ``custom-call``): its search, which starts
    from the last point's position, and its rules for infinite slopes and repeated samples;
    float64 results, complex128 for a complex fp. Derivatives: traced_interp's."""
    trace = lax.trace_of([x, xp, fp, left, right])
    if isinstance(period, Tracer):
        raise UnsupportedNumpyError("np.interp(period=) of a traced value: pass a number")
    if period is not None:
        period = abs(period)  # (NumPy's: a complex period is its magnitude)
        if period == 0:
            raise UserValueError("period must be a non-zero value")
    fp = fp if isinstance(fp, Tracer) else lax.lift(trace, fp, weak=False)
    dtype = np.dtype(np.complex128 if fp.dtype.kind == "c" else np.float64)
    xs = _as(trace, x, np.float64)
    xp = _as(trace, xp, np.float64)
    fp = lax.convert(fp, dtype)
    # (NumPy's messages: its Python code checks first where a period is given)
    if period is not None and (xp.ndim != 1 or fp.ndim != 1):
        raise UserValueError("Data points must be 1-D sequences")
    if xp.ndim == 0 or fp.ndim == 0:
        raise UserValueError("object of too small depth for desired array")
    if xp.ndim != 1 or fp.ndim != 1:
        raise UserValueError("object too deep for desired array")
    if xp.shape[0] != fp.shape[0]:
        raise UserValueError("fp and xp are not of the same length"
                             + ("" if period is not None else "."))
    if xp.shape[0] == 0:
        raise UserValueError("array of sample points is empty")
    left = fp[0] if left is None else _as(trace, left, dtype)
    right = fp[-1] if right is None else _as(trace, right, dtype)
    if left.ndim or right.ndim:
        raise UserValueError("np.interp's left and right are scalars")
    return lax.custom_call("numpy.interp", [xs, xp, fp, left, right], interp_options(period))[0]


def _as(trace, value, dtype) -> Tracer:
    if isinstance(value, Tracer):
        return lax.convert(value, dtype)
    array = np.asarray(value)
    if array.dtype.kind == "c" and np.dtype(dtype).kind != "c":
        raise UserTypeError(f"np.interp: cannot use the complex value {value!r} here (NumPy "
                            "converts it to a float)")
    return lax.lift(trace, array.astype(dtype), dtype, weak=False)


def traced_interp(xs: Tracer, xp: Tracer, fp: Tracer, left: Tracer, right: Tracer) -> Tracer:
    """np.interp as traced operations (a binary search of gathers and the line through the
    samples either side): the form np.interp's derivatives differentiate (its values are
    NumPy's but at a sample next to an infinite one, which NumPy's routine special-cases)."""
    n = xp.shape[0]
    j = search_sorted(xp, xs, "right")
    if n == 1:
        value = lax.broadcast_to(fp[0], xs.shape)
    else:
        # (i is clipped to [0, n - 2]: no bounds checks)
        i = EXPORTS["clip"](apply_ufunc(np.subtract, (j, 1)), 0, n - 2)
        x0, x1 = EXPORTS["take"](xp, i, mode="clip"), EXPORTS["take"](xp, i + 1, mode="clip")
        f0, f1 = EXPORTS["take"](fp, i, mode="clip"), EXPORTS["take"](fp, i + 1, mode="clip")
        # (no special case at a sample, as NumPy's values have: at a sample the derivative
        # with respect to x is the slope of the segment after it, as JAX's)
        value = (f1 - f0) / (x1 - x0) * (xs - x0) + f0
    value = EXPORTS["where"](apply_ufunc(np.less, (xs, xp[0])), left, value)
    value = EXPORTS["where"](apply_ufunc(np.greater, (xs, xp[-1])), right, value)
    return EXPORTS["where"](apply_ufunc(np.isnan, (xs,)), xs, value)


def bincount(x, weights=None, minlength=0, *, length=None):
    """np.bincount. Traced ``x`` needs a static ``length`` (as in JAX): counts of values at or
    beyond it are dropped, since the output's size cannot depend on the data."""
    if not isinstance(x, Tracer) and not isinstance(weights, Tracer):
        return np.bincount(x, weights, minlength)
    if operator.index(minlength) < 0:
        raise UserValueError("'minlength' must not be negative")
    trace = lax.trace_of([x, weights])
    xs = x if isinstance(x, Tracer) else lax.lift(trace, x, weak=False)
    if weights is not None:  # (NumPy's: 1-d weights, read as float64)
        if np.ndim(weights) != 1:
            raise UserValueError("object too deep for desired array")
        w_dtype = weights.dtype if isinstance(weights, Tracer) else np.asarray(weights).dtype
        if w_dtype.kind == "c":
            raise UserTypeError(f"Cannot cast array data from {w_dtype!r} to "
                                "dtype('float64') according to the rule 'safe'")
    if length is None:
        error = UnsupportedNumpyError(
            "np.bincount of a traced array has a data-dependent length (max(x) + 1); call "
            "toolkit.numpy.bincount(x, weights, length=N) with a fixed N (values >= N are dropped)")
        if can_break(xs) is None or xs.ndim != 1 or xs.dtype.kind not in "iu":
            raise error
        # the length crosses a graph break (NumPy's: max(x) + 1, and 0 for an empty x)
        length = 0 if xs.size == 0 else int(concrete_or_raise(
            EXPORTS["max"](xs), "np.bincount", error)) + 1
    if xs.dtype.kind not in "iu" or xs.ndim != 1:
        raise UserValueError("np.bincount: x must be a 1-d array of non-negative integers")
    length = builtins.max(operator.index(length), operator.index(minlength))
    # NumPy refuses negative values (values >= length are dropped: see above)
    if xs.dtype.kind == "i":
        lax.add_check(lax.compare(xs, lax.full(xs.trace, xs.shape, 0, xs.dtype), "LT"),
                      UserValueError, "'list' argument must have no negative elements")
    return bin_counts(xs, weights, length)


def bin_counts(xs: Tracer, weights, length: int) -> Tracer:
    """Counts (or summed weights) of each value of ``xs`` in [0, length); others are skipped."""
    trace = xs.trace
    if weights is None:
        values = lax.full(trace, xs.shape, 1, np.int64)
    else:
        w = weights if isinstance(weights, Tracer) else lax.lift(trace, weights, weak=False)
        values = lax.convert(lax.reshape(w, (w.size,)), np.float64)
    out = lax.full(trace, (length,), 0, values.dtype)
    positions = lax.convert(xs, np.int64)
    outside = lax.elementwise(
        "or",
        lax.compare(positions, lax.full(trace, positions.shape, 0, np.int64), "LT"),
        lax.compare(positions, lax.full(trace, positions.shape, length, np.int64), "GE"),
    )
    values = lax.select(outside, lax.full(trace, values.shape, 0, values.dtype), values)
    positions = lax.select(outside, lax.full(trace, positions.shape, 0, np.int64), positions)
    from .indexing import scatter_into
    return scatter_into(out, positions, values, "add")


EXPORTS["bincount"] = bincount
FUNCTIONS[np.bincount] = bincount
