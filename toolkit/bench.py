"""``python -m toolkit.bench``: toolkit vs NumPy vs JAX (when installed), side by side.

Each side runs in several fresh processes; a cell is the best of the per-process medians
(process-to-process noise on this class of machine is 5-20%, and jax.jit is bimodal between
processes). Every side allocates its output on every call, as a user's code would. Writes
a markdown table and JSON to --out. ``--compile`` measures compile time and memory for
programs of 1k-16k instructions instead (``toolkit.bench_compile``)."""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time

import numpy as np

from .timing import median_seconds as _time
from .workloads import BENCHMARK, LOOP_PROGRAMS, Workload, scaled

ROWS = (*BENCHMARK, *LOOP_PROGRAMS)

SIDES = ("numpy", "toolkit", "jax")


def _have_jax() -> bool:
    try:
        import jax  # noqa: F401
        return True
    except ImportError:
        return False


def _jax():
    """JAX with 64-bit types on: without it, JAX quietly computes the float64 rows in float32.
    (Python scalars stay weakly typed, so the float32 rows stay float32.)"""
    import jax

    jax.config.update("jax_enable_x64", True)
    return jax


def _bytes_moved(args, out) -> int:
    leaves = out if isinstance(out, tuple) else () if out is None else (out,)
    return sum(np.asarray(a).nbytes for a in args) + sum(np.asarray(o).nbytes for o in leaves)


def _callable(side: str, w: Workload):
    args = w.args()
    if side == "numpy":
        fn = w.make(np)
        return lambda: fn(*args), args, w.result(fn, args)
    if side == "toolkit":
        from . import api

        fn = api.jit(w.toolkit_function(), backend="cpu")
        return lambda: fn(*args), args, w.result(fn, args)
    jax = _jax()
    import jax.numpy as jnp

    fn = jax.jit(w.make(jnp))
    dev = [jax.device_put(a) for a in args]
    out = fn(*dev)
    result = (
        tuple(np.asarray(o) for o in out) if isinstance(out, (tuple, list)) else np.asarray(out)
    )
    return lambda: jax.block_until_ready(fn(*dev)), args, result


def _compile_time(side: str) -> float | None:
    """Seconds to compile a 20-op elementwise chain: first call minus a steady call."""
    x = np.random.default_rng(0).standard_normal(1 << 16).astype(np.float32)

    def chain(xp):
        def f(v):
            for i in range(10):
                v = xp.tanh(v) * (1.0 + 0.01 * i)
            return v
        return f

    if side in ("toolkit", "toolkit-cached"):
        from . import api

        saved = os.environ.get("TOOLKIT_CACHE_DIR")
        if side == "toolkit":
            os.environ["TOOLKIT_CACHE_DIR"] = "off"  # a cold compile: no persistent cache
        try:
            fn = api.jit(chain(np), backend="cpu")
            t0 = time.perf_counter()
            fn(x)
            first = time.perf_counter() - t0
        finally:
            if saved is None:
                os.environ.pop("TOOLKIT_CACHE_DIR", None)
            else:
                os.environ["TOOLKIT_CACHE_DIR"] = saved
        return first - _time(lambda: fn(x), repeats=3)
    if side == "jax":
        jax = _jax()
        import jax.numpy as jnp

        fn = jax.jit(chain(jnp))
        t0 = time.perf_counter()
        fn(x).block_until_ready()
        first = time.perf_counter() - t0
        return first - _time(lambda: fn(x).block_until_ready(), repeats=3)
    return None


def _dispatch(side: str) -> float:
    x = np.ones(1024, np.float32)
    if side == "numpy":
        return _time(lambda: x + 1, min_seconds=0.05)
    if side == "toolkit":
        from . import api

        f = api.jit(lambda v: v + 1, backend="cpu")
        return _time(lambda: f(x), min_seconds=0.05)
    jax = _jax()
    f = jax.jit(lambda v: v + 1)
    d = jax.device_put(x)
    return _time(lambda: f(d).block_until_ready(), min_seconds=0.05)


BREAKS_PER_CALL = 8


def _break_overhead(side: str) -> float | None:
    """Seconds each graph break adds to a cache-hit call: a function that asks Python for a
    traced value 8 times (``if x[0] > limit:``), against the same arithmetic in one program."""
    if side != "toolkit":
        return None
    from . import api

    def steps(x, limit, branch: bool):
        for _ in range(BREAKS_PER_CALL):
            x = x * 1.0001 + 1.0
            if branch and x[0] > limit:  # always true: one segment per step
                x = x - 0.5
            elif not branch:
                x = x - 0.5
        return x

    x = np.ones(1024)
    # (in segments on every call: on 1,024 elements plain NumPy would take over the calls)
    broken = api.jit(lambda v: steps(v, -1.0, True), backend="cpu", numpy_fallback=False)
    whole = api.jit(lambda v: steps(v, -1.0, False), backend="cpu")
    broken(x), whole(x)
    # A difference of two timings, so noise (another process, a busy host) counts twice:
    # both sides are timed in alternation, each run long enough to average a timer's
    # granularity away, and each side's fastest run is taken (noise only ever adds time)
    best = {broken: math.inf, whole: math.inf}
    for _ in range(25):
        for fn in best:
            start = time.perf_counter()
            for _ in range(100):
                fn(x)
            best[fn] = min(best[fn], (time.perf_counter() - start) / 100)
    return (best[broken] - best[whole]) / BREAKS_PER_CALL


_SMALL_KERNEL_OPS = (np.sin, np.cos, np.tanh, np.exp, np.abs, np.sqrt, np.log1p, np.negative)


def _many_small_kernels(x):
    """An unrolled program of ~280 kernels on 4 elements that neither fuse nor roll (a reduction
    between each step, the function changing from step to step)."""
    for i in range(200):
        s = x.sum() if i % 3 else x.max()
        x = _SMALL_KERNEL_OPS[i % 8](x) * 0.5 + s * 1e-3
        if i % 5 == 0:
            x = x[::-1]
    return x


def _kernel_dispatch(side: str) -> float | None:
    """Seconds per kernel of a cache-hit call of ``_many_small_kernels``: the whole program is
    one native call, so this is the dispatch of each kernel plus its own (tiny) work."""
    if side != "toolkit":
        return None
    from . import api
    from .profiler import profile

    x = np.ones(4)
    fn = api.jit(_many_small_kernels, backend="cpu")
    fn(x)
    with profile() as p:
        fn(x)
    kernels = len(p.kernels)
    return _time(lambda: fn(x), min_seconds=0.1) / max(kernels, 1)


def _ceiling() -> float:
    """Memory bandwidth (bytes/s) of a STREAM triad a = b + s*c on 32M floats, compiled by
    toolkit itself and run on every core: the ceiling the memory-bound rows are measured by."""
    from . import api

    n = 32 << 20
    b = np.ones(n, np.float32)
    c = np.ones(n, np.float32)
    triad = api.jit(lambda u, v: u + 3.0 * v, backend="cpu")
    seconds = min(_time(lambda: triad(b, c), repeats=3) for _ in range(2))
    return 3 * n * 4 / seconds


# rows also timed with tk.profile() open: profiling must not change what it measures
PROFILED_ROWS = ("chain 4M", "softmax 4096x1024", "layernorm 4096x1024")


def _profiled(call) -> float:
    """Seconds per call with a profile open around the timing (and its events recorded)."""
    from .profiler import profile

    with profile():
        return _time(call)


def worker(side: str, rows: list[str], scale: float) -> dict:
    out = {"side": side, "rows": {}, "profiled": {}}
    for w in ROWS:
        if w.name not in rows:
            continue
        w = scaled(w, scale) if scale != 1 else w
        start = time.perf_counter()
        call, args, result = _callable(side, w)  # the first call: trace and compile included
        first = time.perf_counter() - start
        seconds = _time(call)
        out["rows"][w.name] = {
            "seconds": seconds,
            "bytes": _bytes_moved(args, result),
            "flops": w.flops,
            "first_call": first,
        }
        if side == "toolkit" and w.name in PROFILED_ROWS:
            out["profiled"][w.name] = _profiled(call) / seconds
    out["compile_seconds"] = _compile_time(side)
    out["dispatch_seconds"] = _dispatch(side)
    out["break_seconds"] = _break_overhead(side)
    out["kernel_seconds"] = _kernel_dispatch(side)
    if side == "toolkit":
        _compile_time("toolkit-cached")  # fills the persistent cache, then measures a hit
        out["cached_compile_seconds"] = _compile_time("toolkit-cached")
    if side == "toolkit":
        out["ceiling_bytes_per_second"] = _ceiling()
    return out


def combine(runs: list[dict]) -> dict:
    """Best (lowest) of the process medians for every cell."""
    best: dict = {}
    for run in runs:
        side = best.setdefault(run["side"], {"rows": {}, "processes": 0})
        side["processes"] += 1
        for name, cell in run["rows"].items():
            if name not in side["rows"] or cell["seconds"] < side["rows"][name]["seconds"]:
                side["rows"][name] = dict(cell)
        for key in ("compile_seconds", "dispatch_seconds", "cached_compile_seconds",
                    "break_seconds", "kernel_seconds"):
            if run.get(key) is not None:
                side[key] = min(side.get(key, float("inf")), run[key])
        for name, ratio in run.get("profiled", {}).items():  # the best process's ratio
            side.setdefault("profiled", {})[name] = min(
                side.get("profiled", {}).get(name, float("inf")), ratio
            )
        if "ceiling_bytes_per_second" in run:
            side["ceiling"] = max(side.get("ceiling", 0.0), run["ceiling_bytes_per_second"])
        if "device" in run:
            side["device"] = run["device"]
        for name, error in run.get("errors", {}).items():  # a row that failed in a process
            if name not in side["rows"]:
                side.setdefault("errors", {})[name] = error
    for side in best.values():  # a row that ran in another process did not fail everywhere
        for name in list(side.get("errors", {})):
            if name in side["rows"]:
                del side["errors"][name]
    return best


def run_workers(module: str, sides: list[str], rows: list[str], scale: float, processes: int,
                env: dict | None = None, skip_failed: bool = False) -> list[dict] | None:
    """Each side's worker in ``processes`` fresh processes, interleaved; their JSON results.
    A failed worker stops the run (None), or with ``skip_failed`` leaves that process out."""
    runs = []
    for i in range(processes):
        for side in sides:
            cmd = [
                sys.executable,
                "-m",
                module,
                "--worker",
                side,
                "--rows",
                ",".join(rows),
                "--scale",
                str(scale),
            ]
            done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
            if done.returncode != 0:
                print(
                    f"{side} worker failed{' (left out)' if skip_failed else ''}:\n"
                    f"{done.stderr[-2000:]}",
                    file=sys.stderr,
                )
                if skip_failed:
                    continue
                return None
            runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(f"  process {i + 1}/{processes}: {side} done", file=sys.stderr)
    return runs


def write_results(out: str, runs: list[dict], best: dict, table: str) -> None:
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "benchmark.md"), "w") as f:
        f.write(table)
    with open(os.path.join(out, "benchmark.json"), "w") as f:
        json.dump({"runs": runs, "best": best}, f, indent=1)
    print(table)


def markdown(best: dict, rows: list[str]) -> str:
    sides = [s for s in SIDES if s in best]
    ceiling = best.get("toolkit", {}).get("ceiling")
    head = (
        "| workload | "
        + " | ".join(f"{s} ms" for s in sides)
        + " | toolkit GB/s | GFLOP/s | vs NumPy | vs JAX | % of ceiling | first call s |"
    )
    lines = [head, "|" + "---|" * (len(sides) + 7)]
    for name in rows:
        cells = {s: best[s]["rows"].get(name) for s in sides}
        tk_cell = cells.get("toolkit")
        if tk_cell is None:
            continue
        t = tk_cell["seconds"]
        gbs = tk_cell["bytes"] / t / 1e9
        gflops = f"{tk_cell['flops'] / t / 1e9:.0f}" if tk_cell["flops"] else ""
        vs_np = cells["numpy"]["seconds"] / t if cells.get("numpy") else float("nan")
        vs_jax = f"{cells['jax']['seconds'] / t:.2f}x" if cells.get("jax") else "n/a"
        pct = (
            f"{100 * tk_cell['bytes'] / t / ceiling:.0f}%"
            if ceiling and not tk_cell["flops"]
            else ""
        )
        times = " | ".join(
            f"{cells[s]['seconds'] * 1e3:.3f}" if cells.get(s) else "" for s in sides
        )
        first = tk_cell.get("first_call")
        first = f"{first:.2f}" if first is not None else ""
        lines.append(
            f"| {name} | {times} | {gbs:.1f} | {gflops} | {vs_np:.2f}x | {vs_jax} | {pct} | "
            f"{first} |"
        )
    lines.append("")
    for other, label in (("numpy", "NumPy"), ("jax", "JAX")):
        ratios = [
            best[other]["rows"][n]["seconds"] / best["toolkit"]["rows"][n]["seconds"]
            for n in rows
            if other in best
            and n in best[other]["rows"]
            and n in best.get("toolkit", {}).get("rows", {})
        ]
        if ratios:
            lines.append(
                f"Geometric mean of toolkit's speed-up over {label}: "
                f"{math.exp(sum(map(math.log, ratios)) / len(ratios)):.2f}x over {len(ratios)} "
                "rows."
            )
    profiled = best.get("toolkit", {}).get("profiled", {})
    if profiled:
        lines.append("Time under tk.profile() / unprofiled time: "
                     + ", ".join(f"{n} {r:.2f}x" for n, r in profiled.items()) + ".")
    if ceiling:
        lines.append(
            f"Bandwidth ceiling (STREAM triad compiled by toolkit, all cores): {ceiling / 1e9:.1f} "
            "GB/s."
        )
    for key, label, unit, factor in (
        ("compile_seconds", "Compile time of a 20-op elementwise chain (cold)", "ms", 1e3),
        ("cached_compile_seconds", "Same, loaded from toolkit's persistent cache", "ms", 1e3),
        ("dispatch_seconds", "Cache-hit call of x+1 on 1k elements", "µs", 1e6),
        ("break_seconds", "Each graph break of a cache-hit call (Python glue, its replayed "
         "operations, segment dispatch)", "µs", 1e6),
        ("kernel_seconds", "Each kernel inside a compiled program of ~280 kernels on 4 "
         "elements (its dispatch and its own work)", "ns", 1e9),
    ):
        parts = [
            f"{s} {best[s][key] * factor:.1f} {unit}" for s in sides if best[s].get(key) is not None
        ]
        lines.append(f"{label}: " + ", ".join(parts) + ".")
    counts = ", ".join(f"{s} {best[s]['processes']}" for s in sides)
    lines.append(f"Processes per side: {counts}; "
                 "each cell is the best of the per-process medians; GB/s counts each input read "
                 "once and the output written once.")
    return "\n".join(lines) + "\n"


def argument_parser(
    module: str, doc: str, sides, processes: int, out: str
) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"python -m {module}", description=doc)
    p.add_argument("--processes", type=int, default=processes)
    p.add_argument("--rows", default=",".join(w.name for w in ROWS),
                   help="comma-separated row names (default: all)")
    p.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="fraction of the full sizes (e.g. 0.05 to smoke-test)",
    )
    p.add_argument("--sides", default=",".join(sides))
    p.add_argument("--out", default=out)
    p.add_argument("--worker", help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--collectives" in argv:  # nccl-tests' layout: toolkit.bench_collectives
        from .bench_collectives import main as collectives_main

        return collectives_main([a for a in argv if a != "--collectives"])
    if "--compile" in argv:  # compile time and memory at scale: toolkit.bench_compile
        from .bench_compile import main as compile_main

        return compile_main([a for a in argv if a != "--compile"])
    args = argument_parser("toolkit.bench", __doc__, SIDES, 3, "toolkit-bench").parse_args(argv)
    rows = [r for r in args.rows.split(",") if r]
    if args.worker:
        print(json.dumps(worker(args.worker, rows, args.scale)))
        return 0
    sides = [s for s in args.sides.split(",") if s in SIDES and (s != "jax" or _have_jax())]
    runs = run_workers("toolkit.bench", sides, rows, args.scale, args.processes)
    if runs is None:
        return 1
    best = combine(runs)
    write_results(args.out, runs, best, markdown(best, rows))
    if "jax" not in sides:
        print("(JAX is not installed: pip install '.[bench]' for the JAX column)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
