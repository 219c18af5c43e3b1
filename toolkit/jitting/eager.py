"""Plain NumPy in place of segments, where it is faster: a signature whose calls break the graph
many times (a CRC loop branching on every bit, a sparse product slicing by bounds it reads
row by row) pays the break's fixed cost, about 20 µs, for each: for such a call compiled
segments are slower than NumPy running the same Python. torch.compile's answer is to run such
code eagerly; toolkit measures first and decides per signature.

After two calls in segments, a call that broke ``EAGER_MIN_BREAKS`` times or more runs once as
plain NumPy (``fn(*args)``: the user's own function, untouched), timed. If NumPy was at least
``EAGER_SPEEDUP`` times faster than the best call in segments, the signature's calls run as
NumPy from then on; else they stay in segments and NumPy is not tried again. Every call runs
once either way, so side effects and arguments written in place are NumPy's own; the results
are NumPy's (toolkit's contract, met here by NumPy itself). The break report says which
signatures run as NumPy and what each way measured. ``tk.jit(f, numpy_fallback=False)`` keeps
every call in segments; backends whose results are device arrays never fall back."""
from __future__ import annotations

from dataclasses import dataclass

from ..profiler.events import PLAIN_NUMPY

EAGER_MIN_BREAKS = 32  # breaks a call in segments before plain NumPy is tried in its place
EAGER_SPEEDUP = 2.0  # how much faster NumPy must be to take over
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

    @property
    def runs_eagerly(self) -> bool:
        """Does the next call run as plain NumPy (the trial, or the choice)?"""
        return self.decided == "numpy" or (
            self.decided is None and self.segmented_calls >= SEGMENTED_CALLS
            and self.breaks >= EAGER_MIN_BREAKS)

    def segmented(self, seconds: float, breaks: int) -> None:
        self.segmented_calls += 1
        self.segmented_seconds = min(self.segmented_seconds, seconds)
        self.breaks = breaks

    def eager(self, seconds: float) -> None:
        self.eager_calls += 1
        if self.decided is None:
            self.eager_seconds = seconds
            self.decided = ("numpy" if seconds * EAGER_SPEEDUP <= self.segmented_seconds
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


__all__ = ["EAGER_MIN_BREAKS", "EAGER_SPEEDUP", "HOST_BACKENDS", "REASON", "EagerChoice"]
