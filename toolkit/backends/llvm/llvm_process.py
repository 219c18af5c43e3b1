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
from concurrent.futures import ThreadPoolExecutor

from ...config import env_int
from . import llvm_worker

COMPILES_PER_WORKER = 256  # ~25 MB of llvmlite's leak at most, then a fresh worker
_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "llvm_worker.py")
# run the worker's file as __main__ with neither its folder nor the working directory on the
# path (a user's struct.py next to the notebook must not shadow the stdlib there)
_BOOT = (
    "import os, runpy, sys; sys.path[:] = [p for p in sys.path if p not in ('', os.getcwd())]; "
    "runpy.run_path(sys.argv[1], run_name='__main__')"
)


class WorkerUnavailable(RuntimeError):
    """The worker could not answer (not started, died, pipe closed): compile in this process."""


class _Worker:
    def __init__(self):
        self.process = subprocess.Popen(
            [sys.executable, "-c", _BOOT, _SCRIPT],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            bufsize=0,
        )
        self.ready = threading.Event()
        self.failed = False
        self.compiles = 0
        threading.Thread(
            target=self._await_ready, name="toolkit-llvm-worker-start", daemon=True
        ).start()

    def _await_ready(self) -> None:
        try:
            self.failed = llvm_worker.read_exactly(self.process.stdout, 1) != llvm_worker._READY
        except (EOFError, OSError, ValueError):
            self.failed = True
        self.ready.set()

    def compile(self, ir_text: str, target: str) -> tuple[str, bytes, float, float]:
        try:
            llvm_worker.write_blob(self.process.stdin, target.encode())
            llvm_worker.write_blob(self.process.stdin, ir_text.encode())
            self.process.stdin.flush()
            status = llvm_worker.read_exactly(self.process.stdout, 1)
            if status == llvm_worker._ERROR:
                raise RuntimeError(llvm_worker.read_blob(self.process.stdout).decode())
            optimizing, emitting = struct.unpack(
                "<dd", llvm_worker.read_exactly(self.process.stdout, 16)
            )
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
    """Worker processes, started on first use, each replaced every ``COMPILES_PER_WORKER``
    programs. One serves whole programs (slot 0); a program compiled in parallel parts deals
    its parts out to one worker per part (up to the cores), which compile at once: the parts
    run in processes of their own, so llvmlite's lock does not serialise them either."""

    def __init__(self, compiles_per_worker: int = COMPILES_PER_WORKER):
        self.compiles_per_worker = compiles_per_worker
        self._slots: list[_Worker | None] = []
        self._slot_locks: list[threading.Lock] = []
        self._lock = threading.Lock()  # guards the slot lists
        self._broken = False  # a worker could not start here: stop trying
        self.started = 0  # workers started (for tests and the soak report)

    @staticmethod
    def enabled() -> bool:
        return env_int("TOOLKIT_LLVM_WORKER", 1, 0, 1) == 1

    def compile(
        self, ir_text: str, slot: int = 0, target: str = llvm_worker.HOST
    ) -> tuple[str, bytes, float, float]:
        """(optimised IR, object code, seconds optimising, seconds emitting) from the worker in
        ``slot``, for the host or an ``llvm_worker.nvptx_target`` (then the code is PTX);
        ``WorkerUnavailable`` while it is not ready (the caller compiles in-process)."""
        lock = self._slot_lock(slot)
        with lock:
            worker = self._current(slot)
            if worker is None or not worker.ready.is_set() or worker.failed:
                raise WorkerUnavailable(
                    "the LLVM worker is starting"
                    if worker is not None and not worker.failed
                    else "no LLVM worker"
                )
            return worker.compile(ir_text, target)

    def compile_parts(
        self, ir_texts: list[str], processes: int
    ) -> list[tuple[str, bytes, float, float]]:
        """Each part by a worker of its own (part k by worker k mod ``processes``), at once.
        ``WorkerUnavailable`` unless every worker needed is ready: the first such program starts
        them and compiles in-process; the next ones use them."""
        n = max(1, min(processes, len(ir_texts)))
        for k in range(n):
            with self._slot_lock(k):
                worker = self._current(k)
            if worker is None or worker.failed:
                raise WorkerUnavailable("no LLVM worker")
        if not all(self._slots[k] is not None and self._slots[k].ready.is_set() for k in range(n)):
            raise WorkerUnavailable("the LLVM workers are starting")
        with ThreadPoolExecutor(n, thread_name_prefix="toolkit-llvm-parts") as pool:
            return list(pool.map(lambda kt: self.compile(kt[1], kt[0] % n), enumerate(ir_texts)))

    def _slot_lock(self, slot: int) -> threading.Lock:
        with self._lock:
            while len(self._slots) <= slot:
                self._slots.append(None)
                self._slot_locks.append(threading.Lock())
            return self._slot_locks[slot]

    def _current(self, slot: int) -> _Worker | None:
        """The worker in ``slot`` (its lock held), replaced when spent or dead, started when
        absent."""
        worker = self._slots[slot]
        if worker is not None and (worker.failed and worker.ready.is_set() or
                                   worker.compiles >= self.compiles_per_worker):
            if worker.failed and worker.compiles == 0:
                self._broken = True  # it never answered: this machine cannot run one
            worker.close()
            worker = self._slots[slot] = None
        if worker is None and not self._broken:
            try:
                worker = self._slots[slot] = _Worker()
                self.started += 1
            except OSError:
                self._broken = True
        return worker

    def forget_after_fork(self) -> None:
        """In a forked child: the parent's workers and pipes are the parent's (a child writing
        to them would interleave with it). Start afresh; the parent keeps its own."""
        self._slots = []
        self._slot_locks = []
        self._lock = threading.Lock()

    def shutdown(self) -> None:
        with self._lock:
            slots = list(enumerate(self._slots))
        for k, worker in slots:
            if worker is not None:
                with self._slot_locks[k]:
                    worker.close()
                    self._slots[k] = None


WORKER = WorkerProcess()


def _shutdown_at_exit() -> None:
    WORKER.shutdown()


import atexit  # noqa: E402  (registered after WORKER exists)

atexit.register(_shutdown_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=WORKER.forget_after_fork)
