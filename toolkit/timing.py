"""Timing a call as the benchmarks do (toolkit.bench, bench_compile, bench_gpu)."""
from __future__ import annotations

import statistics
import time


def median_seconds(call, min_seconds: float = 0.02, repeats: int = 7, sync=None) -> float:
    """Median seconds per call over ``repeats`` runs of enough calls to last ``min_seconds``;
    with ``sync`` (a GPU's wait-for-the-device), each run ends with one ``sync()``."""
    sync = sync or (lambda: None)
    call()
    call()
    sync()
    t0 = time.perf_counter()
    call()
    sync()
    one = max(time.perf_counter() - t0, 1e-7)
    number = max(1, int(min_seconds / one))
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(number):
            call()
        sync()
        samples.append((time.perf_counter() - t0) / number)
    return statistics.median(samples)
