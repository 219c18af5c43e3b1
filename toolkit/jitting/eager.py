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
- after SEGMENTED_CALLS calls when the last broke ``EAGER_MIN_BREAKS`` times or more, against
  those calls (its segments still interpreted: ``segment_tiers``, so that a signature that then
  runs as NumPy never compiles);
- else once its segments have compiled (their ``hot``-th run) and SEGMENTED_CALLS more calls
  were timed, against those calls.
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

    @property
    def many_breaks(self) -> bool:
        return self.breaks >= EAGER_MIN_BREAKS

    @property
    def runs_eagerly(self) -> bool:
        """Does the next call run as plain NumPy (the trial, or the choice)?"""
        if self.decided is not None:
            return self.decided == "numpy"
        if self.many_breaks:
            return self.segmented_calls >= SEGMENTED_CALLS
        # (the hot-th call compiles: the calls after it are the compiled segments' own)
        return self.segmented_calls >= self.hot + SEGMENTED_CALLS

    def segmented(self, seconds: float, breaks: int) -> None:
        self.segmented_calls += 1
        self.segmented_seconds = min(self.segmented_seconds, seconds)
        if self.segmented_calls > self.hot:
            self.hot_seconds = min(self.hot_seconds, seconds)
        self.breaks = breaks

    def eager(self, seconds: float) -> None:
        self.eager_calls += 1
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
        measured = (f"{self.breaks} breaks a call took {self.segmented_seconds * 1e3:.2f} ms in "
                    f"segments, plain NumPy {self.eager_seconds * 1e3:.2f} ms")
        if self.decided == "numpy":
            return (f"({self.signature}) runs as plain NumPy: {measured} "
                    f"({self.segmented_seconds / max(self.eager_seconds, 1e-9):.1f}x faster); "
                    f"{self.eager_calls} call(s) so far. To compile it, keep the value Python "
                    "branches on an array: np.where(...), tk.lax.cond or tk.lax.while_loop")
        return f"({self.signature}) stays in segments: {measured}"


__all__ = ["EAGER_MIN_BREAKS", "EAGER_SPEEDUP", "EAGER_SPEEDUP_COMPILED", "HOST_BACKENDS",
           "REASON", "EagerChoice"]
