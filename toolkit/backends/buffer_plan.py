"""Buffer planning shared by the native backends: every value of the entry computation gets a
slot (one per array leaf), parameters and constants are bound to slots, tuples and
get-tuple-elements are aliases, and every other instruction becomes a step that reads and
writes slots. What a step does (a compiled kernel, a library dot, a fallback) is the backend's."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Generic, TypeVar

import numpy as np

from ..ir.nodes import Instruction, Module
from ..ir.shapes import Shape, TupleShape

StepT = TypeVar("StepT")


@dataclass
class BufferPlan(Generic[StepT]):
    slots: list[Shape]
    arg_slots: list[int]  # parameter number -> slot
    out_slots: list[int]  # the root's leaves, in order (a slot may repeat)
    constants: dict[int, np.ndarray]
    steps: list[StepT]
    produced: set[int] = field(default_factory=set)  # slots some step writes

    @property
    def temp_slots(self) -> set[int]:
        """Slots written by a step and never returned: reusable across calls."""
        return self.produced - set(self.out_slots)


def leaf_shapes(shape) -> list[Shape]:
    return shape.leaves() if isinstance(shape, TupleShape) else [shape]


def plan_buffers(module: Module, make_step: Callable[[Instruction, list[int], list[int]], StepT],
                 updates_in_place: Callable[[Instruction], int | None] | None = None) -> BufferPlan[StepT]:
    """``make_step(inst, input_slots, output_slots)`` for each instruction that computes.

    ``updates_in_place(inst)``: the operand an instruction can overwrite (a dynamic-update-slice
    that writes only its window), or None. When that operand is a temporary that nothing reads
    afterwards, the instruction's output gets the operand's slot: ``make_step`` then sees its
    output slot among its inputs, and the backend writes the window alone, in place."""
    entry = module.entry
    last_use: dict[int, int] = {}
    for position, inst in enumerate(entry.instructions):
        for o in inst.operands:
            last_use[id(o)] = position
    returned = {id(o) for o in (entry.root.operands if entry.root.opcode == "tuple" else ())} | {id(entry.root)}
    slots: list[Shape] = []
    value_slots: dict[int, list[int]] = {}  # instruction -> the slots holding its value(s)
    steps: list[StepT] = []
    constants: dict[int, np.ndarray] = {}
    arg_slots = [0] * len(entry.parameters)

    def new_slots(shape) -> list[int]:
        start = len(slots)
        slots.extend(leaf_shapes(shape))
        return list(range(start, len(slots)))

    produced: set[int] = set()
    for position, inst in enumerate(entry.instructions):
        op = inst.opcode
        if op == "parameter":
            (slot,) = value_slots[id(inst)] = new_slots(inst.shape)
            arg_slots[inst.attrs["parameter_number"]] = slot
        elif op == "constant":
            (slot,) = value_slots[id(inst)] = new_slots(inst.shape)
            constants[slot] = np.array(inst.attrs["literal"])
        elif op == "tuple":
            value_slots[id(inst)] = [s for o in inst.operands for s in value_slots[id(o)]]
        elif op == "get-tuple-element":
            value_slots[id(inst)] = [value_slots[id(inst.operands[0])][inst.attrs["index"]]]
        else:
            inputs = [s for o in inst.operands for s in value_slots[id(o)]]
            k = updates_in_place(inst) if updates_in_place is not None else None
            target = inst.operands[k] if k is not None else None
            if target is not None and target.opcode not in ("parameter", "constant", "tuple", "get-tuple-element") \
                    and last_use.get(id(target)) == position and id(target) not in returned \
                    and sum(o is target for o in inst.operands) == 1 and len(value_slots[id(target)]) == 1:
                outs = value_slots[id(inst)] = list(value_slots[id(target)])  # overwritten in place
            else:
                outs = value_slots[id(inst)] = new_slots(inst.shape)
            produced.update(outs)
            steps.append(make_step(inst, inputs, outs))
    return BufferPlan(slots, arg_slots, list(value_slots[id(entry.root)]), constants, steps, produced)
