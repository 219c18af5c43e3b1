"""Call inlining (XLA's CallInliner): every ``call`` in the entry computation is replaced by
the callee's instructions, so backends see one flat computation (JAX prints nested jits as
calls)."""
from __future__ import annotations

from collections import Counter

from ..ir.nodes import Instruction, Module
from .rewriter import replace_entry, rewrite_computation


def inline_calls(module: Module) -> tuple[Module, Counter]:
    counts: Counter = Counter()
    # (most programs call nothing: a scan of opcodes, not a rebuild of 200k instructions)
    if not any(inst.opcode == "call" for inst in module.entry.instructions):
        return module, counts

    def inline(call: Instruction, operands: list[Instruction], b) -> Instruction:
        callee = call.attrs["to_apply"]
        local: dict[int, Instruction] = {}
        for inst in callee.instructions:
            if inst.opcode == "parameter":
                local[id(inst)] = operands[inst.attrs["parameter_number"]]
                continue
            ops = [local[id(o)] for o in inst.operands]
            if inst.opcode == "call":
                local[id(inst)] = inline(inst, ops, b)
            else:
                local[id(inst)] = b.add(inst.opcode, ops, inst.attrs, inst.shape, inst.metadata)
        counts[f"inlined %{callee.name}"] += 1
        return local[id(callee.root)]

    def visit(inst: Instruction, ops: list[Instruction], b):
        return inline(inst, ops, b) if inst.opcode == "call" else None

    entry, changed = rewrite_computation(module.entry, visit)
    return (replace_entry(module, entry) if changed else module), counts
