"""The process-wide recorder. Off, it is one attribute read (``RECORDER.active``) at each
instrumented site: no events are built, no clock is read, nothing is locked."""
from __future__ import annotations

import threading
import time

from .clock import DEFAULT_CLOCK


class Recorder:
    def __init__(self):
        self.active = False
        self.clock = DEFAULT_CLOCK
        # open sessions by identity (two sessions may compare equal); a tuple snapshot is what
        # record() reads, so delivering an event takes no lock and closing a session is O(1)
        self._sessions: dict[int, object] = {}
        self._snapshot: tuple = ()
        self._read_costs: dict[int, float] = {}
        self._lock = threading.Lock()

    def now(self) -> float:
        return self.clock.now()

    def attach(self, session) -> None:
        with self._lock:
            if self._sessions and session.clock is not self.clock:
                raise RuntimeError("nested profiles must share one clock")
            if id(session) in self._sessions:
                raise RuntimeError("this profile is already open")
            self.clock = session.clock
            self._sessions[id(session)] = session
            self._snapshot = tuple(self._sessions.values())
            self.active = True

    def detach(self, session) -> None:
        with self._lock:
            if self._sessions.pop(id(session), None) is None:
                return
            self._snapshot = tuple(self._sessions.values())
            self.active = bool(self._sessions)
            if not self._sessions:
                self.clock = DEFAULT_CLOCK

    def record(self, event) -> None:
        """Deliver ``event`` to every active session (thread-safe); the time spent here is
        charged to each session's overhead."""
        t0 = time.perf_counter()
        sessions = self._snapshot
        for s in sessions:
            s._append(event)
        spent = time.perf_counter() - t0
        for s in sessions:
            s._charge(spent)

    def clock_read_cost(self) -> float:
        """Seconds one ``clock.now()`` costs (calibrated once per clock), for overhead
        accounting."""
        cost = self._read_costs.get(id(self.clock))
        if cost is None:
            now = self.clock.now
            t0 = time.perf_counter()
            for _ in range(200):
                now()
            cost = self._read_costs[id(self.clock)] = (time.perf_counter() - t0) / 200
        return cost

    def charge(self, seconds: float) -> None:
        """Charge instrumentation time spent outside ``record`` (timers, event building)."""
        for s in self._snapshot:
            s._charge(seconds)


RECORDER = Recorder()
