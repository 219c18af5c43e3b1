"""``while`` and ``conditional`` in the native backends: each called computation is compiled by
the backend as a program of its own, and a host loop runs them, the loop state passing from one
call to the next as arrays, as XLA:CPU's runtime drives its while thunks. (The GPU backend runs
them on the host with the evaluator for now: ``flat_module`` gives it the leaf-parameter form.)"""
from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from ..ir.builder import ComputationBuilder, NameUniquer
from ..ir.nodes import Computation, Instruction, Module, post_order
from ..ir.queries import counted_loop, known_trip_count
from ..ir.shapes import TupleShape


def _leaf_count(shape) -> int:
    return len(shape.leaves()) if isinstance(shape, TupleShape) else 1


def flat_module(comp: Computation, name: str, donate_state: bool = False) -> Module:
    """``comp`` as a module whose parameters are the leaves of its (tuple) parameters: a tuple
    instruction rebuilds each parameter's structure, which the buffer plan reads as aliases
    (an element read from it is the leaf itself). ``donate_state``: a loop body's state leaf k
    becomes its result leaf k (``must-alias``), so the body writes the state in place: a trip
    that updates one row of a large array costs one row, not a copy of the array."""
    names = {i.name for i in comp.instructions}
    b = ComputationBuilder(name, NameUniquer.from_names(names))
    mapped: dict[int, Instruction] = {}
    number = 0

    def rebuild(shape) -> Instruction:
        nonlocal number
        if isinstance(shape, TupleShape):  # nesting is shallow: loop states are flat in practice
            return b.add("tuple", [rebuild(e) for e in shape.elements], shape=shape)
        leaf = b.parameter(number, shape, f"leaf_{number}")
        number += 1
        return leaf

    for param in comp.parameters:
        mapped[id(param)] = rebuild(param.shape)
    for inst in comp.instructions:
        if inst.opcode == "parameter":
            continue
        source = mapped[id(inst.operands[0])] if inst.operands else None
        if (
            inst.opcode == "get-tuple-element"
            and source.opcode == "tuple"
            and source.name not in names
        ):
            # an element of a rebuilt parameter
            mapped[id(inst)] = source.operands[inst.attrs["index"]]
            continue
        mapped[id(inst)] = b.adopt(
            dataclasses.replace(inst, operands=tuple(mapped[id(o)] for o in inst.operands))
        )
    entry = b.build(mapped[id(comp.root)])
    attributes = ()
    if donate_state:
        leaves = (
            comp.root.shape.leaves()
            if isinstance(comp.root.shape, TupleShape)
            else [comp.root.shape]
        )
        aliases = ", ".join(f"{{{k}}}: ({k}, {{}}, must-alias)" for k in range(len(leaves)))
        attributes = (("input_output_alias", f"{{ {aliases} }}"),)
    callees = []
    for inst in post_order([comp.root]):
        callees.extend(c for c in inst.called_computations if c not in callees)
    # the callees' own callees (reducers inside fusions, nested loops), callees first
    ordered: list[Computation] = []
    stack = list(callees)
    while stack:
        c = stack.pop()
        if c in ordered:
            continue
        pending = [d for i in c.instructions for d in i.called_computations if d not in ordered]
        if pending:
            stack.extend([c] + pending)
            continue
        ordered.append(c)
    return Module(name, tuple(ordered) + (entry,), entry, attributes)


def passed_on(body: Computation) -> frozenset[int]:
    """The state leaves a loop body returns unchanged (element k of its result is element k of
    its parameter, an array): loop invariants, which the loop reads and never writes."""
    (param,) = body.parameters if len(body.parameters) == 1 else (None,)
    root = body.root
    if param is None:
        return frozenset()
    if root is param:
        return frozenset(range(_leaf_count(param.shape)))
    if root.opcode != "tuple" or not isinstance(param.shape, TupleShape):
        return frozenset()
    found, leaf = [], 0
    for k, (result, element) in enumerate(zip(root.operands, param.shape.elements)):
        if (
            result.opcode == "get-tuple-element"
            and result.operands[0] is param
            and result.attrs["index"] == k
            and not isinstance(element, TupleShape)
        ):
            found.append(leaf)
        leaf += _leaf_count(element)
    return frozenset(found)


def entry_trip_count(counted: tuple[int, int], leaves, to_host) -> int:
    """The trips of a ``counted_loop`` ``(i, k)`` from its initial state: ``max(0, init[k] -
    init[i])`` (two scalars read, once a loop, where its predicate would be read every trip)."""
    i, k = counted
    return max(0, int(to_host(leaves[k])) - int(to_host(leaves[i])))


def overrun_error(inst: Instruction, trips: int, from_state: bool) -> RuntimeError:
    """What a loop run for a trip count it was given raises when its condition still holds."""
    source = "trip count read from its state" if from_state else "known_trip_count"
    return RuntimeError(f"%{inst.name}: its {source} ({trips}) disagrees with its condition, "
                        "which is still true after that many trips")


def make_control_runner(
    inst: Instruction,
    compile_module: Callable[[Module], object],
    own: Callable = np.array,
    to_host: Callable = np.asarray,
    native_while: Callable | None = None,
    owned: frozenset[int] = frozenset(),
    share_unwritten: bool = False,
):
    """``run(leaf arrays of the operands) -> leaf arrays of the result`` for a while or a
    conditional, its computations compiled by ``compile_module``. ``own(array)``: a copy the
    loop may write (the state, once per loop); ``to_host(array)``: a predicate or branch index
    as a NumPy value (a device backend downloads it). ``native_while(cond, body)``: a driver
    that runs the whole loop in native code (``run(state, limit) -> (state, trips)``), or None
    where the backend has none for these parts; the loop is driven from Python then.

    Copies of the state, only where needed: ``owned`` names the leaves whose initial arrays the
    loop may write (the buffer plan found them dead after the loop and gave the loop's result
    their buffers); with ``share_unwritten``, a leaf the body passes on unchanged (a
    loop-invariant array) is never written, so it is not copied either: the loop then returns
    the very array it was given, which the caller must not take as its own. ``run.programs``:
    the compiled computations it runs."""
    if inst.opcode == "while":
        cond = compile_module(flat_module(inst.attrs["condition"], f"{inst.name}.condition"))
        body = compile_module(
            flat_module(inst.attrs["body"], f"{inst.name}.body", donate_state=True)
        )
        native = native_while(cond, body) if native_while is not None else None
        known = known_trip_count(inst)
        counted = counted_loop(inst) if known is None else None
        keep = owned | (passed_on(inst.attrs["body"]) if share_unwritten else frozenset())

        copies_state = getattr(native, "copies_state", False)

        def run_while(leaves):
            if copies_state:  # a driver with state buffers of its own copies the state in
                state, run_while.trips = native.run(list(leaves), 1 << 62)
                return state
            # the loop owns its state (the body writes it in place): copied once, at the start,
            # unless the plan gave it the initial value's buffer or the body never writes it
            state = [v if k in keep else own(v) for k, v in enumerate(leaves)]
            if native is not None:
                state, run_while.trips = native.run(state, 1 << 62)
                return state
            trips_now = known if counted is None else entry_trip_count(counted, state, to_host)
            if trips_now is not None:
                # fori_loop with Python bounds, scan, a nested rolled loop (its count read at
                # entry from its state): the body runs N times with no predicate read per trip
                # (on a device, a download and a wait each), as XLA's while thunk does; the
                # condition is read once, after, to hold the count to its word
                for _ in range(trips_now):
                    state = list(body(state))
                if bool(to_host(cond(state)[0])):
                    raise overrun_error(inst, trips_now, counted is not None)
                run_while.trips = trips_now
                return state
            trips = 0
            while bool(to_host(cond(state)[0])):
                state = list(body(state))
                trips += 1
            run_while.trips = trips
            return state

        run_while.trips = 0
        run_while.driver = getattr(native, "driver", "native") if native is not None else "python"
        run_while.programs = (cond, body)
        # (for a backend that runs the loop inside a native program: the driver, and the
        # state leaves it may run in place)
        run_while.native, run_while.keep = native, keep
        return run_while
    if "branch_computations" in inst.attrs:
        branches = inst.attrs["branch_computations"]
    else:
        branches = (inst.attrs["true_computation"], inst.attrs["false_computation"])
    compiled = [
        compile_module(flat_module(c, f"{inst.name}.branch{k}")) for k, c in enumerate(branches)
    ]
    counts = [_leaf_count(o.shape) for o in inst.operands[1:]]
    starts = np.cumsum([1] + counts).tolist()
    indexed = "branch_computations" in inst.attrs

    def run_conditional(leaves):
        selector = to_host(leaves[0])
        if indexed:
            k = int(selector)
            k = k if 0 <= k < len(compiled) else len(compiled) - 1
        else:
            k = 0 if bool(selector) else 1
        return list(compiled[k](list(leaves[starts[k]: starts[k + 1]])))  # fresh arrays

    run_conditional.programs = tuple(compiled)
    return run_conditional


def trips_text(trips: int, seconds: float, driver: str | None = None) -> str:
    """A loop's launch column in the profile: its trip count, what drove it (``native``: the
    CPU's native loop driver; ``device graph``: the GPU's body graph replayed trip after trip)
    and the time per trip."""
    how = f", {driver}" if driver not in (None, "python") else ""
    per = f", {seconds / trips * 1e6:.1f} µs/trip" if trips else ""
    return f"trips={trips}{how}{per}"


__all__ = ["flat_module", "make_control_runner", "passed_on", "trips_text"]
