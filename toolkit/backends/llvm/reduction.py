"""The steps every reduction kernel shares, whatever wraps them (CPU loop nests, GPU threads):
start the accumulators, fold one input element in (writing the extra outputs of a
multi-output fusion on the way), store the results."""
from __future__ import annotations

from typing import Callable

from .elemental import ElementalEmitter


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
