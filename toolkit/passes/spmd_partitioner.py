"""SPMD partitioning: a program written for whole arrays becomes the program each device of a
mesh runs on its blocks, with the collectives that make the blocks add up, as XLA's sharding
propagation and SPMD partitioner do for ``jax.jit(in_shardings=...)``.

A *spec* says, per dimension of an array, the mesh axes that split it (the first named the
major one, JAX's ``PartitionSpec``); ``()`` for every dimension is a replicated array. The
parameters' specs are given. One walk in program order gives every instruction a spec and its
per-device instruction, by one rule per op (``RULES``, checked complete by a test):

- elementwise ops take the spec of their most split operand; an operand split otherwise is
  resharded (a replicated one is sliced: no communication);
- broadcast, transpose and reshape carry the split dimensions to where they go (a reshape
  keeps a split where it is the major dimension of a group of merged or split dimensions);
- a reduce over split dimensions reduces each device's block, then all-reduces the partial
  results over those axes (when folding the init value in twice changes nothing);
- a dot keeps split batch and free dimensions; contracting dimensions split alike on both
  operands give partial sums, all-reduced (Megatron's row-parallel matmul); an operand
  replicated where the other is split is sliced to match;
- slice, pad, reverse, concatenate, dynamic-slice, dynamic-update-slice and sort keep the
  split of every dimension they do not touch;
- every other op (gather, scatter, loops, library calls ...) runs on replicated operands:
  their split dimensions are all-gathered first, and the decision says so.

Resharding gathers the dimensions whose split changes (all-gather over the old axes) and
slices those newly split (``dynamic-slice`` at offsets a constant table indexes by
``partition-id``, as XLA's partitioner does). Every collective inserted, and why, is a
``PartitionDecision``. One walk, a bounded amount of work per instruction: linear in program
size, iterative."""
from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import Callable, Sequence

import numpy as np

from ..ir.builder import ComputationBuilder, NameUniquer
from ..ir.collectives import mesh_groups
from ..ir.dtypes import from_name
from ..ir.nodes import Computation, Instruction, Module
from ..ir.ops import OPS, RAW_ATTRIBUTES, GroupOp
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


def partition(module: Module, mesh: MeshShape, in_specs: Sequence[Spec],
              out_specs: Sequence[Spec | None] | None = None) -> Partitioned:
    """The program each device runs (see the module docstring). ``in_specs``: one per entry
    parameter; ``out_specs``: one per result (None: as propagated), or None for all."""
    for comp in module.computations:
        for inst in comp.instructions:
            if inst.opcode in GroupOp.COLLECTIVE:
                raise PartitionError(
                    f"{module.name} already holds a collective (%{inst.name}, {inst.opcode}): "
                    "a program partitioned by its shardings must be written for whole arrays")
    return _Partitioner(module, mesh).run(tuple(in_specs), out_specs)


Value = tuple  # (per-device instruction, spec or TupleSpec)


class _Partitioner:
    def __init__(self, module: Module, mesh: MeshShape):
        self.module = module
        self.mesh = mesh
        # every name is taken in advance, so that the names made up for inserted instructions
        # never meet a later original's; each original is then handed its own (``take``)
        names = [i.name for c in module.computations for i in c.instructions]
        names += [c.name for c in module.computations]
        self.uniquer = NameUniquer.from_names(names)
        self.b = ComputationBuilder(module.entry.name, self.uniquer)
        self.decisions: list[PartitionDecision] = []
        self.regions: dict[tuple[str, str], Computation] = {}
        self.current: Instruction | None = None
        self._pid: Instruction | None = None
        self._offsets: dict[tuple, Instruction] = {}
        self.values: dict[int, Value] = {}  # original instruction -> its per-device value
        self.origin: dict[int, Instruction] = {}  # per-device instruction -> its original

    # ----------------------------------------------------------------------------- driving
    def run(self, in_specs: tuple, out_specs) -> Partitioned:
        entry = self.module.entry
        if len(in_specs) != len(entry.parameters):
            raise PartitionError(f"{self.module.name} has {len(entry.parameters)} parameters but "
                                 f"{len(in_specs)} shardings were given")
        values = self.values
        for param, spec in zip(entry.parameters, in_specs):
            if not isinstance(param.shape, Shape):
                raise PartitionError(f"parameter %{param.name} is a tuple: pass its elements")
            check_spec(spec, param.shape, self.mesh, f"parameter %{param.name}")
            raw = ((RAW_ATTRIBUTES, (("sharding", xla_sharding(spec, self.mesh)),)),)
            local = self.b.parameter(param.attrs["parameter_number"],
                                     local_shape(param.shape, spec, self.mesh),
                                     self.uniquer.take(param.name),
                                     param.metadata, exact_name=True, attrs=dict(raw))
            values[id(param)] = (local, spec)
        for inst in entry.instructions:
            if inst.opcode == "parameter":
                continue
            self.current = inst
            operands = [values[id(o)] for o in inst.operands]
            values[id(inst)] = RULES[inst.opcode](self, inst, operands)
        self.current = entry.root
        root = self._to_out_specs(entry.root, values[id(entry.root)], out_specs)
        built = self.b.build(root[0])
        callees = tuple(c for c in self.module.computations if c is not entry)
        attributes = tuple((k, v) for k, v in self.module.attributes if k != "num_partitions")
        module = Module(self.module.name, callees + tuple(self.regions.values()) + (built,),
                        built, attributes + (("num_partitions", str(self.mesh.devices)),))
        out = root[1].elements if isinstance(root[1], TupleSpec) else (root[1],)
        return Partitioned(module, out, tuple(self.decisions))

    def _to_out_specs(self, root: Instruction, value: Value, out_specs) -> Value:
        if out_specs is None:
            return value
        out_specs = tuple(out_specs)
        if isinstance(value[1], TupleSpec):
            shapes = root.shape.elements
            if len(out_specs) != len(shapes):
                raise PartitionError(f"{len(out_specs)} output shardings for {len(shapes)} outputs")
            elements = [self._element(value, k, shape) for k, shape in enumerate(shapes)]
            moved = [e if s is None else self._reshard(e, s, shape, f"output {k}")
                     for k, (e, s, shape) in enumerate(zip(elements, out_specs, shapes))]
            return self._tuple(moved)
        if len(out_specs) != 1:
            raise PartitionError(f"{len(out_specs)} output shardings for 1 output")
        if out_specs[0] is None:
            return value
        return self._reshard(value, out_specs[0], root.shape, "output 0")

    # ---------------------------------------------------------------------------- emitting
    def emit(self, opcode: str, operands, attrs=None, shape=None, metadata: bool = True
             ) -> Instruction:
        """An inserted instruction, with the metadata of the one it serves (``metadata``)."""
        source = self.current if metadata else None
        return self.b.add(opcode, operands, attrs, shape,
                          source.metadata if source is not None else None)

    def local(self, inst: Instruction, operands, spec: Spec, attrs=None) -> Value:
        """``inst`` on each device's blocks, its result split by ``spec``."""
        shape = local_shape(inst.shape, spec, self.mesh) if isinstance(inst.shape, Shape) \
            else inst.shape
        new = self.b.add(inst.opcode, operands, inst.attrs if attrs is None else attrs, shape,
                         inst.metadata, self.uniquer.take(inst.name))
        self.origin[id(new)] = inst
        return (new, spec)

    def decide(self, collective: str, axes, message: str) -> None:
        inst = self.current
        location = inst.metadata.location if inst is not None and inst.metadata else ""
        self.decisions.append(PartitionDecision(
            inst.name if inst is not None else "", inst.opcode if inst is not None else "",
            location, collective, tuple(axes), message))

    def reducer(self, opcode: str, dtype) -> Computation:
        key = (opcode, dtype.name)
        if key not in self.regions:
            b = ComputationBuilder(self.uniquer.fresh("region"), self.uniquer)
            scalar = Shape(dtype, ())
            lhs = b.parameter(0, scalar, "Arg_0")
            rhs = b.parameter(1, scalar, "Arg_1")
            self.regions[key] = b.build(b.add(opcode, (lhs, rhs)))
        return self.regions[key]

    def all_reduce(self, inst: Instruction, axes: tuple[str, ...], to_apply: Computation
                   ) -> Instruction:
        return self.emit("all-reduce", (inst,), {
            "replica_groups": self.mesh.groups(axes), "channel_id": 1,
            "use_global_device_ids": True, "to_apply": to_apply})

    # --------------------------------------------------------------------------- resharding
    def _reshard(self, value: Value, target: Spec, shape: Shape, what: str) -> Value:
        """``value`` (of global ``shape``) split by ``target`` instead."""
        inst, spec = value
        if spec == target:
            return value
        check_spec(target, shape, self.mesh, what)
        remade = self._remade(inst, spec, target)
        if remade is not None:
            return (remade, target)
        for d, (old, new) in enumerate(zip(spec, target)):
            if old and old != new:  # gather dimension d over the axes that split it
                dims = list(inst.shape.dims)
                dims[d] *= self.mesh.size(old)
                inst = self.emit("all-gather", (inst,), {
                    "replica_groups": self.mesh.groups(old), "channel_id": 1,
                    "use_global_device_ids": True, "dimensions": (d,)},
                    inst.shape.with_dims(tuple(dims)))
                self.decide("all-gather", old,
                            f"{what}: dimension {d} split over {_axes_text(old)} is gathered "
                            f"({'replicated' if not new else f'split over {_axes_text(new)}'} "
                            f"is needed): {_bytes(inst.shape.nbytes)} per device")
        sliced = [d for d, (old, new) in enumerate(zip(spec, target)) if new and old != new]
        if sliced:
            local = local_shape(shape, target, self.mesh)
            starts = [self._offset(target[d], local.dims[d]) if d in sliced
                      else self._zero() for d in range(shape.rank)]
            inst = self.emit("dynamic-slice", (inst, *starts),
                             {"dynamic_slice_sizes": local.dims}, local)
        return (inst, target)

    def _remade(self, inst: Instruction, spec: Spec, target: Spec) -> Instruction | None:
        """A replicated broadcast or iota wanted split is made again at the block's size
        (what XLA's sharding propagation achieves by giving it the sharding of its user), rather
        than made whole and sliced: where the split dimensions are new in the broadcast, or not
        the iota's counting dimension."""
        original = self.origin.get(id(inst))
        if original is None or any(spec) or not isinstance(original.shape, Shape):
            return None
        split = {d for d, axes in enumerate(target) if axes}
        local = local_shape(original.shape, target, self.mesh)
        if original.opcode == "broadcast" and not split & set(original.attrs["dimensions"]):
            operand = self.values[id(original.operands[0])][0]
            return self.emit("broadcast", (operand,), original.attrs, local)
        if original.opcode == "iota" and original.attrs["iota_dimension"] not in split:
            return self.emit("iota", (), original.attrs, local)
        return None

    def _replicate(self, value: Value, shape, what: str) -> Value:
        if isinstance(value[1], TupleSpec):
            if all(_is_replicated(s) for s in value[1].elements):
                return value
            elements = [self._replicate(self._element(value, k, s), s, what)
                        for k, s in enumerate(shape.elements)]
            return self._tuple(elements)
        return self._reshard(value, replicated(shape.rank), shape, what)

    def _element(self, value: Value, k: int, shape) -> Value:
        inst, spec = value
        element_spec = spec.elements[k]
        local = local_shape(shape, element_spec, self.mesh) if isinstance(shape, Shape) else shape
        return (self.emit("get-tuple-element", (inst,), {"index": k}, local), element_spec)

    def _tuple(self, elements: list[Value]) -> Value:
        return (self.emit("tuple", tuple(e[0] for e in elements)),
                TupleSpec(tuple(e[1] for e in elements)))

    def _partition_id(self) -> Instruction:
        if self._pid is None:
            pid = self.emit("partition-id", (), metadata=False)
            self._pid = self.emit("convert", (pid,), shape=Shape(from_name("s32"), ()),
                                  metadata=False)
        return self._pid

    def _zero(self) -> Instruction:
        return self._offset((), 0)

    def _offset(self, axes: tuple[str, ...], block: int) -> Instruction:
        """This device's start along a dimension split over ``axes`` in blocks of ``block``:
        a constant table of every device's start, indexed by partition-id (XLA's way)."""
        key = (axes, block)
        if key not in self._offsets:
            s32 = Shape(from_name("s32"), ())
            if not axes or block == 0:
                self._offsets[key] = self.b.constant(np.int32(0))
            else:
                table = np.array([self.mesh.block_number(d, axes) * block
                                  for d in range(self.mesh.devices)], np.int32)
                constant = self.b.constant(table)
                picked = self.emit("dynamic-slice", (constant, self._partition_id()),
                                   {"dynamic_slice_sizes": (1,)},
                                   Shape(from_name("s32"), (1,)), metadata=False)
                self._offsets[key] = self.emit("reshape", (picked,), shape=s32, metadata=False)
        return self._offsets[key]


def _is_replicated(spec) -> bool:
    if isinstance(spec, TupleSpec):
        return all(_is_replicated(s) for s in spec.elements)
    return not any(spec)


def _axes_text(axes) -> str:
    return ", ".join(repr(a) for a in axes)


def _bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def _used(spec: Spec) -> set[str]:
    return {a for axes in spec for a in axes}


def _split_count(p: _Partitioner, spec: Spec) -> int:
    return math.prod(p.mesh.size(axes) for axes in spec)


# ------------------------------------------------------------------------------------- rules
Rule = Callable[[_Partitioner, Instruction, list], Value]


def _replicated_rule(p: _Partitioner, inst: Instruction, operands: list[Value]) -> Value:
    """The op runs on whole arrays: every operand replicated, the result too."""
    gathered = []
    for k, (value, op) in enumerate(zip(operands, inst.operands)):
        before = len(p.decisions)
        gathered.append(p._replicate(value, op.shape, f"operand {k} of {inst.opcode}"))
        for j in range(before, len(p.decisions)):  # say why: the op needs whole arrays
            d = p.decisions[j]
            p.decisions[j] = PartitionDecision(
                d.instruction, d.opcode, d.location, d.collective, d.axes,
                d.message + f"; {inst.opcode} is not partitioned: it runs on whole arrays")
    spec = _replicated_spec(inst.shape)
    return p.local(inst, [g[0] for g in gathered], spec)


def _replicated_spec(shape):
    if isinstance(shape, Shape):
        return replicated(shape.rank)
    return TupleSpec(tuple(_replicated_spec(s) for s in shape.elements))


def _leaf(p: _Partitioner, inst: Instruction, operands: list[Value]) -> Value:
    """Constants and iotas: made whole on every device (cheap; a consumer slices them)."""
    return p.local(inst, [], replicated(inst.shape.rank))


def _elementwise(p: _Partitioner, inst: Instruction, operands: list[Value]) -> Value:
    arrays = [v for v, o in zip(operands, inst.operands) if o.shape.rank]
    if not arrays:
        return p.local(inst, [v[0] for v in operands], ())
    target = max((v[1] for v in arrays), key=lambda s: _split_count(p, s))
    moved = [v if not o.shape.rank else
             p._reshard(v, target, o.shape, f"operand {k} of {inst.opcode}")
             for k, (v, o) in enumerate(zip(operands, inst.operands))]
    return p.local(inst, [m[0] for m in moved], target)


def _broadcast(p: _Partitioner, inst: Instruction, operands: list[Value]) -> Value:
    (operand, spec), = operands
    out = [()] * inst.shape.rank
    for i, d in enumerate(inst.attrs["dimensions"]):
        out[d] = spec[i]  # (XLA's broadcast keeps each operand dimension's size)
    return p.local(inst, [operand], tuple(out))


def _bitcast_convert(p: _Partitioner, inst: Instruction, operands: list[Value]) -> Value:
    """Same-width types: elementwise; another width adds or drops a minor dimension."""
    if inst.shape.rank == inst.operands[0].shape.rank:
        return _elementwise(p, inst, operands)
    return _replicated_rule(p, inst, operands)


def _transpose(p: _Partitioner, inst: Instruction, operands: list[Value]) -> Value:
    (operand, spec), = operands
    return p.local(inst, [operand], tuple(spec[d] for d in inst.attrs["dimensions"]))


def _reshape(p: _Partitioner, inst: Instruction, operands: list[Value]) -> Value:
    """A split survives a reshape where it is on the major dimension of a group of dimensions
    that merge or split (the blocks are then contiguous runs on both sides) and the group's
    major result dimension splits as evenly; other splits are gathered first."""
    (operand, spec), = operands
    source, result = inst.operands[0].shape.dims, inst.shape.dims
    out: list[tuple[str, ...]] = [()] * len(result)
    keep = list(spec)
    for ins, outs in _reshape_groups(source, result):
        for position, d in enumerate(ins):
            if not spec[d]:
                continue
            if position == 0 and outs and result[outs[0]] % p.mesh.size(spec[d]) == 0:
                out[outs[0]] = spec[d]
            else:
                keep[d] = ()
    if tuple(keep) != spec:
        operand, spec = p._reshard((operand, spec), tuple(keep), inst.operands[0].shape,
                                   "operand of reshape")
    return p.local(inst, [operand], tuple(out))


def _reshape_groups(source, result) -> list[tuple[list[int], list[int]]]:
    """The dimensions of a reshape in groups of equal element counts (size-1 dimensions are
    groups of their own on one side)."""
    groups = []
    i = j = 0
    while i < len(source) or j < len(result):
        if i < len(source) and source[i] == 1:
            groups.append(([i], []))
            i += 1
            continue
        if j < len(result) and result[j] == 1:
            groups.append(([], [j]))
            j += 1
            continue
        ins, outs = [i], [j]
        a, b = source[i], result[j]
        i, j = i + 1, j + 1
        while a != b:
            if a < b:
                a *= source[i]
                ins.append(i)
                i += 1
            else:
                b *= result[j]
                outs.append(j)
                j += 1
        groups.append((ins, outs))
    return groups


def _reduce(p: _Partitioner, inst: Instruction, operands: list[Value]) -> Value:
    if len(inst.operands) != 2 or not isinstance(inst.shape, Shape):
        return _replicated_rule(p, inst, operands)  # (variadic: argmax and friends)
    (operand, spec), (init, _) = operands
    reduced = set(inst.attrs["dimensions"])
    axes = tuple(a for d in sorted(reduced) for a in spec[d])
    kept = tuple(spec[d] for d in range(len(spec)) if d not in reduced)
    if axes and not _partials_combine(inst):
        spec2 = tuple(() if d in reduced else s for d, s in enumerate(spec))
        operand, spec = p._reshard((operand, spec), spec2, inst.operands[0].shape,
                                   f"operand of reduce ({_combiner(inst) or 'its computation'} "
                                   "cannot combine partial results)")
        axes = ()
    partial, _ = p.local(inst, [operand, init], kept)
    if not axes:
        return (partial, kept)
    combined = p.all_reduce(partial, axes, inst.attrs["to_apply"])
    p.decide("all-reduce", axes,
             f"reduce over dimension(s) {sorted(d for d in reduced if spec[d])} split over "
             f"{_axes_text(axes)}: each device reduces its block, then the partial results are "
             f"combined by {_combiner(inst)} ({_bytes(partial.shape.nbytes)} per device)")
    return (combined, kept)


def _combiner(inst: Instruction) -> str | None:
    """The reducer a reduce's computation applies to its two parameters, if it is one."""
    comp = inst.attrs["to_apply"]
    root = comp.root
    if (root.opcode in GroupOp.REDUCERS and len(root.operands) == 2
            and set(map(id, root.operands)) == set(map(id, comp.parameters))):
        return root.opcode
    return None


def _partials_combine(inst: Instruction) -> bool:
    """Each device folds the init value in once: combining their partial results folds it in
    once per device, which is the same when the init value combined with itself is itself
    (0 for sums, any value for max/min). Integer and float sums are fine; a constant init is
    needed to know."""
    op = _combiner(inst)
    init = inst.operands[1]
    if op is None or init.opcode != "constant":
        return False
    ufunc = OPS[op].ufunc
    if ufunc is None:
        return False
    value = np.asarray(init.attrs["literal"], init.shape.dtype.numpy)
    with np.errstate(all="ignore"):
        twice = np.asarray(ufunc(value, value)).astype(value.dtype)
    return bool(np.array_equal(twice, value, equal_nan=True)
                and np.array_equal(np.signbit(twice), np.signbit(value))
                if value.dtype.kind in "fc" else np.array_equal(twice, value))


def _dot(p: _Partitioner, inst: Instruction, operands: list[Value]) -> Value:
    (lhs, ls), (rhs, rs) = operands
    a = inst.attrs
    lb, rb = tuple(a.get("lhs_batch_dims", ())), tuple(a.get("rhs_batch_dims", ()))
    lc, rc = tuple(a.get("lhs_contracting_dims", ())), tuple(a.get("rhs_contracting_dims", ()))
    lhs_shape, rhs_shape = inst.operands[0].shape, inst.operands[1].shape
    lfree = [d for d in range(lhs_shape.rank) if d not in lb and d not in lc]
    rfree = [d for d in range(rhs_shape.rank) if d not in rb and d not in rc]
    lt: list[tuple[str, ...]] = [()] * lhs_shape.rank
    rt: list[tuple[str, ...]] = [()] * rhs_shape.rank
    used: set[str] = set()
    # matched dimensions (batch, then contracting) take the split of the side that has one
    contract_ok = inst.shape.dtype.name != "pred"
    for pairs, ok in ((zip(lb, rb), True), (zip(lc, rc), contract_ok)):
        for dl, dr in pairs:
            axes = ls[dl] or rs[dr]
            if ok and axes and not (set(axes) & used):
                lt[dl] = rt[dr] = axes
                used.update(axes)
    for free, spec, target in ((lfree, ls, lt), (rfree, rs, rt)):
        for d in free:
            if spec[d] and not (set(spec[d]) & used):
                target[d] = spec[d]
                used.update(spec[d])
    lhs, _ = p._reshard((lhs, ls), tuple(lt), lhs_shape, "lhs of dot")
    rhs, _ = p._reshard((rhs, rs), tuple(rt), rhs_shape, "rhs of dot")
    out = tuple([lt[d] for d in lb] + [lt[d] for d in lfree] + [rt[d] for d in rfree])
    product, _ = p.local(inst, [lhs, rhs], out)
    partial = tuple(x for d in lc for x in lt[d])
    if not partial:
        return (product, out)
    summed = p.all_reduce(product, partial, p.reducer("add", inst.shape.dtype))
    p.decide("all-reduce", partial,
             f"contracting dimension(s) {[d for d in lc if lt[d]]} of the lhs split over "
             f"{_axes_text(partial)} on both operands: each device multiplies its blocks, then "
             f"the partial sums are added ({_bytes(product.shape.nbytes)} per device)")
    return (summed, out)


def _untouched(touched: Callable[[Instruction], set[int]]) -> Rule:
    """Ops that keep the split of every dimension they do not touch (slice, pad, ...): their
    operands are resharded to one spec with the touched dimensions whole, and the op's
    attributes are given the blocks' sizes."""
    def rule(p: _Partitioner, inst: Instruction, operands: list[Value]) -> Value:
        if not isinstance(inst.shape, Shape):
            return _replicated_rule(p, inst, operands)
        dims = touched(inst)
        rank = inst.shape.rank
        arrays = [(k, v) for k, (v, o) in enumerate(zip(operands, inst.operands))
                  if isinstance(o.shape, Shape) and o.shape.rank == rank]
        base = max((v[1] for _, v in arrays), key=lambda s: _split_count(p, s))
        target = tuple(() if d in dims else axes for d, axes in enumerate(base))
        moved = list(operands)
        for k, v in arrays:
            moved[k] = p._reshard(v, target, inst.operands[k].shape,
                                  f"operand {k} of {inst.opcode}")
        for k, (v, o) in enumerate(zip(operands, inst.operands)):  # scalars: indices, values
            if (k, v) not in arrays and isinstance(o.shape, Shape) and o.shape.rank:
                moved[k] = p._replicate(v, o.shape, f"operand {k} of {inst.opcode}")
        attrs = _local_attrs(inst, target, p.mesh)
        return p.local(inst, [m[0] for m in moved], target, attrs)
    return rule


def _local_attrs(inst: Instruction, spec: Spec, mesh: MeshShape):
    """The op's attributes for blocks: sizes of split dimensions divided."""
    attrs = dict(inst.attrs)
    if inst.opcode == "slice":
        attrs["slice"] = tuple((start, limit if not spec[d] else limit // mesh.size(spec[d]), step)
                               for d, (start, limit, step) in enumerate(attrs["slice"]))
    elif inst.opcode == "dynamic-slice":
        attrs["dynamic_slice_sizes"] = local_shape(inst.shape, spec, mesh).dims
    return MappingProxyType(attrs)


def _slice_touched(inst):
    return {d for d, bounds in enumerate(inst.attrs["slice"])
            if tuple(bounds) != (0, inst.operands[0].shape.dims[d], 1)}


def _pad_touched(inst):
    return {d for d, padding in enumerate(inst.attrs["padding"]) if any(padding)}


def _dynamic_slice_touched(inst):
    return {d for d, n in enumerate(inst.attrs["dynamic_slice_sizes"])
            if n != inst.operands[0].shape.dims[d]}


def _update_touched(inst):
    return {d for d, n in enumerate(inst.operands[1].shape.dims)
            if n != inst.operands[0].shape.dims[d]}


def _named_dimensions(inst):
    return set(inst.attrs["dimensions"])


def _tuple(p: _Partitioner, inst: Instruction, operands: list[Value]) -> Value:
    return (p.emit("tuple", [v[0] for v in operands]), TupleSpec(tuple(v[1] for v in operands)))


def _get_tuple_element(p: _Partitioner, inst: Instruction, operands: list[Value]) -> Value:
    (value, spec), = operands
    if not isinstance(spec, TupleSpec):
        return _replicated_rule(p, inst, operands)
    return p._element((value, spec), inst.attrs["index"], inst.shape)


def _refused(p: _Partitioner, inst: Instruction, operands: list[Value]) -> Value:
    raise PartitionError(f"%{inst.name} is a {inst.opcode}: a partitioned program is written "
                         "for whole arrays")


# one rule per op (tests/test_spmd_partitioner.py checks that every op has one)
RULES: dict[str, Rule] = {op: _elementwise for op in GroupOp.ELEMENTWISE}
RULES.update({op: _refused for op in GroupOp.COLLECTIVE})
RULES.update({
    "bitcast-convert": _bitcast_convert,
    "parameter": _refused,  # (parameters are given their specs before the walk)
    "constant": _leaf,
    "iota": _leaf,
    "broadcast": _broadcast,
    "transpose": _transpose,
    "reshape": _reshape,
    "bitcast": _reshape,
    "copy": _elementwise,
    "slice": _untouched(_slice_touched),
    "pad": _untouched(_pad_touched),
    "reverse": _untouched(_named_dimensions),
    "concatenate": _untouched(_named_dimensions),
    "dynamic-slice": _untouched(_dynamic_slice_touched),
    "dynamic-update-slice": _untouched(_update_touched),
    "sort": _untouched(_named_dimensions),
    "reduce": _reduce,
    "dot": _dot,
    "tuple": _tuple,
    "get-tuple-element": _get_tuple_element,
    # on whole arrays: indices are data (gather, scatter), loops and calls run their
    # computations on whole arrays, library calls (LAPACK, FFT) want whole matrices
    "gather": _replicated_rule,
    "scatter": _replicated_rule,
    "while": _replicated_rule,
    "conditional": _replicated_rule,
    "call": _replicated_rule,
    "fusion": _replicated_rule,
    "custom-call": _replicated_rule,
    "opt-barrier": _replicated_rule,
})
