"""Shardings of an SPMD program's values, as XLA's partitioner sees them: a *spec* says, per
dimension, the mesh axes that split it (the first named the major one, JAX's
``PartitionSpec``); ``()`` for every dimension is a replicated array. With the mesh's shape,
what a device holds (``local_shape``), XLA's text of a sharding (``xla_sharding``), and what
the partitioner decided (``PartitionDecision``)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..ir.collectives import mesh_groups
from ..ir.nodes import Instruction, Module
from ..ir.ops import GroupOp
from ..ir.shapes import Shape

Spec = tuple[tuple[str, ...], ...]  # per dimension: the mesh axes splitting it, major first


class PartitionError(ValueError):
    """A sharding that cannot apply: an axis the mesh lacks, a dimension that does not split."""


@dataclass(frozen=True)
class MeshShape:
    """The mesh a program is partitioned over: axis names and sizes, devices numbered
    row-major (device = partition id)."""

    names: tuple[str, ...]
    sizes: tuple[int, ...]

    @property
    def devices(self) -> int:
        return math.prod(self.sizes)

    def size(self, axes: Sequence[str]) -> int:
        return math.prod(self.sizes[self.names.index(a)] for a in axes)

    def groups(self, axes: Sequence[str]) -> tuple[tuple[int, ...], ...]:
        return mesh_groups(self.names, self.sizes, tuple(axes))

    def block_number(self, device: int, axes: Sequence[str]) -> int:
        """Which block along ``axes`` (major first) ``device`` holds."""
        at = np.unravel_index(device, self.sizes)
        k = 0
        for a in axes:
            i = self.names.index(a)
            k = k * self.sizes[i] + int(at[i])
        return k


@dataclass(frozen=True)
class TupleSpec:
    """The specs of a tuple's elements."""

    elements: tuple


@dataclass(frozen=True)
class PartitionDecision:
    """A collective the partitioner inserted (or a split it dropped), and why."""

    instruction: str
    opcode: str
    location: str
    collective: str  # "all-reduce", "all-gather", "" (a local slice)
    axes: tuple[str, ...]
    message: str


@dataclass(frozen=True)
class Partitioned:
    module: Module  # the per-device program
    out_specs: tuple  # the spec of each result (TupleSpec for a tuple result)
    decisions: tuple[PartitionDecision, ...]

    @property
    def collectives(self) -> int:
        """How many collectives exchange data (partition-id, which reads this device's number,
        is none)."""
        return sum(communicates(i) for i in self.module.entry.instructions)


def communicates(inst: Instruction) -> bool:
    return inst.opcode in GroupOp.COLLECTIVE and bool(inst.operands)


def replicated(rank: int) -> Spec:
    return ((),) * rank


def spec_text(spec: Spec) -> str:
    """``P('data', None)``-like text of a spec."""
    def entry(axes):
        return "None" if not axes else repr(axes[0]) if len(axes) == 1 else repr(tuple(axes))
    while spec and not spec[-1]:
        spec = spec[:-1]
    return f"P({', '.join(entry(a) for a in spec)})"


def xla_sharding(spec: Spec, mesh: MeshShape) -> str:
    """XLA's text of a sharding: ``{replicated}``, ``{devices=[4,1]<=[4]}``, or with the
    axes no dimension names as a last replicated tile dimension (``last_tile_dim_replicate``);
    the device order is the mesh's iota transposed to the order the axes are named in."""
    used = [a for axes in spec for a in axes]
    if not used:
        return "{replicated}"
    tiles = [mesh.size(axes) for axes in spec]
    rest = [a for a in mesh.names if a not in used]
    order = [mesh.names.index(a) for a in used + rest]
    suffix = ""
    if rest:
        tiles.append(mesh.size(rest))
        suffix = " last_tile_dim_replicate"
    devices = f"<=[{mesh.devices}]" if order == sorted(order) else (
        f"<=[{','.join(map(str, mesh.sizes))}]T({','.join(map(str, order))})")
    return f"{{devices=[{','.join(map(str, tiles))}]{devices}{suffix}}}"


def check_spec(spec: Spec, shape: Shape, mesh: MeshShape, what: str) -> None:
    if len(spec) != shape.rank:
        raise PartitionError(f"{what}: the sharding names {len(spec)} dimensions of a "
                             f"{shape.rank}-d array {shape.to_text(False)}")
    seen: set[str] = set()
    for d, axes in enumerate(spec):
        for a in axes:
            if a not in mesh.names:
                raise PartitionError(f"{what}: sharding {spec_text(spec)} names axis {a!r}, which "
                                     f"the mesh {dict(zip(mesh.names, mesh.sizes))} lacks")
            if a in seen:
                raise PartitionError(f"{what}: sharding {spec_text(spec)} names axis {a!r} twice")
            seen.add(a)
        if shape.dims[d] % mesh.size(axes):
            raise PartitionError(
                f"{what}: dimension {d} of {shape.to_text(False)} does not split into "
                f"{mesh.size(axes)} equal blocks over {axes} (sharding {spec_text(spec)})")


def local_shape(shape: Shape, spec: Spec, mesh: MeshShape) -> Shape:
    return shape.with_dims(tuple(n // mesh.size(axes) for n, axes in zip(shape.dims, spec)))




Value = tuple  # (per-device instruction, spec or TupleSpec)


def is_replicated(spec) -> bool:
    if isinstance(spec, TupleSpec):
        return all(is_replicated(s) for s in spec.elements)
    return not any(spec)


def axes_text(axes) -> str:
    return ", ".join(repr(a) for a in axes)
