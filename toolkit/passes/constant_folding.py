"""Constant folding for small results, evaluated by the reference interpreter's op table
(injected by the caller: passes do not import backends). Elementwise ops on broadcast
scalar constants fold to a broadcast of the folded scalar, whatever the shape."""
from __future__ import annotations

from collections import Counter
from typing import Callable

import numpy as np

from ..ir.nodes import Instruction, Module
from ..ir.ops import GroupOp, is_elementwise
from ..ir.shapes import Shape
from .patterns import scalar_constant
from .rewriter import replace_entry, rewrite_computation

MAX_FOLDED_ELEMENTS = 64
Evaluator = Callable[[Instruction, list], object]  # (instruction, operand values) -> value


def constant_folding(module: Module, evaluators: dict[str, Evaluator]) -> tuple[Module, Counter]:
    counts: Counter = Counter()

    def visit(inst: Instruction, ops: list[Instruction], b):
        if inst.opcode in GroupOp.NOT_FOLDABLE or not isinstance(inst.shape, Shape):
            return None
        if (
            ops
            and all(o.opcode == "constant" for o in ops)
            and inst.shape.size <= MAX_FOLDED_ELEMENTS
        ):
            value = np.asarray(evaluators[inst.opcode](inst, [o.attrs["literal"] for o in ops]))
            counts["fold constant expression"] += 1
            return b.add(
                "constant",
                (),
                {"literal": _frozen(value, inst)},
                inst.shape,
                inst.metadata,
                name=None,
            )
        if (
            is_elementwise(inst.opcode)
            and ops
            and all(
                o.opcode == "broadcast"
                and scalar_constant(o) is not None
                and o.operands[0].shape.rank == 0
                for o in ops
            )
        ):
            scalars = [o.operands[0].attrs["literal"] for o in ops]
            scalar_inst = _as_scalar(inst)
            value = np.asarray(evaluators[inst.opcode](scalar_inst, scalars))
            counts["fold elementwise op of broadcast scalars"] += 1
            c = b.add(
                "constant",
                (),
                {"literal": _frozen(value, scalar_inst)},
                scalar_inst.shape,
                inst.metadata,
            )
            return b.add("broadcast", (c,), {"dimensions": ()}, inst.shape, inst.metadata)
        return None

    entry, changed = rewrite_computation(module.entry, visit)
    return (replace_entry(module, entry) if changed else module), counts


def _frozen(value: np.ndarray, inst: Instruction) -> np.ndarray:
    out = np.array(value, dtype=inst.shape.dtype.numpy).reshape(inst.shape.dims)
    out.flags.writeable = False
    return out


def _as_scalar(inst: Instruction) -> Instruction:
    import dataclasses

    return dataclasses.replace(inst, shape=Shape(inst.shape.dtype, ()))
