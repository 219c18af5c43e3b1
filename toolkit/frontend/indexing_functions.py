"""NumPy's indexing functions on traced arrays: take, take_along_axis, put, put_along_axis,
and the ``ufunc.at`` method (``np.add.at``), all through ``indexing`` (gather and scatter)."""
from __future__ import annotations

import operator

import numpy as np

from ..ir.ops import GroupOp
from . import lax
from .errors import DTypeMismatchError, UnsupportedNumpyError, UserValueError
from .indexing import getitem, scatter_into
from .inplace import check_writable, write
from .arguments import as_tracer, check_python_ints_fit, normalize_axis, one_element_if_0d
from .registry import numpy_function
from .tracer import Tracer


def _index_mode(indices, n: int, mode: str, what: str):
    """``mode=`` of take/put: 'raise' (checked now for concrete indices; traced ones clamp, as
    XLA does), 'wrap' (modulo n) or 'clip'."""
    if mode == "raise":
        return indices
    if mode not in ("wrap", "clip"):
        raise UserValueError(f"{what}: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    if n == 0:
        raise IndexError(f"{what}: cannot do a non-empty take from an empty axes.")
    if not isinstance(indices, Tracer):
        arr = np.asarray(indices)
        return np.mod(arr, n) if mode == "wrap" else np.clip(arr, 0, n - 1)
    t = lax.convert(indices, np.int64) if indices.dtype != np.int64 else indices
    if mode == "wrap":
        from .ufuncs import apply_ufunc
        return apply_ufunc(np.mod, (t, n))
    return lax.elementwise(
        "clamp", lax.full(t.trace, (), 0, np.int64), t, lax.full(t.trace, (), n - 1, np.int64)
    )


@numpy_function(np.take)
def take(a, indices, axis=None, out=None, mode="raise"):
    if out is not None:
        raise UnsupportedNumpyError("np.take(..., out=) is not supported on traced arrays")
    a = one_element_if_0d(as_tracer(a), axis)
    if axis is None:
        a = lax.reshape(a, (a.size,))
        axis = 0
    axis = normalize_axis(operator.index(axis), a.ndim)
    indices = _index_mode(indices, a.shape[axis], mode, "np.take")
    if not isinstance(indices, Tracer):
        indices = np.asarray(indices)
    return getitem(a, (slice(None),) * axis + (indices,))


def _along_axis_key(arr: Tracer, indices, axis, what: str):
    if isinstance(indices, Tracer):
        if indices.dtype.kind not in "iu":
            raise DTypeMismatchError(f"{what}: indices must be integers, got {indices.describe()}")
        shape = indices.shape
    else:
        indices = np.asarray(indices)
        if indices.dtype.kind not in "iu":
            raise DTypeMismatchError(f"{what}: `indices` must be an integer array")
        shape = indices.shape
    if axis is None:
        return None, indices
    if len(shape) != arr.ndim:
        raise UserValueError(f"{what}: `indices` and `arr` must have the same number of dimensions")
    axis = normalize_axis(operator.index(axis), arr.ndim)
    key = []
    for d in range(arr.ndim):
        if d == axis:
            key.append(indices)
        else:  # the position along every other axis: a broadcastable arange
            view = [1] * arr.ndim
            view[d] = arr.shape[d]
            key.append(np.arange(arr.shape[d]).reshape(view))
    return axis, tuple(key)


@numpy_function(np.take_along_axis)
def take_along_axis(arr, indices, axis=-1):
    arr = as_tracer(arr)
    axis, key = _along_axis_key(arr, indices, axis, "np.take_along_axis")
    if axis is None:
        return getitem(lax.reshape(arr, (arr.size,)), key)
    return getitem(arr, key)


def _mutate(arr, what: str) -> Tracer:
    if not isinstance(arr, Tracer):
        raise UnsupportedNumpyError(
            f"{what} into a NumPy array: the array is not part of the traced program. Make it with "
            "toolkit.numpy (tnp.zeros, tnp.empty ...) or pass it as an argument")
    check_writable(arr, what)
    return arr


def _values_for(arr: Tracer, values, what: str) -> Tracer:
    check_python_ints_fit(values, arr.dtype, f"{what} values")
    v = values if isinstance(values, Tracer) else lax.lift(arr.trace, values, what=f"{what} values")
    if v.dtype != arr.dtype and not np.can_cast(v.dtype, arr.dtype, "unsafe"):
        raise DTypeMismatchError(f"{what}: cannot cast {v.dtype} values into {arr.describe()}")
    return lax.convert(v, arr.dtype, arr.weak_type)


@numpy_function(np.put_along_axis)
def put_along_axis(arr, indices, values, axis):
    arr = _mutate(arr, "np.put_along_axis")
    axis, key = _along_axis_key(arr, indices, axis, "np.put_along_axis")
    if axis is None:
        raise UnsupportedNumpyError(
            "np.put_along_axis(..., axis=None) is not supported on traced arrays"
        )
    write(arr, scatter_into(arr, key, _values_for(arr, values, "np.put_along_axis"), "assign"))


@numpy_function(np.put)
def put(a, ind, v, mode="raise"):
    a = _mutate(a, "np.put")
    flat = lax.reshape(a, (a.size,))
    ind = _index_mode(ind, a.size, mode, "np.put")
    if not isinstance(ind, Tracer):
        ind = np.asarray(ind)
    values = _values_for(a, v, "np.put")
    count = int(np.prod(ind.shape))
    if values.size != count:  # NumPy repeats the values cyclically over the indices
        if values.size == 0:
            return
        reps = -(-count // values.size)
        values = lax.slice_(
            lax.reshape(
                lax.broadcast_to(lax.reshape(values, (1, values.size)), (reps, values.size)),
                (reps * values.size,),
            ),
            [(0, count, 1)],
        )
    values = lax.reshape(values, ind.shape)
    write(a, lax.reshape(scatter_into(flat, ind, values, "assign"), a.shape))


# ---- ufunc.at --------------------------------------------------------------------------------
_AT_COMBINERS = {
    np.add: "add",
    np.multiply: "multiply",
    np.maximum: "maximum",
    np.minimum: "minimum",
    np.bitwise_and: "and",
    np.bitwise_or: "or",
    np.bitwise_xor: "xor",
    np.logical_and: "and",
    np.logical_or: "or",
    np.logical_xor: "xor",
    np.subtract: "add",
}


def ufunc_at(ufunc: np.ufunc, a, indices, b=None) -> None:
    """``ufunc.at(a, indices, b)``: unbuffered, so repeated indices accumulate (a scatter with
    the ufunc's op as combiner)."""
    name = f"np.{ufunc.__name__}.at"
    combiner = _AT_COMBINERS.get(ufunc)
    if combiner is None or b is None:
        raise UnsupportedNumpyError(
            f"{name} is not supported on traced arrays (supported: "
            f"{', '.join(f'np.{u.__name__}.at' for u in _AT_COMBINERS)}, with a values argument)")
    a = _mutate(a, name)
    v = b if isinstance(b, Tracer) else lax.lift(a.trace, b, what=f"{name} values")
    resolved = ufunc.resolve_dtypes((a.dtype, v.dtype if not v.weak_type else
                                     type(np.zeros((), v.dtype).item()), None))
    if not np.can_cast(resolved[-1], a.dtype, "same_kind"):
        raise DTypeMismatchError(
            f"{name}: Cannot cast ufunc output from dtype('{resolved[-1]}') to "
            f"dtype('{a.dtype}') with casting rule 'same_kind'"
        )
    if a.dtype == np.bool_:  # (NumPy's bool add is or, its multiply and)
        combiner = {"add": "or", "multiply": "and"}.get(combiner, combiner)
    elif ufunc in (np.logical_and, np.logical_or, np.logical_xor) or (
            a.dtype.kind == "c" and combiner in GroupOp.SELECTING_REDUCERS):
        # the truth of each value cast back (1.0 or 0.0), and complex numbers' lexicographic
        # order: no single combiner op computes them; NumPy does, at a break
        raise UnsupportedNumpyError(f"{name} of a {a.dtype} array is not supported on traced "
                                    "arrays (bool arrays and the bitwise ufuncs are)")
    v = lax.convert(v, a.dtype, a.weak_type)
    if ufunc is np.subtract:
        from .ufuncs import apply_ufunc
        v = apply_ufunc(np.negative, (v,))
    write(a, scatter_into(a, indices, v, combiner))


@numpy_function(np.lib.stride_tricks.sliding_window_view)
def sliding_window_view(x, window_shape, axis=None, *, subok=False, writeable=False):
    """NumPy's windows of ``x`` as a read-only view: element ``[i..., j...]`` is ``x`` at
    ``i + j`` along each windowed axis (one gather whose indices are iotas, which fuses into
    its reader: ``.mean(axis=-1)`` of it is one kernel of moving sums). As a view it follows
    later writes to ``x`` (registry's derived views); NumPy's is read-only, and so is this."""
    if writeable:
        raise UnsupportedNumpyError(
            "np.lib.stride_tricks.sliding_window_view(..., writeable=True) on a traced array: "
            "toolkit's windows are a read-only view; write into the array itself instead")
    x = as_tracer(x)
    windows = (tuple(operator.index(w) for w in window_shape) if np.iterable(window_shape)
               else (operator.index(window_shape),))
    if any(w < 0 for w in windows):
        raise UserValueError("`window_shape` cannot contain negative values")
    if axis is None:
        axes = tuple(range(x.ndim))
        if len(windows) != len(axes):
            raise UserValueError(
                f"Since axis is `None`, must provide window_shape for all dimensions of `x`; "
                f"got {len(windows)} window_shape elements and `x.ndim` is {x.ndim}.")
    else:
        axes = tuple(normalize_axis(operator.index(a), x.ndim)
                     for a in (axis if np.iterable(axis) else (axis,)))
        if len(windows) != len(axes):
            raise UserValueError(
                f"Must provide matching length window_shape and axis; got {len(windows)} "
                f"window_shape elements and {len(axes)} axes elements.")
    trimmed = list(x.shape)
    for a, w in zip(axes, windows):
        if trimmed[a] < w:
            raise UserValueError("window shape cannot be larger than input array shape")
        trimmed[a] -= w - 1
    if x.ndim == 0:
        return x
    out_shape = tuple(trimmed) + windows
    if x.size == 0:  # (then so is the result: nothing to gather from)
        return lax.full(x.trace, out_shape, 0, x.dtype)
    return window_gather(x, out_shape, axes)


def window_gather(x: Tracer, out_shape: tuple, axes: tuple) -> Tracer:
    """``x`` read through windows: output ``[i..., j...]`` (the windows' offsets ``j`` last, one
    per entry of ``axes``) is ``x`` at ``i`` plus each offset along its axis. One gather whose
    indices are iotas: elemental, so it fuses into its reader, never a constant index table."""
    trace = x.trace
    columns = []
    for d in range(x.ndim):  # the source index along d: the output's, plus its windows' offsets
        position = lax.iota(trace, np.int64, out_shape, d)
        for k, a in enumerate(axes):
            if a == d:
                offset = lax.iota(trace, np.int64, out_shape, x.ndim + k)
                position = lax.elementwise("add", position, offset)
        columns.append(lax.reshape(position, out_shape + (1,)))
    return lax.gather(x, lax.concatenate(columns, len(out_shape)), offset_dims=(),
                      collapsed_slice_dims=tuple(range(x.ndim)),
                      start_index_map=tuple(range(x.ndim)), slice_sizes=(1,) * x.ndim,
                      index_vector_dim=len(out_shape))
