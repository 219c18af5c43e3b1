"""Loop rolling's loops and the while bodies it builds for them (``loop_rolling``): a loop's
plan (``Loop``: its trips, what each operand of a trip is, what it carries), and its body and
condition computations, where the integers that say where a loop works (index constants,
progression starts, mask bounds, its trip count) are loop state rather than constants, so the
loops of one nest share a body."""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..ir.builder import ComputationBuilder, NameUniquer
from ..ir.dtypes import from_numpy
from ..ir.nodes import Computation, Instruction
from ..ir.ops import OPS
from ..ir.queries import known_trip_count, without_known_trip_count
from ..ir.shapes import Shape, TupleShape

_S64 = from_numpy(np.dtype(np.int64))


@dataclass
class Loop:
    start: int  # in the program's non-constant, non-parameter instructions
    period: int
    trips: int
    # [intra position][operand]: ("local", c) | ("carried", q) | ("invariant", inst) |
    # ("constant", inst) | ("progression", first, step, dtype)
    classes: list
    slice_starts: dict  # intra position -> ((first, step) per dimension)
    state: list  # intra positions carried or returned, in order
    carried: set
    invariants: list  # outer instructions the body reads, in order
    short: bool = False  # fewer than MIN_INSTRUCTIONS: rolls only if loops like it recur
    kind: tuple = ()  # (a short loop's) what its recurrences share: _kind
    tiny: bool = False  # fewer than MIN_TRIPS: rolls only if its body is one rolled already


def literal(inst: Instruction) -> np.ndarray:
    return inst.attrs["literal"]


def counted(literal: np.ndarray) -> bool:
    """A scalar the trip counter computes exactly: an integer, or a float holding an integer
    the float type represents exactly (``x[:, j] * j`` on a float array makes ``float(j)``),
    never -0.0 (the counter would make +0.0)."""
    if literal.ndim != 0:
        return False
    if np.issubdtype(literal.dtype, np.integer):
        return True
    if literal.dtype.kind != "f":
        return False
    value = float(literal)
    return (np.isfinite(value) and value.is_integer()
            and not (value == 0 and np.signbit(value))
            and abs(value) < 2.0 ** (np.finfo(literal.dtype).nmant + 1))


def zeros_of(b: ComputationBuilder, shape: Shape) -> Instruction:
    scalar = b.constant(np.zeros((), shape.dtype.numpy))
    return b.add("broadcast", [scalar], {"dimensions": ()}, shape=shape)


def _as_dynamic_slice(inst: Instruction, starts) -> bool:
    """Does the body read this trip's ``slice`` as a ``dynamic-slice`` at lifted starts? Every
    slice of unit strides does, varying or not: a column the loop reads at a fixed place
    (``data[:, i]`` in ``for j: ... data[:, i] * data[:, j]``) is at another place in the next
    loop of the nest, and one body serves them all. (A static slice is in bounds, so the
    dynamic-slice, which clamps only starts past the end, reads the same elements.)"""
    return starts is not None and all(stride == 1 for _, _, stride in inst.attrs["slice"])


def _lifted_values(loop: Loop, seq) -> tuple[dict, list[np.ndarray]]:
    """The loop's integers that say *where* it works (index constants, the starts of its
    progressions, its trip count), each by its place in the trip: they become loop-invariant
    state elements rather than constants of the body, so that the loops of one nest (``for i:
    for j in range(i, n):``), which differ only in those numbers, have one body: the backend
    compiles it once. Equal values that step alike (by the same step each trip, the trip
    count apart) are one element: fusion and the buffer plan then see that a trip reads back
    exactly the window it wrote (``cov[i, j] = ...; cov[i, j] /= n``: the same start
    instructions), so the write stays in place; a coincidence of values in one loop of a nest
    only costs that loop a body of its own (rarer by the step: ``i`` and a ``j`` that starts at
    ``i`` never share one). The bounds of an index mask
    (``_mask_bounds``) are such integers too, and so are those of an inner loop's initial
    state (its bounds and trip count, when it rolled in the round before). (place -> element
    number from 0, the values in that order)"""
    places, values, number = {}, [], {}

    def lift(place, value: np.ndarray, step) -> None:
        # (by value and step: a start and a progression from the same value, ``for j in
        # range(i, n)``, are the same number only in this loop of the nest, not in the next)
        key = (value.dtype.str, value.tobytes(), step)
        if key not in number:
            number[key] = len(values)
            values.append(value)
        places[place] = number[key]

    i = loop.start
    bounds = _mask_bounds(loop, seq)
    # (the initial states of loops rolled in the round before: their bounds and trip counts,
    # which differ from one loop of the nest to the next)
    inits = {id(seq[i + c].operands[0]) for c in range(loop.period)
             if seq[i + c].opcode == "while"}
    for c, row in enumerate(loop.classes):
        inst = seq[i + c]
        first_index = OPS[inst.opcode].scalar_starts_from
        for k, cls in enumerate(row):
            if cls[0] == "progression":
                lift((c, k), np.array(cls[1], np.int64), cls[2])
            elif (cls[0] == "constant" and (first_index is not None and k >= first_index
                                            or c in bounds or id(inst) in inits)
                  and literal(cls[1]).shape == () and counted(literal(cls[1]))):
                lift((c, k), literal(cls[1]), 0)
        if _as_dynamic_slice(inst, loop.slice_starts.get(c)):
            for d, (first, step) in enumerate(loop.slice_starts[c]):
                lift((c, "start", d), np.array(first, np.int64), step)
    lift("trips", np.array(loop.trips, np.int64), "trips")
    return places, values


def _mask_bounds(loop: Loop, seq) -> set[int]:
    """The trip's broadcasts of an integer that a ``compare`` holds against an ``iota`` (the
    bounds of an index mask: ``lo <= iota < hi``, contraction_padding's), by place in the
    trip: where a mask ends says where the loop works, as a slice's start does."""
    i, found = loop.start, set()
    for c, row in enumerate(loop.classes):
        inst = seq[i + c]
        if inst.opcode != "compare" or not any(o.opcode == "iota" for o in inst.operands):
            continue
        for cls in row:
            if cls[0] == "local" and seq[i + cls[1]].opcode == "broadcast" \
                    and seq[i + cls[1]].shape.dtype.is_integer:
                found.add(cls[1])
    return found


def build_body(loop: Loop, seq, names: NameUniquer) -> tuple[Computation, Computation, list, list]:
    """The loop's body and condition computations, the state's shapes and the lifted values
    (``_lifted_values``) that end the initial state."""
    i, period = loop.start, loop.period
    slot = {q: 1 + k for k, q in enumerate(loop.state)}
    first_invariant = 1 + len(loop.state)
    invariant_slot = {id(v): first_invariant + k for k, v in enumerate(loop.invariants)}
    places, lifted = _lifted_values(loop, seq)
    first_lifted = first_invariant + len(loop.invariants)
    shapes = ([Shape(_S64, ())] + [seq[i + q].shape for q in loop.state]
              + [v.shape for v in loop.invariants]
              + [Shape(from_numpy(v.dtype), ()) for v in lifted])
    b = ComputationBuilder(names.reserve(names.first_free("rolled_body")),
                           NameUniquer.from_names(inst.name for inst in seq[i:i + period]))
    state = b.parameter(0, TupleShape(tuple(shapes)), "state")
    elements = [b.add("get-tuple-element", [state], {"index": k}, shape=s)
                for k, s in enumerate(shapes)]
    counter = elements[0]
    constants: dict[tuple, Instruction] = {}

    def constant(literal: np.ndarray) -> Instruction:
        key = (literal.dtype.str, literal.shape, literal.tobytes())
        if key not in constants:
            constants[key] = b.constant(literal)
        return constants[key]

    def progression(place, step: int, dtype: np.dtype) -> Instruction:
        first = elements[first_lifted + places[place]]
        value = b.add("add", [first,
                              b.add("multiply", [counter, constant(np.array(step, np.int64))])])
        if dtype != np.int64:
            value = b.add("convert", [value], shape=Shape(from_numpy(dtype), ()))
        return value

    made: list[Instruction] = []
    for c in range(period):
        inst = seq[i + c]
        operands = []
        for k, cls in enumerate(loop.classes[c]):
            kind = cls[0]
            if kind == "local":
                operands.append(made[cls[1]])
            elif kind == "carried":
                operands.append(elements[slot[cls[1]]])
            elif kind == "invariant":
                operands.append(elements[invariant_slot[id(cls[1])]])
            elif kind == "constant":
                lifted_at = places.get((c, k))
                operands.append(constant(literal(cls[1])) if lifted_at is None
                                else elements[first_lifted + lifted_at])
            else:
                operands.append(progression((c, k), cls[2], cls[3]))
        starts = loop.slice_starts.get(c)
        if _as_dynamic_slice(inst, starts):
            made.append(b.add(
                "dynamic-slice", [operands[0]] + [
                    progression((c, "start", d), step, np.dtype(np.int64))
                    for d, (_, step) in enumerate(starts)],
                {"dynamic_slice_sizes": inst.shape.dims}, shape=inst.shape,
                metadata=inst.metadata))
        else:  # the first trip's instruction under its own name (the pass manager verifies it)
            attrs, metadata = inst.attrs, inst.metadata
            if inst.opcode == "while" and len({known_trip_count(seq[i + t * period + c])
                                               for t in range(loop.trips)}) > 1:
                # a loop rolled before, whose trip count differs from trip to trip (the inner
                # loops of a triangular nest): it is loop state, no longer known up front
                attrs = without_known_trip_count(attrs)
                if metadata is not None:
                    metadata = replace(metadata, op_name="rolled loop")
            made.append(b.adopt(Instruction(inst.name, inst.opcode, inst.shape,
                                            tuple(operands), attrs, metadata)))
    following = b.add("add", [counter, constant(np.array(1, np.int64))])
    root = b.add("tuple", [following] + [made[q] for q in loop.state]
                 + elements[first_invariant:])
    body = b.build(root)
    cb = ComputationBuilder(names.reserve(names.first_free("rolled_condition")),
                            NameUniquer())
    cstate = cb.parameter(0, TupleShape(tuple(shapes)), "state")
    ccounter = cb.add("get-tuple-element", [cstate], {"index": 0}, shape=shapes[0])
    limit = cb.add("get-tuple-element", [cstate], {"index": first_lifted + places["trips"]},
                   shape=shapes[first_lifted + places["trips"]])
    condition = cb.build(cb.add("compare", [ccounter, limit], {"direction": "LT"}))
    return body, condition, shapes, lifted
