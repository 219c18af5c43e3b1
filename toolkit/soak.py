"""``python -m toolkit.soak``: resident memory over long runs, outside CI.

It measures what a long notebook session does to a process: many cache-hit calls, with and
without a profile open, many compiles of new shapes (then ``clear_cache()``), and threads
calling one function at once. Each phase prints the process's resident set size (RSS) before
and after, and the growth per call or per compile. Flat means: growth per cache-hit call of a
few bytes at most (none retained), and per compile what the compile cache holds until cleared."""
from __future__ import annotations

import argparse
import ctypes
import gc
import os
import sys
import threading
import time

import numpy as np


def rss_bytes() -> int:
    """The current resident set size (Linux: /proc; elsewhere: the peak, from getrusage)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024


def trim() -> None:
    """Collect garbage and hand freed heap pages back, so RSS shows what is still held."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


class Phase:
    def __init__(self, name: str, count: int, unit: str):
        self.name, self.count, self.unit = name, count, unit

    def __enter__(self):
        trim()
        self.before = rss_bytes()
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.t0
        trim()
        self.after = rss_bytes()
        return False

    @property
    def growth(self) -> int:
        return self.after - self.before

    def row(self) -> str:
        per = self.growth / max(self.count, 1)
        return (
            f"{self.name:<44} {self.count:>7} {self.before / 2**20:9.1f} {self.after / 2**20:9.1f} "
            f"{self.growth / 2**10:+10.1f} {per:+10.1f} B/{self.unit:<8} {self.seconds:7.2f}"
        )


HEADER = (f"{'phase':<44} {'count':>7} {'RSS MiB':>9} {'after':>9} {'growth KiB':>10} "
          f"{'per item':>12}{'':8} {'seconds':>7}")


def run(calls: int, compiles: int, threads: int, backend: str, out=sys.stdout) -> list[Phase]:
    import toolkit as tk

    phases: list[Phase] = []
    print(f"toolkit soak: backend={backend}, {calls} calls, {compiles} compiles, {threads} threads",
          file=out)
    print(HEADER, file=out)

    f = tk.jit(lambda x: x * 2.0 + 1.0, backend=backend)
    x = np.ones(1024, np.float32)
    for _ in range(200):
        f(x)
    with Phase("cache-hit calls", calls, "call") as p:
        for _ in range(calls):
            f(x)
    phases.append(p)
    print(p.row(), file=out)

    with Phase("cache-hit calls under tk.profile() (kept)", calls, "call") as p:
        with tk.profile() as prof:
            for _ in range(calls):
                f(x)
    phases.append(p)
    print(p.row() + f"  ({len(prof.events)} events kept by the open profile)", file=out)
    with Phase("  ... the profile dropped", calls, "call") as p:
        del prof
    phases.append(p)
    print(p.row(), file=out)

    g = tk.jit(lambda v: np.tanh(v) * 3.0 + v.sum(), backend=backend, on_recompile="ignore")
    g(np.ones(1, np.float32))
    with Phase("compiles of new shapes (cached)", compiles, "compile") as p:
        for n in range(2, compiles + 2):
            g(np.ones(n, np.float32))
    phases.append(p)
    print(p.row(), file=out)
    with Phase("  ... clear_cache()", compiles, "compile") as p:
        g.clear_cache()
    phases.append(p)
    print(p.row(), file=out)
    with Phase("compiles of new shapes, clear_cache() each", compiles, "compile") as p:
        for n in range(compiles + 2, 2 * compiles + 2):
            g(np.ones(n, np.float32))
            g.clear_cache()
    phases.append(p)
    print(p.row(), file=out)

    per_thread = calls // threads
    errors: list[BaseException] = []

    def worker():
        try:
            for _ in range(per_thread):
                f(x)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    with Phase(f"{threads} threads calling at once", per_thread * threads, "call") as p:
        pool = [threading.Thread(target=worker) for _ in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
    phases.append(p)
    print(p.row() + (f"  ERRORS: {errors[:3]}" if errors else ""), file=out)
    return phases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m toolkit.soak", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--compiles", type=int, default=1_000)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--backend", default="cpu")
    parser.add_argument("--disk-cache", action="store_true",
                        help="keep the persistent cache on (by default the soak measures compiles, "
                             "not disk hits, and writes nothing to it)")
    args = parser.parse_args(argv)
    if not args.disk_cache:
        os.environ["TOOLKIT_CACHE_DIR"] = "off"
    run(args.calls, args.compiles, args.threads, args.backend)
    return 0


if __name__ == "__main__":
    sys.exit(main())
