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

from typing import Sequence

import numpy as np

from ..ir.builder import ComputationBuilder, NameUniquer, binary_region
from ..ir.dtypes import from_name
from ..ir.nodes import Computation, Instruction, Module
from ..ir.ops import RAW_ATTRIBUTES, GroupOp
from ..ir.shapes import Shape
from ..profiler.units import binary_bytes
from .shardings import (MeshShape, PartitionDecision, Partitioned, PartitionError, Spec,
                        TupleSpec, Value, axes_text, check_spec, is_replicated,
                        local_shape, replicated, xla_sharding)
from .spmd_rules import RULES


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
        self.hints: dict[int, Spec] = {}  # the sharding a later user wants (out_shardings)
        self._resharded: dict[tuple, Value] = {}  # (per-device instruction, spec) -> value
        self.origin: dict[int, Instruction] = {}  # per-device instruction -> its original

    # ----------------------------------------------------------------------------- driving
    def run(self, in_specs: tuple, out_specs) -> Partitioned:
        entry = self.module.entry
        if len(in_specs) != len(entry.parameters):
            raise PartitionError(f"{self.module.name} has {len(entry.parameters)} parameters but "
                                 f"{len(in_specs)} shardings were given")
        values = self.values
        self.hints = _wanted_shardings(entry, out_specs)
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
            self.regions[key] = binary_region(
                ComputationBuilder(self.uniquer.fresh("region"), self.uniquer), opcode, dtype)
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
        key = (id(inst), target)
        done = self._resharded.get(key)
        if done is not None:  # (a value many ops want whole is gathered once)
            return done
        remade = self._remade(inst, spec, target)
        if remade is not None:
            self._resharded[key] = (remade, target)
            return (remade, target)
        self._resharded[key] = result = self._moved(inst, spec, target, shape, what)
        return result

    def _moved(self, inst: Instruction, spec: Spec, target: Spec, shape: Shape, what: str
               ) -> Value:
        for d, (old, new) in enumerate(zip(spec, target)):
            if old and old != new:  # gather dimension d over the axes that split it
                dims = list(inst.shape.dims)
                dims[d] *= self.mesh.size(old)
                inst = self.emit("all-gather", (inst,), {
                    "replica_groups": self.mesh.groups(old), "channel_id": 1,
                    "use_global_device_ids": True, "dimensions": (d,)},
                    inst.shape.with_dims(tuple(dims)))
                self.decide("all-gather", old,
                            f"{what}: dimension {d} split over {axes_text(old)} is gathered "
                            f"({'replicated' if not new else f'split over {axes_text(new)}'} "
                            f"is needed): {binary_bytes(inst.shape.nbytes)} per device")
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
            if all(is_replicated(s) for s in value[1].elements):
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




def _wanted_shardings(entry: Computation, out_specs) -> dict[int, Spec]:
    """The shardings the outputs ask for (``out_shardings``), carried back through the
    elementwise ops, broadcasts and transposes that make them (XLA's sharding propagation,
    backwards): an op whose operands are all replicated then runs on the blocks the output
    wants, its operands sliced locally, instead of on whole arrays sliced at the end."""
    if out_specs is None:
        return {}
    root = entry.root
    wanted: dict[int, Spec] = {}
    outputs = root.operands if root.opcode == "tuple" else (root,)
    for inst, spec in zip(outputs, tuple(out_specs)):
        if spec is not None and any(spec) and isinstance(inst.shape, Shape):
            wanted.setdefault(id(inst), tuple(spec))
    for inst in reversed(entry.instructions):  # users before their operands
        spec = wanted.get(id(inst))
        if spec is None:
            continue
        if inst.opcode in GroupOp.ELEMENTWISE and inst.opcode != "bitcast-convert":
            for op in inst.operands:
                if op.shape.rank == len(spec):
                    wanted.setdefault(id(op), spec)
        elif inst.opcode == "broadcast":
            dims = inst.attrs["dimensions"]
            wanted.setdefault(id(inst.operands[0]), tuple(spec[d] for d in dims))
        elif inst.opcode == "transpose":
            perm = inst.attrs["dimensions"]
            inverse = [0] * len(perm)
            for i, d in enumerate(perm):
                inverse[d] = i
            wanted.setdefault(id(inst.operands[0]), tuple(spec[inverse[d]]
                                                          for d in range(len(perm))))
    return wanted
