"""The steps every reduction kernel shares, whatever wraps them (CPU loop nests, GPU threads):
start the accumulators, fold one input element in (writing the extra outputs of a
multi-output fusion on the way), store the results."""
from __future__ import annotations

from typing import Callable

from ...ir.ops import GroupOp
from .elemental import ElementalEmitter

# what a kernel makes without computing anything: shared by two heroes, it ties them to nothing
_FREE = GroupOp.LEAVES | GroupOp.SAME_ELEMENTS


def start_accumulators(e: ElementalEmitter, heroes, accs) -> None:
    for h, acc in zip(heroes, accs):
        e.b.store(e.value(h.operands[1], []), acc)


def fold_element(e: ElementalEmitter, heroes, accs, extras, outs, full, combine: Callable) -> None:
    """``combine(hero, accumulated, value)`` folds the element at index ``full`` into each hero."""
    e.memo = {k: v for k, v in e.memo.items() if k[1] == ()}  # scalars stay valid across iterations
    for o in extras:
        ptr, s = outs[id(o)]
        e.store(ptr, s, full, e.value(o, full))
    for h, acc in zip(heroes, accs):
        e.b.store(combine(h, e.b.load(acc), e.value(h.operands[0], full)), acc)


def store_accumulators(e: ElementalEmitter, heroes, accs, outs, kept_index) -> None:
    for h, acc in zip(heroes, accs):
        ptr, s = outs[id(h)]
        e.store(ptr, s, kept_index, e.b.load(acc))


def hero_clusters(heroes, extras) -> list[tuple[list[int], list]]:
    """The heroes of a multi-output reduction (by position) in clusters that share computation,
    an instruction beyond parameters, constants, broadcasts and reshapes that both read, each
    with the extra outputs that share computation with it (the rest go with the first). Only
    chains with an expensive op (an exponential, a division) stand apart: cheap ones (a sum and
    a sum of squares of one input) fold together, in one pass over their input.

    Sibling reductions merged for an input they share (the attention heads of a layer reading
    one mask) each compute their own chain: folded side by side in one loop, every chain's
    temporaries are live at once, and six exponentials on four rows spill registers until the
    merged kernel runs 3x slower than six kernels. One loop per cluster over the same rows
    keeps the shared input in cache and each chain in registers."""
    parent = list(range(len(heroes)))

    def find(k: int) -> int:
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    reached: dict[int, int] = {}  # id(instruction) -> a hero that computes it
    expensive: set[int] = set()  # heroes whose chain computes an expensive op

    def walk(root, k: int | None) -> int | None:
        """Mark what ``root`` computes as hero ``k``'s (None: only ask): a hero sharing it."""
        met, stack, seen = None, [root], set()
        while stack:
            inst = stack.pop()
            if id(inst) in seen:
                continue
            seen.add(id(inst))
            stack.extend(inst.operands)
            if inst.opcode in _FREE:
                continue
            if k is not None and inst.opcode in GroupOp.EXPENSIVE:
                expensive.add(k)
            other = reached.get(id(inst))
            if other is None:
                if k is not None:
                    reached[id(inst)] = k
            else:
                met = other
                if k is not None:
                    parent[find(k)] = find(other)
        return met

    for k, h in enumerate(heroes):
        walk(h.operands[0], k)
    costly = {find(k) for k in expensive}
    cheap = next((find(k) for k in range(len(heroes)) if find(k) not in costly), None)
    clusters: dict[int, tuple[list[int], list]] = {}
    for k in range(len(heroes)):
        home = find(k) if find(k) in costly else cheap  # (the cheap chains: one loop)
        clusters.setdefault(home, ([], []))[0].append(k)
    first = next(iter(clusters.values()))
    for o in extras:
        met = walk(o, None)
        home = None if met is None else find(met) if find(met) in costly else cheap
        (clusters[home] if home is not None else first)[1].append(o)
    return list(clusters.values())
