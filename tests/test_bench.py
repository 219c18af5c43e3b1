"""The benchmarks' bookkeeping: best-of-processes, ratios and ceilings in the tables. (The
timings themselves are the benchmark's job, never a test's.)"""
import dataclasses

import numpy as np
import pytest

from toolkit.workloads import BENCHMARK

import toolkit as tk
from toolkit import bench, bench_compile, bench_gpu


def _run(side, seconds, **extra):
    return {
        "side": side,
        "rows": {"sum 16M": {"seconds": seconds, "bytes": 64e6, "flops": 0.0}},
        **extra,
    }


def test_cpu_table_takes_the_best_process_and_divides_the_right_way():
    runs = [_run("numpy", 4e-3), _run("toolkit", 2e-3, ceiling_bytes_per_second=40e9),
            _run("numpy", 3e-3), _run("toolkit", 1e-3, ceiling_bytes_per_second=30e9)]
    best = bench.combine(runs)
    assert (
        best["toolkit"]["rows"]["sum 16M"]["seconds"] == 1e-3 and best["toolkit"]["processes"] == 2
    )
    assert best["toolkit"]["ceiling"] == 40e9
    row = next(
        line
        for line in bench.markdown(best, ["sum 16M"]).splitlines()
        if line.startswith("| sum 16M")
    )
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:3] == ["3.000", "1.000"]  # NumPy ms, toolkit ms
    assert cells[3] == "64.0" and cells[5] == "3.00x"  # GB/s; NumPy's time over toolkit's
    assert cells[7] == "160%"  # of the 40 GB/s ceiling: the row fits in cache


def test_gpu_table_compares_with_cupy_and_jax_against_the_copy_ceiling():
    runs = [
        _run("toolkit", 25e-6),
        _run("toolkit-eager", 75e-6),
        _run("cupy", 50e-6, ceiling_bytes_per_second=3.0e12, device="NVIDIA H100"),
        _run("jax", 20e-6),
    ]
    best = bench.combine(runs)
    text = bench_gpu.markdown(best, ["sum 16M"])
    row = next(line for line in text.splitlines() if line.startswith("| sum 16M"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:5] == ["0.025", "0.075", "0.050", "0.020"]
    # GB/s, % of the copy ceiling; then launch by launch's, CuPy's and JAX's time over toolkit's
    assert cells[5:] == ["2560", "85%", "3.00x", "2.00x", "0.80x"]
    assert "Device: NVIDIA H100" in text and "3000 GB/s" in text


def test_gpu_benchmark_without_a_gpu_says_why(capsys):
    from toolkit.backends.gpu import why_unavailable as _available
    if _available() is None:
        pytest.skip("a GPU is present: the benchmark would run")
    assert bench_gpu.main(["--out", "unused"]) == 2
    assert "needs an NVIDIA GPU" in capsys.readouterr().err


def test_synchronised_timer_waits_for_the_work():
    pending = []
    seconds = bench_gpu._time_synchronised(
        lambda: pending.append(1), pending.clear, min_seconds=0.001, repeats=3
    )
    assert 0 < seconds < 1e-3 and pending == []
    assert np.isfinite(seconds)


@pytest.mark.parametrize("row", [w.name for w in BENCHMARK])  # (one per test: xdist spreads them)
def test_gpu_benchmark_toolkit_side_runs_on_the_gpu_executor(row):
    from conftest import SIMULATED_GPU
    from toolkit.workloads import scaled
    for w in [w for w in BENCHMARK if w.name == row]:
        w = scaled(w, 0.002)
        if w.name.startswith("rnn"):  # 256 trips on the simulated device: 8 run the same code
            w = dataclasses.replace(w, make_args=lambda r, make=w.make_args: (
                make(r)[0][:8],) + make(r)[1:])
        call, sync, result = bench_gpu._side(
            "toolkit", w, backend="gpu-simulated", device=SIMULATED_GPU
        )
        if w.in_place:  # its arguments, which the timed calls below go on writing
            result = tuple(np.array(a) for a in result)
        seconds = bench_gpu._time_synchronised(call, sync, min_seconds=0.0005, repeats=2)
        expected = w.result(w.make(np), w.args())
        pairs = list(zip(result, expected)) if isinstance(expected, tuple) else [(result, expected)]
        # (a training step's gradients: tk.grad against the hand-written backward pass)
        for got, want in pairs:
            np.testing.assert_allclose(
                np.asarray(got), want, rtol=1e-4, atol=1e-4 * np.abs(want).max()
            )
        assert seconds > 0 and bench_gpu._bytes_moved(w, result) >= sum(
            np.asarray(want).nbytes for _, want in pairs
        )


def test_every_row_computes_numpys_result_on_each_side():
    """The benchmark compares like with like: toolkit's function (tk.grad for the training rows)
    and JAX's version of each row compute what NumPy's computes (in-place rows: what they leave
    in their arguments)."""
    from toolkit import api
    from toolkit.workloads import BENCHMARK, scaled
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        jax = None
    for w in BENCHMARK:
        w = scaled(w, 0.01)
        args = w.args()  # (drawn at full size, then cut: drawn once, each side given copies)
        expected = w.result(w.make(np), [a.copy() for a in args])
        sides = {
            "toolkit": w.result(
                api.jit(w.toolkit_function(), backend="cpu"), [a.copy() for a in args]
            )
        }
        if jax is not None:
            with jax.enable_x64(True):
                sides["jax"] = w.result(jax.jit(w.make(jnp)), [a.copy() for a in args])
        for side, got in sides.items():
            pairs = list(zip(got, expected)) if isinstance(expected, tuple) else [(got, expected)]
            for g, want in pairs:
                np.testing.assert_allclose(
                    np.asarray(g),
                    want,
                    rtol=1e-4,
                    atol=1e-4 * (np.abs(want).max() + 1),
                    err_msg=f"{w.name} ({side})",
                )


def test_table_prints_geometric_means_and_the_profiled_ratio():
    def run(side, seconds, **extra):
        return {"side": side, "rows": {name: {"seconds": s, "bytes": 1e6, "flops": 0.0}
                                       for name, s in zip(("a", "b"), seconds)}, **extra}
    best = bench.combine([run("numpy", (4e-3, 1e-3)), run("jax", (2e-3, 2e-3)),
                          run("toolkit", (1e-3, 2e-3), profiled={"a": 1.08}),
                          run("toolkit", (2e-3, 4e-3), profiled={"a": 1.20})])
    text = bench.markdown(best, ["a", "b"])
    assert "speed-up over NumPy: 1.41x over 2 rows" in text  # sqrt(4 * 0.5)
    assert "speed-up over JAX: 1.41x over 2 rows" in text  # sqrt(2 * 1)
    assert "a 1.08x" in text  # the best process's ratio


def test_collectives_benchmark_writes_nccl_tests_columns(tmp_path):
    """``python -m toolkit.bench --collectives`` (host devices only, the smallest size: a smoke
    test of the layout; the numbers are a benchmark's, not a test's)."""
    from toolkit.bench import main

    assert main(["--collectives", "--max-bytes", "8", "--sides", "host", "--no-step", "--out",
                 str(tmp_path)]) == 0
    text = (tmp_path / "collectives.md").read_text()
    for op in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all"):
        for ranks in (2, 4):
            assert f"## {op}, {ranks} ranks" in text
    assert "| size (B) | count | host time (us) | host algbw (GB/s) | host busbw (GB/s) |" in text
    import json

    rows = json.loads((tmp_path / "collectives.json").read_text())
    assert len(rows) == 8 and all(r["seconds"] > 0 for r in rows)


def test_the_kernel_dispatch_row_runs_many_unfused_kernels_as_numpy_computes():
    """The per-kernel figure divides a call's time by the kernels it ran: the program must be
    hundreds of kernels (no fusion or rolling folded it away) and compute NumPy's result."""
    import toolkit as tk

    x = np.linspace(0.1, 0.9, 4)
    fn = tk.jit(bench._many_small_kernels, backend="cpu")
    np.testing.assert_allclose(fn(x), bench._many_small_kernels(x), rtol=1e-12)
    with tk.profile() as p:
        fn(x)
    # (200 steps of a reduction and an elementwise kernel each; a fusion bug once left the
    # chains unfused, 900 kernels)
    assert len(p.kernels) >= 250


@pytest.mark.parametrize("family", bench_compile.FAMILIES)
def test_compile_benchmark_programs_compute_what_numpy_does(family):
    fn, args = bench_compile.program(family, 12)
    expected = fn(*[np.copy(a) for a in args])
    np.testing.assert_allclose(tk.jit(fn, backend="cpu")(*args), expected, rtol=1e-12)
