"""Questions about IR nodes that several layers ask."""
from __future__ import annotations

from .nodes import Instruction
from .ops import GroupOp


def reducer_opcode(inst: Instruction) -> str | None:
    """The binary op of a reduce whose ``to_apply`` is ``op(p0, p1)``, else None."""
    comp = inst.attrs.get("to_apply")
    if comp is None or len(comp.parameters) != 2 or len(comp.instructions) != 3:
        return None
    root = comp.root
    if {id(o) for o in root.operands} == {id(p) for p in comp.parameters}:
        return root.opcode
    return None


def reads_update_window(inst: Instruction, dus: Instruction) -> bool:
    """Is ``inst`` a slice reading exactly the window the dynamic-update-slice ``dus`` writes
    (constant starts, stride 1, the update's dimensions), or a dynamic-slice of the update's
    dimensions at the very same start instructions (both clamp a start the same way)?"""
    if inst.opcode == "dynamic-slice":
        return (tuple(inst.attrs["dynamic_slice_sizes"]) == tuple(dus.operands[1].shape.dims)
                and len(inst.operands) == len(dus.operands) - 1
                and all(a is b for a, b in zip(inst.operands[1:], dus.operands[2:])))
    if inst.opcode != "slice":
        return False
    starts = [
        s.attrs["literal"].reshape(())[()] if s.opcode == "constant" else None
        for s in dus.operands[2:]
    ]
    if any(s is None for s in starts):
        return False
    window = [(int(s), int(s) + n, 1) for s, n in zip(starts, dus.operands[1].shape.dims)]
    return list(map(tuple, inst.attrs["slice"])) == window


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

