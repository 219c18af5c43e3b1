"""Plain NumPy in place of segments, where it is faster. A signature whose calls break the
graph runs its Python on every call, and each array operation of that Python is replayed from
the call's record (a few microseconds each) or traced; each break costs about 20 µs. Where a
call breaks many times (a CRC loop branching on every bit, a sparse product slicing by bounds it
reads row by row), or where its Python does many operations on small arrays between breaks (a
solver's time steps on a 21x21 grid, with a convergence test each step), that costs more than
NumPy spends running the same Python. torch.compile's answer is to run such code eagerly;
toolkit measures first and decides per signature.

A signature in segments is timed on every call until it is decided, and then runs once as plain
NumPy (``fn(*args)``: the user's own function, untouched), timed:
- right after its first call, where that call broke ``EAGER_MIN_BREAKS`` times or more, against
  what a replay of that call would cost: the time its segments ran, plus ``REPLAYED_BREAK``
  for each break (``first_call``). The first call traces every operation, so its own time is no
  measure of the next; a replay runs the very segments it ran. A sparse product that slices
  each row by bounds it reads (4,096 rows, 16,384 breaks) took 15-23 s a call in segments for
  three calls before NumPy (28 ms) was tried; now the second call is NumPy's. Where NumPy was
  not ``EAGER_SPEEDUP`` times faster than that estimate, the signature goes on in segments,
  and is decided against its measured calls below, with the NumPy time already measured;
- after SEGMENTED_CALLS calls when the last broke ``EAGER_MIN_BREAKS`` times or more, against
  those calls (its segments still interpreted: ``segment_tiers``, so that a signature that then
  runs as NumPy never compiles);
- else once its segments have compiled (their ``hot``-th run) and SEGMENTED_CALLS more calls
  were timed, against those calls.
A first call can stop before it ends: where, after ``GIVE_UP_BREAKS`` breaks, its Python has
cost ``GIVE_UP_SECONDS`` beyond what its segments ran (tracing, cutting, compiling) and at least
``GIVE_UP_RATIO`` times that, it stops at a break and runs as plain NumPy from its start
(``frontend.segments.RunAsNumpy``: nothing has reached the caller yet, and the Python state it
changed is put back). A solver that tests convergence every step traces its whole step anew at
each test, about 3,300 operations on a 61x61 grid: 55 ms a step, where NumPy runs the step in
0.9 ms, so its first call took 79 s in segments (npbench's channel_flow); it now stops after a
second or two. Where NumPy's whole call took no longer than the part that ran in segments, the
signature runs as NumPy from then on; else its next calls go on in segments, decided as below
with NumPy's time already measured.

If NumPy was at least ``EAGER_SPEEDUP`` times faster (``EAGER_SPEEDUP_COMPILED`` against compiled
segments), the signature's calls run as NumPy from then on; else they stay in segments and
NumPy is not tried again. Every call runs once either way, so side effects and arguments
written in place are NumPy's own; the results are NumPy's (toolkit's contract, met here by
NumPy itself). The break report says which signatures run as NumPy and what each way
measured. ``tk.jit(f, numpy_fallback=False)`` keeps every call in
segments; backends whose results are device arrays never fall back."""
from __future__ import annotations

from dataclasses import dataclass

from ..profiler.events import PLAIN_NUMPY

EAGER_MIN_BREAKS = 32  # breaks a call in segments before plain NumPy is tried in its place
EAGER_SPEEDUP = 2.0  # how much faster NumPy must be to take over from interpreted segments
# ... and from compiled ones (a few breaks a call): measured against the code that would run,
# so only this VM's noise between two timings needs a margin
EAGER_SPEEDUP_COMPILED = 1.25
SEGMENTED_CALLS = 2  # calls in segments measured first (the first records the replay)
# what a replayed break costs beyond its segment's run (the benchmark's target, which it meets):
# with the segments' own time, a first call's estimate of the calls after it
REPLAYED_BREAK = 20e-6
# a first call stops and runs as plain NumPy (``gave_up``) once, after this many breaks, its
# Python has cost this much beyond its segments' runs, and this many times what they ran
GIVE_UP_BREAKS = 16
GIVE_UP_SECONDS = 1.0
GIVE_UP_RATIO = 2.0
HOST_BACKENDS = frozenset({"cpu", "interpreter"})  # results are NumPy arrays either way
REASON = PLAIN_NUMPY  # a profile's GraphBreakEvent for a call run so: all of it glue


@dataclass
class EagerChoice:
    """What one signature's calls measured in segments and as plain NumPy, and the choice."""

    signature: str = ""
    segmented_calls: int = 0
    segmented_seconds: float = float("inf")  # the best call in segments
    breaks: int = 0  # breaks of the last call in segments
    eager_seconds: float | None = None  # the call run as plain NumPy to compare
    decided: str | None = None  # "numpy" or "segments"
    eager_calls: int = 0
    # the call from which every segment has compiled (segment_tiers' hot run: a segment run
    # once a call compiles in the hot-th call; 1 where segments compile at once)
    hot: int = 1
    hot_seconds: float = float("inf")  # the best call in segments from then on
    # the first call's estimate of a replayed call (first_call), while NumPy is compared to it
    estimated_seconds: float | None = None
    first_seconds: float = 0.0  # the first call's own time, tracing included (for the report)
    # the first call stopped at a break to run as plain NumPy (``gave_up``): its segments' runs
    stopped_run_seconds: float | None = None

    @property
    def many_breaks(self) -> bool:
        return self.breaks >= EAGER_MIN_BREAKS

    @property
    def runs_eagerly(self) -> bool:
        """Does the next call run as plain NumPy (the trial, or the choice)?"""
        if self.decided is not None:
            return self.decided == "numpy"
        if self.many_breaks:
            if self.eager_seconds is not None:  # (tried after the first call: measure segments)
                return False
            return self.segmented_calls >= SEGMENTED_CALLS or self.estimated_seconds is not None
        # (the hot-th call compiles: the calls after it are the compiled segments' own)
        return self.segmented_calls >= self.hot + SEGMENTED_CALLS

    def first_call(self, seconds: float, segment_seconds: float, breaks: int) -> None:
        """The signature's first call: ``seconds`` in all, ``segment_seconds`` of it running
        segments, ``breaks`` breaks. With many breaks, the next call is NumPy's trial, against
        what replaying this call would cost."""
        self.first_seconds = seconds
        self.breaks = breaks
        if self.many_breaks:
            self.estimated_seconds = segment_seconds + breaks * REPLAYED_BREAK

    def gave_up(self, seconds: float, run_seconds: float, breaks: int) -> None:
        """The signature's first call stopped after ``seconds`` and ``breaks`` breaks, of which
        its segments ran ``run_seconds``, to run as plain NumPy (``eager`` is told NumPy's time
        next)."""
        self.first_seconds = seconds
        self.breaks = breaks
        self.stopped_run_seconds = run_seconds

    def segmented(self, seconds: float, breaks: int) -> None:
        self.segmented_calls += 1
        self.segmented_seconds = min(self.segmented_seconds, seconds)
        if self.segmented_calls > self.hot:
            self.hot_seconds = min(self.hot_seconds, seconds)
        self.breaks = breaks
        if (self.decided is None and self.eager_seconds is not None and self.many_breaks
                and self.segmented_calls >= SEGMENTED_CALLS):
            # (NumPy was timed after the first call and lost to the estimate: now against
            # the calls measured, without a second NumPy run)
            self.estimated_seconds = None
            self.decided = ("numpy" if self.eager_seconds * EAGER_SPEEDUP
                            <= self.segmented_seconds else "segments")

    def eager(self, seconds: float) -> None:
        self.eager_calls += 1
        if self.stopped_run_seconds is not None and self.eager_seconds is None:
            # (the first call stopped: NumPy's whole call against the part of it in segments)
            self.eager_seconds = seconds
            if seconds <= self.first_seconds:
                self.decided = "numpy"
            return
        if (self.decided is None and self.segmented_calls == 0
                and self.estimated_seconds is not None):
            self.eager_seconds = seconds  # (the trial after the first call)
            if seconds * EAGER_SPEEDUP <= self.estimated_seconds:
                self.decided = "numpy"
            return
        if self.decided is None:
            speedup = EAGER_SPEEDUP
            if not self.many_breaks:  # (against the compiled segments only)
                self.segmented_seconds = self.hot_seconds
                speedup = EAGER_SPEEDUP_COMPILED
            self.eager_seconds = seconds
            self.decided = ("numpy" if seconds * speedup <= self.segmented_seconds
                            else "segments")

    @property
    def text(self) -> str:
        stopped = self.stopped_run_seconds is not None and self.segmented_calls == 0
        if stopped:
            segments = self.first_seconds
            measured = (f"its first call stopped after {self.breaks} breaks and "
                        f"{self.first_seconds * 1e3:.2f} ms in segments, of which they ran "
                        f"{self.stopped_run_seconds * 1e3:.2f} ms (the rest tracing and "
                        f"compiling), and ran as plain NumPy from its start; plain NumPy "
                        f"{self.eager_seconds * 1e3:.2f} ms the whole call")
        elif self.estimated_seconds is not None:
            segments = self.estimated_seconds
            measured = (f"{self.breaks} breaks a call, {segments * 1e3:.2f} ms in segments "
                        f"replayed (estimated from the first call, which took "
                        f"{self.first_seconds * 1e3:.2f} ms), plain NumPy "
                        f"{self.eager_seconds * 1e3:.2f} ms")
        else:
            segments = self.segmented_seconds
            measured = (f"{self.breaks} breaks a call took {segments * 1e3:.2f} ms in "
                        f"segments, plain NumPy {self.eager_seconds * 1e3:.2f} ms")
        if self.decided == "numpy":
            return (f"({self.signature}) runs as plain NumPy: {measured} "
                    f"({'at least ' if stopped else ''}"
                    f"{segments / max(self.eager_seconds, 1e-9):.1f}x faster); "
                    f"{self.eager_calls} call(s) so far. To compile it, keep the value Python "
                    "branches on an array: np.where(...), tk.lax.cond or tk.lax.while_loop")
        return f"({self.signature}) stays in segments: {measured}"


__all__ = ["EAGER_MIN_BREAKS", "EAGER_SPEEDUP", "EAGER_SPEEDUP_COMPILED", "GIVE_UP_BREAKS",
           "GIVE_UP_RATIO", "GIVE_UP_SECONDS", "HOST_BACKENDS",
           "REASON", "REPLAYED_BREAK", "EagerChoice"]
