"""Joining, splitting, repeating and reordering traced arrays: the *stack and *split families,
block, tile, repeat, append, insert, delete, resize, roll, rot90 and the flips, atleast_*d,
broadcast_arrays. Each is written with the traced NumPy operations it reduces to, as NumPy
itself writes most of them."""
from __future__ import annotations

import builtins
import math
import operator

import numpy as np

from . import lax
from .errors import ShapeMismatchError, UnsupportedNumpyError, UserValueError
from .arguments import as_tracer, normalize_axis, one_element_if_0d, strict_axis
from .registry import EXPORTS, numpy_function
from .tracer import Tracer, strongly_typed


def _t(x) -> Tracer:
    return as_tracer(x)


def _arrays(arrays):
    arrays = list(arrays)
    lax.trace_of([v for a in arrays for v in (a if isinstance(a, (list, tuple)) else [a])])
    return [strongly_typed(a) if isinstance(a, Tracer) else EXPORTS["asarray"](a) for a in arrays]


def _atleast(a: Tracer, n: int) -> Tracer:
    if a.ndim >= n:
        return a
    if n == 1:
        return lax.reshape(a, (1,))
    if n == 2:
        return lax.reshape(a, (1,) * (2 - a.ndim) + tuple(a.shape))
    shape = {0: (1, 1, 1), 1: (1, a.size, 1), 2: tuple(a.shape) + (1,)}[a.ndim]
    return lax.reshape(a, shape)


def _atleast_fn(n):
    def fn(*arys):
        out = [_atleast(_t(a), n) for a in arys]
        return out[0] if len(out) == 1 else tuple(out)
    return fn


for _n in (1, 2, 3):
    numpy_function(getattr(np, f"atleast_{_n}d"), name=f"atleast_{_n}d")(_atleast_fn(_n))


@numpy_function(np.hstack)
def hstack(tup, *, dtype=None, casting="same_kind"):
    arrs = [_atleast(a, 1) for a in _arrays(tup)]
    return EXPORTS["concatenate"](arrs, axis=0 if arrs[0].ndim == 1 else 1, dtype=dtype)


@numpy_function(np.vstack)
def vstack(tup, *, dtype=None, casting="same_kind"):
    return EXPORTS["concatenate"]([_atleast(a, 2) for a in _arrays(tup)], axis=0, dtype=dtype)


EXPORTS["row_stack"] = EXPORTS["vstack"]


@numpy_function(np.dstack)
def dstack(tup):
    return EXPORTS["concatenate"]([_atleast(a, 3) for a in _arrays(tup)], axis=2)


@numpy_function(np.column_stack)
def column_stack(tup):
    arrs = [lax.reshape(a, (a.size, 1)) if a.ndim < 2 else a for a in _arrays(tup)]
    return EXPORTS["concatenate"](arrs, axis=1)


@numpy_function(np.block)
def block(arrays):
    def depth(x):
        d = 0
        while isinstance(x, list):
            if not x:
                raise UserValueError("np.block: lists cannot be empty")
            x, d = x[0], d + 1
        return d

    levels = depth(arrays)
    leaves = []

    def collect(x):
        if isinstance(x, list):
            for v in x:
                collect(v)
        else:
            leaves.append(x)
    collect(arrays)
    ndim = builtins.max(
        [levels] + [np.ndim(v) if not isinstance(v, Tracer) else v.ndim for v in leaves]
    )
    trace = lax.trace_of(leaves)

    def build(x, level):
        if not isinstance(x, list):
            t = x if isinstance(x, Tracer) else lax.lift(trace, x, weak=False)
            return lax.reshape(t, (1,) * (ndim - t.ndim) + tuple(t.shape))
        parts = [build(v, level + 1) for v in x]
        return EXPORTS["concatenate"](parts, axis=-(levels - level))

    return build(arrays, 0)


def _split_points(n: int, indices_or_sections, even: bool, what: str) -> list[int]:
    if isinstance(indices_or_sections, Tracer):
        raise UnsupportedNumpyError(f"{what}: the split points must be Python ints, not traced")
    if np.ndim(indices_or_sections) == 0:
        sections = operator.index(indices_or_sections)
        if sections <= 0:
            raise UserValueError("number sections must be larger than 0.")
        if even and n % sections:
            raise UserValueError("array split does not result in an equal division")
        size, extra = divmod(n, sections)
        bounds = [0]
        for i in range(sections):
            bounds.append(bounds[-1] + size + (1 if i < extra else 0))
        return bounds
    return [0] + [operator.index(i) for i in indices_or_sections] + [n]


def _split(ary, indices_or_sections, axis, even, what):
    a = _t(ary)
    axis = normalize_axis(axis, a.ndim)
    n = a.shape[axis]
    bounds = _split_points(n, indices_or_sections, even, what)
    return [_slice(a, axis, lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:])]


def _slice(a: Tracer, axis: int, lo: int, hi: int) -> Tracer:
    n = a.shape[axis]
    lo, hi, _ = slice(lo, hi).indices(n)
    hi = builtins.max(hi, lo)
    spec = [(0, d, 1) for d in a.shape]
    spec[axis] = (lo, hi, 1)
    return lax.slice_(a, spec) if (lo, hi) != (0, n) else Tracer(a._trace, a.inst, a.weak_type)


@numpy_function(np.split)
def split(ary, indices_or_sections, axis=0):
    return _split(ary, indices_or_sections, axis, True, "np.split")


@numpy_function(np.array_split)
def array_split(ary, indices_or_sections, axis=0):
    return _split(ary, indices_or_sections, axis, False, "np.array_split")


@numpy_function(np.hsplit)
def hsplit(ary, indices_or_sections):
    a = _t(ary)
    if a.ndim == 0:
        raise UserValueError("hsplit only works on arrays of 1 or more dimensions")
    return _split(a, indices_or_sections, 1 if a.ndim > 1 else 0, True, "np.hsplit")


@numpy_function(np.vsplit)
def vsplit(ary, indices_or_sections):
    a = _t(ary)
    if a.ndim < 2:
        raise UserValueError("vsplit only works on arrays of 2 or more dimensions")
    return _split(a, indices_or_sections, 0, True, "np.vsplit")


@numpy_function(np.dsplit)
def dsplit(ary, indices_or_sections):
    a = _t(ary)
    if a.ndim < 3:
        raise UserValueError("dsplit only works on arrays of 3 or more dimensions")
    return _split(a, indices_or_sections, 2, True, "np.dsplit")


@numpy_function(np.unstack)
def unstack(x, /, *, axis=0):
    a = _t(x)
    axis = normalize_axis(axis, a.ndim)
    return tuple(
        lax.reshape(_slice(a, axis, i, i + 1), [d for k, d in enumerate(a.shape) if k != axis])
        for i in range(a.shape[axis])
    )


@numpy_function(np.tile)
def tile(A, reps):
    a = _t(A)
    reps = (operator.index(reps),) if np.ndim(reps) == 0 else tuple(operator.index(r) for r in reps)
    d = builtins.max(a.ndim, len(reps))
    reps = (1,) * (d - len(reps)) + reps
    a = lax.reshape(a, (1,) * (d - a.ndim) + tuple(a.shape))
    # broadcast to (r0, n0, r1, n1, ...) and merge each pair
    wide = []
    dims = []
    for i, (r, n) in enumerate(zip(reps, a.shape)):
        wide += [r, n]
        dims.append(2 * i + 1)
    b = lax.broadcast_in_dim(a, wide, dims)
    return lax.reshape(b, [r * n for r, n in zip(reps, a.shape)])


@numpy_function(np.repeat)
def repeat(a, repeats, axis=None):
    a = _t(a)
    if isinstance(repeats, Tracer):
        raise UnsupportedNumpyError(
            "np.repeat with traced repeats has a data-dependent size; pass Python ints"
        )
    a = one_element_if_0d(a, axis)
    if axis is None:
        a = lax.reshape(a, (a.size,))
        axis = 0
    axis = normalize_axis(axis, a.ndim)
    n = a.shape[axis]
    reps = np.broadcast_to(np.asarray(repeats, np.int64), (n,)) if np.ndim(repeats) <= 1 else None
    if reps is None or (reps < 0).any():
        raise UserValueError(
            "np.repeat: repeats must be non-negative ints broadcastable to the axis"
        )
    if np.ndim(repeats) == 0:  # every element r times: broadcast a new axis and merge it
        r = int(reps[0]) if n else operator.index(repeats)
        shape = list(a.shape)
        wide = shape[:axis + 1] + [r] + shape[axis + 1:]
        b = lax.broadcast_in_dim(a, wide, [i for i in range(len(wide)) if i != axis + 1])
        shape[axis] = n * r
        return lax.reshape(b, shape)
    index = np.repeat(np.arange(n), reps)
    key = (slice(None),) * axis + (index,)
    return a[key]


@numpy_function(np.append)
def append(arr, values, axis=None):
    a, v = _arrays([arr, values])
    if axis is None:
        return EXPORTS["concatenate"](
            [lax.reshape(a, (a.size,)), lax.reshape(v, (v.size,))], axis=0
        )
    return EXPORTS["concatenate"]([a, v], axis=axis)


@numpy_function(np.delete)
def delete(arr, obj, axis=None):
    a = _t(arr)
    if isinstance(obj, Tracer):
        raise UnsupportedNumpyError(
            "np.delete with traced indices has a data-dependent size; pass Python ints"
        )
    if axis is None:
        a = lax.reshape(a, (a.size,))
        axis = 0
    axis = normalize_axis(axis, a.ndim)
    keep = np.delete(np.arange(a.shape[axis]), obj)
    return a[(slice(None),) * axis + (keep,)]


@numpy_function(np.insert)
def insert(arr, obj, values, axis=None):
    a = _t(arr)
    if isinstance(obj, Tracer):
        raise UnsupportedNumpyError(
            "np.insert with traced positions has a data-dependent layout; pass Python ints"
        )
    if axis is None:
        a = lax.reshape(a, (a.size,))
        axis = 0
    axis = normalize_axis(axis, a.ndim)
    n = a.shape[axis]
    # where each element of the result comes from, computed by NumPy on a labelled axis:
    # labels >= 0 are positions in arr, labels < 0 are -(k + 1) for the k-th inserted value
    v = values if isinstance(values, Tracer) else lax.lift(a.trace, values, a.dtype, weak=False)
    v = lax.convert(v, a.dtype)
    scalar_obj = np.ndim(obj) == 0
    count = 1 if scalar_obj else len(np.atleast_1d(obj))
    slot_shape = list(a.shape)
    slot_shape[axis] = count
    if scalar_obj and v.ndim == a.ndim and v.ndim > 0 and v.shape[axis] != 1:
        count = v.shape[axis] if np.ndim(values) else 1
        slot_shape[axis] = count
    if scalar_obj and v.ndim < a.ndim:  # NumPy puts a lower-rank value in as one slot along axis
        v = (
            lax.reshape(v, tuple(v.shape[:axis]) + (1,) + tuple(v.shape[axis:]))
            if v.ndim == a.ndim - 1
            else v
        )
    try:
        v = lax.broadcast_to(v, slot_shape)
    except ShapeMismatchError:
        raise ShapeMismatchError(
            f"np.insert: values of shape {tuple(v.shape)} do not fit {tuple(slot_shape)}"
        ) from None
    positions = np.full(count, operator.index(obj)) if scalar_obj and count > 1 else obj
    labels = np.insert(np.arange(n), positions, -1 - np.arange(count))
    both = EXPORTS["concatenate"]([a, v], axis=axis)
    source = np.where(labels >= 0, labels, n + (-1 - labels))
    return both[(slice(None),) * axis + (source,)]


@numpy_function(np.resize)
def resize(a, new_shape):
    a = _t(a)
    shape = (
        (operator.index(new_shape),)
        if np.ndim(new_shape) == 0
        else tuple(operator.index(d) for d in new_shape)
    )
    total = math.prod(shape)
    flat = lax.reshape(a, (a.size,))
    if total == 0 or a.size == 0:
        return lax.full(a.trace, shape, 0, a.dtype)
    reps = -(-total // a.size)
    tiled = lax.reshape(lax.broadcast_in_dim(flat, (reps, a.size), (1,)), (reps * a.size,))
    return lax.reshape(lax.slice_(tiled, [(0, total, 1)]), shape)


@numpy_function(np.roll)
def roll(a, shift, axis=None):
    a = _t(a)
    if isinstance(shift, Tracer):
        raise UnsupportedNumpyError(
            "np.roll with a traced shift: pass a Python int (or use np.take with "
            "(np.arange(n) - shift) % n)"
        )
    if axis is None:
        return lax.reshape(roll(lax.reshape(a, (a.size,)), shift, 0), a.shape)
    shifts = np.broadcast_to(
        np.asarray(shift), np.broadcast_shapes(np.shape(shift), np.shape(axis))
    )
    axes = np.broadcast_to(np.asarray(axis), shifts.shape)
    total = {}
    for s, ax in zip(shifts.reshape(-1), axes.reshape(-1)):
        ax = strict_axis(int(ax), a.ndim)
        total[ax] = total.get(ax, 0) + int(s)
    for ax, s in total.items():
        n = a.shape[ax]
        if n == 0:
            continue
        s %= n
        if s:
            a = lax.concatenate([_slice(a, ax, n - s, n), _slice(a, ax, 0, n - s)], ax)
    return a


@numpy_function(np.rot90)
def rot90(m, k=1, axes=(0, 1)):
    m = _t(m)
    a0, a1 = (normalize_axis(operator.index(x), m.ndim) for x in axes)
    if a0 == a1:
        raise UserValueError("Axes must be different.")
    k = operator.index(k) % 4
    if k == 0:
        return m
    if k == 2:
        return lax.rev(m, (a0, a1))
    perm = list(range(m.ndim))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    if k == 1:
        return lax.transpose(lax.rev(m, (a1,)), perm)
    return lax.rev(lax.transpose(m, perm), (a1,))


@numpy_function(np.fliplr)
def fliplr(m):
    m = _t(m)
    if m.ndim < 2:
        raise UserValueError("Input must be >= 2-d.")
    return lax.rev(m, (1,))


@numpy_function(np.flipud)
def flipud(m):
    m = _t(m)
    if m.ndim < 1:
        raise UserValueError("Input must be >= 1-d.")
    return lax.rev(m, (0,))


@numpy_function(np.broadcast_arrays)
def broadcast_arrays(*args, subok=False):
    arrs = _arrays(args)
    shape = np.broadcast_shapes(*[a.shape for a in arrs])
    return tuple(lax.broadcast_to(a, shape) for a in arrs)


@numpy_function(np.rollaxis)
def rollaxis(a, axis, start=0):
    a = _t(a)
    n = a.ndim
    axis = normalize_axis(axis, n)
    if not -n <= start <= n:
        raise UserValueError(
            f"'start' arg requires {-n} <= start < {n + 1}, but {start} was passed in"
        )
    start = start % (n + 1) if start < 0 else start
    if axis < start:
        start -= 1
    order = [i for i in range(n) if i != axis]
    order.insert(start, axis)
    return lax.transpose(a, order)


@numpy_function(np.permute_dims)
def permute_dims(a, axes=None):
    return EXPORTS["transpose"](a, axes)


@numpy_function(np.matrix_transpose)
def matrix_transpose(x, /):
    a = _t(x)
    if a.ndim < 2:
        raise UserValueError("Input array must be at least 2-dimensional")
    return EXPORTS["swapaxes"](a, -1, -2)

