"""Scans on traced arrays: cumsum/cumprod (and their nan and cumulative_* forms) and
ufunc.accumulate.

A scan is XLA's ``reduce-window`` over a window that covers the axis, padded in front, from
the reducer's exact identity (``lax.prefix_scan``): a kernel of its own folds each line once,
in NumPy's sequential order (``np.add.accumulate``'s, ``np.maximum.accumulate``'s ...), so
float sums and products, and the signs of zeros a maximum keeps, are NumPy's bit for bit. The
derivatives of products, maxima and minima (ad_windows.py) differentiate the log-step form
(``log_step_scan``, Hillis-Steele: ceil(log2 n) rounds of ``op(x, x shifted)``), the same
function up to rounding, as JAX differentiates its associative scan."""
from __future__ import annotations

import operator

import numpy as np

from ..ir.ops import GroupOp, identity, initial_value
from . import lax
from .arguments import as_tracer, normalize_axis, one_element_if_0d
from .errors import UnsupportedNumpyError, UserValueError
from .reductions import BOOLEAN_ARITHMETIC, sum_dtype
from .registry import numpy_function
from .tracer import Tracer


def _t(x) -> Tracer:
    return as_tracer(x)


def associative_scan(x: Tracer, axis: int, opcode: str) -> Tracer:
    """Inclusive scan of ``x`` along ``axis`` with the associative elementwise ``opcode``, in
    NumPy's order (see the module's note)."""
    return lax.prefix_scan(x, axis, opcode)


def log_step_scan(x: Tracer, axis: int, opcode: str) -> Tracer:
    """The same scan as ceil(log2 n) rounds of elementwise ops (what its derivative
    differentiates)."""
    n = x.shape[axis]
    shift = 1
    while shift < n:
        head = [(0, d, 1) for d in x.shape]
        head[axis] = (0, n - shift, 1)
        moved = lax.slice_(x, head)
        if opcode in GroupOp.SELECTING_REDUCERS:  # the element itself is neutral for its own slot
            keep = [(0, d, 1) for d in x.shape]
            keep[axis] = (0, shift, 1)
            first = lax.slice_(x, keep)
            pad = lax.concatenate([first, moved], axis)
        else:
            padding = [(0, 0, 0)] * x.ndim
            padding[axis] = (shift, 0, 0)
            # the exact identity: a -0.0 padded in keeps a leading -0.0 of a cumsum, as NumPy's
            pad = lax.pad(moved, lax.full(x.trace, (), identity(opcode, x.dtype), x.dtype), padding)
        x = lax.elementwise(opcode, x, pad, weak=x.weak_type)
        shift *= 2
    return x


def _scan(a, axis, dtype, opcode, name):
    a = one_element_if_0d(_t(a), axis)
    if axis is None:
        a = lax.reshape(a, (a.size,))
        axis = 0
    axis = normalize_axis(operator.index(axis), a.ndim)
    widened = opcode in GroupOp.ARITHMETIC_REDUCERS  # NumPy's sums and products of small ints
    out = np.dtype(dtype) if dtype is not None else (sum_dtype(a.dtype) if widened else a.dtype)
    x = lax.convert(a, lax.check_supported_dtype(out, f"dtype= of {name}"))
    if x.dtype == np.bool_ and opcode in GroupOp.ARITHMETIC_REDUCERS:  # (dtype=bool)
        opcode = BOOLEAN_ARITHMETIC[opcode]
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
                raise UserValueError(
                    f"np.{name}: axis must be given for arrays of more than one dimension"
                )
            axis = 0
        axis = normalize_axis(axis, x.ndim)
        result = _scan(x, axis, dtype, opcode, f"np.{name}")
        if include_initial:
            padding = [(0, 0, 0)] * result.ndim
            padding[axis] = (1, 0, 0)
            # NumPy's include_initial starts from the ufunc's identity (+0.0 for a sum)
            start = initial_value(opcode, result.dtype)
            result = lax.pad(result, lax.full(result.trace, (), start, result.dtype), padding)
        return result
    return fn


numpy_function(np.cumulative_sum, name="cumulative_sum")(_cumulative("add", "cumulative_sum"))
numpy_function(np.cumulative_prod, name="cumulative_prod")(
    _cumulative("multiply", "cumulative_prod")
)

ACCUMULATE = {np.add: "add", np.multiply: "multiply", np.maximum: "maximum", np.minimum: "minimum",
              np.logical_and: "and", np.logical_or: "or"}


def ufunc_accumulate(ufunc, array, axis=0, dtype=None, out=None):
    opcode = ACCUMULATE.get(ufunc)
    if opcode is None:
        raise UnsupportedNumpyError(
            f"np.{ufunc.__name__}.accumulate is not supported on traced arrays "
            f"(supported: {', '.join(f'np.{u.__name__}' for u in ACCUMULATE)})"
        )
    _no_out(out, f"{ufunc.__name__}.accumulate")
    a = _t(array)
    if a.dtype.kind == "c" and opcode != "add":
        # (NumPy copies the first element and multiplies in its scalar loop, which rounds, and
        # meets infinities, otherwise than toolkit's complex multiply; its complex maximum is
        # lexicographic)
        raise UnsupportedNumpyError(
            f"np.{ufunc.__name__}.accumulate of complex numbers ({a.describe()}) is not traced "
            "by toolkit")
    if opcode in GroupOp.BITWISE_REDUCERS:  # logical_and, logical_or: on truth values
        a = (
            a
            if a.dtype == np.bool_
            else lax.compare(a, lax.full(a.trace, a.shape, 0, a.dtype), "NE")
        )
        return associative_scan(a, normalize_axis(axis, a.ndim), opcode)
    return _scan(a, axis, dtype, opcode, f"np.{ufunc.__name__}.accumulate")
