"""The LLVM worker process seen from toolkit: requests go to it one at a time, and it is replaced
after ``COMPILES_PER_WORKER`` programs so that what llvmlite leaks per compile (see
``llvm_worker``) leaves with it. While a worker starts, and wherever one cannot run, programs
compile in this process instead: the same code, the same object bytes.

``TOOLKIT_LLVM_WORKER=0`` keeps every compile in this process."""
from __future__ import annotations

import os
import struct
import subprocess
import sys
import threading

from ...config import env_int
from . import llvm_worker

COMPILES_PER_WORKER = 256  # ~25 MB of llvmlite's leak at most, then a fresh worker
_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "llvm_worker.py")
# run the worker's file as __main__ with neither its folder nor the working directory on the
# path (a user's struct.py next to the notebook must not shadow the stdlib there)
_BOOT = ("import os, runpy, sys; sys.path[:] = [p for p in sys.path if p not in ('', os.getcwd())]; "
         "runpy.run_path(sys.argv[1], run_name='__main__')")


class WorkerUnavailable(RuntimeError):
    """The worker could not answer (not started, died, pipe closed): compile in this process."""


class _Worker:
    def __init__(self):
        self.process = subprocess.Popen([sys.executable, "-c", _BOOT, _SCRIPT], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0)
        self.ready = threading.Event()
        self.failed = False
        self.compiles = 0
        threading.Thread(target=self._await_ready, name="toolkit-llvm-worker-start", daemon=True).start()

    def _await_ready(self) -> None:
        try:
            self.failed = llvm_worker.read_exactly(self.process.stdout, 1) != llvm_worker._READY
        except (EOFError, OSError, ValueError):
            self.failed = True
        self.ready.set()

    def compile(self, ir_text: str) -> tuple[str, bytes, float, float]:
        try:
            llvm_worker.write_blob(self.process.stdin, ir_text.encode())
            self.process.stdin.flush()
            status = llvm_worker.read_exactly(self.process.stdout, 1)
            if status == llvm_worker._ERROR:
                raise RuntimeError(llvm_worker.read_blob(self.process.stdout).decode())
            optimizing, emitting = struct.unpack("<dd", llvm_worker.read_exactly(self.process.stdout, 16))
            text = llvm_worker.read_blob(self.process.stdout).decode()
            return text, llvm_worker.read_blob(self.process.stdout), optimizing, emitting
        except (EOFError, OSError, ValueError) as e:
            self.failed = True
            raise WorkerUnavailable(str(e)) from e
        finally:
            self.compiles += 1

    def close(self) -> None:
        try:
            self.process.stdin.close()  # the worker's loop ends at end of input
        except OSError:
            pass
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
        for stream in (self.process.stdout,):
            try:
                stream.close()
            except OSError:
                pass


class WorkerProcess:
    """One worker at a time, started on first use and replaced every ``COMPILES_PER_WORKER``."""

    def __init__(self, compiles_per_worker: int = COMPILES_PER_WORKER):
        self.compiles_per_worker = compiles_per_worker
        self._worker: _Worker | None = None
        self._lock = threading.Lock()
        self._broken = False  # a worker could not start here: stop trying
        self.started = 0  # workers started (for tests and the soak report)

    @staticmethod
    def enabled() -> bool:
        return env_int("TOOLKIT_LLVM_WORKER", 1, 0, 1) == 1

    def compile(self, ir_text: str) -> tuple[str, bytes, float, float]:
        """(optimised IR, object code, seconds optimising, seconds emitting) from the worker; ``WorkerUnavailable`` while none is ready."""
        with self._lock:
            worker = self._current()
            if worker is None or not worker.ready.is_set() or worker.failed:
                raise WorkerUnavailable("the LLVM worker is starting" if worker is not None and not worker.failed
                                        else "no LLVM worker")
            return worker.compile(ir_text)

    def _current(self) -> _Worker | None:
        worker = self._worker
        if worker is not None and (worker.failed and worker.ready.is_set() or
                                   worker.compiles >= self.compiles_per_worker):
            if worker.failed and worker.compiles == 0:
                self._broken = True  # it never answered: this machine cannot run one
            worker.close()
            worker = self._worker = None
        if worker is None and not self._broken:
            try:
                worker = self._worker = _Worker()
                self.started += 1
            except OSError:
                self._broken = True
        return worker

    def shutdown(self) -> None:
        with self._lock:
            if self._worker is not None:
                self._worker.close()
                self._worker = None


WORKER = WorkerProcess()


def _shutdown_at_exit() -> None:
    WORKER.shutdown()


import atexit  # noqa: E402  (registered after WORKER exists)

atexit.register(_shutdown_at_exit)
