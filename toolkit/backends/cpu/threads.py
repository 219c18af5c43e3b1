"""Threads for the CPU's kernels: how many (the cores this process may use, or
$TOOLKIT_NUM_THREADS), a per-calling-thread budget (host devices of an SPMD run share the
cores), the Python pool that splits large kernels outside native programs, and the work from
which splitting pays off, through that pool or through the native helpers of a native
program (``_kernel_call.c: run_split``)."""
from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

from ...config import env_int
from .native import _native, native_split

# Handing a chunk to a pool thread and waiting for it costs ~70 µs on a 2-vCPU VM (measured):
# threads pay off only for kernels of about a million elements and more.
PARALLEL_THRESHOLD = 1 << 20
# Inside a native program such a kernel splits over native helper threads (_kernel_call's
# run_split) instead: a sleeping helper wakes within ~20 µs, a spinning one takes a chunk within
# a microsecond, and the caller takes the chunks a late helper has not. On a 2-vCPU VM that
# paid off from a million elements (exp 1.4x, tanh 2.2x, x + 1 2.5x the Python pool's split);
# below, where a helper put on the caller's core helps late or not at all, a run was as often
# slower as faster (64k-512k elements: 0.4x to 1.9x), so the threshold stays the pool's.
NATIVE_SPLIT_WORK = env_int("TOOLKIT_NATIVE_SPLIT_WORK", PARALLEL_THRESHOLD, 1, 1 << 62)


def available_cores() -> int:
    return (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    )


def num_threads() -> int:
    """$TOOLKIT_NUM_THREADS, at most the cores this process may run on (more threads than cores
    only add hand-off cost to compute-bound kernels), or all of those cores."""
    cores = available_cores()
    return env_int("TOOLKIT_NUM_THREADS", cores, 1, cores)


_BUDGET = threading.local()  # a calling thread's cap on the threads its kernels split over


class kernel_threads:
    """Within it, kernels called from this thread split over at most ``n`` threads: host
    devices of an SPMD run each take their share of the cores, not all of them at once."""

    def __init__(self, n: int):
        self.n = max(1, int(n))

    def __enter__(self):
        self.saved = getattr(_BUDGET, "n", None)
        _BUDGET.n = self.n
        if native_split:  # (native programs' split kernels read the cap in C)
            _native.set_thread_budget(self.n)
        return self

    def __exit__(self, *exc):
        _BUDGET.n = self.saved
        if native_split:
            _native.set_thread_budget(self.saved or 0)
        return False


def _budget(threads: int) -> int:
    cap = getattr(_BUDGET, "n", None)
    return threads if cap is None else min(threads, cap)


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def pool(n: int) -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None or _pool._max_workers < n:
            _pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="toolkit-cpu")
        return _pool


def split_bounds(extent: int, n: int, grain: int = 1) -> list[int]:
    """``n`` near-equal chunks of range(extent) whose inner bounds are multiples of ``grain``."""
    return [
        extent if i == n else min(extent, (extent * i // n + grain - 1) // grain * grain)
        for i in range(n + 1)
    ]


def _fork_join(n: int, run_chunk) -> None:
    """Chunks 1..n-1 on pool threads, chunk 0 on the calling thread (ctypes releases the GIL)."""
    futures = [pool(n - 1).submit(run_chunk, c) for c in range(1, n)]
    run_chunk(0)
    for f in futures:
        f.result()
