"""Buffer planning shared by the native backends: every value of the entry computation gets a
slot (one per array leaf), parameters and constants are bound to slots, tuples and
get-tuple-elements are aliases, and every other instruction becomes a step that reads and
writes slots. What a step does (a compiled kernel, a library dot, a fallback) is the backend's."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Generic, TypeVar

import numpy as np

from ..ir.nodes import Instruction, Module
from ..ir.ops import GroupOp
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
    # output positions written into their argument
    in_place_outputs: set[int] = field(default_factory=set)

    @property
    def temp_slots(self) -> set[int]:
        """Slots written by a step and never returned: reusable across calls."""
        return self.produced - set(self.out_slots)


def leaf_shapes(shape) -> list[Shape]:
    return shape.leaves() if isinstance(shape, TupleShape) else [shape]


def donated_arguments(module: Module) -> dict[int, int]:
    """output index -> parameter number, for XLA's ``input_output_alias`` entries marked
    ``must-alias``: the caller's buffer receives the new value, so it may be written in place."""
    text = dict(module.attributes).get("input_output_alias", "")
    return {int(out): int(param) for out, param in
            re.findall(r"\{(\d+)\}:\s*\((\d+),\s*\{\},\s*must-alias\)", text)}


def plan_buffers(
    module: Module,
    make_step: Callable[[Instruction, list[int], list[int]], StepT],
    updates_in_place: Callable[[Instruction], int | None] | None = None,
    overwritable: Callable[[Instruction], set[int]] | None = None,
) -> BufferPlan[StepT]:
    """``make_step(inst, input_slots, output_slots)`` for each instruction that computes.

    ``updates_in_place(inst)``: the operand an instruction can overwrite (a dynamic-update-slice
    that writes only its window), or None. When that operand is a temporary that nothing reads
    afterwards, the instruction's output gets the operand's slot: ``make_step`` then sees its
    output slot among its inputs, and the backend writes the window alone, in place.

    ``overwritable(inst)``: operands an elementwise kernel may overwrite. With them, a donated
    argument (``must-alias``) whose new value an instruction computes as its last reader gets
    that instruction's output written straight into the caller's array: no copy back."""
    entry = module.entry
    last_use: dict[int, int] = {}
    for position, inst in enumerate(entry.instructions):
        for o in inst.operands:
            last_use[id(o)] = position
    returned = {id(o) for o in (entry.root.operands if entry.root.opcode == "tuple" else ())} | {
        id(entry.root)
    }
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
    root_outputs = list(entry.root.operands) if entry.root.opcode == "tuple" else [entry.root]
    donated = donated_arguments(module)
    in_place_outputs: set[int] = set()

    def donated_operand(inst, position) -> tuple[int, int] | None:
        """(operand index, output index) when ``inst`` may write its donated argument in place."""
        for out_index, param_number in donated.items():
            if out_index >= len(root_outputs) or root_outputs[out_index] is not inst:
                continue
            allowed = set(overwritable(inst)) if overwritable is not None else set()
            k = updates_in_place(inst) if updates_in_place is not None else None
            allowed |= {k} if k is not None else set()
            for j in allowed:
                target = inst.operands[j]
                if (
                    target.opcode == "parameter"
                    and target.attrs["parameter_number"] == param_number
                    and last_use.get(id(target)) == position
                    and id(target) not in returned
                    and sum(o is target for o in inst.operands) == 1
                    and sum(o is inst for o in root_outputs) == 1
                ):
                    return j, out_index
        return None

    def chains_into_arguments() -> dict[int, tuple[int, int]]:
        """First instruction -> (operand index, output index) for each chain of in-place updates
        (a dynamic-update-slice of a dynamic-update-slice ... of a donated argument: an unrolled
        loop writing into its argument trip after trip) that ends in that argument's output. Every
        link is checked here as the loop below will check it, so the whole chain stays in the
        caller's array."""
        position_of = {id(inst): k for k, inst in enumerate(entry.instructions)}
        starts: dict[int, tuple[int, int]] = {}
        for out_index, param_number in donated.items():
            if (
                out_index >= len(root_outputs)
                or sum(o is root_outputs[out_index] for o in root_outputs) != 1
            ):
                continue
            x = root_outputs[out_index]
            while x.opcode not in GroupOp.BOOKKEEPING:
                k = updates_in_place(x) if updates_in_place is not None else None
                if k is None and overwritable is not None:  # the first link may be elementwise
                    k = next(
                        (
                            j
                            for j in sorted(overwritable(x))
                            if x.operands[j].opcode == "parameter"
                            and x.operands[j].attrs["parameter_number"] == param_number
                        ),
                        None,
                    )
                if k is None:
                    break
                target = x.operands[k]
                if (
                    last_use.get(id(target)) != position_of[id(x)]
                    or id(target) in returned
                    or sum(o is target for o in x.operands) != 1
                    or len(leaf_shapes(target.shape)) != 1
                ):
                    break
                if target.opcode == "parameter":
                    if target.attrs["parameter_number"] == param_number:
                        starts[id(x)] = (k, out_index)
                    break
                x = target
        return starts

    chain_starts = chains_into_arguments() if donated else {}

    def product_to_overwrite(inst, position) -> Instruction | None:
        """A matrix product this elementwise kernel may write its result over: the epilogue of
        ``relu(x @ w + b)`` then runs in place on the product BLAS just wrote (still in cache),
        with no second buffer of that size. Products only: other producers are kernels that a
        row group may run block by block, which an in-place consumer could not join."""
        for j in sorted(overwritable(inst)) if overwritable is not None else ():
            target = inst.operands[j]
            if (
                target.opcode == "dot"
                and last_use.get(id(target)) == position
                and id(target) not in returned
                and sum(o is target for o in inst.operands) == 1
                and len(value_slots[id(target)]) == 1
            ):
                return target
        return None

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
        elif op == "opt-barrier":  # its operand's buffers, unchanged
            value_slots[id(inst)] = list(value_slots[id(inst.operands[0])])
        elif op == "get-tuple-element":
            value_slots[id(inst)] = [value_slots[id(inst.operands[0])][inst.attrs["index"]]]
        else:
            inputs = [s for o in inst.operands for s in value_slots[id(o)]]
            k = updates_in_place(inst) if updates_in_place is not None else None
            target = inst.operands[k] if k is not None else None
            into_argument = (
                (donated_operand(inst, position) or chain_starts.get(id(inst))) if donated else None
            )
            if (
                target is not None
                and target.opcode not in GroupOp.BOOKKEEPING
                and last_use.get(id(target)) == position
                and id(target) not in returned
                and sum(o is target for o in inst.operands) == 1
                and len(value_slots[id(target)]) == 1
            ):
                outs = value_slots[id(inst)] = list(value_slots[id(target)])  # overwritten in place
            elif (
                into_argument is None
                and (product := product_to_overwrite(inst, position)) is not None
            ):
                outs = value_slots[id(inst)] = list(value_slots[id(product)])
            elif into_argument is not None:  # the caller's array is the output buffer
                j, out_index = into_argument
                outs = value_slots[id(inst)] = list(value_slots[id(inst.operands[j])])
                if inst is root_outputs[out_index]:
                    in_place_outputs.add(out_index)
            else:
                outs = value_slots[id(inst)] = new_slots(inst.shape)
            produced.update(outs)
            steps.append(make_step(inst, inputs, outs))
    # a donated argument returned unchanged at its own position is returned as itself, and so
    # is one a chain of in-place updates ended in
    for out_index, param_number in donated.items():
        if out_index < len(root_outputs):
            out = root_outputs[out_index]
            if out.opcode == "parameter" and out.attrs["parameter_number"] == param_number:
                in_place_outputs.add(out_index)
    for _, out_index in chain_starts.values():
        if value_slots[id(root_outputs[out_index])] == [arg_slots[donated[out_index]]]:
            in_place_outputs.add(out_index)
        else:  # every link was checked: a chain cannot break
            raise AssertionError(f"in-place chain into argument {donated[out_index]} broke")
    return BufferPlan(
        slots,
        arg_slots,
        list(value_slots[id(entry.root)]),
        constants,
        steps,
        produced,
        in_place_outputs,
    )
