"""Python's cyclic garbage collector around toolkit's own bulk work.

A trace or a compile allocates hundreds of thousands of small objects that live as long as the
program (instructions, tracers, shapes). Each collection the allocations trigger rescans the
young ones, and the full collections every few hundred thousand allocations rescan the whole
heap (the user's too: a notebook's heap is large). Measured on a 23k-instruction trace, that
was 15-25 % of the trace, and about a quarter of the passes' time on a 48k-instruction compile.

- ``collector_paused``: the passes and code generation, toolkit's code alone, make no cycles
  worth collecting meanwhile: the collector is off, and what a compile leaves in cycles is
  collected at the next collection after it.
- ``collector_relaxed``: while a trace runs the user's Python, which may make cyclic garbage,
  the collector stays on but runs after every 100,000 allocations instead of 700: the garbage
  it may hold meanwhile is bounded, and the full collections become rare."""
from __future__ import annotations

import contextlib
import gc
import threading

YOUNG_THRESHOLD = 100_000
_lock = threading.Lock()
_relaxed = 0  # traces running now (threads): the last to end restores the thresholds
_saved: tuple[int, ...] | None = None


@contextlib.contextmanager
def collector_paused():
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@contextlib.contextmanager
def collector_relaxed():
    global _relaxed, _saved
    with _lock:
        if _relaxed == 0:
            current = gc.get_threshold()
            # (0 means the user turned collections off; a higher first threshold is theirs)
            _saved = current if 0 < current[0] < YOUNG_THRESHOLD else None
            if _saved is not None:
                gc.set_threshold(YOUNG_THRESHOLD, *current[1:])
        _relaxed += 1
    try:
        yield
    finally:
        with _lock:
            _relaxed -= 1
            if _relaxed == 0 and _saved is not None:
                # (unless the user set other thresholds meanwhile: theirs stay)
                if gc.get_threshold()[0] == YOUNG_THRESHOLD:
                    gc.set_threshold(*_saved)
                _saved = None
