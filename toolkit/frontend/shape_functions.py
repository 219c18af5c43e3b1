"""NumPy's shape manipulation on traced arrays: reshape, transpose and friends, joining,
padding, flipping. Registered for ``__array_function__`` and exported by ``toolkit.numpy``."""
from __future__ import annotations

import builtins
import math
import operator

import numpy as np

from . import lax
from .errors import (LazyText, ShapeMismatchError, UnsupportedNumpyError, UserTypeError,
                     UserValueError)
from .arguments import as_tracer, normalize_axes, normalize_axis, reduction_axes, reject
from .promotion import array_dtype
from .registry import EXPORTS, numpy_function
from .tracer import Tracer, numpy_scalar, strongly_typed


def _resolve_shape(shape, size: int, what) -> tuple[int, ...]:
    shape = tuple(
        operator.index(d) for d in (shape if isinstance(shape, (tuple, list)) else (shape,))
    )
    unknown = [i for i, d in enumerate(shape) if d == -1]
    known = math.prod(d for d in shape if d != -1)
    if len(unknown) > 1 or builtins.any(d < -1 for d in shape):
        raise UserValueError(f"invalid shape {shape} for reshape of {what}")
    if unknown:
        if known == 0 or size % known:
            raise ShapeMismatchError(f"cannot reshape {what} into shape {shape}")
        shape = tuple(size // known if d == -1 else d for d in shape)
    if math.prod(shape) != size:
        raise ShapeMismatchError(f"cannot reshape {what} ({size} elements) into shape {shape}")
    return shape


@numpy_function(np.reshape)
def reshape(a, shape=None, order="C", *, newshape=None, copy=None):
    if order != "C":
        raise UnsupportedNumpyError("reshape supports only order='C'")
    a = as_tracer(a)
    return lax.reshape(
        a, _resolve_shape(shape if shape is not None else newshape, a.size, LazyText(a.describe))
    )


@numpy_function(np.ravel)
def ravel(a, order="C"):
    return reshape(a, (-1,), order)


@numpy_function(np.transpose)
def transpose(a, axes=None):
    a = as_tracer(a)
    perm = (
        tuple(range(a.ndim))[::-1]
        if axes is None
        else tuple(normalize_axis(operator.index(p), a.ndim) for p in axes)
    )
    if sorted(perm) != list(range(a.ndim)):
        raise UserValueError(f"axes {axes} don't match array of dimension {a.ndim}")
    return lax.transpose(a, perm)


@numpy_function(np.swapaxes)
def swapaxes(a, axis1, axis2):
    a = as_tracer(a)
    perm = list(range(a.ndim))
    i, j = normalize_axis(axis1, a.ndim), normalize_axis(axis2, a.ndim)
    perm[i], perm[j] = perm[j], perm[i]
    return lax.transpose(a, perm)


@numpy_function(np.moveaxis)
def moveaxis(a, source, destination):
    a = as_tracer(a)
    src = normalize_axes(source, a.ndim)
    dst = normalize_axes(destination, a.ndim)
    order = [i for i in range(a.ndim) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return lax.transpose(a, order)


@numpy_function(np.expand_dims)
def expand_dims(a, axis):
    a = as_tracer(a)
    axes = normalize_axes(axis, a.ndim + len(axis if isinstance(axis, (tuple, list)) else (axis,)))
    shape = list(a.shape)
    for ax in sorted(axes):
        shape.insert(ax, 1)
    return lax.reshape(a, shape)


@numpy_function(np.squeeze)
def squeeze(a, axis=None):
    a = as_tracer(a)
    axes = (
        tuple(i for i, d in enumerate(a.shape) if d == 1)
        if axis is None
        else reduction_axes(axis, a.ndim)  # (a 0-d array's axis 0 or -1: nothing to squeeze)
    )
    for ax in axes:
        if a.shape[ax] != 1:
            raise UserValueError(
                f"cannot select an axis to squeeze out which has size not equal to one "
                f"({a.describe()}, axis {ax})"
            )
    return lax.reshape(a, [d for i, d in enumerate(a.shape) if i not in axes])


@numpy_function(np.broadcast_to)
def broadcast_to(array, shape, subok=False):
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    return lax.broadcast_to(as_tracer(array), shape)


def _common(arrays, what, dtype=None, casting=None):
    """The arrays in their common type, or ``dtype`` where given, each cast as NumPy's
    ``casting`` rule allows ("same_kind" unless given) or NumPy's TypeError."""
    arrays = list(arrays)
    if not arrays:
        raise UserValueError(f"{what} needs at least one array")
    trace = lax.trace_of(arrays)
    if dtype is None:  # (NumPy makes arrays of them first: a Python number is a strong one)
        dtype = lax.check_supported_dtype(np.result_type(*map(array_dtype, arrays)), what)
        if casting is not None:  # (NumPy checks the common type's casts too)
            _check_casts(arrays, dtype, casting)
    else:
        dtype = lax.check_supported_dtype(dtype, f"dtype= of {what}")
        _check_casts(arrays, dtype, "same_kind" if casting is None else casting)
    return [strongly_typed(lax.lift(trace, v, dtype, weak=False, wrap_ints=True))
            for v in arrays]


def _check_casts(arrays, dtype, casting: str) -> None:
    for v in arrays:
        own = array_dtype(v)
        if not np.can_cast(own, dtype, casting):
            raise UserTypeError(f"Cannot cast array data from {own!r} to {np.dtype(dtype)!r} "
                                f"according to the rule {casting!r}")


@numpy_function(np.concatenate)
def concatenate(arrays, axis=0, out=None, dtype=None, casting=None):
    reject(out=out)
    ts = _common(arrays, "concatenate", dtype, casting)
    if axis is None:
        ts = [lax.reshape(t, (t.size,)) for t in ts]
        axis = 0
    if builtins.any(t.ndim == 0 for t in ts):
        raise UserValueError("zero-dimensional arrays cannot be concatenated")
    ax = normalize_axis(axis, ts[0].ndim)
    for t in ts[1:]:
        if t.ndim != ts[0].ndim or builtins.any(
            t.shape[i] != ts[0].shape[i] for i in range(t.ndim) if i != ax
        ):
            raise ShapeMismatchError(f"concatenate: {ts[0].describe()} and {t.describe()} differ "
                                     f"outside axis {ax}")
    return lax.concatenate(ts, ax)


@numpy_function(np.stack)
def stack(arrays, axis=0, out=None, dtype=None, casting=None):
    ts = _common(arrays, "stack", dtype, casting)
    for t in ts[1:]:
        if t.shape != ts[0].shape:
            raise ShapeMismatchError(f"stack: all input arrays must have the same shape, got "
                                     f"{ts[0].describe()} and {t.describe()}")
    ax = normalize_axis(axis, ts[0].ndim + 1)
    return concatenate([expand_dims(t, ax) for t in ts], ax, out)


@numpy_function(np.pad)
def pad(array, pad_width, mode="constant", constant_values=0, **kwargs):
    """NumPy's pad. 'constant' (one value) is HLO ``pad``; 'edge', 'wrap', 'reflect' and
    'symmetric' copy elements of the array, so each padded axis is a gather of it at the
    source index of every position, which NumPy's own pad of the positions ``arange(n)``
    gives (its semantics by construction, for pads wider than the array too)."""
    a = as_tracer(array)
    if np.asarray(pad_width).dtype.kind != "i":  # (NumPy's check: not unsigned, not bool)
        raise TypeError("`pad_width` must be of integral type.")
    widths = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (a.ndim, 2))
    if (widths < 0).any():
        raise UserValueError("index can't contain negative values")
    if mode == "empty":  # (NumPy leaves the padding undefined: zeros are one choice)
        mode, constant_values = "constant", 0
    if mode == "constant":
        if np.ndim(constant_values) and np.unique(np.asarray(constant_values)).size > 1:
            raise UnsupportedNumpyError(
                "np.pad(mode='constant') with different constant_values per side on a traced "
                "array (one value is supported)")
        # (NumPy stores np.asarray(constant_values)'s first element, a NumPy scalar, into the
        # padded array: through a Python int for a signed integer array (300 into int8 is an
        # OverflowError), a wrapping cast for an unsigned one (-1 pads uint8 with 255))
        if isinstance(constant_values, Tracer):
            from .scalar_stores import check_scalar_fits

            scalar = numpy_scalar(strongly_typed(lax.reshape(constant_values, ())))
            check_scalar_fits(scalar, a.dtype)
            value = lax.convert(scalar, a.dtype, wrap=True)
        else:
            slot = np.empty(1, a.dtype)
            with np.errstate(all="ignore"):
                slot[0] = np.asarray(constant_values).ravel()[0]  # (NumPy's own store)
            value = lax.lift(a.trace, slot[0], a.dtype, weak=False)
        return lax.pad(a, value, [(int(lo), int(hi), 0) for lo, hi in widths])
    if mode not in _COPYING_PAD_MODES or kwargs.get("reflect_type", "even") != "even":
        raise UnsupportedNumpyError(
            f"np.pad mode={mode!r}{' with reflect_type=odd' if mode in _COPYING_PAD_MODES else ''}"
            f" is not supported on traced arrays (supported: 'constant', 'empty', "
            f"{', '.join(repr(m) for m in _COPYING_PAD_MODES)})")
    for axis, (lo, hi) in enumerate(widths):
        if lo or hi:
            # (NumPy's error for an empty axis comes from the same call)
            sources = np.pad(np.arange(a.shape[axis]), (int(lo), int(hi)), mode=mode)
            a = EXPORTS["take"](a, sources, axis=axis, mode="clip")
    return a


_COPYING_PAD_MODES = ("edge", "wrap", "reflect", "symmetric")


@numpy_function(np.flip)
def flip(m, axis=None):
    m = as_tracer(m)
    if m.ndim == 0 and axis is None:  # (NumPy indexes it with (): a NumPy scalar)
        return numpy_scalar(m)
    return lax.rev(m, normalize_axes(axis, m.ndim))


@numpy_function(np.copy)
def copy(a, order="K", subok=False):
    a = as_tracer(a)
    return a.trace.emit("copy", (a,), weak=a.weak_type)
