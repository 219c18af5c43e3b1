"""``python -m toolkit.bench --collectives``: collectives' time and bandwidth, in nccl-tests'
``all_reduce_perf`` layout (size, count, type, time, algbw, busbw), for all-reduce,
all-gather, reduce-scatter and all-to-all over 2 and 4 ranks, side by side:

- ``host``: toolkit's host devices (one thread per device of this process, the collectives
  meeting in shared memory): the compiled one-collective program run on every device;
- ``mpi``: the same program under ``mpiexec -n R`` (``tk.distributed``: MPI calls);
- ``mpi4py``: mpi4py's own ``Allreduce``/``Allgather``/``Reduce_scatter_block``/``Alltoall``
  on NumPy buffers, in the same MPI job (the floor toolkit's MPI path is measured against);
- ``jax``: ``jax.jit(shard_map(...))`` over forced host devices, where JAX is installed.

``size`` is nccl-tests': the bytes of a rank's send buffer for all-reduce, reduce-scatter and
all-to-all, of its receive buffer for all-gather. algbw = size / time; busbw = algbw times
nccl-tests' factor (all-reduce 2(n-1)/n, the others (n-1)/n). Times are the mean of a timed
loop after a warm-up, as nccl-tests'. Sizes run 8 B to ``--max-bytes`` (256 MB) by powers of 4.
Then the data-parallel MLP step on 2 host devices against one device on half the batch. A
benchmark, not a test: the numbers are this machine's."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")  # nccl-tests' names
RANKS = (2, 4)


def sizes(max_bytes: int) -> list[int]:
    out, n = [], 8
    while n <= max_bytes:
        out.append(n)
        n *= 4
    return out


def iterations(size: int) -> int:
    """The same on every rank (MPI ranks must agree): many for small messages, few for big."""
    return int(min(50, max(3, 2e8 // max(size, 1))))


def _program(op: str, ranks: int):
    """The one-collective function, run over a 1-D mesh of ``ranks`` devices."""
    import toolkit as tk

    def collective(a):
        if op == "all_reduce":
            return tk.lax.psum(a, "x")
        if op == "all_gather":
            return tk.lax.all_gather(a, "x", tiled=True)
        if op == "reduce_scatter":
            return tk.lax.psum_scatter(a, "x", tiled=True)
        return tk.lax.all_to_all(a, "x", 0, 0, tiled=True)
    collective.__name__ = op
    return collective, tk.Mesh((ranks,), ("x",))


def _send_elements(op: str, size: int, ranks: int) -> int:
    """float32 elements of a rank's send buffer for nccl-tests' ``size``."""
    count = max(size // 4, 1)
    if op == "all_gather":
        count = max(count // ranks, 1)
    return max(count // ranks, 1) * ranks if op in ("reduce_scatter", "all_to_all") else count


def _compiled(op: str, ranks: int, elements: int):
    from .frontend.collectives import mesh_context
    from .spmd import _compile

    fn, mesh = _program(op, ranks)

    def traced(a):
        with mesh_context(mesh):
            return fn(a)
    traced.__name__ = fn.__name__
    block = np.ones(elements, np.float32)
    return _compile(traced, [block], None), mesh


def _time(run, iters: int) -> float:
    run()  # warm-up
    start = time.perf_counter()
    for _ in range(iters):
        run()
    return (time.perf_counter() - start) / iters


def host_side(max_bytes: int) -> list[dict]:
    from .spmd import _run_devices

    rows = []
    for ranks in RANKS:
        for op in OPS:
            for size in sizes(max_bytes):
                elements = _send_elements(op, size, ranks)
                compiled, mesh = _compiled(op, ranks, elements)
                blocks = [[np.full(elements, d + 1, np.float32)] for d in range(ranks)]
                seconds = _time(lambda: _run_devices(compiled.compiled, compiled.has_collectives,
                                                    blocks, mesh, None, op),
                                iterations(size))
                rows.append(dict(side="host", op=op, ranks=ranks, size=size, seconds=seconds))
    return rows


def mpi_worker(max_bytes: int, out: str) -> None:
    """Run by every rank of ``mpiexec -n R``: toolkit's MPI path, then mpi4py's own calls."""
    from mpi4py import MPI

    from . import distributed
    from .ir.collectives import on_device

    distributed.initialize(timeout=600)
    comm = MPI.COMM_WORLD
    rank, ranks = comm.Get_rank(), comm.Get_size()
    rows = []
    for op in OPS:
        for size in sizes(max_bytes):
            elements = _send_elements(op, size, ranks)
            compiled = _compiled(op, ranks, elements)[0].compiled
            send = np.full(elements, rank + 1, np.float32)
            recv = np.empty(elements * (ranks if op == "all_gather" else 1)
                            // (ranks if op == "reduce_scatter" else 1), np.float32)
            run = distributed.MpiRun(600.0)

            def toolkit_call():
                with on_device(run, rank):
                    compiled(send)
                comm.Barrier()

            def raw_call():
                if op == "all_reduce":
                    comm.Allreduce(send, recv, op=MPI.SUM)
                elif op == "all_gather":
                    comm.Allgather(send, recv)
                elif op == "reduce_scatter":
                    comm.Reduce_scatter_block(send, recv, op=MPI.SUM)
                else:
                    comm.Alltoall(send, recv)
                comm.Barrier()
            iters = iterations(size)
            for side, call in (("mpi", toolkit_call), ("mpi4py", raw_call)):
                comm.Barrier()
                seconds = comm.allreduce(_time(call, iters), op=MPI.MAX)  # the slowest rank
                rows.append(dict(side=side, op=op, ranks=ranks, size=size, seconds=seconds))
    if rank == 0:
        with open(out, "w") as f:
            json.dump(rows, f)


def mpi_side(max_bytes: int, workdir: str) -> list[dict]:
    mpiexec = (shutil.which("mpiexec", path=os.path.dirname(sys.executable))
               or shutil.which("mpiexec"))
    if mpiexec is None:
        print("(no mpiexec: pip install '.[distributed]' for the MPI columns)", file=sys.stderr)
        return []
    rows = []
    env = {**os.environ, "HYDRA_LAUNCHER": "fork", "OMPI_ALLOW_RUN_AS_ROOT": "1",
           "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    for ranks in RANKS:
        out = os.path.join(workdir, f"mpi{ranks}.json")
        proc = subprocess.run([mpiexec, "-n", str(ranks), sys.executable, "-m",
                               "toolkit.bench_collectives", "--mpi-worker", out,
                               "--max-bytes", str(max_bytes)], env=env, capture_output=True,
                              text=True)
        if proc.returncode:
            print(f"(the {ranks}-rank MPI job failed: {proc.stderr[-2000:]})", file=sys.stderr)
            continue
        with open(out) as f:
            rows += json.load(f)
    return rows


JAX_WORKER = r"""
import json, os, sys, time
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
try:
    from jax import shard_map
except ImportError:
    from jax.experimental.shard_map import shard_map
sys.path.insert(0, sys.argv[3])
from toolkit.bench_collectives import OPS, RANKS, _send_elements, iterations, sizes
rows = []
for ranks in RANKS:
    mesh = Mesh(np.array(jax.devices()[:ranks]), ("x",))
    for op in OPS:
        fn = {"all_reduce": lambda a: jax.lax.psum(a, "x"),
              "all_gather": lambda a: jax.lax.all_gather(a, "x", tiled=True),
              "reduce_scatter": lambda a: jax.lax.psum_scatter(a, "x", tiled=True),
              "all_to_all": lambda a: jax.lax.all_to_all(a, "x", 0, 0, tiled=True)}[op]
        f = jax.jit(shard_map(fn, mesh=mesh, in_specs=P("x"), out_specs=P("x")))
        for size in sizes(int(sys.argv[1])):
            n = _send_elements(op, size, ranks)
            x = jax.device_put(np.ones(n * ranks, np.float32), NamedSharding(mesh, P("x")))
            f(x).block_until_ready()
            iters = iterations(size)
            t = time.perf_counter()
            for _ in range(iters):
                f(x).block_until_ready()
            rows.append(dict(side="jax", op=op, ranks=ranks, size=size,
                             seconds=(time.perf_counter() - t) / iters))
json.dump(rows, open(sys.argv[2], "w"))
"""


def jax_side(max_bytes: int, workdir: str) -> list[dict]:
    try:
        import jax  # noqa: F401
    except ImportError:
        print("(JAX is not installed: pip install '.[bench]' for the JAX column)",
              file=sys.stderr)
        return []
    out = os.path.join(workdir, "jax.json")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run([sys.executable, "-c", JAX_WORKER, str(max_bytes), out, root],
                          capture_output=True, text=True)
    if proc.returncode:
        print(f"(the JAX run failed: {proc.stderr[-2000:]})", file=sys.stderr)
        return []
    with open(out) as f:
        return json.load(f)


def data_parallel_step() -> str:
    """The issue's third target: a data-parallel MLP training step (float32, batch 512, 256 ->
    512 -> 1) on 2 host devices, against one device's step on half the batch (with all the
    cores, and with one, each device's share)."""
    import toolkit as tk

    from .backends.blas_threads import blas_threads
    from .backends.cpu.executor import kernel_threads

    rng = np.random.default_rng(0)
    batch, width, hidden = 512, 256, 512
    x = rng.standard_normal((batch, width)).astype(np.float32)
    y = rng.standard_normal((batch, 1)).astype(np.float32)
    w1 = (rng.standard_normal((width, hidden)) / 16).astype(np.float32)
    w2 = (rng.standard_normal((hidden, 1)) / 16).astype(np.float32)

    def loss(w1, w2, x, y):
        return np.mean((np.maximum(x @ w1, 0) @ w2 - y) ** 2)

    def step(w1, w2, x, y):
        value, (g1, g2) = tk.value_and_grad(loss, argnums=(0, 1))(w1, w2, x, y)
        return w1 - 0.01 * g1, w2 - 0.01 * g2, value

    def mapped_step(w1, w2, x, y):
        value, (g1, g2) = tk.value_and_grad(
            lambda a, b: tk.lax.pmean(loss(a, b, x, y), "d"), argnums=(0, 1))(w1, w2)
        return w1 - 0.01 * g1, w2 - 0.01 * g2, value

    P = tk.P
    mesh = tk.Mesh((2,), ("d",))
    single = tk.jit(step)
    mapped = tk.shard_map(mapped_step, mesh, in_specs=(P(), P(), P("d"), P("d")),
                          out_specs=(P(), P(), P()))
    sharded = tk.jit(step, in_shardings=tuple(tk.NamedSharding(mesh, P(*s))
                                              for s in ((), (), ("d",), ("d",))))
    half = (w1, w2, x[:batch // 2], y[:batch // 2])

    def one_core():
        with blas_threads(1), kernel_threads(1):
            single(*half)

    def best(fn):
        return min(_time(fn, 20) for _ in range(5))
    t_half, t_one = best(lambda: single(*half)), best(one_core)
    t_map, t_shard = best(lambda: mapped(w1, w2, x, y)), best(lambda: sharded(w1, w2, x, y))
    return "\n".join([
        "", "## Data-parallel MLP step (float32, batch 512, 256 -> 512 -> 1), 2 host devices", "",
        "| | ms | vs one device, half batch, all cores | vs the same on one core |",
        "|---|---:|---:|---:|",
        f"| one device, half batch, all cores | {t_half * 1e3:.3f} | 1.00x | |",
        f"| one device, half batch, one core | {t_one * 1e3:.3f} | {t_one / t_half:.2f}x | 1.00x |",
        f"| shard_map, 2 devices | {t_map * 1e3:.3f} | {t_map / t_half:.2f}x | "
        f"{t_map / t_one:.2f}x |",
        f"| jit(in_shardings=), 2 devices | {t_shard * 1e3:.3f} | {t_shard / t_half:.2f}x | "
        f"{t_shard / t_one:.2f}x |",
        "", "(target: <= 1.3x the single-rank step on half the batch)"])


def table(rows: list[dict], sides: list[str]) -> str:
    """nccl-tests' columns, one time/algbw/busbw triple per side."""
    from .ir.collectives import bus_bandwidth_factor

    by = {(r["side"], r["op"], r["ranks"], r["size"]): r["seconds"] for r in rows}
    lines = []
    for ranks in RANKS:
        for op in OPS:
            present = [s for s in sides if any(k[:3] == (s, op, ranks) for k in by)]
            if not present:
                continue
            lines += ["", f"## {op}, {ranks} ranks (float32, sum)", "",
                      "| size (B) | count | " + " | ".join(
                          f"{s} time (us) | {s} algbw (GB/s) | {s} busbw (GB/s)"
                          for s in present) + " |",
                      "|---:|---:|" + "---:|" * (3 * len(present))]
            for size in sorted({k[3] for k in by if k[1:3] == (op, ranks)}):
                cells = []
                for s in present:
                    seconds = by.get((s, op, ranks, size))
                    if seconds is None:
                        cells += ["", "", ""]
                        continue
                    algbw = size / seconds / 1e9
                    busbw = algbw * bus_bandwidth_factor(op.replace("_", "-"), ranks)
                    cells += [f"{seconds * 1e6:.1f}", f"{algbw:.3f}", f"{busbw:.3f}"]
                lines.append(f"| {size} | {max(size // 4, 1)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def targets(rows: list[dict]) -> str:
    """The issue's targets at >= 1 MB: toolkit's MPI all-reduce busbw against mpi4py's, and
    host devices against MPI (geometric means over sizes)."""
    by = {(r["side"], r["op"], r["ranks"], r["size"]): r["seconds"] for r in rows}
    lines = ["", "## At >= 1 MB (geometric means over sizes)", ""]
    for ranks in RANKS:
        big = sorted({k[3] for k in by if k[2] == ranks and k[3] >= 1 << 20})

        def ratio(a, b, op):
            pairs = [(by[(a, op, ranks, s)], by[(b, op, ranks, s)]) for s in big
                     if (a, op, ranks, s) in by and (b, op, ranks, s) in by]
            return (float(np.exp(np.mean([np.log(y / x) for x, y in pairs]))) if pairs
                    else None)
        mpi = ratio("mpi", "mpi4py", "all_reduce")
        host = ratio("host", "mpi", "all_reduce")
        if mpi is not None:
            lines.append(f"- {ranks} ranks: toolkit's MPI all-reduce busbw {mpi:.2f}x raw "
                         "mpi4py's (target >= 0.9x)")
        if host is not None:
            lines.append(f"- {ranks} ranks: host devices {host:.2f}x faster than toolkit over "
                         "MPI (target >= 2x)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser("toolkit.bench --collectives", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--max-bytes", type=lambda s: int(float(s.rstrip("MB")) * (
        1 << 20 if s.endswith("MB") else 1)), default=256 << 20,
        help="the largest size (bytes, or e.g. 32MB); default 256MB")
    p.add_argument("--sides", default="host,mpi,mpi4py,jax")
    p.add_argument("--out", default="toolkit-bench-collectives")
    p.add_argument("--no-step", action="store_true",
                   help="leave out the data-parallel training step")
    p.add_argument("--mpi-worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.mpi_worker:
        mpi_worker(args.max_bytes, args.mpi_worker)
        return 0
    sides = [s for s in args.sides.split(",") if s]
    os.makedirs(args.out, exist_ok=True)
    rows: list[dict] = []
    if "host" in sides:
        rows += host_side(args.max_bytes)
    if "mpi" in sides or "mpi4py" in sides:
        rows += [r for r in mpi_side(args.max_bytes, args.out) if r["side"] in sides]
    if "jax" in sides:
        rows += jax_side(args.max_bytes, args.out)
    step = data_parallel_step() + "\n" if "host" in sides and not args.no_step else ""
    text = "# toolkit collectives (nccl-tests layout)\n" + table(rows, sides) + "\n" + \
        targets(rows) + "\n" + step
    with open(os.path.join(args.out, "collectives.md"), "w") as f:
        f.write(text)
    with open(os.path.join(args.out, "collectives.json"), "w") as f:
        json.dump(rows, f, indent=1)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
