"""Tiered segments: a new segment between graph breaks runs on the reference interpreter (no
compile) until its ``hot_runs()``-th run, and only then compiles, as a JIT compiles only the
code that runs often.

A function that breaks on data in a Python loop can trace hundreds of distinct segments in a
call, each run once (a dynamic-programming table filled cell by cell, with an ``int()`` of a
traced comparison in every cell: 435 segments). Compiling each took 50-70 ms, so the first
call spent 23 s compiling code that ran for a few milliseconds; and on the next calls the
signature runs as plain NumPy anyway (``eager.py``), because NumPy is faster than hundreds of
breaks. Run interpreted, a segment costs what NumPy costs for the same operations, and a
segment that does run again and again (a loop body that breaks every trip) compiles at its
``hot_runs()``-th run (4), within the first call.

Only the CPU tiers its segments: the interpreter runs on the host, and a device backend's
segments must keep their values on the device. ``TOOLKIT_SEGMENT_HOT_RUNS=1`` compiles every
segment at its first run, as before. The interpreter is toolkit's oracle: an interpreted run
gives NumPy's results; a compiled one may differ in the last bits of a reassociated sum, as
compiled code does everywhere."""
from __future__ import annotations

import time
from typing import Callable

from ..config import env_int
from .eager import SEGMENTED_CALLS

# a segment's run at which it compiles; the runs before it are interpreted. A segment that runs
# once a call stays interpreted through the calls ``eager`` measures (the first, then
# SEGMENTED_CALLS more), so that a signature that then runs as plain NumPy never compiles
HOT_RUNS = SEGMENTED_CALLS + 2


def hot_runs() -> int:
    return env_int("TOOLKIT_SEGMENT_HOT_RUNS", HOT_RUNS, 1, 1 << 20)


class TieredSegment:
    """A segment interpreted (``cold``: an interpreter program) until its ``hot``-th run, then
    compiled (``compile_now()``); the graph-break cache and the replay record hold this object,
    so every later run, replayed or not, finds the compiled program once there is one."""

    __slots__ = ("_execute", "_compile", "_runs", "_hot", "compiled", "compile_seconds")

    def __init__(self, cold, compile_now: Callable[[], object], hot: int):
        self._execute = cold.execute_leaves
        self._compile = compile_now
        self._runs = 0
        self._hot = hot
        self.compiled = None  # the compiled program, once hot
        self.compile_seconds = 0.0  # what compiling it took (inside its hot run)

    def take_compile_seconds(self) -> float:
        """What compiling took, once (0 before, and after it was taken): the run that compiled
        counts it as its caller's Python, not as the segment's run."""
        seconds, self.compile_seconds = self.compile_seconds, 0.0
        return seconds

    @property
    def interpreted_runs(self) -> int:
        return self._runs if self.compiled is None else self._hot - 1

    def execute_leaves(self, arguments: list) -> list:
        if self.compiled is None:
            self._runs += 1
            if self._runs >= self._hot:
                began = time.perf_counter()
                self.compiled = self._compile()
                self.compile_seconds = time.perf_counter() - began
                self._execute = self.compiled.execute_leaves
                self._compile = None
        return self._execute(arguments)


__all__ = ["HOT_RUNS", "TieredSegment", "hot_runs"]
