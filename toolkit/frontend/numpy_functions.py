"""NumPy functions on traced arrays: reductions and selection here; shape manipulation,
creation and linear algebra in their own modules.

Each is registered for ``__array_function__`` (so ``np.sum(x)`` traces) and exported by
``toolkit.numpy``. Called without traced arguments outside a trace, they are NumPy's own."""
from __future__ import annotations

import builtins
import functools
import math
import operator
from typing import Callable

import numpy as np

from . import lax
from .errors import UnsupportedNumpyError, UserValueError, UserAxisError
from .inplace import VIEW_FUNCTIONS, fresh_results, mark_untracked_view, store_result
from .tracer import Tracer, current_trace
from .ufuncs import apply_ufunc, broadcast_all

FUNCTIONS: dict[Callable, Callable] = {}  # NumPy function -> traced implementation
EXPORTS: dict[str, Callable] = {}  # name -> public toolkit.numpy function


def _has_tracer(values) -> bool:
    """Is a Tracer among ``values``, or inside their (nested) lists and tuples (np.block)?"""
    stack = list(values)
    while stack:
        v = stack.pop()
        if isinstance(v, Tracer):
            return True
        if isinstance(v, (list, tuple)):
            stack.extend(v)
    return False


def numpy_function(np_func: Callable | None, name: str | None = None, creation: bool = False):
    """Register ``impl`` as the traced version of ``np_func`` and export it."""

    def deco(impl):
        public_name = name or impl.__name__.lstrip("_")
        impl = _refusing_complex(impl, public_name)

        @functools.wraps(impl)
        def wrapper(*args, **kwargs):
            traced = _has_tracer(args) or _has_tracer(kwargs.values())
            trace = current_trace() if creation else None
            if not traced and trace is None:
                if np_func is None:
                    raise UnsupportedNumpyError(f"tnp.{public_name} needs a traced argument")
                return np_func(*args, **kwargs)
            if trace is None:
                trace = lax.trace_of(list(args) + [a for v in args if isinstance(v, (list, tuple)) for a in v])
            with trace.op_scope(public_name):
                result = impl(*args, **kwargs)
            if public_name in VIEW_FUNCTIONS and args:
                # functions of several arrays (np.atleast_1d(a, b)) view each of them
                several = public_name in ("atleast_1d", "atleast_2d", "atleast_3d", "broadcast_arrays") and len(args) > 1
                return mark_untracked_view(result, args if several else args[0], public_name)
            return fresh_results(result, list(args) + list(kwargs.values()))

        wrapper.__name__ = wrapper.__qualname__ = public_name
        if np_func is not None:
            FUNCTIONS[np_func] = impl
        EXPORTS[public_name] = wrapper
        return wrapper

    return deco


# Functions that trace complex arrays as NumPy computes them (the rest raise, naming the function:
# their real-number implementations may take paths that are wrong for complex numbers)
COMPLEX_FUNCTIONS = frozenset({
    "reshape", "ravel", "transpose", "permute_dims", "matrix_transpose", "swapaxes", "moveaxis", "rollaxis", "squeeze",
    "expand_dims", "atleast_1d", "atleast_2d", "atleast_3d", "broadcast_to", "broadcast_arrays", "concatenate",
    "concat", "stack", "hstack", "vstack", "dstack", "column_stack", "row_stack", "block", "split", "array_split",
    "hsplit", "vsplit", "dsplit", "unstack", "flip", "fliplr", "flipud", "roll", "rot90", "tile", "repeat",
    "take", "take_along_axis", "diagonal", "diag", "diagflat", "tril", "triu", "copy", "asarray", "array",
    "asanyarray", "ascontiguousarray", "where", "zeros_like", "ones_like", "empty_like", "full_like", "real", "imag",
    "angle", "conj", "conjugate", "iscomplex", "isreal", "iscomplexobj", "isrealobj", "sum", "mean", "prod",
    "dot", "vdot", "matmul", "inner", "outer", "tensordot", "einsum", "kron", "trace", "shape", "ndim", "size",
    "pad", "astype", "array_equal", "all", "any", "var", "std", "sort_complex", "count_nonzero", "nonzero", "flatnonzero", "select", "choose", "compress",
    "extract", "append", "insert", "delete", "resize", "trim_zeros", "put", "put_along_axis", "place", "copyto",
    "fill_diagonal", "empty", "zeros", "ones", "full", "identity", "eye", "tri", "linspace",
})


def _refusing_complex(impl, public_name: str):
    if public_name in COMPLEX_FUNCTIONS:
        return impl

    @functools.wraps(impl)
    def checked(*args, **kwargs):
        stack = list(args) + list(kwargs.values())
        while stack:
            v = stack.pop()
            if isinstance(v, Tracer) and v.dtype.kind == "c":
                raise UnsupportedNumpyError(
                    f"np.{public_name} of a complex array ({v.describe()}) is not supported by toolkit; on "
                    "complex arrays it traces arithmetic, abs, exp, log, sqrt, conj, real, imag, angle, sums, "
                    "products, dots and data movement (take .real/.imag to work on the parts)")
            if isinstance(v, (list, tuple)):
                stack.extend(v)
        return impl(*args, **kwargs)

    return checked


def _as_tracer(x, what="operand") -> Tracer:
    if isinstance(x, Tracer):
        return x
    return lax.lift(lax.trace_of([x]), x, what=what)


def normalize_axis(axis: int, ndim: int, what: str = "axis") -> int:
    if not -ndim <= axis < builtins.max(ndim, 1) or (ndim == 0 and axis not in (0, -1)):
        raise UserAxisError(f"{what} {axis} is out of bounds for array of dimension {ndim}")
    return axis % ndim if ndim else 0


def normalize_axes(axis, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, Tracer):
        raise UnsupportedNumpyError("axis must be a Python int or tuple, not a traced value")
    axes = tuple(normalize_axis(operator.index(a), ndim) for a in (axis if isinstance(axis, (tuple, list)) else (axis,)))
    if len(set(axes)) != len(axes):
        raise UserValueError(f"duplicate value in 'axis': {axis}")
    return axes


def _keepdims(result: Tracer, x_shape, axes, keepdims: bool) -> Tracer:
    if not keepdims:
        return result
    return lax.reshape(result, [1 if i in axes else d for i, d in enumerate(x_shape)])


def _reject(**unsupported):
    for key, value in unsupported.items():
        if value is not None and value is not np._NoValue:
            raise UnsupportedNumpyError(f"the '{key}=' argument is not supported on traced arrays")


# ---- reductions ---------------------------------------------------------------------------
def _sum_dtype(dtype: np.dtype) -> np.dtype:
    return np.add.reduce(np.zeros(1, dtype)).dtype if dtype.kind in "biu" else dtype


def _reduce(x, opcode, axis, keepdims, dtype=None, name="reduce"):
    x = _as_tracer(x)
    axes = normalize_axes(axis, x.ndim)
    if dtype is not None:
        x = lax.convert(x, lax.check_supported_dtype(dtype, f"dtype= of {name}"))
    if opcode in ("maximum", "minimum") and builtins.any(x.shape[a] == 0 for a in axes):
        raise UserValueError(f"zero-size array to reduction operation {opcode} which has no identity "
                         f"({name} of {x.describe()})")
    if x.dtype == np.bool_ and opcode in ("add", "multiply"):
        x = lax.convert(x, np.int64)
    if x.dtype == np.float16 and opcode in ("add", "multiply"):
        # NumPy's pairwise float16 sum accumulates in float32 (a strided one rounds every step:
        # toolkit always gives the float32-accumulated, more accurate result)
        out = lax.convert(lax.reduce(lax.convert(x, np.float32), opcode, axes), np.float16)
    else:
        out = lax.reduce(x, opcode, axes)
    return _keepdims(out, x.shape, axes, keepdims)


def _masked_reduce(a, opcode, axis, keepdims, dtype, name, initial=None, where=None):
    """A reduction with NumPy's ``where=`` (masked elements do not take part) and ``initial=``
    (folded in once; max/min need it to accept a mask or an empty reduction)."""
    a = _as_tracer(a)
    has_initial = initial is not None and initial is not np._NoValue
    masked = where is not None and where is not True and where is not np._NoValue
    if masked and opcode in ("maximum", "minimum") and not has_initial:
        raise UserValueError(f"reduction operation '{opcode}' does not have an identity, so to use a where mask "
                             "one has to specify 'initial'")
    if masked:
        fill = initial if opcode in ("maximum", "minimum") else {"add": 0, "multiply": 1, "and": True, "or": False}[opcode]
        mask = where if isinstance(where, Tracer) else lax.lift(a.trace, np.asarray(where, bool), weak=False)
        a = EXPORTS["where"](lax.broadcast_to(mask, a.shape), a, lax.convert(lax.lift(a.trace, fill, a.dtype), a.dtype))
    if has_initial and opcode in ("maximum", "minimum"):  # initial joins the reduction
        axes = normalize_axes(axis, a.ndim)
        start = lax.convert(lax.lift(a.trace, initial, a.dtype), a.dtype)
        if builtins.any(a.shape[x] == 0 for x in axes):
            shape = [1 if i in axes else d for i, d in enumerate(a.shape)] if keepdims else \
                [d for i, d in enumerate(a.shape) if i not in axes]
            return lax.broadcast_to(start, shape)
        return apply_ufunc(getattr(np, opcode), [_reduce(a, opcode, axis, keepdims, dtype, name), start])
    result = _reduce(a, opcode, axis, keepdims, dtype, name)
    if has_initial:
        result = apply_ufunc({"add": np.add, "multiply": np.multiply}[opcode], [result, initial])
        result = lax.convert(result, dtype or result.dtype)
    return result


@numpy_function(np.sum)
def sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    _reject(out=out)
    a = _as_tracer(a)
    return _masked_reduce(a, "add", axis, keepdims, dtype or _sum_dtype(a.dtype), "sum", initial, where)


@numpy_function(np.prod)
def prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    _reject(out=out)
    a = _as_tracer(a)
    return _masked_reduce(a, "multiply", axis, keepdims, dtype or _sum_dtype(a.dtype), "prod", initial, where)


@numpy_function(np.max)
def max(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    _reject(out=out)
    return _masked_reduce(a, "maximum", axis, keepdims, None, "max", initial, where)


@numpy_function(np.min)
def min(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    _reject(out=out)
    return _masked_reduce(a, "minimum", axis, keepdims, None, "min", initial, where)


EXPORTS["amax"], EXPORTS["amin"] = EXPORTS["max"], EXPORTS["min"]
FUNCTIONS[np.amax], FUNCTIONS[np.amin] = FUNCTIONS[np.max], FUNCTIONS[np.min]


def _truth(a):
    a = _as_tracer(a)
    return apply_ufunc(np.not_equal, [a, 0]) if a.dtype != np.bool_ else a


@numpy_function(np.all)
def all(a, axis=None, out=None, keepdims=False, where=None):
    _reject(out=out)
    return _masked_reduce(_truth(a), "and", axis, keepdims, None, "all", None, where)


@numpy_function(np.any)
def any(a, axis=None, out=None, keepdims=False, where=None):
    _reject(out=out)
    return _masked_reduce(_truth(a), "or", axis, keepdims, None, "any", None, where)


def _count(shape, axes) -> int:
    return math.prod(shape[a] for a in axes)


def _is_masked(where) -> bool:
    return where is not None and where is not True and where is not np._NoValue


def _mask_count(a: Tracer, where, axes, keepdims, dtype) -> tuple[Tracer, Tracer]:
    """NumPy's ``where=`` for mean/var: the mask as ``a``'s shape, and how many elements it
    keeps along ``axes`` (in ``dtype``)."""
    mask = where if isinstance(where, Tracer) else lax.lift(a.trace, np.asarray(where, bool), weak=False)
    mask = lax.broadcast_to(lax.convert(mask, np.bool_) if mask.dtype != np.bool_ else mask, a.shape)
    return mask, _reduce(lax.convert(mask, dtype), "add", axes, keepdims)


@numpy_function(np.mean)
def mean(a, axis=None, dtype=None, out=None, keepdims=False, where=None):
    _reject(out=out)
    a = _as_tracer(a)
    axes = normalize_axes(axis, a.ndim)
    acc = np.dtype(dtype) if dtype is not None else (a.dtype if a.dtype.kind in "fc" else np.dtype(np.float64))
    if _is_masked(where):  # NumPy: sum(a, where=mask) / count(mask), 0/0 a NaN
        work = np.dtype(np.float32) if acc == np.float16 else acc
        mask, count = _mask_count(a, where, axes, keepdims, work)
        total = _masked_reduce(lax.convert(a, work), "add", axis, keepdims, work, "mean", None, mask)
        result = apply_ufunc(np.true_divide, [total, count])
        return lax.convert(result, acc) if acc != work else result
    if acc == np.float16:  # NumPy: "for float16 input, float32 intermediates are used"
        total = lax.reduce(lax.convert(a, np.float32), "add", axes)
        n = _count(a.shape, axes)
        mean32 = apply_ufunc(np.true_divide, [_keepdims(total, a.shape, axes, keepdims), float(n) if n else math.nan])
        return lax.convert(mean32, np.float16)
    total = _reduce(lax.convert(a, acc), "add", axes, keepdims)
    n = _count(a.shape, axes)
    return apply_ufunc(np.true_divide, [total, float(n) if n else math.nan])


@numpy_function(np.var)
def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None, mean=None, correction=None):
    _reject(out=out, mean=mean)
    if correction is not None:
        ddof = correction
    a = _as_tracer(a)
    axes = normalize_axes(axis, a.ndim)
    if _is_masked(where):  # NumPy: the masked mean, the masked squared deviations, / max(count - ddof, 0)
        centred = apply_ufunc(np.subtract, [a, EXPORTS["mean"](a, axes, dtype, keepdims=True, where=where)])
        other = apply_ufunc(np.conjugate, [centred]) if centred.dtype.kind == "c" else centred
        squared = apply_ufunc(np.multiply, [centred, other])
        if squared.dtype.kind == "c":
            squared = lax.elementwise("real", squared)
        mask, count = _mask_count(a, where, axes, keepdims, squared.dtype)
        total = _masked_reduce(squared, "add", axis, keepdims, squared.dtype, "var", None, mask)
        n = apply_ufunc(np.maximum, [apply_ufunc(np.subtract, [count, ddof]), 0])
        return apply_ufunc(np.true_divide, [total, lax.convert(n, total.dtype)])
    centred = apply_ufunc(np.subtract, [a, EXPORTS["mean"](a, axes, dtype, keepdims=True)])
    # NumPy: x * conj(x), real part, for complex numbers (|x - mean|^2)
    other = apply_ufunc(np.conjugate, [centred]) if centred.dtype.kind == "c" else centred
    squared = apply_ufunc(np.multiply, [centred, other])
    if squared.dtype.kind == "c":
        squared = lax.elementwise("real", squared)
    total = _reduce(squared, "add", axes, keepdims)
    n = _count(a.shape, axes) - ddof
    return apply_ufunc(np.true_divide, [total, float(n) if n > 0 else math.nan])


@numpy_function(np.std)
def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None, mean=None, correction=None):
    return apply_ufunc(np.sqrt, [var(a, axis, dtype, out, ddof, keepdims, where, mean, correction)])


def _arg_reduce(a, axis, keepdims, opcode, name):
    a = _as_tracer(a)
    if axis is None:
        flat = _arg_reduce(lax.reshape(a, (a.size,)), 0, False, opcode, name)
        return lax.reshape(flat, (1,) * a.ndim) if keepdims else flat
    ax = normalize_axis(operator.index(axis), a.ndim)
    if a.shape[ax] == 0:
        raise UserValueError(f"attempt to get {name} of an empty sequence ({a.describe()})")
    extreme = lax.broadcast_to(_keepdims(lax.reduce(a, opcode, (ax,)), a.shape, (ax,), True), a.shape)
    hit = lax.compare(a, extreme, "EQ")
    if a.dtype.kind == "f":  # NumPy returns the first NaN, and max/min propagate NaN
        hit = lax.elementwise("or", hit, lax.compare(a, a, "NE"))
    index = lax.iota(a.trace, np.int64, a.shape, ax)
    sentinel = lax.full(a.trace, a.shape, a.shape[ax], np.int64)
    first = lax.reduce(lax.select(hit, index, sentinel), "minimum", (ax,))
    return _keepdims(first, a.shape, (ax,), keepdims)


@numpy_function(np.argmax)
def argmax(a, axis=None, out=None, *, keepdims=False):
    _reject(out=out)
    return _arg_reduce(a, axis, keepdims, "maximum", "argmax")


@numpy_function(np.argmin)
def argmin(a, axis=None, out=None, *, keepdims=False):
    _reject(out=out)
    return _arg_reduce(a, axis, keepdims, "minimum", "argmin")


# ---- selection -----------------------------------------------------------------------------
@numpy_function(np.where)
def where(condition, x=None, y=None):
    if x is None or y is None:
        raise UnsupportedNumpyError("np.where(condition) with one argument (indices of nonzero "
                                    "elements) has a data-dependent shape and cannot be traced; "
                                    "pass both x and y")
    cond = _as_tracer(condition)
    cond = cond if cond.dtype == np.bool_ else lax.compare(cond, lax.full_like(cond, 0), "NE")
    trace = cond.trace
    dtype = result_dtype([x, y])
    weak = builtins.all(isinstance(v, Tracer) and v.weak_type or type(v) in (int, float) for v in (x, y))
    # np.where casts its branches (unsafely): a Python int that does not fit wraps, as in NumPy
    a = lax.lift(trace, x, dtype, weak=weak, wrap_ints=True)
    b = lax.lift(trace, y, dtype, weak=weak, wrap_ints=True)
    cond, a, b = broadcast_all([cond, a, b], "np.where", [condition, x, y])
    return lax.select(cond, a, b)


@numpy_function(np.clip)
def clip(a, a_min=np._NoValue, a_max=np._NoValue, out=None, *, min=np._NoValue, max=np._NoValue, **kwargs):
    _reject(out=out)
    lo = a_min if a_min is not np._NoValue else min
    hi = a_max if a_max is not np._NoValue else max
    lo = None if lo is np._NoValue else lo
    hi = None if hi is np._NoValue else hi
    if lo is None or hi is None:  # NumPy 2 computes a one-sided clip with np.maximum/np.minimum
        result = a
        if lo is not None:
            result = apply_ufunc(np.maximum, [result, lo])
        if hi is not None:
            result = apply_ufunc(np.minimum, [result, hi])
        return result
    return _clip_both(a, lo, hi)


def _clip_both(a, lo, hi):
    """NumPy's clip ufunc, zeros' signs and NaNs included. Its loop has two behaviours: with
    bounds constant over the loop (scalars) it keeps ``x`` when ``x`` equals a bound and any NaN
    bound makes every element NaN; with bounds that vary it is MIN(MAX(x, lo), hi) where
    MAX(a, b) = a if isnan(a) or a > b else b, so a bound equal to ``x`` is what comes out."""
    trace = lax.trace_of([a, lo, hi])
    with trace.op_scope("clip"):
        dtype = result_dtype([a, lo, hi])
        lax.check_supported_dtype(dtype, "the result of np.clip")
        weak = builtins.all(isinstance(v, Tracer) and v.weak_type or type(v) in (int, float) for v in (a, lo, hi))
        x, l, h = broadcast_all([lax.lift(trace, v, dtype, weak=weak, what="operand of np.clip")
                                 for v in (a, lo, hi)], "np.clip", [a, lo, hi])
        if dtype.kind != "f":  # no signed zeros or NaNs: the order of comparisons is invisible
            return lax.elementwise("minimum", lax.elementwise("maximum", x, l, weak=weak), h, weak=weak)
        if builtins.all(np.size(v) == 1 for v in (lo, hi)):
            t = lax.select(lax.compare(x, l, "LT"), l, x)
            clipped = lax.select(lax.compare(t, h, "GT"), h, t)
            nan_bound = lax.elementwise("or", lax.compare(l, l, "NE"), lax.compare(h, h, "NE"))
            return lax.select(nan_bound, lax.elementwise("add", l, h, weak=weak), clipped)
        t = lax.select(lax.elementwise("or", lax.compare(x, x, "NE"), lax.compare(x, l, "GT")), x, l)
        return lax.select(lax.elementwise("or", lax.compare(t, t, "NE"), lax.compare(t, h, "LT")), t, h)


def astype(x, dtype, copy=True):
    x = _as_tracer(x)
    result = lax.convert(x, lax.check_supported_dtype(dtype, "astype target"))
    return result if not copy and result is x else fresh_results(result, [x])


EXPORTS["astype"] = astype


def result_dtype(values) -> np.dtype:
    """NumPy's promotion of ``values`` (weak Python scalars and weak tracers included)."""
    def arg(v):
        if isinstance(v, Tracer):
            return {"f": 0.0, "i": 0, "u": 0, "b": False}[v.dtype.kind] if v.weak_type else v.dtype
        if isinstance(v, (bool, int, float)) and not isinstance(v, np.generic):
            return v
        return np.asarray(v).dtype
    return np.result_type(*[arg(v) for v in values])



def ndim(a) -> int:
    return a.ndim if isinstance(a, Tracer) else np.ndim(a)


def shape(a) -> tuple[int, ...]:
    return a.shape if isinstance(a, Tracer) else np.shape(a)


def size(a) -> int:
    return a.size if isinstance(a, Tracer) else np.size(a)


FUNCTIONS[np.ndim], FUNCTIONS[np.shape], FUNCTIONS[np.size] = ndim, shape, size
EXPORTS.update(ndim=ndim, shape=shape, size=size)


@numpy_function(np.copyto)
def copyto(dst, src, casting="same_kind", where=True):
    if where is not True:
        raise UnsupportedNumpyError("np.copyto(..., where=) is not supported on traced arrays; "
                                    "use dst[...] = np.where(where, src, dst)")
    if not isinstance(dst, Tracer):
        raise UnsupportedNumpyError(
            "np.copyto of a traced value into a NumPy array: the array is not part of the traced "
            "program. Make it with toolkit.numpy (tnp.zeros, tnp.empty ...) or return the value")
    trace = dst.trace
    value = src if isinstance(src, Tracer) else lax.lift(trace, src, what="np.copyto source")
    if value.dtype != dst.dtype and not np.can_cast(value.dtype, dst.dtype, casting):
        raise UnsupportedNumpyError(f"np.copyto: Cannot cast array data from dtype('{value.dtype}') to "
                                    f"dtype('{dst.dtype}') according to the rule '{casting}'")
    store_result(dst, lax.convert(value, dst.dtype, value.weak_type) if casting != "same_kind" else value,
                 "np.copyto")


# Registered through @numpy_function when imported (kept apart to keep modules small).
from . import shape_functions as _shape_functions  # noqa: E402,F401  (before creation: it stacks)
from . import creation as _creation, linalg as _linalg  # noqa: E402,F401
from . import indexing_functions as _indexing_functions  # noqa: E402,F401
from . import joining as _joining, matrices as _matrices, scans as _scans  # noqa: E402,F401
from . import histograms as _histograms  # noqa: E402,F401
from . import sorting as _sorting, statistics as _statistics  # noqa: E402,F401
from . import more_functions as _more_functions  # noqa: E402,F401
from . import decompositions as _decompositions  # noqa: E402,F401
from . import fft as _fft  # noqa: E402,F401
