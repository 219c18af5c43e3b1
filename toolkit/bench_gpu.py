"""``python -m toolkit.bench_gpu``: the benchmark's workloads on an NVIDIA GPU, side by side:
toolkit (fused kernels, ``backend="gpu"``), CuPy (its own kernel per NumPy call: unfused) and
JAX on the GPU when installed, with the device-to-device copy bandwidth as the ceiling.

Inputs are on the device before timing (``tk.device_put``, CuPy arrays, ``jax.device_put``);
every call allocates its output; a cell is the median over repeats of the mean time per call
of a loop of calls followed by one synchronisation, best over processes. GB/s counts each
input read once and the output written once."""
from __future__ import annotations

import json
import os
import sys

import numpy as np

from .bench import _time, argument_parser, combine, run_workers, write_results
from .frontend.pytree import flatten, tree_map
from .workloads import BENCHMARK, PROGRAMS, Workload, scaled

# "jax" runs float32 dots at full precision (jax.default_matmul_precision("highest")), as NumPy
# and toolkit do: the ratio compares like with like. "jax-default" is JAX as it ships, whose
# float32 dots on the GPU use TF32 (about 3 decimal digits fewer); it is reported beside it.
# "toolkit-eager" is toolkit launching kernel by kernel (TOOLKIT_GPU_GRAPHS=0), as before
# whole-program launch: the gain of replaying one CUDA graph per call, measured in the same run.
SIDES = ("toolkit", "toolkit-eager", "cupy", "jax", "jax-default")
ROWS = (*BENCHMARK, *PROGRAMS)


def _time_synchronised(call, sync, min_seconds: float = 0.05, repeats: int = 7) -> float:
    return _time(call, min_seconds, repeats, sync)


def _side(side: str, w: Workload, backend: str = "gpu", device=None):
    """(call, sync, result) for one workload on one side, inputs already on the device
    (``backend`` and ``device`` are toolkit's: the default CUDA device unless given)."""
    host_args = w.args()
    if side == "toolkit-eager":
        os.environ["TOOLKIT_GPU_GRAPHS"] = "0"  # the worker is a process of its own
        side = "toolkit"
    if side == "toolkit":
        from . import api
        from .backends.gpu import device_put
        from .backends.gpu.device import default_device

        device = device if device is not None else default_device()
        fn = api.jit(w.toolkit_function(), backend=backend)
        args = tree_map(lambda a: device_put(a, device), host_args)
        return (lambda: fn(*args)), device.synchronize, w.result(fn, args)
    if side == "cupy":
        import cupy

        fn = w.make(cupy)
        args = tree_map(cupy.asarray, host_args)
        out = w.result(fn, args)
        result = (
            tuple(cupy.asnumpy(o) for o in out) if isinstance(out, tuple) else cupy.asnumpy(out)
        )
        return (lambda: fn(*args)), cupy.cuda.Stream.null.synchronize, result
    from .bench import _jax

    jax = _jax()
    import jax.numpy as jnp

    if side == "jax":
        jax.config.update("jax_default_matmul_precision", "highest")
    fn = jax.jit(w.make(jnp))
    args = [jax.device_put(a) for a in host_args]
    state = {}

    def call():
        state["out"] = fn(*args)
        return state["out"]

    return call, lambda: jax.block_until_ready(state["out"]), fn(*args)


def _copy_ceiling() -> float:
    """Device-to-device copy bandwidth (bytes read + written per second) of 1 GiB through
    cudaMemcpyAsync: the ceiling for memory-bound kernels."""
    import cupy

    n = 1 << 28
    src = cupy.ones(n, cupy.float32)
    dst = cupy.empty_like(src)
    stream = cupy.cuda.Stream.null

    def copy():
        cupy.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, src.nbytes,
                                      cupy.cuda.runtime.memcpyDeviceToDevice, stream.ptr)
    seconds = _time_synchronised(copy, stream.synchronize)
    return 2 * src.nbytes / seconds


def _bytes_moved(w: Workload, result) -> int:
    leaves = result if isinstance(result, tuple) else (result,)
    return sum(np.asarray(a).nbytes for a in flatten(w.args())[0]) + sum(
        np.asarray(o).nbytes for o in leaves
    )


def worker(side: str, rows: list[str], scale: float) -> dict:
    out: dict = {"side": side, "rows": {}, "errors": {}}
    for w in ROWS:
        if w.name not in rows:
            continue
        w = scaled(w, scale) if scale != 1 else w
        try:  # one failing row is reported, and the others still run
            call, sync, result = _side(side, w)
            seconds = _time_synchronised(call, sync)
        except Exception as e:  # noqa: BLE001 - any failure of one row, reported by name
            out["errors"][w.name] = f"{type(e).__name__}: {e}"[:500]
            print(f"{side}: row {w.name!r} failed: {out['errors'][w.name]}", file=sys.stderr)
            continue
        out["rows"][w.name] = {
            "seconds": seconds,
            "bytes": _bytes_moved(w, result),
            "flops": w.flops,
        }
    if side == "cupy":
        out["ceiling_bytes_per_second"] = _copy_ceiling()
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(0)
        out["device"] = (
            props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        )
    return out


def markdown(best: dict, rows: list[str]) -> str:
    sides = [s for s in SIDES if s in best]
    ceiling = best.get("cupy", {}).get("ceiling")
    lines = ["| workload | " + " | ".join(f"{s} ms" for s in sides)
             + " | toolkit GB/s | % of copy | vs eager | vs CuPy | vs JAX |",
             "|" + "---|" * (len(sides) + 6)]
    for name in rows:
        cells = {s: best[s]["rows"].get(name) for s in sides}
        mine = cells.get("toolkit")
        if mine is None:
            continue
        t = mine["seconds"]
        gbs = mine["bytes"] / t
        pct = f"{100 * gbs / ceiling:.0f}%" if ceiling and not mine["flops"] else ""
        ratio = {
            s: f"{cells[s]['seconds'] / t:.2f}x" if cells.get(s) else "n/a"
            for s in ("toolkit-eager", "cupy", "jax")
        }
        times = " | ".join(
            f"{cells[s]['seconds'] * 1e3:.3f}" if cells.get(s) else "" for s in sides
        )
        lines.append(
            f"| {name} | {times} | {gbs / 1e9:.0f} | {pct} | {ratio['toolkit-eager']} | "
            f"{ratio['cupy']} | {ratio['jax']} |"
        )
    for s in sides:
        for name, error in best[s].get("errors", {}).items():
            lines.append(f"| {name} | {s} failed: {error} |")
    lines.append("")
    device = best.get("cupy", {}).get("device", "unknown GPU")
    if ceiling:
        lines.append(f"Device: {device}. Ceiling: device-to-device copy, {ceiling / 1e9:.0f} GB/s "
                     "(bytes read + written).")
    lines.append("vs CuPy / vs JAX: their time over toolkit's (above 1x: toolkit is faster). "
                 "JAX's float32 dots at full precision; jax-default (TF32 dots) beside it.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = argument_parser("toolkit.bench_gpu", __doc__, SIDES, 2, "toolkit-bench-gpu").parse_args(
        argv
    )
    rows = [r for r in args.rows.split(",") if r]
    from .bench import ROWS as CPU_ROWS

    if args.rows == ",".join(w.name for w in CPU_ROWS):  # the default: every GPU row
        rows = [w.name for w in ROWS]
    if args.worker:
        print(json.dumps(worker(args.worker, rows, args.scale)))
        return 0
    from .backends.gpu import why_unavailable

    reason = why_unavailable()
    if reason is not None:
        print(f"python -m toolkit.bench_gpu needs an NVIDIA GPU: {reason}", file=sys.stderr)
        return 2
    env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false")  # JAX would take 75% of the GPU
    sides = [s for s in args.sides.split(",") if s in SIDES]
    runs = run_workers(
        "toolkit.bench_gpu", sides, rows, args.scale, args.processes, env, skip_failed=True
    )
    best = combine(runs)
    write_results(args.out, runs, best, markdown(best, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
