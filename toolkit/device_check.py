"""``python -m toolkit.device_check [OUT]``: everything a session with a real GPU should run
first, in one command that fits a short device lease (about 6 minutes), writing at most 8 files
into OUT (``$OUT`` when set, else ``device-check/``):

- ``environment.txt``: the card, driver, CUDA, CuPy, JAX and NumPy versions, and what the
  driver offers the executor (CUDA graph capture through CuPy, conditional graph nodes).
- ``tests-gpu.txt``: the ``gpu``-marked tests.
- ``tests-real.txt``: the suites that run on the simulated GPU elsewhere, switched to the real
  device (``TOOLKIT_TEST_GPU=real``; the tests that read the simulated device's counters skip).
- ``bench.md`` / ``bench.json``: ``python -m toolkit.bench_gpu``, one process a side.
- ``programs.txt``: the many-kernel programs (the 100-dot chain, the GPT-2 forward pass)
  under ``tk.profile()``: launches, host dispatch against kernel time, the slowest kernels.

Each step has its own time limit, so one that hangs cannot take the others with it."""
from __future__ import annotations

import os
import platform
import subprocess
import sys
import time

# The suites that run on the simulated device in CI, and the selection that picks their GPU
# cases. Run on the real device with TOOLKIT_TEST_GPU=real.
REAL_SUITES = (
    "tests/test_gpu_ops.py",
    "tests/test_gpu_runtime.py",
    "tests/test_indexing.py",
    "tests/test_inplace.py",
    "tests/test_linalg.py",
    "tests/test_numpy_api.py",
    "tests/test_kernel_sharing.py",
    "tests/test_gpu_graphs.py",
    "tests/test_graph_breaks.py",
    "tests/test_gpu_device_arrays.py",
    "tests/test_loop_rolling.py",
)


def _run(cmd: list[str], out_file: str, seconds: float, env: dict | None = None) -> int:
    start = time.perf_counter()
    with open(out_file, "w") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        try:
            done = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=seconds,
                                  env=env)
            rc = done.returncode
        except subprocess.TimeoutExpired:
            rc = 124
            f.write(f"\n[device_check] stopped after {seconds:.0f} s\n")
        f.write(f"\n[device_check] rc={rc}, {time.perf_counter() - start:.1f} s\n")
    print(f"{os.path.basename(out_file)}: rc={rc}, {time.perf_counter() - start:.1f} s",
          flush=True)
    return rc


def environment() -> str:
    lines = [f"python {platform.python_version()}", f"platform {platform.platform()}"]
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,"
                              "clocks.max.sm", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        lines.append(f"nvidia-smi: {smi.stdout.strip() or smi.stderr.strip()}")
    except (OSError, subprocess.TimeoutExpired) as e:
        lines.append(f"nvidia-smi: {e}")
    import numpy

    lines.append(f"numpy {numpy.__version__}")
    for name in ("cupy", "jax", "llvmlite", "cuda.bindings"):
        try:
            module = __import__(name, fromlist=["__version__"])
            lines.append(f"{name} {getattr(module, '__version__', '?')}")
        except Exception as e:  # noqa: BLE001 - report whatever is missing
            lines.append(f"{name}: not importable ({type(e).__name__}: {e})")
    from .backends.gpu import why_unavailable

    lines.append(f"toolkit GPU backend: {why_unavailable() or 'available'}")
    if why_unavailable() is None:
        from .backends.gpu.device import default_device

        d = default_device()
        lines.append(repr(d))
        import cupy

        lines.append(f"CUDA runtime {cupy.cuda.runtime.runtimeGetVersion()}, driver "
                     f"{cupy.cuda.runtime.driverGetVersion()}")
        lines.append(graph_probe(d))
    return "\n".join(lines) + "\n"


def graph_probe(device) -> str:
    """What the executor could use for whole-program launch here: CuPy's stream capture of a
    toolkit kernel and a cuBLAS call, replayed; and NVIDIA's driver bindings' graph calls."""
    lines = []
    try:
        import cupy
        import numpy as np

        from . import api

        f = api.jit(lambda x, w: np.tanh(x @ w) + 1.0, backend="gpu")
        x = cupy.ones((64, 64), np.float32)
        exe = f.compiled(np.ones((64, 64), np.float32), np.ones((64, 64), np.float32))
        lines.append(f"kernels: {[k.kind for k in exe._executable.kernels()]}")
        stream = device.stream
        a = cupy.ones((64, 64), np.float32)
        with device._device, stream:
            stream.begin_capture()
            b = a @ a
            c = b + 1
            graph = stream.end_capture()
            graph.launch(stream)
        stream.synchronize()
        lines.append(f"cupy stream capture: ok ({float(c[0, 0])}); Graph has "
                     f"{[n for n in dir(graph) if not n.startswith('__')]}")
        del x
    except Exception as e:  # noqa: BLE001 - a probe reports what failed
        lines.append(f"cupy stream capture: {type(e).__name__}: {e}")
    try:
        from cuda.bindings import driver

        wanted = ("cuGraphExecKernelNodeSetParams", "cuGraphExecUpdate", "cuStreamBeginCapture",
                  "cuGraphConditionalHandleCreate", "cuGraphAddNode", "cuGraphInstantiate",
                  "cuGraphExecMemcpyNodeSetParams", "cuStreamGetCaptureInfo")
        lines.append("cuda.bindings.driver: " + ", ".join(
            f"{n}={'yes' if hasattr(driver, n) else 'no'}" for n in wanted))
    except Exception as e:  # noqa: BLE001
        lines.append(f"cuda.bindings: {type(e).__name__}: {e}")
    return "\n".join(lines)


def _on_host(out) -> list:
    """A call's results copied to the host (which waits for the device)."""
    import numpy as np

    return [np.asarray(o) for o in (out if isinstance(out, tuple) else (out,))]


def programs_report() -> str:
    """The many-kernel programs under the profiler: where their time goes."""
    import numpy as np

    from . import api
    from .backends.gpu import device_put
    from .frontend.pytree import tree_map
    from .profiler.session import profile
    from .workloads import BENCHMARK, PROGRAMS

    # the RNN's two scans (a loop driven on the device: its time per trip in the profile), and
    # the slowest rows against JAX in the last run (where their time goes, kernel by kernel)
    loops = [w for w in BENCHMARK if w.name.startswith(("rnn grads", "per-example", "gesummv"))]
    lines = []
    for w in (*PROGRAMS, *loops):
        fn = api.jit(w.toolkit_function(), backend="gpu")
        args = tree_map(device_put, w.args())
        start = time.perf_counter()
        want = w.make(np)(*w.args())
        got = _on_host(fn(*args))
        first_call = time.perf_counter() - start
        wants = want if isinstance(want, tuple) else (want,)
        error = max(float(np.max(np.abs(g - v))) for g, v in zip(got, wants))
        calls = []
        for _ in range(5):  # unprofiled calls, each waited for
            t0 = time.perf_counter()
            _on_host(fn(*args))
            calls.append(time.perf_counter() - t0)
        lines.append(f"## {w.name}\nunprofiled calls (with the download of the results): "
                     + ", ".join(f"{c * 1e3:.3f}" for c in calls) + " ms")
        with profile() as p:
            _on_host(fn(*args))
        kernels = list(p.kernels)
        device_seconds = sum(e.duration for e in kernels)
        lines.append(f"first call (trace + compile + run) {first_call:.2f} s; "
                     f"max abs error against NumPy {error:.3g}")
        lines.append(f"profiled call: {len(kernels)} kernel events, {device_seconds * 1e3:.3f} ms "
                     f"on the device, wall {p.wall_seconds * 1e3:.3f} ms")
        lines.append(p.summary())
        slowest = sorted(kernels, key=lambda e: -e.duration)[:15]
        for e in slowest:
            lines.append(f"  {e.duration * 1e6:9.1f} us  {e.name} {e.kind} {e.launch} "
                         f"{e.flops / 1e6:.1f} MFLOP {e.bytes_accessed / 1e6:.2f} MB")
        by_kind: dict = {}
        for e in kernels:
            n, t = by_kind.get(e.kind, (0, 0.0))
            by_kind[e.kind] = (n + 1, t + e.duration)
        for kind, (n, t) in sorted(by_kind.items(), key=lambda kv: -kv[1][1]):
            lines.append(f"  kind {kind}: {n} kernels, {t * 1e3:.3f} ms")
        lines.append("")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    out = argv[0] if argv else os.environ.get("OUT") or "device-check"
    os.makedirs(out, exist_ok=True)
    started = time.perf_counter()
    with open(os.path.join(out, "environment.txt"), "w") as f:
        f.write(environment())
    py = sys.executable
    env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false", PYTHONUNBUFFERED="1")
    workers = ["-n", os.environ.get("TOOLKIT_CHECK_WORKERS", "8")]
    try:
        import xdist  # noqa: F401
    except ImportError:
        workers = []
    # -v: every test's name and outcome as it finishes, so a step stopped at its limit still
    # says what ran
    steps = os.environ.get("TOOLKIT_CHECK_STEPS", "gpu,real,bench,programs").split(",")
    common = ["-v", "-rfE", "-p", "no:cacheprovider", "--tb=short",
              "--continue-on-collection-errors", *workers]
    limit = float(os.environ.get("TOOLKIT_CHECK_STEP_SECONDS", "100"))
    suites = [s for s in REAL_SUITES if os.path.exists(s)]
    bench = [py, "-m", "toolkit.bench_gpu", "--processes", "1", "--out", out]
    if os.environ.get("TOOLKIT_CHECK_ROWS"):
        bench += ["--rows", os.environ["TOOLKIT_CHECK_ROWS"]]
    if os.environ.get("TOOLKIT_CHECK_SIDES"):
        bench += ["--sides", os.environ["TOOLKIT_CHECK_SIDES"]]
    commands = {  # step -> (command, output file, time limit, environment)
        "gpu": ([py, "-m", "pytest", *common, "-m", "gpu", "tests"], "tests-gpu.txt", limit, env),
        "real": ([py, "-m", "pytest", *common, "-k", "gpu", *suites], "tests-real.txt", limit,
                 dict(env, TOOLKIT_TEST_GPU="real")),
        "programs": ([py, "-c", "from toolkit.device_check import programs_report as r; "
                      "print(r())"], "programs.txt", limit, env),
        "bench": (bench, "bench-log.txt", 1.5 * limit, env),
    }
    for step in steps:  # in the order asked for
        cmd, name, seconds, step_env = commands[step]
        _run(cmd, os.path.join(out, name), seconds, step_env)
    print(f"device check done in {time.perf_counter() - started:.0f} s; files in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
