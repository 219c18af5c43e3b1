"""Loop bodies, loop conditions and branches are optimised as the entry is: each called
computation of a ``while`` or ``conditional`` runs through the same pipeline as a module of
its own (its instructions simplified, folded and fused), and comes back under names that do
not clash with the enclosing module's."""
from __future__ import annotations

from types import MappingProxyType
from typing import Callable

from ..ir.builder import NameUniquer
from ..ir.structural import exact_key
from ..ir.nodes import CALLEE_ATTRIBUTES, Computation, Instruction, Module
from ..ir.ops import GroupOp

CONTROL = GroupOp.CONTROL


def callees_first(comp: Computation) -> list[Computation]:
    """The computations ``comp`` calls, directly or not, callees before callers (iterative)."""
    ordered: list[Computation] = []
    seen: set[int] = set()
    stack: list[tuple[Computation, bool]] = [
        (c, False) for i in comp.instructions for c in i.called_computations
    ]
    while stack:
        c, expanded = stack.pop()
        if expanded:
            if id(c) not in seen:
                seen.add(id(c))
                ordered.append(c)
            continue
        if id(c) in seen:
            continue
        stack.append((c, True))
        stack.extend(
            (d, False) for i in c.instructions for d in i.called_computations if id(d) not in seen
        )
    return ordered


def _rebuilt(comp: Computation, name: str, swap: dict[int, Computation],
             renamed: NameUniquer | None = None) -> Computation:
    """``comp`` named ``name``, its instructions calling ``swap``'s computations instead (and,
    given ``renamed``, each under a fresh name of it: a copy of another loop's body). An
    instruction that calls none of them and reads no rebuilt one is kept as it is (the entry
    around a few loops is mostly such)."""
    mapped: dict[int, Instruction] = {}
    for inst in comp.instructions:
        operands = tuple(mapped[id(o)] for o in inst.operands)
        attrs = inst.attrs
        if inst.called_computations:
            changed = dict(attrs)
            for key in CALLEE_ATTRIBUTES:
                v = changed.get(key)
                if isinstance(v, tuple):
                    changed[key] = tuple(swap.get(id(c), c) for c in v)
                elif v is not None:
                    changed[key] = swap.get(id(v), v)
            if any(changed[k] is not attrs[k] for k in attrs):
                attrs = MappingProxyType(changed)
        if renamed is None and attrs is inst.attrs and operands == inst.operands:
            mapped[id(inst)] = inst
            continue
        mapped[id(inst)] = Instruction(
            inst.name if renamed is None else renamed.fresh(_stem(inst.name)),
            inst.opcode, inst.shape, operands, attrs, inst.metadata)
    return Computation(name, tuple(mapped[id(p)] for p in comp.parameters),
                       tuple(mapped[id(i)] for i in comp.instructions), mapped[id(comp.root)])


def _stem(name: str) -> str:
    """``add`` of ``add.12``: the base a fresh name is made from."""
    base, dot, suffix = name.rpartition(".")
    return base if dot and suffix.isdigit() else name


def _alike_key(comp: Computation) -> tuple:
    """Equal for computations the pipeline optimises alike: the same up to names (constants,
    shapes and attributes included), from the same source lines."""
    return exact_key(comp), tuple(i.metadata for i in comp.instructions)


def optimize_called(module: Module, run: Callable[[Module], Module]) -> Module:
    """``module`` with every computation its entry's while/conditional instructions call
    replaced by ``run`` of it (``run``: the pipeline, which reaches nested loops the same way).
    Computations alike up to names (the bodies of a loop nest's rolled inner loops: hundreds,
    of a few kinds) are optimised once; the others get a copy under fresh names."""
    entry = module.entry
    controls = [i for i in entry.instructions if i.opcode in CONTROL]
    if not controls:
        return module
    # (one uniquer for every body: a program of 900 rolled loops names 900 ``fused_add``s, and
    # probing ``.1, .2, ...`` afresh for each was quadratic)
    taken = NameUniquer.from_names(c.name for c in module.computations)
    existing = {id(c) for c in module.computations}
    swap: dict[int, Computation] = {}
    added: list[Computation] = []
    optimized_alike: dict[tuple, Module] = {}
    # the names a copy's instructions must not take: the module's, and every optimised body's
    instruction_names = NameUniquer.from_names(
        i.name for c in module.computations for i in c.instructions)
    for inst in controls:
        for comp in inst.called_computations:
            if id(comp) in swap:
                continue
            key = _alike_key(comp)
            optimized = optimized_alike.get(key)
            renamed = None
            if optimized is None:
                optimized = optimized_alike[key] = run(
                    Module(comp.name, tuple(callees_first(comp)) + (comp,), comp))
                instruction_names.add_names(
                    i.name for c in optimized.computations for i in c.instructions)
            else:
                renamed = instruction_names
            local: dict[int, Computation] = {}
            for c in optimized.computations:  # callees first: fused computations, then the body
                if id(c) in existing:
                    continue  # shared with the enclosing module, unchanged
                if c is optimized.entry and c.name == comp.name:
                    name = c.name  # it replaces comp, under comp's name
                else:
                    name = taken.reserve(taken.first_free(c.name))
                new = _rebuilt(c, name, local, renamed)
                local[id(c)] = new
                added.append(new)
            swap[id(comp)] = local.get(id(optimized.entry), optimized.entry)
    new_entry = _rebuilt(entry, entry.name, swap)
    kept = [c for c in module.computations if c is not entry]
    used = set()
    stack = [new_entry]
    while stack:  # keep what is still called (the old bodies are not)
        c = stack.pop()
        for i in c.instructions:
            for d in i.called_computations:
                if id(d) not in used:
                    used.add(id(d))
                    stack.append(d)
    computations = [c for c in kept + added if id(c) in used]
    order = {id(c): k for k, c in enumerate(callees_first(new_entry))}
    computations.sort(key=lambda c: order[id(c)])
    return Module(module.name, tuple(computations) + (new_entry,), new_entry, module.attributes)
