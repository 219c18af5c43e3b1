"""``with tk.profile() as prof:`` collects every event recorded while it is open."""
from __future__ import annotations

import json
import threading
from typing import Iterable

from .clock import DEFAULT_CLOCK
from .events import (SCHEMA_FORMAT, SCHEMA_VERSION, AllocationEvent, CollectiveEvent,
                     CompileEvent, DispatchEvent, FusionDecision, KernelEvent, PassEvent,
                     RecompileEvent, TransferEvent, event_from_dict, event_to_dict,
                     PromotionEvent, GraphBreakEvent)
from .recorder import RECORDER


class Profile:
    """A profiling session: open it as a context manager; query, report, save or export it.

    A session sees the events of every thread of the process while it is open (compiles and
    calls made by worker threads included); sessions may nest, and each open one gets every
    event. Events carry the thread that made them (``event.thread``) to tell them apart."""

    def __init__(self, clock=None, name: str = ""):
        self.clock = clock or DEFAULT_CLOCK
        self.name = name
        self.events: list = []
        self.start: float | None = None
        self.end: float | None = None
        self.overhead_seconds = 0.0
        self._lock = threading.Lock()
        # set by adopt_compile: the earlier compile this run's program came from
        self.cached_program = ""
        # advice the summary leads with (what a %%xla cell's extra outputs cost)
        self.notes: list[str] = []

    # ---- session ------------------------------------------------------------------------
    def __enter__(self) -> Profile:
        self.start = self.clock.now()
        RECORDER.attach(self)
        return self

    def __exit__(self, *exc) -> None:
        RECORDER.detach(self)
        self.end = self.clock.now()

    def _append(self, event) -> None:
        with self._lock:
            self.events.append(event)

    def _charge(self, seconds: float) -> None:
        with self._lock:
            self.overhead_seconds += seconds

    def adopt_compile(self, compiled, what: str) -> None:
        """A run whose program came from a cache compiled nothing inside this session: take the
        passes and fusion decisions of the compile that made it, so its story is not lost."""
        with self._lock:
            self.events.extend(list(compiled.pass_events) + list(compiled.fusion_decisions))
            self.cached_program = what

    # ---- queries -------------------------------------------------------------------------
    def _of(self, cls) -> list:
        return [e for e in self.events if type(e) is cls]

    compiles = property(lambda self: self._of(CompileEvent))
    recompiles = property(lambda self: self._of(RecompileEvent))
    passes = property(lambda self: self._of(PassEvent))
    fusion_decisions = property(lambda self: self._of(FusionDecision))
    kernels = property(lambda self: self._of(KernelEvent))
    transfers = property(lambda self: self._of(TransferEvent))
    allocations = property(lambda self: self._of(AllocationEvent))
    dispatches = property(lambda self: self._of(DispatchEvent))
    promotions = property(lambda self: self._of(PromotionEvent))
    graph_breaks = property(lambda self: self._of(GraphBreakEvent))
    collectives = property(lambda self: self._of(CollectiveEvent))

    @property
    def wall_seconds(self) -> float:
        if self.start is None:
            return 0.0
        end = self.end if self.end is not None else self.clock.now()
        return max(end - self.start, 0.0)

    @property
    def overhead_fraction(self) -> float:
        """Time the profiler spent on its own bookkeeping (building and recording events, its
        extra clock reads), as a fraction of the session's wall time. A lower bound: the
        instrumented execution loop's own slowdown is not separable from its normal work."""
        wall = self.wall_seconds
        return self.overhead_seconds / wall if wall > 0 else 0.0

    # ---- reports -------------------------------------------------------------------------
    def summary(self) -> str:
        from .report import profile_summary_text

        return profile_summary_text(self)

    def _repr_html_(self) -> str:
        from .report import profile_summary_html

        return profile_summary_html(self)

    def __repr__(self) -> str:
        return (f"<Profile {len(self.events)} events: {len(self.compiles)} compiles, "
                f"{len(self.recompiles)} recompiles, {len(self.kernels)} kernels>")

    # ---- persistence and export -------------------------------------------------------------
    def to_dict(self) -> dict:
        return {"format": SCHEMA_FORMAT, "version": SCHEMA_VERSION, "name": self.name,
                "clock": getattr(self.clock, "name", type(self.clock).__name__),
                "start": self.start, "end": self.end, "overhead_seconds": self.overhead_seconds,
                "events": [event_to_dict(e) for e in self.events]}

    def save(self, path: str) -> None:
        with open(path, "w") as f:
            json.dump(self.to_dict(), f, indent=1)

    @classmethod
    def from_dict(cls, data: dict) -> Profile:
        if data.get("format") != SCHEMA_FORMAT:
            raise ValueError(f"not a toolkit profile (format={data.get('format')!r})")
        if int(data.get("version", 0)) > SCHEMA_VERSION:
            raise ValueError(f"profile schema version {data['version']} is newer than this "
                             f"toolkit understands ({SCHEMA_VERSION}); upgrade toolkit")
        prof = cls(name=data.get("name", ""))
        prof.start, prof.end = data.get("start"), data.get("end")
        prof.overhead_seconds = data.get("overhead_seconds", 0.0)
        prof.events = [event_from_dict(e) for e in data.get("events", [])]
        return prof

    @classmethod
    def load(cls, path: str) -> Profile:
        with open(path) as f:
            return cls.from_dict(json.load(f))

    def to_chrome_trace(self, path: str | None = None) -> dict:
        """Chrome Trace Event JSON (opens in Perfetto); written to ``path`` when given."""
        from .chrome_trace import chrome_trace

        trace = chrome_trace(self.events, self.start or 0.0)
        if path is not None:
            with open(path, "w") as f:
                json.dump(trace, f)
        return trace

    def extend(self, events: Iterable) -> None:
        for e in events:
            self._append(e)

    def __eq__(self, other) -> bool:
        return isinstance(other, Profile) and self.to_dict() == other.to_dict()

    __hash__ = None


def profile(clock=None, name: str = "") -> Profile:
    """``with tk.profile() as prof:`` records compiles, recompiles, kernels and transfers."""
    return Profile(clock, name)
