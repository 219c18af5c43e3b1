"""The semantics of the indexing ops on NumPy arrays, as XLA defines them: the one statement of
what gather, scatter, dynamic-slice and dynamic-update-slice compute, used by the reference
interpreter (and so by constant folding). Start indices are clamped so that a slice stays in
bounds (gather, dynamic-slice, dynamic-update-slice); a scatter update window that does not
fit in the operand is skipped whole. Windows are applied in row-major order of the scatter
indices, so with an overwriting combiner the last of several writes to one element wins, as
in NumPy's ``x[idx] = v``."""
from __future__ import annotations

import math

import numpy as np

from .ops import OPS, GroupOp
from .queries import scatter_combiner

_BOOL_UFUNCS = {
    np.bitwise_and: np.logical_and,
    np.bitwise_or: np.logical_or,
    np.bitwise_xor: np.logical_xor,
}


def index_vectors(indices: np.ndarray, index_vector_dim: int) -> np.ndarray:
    """The start indices as (batch elements, index vector length), int64, batch in row-major
    order."""
    if index_vector_dim == indices.ndim:
        indices = indices[..., None]
    else:
        indices = np.moveaxis(indices, index_vector_dim, -1)
    if indices.dtype.kind == "u":  # huge unsigned starts clamp high, never wrap negative
        indices = np.minimum(indices, np.iinfo(np.int64).max)
    return indices.reshape(-1, indices.shape[-1]).astype(np.int64)


def full_starts(vectors: np.ndarray, dims_map, rank: int) -> np.ndarray:
    """(batch, rank) start per operand dimension: mapped from the index vector, 0 elsewhere."""
    starts = np.zeros((vectors.shape[0], rank), np.int64)
    for k, d in enumerate(dims_map):
        starts[:, d] = vectors[:, k]
    return starts


def _window_grids(starts: np.ndarray, sizes) -> tuple[np.ndarray, ...]:
    """Index arrays of shape (batch, *sizes) addressing each window's elements."""
    rank = len(sizes)
    grids = []
    for d, size in enumerate(sizes):
        shape = [1] * (rank + 1)
        shape[d + 1] = size
        grids.append(starts[:, d].reshape((-1,) + (1,) * rank) + np.arange(size).reshape(shape))
    return tuple(grids)


def gather(operand: np.ndarray, indices: np.ndarray, attrs, out_dims) -> np.ndarray:
    vectors = index_vectors(indices, attrs["index_vector_dim"])
    sizes = tuple(attrs["slice_sizes"])
    starts = full_starts(vectors, attrs["start_index_map"], operand.ndim)
    starts = np.clip(starts, 0, np.array(operand.shape, np.int64) - np.array(sizes, np.int64))
    windows = (
        operand[_window_grids(starts, sizes)]
        if operand.ndim
        else np.broadcast_to(operand, (len(starts),))
    )
    collapsed = set(attrs.get("collapsed_slice_dims", ()))
    kept = [s for d, s in enumerate(sizes) if d not in collapsed]
    offset = list(attrs.get("offset_dims", ()))
    batch = [d for i, d in enumerate(out_dims) if i not in offset]
    windows = windows.reshape(tuple(batch) + tuple(kept))
    n_batch, perm, k, b = len(batch), [], 0, 0
    for d in range(len(out_dims)):
        if d in offset:
            perm.append(n_batch + k)
            k += 1
        else:
            perm.append(b)
            b += 1
    # (np.array, not np.ascontiguousarray, which makes a 0-d result 1-d)
    return np.array(np.transpose(windows, perm) if perm else windows, order="C")


def scatter(
    operand: np.ndarray, indices: np.ndarray, updates: np.ndarray, attrs, evaluate
) -> np.ndarray:
    """``evaluate(comp, [current, update])`` applies a general combiner elementwise."""
    out = operand.copy()
    vectors = index_vectors(indices, attrs["index_vector_dim"])
    window = list(attrs.get("update_window_dims", ()))
    inserted = set(attrs.get("inserted_window_dims", ()))
    scatter_axes = [i for i in range(updates.ndim) if i not in window]
    updates = np.transpose(updates, scatter_axes + window)
    window_shape = updates.shape[len(scatter_axes):]
    sizes, it = [], iter(window_shape)
    for d in range(operand.ndim):
        sizes.append(1 if d in inserted else next(it))
    starts = full_starts(vectors, attrs["scatter_dims_to_operand_dims"], operand.ndim)
    fits = np.all(
        (starts >= 0) & (starts + np.array(sizes, np.int64) <= np.array(operand.shape, np.int64)),
        axis=1,
    )
    updates = updates.reshape((len(starts),) + tuple(sizes))[fits]
    starts = starts[fits]
    if not len(starts) or math.prod(sizes) == 0:
        return out
    grids = _window_grids(starts, sizes)
    combiner = scatter_combiner(attrs["to_apply"])
    if combiner == "assign":  # NumPy assigns in index order: the last duplicate wins
        out[grids] = updates
        return out
    ufunc = OPS[combiner].ufunc if combiner in GroupOp.REDUCERS else None
    if ufunc is not None:
        if out.dtype.kind == "b":
            ufunc = _BOOL_UFUNCS.get(ufunc, ufunc)
        with np.errstate(all="ignore"):
            ufunc.at(out, grids, updates)
        return out
    comp = attrs["to_apply"]
    for i in range(len(starts)):  # a general combiner: one window at a time, in order
        region = tuple(slice(s, s + n) for s, n in zip(starts[i], sizes))
        out[region] = np.asarray(evaluate(comp, [out[region], updates[i]])).astype(
            out.dtype, copy=False
        )
    return out


def clamped_starts(operand_shape, starts, sizes) -> list[int]:
    """dynamic-slice and dynamic-update-slice: each start clamped to [0, dim - size]."""
    if len(starts) == 1 and np.ndim(starts[0]) == 1:
        starts = list(starts[0])
    out = []
    for s, dim, size in zip(starts, operand_shape, sizes):
        s = int(min(int(s), 2 ** 62)) if np.asarray(s).dtype.kind == "u" else int(s)
        out.append(min(max(s, 0), dim - size))
    return out


def dynamic_slice(operand: np.ndarray, starts, sizes) -> np.ndarray:
    begin = clamped_starts(operand.shape, starts, sizes)
    return operand[tuple(slice(b, b + n) for b, n in zip(begin, sizes))].copy()


def dynamic_update_slice(operand: np.ndarray, update: np.ndarray, starts) -> np.ndarray:
    begin = clamped_starts(operand.shape, starts, update.shape)
    out = operand.copy()
    out[tuple(slice(b, b + n) for b, n in zip(begin, update.shape))] = update
    return out
