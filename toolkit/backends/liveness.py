"""Logical buffers and their liveness, as XLA's dataflow analysis sees them: every instruction
that computes defines one buffer per array leaf of its value; a tuple, a get-tuple-element and
an opt-barrier only pass their operands' buffers on (aliases). A buffer is read by every
computing instruction that takes a value holding it, through however many aliases, and is
live from its definition to its last reader, or to the end when the program returns it.

The buffer plan asks one question of this: may the instruction at ``position`` overwrite
buffer ``b``? Only when no later instruction reads ``b`` (through any alias), the program does
not return ``b``, and ``b`` is neither an argument nor a constant. One forward pass over the
instructions, no recursion: linear in the program's size."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ..ir.nodes import Computation, Instruction
from ..ir.ops import GroupOp
from ..ir.shapes import TupleShape


def leaf_count(shape) -> int:
    return len(shape.leaves()) if isinstance(shape, TupleShape) else 1


@dataclass
class Liveness:
    buffers: dict[int, list[int]]  # id(instruction) -> the buffers holding its value, per leaf
    defined_by: list[Instruction]  # buffer -> the instruction that defines it
    last_read: list[int]  # buffer -> position of its last reader (-1: never read)
    last_reader: list[Instruction | None]  # buffer -> that reader
    outputs: frozenset[int]  # the buffers the program returns
    _counted: Instruction | None = None
    _counts: Counter = field(default_factory=Counter)

    def reads(self, inst: Instruction) -> list[int]:
        """The buffers ``inst`` reads, in operand order (a buffer twice if read twice)."""
        return [b for o in inst.operands for b in self.buffers[id(o)]]

    def times_read(self, inst: Instruction, b: int) -> int:
        """How many of ``inst``'s operand leaves are buffer ``b`` (counted once per
        instruction, however many buffers are asked about: a loop with many state leaves)."""
        if self._counted is not inst:
            self._counts = Counter(self.reads(inst))
            self._counted = inst
        return self._counts[b]

    def given(self, b: int) -> bool:
        """Is ``b`` an argument's or a constant's buffer (not the program's to overwrite)?"""
        return self.defined_by[b].opcode in GroupOp.GIVEN


def analyse(comp: Computation) -> Liveness:
    buffers: dict[int, list[int]] = {}
    defined_by: list[Instruction] = []
    last_read: list[int] = []
    last_reader: list[Instruction | None] = []
    offsets: dict[int, list[int]] = {}  # tuple-valued instruction -> first leaf of each element
    for position, inst in enumerate(comp.instructions):
        op = inst.opcode
        if op == "tuple":
            buffers[id(inst)] = [b for o in inst.operands for b in buffers[id(o)]]
        elif op == "opt-barrier":
            buffers[id(inst)] = list(buffers[id(inst.operands[0])])
        elif op == "get-tuple-element":
            source = inst.operands[0]
            starts = offsets.get(id(source))
            if starts is None:
                starts = offsets[id(source)] = [0]
                for element in source.shape.elements:
                    starts.append(starts[-1] + leaf_count(element))
            k = inst.attrs["index"]
            buffers[id(inst)] = buffers[id(source)][starts[k]: starts[k + 1]]
        else:
            for o in inst.operands:
                for b in buffers[id(o)]:
                    last_read[b] = position
                    last_reader[b] = inst
            first = len(defined_by)
            n = leaf_count(inst.shape)
            defined_by.extend([inst] * n)
            last_read.extend([-1] * n)
            last_reader.extend([None] * n)
            buffers[id(inst)] = list(range(first, first + n))
    return Liveness(
        buffers, defined_by, last_read, last_reader, frozenset(buffers[id(comp.root)])
    )
