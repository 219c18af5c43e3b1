"""Questions about IR nodes that several layers ask."""
from __future__ import annotations

from .nodes import Instruction


def reducer_opcode(inst: Instruction) -> str | None:
    """The binary op of a reduce whose ``to_apply`` is ``op(p0, p1)``, else None."""
    comp = inst.attrs.get("to_apply")
    if comp is None or len(comp.parameters) != 2 or len(comp.instructions) != 3:
        return None
    root = comp.root
    if {id(o) for o in root.operands} == {id(p) for p in comp.parameters}:
        return root.opcode
    return None
