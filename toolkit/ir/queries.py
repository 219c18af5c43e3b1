"""Questions about IR nodes that several layers ask."""
from __future__ import annotations

from typing import Mapping

from .nodes import Instruction
from .shapes import TupleShape
from .ops import GroupOp

# the values of a fused computation's parameters that its fusion is given as constants (the
# offsets the offset-operands pass made operands), by id(parameter); None: none known
Known = Mapping[int, int] | None


def reducer_opcode(inst: Instruction) -> str | None:
    """The binary op of a reduce whose ``to_apply`` is ``op(p0, p1)``, else None."""
    comp = inst.attrs.get("to_apply")
    if comp is None or len(comp.parameters) != 2 or len(comp.instructions) != 3:
        return None
    root = comp.root
    if {id(o) for o in root.operands} == {id(p) for p in comp.parameters}:
        return root.opcode
    return None


def reads_update_window(inst: Instruction, dus: Instruction, known: Known = None) -> bool:
    """Is ``inst`` a slice reading exactly the window the dynamic-update-slice ``dus`` writes
    (constant starts, stride 1, the update's dimensions), or a dynamic-slice of the update's
    dimensions at the very same start instructions, or at starts of the same known values (both
    clamp a start the same way)? ``known``: values of parameters a fusion is given as constant
    operands (its offsets), by parameter id."""
    if inst.opcode == "dynamic-slice":
        if (tuple(inst.attrs["dynamic_slice_sizes"]) != tuple(dus.operands[1].shape.dims)
                or len(inst.operands) != len(dus.operands) - 1):
            return False
        if all(a is b for a, b in zip(inst.operands[1:], dus.operands[2:])):
            return True
        mine = [_constant_int(s, known) for s in inst.operands[1:]]
        theirs = [_constant_int(s, known) for s in dus.operands[2:]]
        return None not in mine and mine == theirs
    if inst.opcode != "slice":
        return False
    starts = [_constant_int(s, known) for s in dus.operands[2:]]
    if any(s is None for s in starts):
        return False
    window = [(int(s), int(s) + n, 1) for s, n in zip(starts, dus.operands[1].shape.dims)]
    return list(map(tuple, inst.attrs["slice"])) == window


def _constant_int(inst: Instruction, known: Known = None) -> int | None:
    if inst.opcode == "parameter" and known:
        return known.get(id(inst))
    if inst.opcode != "constant" or inst.shape.size != 1:
        return None
    return int(inst.attrs["literal"].reshape(())[()])


def update_window(dus: Instruction, known: Known = None) -> list[tuple[int, int]] | None:
    """The [start, end) per dimension that a dynamic-update-slice writes, when its starts are
    constants (clamped as the op clamps them, so the window always fits); else None."""
    operand, update = dus.operands[0].shape, dus.operands[1].shape
    starts = [_constant_int(s, known) for s in dus.operands[2:]]
    if any(s is None for s in starts) or len(starts) != operand.rank:
        return None
    return [
        (min(max(s, 0), dim - n), min(max(s, 0), dim - n) + n)
        for s, dim, n in zip(starts, operand.dims, update.dims)
    ]


def read_region(inst: Instruction, known: Known = None) -> list[tuple[int, int]] | None:
    """The [start, end) per dimension that a slice (or a dynamic-slice with constant starts)
    reads of its operand; None for any other reader (which may read every element)."""
    if inst.opcode == "slice":
        return [(int(start), int(limit)) for start, limit, _ in inst.attrs["slice"]]
    if inst.opcode == "dynamic-slice":
        dims = inst.operands[0].shape.dims
        starts = [_constant_int(s, known) for s in inst.operands[1:]]
        if any(s is None for s in starts) or len(starts) != len(dims):
            return None
        sizes = inst.attrs["dynamic_slice_sizes"]
        return [
            (min(max(s, 0), dim - n), min(max(s, 0), dim - n) + n)
            for s, dim, n in zip(starts, dims, sizes)
        ]
    return None


def reads_outside_update_window(inst: Instruction, dus: Instruction, known: Known = None
                                ) -> bool:
    """Does ``inst`` (which reads the destination of the dynamic-update-slice ``dus``) read
    only elements the update's window leaves alone? Both regions must be known: constant
    starts (or parameters of ``known`` values). Then writing the window in place cannot change
    what ``inst`` reads."""
    window, region = update_window(dus, known), read_region(inst, known)
    if window is None or region is None:
        return False
    if any(lo >= hi for lo, hi in window):
        return True  # an empty window writes nothing
    return any(r_hi <= w_lo or w_hi <= r_lo for (w_lo, w_hi), (r_lo, r_hi) in zip(window, region))


def known_trip_count(inst: Instruction) -> int | None:
    """XLA's ``backend_config={"known_trip_count":{"n":"N"}}`` on a while, else None."""
    import json
    for name, text in inst.attrs.get("_raw", ()):
        if name == "backend_config":
            try:
                return int(json.loads(text)["known_trip_count"]["n"])
            except (ValueError, KeyError, TypeError):
                return None
    return None


def _seen_through(x: Instruction):
    """``(opcode, attrs, operands)`` of ``x``, or of the one instruction a fusion of it computes
    (its parameters standing for the fusion's operands, its constants for themselves); None for
    a fusion of more."""
    if x.opcode != "fusion":
        return x.opcode, x.attrs, x.operands
    root = x.attrs["calls"].root
    operands = []
    for o in root.operands:
        if o.opcode == "parameter":
            operands.append(x.operands[o.attrs["parameter_number"]])
        elif o.opcode == "constant":
            operands.append(o)
        else:
            return None
    return root.opcode, root.attrs, tuple(operands)


def counted_loop(inst: Instruction) -> tuple[int, int] | None:
    """``(i, k)`` where a while (a flat tuple of arrays) counts state element ``i`` up by one
    while it is below element ``k``, which its body passes on unchanged: it runs ``max(0,
    init[k] - init[i])`` trips, known at its entry though not at compile time (a loop that
    loop rolling nested, whose bounds are loop state: XLA's while-loop trip count analysis for
    a bound in the state); else None."""
    shape = inst.shape
    if inst.opcode != "while" or not isinstance(shape, TupleShape) or any(
            isinstance(e, TupleShape) for e in shape.elements):
        return None
    cond, body = inst.attrs["condition"], inst.attrs["body"]
    test = _seen_through(cond.root)
    if test is None or test[0] != "compare" or test[1].get("direction") != "LT":
        return None
    counter, limit = test[2]

    def element(x: Instruction) -> int | None:  # (the state: the computation's one parameter)
        if x.opcode == "get-tuple-element" and x.operands[0].opcode == "parameter":
            return x.attrs["index"]
        return None

    i, k = element(counter), element(limit)
    if i is None or k is None or i == k or not counter.shape.dtype.is_integer \
            or counter.shape.rank != 0 or limit.shape != counter.shape:
        return None
    result = body.root
    if result.opcode != "tuple" or element(result.operands[k]) != k:
        return None
    step = _seen_through(result.operands[i])
    if step is None or step[0] != "add":
        return None
    a, b = step[2]
    one = b if element(a) == i else a if element(b) == i else None
    if one is None or one.opcode != "constant" or one.shape != counter.shape \
            or int(one.attrs["literal"]) != 1:
        return None
    return i, k


def without_known_trip_count(attrs: dict) -> dict:
    """A while's ``attrs`` with ``known_trip_count`` taken out of its ``backend_config`` (the
    config dropped where nothing else is left in it)."""
    import json
    raw = []
    for name, text in attrs.get("_raw", ()):
        if name == "backend_config":
            try:
                config = json.loads(text)
            except ValueError:
                config = None
            if isinstance(config, dict) and "known_trip_count" in config:
                del config["known_trip_count"]
                if not config:
                    continue
                text = json.dumps(config, separators=(",", ":"))
        raw.append((name, text))
    return {**attrs, "_raw": tuple(raw)} if raw else {
        k: v for k, v in attrs.items() if k != "_raw"}


def scatter_combiner(comp) -> str | None:
    """What a scatter's ``to_apply`` does: 'assign' when it returns its second parameter (an
    overwrite, ``x[idx] = v``), the opcode when it is ``op(current, update)`` in that order
    (or either order for a commutative op), else None (a general computation)."""
    if comp is None or len(comp.parameters) != 2:
        return None
    current, update = sorted(comp.parameters, key=lambda p: p.attrs["parameter_number"])
    root = comp.root
    if root is update:
        return "assign"
    if len(comp.instructions) != 3 or len(root.operands) != 2:
        return None
    if root.operands[0] is current and root.operands[1] is update:
        return root.opcode
    if root.operands[0] is update and root.operands[1] is current \
            and root.opcode in GroupOp.COMMUTATIVE:
        return root.opcode
    return None

