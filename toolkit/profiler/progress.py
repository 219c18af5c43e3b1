"""Progress of long compiles: a compile that has run for more than a second says what it is
doing (the phase, the program's size, the time so far) on stderr, refreshed twice a second on
one line in a terminal, a line per phase elsewhere (a notebook shows stderr under the cell).
Short compiles print nothing. Passes and backends report phases with ``phase()``, which costs
one thread-local read when no compile is being watched."""
from __future__ import annotations

import contextlib
import os
import sys
import threading
import time

DELAY_SECONDS = 1.0
_local = threading.local()


class CompileProgress:
    def __init__(self, name: str, instructions: int, stream=None, delay: float = DELAY_SECONDS):
        self.name, self.instructions = name, instructions
        self.stream = stream if stream is not None else sys.stderr
        self.delay = delay
        self.start = time.perf_counter()
        self.current = "starting"
        self.shown = False
        self._last_shown = ""
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def phase(self, name: str) -> None:
        self.current = name

    def line(self) -> str:
        return (f"[toolkit] compiling {self.name}: {self.instructions:,} instructions, "
                f"{self.current}, {time.perf_counter() - self.start:.1f} s")

    def _show(self) -> None:
        if not self._tty and self.current == self._last_shown:
            return
        self._last_shown = self.current
        self.shown = True
        self._write(("\r" + self.line().ljust(100)) if self._tty else self.line() + "\n")

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # a closed stream: progress is a courtesy
            pass

    def finish(self) -> None:
        if _WATCHER.remove(self) and self.shown:  # (after it, the watcher never shows it)
            self.current = "done"
            self._write(("\r" + self.line().ljust(100) + "\n") if self._tty
                        else self.line() + "\n")


class _Watcher:
    """One thread for every watched compile, started once: a thread of its own per compile
    cost its start, and a join that waited for the interpreter to switch to it (milliseconds
    of a 50 ms compile). It sleeps while no compile is watched, wakes when the oldest one is
    due, and refreshes the shown ones twice a second."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._active: list[CompileProgress] = []
        self._thread: threading.Thread | None = None

    def add(self, progress: CompileProgress) -> None:
        with self._lock:
            self._active.append(progress)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="toolkit-compile-progress")
                self._thread.start()
            self._changed.notify()

    def remove(self, progress: CompileProgress) -> bool:
        """Stop watching ``progress`` (True where it was watched)."""
        with self._lock:
            for k, p in enumerate(self._active):
                if p is progress:
                    del self._active[k]
                    return True
        return False

    def _run(self) -> None:
        with self._lock:
            while True:
                if not self._active:
                    self._changed.wait()
                    continue
                now = time.perf_counter()
                wait = 0.5
                for p in self._active:
                    due = p.start + p.delay - now
                    if due <= 0:
                        p._show()  # (under the lock: finish() cannot write in between)
                    else:
                        wait = min(wait, due)
                self._changed.wait(wait)


_WATCHER = _Watcher()


def _after_fork_in_child() -> None:  # (the thread is not in the child; its lock may be held)
    global _WATCHER
    _WATCHER = _Watcher()


os.register_at_fork(after_in_child=_after_fork_in_child)


@contextlib.contextmanager
def watch_compile(name: str, instructions: int, stream=None, delay: float | None = None):
    progress = CompileProgress(
        name, instructions, stream, DELAY_SECONDS if delay is None else delay
    )
    previous = getattr(_local, "progress", None)
    _local.progress = progress
    _WATCHER.add(progress)
    try:
        yield progress
    finally:
        _local.progress = previous
        progress.finish()


def phase(name: str) -> None:
    """Tell the watched compile (if any) which phase it is in."""
    progress = getattr(_local, "progress", None)
    if progress is not None:
        progress.current = name
