"""``python -m toolkit.bench --compile``: compile time and memory at the scale of real programs.

Unrolled Python loops make programs of thousands of instructions. For each family (an
elementwise chain, a 1-D and a 2-D stencil over time steps, a chain of dots, a triangular
recursion whose slices grow by one each trip) and each size (1k ... 16k instructions) one fresh
process traces and compiles the program and reports trace, passes, codegen and total seconds
and its peak RSS; the table gives the growth per doubling.
Last, a Jacobi stencil of 50 steps on 64x64: its compile time, and its run time against NumPy."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np

from .ir.ops import GroupOp

SIZES = (1000, 2000, 4000, 8000, 16000)
FAMILIES = ("chain", "stencil-1d", "stencil-2d", "dots", "triangular")
_PER_STEP = {"chain": 4, "stencil-1d": 8, "stencil-2d": 14, "dots": 1, "triangular": 22}


def program(family: str, steps: int):
    """(function, arguments) of about ``_PER_STEP[family] * steps`` instructions."""
    if family == "chain":
        def f(x):
            for _ in range(steps):
                x = x * 1.0001 + 0.5
            return x
        return f, (np.ones(4096),)
    if family == "stencil-1d":
        def f(a):
            for _ in range(steps):
                a = np.concatenate([a[:1], 0.33333 * (a[:-2] + a[1:-1] + a[2:]), a[-1:]])
            return a
        return f, (np.linspace(0, 1, 4096),)
    if family == "stencil-2d":
        return jacobi(steps), (np.linspace(0, 1, 64 * 64).reshape(64, 64),)
    if family == "dots":
        def f(m, v):
            for _ in range(steps):
                v = m @ v
            return v
        return f, (np.eye(64) * 0.5, np.ones(64))
    if family == "triangular":
        # Levinson-Durbin, as written by hand: every trip's slices have their own length, so
        # nothing is alike up to offsets and the kernels' sibling merges are many
        def f(r):
            y = np.empty_like(r)
            alpha, beta = -r[0], 1.0
            y[0] = -r[0]
            for k in range(1, steps + 1):
                beta *= 1.0 - alpha * alpha
                alpha = -(r[k] + np.dot(np.flip(r[:k]), y[:k])) / beta
                y[:k] += alpha * np.flip(y[:k])
                y[k] = alpha
            return y
        return f, (np.linspace(0.2, 0.01, steps + 1),)
    raise ValueError(family)


def jacobi(steps: int):
    def f(a):
        for _ in range(steps):
            inner = 0.25 * (a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:])
            a = np.pad(inner, 1) + a * np.pad(np.zeros_like(inner), 1, constant_values=1.0)
        return a
    return f


def measure(family: str, target: int) -> dict:
    """One program, in this (fresh) process."""
    import resource

    import toolkit as tk

    steps = max(1, target // _PER_STEP[family])
    fn, args = program(family, steps)
    jitted = tk.jit(fn, backend="cpu")
    t0 = time.perf_counter()
    lowered = jitted.lower(*args)
    t1 = time.perf_counter()
    compiled = lowered.compile()
    t2 = time.perf_counter()
    passes = sum(p.duration for p in compiled.phases if p.name == "passes")
    return {"family": family, "instructions": len(lowered.hlo.entry.instructions), "trace": t1 - t0,
            "passes": passes, "codegen": (t2 - t1) - passes, "total": t2 - t0,
            "kernels": sum(i.opcode in GroupOp.COUNTED_AS_KERNELS
                           for i in compiled.optimized_hlo.entry.instructions),
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def jacobi_row() -> dict:
    import toolkit as tk
    from .timing import median_seconds as _time

    fn = jacobi(50)
    a = np.linspace(0, 1, 64 * 64).reshape(64, 64)
    t0 = time.perf_counter()
    compiled = tk.jit(fn, backend="cpu").lower(a).compile()
    seconds = time.perf_counter() - t0
    np.testing.assert_allclose(compiled(a), fn(a), rtol=1e-12)
    return {
        "compile": seconds,
        "toolkit": _time(lambda: compiled(a)),
        "numpy": _time(lambda: fn(a)),
    }


def _in_fresh_process(*args: str) -> dict:
    env = {**os.environ, "TOOLKIT_CACHE_DIR": "off"}
    out = subprocess.run(
        [sys.executable, "-m", "toolkit.bench_compile", *args],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=1800,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def table(rows: list[dict]) -> str:
    lines = [
        (
            "| program | instructions | kernels | trace s | passes s | codegen s | total s | x per "
            "doubling | peak RSS MiB |"
        ),
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    previous: dict[str, float] = {}
    for r in rows:
        before = previous.get(r["family"])
        growth = f"{r['total'] / before:.2f}x" if before else ""
        previous[r["family"]] = r["total"]
        lines.append(f"| {r['family']} | {r['instructions']} | {r['kernels']} | {r['trace']:.2f} | "
                     f"{r['passes']:.2f} | {r['codegen']:.2f} | {r['total']:.2f} | {growth} | "
                     f"{r['peak_rss_mib']:.0f} |")
    return "\n".join(lines)


def run(families=FAMILIES, sizes=SIZES, out=sys.stdout) -> tuple[list[dict], dict]:
    rows = []
    for family in families:
        for size in sizes:
            rows.append(_in_fresh_process("--measure", family, str(size)))
            print(f"  {family} {size}: {rows[-1]['total']:.2f} s", file=sys.stderr, flush=True)
    jac = _in_fresh_process("--jacobi")
    print(table(rows), file=out)
    print(f"\nJacobi 2-D stencil, 50 steps on 64x64: compiles in {jac['compile']:.2f} s; runs in "
          f"{jac['toolkit'] * 1e6:.1f} µs (NumPy {jac['numpy'] * 1e6:.1f} µs, "
          f"{jac['numpy'] / jac['toolkit']:.2f}x)", file=out)
    return rows, jac


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--measure"]:
        print(json.dumps(measure(argv[1], int(argv[2]))))
        return 0
    if argv[:1] == ["--jacobi"]:
        print(json.dumps(jacobi_row()))
        return 0
    sizes = SIZES
    if "--sizes" in argv:
        sizes = tuple(int(s) for s in argv[argv.index("--sizes") + 1].split(","))
    run(sizes=sizes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
