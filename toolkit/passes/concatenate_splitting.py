"""Concatenate splitting: a concatenation of more operands than one kernel takes becomes a
balanced tree of concatenations of at most ``fanout`` operands each.

``np.stack(frames)`` or ``np.concatenate(chunks)`` over a Python list of a thousand arrays traces
into one concatenate of a thousand operands. As one kernel, every operand is a kernel
argument: on the GPU that is past the parameter space a kernel may have (1,201 pointers: ptxas
refuses the PTX, "uses too much parameter space", as the 1,928-operand fusion of issue 26 did),
and on the CPU a kernel of a thousand loops, one per operand, took 7-125 s to compile. Split,
the concatenations of a level are alike (a list of same-shaped arrays), so they share one
compiled kernel, and each is a kernel of ``fanout`` loops; a list of 1,200 arrays is three
levels of fanout 32, each a copy of the data.

XLA limits a fusion's operands for the same reason (``kMaxOperandsAndOutputsPerFusion``);
fusion here keeps to ``FusionOptions.max_operands``, and the tree's concatenations keep to it
too, so a producer (``np.sin(x)`` of each listed array) can still fuse into the concatenation
that takes it. The result is the same array: a concatenation of concatenations along one axis
puts every element where the flat one does."""
from __future__ import annotations

from collections import Counter

from ..ir.nodes import Instruction, Module
from ..profiler.events import FusionDecision
from .rewriter import replace_entry, rewrite_computation, with_operands

RULE = "concatenate-splitting"
REASONS = {"CONCATENATE_SPLIT": "a concatenation of more operands than a kernel takes runs as a "
                                "tree of concatenations"}


def split_wide_concatenates(module: Module, fanout: int):
    """(module, counts, decisions): every concatenate of the entry with more than ``fanout``
    operands as a tree of concatenates of at most ``fanout`` operands (``fanout`` >= 2)."""
    if fanout < 2:
        raise ValueError(f"a concatenation tree needs a fanout of at least 2, not {fanout}")
    decisions: list[FusionDecision] = []

    def visit(inst: Instruction, operands, builder):
        if inst.opcode != "concatenate" or len(operands) <= fanout:
            return None
        axis = inst.attrs["dimensions"][0]
        level, levels = list(operands), 1
        while len(level) > fanout:
            level = [_concatenation(builder, group, axis, inst.metadata)
                     for group in _balanced_groups(level, fanout)]
            levels += 1
        decisions.append(FusionDecision(
            producer=inst.name, consumer=inst.name, fused=False, reason="CONCATENATE_SPLIT",
            message=(f"{REASONS['CONCATENATE_SPLIT']}: {len(operands)} operands, more than "
                     f"the {fanout} a kernel takes; {levels} levels of concatenations of at "
                     f"most {fanout}")))
        return builder.adopt(with_operands(inst, level))

    entry, changed = rewrite_computation(module.entry, visit)
    if not changed:
        return module, Counter(), []
    return replace_entry(module, entry), Counter({RULE: len(decisions)}), decisions


def _balanced_groups(items: list, fanout: int) -> list[list]:
    """``items`` in order, in the fewest groups of at most ``fanout``, their sizes within one."""
    n_groups = -(-len(items) // fanout)
    size, extra = divmod(len(items), n_groups)
    groups, start = [], 0
    for k in range(n_groups):
        end = start + size + (k < extra)
        groups.append(items[start:end])
        start = end
    return groups


def _concatenation(builder, operands: list[Instruction], axis: int, metadata) -> Instruction:
    if len(operands) == 1:
        return operands[0]
    return builder.add("concatenate", tuple(operands), {"dimensions": (axis,)},
                       metadata=metadata)  # (its shape inferred)
