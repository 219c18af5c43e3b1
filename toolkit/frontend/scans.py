"""Scans, differences, searching and binning on traced arrays: cumsum/cumprod (and their nan
and cumulative_* forms, ufunc.accumulate), diff, ediff1d, gradient, trapezoid, unwrap,
convolve/correlate, searchsorted (an unrolled binary search of gathers), digitize, interp,
bincount (with a static ``length``) and histogram.

Scans are log-step (Hillis-Steele): ceil(log2 n) rounds of ``op(x, x shifted)``. Integer and
boolean results are exact; a float cumsum adds in a different order than NumPy's sequential
loop, so it can differ in the last bits, as np.sum's pairwise order does."""
from __future__ import annotations

import builtins
import math
import operator

import numpy as np

from . import lax
from .errors import UnsupportedNumpyError, UserValueError
from .numpy_functions import EXPORTS, FUNCTIONS, _as_tracer, _sum_dtype, normalize_axis, numpy_function
from .tracer import Tracer
from .ufuncs import apply_ufunc

_IDENTITY = {"add": 0, "multiply": 1, "maximum": None, "minimum": None, "and": True, "or": False}


def _t(x) -> Tracer:
    return _as_tracer(x)


def associative_scan(x: Tracer, axis: int, opcode: str) -> Tracer:
    """Inclusive scan of ``x`` along ``axis`` with the associative elementwise ``opcode``."""
    n = x.shape[axis]
    shift = 1
    while shift < n:
        head = [(0, d, 1) for d in x.shape]
        head[axis] = (0, n - shift, 1)
        moved = lax.slice_(x, head)
        if _IDENTITY[opcode] is None:  # max/min: the element itself is neutral for its own slot
            keep = [(0, d, 1) for d in x.shape]
            keep[axis] = (0, shift, 1)
            first = lax.slice_(x, keep)
            pad = lax.concatenate([first, moved], axis)
        else:
            padding = [(0, 0, 0)] * x.ndim
            padding[axis] = (shift, 0, 0)
            pad = lax.pad(moved, lax.full(x.trace, (), _IDENTITY[opcode], x.dtype), padding)
        x = lax.elementwise(opcode, x, pad, weak=x.weak_type)
        shift *= 2
    return x


def _scan(a, axis, dtype, opcode, name):
    a = _t(a)
    if axis is None:
        a = lax.reshape(a, (a.size,))
        axis = 0
    axis = normalize_axis(operator.index(axis), a.ndim)
    out = np.dtype(dtype) if dtype is not None else (_sum_dtype(a.dtype) if opcode in ("add", "multiply") else a.dtype)
    x = lax.convert(a, lax.check_supported_dtype(out, f"dtype= of {name}"))
    if x.dtype == np.bool_ and opcode in ("add", "multiply"):
        x = lax.convert(x, np.int64)
    return associative_scan(x, axis, opcode)


@numpy_function(np.cumsum)
def cumsum(a, axis=None, dtype=None, out=None):
    _no_out(out, "cumsum")
    return _scan(a, axis, dtype, "add", "np.cumsum")


@numpy_function(np.cumprod)
def cumprod(a, axis=None, dtype=None, out=None):
    _no_out(out, "cumprod")
    return _scan(a, axis, dtype, "multiply", "np.cumprod")


def _no_out(out, name):
    if out is not None:
        raise UnsupportedNumpyError(f"np.{name}(..., out=) is not supported on traced arrays")


def _nan_to(a: Tracer, value) -> Tracer:
    if a.dtype.kind != "f":
        return a
    return lax.select(lax.compare(a, a, "NE"), lax.full(a.trace, a.shape, value, a.dtype), a)


@numpy_function(np.nancumsum)
def nancumsum(a, axis=None, dtype=None, out=None):
    return cumsum(_nan_to(_t(a), 0), axis, dtype, out)


@numpy_function(np.nancumprod)
def nancumprod(a, axis=None, dtype=None, out=None):
    return cumprod(_nan_to(_t(a), 1), axis, dtype, out)


def _cumulative(opcode, name):
    def fn(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
        _no_out(out, name)
        x = _t(x)
        if axis is None:
            if x.ndim > 1:
                raise UserValueError(f"np.{name}: axis must be given for arrays of more than one dimension")
            axis = 0
        axis = normalize_axis(axis, x.ndim)
        result = _scan(x, axis, dtype, opcode, f"np.{name}")
        if include_initial:
            padding = [(0, 0, 0)] * result.ndim
            padding[axis] = (1, 0, 0)
            result = lax.pad(result, lax.full(result.trace, (), _IDENTITY[opcode], result.dtype), padding)
        return result
    return fn


numpy_function(np.cumulative_sum, name="cumulative_sum")(_cumulative("add", "cumulative_sum"))
numpy_function(np.cumulative_prod, name="cumulative_prod")(_cumulative("multiply", "cumulative_prod"))

ACCUMULATE = {np.add: "add", np.multiply: "multiply", np.maximum: "maximum", np.minimum: "minimum",
              np.logical_and: "and", np.logical_or: "or"}


def ufunc_accumulate(ufunc, array, axis=0, dtype=None, out=None):
    opcode = ACCUMULATE.get(ufunc)
    if opcode is None:
        raise UnsupportedNumpyError(f"np.{ufunc.__name__}.accumulate is not supported on traced arrays "
                                    f"(supported: {', '.join(f'np.{u.__name__}' for u in ACCUMULATE)})")
    _no_out(out, f"{ufunc.__name__}.accumulate")
    a = _t(array)
    if opcode in ("and", "or"):
        a = a if a.dtype == np.bool_ else lax.compare(a, lax.full(a.trace, a.shape, 0, a.dtype), "NE")
        return associative_scan(a, normalize_axis(axis, a.ndim), opcode)
    return _scan(a, axis, dtype, opcode, f"np.{ufunc.__name__}.accumulate")


# ---- differences ------------------------------------------------------------------------------
def _axis_slice(a: Tracer, axis: int, lo: int, hi: int) -> Tracer:
    spec = [(0, d, 1) for d in a.shape]
    spec[axis] = (lo, hi, 1)
    return lax.slice_(a, spec)


@numpy_function(np.diff)
def diff(a, n=1, axis=-1, prepend=np._NoValue, append=np._NoValue):
    a = _t(a)
    if a.ndim == 0:
        raise UserValueError("diff requires input that is at least one dimensional")
    axis = normalize_axis(axis, a.ndim)
    parts = []
    for extra in (prepend, append):
        if extra is np._NoValue:
            parts.append(None)
            continue
        e = extra if isinstance(extra, Tracer) else lax.lift(a.trace, extra, weak=False)
        if e.ndim == 0:
            shape = list(a.shape)
            shape[axis] = 1
            e = lax.broadcast_to(e, shape)
        parts.append(e)
    pieces = [p for p in (parts[0], a, parts[1]) if p is not None]
    if len(pieces) > 1:
        a = EXPORTS["concatenate"](pieces, axis=axis)
    n = operator.index(n)
    if n < 0:
        raise UserValueError(f"order must be non-negative but got {n}")
    for _ in range(n):
        m = a.shape[axis]
        if m == 0:
            break
        hi, lo = _axis_slice(a, axis, 1, m), _axis_slice(a, axis, 0, m - 1)
        a = lax.compare(hi, lo, "NE") if a.dtype == np.bool_ else apply_ufunc(np.subtract, (hi, lo))
    return a


@numpy_function(np.ediff1d)
def ediff1d(ary, to_end=None, to_begin=None):
    a = _t(ary)
    flat = lax.reshape(a, (a.size,))
    d = diff(flat) if a.size else flat
    pieces = []
    if to_begin is not None:
        b = to_begin if isinstance(to_begin, Tracer) else lax.lift(a.trace, np.asarray(to_begin).ravel(), a.dtype, weak=False)
        pieces.append(lax.convert(lax.reshape(b, (b.size,)), a.dtype))
    pieces.append(d)
    if to_end is not None:
        e = to_end if isinstance(to_end, Tracer) else lax.lift(a.trace, np.asarray(to_end).ravel(), a.dtype, weak=False)
        pieces.append(lax.convert(lax.reshape(e, (e.size,)), a.dtype))
    return lax.concatenate(pieces, 0) if len(pieces) > 1 else d


@numpy_function(np.gradient)
def gradient(f, *varargs, axis=None, edge_order=1):
    f = _t(f)
    axes = tuple(range(f.ndim)) if axis is None else tuple(
        normalize_axis(a, f.ndim) for a in (axis if isinstance(axis, (tuple, list)) else (axis,)))
    spacing = list(varargs) if varargs else [1.0] * len(axes)
    if len(spacing) == 1 and len(axes) > 1:
        spacing = spacing * len(axes)
    if len(spacing) != len(axes) or builtins.any(np.ndim(h) != 0 or isinstance(h, Tracer) for h in spacing):
        raise UnsupportedNumpyError("np.gradient on traced arrays takes uniform spacings (Python scalars) only")
    if edge_order not in (1, 2):
        raise UserValueError("'edge_order' greater than 2 not supported")
    if f.dtype.kind in "iub":
        f = lax.convert(f, np.float64)
    out = []
    for ax, h in zip(axes, spacing):
        n = f.shape[ax]
        if n < edge_order + 1:
            raise UserValueError("Shape of array too small to calculate a numerical gradient, "
                                 "at least (edge_order + 1) elements are required.")
        h = float(h)
        interior = apply_ufunc(np.true_divide, (apply_ufunc(np.subtract, (_axis_slice(f, ax, 2, n), _axis_slice(f, ax, 0, n - 2))), 2.0 * h))
        s = [_axis_slice(f, ax, i, i + 1) for i in (0, 1, 2)] if edge_order == 2 else None
        if edge_order == 1:
            first = apply_ufunc(np.true_divide, (apply_ufunc(np.subtract, (_axis_slice(f, ax, 1, 2), _axis_slice(f, ax, 0, 1))), h))
            last = apply_ufunc(np.true_divide, (apply_ufunc(np.subtract, (_axis_slice(f, ax, n - 1, n), _axis_slice(f, ax, n - 2, n - 1))), h))
        else:
            first = (s[0] * -1.5 + s[1] * 2.0 - s[2] * 0.5) / h
            e = [_axis_slice(f, ax, i, i + 1) for i in (n - 3, n - 2, n - 1)]
            last = (e[0] * 0.5 - e[1] * 2.0 + e[2] * 1.5) / h
        out.append(lax.concatenate([first, interior, last], ax))
    return out[0] if len(out) == 1 else tuple(out)


@numpy_function(np.trapezoid)
def trapezoid(y, x=None, dx=1.0, axis=-1):
    y = _t(y)
    axis = normalize_axis(axis, y.ndim)
    n = y.shape[axis]
    avg = apply_ufunc(np.add, (_axis_slice(y, axis, 1, n), _axis_slice(y, axis, 0, n - 1)))
    if x is None:
        widths = dx
    else:
        xs = x if isinstance(x, Tracer) else lax.lift(y.trace, x, weak=False)
        if xs.ndim == 1:
            d = diff(xs)
            shape = [1] * y.ndim
            shape[axis] = d.shape[0]
            widths = lax.reshape(d, shape)
        else:
            widths = diff(xs, axis=axis)
    return EXPORTS["sum"](apply_ufunc(np.multiply, (widths, avg)) / 2.0, axis=axis)


@numpy_function(np.unwrap)
def unwrap(p, discont=None, axis=-1, *, period=2 * math.pi):
    p = _t(p)
    if p.dtype.kind != "f":
        p = lax.convert(p, np.float64)
    axis = normalize_axis(axis, p.ndim)
    dd = diff(p, axis=axis)
    discont = period / 2 if discont is None else discont
    high = period / 2
    low = -high
    ddmod = apply_ufunc(np.add, (apply_ufunc(np.mod, (apply_ufunc(np.subtract, (dd, low)), period)), low))
    ambiguous = apply_ufunc(np.logical_and, (apply_ufunc(np.equal, (ddmod, low)), apply_ufunc(np.greater, (dd, 0))))
    ddmod = EXPORTS["where"](ambiguous, high, ddmod)
    correct = apply_ufunc(np.subtract, (ddmod, dd))
    correct = EXPORTS["where"](apply_ufunc(np.less, (apply_ufunc(np.absolute, (dd,)), discont)), 0.0, correct)
    n = p.shape[axis]
    if n == 0:
        return p
    rest = apply_ufunc(np.add, (_axis_slice(p, axis, 1, n), cumsum(correct, axis=axis)))
    return lax.concatenate([_axis_slice(p, axis, 0, 1), lax.convert(rest, p.dtype)], axis)


# ---- convolution ------------------------------------------------------------------------------
def _convolve(a: Tracer, v: Tracer, mode: str) -> Tracer:
    if a.ndim != 1 or v.ndim != 1:
        raise UserValueError("object too deep for desired array")
    n, m = a.shape[0], v.shape[0]
    if n == 0 or m == 0:
        raise UserValueError("a cannot be empty" if n == 0 else "v cannot be empty")
    if m > n:
        a, v, n, m = v, a, m, n
    # full[j] = sum_k padded[j + k] * v[m - 1 - k] over a padded by m - 1 zeros on both sides;
    # 'same' and 'valid' are centred and inner windows of it, as in NumPy
    offsets = {"full": (0, n + m - 1), "same": ((m - 1) // 2, n), "valid": (m - 1, n - m + 1)}
    if mode not in offsets:
        raise UserValueError(f"mode must be one of 'valid', 'same', or 'full' (got {mode!r})")
    offset, out_len = offsets[mode]
    zero = lax.full(a.trace, (), 0, a.dtype)
    padded = lax.pad(a, zero, [(m - 1, m - 1, 0)])
    index = offset + np.arange(out_len)[:, None] + np.arange(m)[None, :]
    windows = padded[index]
    total = EXPORTS["sum"](apply_ufunc(np.multiply, (windows, lax.rev(v, (0,)))), axis=1)
    return lax.convert(total, a.dtype)


def _pair(a, v):
    trace = lax.trace_of([a, v])
    dtype = np.result_type(*(x.dtype if isinstance(x, Tracer) else np.asarray(x).dtype for x in (a, v)))
    dtype = lax.check_supported_dtype(dtype, "np.convolve operands")
    return (lax.convert(x if isinstance(x, Tracer) else lax.lift(trace, x, weak=False), dtype) for x in (a, v))


@numpy_function(np.convolve)
def convolve(a, v, mode="full"):
    a, v = _pair(a, v)
    return _convolve(a, v, mode)


@numpy_function(np.correlate)
def correlate(a, v, mode="valid"):
    a, v = _pair(a, v)
    if v.shape[0] > a.shape[0]:  # NumPy: correlate(a, v) = correlate(v, a) reversed
        return lax.rev(_convolve(v, lax.rev(a, (0,)), mode), (0,))
    return _convolve(a, lax.rev(v, (0,)), mode)


# ---- searching and binning --------------------------------------------------------------------
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
        at_mid = EXPORTS["take"](a, safe)
        go_right = _nan_last_less(at_mid, v) if side == "left" else lax.elementwise("not", _nan_last_less(v, at_mid))
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
    if period is not None:
        raise UnsupportedNumpyError("np.interp(..., period=) is not supported on traced arrays")
    trace = lax.trace_of([x, xp, fp])
    xs = lax.convert(x if isinstance(x, Tracer) else lax.lift(trace, x, weak=False), np.float64)
    xp = lax.convert(xp if isinstance(xp, Tracer) else lax.lift(trace, xp, weak=False), np.float64)
    fp = fp if isinstance(fp, Tracer) else lax.lift(trace, fp, weak=False)
    fp = lax.convert(fp, np.float64)
    n = xp.shape[0]
    if n == 0:
        raise UserValueError("array of sample points is empty")
    j = search_sorted(xp, xs, "right")
    i = EXPORTS["clip"](*(apply_ufunc(np.subtract, (j, 1)), 0, builtins.max(n - 2, 0))) if n > 1 else None
    if n == 1:
        value = lax.broadcast_to(fp[0], xs.shape)
    else:
        x0, x1 = EXPORTS["take"](xp, i), EXPORTS["take"](xp, i + 1)
        f0, f1 = EXPORTS["take"](fp, i), EXPORTS["take"](fp, i + 1)
        slope = (f1 - f0) / (x1 - x0)
        value = slope * (xs - x0) + f0
        # NumPy: where the slope is not finite, or at a sample, the sample value
        value = EXPORTS["where"](apply_ufunc(np.equal, (xs, x0)), f0, value)
        value = EXPORTS["where"](apply_ufunc(np.equal, (xs, x1)), f1, value)
    lo = fp[0] if left is None else left
    hi = fp[-1] if right is None else right
    value = EXPORTS["where"](apply_ufunc(np.less, (xs, xp[0])), lo, value)
    value = EXPORTS["where"](apply_ufunc(np.greater, (xs, xp[-1])), hi, value)
    return EXPORTS["where"](apply_ufunc(np.isnan, (xs,)), xs, value)


def bincount(x, weights=None, minlength=0, *, length=None):
    """np.bincount. Traced ``x`` needs a static ``length`` (as in JAX): counts of values at or
    beyond it are dropped, since the output's size cannot depend on the data."""
    if not isinstance(x, Tracer) and not isinstance(weights, Tracer):
        return np.bincount(x, weights, minlength)
    trace = lax.trace_of([x, weights])
    if length is None:
        raise UnsupportedNumpyError(
            "np.bincount of a traced array has a data-dependent length (max(x) + 1); call "
            "toolkit.numpy.bincount(x, weights, length=N) with a fixed N (values >= N are dropped)")
    xs = x if isinstance(x, Tracer) else lax.lift(trace, x, weak=False)
    if xs.dtype.kind not in "iu" or xs.ndim != 1:
        raise UserValueError("np.bincount: x must be a 1-d array of non-negative integers")
    length = builtins.max(operator.index(length), operator.index(minlength))
    if xs.dtype.kind == "i":  # NumPy refuses negative values (values >= length are dropped: see above)
        lax.add_check(lax.compare(xs, lax.full(xs.trace, xs.shape, 0, xs.dtype), "LT"), UserValueError,
                           "'list' argument must have no negative elements")
    return _counts(xs, weights, length)


def _counts(xs: Tracer, weights, length: int) -> Tracer:
    """Counts (or summed weights) of each value of ``xs`` in [0, length); others are skipped."""
    trace = xs.trace
    if weights is None:
        values = lax.full(trace, xs.shape, 1, np.int64)
    else:
        w = weights if isinstance(weights, Tracer) else lax.lift(trace, weights, weak=False)
        values = lax.convert(lax.reshape(w, (w.size,)), np.float64)
    out = lax.full(trace, (length,), 0, values.dtype)
    positions = lax.convert(xs, np.int64)
    outside = lax.elementwise("or", lax.compare(positions, lax.full(trace, positions.shape, 0, np.int64), "LT"),
                              lax.compare(positions, lax.full(trace, positions.shape, length, np.int64), "GE"))
    values = lax.select(outside, lax.full(trace, values.shape, 0, values.dtype), values)
    positions = lax.select(outside, lax.full(trace, positions.shape, 0, np.int64), positions)
    from .indexing import scatter_into
    return scatter_into(out, positions, values, "add")


EXPORTS["bincount"] = bincount
FUNCTIONS[np.bincount] = bincount
