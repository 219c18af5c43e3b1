"""Values Python asks for at a graph break, computed on the host from what the call already
holds, without cutting a segment.

After a break every live traced value is a parameter bound to its value. An integer Python
then asks for is often a few integer operations away from those values: a sparse product's
row bounds ``A_row[i]`` and ``A_row[i + 1]``, a bit of a checksum. A break there ran the whole
segment traced so far and started the next one (about a millisecond each, four a row of the
sparse product); here the few instructions the value needs are evaluated by the reference
interpreter's rules, and tracing goes on.

Only integer and boolean results of elementwise, data-movement and reduction instructions are
computed so (from bound parameters of any type and constants): those are exact, so a compiled
segment that later computes the same instructions agrees with the value Python used. Float
arithmetic could differ from compiled code in its last bit, and such values still break. The
walk is bounded (``HOST_VALUE_LIMIT`` instructions), and the values found are kept for the
segment (``HostValues``). A check the program holds (an index out of bounds) that the host can
compute and that fails makes the break cut after all, so that its error is raised there."""
from __future__ import annotations

import numpy as np

from ..ir.evaluator import evaluate_cone
from ..ir.nodes import Instruction
from ..ir.ops import GroupOp

HOST_VALUE_LIMIT = 64  # instructions a value's cone may hold to be computed on the host


class HostValues:
    """The values computed on the host for one segment, by instruction (each entry holds its
    instruction, so an id names it while the entry lives)."""

    __slots__ = ("_values",)

    def __init__(self):
        self._values: dict[int, tuple[Instruction, object]] = {}

    def value(self, inst: Instruction, bound: dict) -> np.ndarray | None:
        """``inst``'s value from the parameters ``bound`` (id -> (instruction, value)) and
        constants, or None where its cone holds another parameter, a float computation, or more
        than HOST_VALUE_LIMIT instructions not computed before."""
        def given(node: Instruction):
            if node.opcode != "parameter":
                return None
            held = bound.get(id(node))
            return np.asarray(held[1]) if held is not None and held[0] is node else None

        return evaluate_cone(inst, self._values, given, _exact, HOST_VALUE_LIMIT)

    def clear(self) -> None:
        self._values.clear()


def _exact(node: Instruction) -> bool:
    """May ``node`` be evaluated on the host: a constant, or an elementwise or data-movement
    instruction (no called computation, no side effect) or a reduction of integer or boolean
    result, which any backend computes bit for bit as the interpreter does (integer sums wrap
    alike in any order; and, or, max, min are exact; an index check's ``any`` over a gather's
    indices is one). A parameter never is: it is a value bound, or not known."""
    if node.opcode == "constant":
        return True
    dtype = getattr(node.shape, "dtype", None)
    if dtype is None or dtype.kind not in "biu" or node.opcode == "parameter":
        return False
    if node.opcode == "reduce":
        return True
    return node.opcode in GroupOp.PER_ELEMENT and not node.called_computations


__all__ = ["HOST_VALUE_LIMIT", "HostValues"]
