"""Argument handling shared by the NumPy functions on traced arrays: array-likes as tracers,
NumPy's axis normalisation, refusing keywords toolkit does not trace, promoting a pair."""
from __future__ import annotations

import builtins
import operator

import numpy as np

from . import lax
from .errors import UnsupportedNumpyError, UserAxisError, UserValueError
from .promotion import array_dtype, check_int_fits
from .tracer import Tracer, strongly_typed


def as_tracer(x, what="operand") -> Tracer:
    if isinstance(x, Tracer):
        return x
    return lax.lift(lax.trace_of([x]), x, what=what)


def normalize_axis(axis: int, ndim: int, what: str = "axis") -> int:
    """NumPy's normalize_axis_index: -ndim <= axis < ndim, as a non-negative axis. (Kept
    lenient for a 0-d array, whose axis 0 some callers read as its one element.)"""
    if not -ndim <= axis < builtins.max(ndim, 1) or (ndim == 0 and axis not in (0, -1)):
        raise UserAxisError(f"{what} {axis} is out of bounds for array of dimension {ndim}")
    return axis % ndim if ndim else 0


def strict_axis(axis: int, ndim: int) -> int:
    """normalize_axis with no exception for a 0-d array (np.roll, np.flip, np.mean: AxisError)."""
    if ndim == 0:
        raise UserAxisError(f"axis {axis} is out of bounds for array of dimension 0")
    return normalize_axis(axis, ndim)


def _zero_d_axes(axis) -> None:
    """A 0-d array's axis argument, as NumPy reads it: 0 or -1 (each), else AxisError."""
    for a in axis if isinstance(axis, (tuple, list)) else (axis,):
        if operator.index(a) not in (0, -1):
            raise UserAxisError(f"axis {a} is out of bounds for array of dimension 0")


def reduction_axes(axis, ndim: int) -> tuple[int, ...]:
    """normalize_axes for NumPy's ufunc reductions (sum, max, any, count_nonzero ...), which
    take axis 0 or -1 of a 0-d array, and reduce nothing there."""
    if ndim == 0 and axis is not None and not isinstance(axis, Tracer):
        _zero_d_axes(axis)
        return ()
    return normalize_axes(axis, ndim)


def one_element_if_0d(x: Tracer, axis) -> Tracer:
    """NumPy's PyArray_CheckAxis: a 0-d array given axis 0 or -1 is read as a 1-d array of its
    one element (np.argsort gives [0], np.cumsum(axis=0) [x], np.repeat(axis=0) [x, x])."""
    if x.ndim == 0 and axis is not None:
        _zero_d_axes(axis)
        return lax.reshape(x, (1,))
    return x


def normalize_axes(axis, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, Tracer):
        raise UnsupportedNumpyError("axis must be a Python int or tuple, not a traced value")
    axes = tuple(
        strict_axis(operator.index(a), ndim)  # (a 0-d array has no axis here)
        for a in (axis if isinstance(axis, (tuple, list)) else (axis,))
    )
    if len(set(axes)) != len(axes):
        raise UserValueError(f"duplicate value in 'axis': {axis}")
    return axes



def reject(**unsupported):
    for key, value in unsupported.items():
        if value is not None and value is not np._NoValue:
            raise UnsupportedNumpyError(f"the '{key}=' argument is not supported on traced arrays")



def no_out_or_where(out=None, where=None, name=""):
    if out is not None or (where is not None and where is not True and where is not np._NoValue):
        raise UnsupportedNumpyError(
            f"np.{name}: out= and where= are not supported on traced arrays"
        )


def promote_pair(a, b, what):
    """``a`` and ``b`` as tracers of their promoted type (matmul, dot, einsum ...). These
    functions make arrays of their operands first: a Python number is an int64, float64 or
    complex128 array there (``np.dot(x_int8, 2)`` is int64), not a weak scalar."""
    trace = lax.trace_of([a, b])
    dtype = lax.check_supported_dtype(np.promote_types(array_dtype(a), array_dtype(b)), what)
    return (strongly_typed(lax.lift(trace, a, dtype, weak=False)),
            strongly_typed(lax.lift(trace, b, dtype, weak=False)))


def check_python_ints_fit(values, dtype, what: str) -> None:
    """``values`` (a sequence as NumPy's ``np.asarray(values, dtype)`` takes it) made ``dtype``:
    NumPy 2 raises OverflowError for a Python int, literal or a traced argument, that the
    integer type cannot hold (``np.put(x_int8, 0, [300])``), where a cast would wrap it."""
    dtype = np.dtype(dtype)
    if dtype.kind not in "iu":
        return
    stack = [values]
    while stack:
        v = stack.pop()
        if isinstance(v, (list, tuple)):
            stack.extend(v)
        elif type(v) is int:
            check_int_fits(v, dtype, f" ({what})")
        elif (isinstance(v, Tracer) and v.weak_type and v.dtype.kind in "iu"
              and not np.can_cast(v.dtype, dtype)):
            lax.check_weak_int_fits(v, dtype)
