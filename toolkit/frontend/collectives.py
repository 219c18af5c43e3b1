"""Meshes and collectives, with JAX's names and semantics: ``tk.Mesh``, ``tk.P`` and, inside
a ``tk.shard_map``ped function, ``tk.lax.psum``, ``pmean``, ``pmax``, ``pmin``,
``all_gather``, ``psum_scatter``, ``ppermute``, ``all_to_all``, ``axis_index`` and
``axis_size``.

Devices are numbered row-major over the mesh (device = partition id). Each collective is
emitted as JAX lowers it under SPMD: XLA's op with ``channel_id=1``,
``use_global_device_ids=true`` and one replica group per combination of the mesh axes it does
not name, each group ordered by the named axes' coordinates."""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from ..ir import dtypes as ir_dtypes
from ..ir.collectives import mesh_groups
from .errors import ShapeMismatchError
from .thread_slot import ThreadSlot
from .tracer import Tracer


class Mesh:
    """``tk.Mesh(devices, axis_names)``: ``devices`` an array of device numbers (its shape is
    the mesh's) or a shape; ``axis_names`` one name per mesh dimension. Host devices: threads
    of this process, one per device."""

    def __init__(self, devices, axis_names: Sequence[str]):
        array = np.arange(math.prod(devices)).reshape(devices) if isinstance(
            devices, tuple) else np.asarray(devices)
        names = tuple(axis_names)
        if array.ndim != len(names):
            raise ValueError(f"Mesh: {array.ndim}-d devices {array.shape} need {array.ndim} axis "
                             f"names, got {names}")
        if len(set(names)) != len(names):
            raise ValueError(f"Mesh: axis names {names} repeat")
        if not np.array_equal(array, np.arange(array.size).reshape(array.shape)):
            # host devices are interchangeable threads: another order would mean nothing
            raise ValueError(f"Mesh: host devices are numbered 0..{array.size - 1} row-major "
                             f"over the mesh; got {array.ravel().tolist()}")
        self.devices = array
        self.axis_names = names
        self.shape = dict(zip(names, array.shape))
        # device -> its coordinates (row-major numbering: computed, not searched, per call)
        self._coordinates = [dict(zip(names, (int(c) for c in np.unravel_index(d, array.shape))))
                             for d in range(array.size)]

    @property
    def size(self) -> int:
        return int(self.devices.size)

    def coordinates(self, device: int) -> dict[str, int]:
        return dict(self._coordinates[device])

    def groups(self, axes: tuple[str, ...]) -> tuple[tuple[int, ...], ...]:
        """Device groups of a collective over ``axes``: one per combination of the other axes,
        each ordered by the named axes' coordinates (in the order named)."""
        return mesh_groups(self.axis_names, tuple(self.devices.shape), tuple(axes))

    def __repr__(self) -> str:
        return f"Mesh({', '.join(f'{a}={n}' for a, n in self.shape.items())})"


class P(tuple):
    """``tk.P(*entries)``: a partition spec. Entry ``i`` names the mesh axis (or a tuple of
    axes) that splits dimension ``i``, or None; dimensions past the entries are not split."""

    def __new__(cls, *entries):
        return super().__new__(cls, entries)

    def axes(self, dim: int) -> tuple[str, ...]:
        entry = self[dim] if dim < len(self) else None
        if entry is None:
            return ()
        return tuple(entry) if isinstance(entry, tuple) else (entry,)

    def __repr__(self) -> str:
        return f"P({', '.join(map(repr, self))})"


_MESH = ThreadSlot()


def mesh_context(mesh: Mesh):
    """While a shard_map traces its function: the mesh its collectives name axes of."""
    return _MESH.bound(mesh)


def _axes(axis_name, what: str) -> tuple[Mesh, tuple[str, ...]]:
    mesh = _MESH.get()
    names = tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)
    if mesh is None:
        raise NameError(f"unbound axis name: {names[0]!r} ({what} names mesh axes: call it "
                        "inside a function tk.shard_map runs over a mesh with that axis)")
    for name in names:
        if name not in mesh.shape:
            raise NameError(f"unbound axis name: {name!r}; the mesh's axes are "
                            f"{mesh.axis_names}")
    return mesh, names


def _tracer(x, what: str) -> Tracer:
    if not isinstance(x, Tracer):
        raise TypeError(f"{what} takes a value computed from the shard_map's arguments, got "
                        f"{type(x).__name__}")
    return x


def _grouped(mesh: Mesh, axes: tuple[str, ...]) -> dict:
    return {"replica_groups": mesh.groups(axes), "channel_id": 1,
            "use_global_device_ids": True}


def psum(x, axis_name):
    """The sum over the devices along ``axis_name`` (a name or a tuple): XLA's all-reduce."""
    return _all_reduce(x, axis_name, "add", "psum")


def pmax(x, axis_name):
    return _all_reduce(x, axis_name, "maximum", "pmax")


def pmin(x, axis_name):
    return _all_reduce(x, axis_name, "minimum", "pmin")


def pmean(x, axis_name):
    """``psum(x) / axis_size``, with NumPy's division (an integer mean is float64)."""
    mesh, axes = _axes(axis_name, "pmean")
    return psum(x, axis_name) / math.prod(mesh.shape[a] for a in axes)


def _all_reduce(x, axis_name, opcode: str, what: str):
    mesh, axes = _axes(axis_name, what)
    x = _tracer(x, f"tk.lax.{what}")
    if x.dtype == np.bool_:
        raise TypeError(f"tk.lax.{what} of a bool array: convert it to an integer type first")
    trace = x.trace
    reducer = trace.module.scalar_reducer(opcode, ir_dtypes.from_numpy(x.dtype))
    return trace.emit("all-reduce", (x,), {**_grouped(mesh, axes), "to_apply": reducer},
                      weak=x.weak_type, name=what)


def all_gather(x, axis_name, *, axis: int = 0, tiled: bool = False):
    """The devices' blocks along ``axis_name``, in axis order: stacked in a new dimension
    ``axis`` (``tiled=False``, JAX's default) or concatenated along ``axis``."""
    mesh, axes = _axes(axis_name, "all_gather")
    x = _tracer(x, "tk.lax.all_gather")
    axis = _dimension(axis, x.ndim + (0 if tiled else 1), "all_gather")
    if not tiled:
        x = x.reshape(x.shape[:axis] + (1,) + x.shape[axis:])
    return x.trace.emit("all-gather", (x,), {**_grouped(mesh, axes), "dimensions": (axis,)},
                        name="all_gather")


def psum_scatter(x, axis_name, *, scatter_dimension: int = 0, tiled: bool = False):
    """Sum over the devices along ``axis_name``; device i keeps block i of
    ``scatter_dimension`` (``tiled=False``: that dimension's size is the axis size, and it
    goes)."""
    mesh, axes = _axes(axis_name, "psum_scatter")
    x = _tracer(x, "tk.lax.psum_scatter")
    n = math.prod(mesh.shape[a] for a in axes)
    dim = _dimension(scatter_dimension, x.ndim, "psum_scatter")
    if not tiled and x.shape[dim] != n:
        raise ShapeMismatchError(
            f"tk.lax.psum_scatter: dimension {dim} of {x.describe()} must be the axis size {n} "
            "(tiled=False), or pass tiled=True")
    if x.shape[dim] % n:
        raise ShapeMismatchError(f"tk.lax.psum_scatter: dimension {dim} of {x.describe()} does "
                                 f"not split into {n} equal blocks")
    reducer = x.trace.module.scalar_reducer("add", ir_dtypes.from_numpy(x.dtype))
    out = x.trace.emit("reduce-scatter", (x,), {**_grouped(mesh, axes), "dimensions": (dim,),
                                                "to_apply": reducer}, name="psum_scatter")
    if not tiled:
        out = out.reshape(out.shape[:dim] + out.shape[dim + 1:])
    return out


def all_to_all(x, axis_name, split_axis: int, concat_axis: int, *, tiled: bool = False):
    """Block j of ``split_axis`` goes to device j along ``axis_name``; the blocks received are
    concatenated along ``concat_axis`` in device order (``tiled=True``)."""
    mesh, axes = _axes(axis_name, "all_to_all")
    x = _tracer(x, "tk.lax.all_to_all")
    if not tiled:
        raise NotImplementedError("tk.lax.all_to_all: only tiled=True is supported yet")
    n = math.prod(mesh.shape[a] for a in axes)
    split = _dimension(split_axis, x.ndim, "all_to_all")
    concat = _dimension(concat_axis, x.ndim, "all_to_all")
    if x.shape[split] % n:
        raise ShapeMismatchError(f"tk.lax.all_to_all: dimension {split} of {x.describe()} does "
                                 f"not split into {n} equal blocks")
    out = x.trace.emit("all-to-all", (x,), {**_grouped(mesh, axes), "dimensions": (split,)},
                       name="all_to_all")
    if concat == split:
        return out
    # the received blocks lie along ``split`` in device order: move them to ``concat``
    shape = out.shape
    block = shape[split] // n
    out = out.reshape(shape[:split] + (n, block) + shape[split + 1:])
    order = [d for d in range(out.ndim) if d != split]  # the device dimension leaves ...
    at = concat if concat < split else concat + 1  # ... and goes just before ``concat``
    order.insert(order.index(at), split)
    out = out.transpose(order)
    merged = list(shape)
    merged[split] = block
    merged[concat] = shape[concat] * n
    return out.reshape(tuple(merged))


def ppermute(x, axis_name, perm: Sequence[tuple[int, int]]):
    """Device i along ``axis_name`` sends its value to device j for each (i, j) of ``perm``;
    a device no pair sends to gets zeros."""
    mesh, axes = _axes(axis_name, "ppermute")
    x = _tracer(x, "tk.lax.ppermute")
    perm = [(int(s), int(t)) for s, t in perm]
    n = math.prod(mesh.shape[a] for a in axes)
    for s, t in perm:
        if not (0 <= s < n and 0 <= t < n):
            raise ValueError(f"tk.lax.ppermute: pair ({s}, {t}) is outside the axis' 0..{n - 1}")
    if len({s for s, _ in perm}) != len(perm) or len({t for _, t in perm}) != len(perm):
        raise ValueError(f"tk.lax.ppermute: a source or a target repeats in {perm}")
    pairs = tuple((group[s], group[t]) for group in mesh.groups(axes) for s, t in perm)
    return x.trace.emit("collective-permute", (x,),
                        {"source_target_pairs": pairs, "channel_id": 1}, weak=x.weak_type,
                        name="ppermute")


def axis_index(axis_name):
    """This device's coordinate along ``axis_name`` (int32), from XLA's partition-id."""
    mesh, axes = _axes(axis_name, "axis_index")
    if len(axes) != 1:
        raise ValueError("tk.lax.axis_index takes one axis name")
    from .tracer import current_trace

    trace = current_trace()
    if trace is None:
        raise NameError("tk.lax.axis_index must be called while tk.shard_map traces")
    axis = mesh.axis_names.index(axes[0])
    stride = math.prod(mesh.devices.shape[axis + 1:])
    device = trace.emit("partition-id", (), name="axis_index")
    device = trace.emit("convert", (device,), shape=_s32(), name="axis_index")
    index = (device // np.int32(stride)) % np.int32(mesh.devices.shape[axis])
    from .vma import current as varying_axes

    typing = varying_axes()
    if typing is not None:  # it varies along its axis only (partition-id along every axis)
        typing.seed(index, axes)
    return index


def axis_size(axis_name) -> int:
    mesh, axes = _axes(axis_name, "axis_size")
    return math.prod(mesh.shape[a] for a in axes)


def _s32():
    from ..ir.shapes import Shape

    return Shape(ir_dtypes.from_name("s32"), ())


def _dimension(d: int, ndim: int, what: str) -> int:
    if not -ndim <= d < ndim:
        raise ValueError(f"tk.lax.{what}: dimension {d} is out of range for {ndim} dimensions")
    return d % ndim
