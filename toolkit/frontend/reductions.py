"""NumPy's reductions on traced arrays: sum, prod, max/min (amax/amin), all/any, mean, var,
std, argmax/argmin, with NumPy's ``where=``, ``initial=``, ``dtype=`` and ``keepdims=``."""
from __future__ import annotations

import builtins
import math
import operator

import numpy as np

from ..ir.ops import GroupOp, initial_value, reducer_ufunc
from . import lax
from .arguments import (as_tracer, normalize_axes, normalize_axis, one_element_if_0d,
                        reduction_axes, reject)
from .errors import DTypeMismatchError, UserValueError
from .registry import EXPORTS, FUNCTIONS, numpy_function
from .selection import where as _where
from .tracer import Tracer
from .ufuncs import apply_ufunc


def _keepdims(result: Tracer, x_shape, axes, keepdims: bool) -> Tracer:
    if not keepdims:
        return result
    return lax.reshape(result, [1 if i in axes else d for i, d in enumerate(x_shape)])



def sum_dtype(dtype: np.dtype) -> np.dtype:
    return np.add.reduce(np.zeros(1, dtype)).dtype if dtype.kind in "biu" else dtype


# NumPy's add and multiply of booleans, in a bool dtype= (np.sum(m, dtype=bool)): or and and
BOOLEAN_ARITHMETIC = {"add": "or", "multiply": "and"}


def _reduce(x, opcode, axis, keepdims, dtype=None, name="reduce"):
    x = as_tracer(x)
    axes = reduction_axes(axis, x.ndim)
    if dtype is not None:
        x = lax.convert(x, lax.check_supported_dtype(dtype, f"dtype= of {name}"))
    if opcode in GroupOp.SELECTING_REDUCERS and builtins.any(x.shape[a] == 0 for a in axes):
        raise UserValueError(
            f"zero-size array to reduction operation {opcode} which has no identity "
            f"({name} of {x.describe()})"
        )
    if x.dtype == np.bool_ and opcode in GroupOp.ARITHMETIC_REDUCERS:
        if dtype is not None and np.dtype(dtype) == np.bool_:
            opcode = BOOLEAN_ARITHMETIC[opcode]
        else:  # (counting)
            x = lax.convert(x, np.int64)
    # (a float16 sum is a float16 reduce, as NumPy's: the simplifier gives it NumPy's float32
    # accumulation along lines and float16 rounding across them)
    out = lax.reduce(x, opcode, axes)
    return _keepdims(out, x.shape, axes, keepdims)


def _masked_reduce(a, opcode, axis, keepdims, dtype, name, initial=None, where=None):
    """A reduction with NumPy's ``where=`` (masked elements do not take part) and ``initial=``
    (folded in once; max/min need it to accept a mask or an empty reduction)."""
    a = as_tracer(a)
    has_initial = initial is not None and initial is not np._NoValue
    masked = where is not None and where is not True and where is not np._NoValue
    if masked and opcode in GroupOp.SELECTING_REDUCERS and not has_initial:
        raise UserValueError(
            f"reduction operation '{opcode}' does not have an identity, so to use a where mask "
            "one has to specify 'initial'"
        )
    if masked:
        fill = initial if opcode in GroupOp.SELECTING_REDUCERS else initial_value(opcode, a.dtype)
        mask = (
            where
            if isinstance(where, Tracer)
            else lax.lift(a.trace, np.asarray(where, bool), weak=False)
        )
        filler = lax.convert(lax.lift(a.trace, fill, a.dtype), a.dtype)
        a = _where(lax.broadcast_to(mask, a.shape), a, filler)
    if has_initial and opcode in GroupOp.SELECTING_REDUCERS:  # initial joins the reduction
        axes = reduction_axes(axis, a.ndim)
        start = lax.convert(lax.lift(a.trace, initial, a.dtype), a.dtype)
        if builtins.any(a.shape[x] == 0 for x in axes):
            shape = [1 if i in axes else d for i, d in enumerate(a.shape)] if keepdims else \
                [d for i, d in enumerate(a.shape) if i not in axes]
            return lax.broadcast_to(start, shape)
        return apply_ufunc(
            getattr(np, opcode), [_reduce(a, opcode, axis, keepdims, dtype, name), start]
        )
    result = _reduce(a, opcode, axis, keepdims, dtype, name)
    if has_initial:
        result = apply_ufunc(reducer_ufunc(opcode), [result, initial])
        result = lax.convert(result, dtype or result.dtype)
    return result


@numpy_function(np.sum)
def sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    reject(out=out)
    a = as_tracer(a)
    dtype = dtype or sum_dtype(a.dtype)
    return _masked_reduce(a, "add", axis, keepdims, dtype, "sum", initial, where)


@numpy_function(np.prod)
def prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    reject(out=out)
    a = as_tracer(a)
    dtype = dtype or sum_dtype(a.dtype)
    return _masked_reduce(a, "multiply", axis, keepdims, dtype, "prod", initial, where)


@numpy_function(np.max)
def max(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    reject(out=out)
    return _masked_reduce(a, "maximum", axis, keepdims, None, "max", initial, where)


@numpy_function(np.min)
def min(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    reject(out=out)
    return _masked_reduce(a, "minimum", axis, keepdims, None, "min", initial, where)


EXPORTS["amax"], EXPORTS["amin"] = EXPORTS["max"], EXPORTS["min"]
FUNCTIONS[np.amax], FUNCTIONS[np.amin] = FUNCTIONS[np.max], FUNCTIONS[np.min]


def _truth(a):
    a = as_tracer(a)
    return apply_ufunc(np.not_equal, [a, 0]) if a.dtype != np.bool_ else a


@numpy_function(np.all)
def all(a, axis=None, out=None, keepdims=False, where=None):
    reject(out=out)
    return _masked_reduce(_truth(a), "and", axis, keepdims, None, "all", None, where)


@numpy_function(np.any)
def any(a, axis=None, out=None, keepdims=False, where=None):
    reject(out=out)
    return _masked_reduce(_truth(a), "or", axis, keepdims, None, "any", None, where)


def _count(shape, axes) -> int:
    return math.prod(shape[a] for a in axes)


def _is_masked(where) -> bool:
    return where is not None and where is not True and where is not np._NoValue


def _mask_count(a: Tracer, where, axes, keepdims, dtype) -> tuple[Tracer, Tracer]:
    """NumPy's ``where=`` for mean/var: the mask as ``a``'s shape, and how many elements it
    keeps along ``axes`` (in ``dtype``)."""
    mask = (
        where
        if isinstance(where, Tracer)
        else lax.lift(a.trace, np.asarray(where, bool), weak=False)
    )
    mask = lax.broadcast_to(
        lax.convert(mask, np.bool_) if mask.dtype != np.bool_ else mask, a.shape
    )
    return mask, _reduce(lax.convert(mask, dtype), "add", axes, keepdims)


@numpy_function(np.mean)
def mean(a, axis=None, dtype=None, out=None, keepdims=False, where=None):
    reject(out=out)
    a = as_tracer(a)
    axes = normalize_axes(axis, a.ndim)
    acc = (
        np.dtype(dtype)
        if dtype is not None
        else (a.dtype if a.dtype.kind in "fc" else np.dtype(np.float64))
    )
    if _is_masked(where):  # NumPy: sum(a, where=mask) / count(mask), 0/0 a NaN
        work = np.dtype(np.float32) if acc == np.float16 else acc
        mask, count = _mask_count(a, where, axes, keepdims, work)
        total = _masked_reduce(
            lax.convert(a, work), "add", axis, keepdims, work, "mean", None, mask
        )
        result = apply_ufunc(np.true_divide, [total, count])
        return lax.convert(result, acc) if acc != work else result
    if acc == np.float16:  # NumPy: "for float16 input, float32 intermediates are used"
        total = lax.reduce(lax.convert(a, np.float32), "add", axes)
        n = _count(a.shape, axes)
        mean32 = apply_ufunc(
            np.true_divide, [_keepdims(total, a.shape, axes, keepdims), float(n) if n else math.nan]
        )
        return lax.convert(mean32, np.float16)
    total = _reduce(lax.convert(a, acc), "add", axes, keepdims, acc)
    n = _count(a.shape, axes)
    result = apply_ufunc(np.true_divide, [total, float(n) if n else math.nan])
    # (an integer or bool dtype=: NumPy divides into the sum's own type, truncating)
    return lax.convert(result, acc) if acc.kind in "iub" else result


def _var_mean(a: Tracer, axes, dtype) -> Tracer:
    """The mean NumPy's var subtracts: the sum in the accumulation type, divided in that type.
    For float16 that is a float16 sum divided in float16 (two roundings), not np.mean's
    float32 intermediate: the two means differ, and with them the variance (np.var of float16
    [68.3, 68, 68] is 0.02344 by the first and 0.02214 by the second)."""
    acc = np.dtype(dtype) if dtype is not None else (
        a.dtype if a.dtype.kind in "fc" else np.dtype(np.float64))
    total = _reduce(lax.convert(a, acc), "add", axes, True)
    n = _count(a.shape, axes)
    return apply_ufunc(np.true_divide, [total, float(n) if n else math.nan])


@numpy_function(np.var)
def var(
    a,
    axis=None,
    dtype=None,
    out=None,
    ddof=0,
    keepdims=False,
    where=None,
    mean=None,
    correction=None,
):
    reject(out=out, mean=mean)
    if correction is not None:
        ddof = correction
    a = as_tracer(a)
    axes = normalize_axes(axis, a.ndim)
    if dtype is not None and np.dtype(dtype).kind in "iu" and not _is_masked(where):
        return _integer_var(a, axes, np.dtype(dtype), ddof, keepdims)
    # NumPy: the masked mean, the masked squared deviations, / max(count - ddof, 0)
    if _is_masked(where):
        centred = apply_ufunc(
            np.subtract, [a, EXPORTS["mean"](a, axes, dtype, keepdims=True, where=where)]
        )
        other = apply_ufunc(np.conjugate, [centred]) if centred.dtype.kind == "c" else centred
        squared = apply_ufunc(np.multiply, [centred, other])
        if squared.dtype.kind == "c":
            squared = lax.elementwise("real", squared)
        mask, count = _mask_count(a, where, axes, keepdims, squared.dtype)
        total = _masked_reduce(squared, "add", axis, keepdims, squared.dtype, "var", None, mask)
        n = apply_ufunc(np.maximum, [apply_ufunc(np.subtract, [count, ddof]), 0])
        return apply_ufunc(np.true_divide, [total, lax.convert(n, total.dtype)])
    centred = apply_ufunc(np.subtract, [a, _var_mean(a, axes, dtype)])
    # NumPy: x * conj(x), real part, for complex numbers (|x - mean|^2)
    other = apply_ufunc(np.conjugate, [centred]) if centred.dtype.kind == "c" else centred
    squared = apply_ufunc(np.multiply, [centred, other])
    if squared.dtype.kind == "c":
        squared = lax.elementwise("real", squared)
    total = _reduce(squared, "add", axes, keepdims, dtype)  # (NumPy's sum in dtype=)
    n = _count(a.shape, axes) - ddof
    # NumPy divides by max(n - ddof, 0): with ddof >= n, inf (a zero sum: NaN)
    return apply_ufunc(np.true_divide, [total, float(builtins.max(n, 0))])


def _integer_var(a: Tracer, axes, dtype: np.dtype, ddof, keepdims) -> Tracer:
    """np.var with an integer ``dtype=``, as NumPy's _var computes it: the mean divided into
    the integer type (truncated: NumPy's true_divide(out=, casting='unsafe')), integer
    deviations, their integer sum divided and truncated again (np.var of int8 [1, 5, -3, 8, 2,
    2, 2, 9] with dtype=int64 is 13, not 13.125)."""
    n = _count(a.shape, axes)
    total = _reduce(lax.convert(a, dtype), "add", axes, True)
    mean = lax.convert(apply_ufunc(np.true_divide, [total, float(n)]), dtype)
    centred = apply_ufunc(np.subtract, [lax.convert(a, dtype), mean])
    squares = _reduce(apply_ufunc(np.multiply, [centred, centred]), "add", axes, keepdims)
    return lax.convert(apply_ufunc(np.true_divide, [squares, float(builtins.max(n - ddof, 0))]),
                       dtype)


@numpy_function(np.std)
def std(
    a,
    axis=None,
    dtype=None,
    out=None,
    ddof=0,
    keepdims=False,
    where=None,
    mean=None,
    correction=None,
):
    variance = var(a, axis, dtype, out, ddof, keepdims, where, mean, correction)
    root = apply_ufunc(np.sqrt, [variance])
    if dtype is None or np.dtype(dtype).kind not in "iu":
        return root
    # an integer dtype=: NumPy's sqrt(ret, out=ret) refuses a float result into an integer
    # array (same_kind); a scalar result it truncates
    if variance.ndim or keepdims:
        raise DTypeMismatchError(f"Cannot cast ufunc 'sqrt' output from dtype('{root.dtype}') "
                                 f"to dtype('{np.dtype(dtype)}') with casting rule 'same_kind'")
    return lax.convert(root, dtype)


def _arg_reduce(a, axis, keepdims, opcode, name):
    a = one_element_if_0d(as_tracer(a), axis)
    if axis is None:
        flat = _arg_reduce(lax.reshape(a, (a.size,)), 0, False, opcode, name)
        return lax.reshape(flat, (1,) * a.ndim) if keepdims else flat
    ax = normalize_axis(operator.index(axis), a.ndim)
    if a.shape[ax] == 0:
        raise UserValueError(f"attempt to get {name} of an empty sequence ({a.describe()})")
    extreme = lax.broadcast_to(
        _keepdims(lax.reduce(a, opcode, (ax,)), a.shape, (ax,), True), a.shape
    )
    hit = lax.compare(a, extreme, "EQ")
    if a.dtype.kind == "f":  # NumPy returns the first NaN, and max/min propagate NaN
        hit = lax.elementwise("or", hit, lax.compare(a, a, "NE"))
    index = lax.iota(a.trace, np.int64, a.shape, ax)
    sentinel = lax.full(a.trace, a.shape, a.shape[ax], np.int64)
    first = lax.reduce(lax.select(hit, index, sentinel), "minimum", (ax,))
    return _keepdims(first, a.shape, (ax,), keepdims)


@numpy_function(np.argmax)
def argmax(a, axis=None, out=None, *, keepdims=False):
    reject(out=out)
    return _arg_reduce(a, axis, keepdims, "maximum", "argmax")


@numpy_function(np.argmin)
def argmin(a, axis=None, out=None, *, keepdims=False):
    reject(out=out)
    return _arg_reduce(a, axis, keepdims, "minimum", "argmin")

