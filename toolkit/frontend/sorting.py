"""Sorting and what is built on it, on traced arrays: sort, argsort, lexsort, partition,
argpartition, median/percentile/quantile (and their nan forms), isin, and, with a static
``size=`` as in JAX, unique and nonzero/flatnonzero/argwhere.

Sorts are HLO ``sort`` with NumPy's order (NaN last). np.sort and np.argsort keep the user's
kind: 'stable' and 'mergesort' are stable sorts (``is_stable=true``: ties keep their index
order); the default ('quicksort', 'heapsort') is an unstable sort, which the library call
runs as NumPy's own default sort, so ties (argsort's indices, the sign of equal zeros) come out
in NumPy's order. What is built on sorting sorts stably. np.partition and np.argpartition are
``custom-call``s to NumPy's own introselect (an O(n) selection, not a sort), so the order
they leave on either side of each kth position is NumPy's; np.median and np.percentile
partition at the positions NumPy's own versions choose."""
from __future__ import annotations

import operator

import numpy as np

from ..ir.custom_calls import partition_options
from . import lax
from .errors import UnsupportedNumpyError, UserAxisError, UserTypeError, UserValueError
from .arguments import as_tracer, normalize_axes, normalize_axis, one_element_if_0d
from .registry import EXPORTS, FUNCTIONS, numpy_function
from .searching import bin_counts
from .tracer import Tracer, can_break, concrete_or_raise
from .ufuncs import apply_ufunc


def _t(x) -> Tracer:
    return as_tracer(x)


def _u(ufunc, *args):
    return apply_ufunc(ufunc, args)


def _flat_or_axis(a: Tracer, axis):
    if axis is None:
        return lax.reshape(a, (a.size,)), 0
    return a, normalize_axis(operator.index(axis), a.ndim)


def _check_kind(kind, order):
    if order is not None:
        raise UnsupportedNumpyError(
            "sort(order=) (structured arrays) is not supported on traced arrays"
        )
    if kind not in (None, "quicksort", "mergesort", "heapsort", "stable"):
        raise UserValueError(
            f"sort kind must be one of 'quicksort', 'heapsort', 'stable' (got {kind!r})"
        )


def _stable(kind, stable) -> bool:
    """NumPy's choice: stable=True, or kind 'stable'/'mergesort' (its stable sorts)."""
    if stable is not None and kind is not None:
        raise UserValueError("`kind` and keyword parameters can't be provided at the same time. "
                             "Use only one of them.")
    return bool(stable) if stable is not None else kind in ("stable", "mergesort")


@numpy_function(np.sort)
def sort(a, axis=-1, kind=None, order=None, *, stable=None):
    _check_kind(kind, order)
    a, axis = _flat_or_axis(_t(a), axis)
    if a.ndim == 0:
        raise UserValueError("Cannot sort a 0-d array")
    return lax.sort([a], axis, stable=_stable(kind, stable))[0]


@numpy_function(np.argsort)
def argsort(a, axis=-1, kind=None, order=None, *, stable=None):
    _check_kind(kind, order)
    a, axis = _flat_or_axis(one_element_if_0d(_t(a), axis), axis)
    index = lax.iota(a.trace, np.int64, a.shape, axis)
    return lax.sort([a, index], axis, stable=_stable(kind, stable))[1]


@numpy_function(np.lexsort)
def lexsort(keys, axis=-1):
    trace = lax.trace_of(list(keys))
    ks = [k if isinstance(k, Tracer) else lax.lift(trace, k, weak=False) for k in keys]
    if not ks:
        raise UserValueError("need sequence of keys with len > 0 in lexsort")
    shape = np.broadcast_shapes(*[k.shape for k in ks])
    ks = [lax.broadcast_to(k, shape) for k in ks][::-1]  # the last key is the primary one
    axis = normalize_axis(axis, len(shape))
    index = lax.iota(trace, np.int64, shape, axis)
    return lax.sort(ks + [index], axis, num_keys=len(ks))[-1]


@numpy_function(np.partition)
def partition(a, kth, axis=-1, kind="introselect", order=None):
    x, kth, axis = _partition_arguments(a, kth, axis, kind, order)
    return lax.custom_call("numpy.partition", [x], partition_options(kth, axis))[0]


@numpy_function(np.argpartition)
def argpartition(a, kth, axis=-1, kind="introselect", order=None):
    x, kth, axis = _partition_arguments(a, kth, axis, kind, order)
    return lax.custom_call("numpy.argpartition", [x], partition_options(kth, axis))[0]


def _partition_arguments(a, kth, axis, kind, order) -> tuple[Tracer, list[int], int]:
    """np.partition's checks, with its messages: the array (flattened for axis=None), the kth
    list as given (NumPy's routine receives it as it is) and the axis."""
    _check_kind(None, order)
    if kind != "introselect":
        raise UserValueError(f"select kind must be 'introselect' (got {kind!r})")
    x, axis = _flat_or_axis(_t(a), axis)
    if isinstance(kth, Tracer):
        raise UnsupportedNumpyError(
            "np.partition(kth=) of a traced value: the positions must be known when tracing")
    kth_array = np.asarray(kth)
    if kth_array.dtype.kind == "b":
        raise UserValueError("Booleans unacceptable as partition index")
    if kth_array.ndim > 1:
        raise UserValueError("setting an array element with a sequence. The requested array "
                             "would exceed the maximum number of dimension of 1.")
    if kth_array.dtype.kind not in "iu":
        raise UserTypeError("Partition index must be integer")
    if x.ndim == 0:
        raise UserValueError("Cannot partition a 0-d array")
    _check_kth(x, kth_array, axis)
    return x, [int(k) for k in kth_array.ravel()], axis


def _check_kth(a: Tracer, kth, axis):
    n = a.size if axis is None else a.shape[normalize_axis(axis, a.ndim)]
    for k in np.atleast_1d(np.asarray(kth)):
        if not -n <= int(k) < n:
            raise UserValueError(f"kth(={int(k)}) out of bounds ({n})")


# ---- order statistics --------------------------------------------------------------------------
_METHODS = ("linear", "lower", "higher", "midpoint", "nearest")


def _lerp(a, b, t, weak_to=None):
    """NumPy's _lerp: a + (b - a) t, computed from b's side where t >= 0.5. ``weak_to``: ``t``
    stands for a Python float (NumPy's weak scalar), so it and 1 - t, computed in float64,
    take that type."""
    one_minus = _u(np.subtract, 1, t)
    if weak_to is not None:
        t_cast, one_minus = lax.convert(t, weak_to), lax.convert(one_minus, weak_to)
    else:
        t_cast = t
    diff = _u(np.subtract, b, a)
    low = _u(np.add, a, _u(np.multiply, diff, t_cast))
    high = _u(np.subtract, b, _u(np.multiply, diff, one_minus))
    return EXPORTS["where"](_u(np.greater_equal, t, 0.5), high, low)


def _ordered_rows(a: Tracer, axis, name: str, kth=None):
    """``a``'s reduced axes moved last and flattened into one, as NumPy's _ureduce lays them
    out (kept axes first, reduced ones in increasing order), then sorted (NaN last), or, given
    ``kth``, partitioned at those positions by NumPy's own routine: entries there are the
    sorted entries (a static quantile or a median reads nothing else). Also returns the axes."""
    axes = tuple(range(a.ndim)) if axis is None else tuple(sorted(normalize_axes(axis, a.ndim)))
    kept = [d for d in range(a.ndim) if d not in axes]
    moved = lax.transpose(a, kept + list(axes))
    rows = lax.reshape(
        moved, [a.shape[d] for d in kept] + [int(np.prod([a.shape[d] for d in axes]))]
    )
    if rows.shape[-1] == 0:  # (NumPy's quantiles index the empty line: IndexError)
        raise IndexError(f"np.{name} of an empty axis: index -1 is out of bounds for axis 0 "
                         "with size 0")
    if kth is not None:
        return lax.custom_call("numpy.partition", [rows],
                           partition_options(kth, rows.ndim - 1))[0], axes
    # (values alone: a stable sort orders nothing an unstable one does not, but the signs of
    # equal zeros; NumPy's default sort is twice as fast as its stable one)
    return lax.sort([rows], rows.ndim - 1, stable=False)[0], axes


def _reduced_size(a: Tracer, axis) -> int:
    if a.ndim == 0 and axis is not None and axis != ():
        # (NumPy's order statistics take no axis 0 of a 0-d array, as its sums do)
        first = axis[0] if isinstance(axis, (tuple, list)) else axis
        raise UserAxisError(f"axis {first} is out of bounds for array of dimension 0")
    axes = range(a.ndim) if axis is None else normalize_axes(axis, a.ndim)
    return int(np.prod([a.shape[d] for d in axes]))


def _numpy_quantile_kth(n: int, q, method: str, inexact: bool) -> list[int]:
    """The positions NumPy's _quantile partitions a line of ``n`` at, for a quantile ``q``
    known when tracing (numpy/lib/_function_base_impl.py: the entries a discrete method or an
    integer index takes, and the last for its NaN check; else the entries either side of each
    virtual index, and the first and the last)."""
    q = np.asanyarray(q)
    with np.errstate(all="ignore"):
        virtual = (n - 1) * q
        rounding = {"lower": np.floor, "higher": np.ceil, "nearest": np.around}.get(method)
        if rounding is not None or (method == "linear" and virtual.dtype.kind in "iu"):
            taken = virtual if rounding is None else rounding(virtual).astype(np.intp)
            return [int(k) for k in taken.ravel()] + ([-1] if inexact else [])
        if method == "midpoint":
            virtual = 0.5 * (np.floor(virtual) + np.ceil(virtual))
        before = np.asanyarray(np.floor(virtual))
        after = np.asanyarray(before + 1)
        for where, position in ((virtual >= n - 1, -1), (virtual < 0, 0),
                                (np.isnan(virtual), -1)):
            before[where] = position
            after[where] = position
        return [int(k) for k in np.unique(np.concatenate(
            ([0, -1], before.astype(np.intp).ravel(), after.astype(np.intp).ravel())))]


def _quantile(a, q, axis, method, keepdims, ignore_nan, name, weak=None):
    """NumPy's quantile, step for step (numpy/lib/_function_base_impl.py): the virtual index
    (n - 1) q in q's type, the entries either side of it (the last one when it is past the
    end), and NumPy's lerp; the discrete methods take an entry in the array's own type. A
    Python number q is weak: the result keeps a float array's type."""
    if method not in _METHODS:
        raise UnsupportedNumpyError(
            f"np.{name}(method={method!r}) is not supported on traced arrays "
            f"(supported: {', '.join(_METHODS)})"
        )
    a = _t(a)
    weak = type(q) in (int, float) if weak is None else weak
    q_dtype = q.dtype if isinstance(q, Tracer) else np.asarray(q).dtype
    original_method = method
    if not isinstance(q, Tracer) and q_dtype.kind in "iub" and method in ("linear", "midpoint"):
        method = "lower"  # integer quantiles (0 or 1) index exactly: NumPy takes the entry
    discrete = method in ("lower", "higher", "nearest")
    if a.dtype.kind == "b" and not discrete:
        raise UserTypeError(
            "numpy boolean subtract, the `-` operator, is not supported, use the bitwise_xor, "
            "the `^` operator, or the logical_xor function instead."
        )
    index_dtype = q_dtype if q_dtype.kind == "f" else np.dtype(np.float64)
    if discrete:
        out_dtype = a.dtype
    elif weak:
        out_dtype = a.dtype if a.dtype.kind == "f" else np.dtype(np.float64)
    else:
        out_dtype = np.result_type(a.dtype, index_dtype)
    q_arr = q if isinstance(q, Tracer) else np.asarray(q, index_dtype)
    if not isinstance(q_arr, Tracer) and not ((0 <= q_arr) & (q_arr <= 1)).all():  # (NaN too)
        raise UserValueError("Quantiles must be in the range [0, 1]")
    # a quantile known when tracing reads a few entries: NumPy's partition at NumPy's positions
    # (its own routine, so even the sign of a zero tied with another is NumPy's); a traced one,
    # or the valid entries of the nan-functions, read the sorted line
    n = _reduced_size(a, axis)
    kth = (None if isinstance(q, Tracer) or ignore_nan or n == 0
           else _numpy_quantile_kth(n, q, original_method, a.dtype.kind in "fc"))
    s, axes = _ordered_rows(a, axis, name, kth)
    qt = q_arr if isinstance(q_arr, Tracer) else lax.lift(a.trace, q_arr, index_dtype, weak=False)
    qt = lax.convert(qt, index_dtype)
    if qt.ndim > 2:
        raise UserValueError("q must be a scalar or 1d")
    # one quantile per q entry, in front, as NumPy puts the q dimensions first
    qshape = tuple(qt.shape)
    batch = tuple(s.shape[:-1])
    to_q_batch = tuple(range(len(qshape), len(qshape) + len(batch)))
    floats = s.dtype.kind == "f"
    if ignore_nan and floats:  # the nan-functions take the quantile of the valid entries
        count = EXPORTS["sum"](_u(np.logical_not, _u(np.isnan, s)), axis=-1)
        count = lax.broadcast_in_dim(count, qshape + batch, to_q_batch)
    else:
        count = lax.full(a.trace, qshape + batch, n, np.int64)
    last = lax.convert(_u(np.subtract, count, 1), index_dtype)
    virtual = _u(
        np.multiply, last, lax.broadcast_in_dim(qt, qshape + batch, tuple(range(len(qshape))))
    )
    below = _u(np.floor, virtual)
    if method == "midpoint":
        virtual = _u(np.multiply, 0.5, _u(np.add, below, _u(np.ceil, virtual)))
    elif method == "lower":
        virtual = below
    elif method == "higher":
        virtual = _u(np.ceil, virtual)
    elif method == "nearest":
        virtual = _u(np.rint, virtual)  # np.around: half to even
    if discrete:
        lo_index = hi_index = EXPORTS["clip"](virtual, 0, n - 1).astype(np.int64)
    else:  # past the last entry (valid one, for the nan-functions): the last one, on both sides
        past = _u(np.greater_equal, virtual, last)
        lo_index = EXPORTS["where"](past, last, below)
        hi_index = EXPORTS["where"](past, last, _u(np.add, below, 1))
        lo_index = EXPORTS["clip"](lo_index, 0, n - 1).astype(np.int64)
        hi_index = EXPORTS["clip"](hi_index, 0, n - 1).astype(np.int64)
    s_b = lax.broadcast_in_dim(
        s, qshape + batch + (n,), tuple(range(len(qshape), len(qshape) + len(batch) + 1))
    )
    lo = EXPORTS["take_along_axis"](s_b, EXPORTS["expand_dims"](lo_index, -1), axis=-1)[..., 0]
    if discrete:
        value = lo
    else:
        hi = EXPORTS["take_along_axis"](s_b, EXPORTS["expand_dims"](hi_index, -1), axis=-1)[..., 0]
        # NumPy's gamma: from the lower index after its bounds fix (-1 past the end), so past
        # the end the lerp takes b's side, as NumPy's (the sign of a zero, inf - inf)
        gamma = _u(np.subtract, virtual, EXPORTS["where"](past, lax.convert(
            lax.lift(a.trace, np.asarray(-1), index_dtype, weak=False), index_dtype), below))
        if method == "midpoint":  # 0.5 between two entries, 0 on one
            gamma = EXPORTS["where"](_u(np.equal, _u(np.remainder, virtual, 1), 0), 0.0, 0.5)
            gamma = lax.convert(gamma, index_dtype)
        value = _lerp(lo, hi, gamma, weak_to=out_dtype if weak else None)
    if floats:
        if ignore_nan:
            missing = _u(np.equal, count, 0)
        else:  # a NaN anywhere in the row makes the result NaN (NaN sorts last)
            missing = lax.broadcast_in_dim(_u(np.isnan, s[..., -1]), qshape + batch, to_q_batch)
        value = EXPORTS["where"](missing, np.nan, value)
    value = lax.convert(value, out_dtype)
    if keepdims:
        shape = list(qshape) + [1 if d in axes else a.shape[d] for d in range(a.ndim)]
        value = lax.reshape(value, shape)
    return value


@numpy_function(np.quantile)
def quantile(
    a,
    q,
    axis=None,
    out=None,
    overwrite_input=False,
    method="linear",
    keepdims=False,
    *,
    weights=None,
    interpolation=None,
):
    _no_extras(out, weights, "quantile")
    return _quantile(a, q, axis, interpolation or method, keepdims, False, "quantile")


@numpy_function(np.percentile)
def percentile(
    a,
    q,
    axis=None,
    out=None,
    overwrite_input=False,
    method="linear",
    keepdims=False,
    *,
    weights=None,
    interpolation=None,
):
    _no_extras(out, weights, "percentile")
    return _quantile(a, _percent(q), axis, interpolation or method, keepdims, False, "percentile",
                     weak=type(q) in (int, float))


@numpy_function(np.nanquantile)
def nanquantile(
    a,
    q,
    axis=None,
    out=None,
    overwrite_input=False,
    method="linear",
    keepdims=False,
    *,
    weights=None,
    interpolation=None,
):
    _no_extras(out, weights, "nanquantile")
    return _quantile(a, q, axis, interpolation or method, keepdims, True, "nanquantile")


@numpy_function(np.nanpercentile)
def nanpercentile(
    a,
    q,
    axis=None,
    out=None,
    overwrite_input=False,
    method="linear",
    keepdims=False,
    *,
    weights=None,
    interpolation=None,
):
    _no_extras(out, weights, "nanpercentile")
    return _quantile(a, _percent(q), axis, interpolation or method, keepdims, True, "nanpercentile",
                     weak=type(q) in (int, float))


def _percent(q):
    """q / 100 as NumPy's percentile divides it (np.true_divide keeps a float's type)."""
    if isinstance(q, Tracer):
        return _u(np.true_divide, q, 100)
    q = np.true_divide(q, 100)
    if ((q < 0) | (q > 1)).any():
        raise UserValueError("Percentiles must be in the range [0, 100]")
    return q


def _no_extras(out, weights, name):
    if out is not None or weights is not None:
        raise UnsupportedNumpyError(f"np.{name}(out=, weights=) is not supported on traced arrays")


@numpy_function(np.median)
def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    _no_extras(out, None, "median")
    return _median(a, axis, keepdims, False)


@numpy_function(np.nanmedian)
def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    _no_extras(out, None, "nanmedian")
    return _median(a, axis, keepdims, True)


def _median(a, axis, keepdims, ignore_nan):
    """NumPy's median: the middle entry of the sorted values, or the mean of the two middle
    ones, ``(a + b) / 2`` in the result's type (as ``np.mean`` of the two computes it); NaN
    where a value is NaN (``nanmedian``: of the values that are not, NaN where none is)."""
    name = "nanmedian" if ignore_nan else "median"
    a = _t(a)
    out_dtype = a.dtype if a.dtype.kind == "f" else np.dtype(np.float64)
    n = _reduced_size(a, axis)
    if n == 0:  # (NumPy: the mean of nothing, 0 / 0, with a RuntimeWarning)
        axes = tuple(range(a.ndim)) if axis is None else normalize_axes(axis, a.ndim)
        shape = [1 if d in axes else a.shape[d] for d in range(a.ndim)] if keepdims else \
            [a.shape[d] for d in range(a.ndim) if d not in axes]
        with np.errstate(all="ignore"):  # (the NaN 0 / 0 makes here, sign bit and all)
            nothing = np.divide(np.zeros((), out_dtype), np.zeros((), out_dtype))
        return lax.full(a.trace, shape, nothing, out_dtype)
    # NumPy's positions: the middle one or two, and the last for its NaN check
    kth = (None if ignore_nan or n == 0
           else [n // 2 - 1, n // 2] if n % 2 == 0 else [(n - 1) // 2])
    if kth is not None and a.dtype.kind in "fc":
        kth.append(-1)
    s, axes = _ordered_rows(lax.convert(a, out_dtype), axis, name, kth)
    if ignore_nan:
        count = EXPORTS["sum"](_u(np.logical_not, _u(np.isnan, s)), axis=-1)
    else:
        count = lax.full(a.trace, s.shape[:-1], n, np.int64)
    low_index = _u(np.floor_divide, _u(np.subtract, count, 1), 2)
    high_index = _u(np.floor_divide, count, 2)
    low = EXPORTS["take_along_axis"](
        s, EXPORTS["expand_dims"](EXPORTS["clip"](low_index, 0, n - 1), -1), axis=-1
    )[..., 0]
    high = EXPORTS["take_along_axis"](
        s, EXPORTS["expand_dims"](EXPORTS["clip"](high_index, 0, n - 1), -1), axis=-1
    )[..., 0]
    # np.mean of the one or two middle entries, as NumPy's median takes it: a sum from +0.0
    # (so a middle -0.0 gives +0.0) in float32 for float16 data (two float16 maxima do not
    # overflow), divided by the count, in the result's type
    accumulate = np.dtype(np.float32) if out_dtype == np.float16 else out_dtype
    low, high = lax.convert(low, accumulate), lax.convert(high, accumulate)
    one = _u(np.add, lax.full(a.trace, low.shape, 0, accumulate), low)
    single = _u(np.equal, low_index, high_index)
    value = _u(
        np.true_divide,
        EXPORTS["where"](single, one, _u(np.add, one, high)),
        lax.convert(EXPORTS["where"](single, 1, 2), accumulate),
    )
    missing = _u(np.equal, count, 0) if ignore_nan else _u(np.isnan, s[..., -1])  # (NaN sorts last)
    value = lax.convert(EXPORTS["where"](missing, np.nan, value), out_dtype)
    if keepdims:
        value = lax.reshape(value, [1 if d in axes else a.shape[d] for d in range(a.ndim)])
    return value


# ---- membership and sets with a static size -----------------------------------------------------
@numpy_function(np.isin)
def isin(element, test_elements, assume_unique=False, invert=False, *, kind=None):
    trace = lax.trace_of([element, test_elements])
    e = element if isinstance(element, Tracer) else lax.lift(trace, element, weak=False)
    t = (
        test_elements
        if isinstance(test_elements, Tracer)
        else lax.lift(trace, np.asarray(test_elements), weak=False)
    )
    if kind not in (None, "sort", "table"):
        raise UserValueError(f"Invalid kind: '{kind}'. Please use None, 'sort' or 'table'.")
    if kind == "table" and not all(d.kind in "biu" for d in (e.dtype, t.dtype)):
        raise UserValueError("The 'table' method is only supported for boolean or integer "
                             "arrays. Please select 'sort' or None for kind.")
    t = lax.reshape(t, (t.size,))
    if t.size == 0:
        return lax.full(trace, e.shape, bool(invert), np.bool_)
    dtype = np.result_type(e.dtype, t.dtype)
    e, t = lax.convert(e, dtype), lax.convert(t, dtype)
    s = sort(t)
    pos = EXPORTS["searchsorted"](s, e)
    found = _u(np.equal, EXPORTS["take"](s, EXPORTS["clip"](pos, 0, t.size - 1)), e)
    return _u(np.logical_not, found) if invert else found


def _need_size(size, what, mask: Tracer | None = None):
    """The result's static size: ``size``, or, where the function may break its graph, the
    number of entries ``mask`` selects, computed by running the program so far (the next
    segment sees it as a shape, so only a new count compiles again)."""
    if size is None:
        error = UnsupportedNumpyError(
            f"{what} of a traced array has a data-dependent size; call "
            f"toolkit.numpy.{what.removeprefix('np.')}"
            f"(..., size=N) with a fixed N (padded with fill_value), as in JAX"
        )
        if mask is None or can_break(mask) is None:
            raise error
        return int(concrete_or_raise(EXPORTS["count_nonzero"](mask), what, error))
    return operator.index(size)


def _compact(mask: Tracer, values: Tracer, size: int, fill) -> Tracer:
    """The entries of ``values`` where ``mask`` holds, in order, in a length-``size`` array
    padded with ``fill``; entries beyond ``size`` are dropped (a scatter skips positions out of
    range)."""
    position = _u(np.subtract, EXPORTS["cumsum"](mask), 1)
    position = EXPORTS["where"](
        _u(np.logical_and, mask, _u(np.less, position, size)), position, size
    )
    fill = (
        fill if isinstance(fill, Tracer) else lax.lift(values.trace, fill, values.dtype, weak=False)
    )
    out = lax.broadcast_to(lax.convert(fill, values.dtype), (size,))
    if values.size == 0:
        return out
    # a raw scatter: position ``size`` is out of range on purpose, and XLA's scatter skips it
    return lax.scatter(
        out,
        lax.reshape(lax.convert(position, np.int64), (values.size, 1)),
        lax.reshape(values, (values.size,)),
        "assign",
        update_window_dims=(),
        inserted_window_dims=(0,),
        scatter_dims_to_operand_dims=(0,),
        index_vector_dim=1,
    )


def nonzero(a, *, size=None, fill_value=0):
    """np.nonzero; traced arrays need a static ``size`` (padded with ``fill_value``)."""
    if not isinstance(a, Tracer):
        return np.nonzero(a)
    if a.ndim == 0:
        raise UserValueError("Calling nonzero on 0d arrays is not allowed. Use "
                             "np.atleast_1d(scalar).nonzero() instead.")
    flat = lax.reshape(a, (a.size,))
    mask = flat if flat.dtype == np.bool_ else _u(np.not_equal, flat, 0)
    size = _need_size(size, "np.nonzero", mask)
    index = _compact(
        mask,
        lax.iota(a.trace, np.int64, (a.size,), 0),
        size,
        fill_value if np.ndim(fill_value) == 0 else 0,
    )
    if a.ndim <= 1:
        return (index,)
    coords = []
    rest = index
    for d in reversed(a.shape):
        coords.append(_u(np.remainder, rest, d))
        rest = _u(np.floor_divide, rest, d)
    out = tuple(reversed(coords))
    if np.ndim(fill_value) == 0:  # the fill entries stay fill_value in every coordinate
        valid = _u(np.less, lax.iota(a.trace, np.int64, (size,), 0), EXPORTS["count_nonzero"](mask))
        out = tuple(EXPORTS["where"](valid, c, fill_value).astype(np.int64) for c in out)
    return out


def flatnonzero(a, *, size=None, fill_value=0):
    if not isinstance(a, Tracer):
        return np.flatnonzero(a)
    return nonzero(lax.reshape(a, (a.size,)), size=size, fill_value=fill_value)[0]


def argwhere(a, *, size=None, fill_value=0):
    if not isinstance(a, Tracer):
        return np.argwhere(a)
    if a.ndim == 0:  # (NumPy's: the rows of atleast_1d(a), with no columns)
        rows = EXPORTS["stack"](list(nonzero(lax.reshape(a, (1,)), size=size,
                                             fill_value=fill_value)), axis=1)
        return rows[:, :0]
    return EXPORTS["stack"](list(nonzero(a, size=size, fill_value=fill_value)), axis=1)


EXPORTS.update(nonzero=nonzero, flatnonzero=flatnonzero, argwhere=argwhere)
FUNCTIONS[np.nonzero], FUNCTIONS[np.flatnonzero], FUNCTIONS[np.argwhere] = (
    nonzero,
    flatnonzero,
    argwhere,
)


def unique(
    ar,
    return_index=False,
    return_inverse=False,
    return_counts=False,
    axis=None,
    *,
    equal_nan=True,
    size=None,
    fill_value=None,
    sorted=True,
):
    """np.unique of the flattened array; traced arrays need a static ``size`` (padded with
    ``fill_value``, by default the smallest value), as in JAX."""
    if not isinstance(ar, Tracer):
        return np.unique(ar, return_index, return_inverse, return_counts, axis, equal_nan=equal_nan)
    if axis is not None:
        raise UnsupportedNumpyError("np.unique(axis=) is not supported on traced arrays")
    flat = lax.reshape(ar, (ar.size,))
    if flat.size == 0:
        if size is None:
            _need_size(size, "np.unique")
        raise UserValueError("np.unique of an empty traced array with size= has no fill value")
    # NumPy's own sorts: a stable one for each value's first index (return_index), its default
    # (unstable) one otherwise, which decides which of -0.0 and 0.0 stands for both
    if return_index or return_inverse:
        order = argsort(flat, kind="stable" if return_index else None)
        s = EXPORTS["take"](flat, order)
    else:
        s = sort(flat)
    differs = _u(np.not_equal, s[1:], s[:-1])
    if equal_nan and s.dtype.kind in "fc":
        differs = _u(
            np.logical_and,
            differs,
            _u(np.logical_not, _u(np.logical_and, _u(np.isnan, s[1:]), _u(np.isnan, s[:-1]))),
        )
    first = EXPORTS["concatenate"]([lax.full(ar.trace, (1,), True, np.bool_), differs])
    size = _need_size(size, "np.unique", first)
    fill = s[0] if fill_value is None else fill_value
    values = _compact(first, s, size, fill)
    results = [values]
    if return_index:
        results.append(_compact(first, order, size, 0))
    group = _u(np.subtract, EXPORTS["cumsum"](first), 1)  # each sorted entry's unique slot
    if return_inverse:
        from .indexing import scatter_into
        inverse = scatter_into(
            lax.full(ar.trace, (flat.size,), 0, np.int64), order, group, "assign"
        )
        results.append(lax.reshape(inverse, ar.shape) if ar.ndim != 1 else inverse)
    if return_counts:
        # slots beyond size are dropped, as its values
        results.append(bin_counts(group, None, size))
    return results[0] if len(results) == 1 else tuple(results)


EXPORTS["unique"] = unique
FUNCTIONS[np.unique] = unique


# (the array API's unique functions keep every NaN: NumPy calls unique with equal_nan=False)
def unique_values(x, *, size=None, fill_value=None):
    """With ``size=`` (JAX's), the sorted unique values. Without it the count needs a graph
    break anyway, and there NumPy's own np.unique_values runs: its order is its own (a hash
    table's for integers, in NumPy 2.3), which no sort reproduces."""
    if size is None and isinstance(x, Tracer):
        raise UnsupportedNumpyError("np.unique_values: NumPy's order of the values is its own "
                                    "(call toolkit.numpy.unique_values(..., size=N) for sorted "
                                    "values of a static count)")
    return unique(x, size=size, fill_value=fill_value, equal_nan=False)


def unique_counts(x, *, size=None, fill_value=None):
    values, counts = unique(x, return_counts=True, size=size, fill_value=fill_value,
                            equal_nan=False)
    return values, counts


def unique_inverse(x, *, size=None, fill_value=None):
    values, inverse = unique(x, return_inverse=True, size=size, fill_value=fill_value,
                             equal_nan=False)
    return values, lax.reshape(inverse, x.shape) if isinstance(x, Tracer) else inverse


def unique_all(x, *, size=None, fill_value=None):
    values, index, inverse, counts = unique(x, True, True, True, size=size, fill_value=fill_value,
                                            equal_nan=False)
    return (
        values,
        index,
        lax.reshape(inverse, x.shape) if isinstance(x, Tracer) else inverse,
        counts,
    )


for _fn in (unique_values, unique_counts, unique_inverse, unique_all):
    EXPORTS[_fn.__name__] = _fn
    FUNCTIONS[getattr(np, _fn.__name__)] = _fn
