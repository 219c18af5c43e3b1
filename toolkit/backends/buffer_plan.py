"""Buffer planning shared by the native backends: every value of the entry computation gets a
slot (one per array leaf), parameters and constants are bound to slots, tuples and
get-tuple-elements are aliases, and every other instruction becomes a step that reads and
writes slots. What a step does (a compiled kernel, a library dot, a fallback) is the backend's.

Writes go in place by buffer assignment, as XLA's do: a dynamic-update-slice or a scatter
whose destination buffer is dead afterwards (``liveness.py``: no later reader through any
alias, not returned, not an argument the caller keeps, not a constant) is given that buffer as
its output, and writes only its window. Where the old value is still needed, the update gets a
buffer of its own and copies the destination into it first: the copy XLA's copy insertion
would add. Every such choice is a ``BufferDecision``, in words (``report``)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Generic, TypeVar

import numpy as np

from ..ir.nodes import Instruction, Module
from ..ir.ops import GroupOp
from ..ir.shapes import Shape, TupleShape
from .control import passed_on
from .liveness import Liveness, analyse
from ..profiler.units import binary_bytes

StepT = TypeVar("StepT")


@dataclass(frozen=True)
class BufferDecision:
    """Where an update (or a loop's state) was written in place, or a copy inserted, and why."""

    instruction: str  # the writer: a dynamic-update-slice or scatter (fusion), or a while
    operand: str  # the value whose buffer it writes, or copies
    in_place: bool
    reason: str  # stable code: IN_PLACE, IN_PLACE_ARGUMENT, LIVE_AFTER, PROGRAM_OUTPUT, ...
    message: str
    bytes_copied: int = 0  # the copy inserted (0 when in place)
    computation: str = ""  # the module planned (a loop body's own, inside the program)
    bytes_written: int = 0  # an update's window (or scattered updates): what it writes


REASONS = {  # code -> what it means (each decision's message says it of its own values)
    "IN_PLACE": "written in place: nothing reads the old value afterwards",
    "IN_PLACE_ARGUMENT": "written in place into the caller's array (a donated argument)",
    "LOOP_STATE_IN_PLACE": "the loop runs in the buffer of its initial state, dead after it",
    "LIVE_AFTER": "copied first: the old value is read later",
    "PROGRAM_OUTPUT": "copied first: the old value is also a result of the program",
    "ARGUMENT": "copied first: the old value is an argument the caller keeps (not donated)",
    "CONSTANT": "copied first: the old value is a constant",
    "READ_TWICE": "copied first: the kernel also reads the old value through another operand",
    "KERNEL_READS_WINDOW": "copied first: the kernel reads the old value where the window may "
                           "be written, not only at the element it writes",
    "NOT_ONE_ARRAY": "copied first: the value is not a single array",
}


def report(decisions) -> str:
    """The decisions as text: one line each, then a count of writes in place and copies. A
    line names its computation where the decisions span several (a loop body's own)."""
    lines = []
    copied = 0
    several = len({d.computation for d in decisions}) > 1
    for d in decisions:
        where = f"[{d.computation}] " if several else ""
        if d.in_place:
            lines.append(f"{where}%{d.instruction}: in place into %{d.operand}: {d.message}")
        else:
            copied += d.bytes_copied
            lines.append(
                f"{where}%{d.instruction}: copy of %{d.operand} ({binary_bytes(d.bytes_copied)}) "
                f"inserted: {d.message}"
            )
    done = sum(d.in_place for d in decisions)
    lines.append(
        f"{done} in place, {len(decisions) - done} copies inserted "
        f"({binary_bytes(copied)} copied per run)"
    )
    return "\n".join(lines)


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
    decisions: list[BufferDecision] = field(default_factory=list)

    @property
    def temp_slots(self) -> set[int]:
        """Slots written by a step and never returned: reusable across calls."""
        return self.produced - set(self.out_slots)

    def report(self) -> str:
        return report(self.decisions)


def leaf_shapes(shape) -> list[Shape]:
    return shape.leaves() if isinstance(shape, TupleShape) else [shape]


def donated_arguments(module: Module) -> dict[int, int]:
    """output index -> parameter number, for XLA's ``input_output_alias`` entries marked
    ``must-alias``: the caller's buffer receives the new value, so it may be written in place."""
    text = dict(module.attributes).get("input_output_alias", "")
    return {int(out): int(param) for out, param in
            re.findall(r"\{(\d+)\}:\s*\((\d+),\s*\{\},\s*must-alias\)", text)}


def _update_destination(inst: Instruction) -> int | None:
    """The operand a dynamic-update-slice or scatter (alone, or the root of a fusion) writes
    its window into, when it is one of the instruction's operands; else None."""
    if inst.opcode in GroupOp.WRITE_INTO_OPERAND:
        return 0
    if inst.opcode == "fusion":
        root = inst.attrs["calls"].root
        if root.opcode in GroupOp.WRITE_INTO_OPERAND and root.operands[0].opcode == "parameter":
            return root.operands[0].attrs["parameter_number"]
    return None


def _written_bytes(inst: Instruction) -> int:
    """The bytes an update writes: its window, or its scattered updates."""
    root = inst.attrs["calls"].root if inst.opcode == "fusion" else inst
    update = root.operands[2] if root.opcode == "scatter" else root.operands[1]
    return update.shape.nbytes


def _verdict(live: Liveness, writer: Instruction, name: str, b: int, position: int
             ) -> tuple[str, str]:
    """(reason code, message) for ``writer`` at ``position`` writing buffer ``b`` (the value
    ``name``) in place: IN_PLACE, or why the old value must be kept."""
    origin = live.defined_by[b]
    if origin.opcode == "parameter":
        number = origin.attrs["parameter_number"]
        return "ARGUMENT", f"%{name} is argument {number}, which the caller keeps (not donated)"
    if origin.opcode == "constant":
        return "CONSTANT", f"%{name} is a constant"
    if b in live.outputs:
        return "PROGRAM_OUTPUT", f"the old value of %{name} is also a result of the program"
    if live.last_read[b] > position:
        reader = live.last_reader[b].name
        return "LIVE_AFTER", f"%{reader} reads the old value of %{name} afterwards"
    if live.times_read(writer, b) != 1:
        return "READ_TWICE", f"%{writer.name} also reads %{name} through another operand"
    return "IN_PLACE", f"nothing reads %{name} after %{writer.name}"


def _update_verdict(live: Liveness, inst: Instruction, k: int, position: int
                    ) -> tuple[str, str]:
    target = inst.operands[k]
    held = live.buffers[id(target)]
    if len(held) != 1:
        return "NOT_ONE_ARRAY", f"%{target.name} is a tuple"
    return _verdict(live, inst, target.name, held[0], position)


def plan_buffers(
    module: Module,
    make_step: Callable[[Instruction, list[int], list[int]], StepT],
    updates_in_place: Callable[[Instruction], int | None] | None = None,
    overwritable: Callable[[Instruction], set[int]] | None = None,
    loop_state_in_place: bool = False,
) -> BufferPlan[StepT]:
    """``make_step(inst, input_slots, output_slots)`` for each instruction that computes.

    ``updates_in_place(inst)``: the operand an instruction can overwrite (a dynamic-update-slice
    that writes only its window, a scatter), or None. When that operand's buffer is dead after
    the instruction, the instruction's output gets the operand's slot: ``make_step`` then sees
    its output slot among its inputs, and the backend writes the window alone, in place.

    ``overwritable(inst)``: operands an elementwise kernel may overwrite. With them, a donated
    argument (``must-alias``) whose new value an instruction computes as its last reader gets
    that instruction's output written straight into the caller's array: no copy back.

    ``loop_state_in_place``: a while loop's state leaf takes the buffer of its initial value
    when that value is dead after the loop (the backend's loop then needs no copy of it); a
    leaf the body passes on unchanged is never written, so it needs none either (the backend's
    loop reads the initial array: ``control.make_control_runner(share_unwritten=True)``)."""
    entry = module.entry
    live = analyse(entry)
    buffers = live.buffers
    slots: list[Shape] = []
    slot_of: list[int] = [-1] * len(live.defined_by)  # buffer -> slot
    steps: list[StepT] = []
    constants: dict[int, np.ndarray] = {}
    arg_slots = [0] * len(entry.parameters)
    decisions: list[BufferDecision] = []

    def new_slots(inst) -> list[int]:
        start = len(slots)
        slots.extend(leaf_shapes(inst.shape))
        return list(range(start, len(slots)))

    def dead_after(b: int, inst: Instruction, position: int) -> bool:
        """Nothing reads buffer ``b`` after ``inst`` (which reads it once), nor returns it."""
        return (
            live.last_read[b] == position
            and b not in live.outputs
            and live.times_read(inst, b) == 1
        )

    def decide(inst, k, code, message, copied=0) -> None:
        decisions.append(BufferDecision(
            inst.name, inst.operands[k].name, code.startswith("IN_PLACE"), code, message,
            copied, module.name, _written_bytes(inst),
        ))

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
                    and dead_after(buffers[id(target)][0], inst, position)
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
                held = buffers[id(target)]
                if len(held) != 1 or not dead_after(held[0], x, position_of[id(x)]):
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
                and len(buffers[id(target)]) == 1
                and dead_after(buffers[id(target)][0], inst, position)
            ):
                return target
        return None

    def loop_state_slots(inst, position) -> list[int]:
        """A while's result slots: each state leaf in its initial value's buffer where that is
        dead after the loop (the loop then owns it), else a new one (the loop copies it in)."""
        outs = []
        initial = live.reads(inst)
        unwritten = passed_on(inst.attrs["body"])
        for j, (b, shape) in enumerate(zip(initial, leaf_shapes(inst.shape))):
            if j in unwritten:  # a loop invariant: read in place, never written, so it comes
                # back in its own buffer where that is the program's (an argument's is copied,
                # if the result is read at all)
                shared = not live.given(b) and dead_after(b, inst, position)
                outs.append(slot_of[b] if shared else len(slots))
                if not shared:
                    slots.append(shape)
                continue
            if not live.given(b) and dead_after(b, inst, position):
                outs.append(slot_of[b])
                code = "LOOP_STATE_IN_PLACE"
                detail = (f"state leaf {j} of the loop runs in the buffer of "
                          f"%{live.defined_by[b].name}, which nothing reads after the loop")
            else:
                outs.append(len(slots))
                slots.append(shape)
                code, detail = _verdict(live, inst, live.defined_by[b].name, b, position)
                code = "READ_TWICE" if code == "IN_PLACE" else code
                detail = f"state leaf {j} of the loop is copied in: {detail}"
            if shape.size > 1:  # (a scalar's copy is no news)
                in_place = code == "LOOP_STATE_IN_PLACE"
                decisions.append(BufferDecision(
                    inst.name, live.defined_by[b].name, in_place, code, detail,
                    0 if in_place else shape.nbytes, module.name,
                ))
        return outs

    for position, inst in enumerate(entry.instructions):
        op = inst.opcode
        if op == "parameter":
            (slot,) = new_slots(inst)
            slot_of[buffers[id(inst)][0]] = slot
            arg_slots[inst.attrs["parameter_number"]] = slot
            continue
        if op == "constant":
            (slot,) = new_slots(inst)
            slot_of[buffers[id(inst)][0]] = slot
            constants[slot] = np.array(inst.attrs["literal"])
            continue
        if op in GroupOp.BUFFER_ALIASES:
            continue  # aliases: their buffers are their operands'
        inputs = [slot_of[b] for b in live.reads(inst)]
        k = updates_in_place(inst) if updates_in_place is not None else None
        into_argument = (
            (donated_operand(inst, position) or chain_starts.get(id(inst))) if donated else None
        )
        verdict = _update_verdict(live, inst, k, position) if k is not None else None
        if into_argument is not None:  # the caller's array is the output buffer
            j, out_index = into_argument
            outs = [slot_of[buffers[id(inst.operands[j])][0]]]
            if inst is root_outputs[out_index]:
                in_place_outputs.add(out_index)
            if k is not None:
                decide(inst, k, "IN_PLACE_ARGUMENT",
                       f"output {out_index} goes into the buffer of argument "
                       f"{donated[out_index]}, donated (the caller's array, or a loop's state)")
        elif verdict is not None and verdict[0] == "IN_PLACE":
            outs = [slot_of[buffers[id(inst.operands[k])][0]]]  # overwritten in place
            decide(inst, k, *verdict)
        elif (product := product_to_overwrite(inst, position)) is not None:
            outs = [slot_of[buffers[id(product)][0]]]
        elif loop_state_in_place and op == "while":
            outs = loop_state_slots(inst, position)
        else:
            outs = new_slots(inst)
            j = k if k is not None else (
                _update_destination(inst) if updates_in_place is not None else None
            )
            if j is not None and isinstance(inst.operands[j].shape, Shape):
                code, detail = verdict if verdict is not None else (
                    "KERNEL_READS_WINDOW",
                    f"%{inst.name} reads %{inst.operands[j].name} where its window may be "
                    f"written, not only at the element it writes",
                )
                decide(inst, j, code, detail, inst.operands[j].shape.nbytes)
        for b, s in zip(buffers[id(inst)], outs):
            slot_of[b] = s
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
        if [slot_of[b] for b in buffers[id(root_outputs[out_index])]] == [
            arg_slots[donated[out_index]]
        ]:
            in_place_outputs.add(out_index)
        else:  # every link was checked: a chain cannot break
            raise AssertionError(f"in-place chain into argument {donated[out_index]} broke")
    return BufferPlan(
        slots,
        arg_slots,
        [slot_of[b] for b in buffers[id(entry.root)]],
        constants,
        steps,
        produced,
        in_place_outputs,
        decisions,
    )
