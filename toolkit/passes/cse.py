"""Common-subexpression elimination: identical instructions (opcode, operands, attributes,
shape) computed twice are computed once. Constants compare by value."""
from __future__ import annotations

from collections import Counter

import numpy as np

from ..ir.nodes import Instruction, Module
from .rewriter import replace_entry, rewrite_computation, with_operands


def _attr_key(value):
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if hasattr(value, "instructions"):  # a computation
        return ("computation", id(value))
    if isinstance(value, (list, tuple)):
        return tuple(_attr_key(v) for v in value)
    return value


def cse(module: Module) -> tuple[Module, Counter]:
    counts: Counter = Counter()
    seen: dict[tuple, Instruction] = {}

    def visit(inst: Instruction, ops: list[Instruction], b):
        if inst.opcode == "parameter":
            return None
        key = (inst.opcode, tuple(id(o) for o in ops), inst.shape,
               tuple(sorted((k, _attr_key(v)) for k, v in inst.attrs.items())))
        earlier = seen.get(key)
        if earlier is not None:
            counts[f"duplicate {inst.opcode}"] += 1
            return earlier
        kept = b.adopt(with_operands(inst, ops))  # remember the rewritten instruction
        seen[key] = kept
        return kept

    entry, changed = rewrite_computation(module.entry, visit)
    return (replace_entry(module, entry) if changed else module), counts


def dce(module: Module) -> tuple[Module, Counter]:
    """Drop instructions nothing uses and computations nothing calls."""
    from ..ir.builder import ComputationBuilder, NameUniquer
    from ..ir.nodes import post_order

    entry = module.entry
    live = {id(i) for i in post_order([entry.root])} | {id(p) for p in entry.parameters}
    dead = [i for i in entry.instructions if id(i) not in live]
    counts: Counter = Counter({"dead instruction": len(dead)} if dead else {})
    before = len(module.computations)
    if dead:
        b = ComputationBuilder(entry.name, NameUniquer())
        for inst in entry.instructions:
            if id(inst) in live:
                b.adopt(inst)
        entry = b.build(entry.root)
    result = replace_entry(module, entry)
    if len(result.computations) < before:
        counts["unused computation"] += before - len(result.computations)
    return (result if counts else module), counts
