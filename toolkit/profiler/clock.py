"""One monotonic clock for every timestamp in a profile; injectable so tests need no sleeping."""
from __future__ import annotations

import time


class PerfClock:
    """Seconds from ``time.perf_counter`` (monotonic, sub-microsecond)."""

    name = "perf_counter"

    def now(self) -> float:
        return time.perf_counter()


class ManualClock:
    """A clock that moves only when told to (for tests)."""

    name = "manual"

    def __init__(self, start: float = 0.0):
        self.t = float(start)

    def now(self) -> float:
        return self.t

    def advance(self, seconds: float) -> float:
        self.t += seconds
        return self.t


DEFAULT_CLOCK = PerfClock()
