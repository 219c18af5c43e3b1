"""Rebuilding computations: passes never edit nodes, they map old instructions to new ones.

``rewrite_computation`` walks a computation in order; ``visit(inst, operands, builder)`` sees
each instruction with its operands already rewritten and returns a replacement, or None to
keep it. Unchanged instructions are shared, not copied."""
from __future__ import annotations

from typing import Callable

from ..ir.builder import ComputationBuilder, NameUniquer
from ..ir.nodes import Computation, Instruction, Module, mark_shape_inferred

Visit = Callable[[Instruction, list[Instruction], ComputationBuilder], "Instruction | None"]


def with_operands(inst: Instruction, operands) -> Instruction:
    operands = tuple(operands)
    # (instructions compare by identity: this is one C-level comparison of the tuples)
    if operands == inst.operands:
        return inst
    # (the constructor, not dataclasses.replace: this runs for most instructions of every pass)
    new = Instruction(inst.name, inst.opcode, inst.shape, operands, inst.attrs, inst.metadata)
    if inst.shape_inferred and all(map(_same_shape, operands, inst.operands)):
        # shape inference answers from the opcode, attributes and operand shapes, all the very
        # objects it answered for: the verifier need not ask again (nor remember the question)
        mark_shape_inferred(new)
    return new


def _same_shape(a: Instruction, b: Instruction) -> bool:
    return a.shape is b.shape


def rewrite_computation(comp: Computation, visit: Visit) -> tuple[Computation, bool]:
    builder = ComputationBuilder(
        comp.name, NameUniquer.from_names(i.name for i in comp.instructions)
    )
    # keyed by the instructions themselves: they hash and compare by identity, without a
    # Python-level id() call per operand (this loop runs over every instruction of every pass)
    mapping: dict[Instruction, Instruction] = {}
    adopt = builder.adopt
    changed = False
    for inst in comp.instructions:
        operands = [mapping[o] for o in inst.operands]
        new = visit(inst, operands, builder)
        if new is None:
            new = adopt(with_operands(inst, operands))
        mapping[inst] = new
        if new is not inst:
            changed = True
    if not changed:
        return comp, False
    return builder.build(mapping[comp.root]), True


def replace_entry(
    module: Module, entry: Computation, extra: tuple[Computation, ...] = ()
) -> Module:
    """``module`` with a new entry computation, keeping only computations still called.
    (Iterative walks: nested functions calling themselves were a cycle through their cells,
    which kept the module before the pass alive until the collector ran; a compile pauses it,
    so every version of the program stayed in memory to the end.)"""
    called: list[Computation] = []  # every computation the entry reaches, callees first
    seen: set[int] = set()
    stack = [iter(_callees(entry))]
    path: list[Computation] = []  # the computations whose callees are being walked
    while stack:
        for callee in stack[-1]:
            if id(callee) not in seen:
                seen.add(id(callee))
                stack.append(iter(_callees(callee)))
                path.append(callee)
                break
        else:
            stack.pop()
            if path:
                called.append(path.pop())
    order = {id(c): i for i, c in enumerate(module.computations + extra)}
    called.sort(key=lambda c: order.get(id(c), len(order)))
    # callees must precede callers: a stable topological order over the call graph
    ordered: list[Computation] = []
    placed: set[int] = set()
    for comp in called:
        walk = [(comp, iter(_callees(comp)))]
        while walk:
            current, callees = walk[-1]
            for callee in callees:
                if id(callee) not in placed:
                    walk.append((callee, iter(_callees(callee))))
                    break
            else:
                walk.pop()
                if id(current) not in placed:
                    placed.add(id(current))
                    ordered.append(current)
    return Module(module.name, tuple(ordered) + (entry,), entry, module.attributes)


def _callees(comp: Computation):
    return (callee for inst in comp.instructions for callee in inst.called_computations)
