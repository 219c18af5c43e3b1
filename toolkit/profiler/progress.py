"""Progress of long compiles: a compile that has run for more than a second says what it is
doing (the phase, the program's size, the time so far) on stderr, refreshed twice a second on
one line in a terminal, a line per phase elsewhere (a notebook shows stderr under the cell).
Short compiles print nothing. Passes and backends report phases with ``phase()``, which costs
one thread-local read when no compile is being watched."""
from __future__ import annotations

import contextlib
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
        self._done = threading.Event()
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._thread = threading.Thread(
            target=self._watch, name="toolkit-compile-progress", daemon=True
        )

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
        text = self.line()
        try:
            self.stream.write(("\r" + text.ljust(100)) if self._tty else text + "\n")
            self.stream.flush()
        except (OSError, ValueError):  # a closed stream: progress is a courtesy
            pass

    def _watch(self) -> None:
        if self._done.wait(self.delay):
            return
        while True:
            self._show()
            if self._done.wait(0.5):
                return

    def finish(self) -> None:
        self._done.set()
        self._thread.join()
        if self.shown:
            self.current = "done"
            text = self.line()
            try:
                self.stream.write(("\r" + text.ljust(100) + "\n") if self._tty else text + "\n")
                self.stream.flush()
            except (OSError, ValueError):
                pass


@contextlib.contextmanager
def watch_compile(name: str, instructions: int, stream=None, delay: float | None = None):
    progress = CompileProgress(
        name, instructions, stream, DELAY_SECONDS if delay is None else delay
    )
    previous = getattr(_local, "progress", None)
    _local.progress = progress
    progress._thread.start()
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
