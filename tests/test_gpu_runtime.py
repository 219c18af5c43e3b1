"""The GPU runtime: device arrays, copies, timings and the executor's plan.

Every test runs on the simulated device (tests/simulated_gpu.py), which checks the executor's
side of the launch contract and counts copies; the same tests run on a real CUDA device,
marked ``gpu``, where CuPy and a device exist, and skip with the reason otherwise."""
import pathlib

import numpy as np
import pytest
from hypothesis import given, settings

import toolkit as tk
from toolkit.backends import Backend, RunContext, register_backend
from toolkit.backends.gpu import DeviceArray, compile_module
from toolkit.backends.gpu.device import cupy_or_reason
from toolkit.backends.reference.interpreter import EVALUATORS
from toolkit.passes.pipeline import make_pipeline
from toolkit.profiler.recorder import RECORDER

import programs
import test_random_programs as random_programs
from conftest import REAL_GPU, SIMULATED_GPU as SIMULATED, simulated_only
from backend_checks import assert_close
from helpers import assert_same
from simulated_gpu import SimulatedDevice

_cupy, _why_no_gpu = cupy_or_reason()


@pytest.fixture(params=["gpu-simulated", pytest.param("gpu", marks=pytest.mark.gpu)])
def backend(request):
    if request.param == "gpu" and _why_no_gpu:
        pytest.skip(f"GPU execution: {_why_no_gpu}")
    return request.param


def interpreter_results(fn, args):
    out = tk.jit(fn, backend="interpreter")(*args)
    return out if isinstance(out, tuple) else (out,)


def device_results(fn, args, backend):
    out = tk.jit(fn, backend=backend)(*args)
    out = out if isinstance(out, tuple) else (out,)
    assert all(isinstance(o, DeviceArray) for o in out), [type(o) for o in out]
    return tuple(np.asarray(o) for o in out)


@pytest.mark.parametrize("name", sorted(programs.make_cases(np.random.default_rng(0))))
def test_test_programs_match_the_interpreter(name, backend):
    fn, args = programs.make_cases(np.random.default_rng(0))[name]
    # exact but for dots (BLAS/cuBLAS sum in their own order) and, on a device, its math library
    has_dot = " dot(" in tk.jit(fn, backend="interpreter").compiled(*args).as_text()
    for got, want in zip(device_results(fn, args, backend), interpreter_results(fn, args)):
        if has_dot:
            np.testing.assert_allclose(
                got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max(initial=1)
            )
        elif backend == "gpu" or REAL_GPU:
            # a device sums in its own order (blocks, warps) and libdevice's exp/tanh are within
            # 1-2 ulp: tolerances scaled to the values, as the CPU's own vector math gets
            assert_close(got, want, approx=True)
        else:
            assert_same(got, want, approx=False)


FUSION_KINDS = {**programs.FUSION_KINDS, "dot": lambda x: x @ x.T + 1, "empty": lambda x: x[:0] * 2,
                "rows split over blocks": lambda x: np.concatenate([x] * 200, axis=1).sum(-1),
                "columns split over threads": lambda x: np.concatenate([x] * 100, axis=0).max(0)}


@pytest.mark.parametrize("kind", sorted(FUSION_KINDS))
def test_every_fusion_kind_matches_the_interpreter(kind, backend):
    x = np.random.default_rng(1).standard_normal((64, 96)).astype(np.float32)
    for got, want in zip(device_results(FUSION_KINDS[kind], (x,), backend),
                         interpreter_results(FUSION_KINDS[kind], (x,))):
        if kind == "dot":  # cuBLAS (and BLAS) sum in their own order
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
        elif backend == "gpu" or REAL_GPU:  # the device's summation order, scaled to the values
            assert_close(got, want, approx=True)
        else:
            assert_same(got, want, approx=True, rtol=2e-6)


def transfers(prof):
    return [(t.direction, t.bytes, t.what) for t in prof.transfers]


def test_numpy_arguments_are_copied_once_per_call_and_results_stay(backend):
    f = tk.jit(lambda x, y: x * y + 1, backend=backend)
    x = np.ones((256, 64), np.float32)
    y = np.full((256, 64), 2.0, np.float32)
    f(x, y)  # compiled outside the profile
    with tk.profile() as prof:
        out = f(x, y)
    assert transfers(prof) == [("host_to_device", x.nbytes, "x"), ("host_to_device", y.nbytes, "y")]
    assert isinstance(out, DeviceArray) and out.shape == (256, 64) and out.dtype == np.float32
    with tk.profile() as prof:
        host = np.asarray(out)
    assert transfers(prof) == [("device_to_host", x.nbytes, "lambda result")]
    assert prof.transfers[0].location.endswith(
        f"test_gpu_runtime.py:{_line_of('host = np.asarray(out)')}"
    )
    assert_same(host, x * y + 1)


def _line_of(text: str) -> int:
    import inspect
    return next(
        i
        for i, line in enumerate(inspect.getsource(inspect.getmodule(_line_of)).splitlines(), 1)
        if text in line
    )


def test_device_arrays_passed_between_functions_are_not_copied(backend):
    f = tk.jit(lambda x: x * 3, backend=backend)
    g = tk.jit(lambda a, b: (a + b).sum(axis=-1), backend=backend)
    x = np.arange(4096, dtype=np.float32).reshape(64, 64)
    g(f(x), f(x))
    with tk.profile() as prof:
        a = f(x)
        b = f(x)
        total = g(a, b)
    assert transfers(prof) == [("host_to_device", x.nbytes, "x")] * 2  # g copies nothing
    assert len(prof.kernels) == 3 and all(k.device == a.device for k in prof.kernels)
    assert_same(np.asarray(total), (x * 3 + x * 3).sum(axis=-1))


def test_a_fetched_result_sent_back_unchanged_is_flagged(backend):
    f = tk.jit(lambda x: x + 1, backend=backend)
    x = np.zeros(1000, np.float32)
    with tk.profile() as prof:
        y = np.asarray(f(x))  # fetched...
        f(y)  # ...and sent back: a round trip
        z = np.asarray(f(x)).copy()
        z[0] = 5.0
        f(z)  # changed on the host first: a real copy, not flagged
    flags = [t.avoidable for t in prof.transfers if t.direction == "host_to_device"]
    assert flags[0] == "" and flags[2] == "" and flags[3] == ""
    assert (
        "unchanged host copy of lambda result" in flags[1] and "pass the device array" in flags[1]
    )
    assert "round trip" in tk.profiler.report.profile_summary_text(prof)


def test_constants_are_uploaded_once_per_compiled_program(backend):
    from toolkit.backends import get_backend
    from toolkit.stages import lower_positional

    weights = np.linspace(0, 1, 64 * 8).astype(np.float32).reshape(64, 8)
    table = np.linspace(0, 1, 8).astype(np.float32)
    # (traced as an SPMD program is, the closure's arrays are constants of the program: tk.jit
    # would lift them into parameters, read and uploaded on every call, as test_captured shows)
    f = lower_positional(lambda x: (x @ weights) * table, "consts",
                         (np.ones((4, 64), np.float32),), get_backend(backend)).compile()
    x = np.ones((4, 64), np.float32)
    with tk.profile() as prof:
        first = f(x)
        f(x)
    # the dot's operand is a buffer of the program, copied once; the fused table is data of
    # the kernel's PTX module, loaded with it
    constant = [t for t in prof.transfers if t.what.startswith("constant")]
    assert [t.bytes for t in constant] == [weights.nbytes]
    assert len([t for t in prof.transfers if t.what == "x"]) == 2
    np.testing.assert_allclose(np.asarray(first), (x @ weights) * table, rtol=1e-5)


def test_profile_puts_kernels_and_copies_on_separate_device_tracks(backend):
    f = tk.jit(programs.softmax, backend=backend)
    x = np.random.default_rng(0).standard_normal((128, 256)).astype(np.float32)
    f(x)
    with tk.profile() as prof:
        np.asarray(f(x))
    kernels, copies = prof.kernels, prof.transfers
    assert kernels and all(k.backend == backend and k.device != "cpu:0" for k in kernels)
    assert all(k.launch.startswith("grid=(") and "block=(" in k.launch for k in kernels)
    assert [c.direction for c in copies] == ["host_to_device", "device_to_host"]
    # device times are ordered as the stream ran them: copy in, kernels, copy out
    order = [copies[0].start, *[k.start for k in kernels], copies[1].start]
    assert order == sorted(order) and all(e.duration > 0 for e in [*kernels, *copies])
    trace = prof.to_chrome_trace()
    device_rows = {(e["pid"], e["tid"]) for e in trace["traceEvents"] if e.get("cat") == "kernel"}
    copy_rows = {(e["pid"], e["tid"]) for e in trace["traceEvents"] if e.get("cat") == "gpu_memcpy"}
    assert len(device_rows) == 1 and len(copy_rows) == 1 and device_rows != copy_rows
    assert {p for p, _ in device_rows} == {p for p, _ in copy_rows}  # one device process
    live = [a for a in prof.allocations if a.device == kernels[0].device]
    assert live and live[-1].bytes < 0  # temporaries go back to the pool


def test_without_a_profile_nothing_is_recorded_or_synchronised(backend, monkeypatch):
    f = tk.jit(lambda x: x - 1, backend=backend)
    x = np.ones(64, np.float32)
    f(x)
    compiled = f.compiled(x)
    device = compiled._executable.device
    monkeypatch.setattr(
        device, "synchronize", lambda: pytest.fail("synchronised without a profile")
    )
    monkeypatch.setattr(device, "timer", lambda: pytest.fail("timed without a profile"))
    assert isinstance(f(x), DeviceArray)


def test_host_fallback_is_correct_and_its_copies_are_shown(backend):
    # JAX's argmax: a variadic (value, index) reduction, which the emitter does not lower
    text = (pathlib.Path(__file__).parent / "data" / "jax" / "argmax.hlo").read_text()
    module = make_pipeline("default", EVALUATORS).run(tk.hlo.parse(text)).module
    simulated = backend == "gpu-simulated" and not REAL_GPU
    exe = compile_module(module, device=SIMULATED if simulated else None)
    assert exe.fallbacks and all("reducer" in f for f in exe.fallbacks)
    x = np.random.default_rng(5).standard_normal((6, 9)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(exe([x])[0]), np.argmax(x, axis=1))
    launches = []
    with tk.profile() as prof:
        exe.run_profiled([x], RECORDER.clock, lambda inst, start, seconds, launch, device, stream:
                         launches.append((launch, device)), RunContext("argmax"))
    fallback = [t for t in prof.transfers if t.what.startswith("host fallback")]
    assert {t.direction for t in fallback} == {"device_to_host", "host_to_device"}
    assert ("host fallback", "cpu:0") in launches


def test_device_array_behaves(backend):
    f = tk.jit(lambda x: (x * 2, x.sum()), backend=backend)
    a, s = f(np.arange(6, dtype=np.int32).reshape(2, 3))
    assert a.shape == (2, 3) and a.ndim == 2 and a.size == 6 and a.nbytes == 24 and len(a) == 2
    assert a.block_until_ready() is a
    assert repr(a).startswith("DeviceArray(int32[2, 3]")
    assert int(s) == 15 and float(s) == 15.0
    host_a, (host_s,) = tk.device_get((a, [s]))
    assert type(host_a) is np.ndarray and not host_a.flags.writeable
    assert_same(host_a, np.arange(6, dtype=np.int32).reshape(2, 3) * 2)
    assert host_s == 15
    with pytest.raises(ValueError, match="without a copy"):
        np.asarray(a, copy=False)
    # the CPU backend takes a device array by fetching it
    assert_same(tk.jit(lambda v: v + 1, backend="cpu")(a), host_a + 1)


@simulated_only
def test_arrays_of_another_device_are_refused_with_the_argument_named():
    other = SimulatedDevice()
    register_backend(Backend("gpu-simulated-2", "a second simulated device", -1,
                             lambda module: compile_module(module, device=other)))
    a = tk.jit(lambda x: x + 1, backend="gpu-simulated")(np.ones(4, np.float32))
    with pytest.raises(
        ValueError, match=r"argument 'weights' lives on sim:\d+; this program runs on sim:\d+"
    ):
        tk.jit(lambda weights: weights * 2, backend="gpu-simulated-2")(a)


@simulated_only
def test_simulated_counters_agree_with_the_profile():
    before_up, before_down = len(SIMULATED.uploads), len(SIMULATED.downloads)
    f = tk.jit(lambda x: x * x, backend="gpu-simulated")
    x = np.ones((32, 32), np.float64)
    with tk.profile() as prof:
        np.asarray(f(f(x)))
    assert SIMULATED.uploads[before_up:] == [x.nbytes] and SIMULATED.downloads[before_down:] == [
        x.nbytes
    ]
    assert [t.bytes for t in prof.transfers] == [x.nbytes, x.nbytes]


def test_gpu_backend_without_a_device_says_what_is_missing():
    if not _why_no_gpu:
        pytest.skip("a CUDA device is present")
    with pytest.raises(
        tk.backends.BackendUnavailableError, match="backend 'gpu' cannot run here: (CuPy|the GPU)"
    ):
        tk.jit(lambda x: x, backend="gpu")


def test_device_put_makes_an_argument_that_is_never_copied_again(backend):
    f = tk.jit(lambda x: x * 2, backend=backend)
    x = np.arange(10, dtype=np.float32)
    device = SIMULATED if backend == "gpu-simulated" and not REAL_GPU else None
    d = tk.device_put(x, device)
    assert isinstance(d, DeviceArray) and tk.device_put(d) is d
    f(d)
    with tk.profile() as prof:
        out = f(d)
    assert prof.transfers == []
    assert_same(np.asarray(out), x * 2)


@settings(max_examples=25)
@given(steps=random_programs.steps_strategy, data=random_programs.inputs_strategy(np.float64))
def test_random_programs_on_the_gpu_executor(steps, data):
    x, y = data
    fn = lambda a, b: random_programs.run_program(steps, a, b)  # noqa: E731
    want = tk.jit(fn, backend="interpreter", on_recompile="ignore")(x, y)
    got = tk.jit(fn, backend="gpu-simulated", on_recompile="ignore")(x, y)
    for g, w in zip([got[0], *got[1]], [want[0], *want[1]]):
        assert isinstance(g, DeviceArray)
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-5, equal_nan=True)


def test_dashboard_summary_lists_copies_and_round_trips():
    from toolkit.widgets.report import report_html
    f = tk.jit(lambda x: x * 2, backend="gpu-simulated")
    x = np.ones(256, np.float32)
    with tk.profile() as prof:
        y = np.asarray(f(x))
        f(y)
    html_text = report_html(prof, sections=("Summary",))
    assert (
        "host/device copies" in html_text and "3 (2 host to device, 1 device to host)" in html_text
    )
    assert "avoidable round trips" in html_text and "<h3>copies</h3>" in html_text


def test_every_stage_of_a_gpu_program(backend):
    c = tk.jit(lambda x: np.exp(x).sum(-1), backend=backend).compiled(
        np.ones((64, 128), np.float32)
    )
    assert ".visible .entry input_reduce_fusion(" in c.as_text("ptx")
    assert c.as_text("ptx") == c._executable.ptx  # the PTX it runs, for the device's architecture
    assert 'target triple = "nvptx64-nvidia-cuda"' in c.as_text("llvm")
    with pytest.raises(ValueError, match="its machine code 'sass'"):
        c.as_text("asm")


def test_demo_runs_on_the_gpu_executor(tmp_path, capsys):
    from toolkit import demo
    result = demo.main(str(tmp_path), backend="gpu-simulated", scale=0.02, measure=False)
    assert all(
        s["backend"] == "gpu-simulated" and s["max_abs_error"] < 1e-3 for s in result["summary"]
    )
    assert result["profile"].transfers  # the inputs went to the device, results were fetched
    assert "host/device copies" in (tmp_path / "report.html").read_text()


@simulated_only
def test_cuda_array_interface_names_toolkits_stream():
    a = tk.jit(lambda x: x + 1, backend="gpu-simulated")(np.ones((2, 3), np.float32))
    interface = a.__cuda_array_interface__
    assert interface["version"] == 3 and interface["stream"] == SIMULATED.stream_handle
    assert interface["shape"] == (2, 3) and interface["typestr"] == "<f4"


@simulated_only
def test_timeline_draws_device_kernels_and_copies_on_their_own_lanes(tmp_path):
    import matplotlib
    matplotlib.use("Agg")
    f = tk.jit(programs.softmax, backend="gpu-simulated")
    x = np.random.default_rng(0).standard_normal((64, 128)).astype(np.float32)
    f(x)
    with tk.profile() as prof:
        np.asarray(f(x))
    artists = tk.plot.timeline(prof)
    device = SIMULATED.label
    assert f"{device} stream 0" in artists["lanes"] and f"{device} copy engine" in artists["lanes"]
    assert len(artists["kernels"]) == 3 and len(artists["transfers"]) == 2
    artists["axes"].figure.savefig(tmp_path / "timeline.png")


def test_a_function_that_writes_a_device_array_argument_updates_it(backend):
    """NumPy's contract: an argument written in place shows the write. A device array takes the
    program's new buffer (no copy); JAX's donate_argnums gives the same effect by hand."""
    def step(a, b):
        for _ in range(3):
            b[1:-1] = 0.5 * (a[:-2] + a[2:])
            a[1:-1] = 0.5 * (b[:-2] + b[2:])

    a0 = np.linspace(0.0, 1.0, 17) ** 2
    b0 = np.zeros(17)
    want_a, want_b = a0.copy(), b0.copy()
    step(want_a, want_b)
    device = SIMULATED if backend == "gpu-simulated" and not REAL_GPU else None
    a, b = tk.device_put(a0, device), tk.device_put(b0, device)
    assert tk.jit(step, backend=backend)(a, b) is None
    assert isinstance(a, DeviceArray) and isinstance(b, DeviceArray)
    np.testing.assert_array_equal(np.asarray(a), want_a)
    np.testing.assert_array_equal(np.asarray(b), want_b)


@simulated_only
def test_a_loop_of_known_trip_count_reads_no_predicate_per_trip():
    """fori_loop with Python bounds: the body runs 50 times with the condition read once, after
    (each read is a download and a wait on a device), not once per trip."""
    f = tk.jit(lambda x: tk.lax.fori_loop(0, 50, lambda i, v: v * 0.5 + 1.0, x),
               backend="gpu-simulated")
    x = np.linspace(0.0, 1.0, 8)
    for _ in range(3):  # the body's graphs are recorded, each checked once (with downloads)
        f(x)
    before = len(SIMULATED.downloads)
    got = f(x)
    assert len(SIMULATED.downloads) - before == 1  # the check after the last trip
    want = x.copy()
    for _ in range(50):
        want = want * 0.5 + 1.0
    np.testing.assert_array_equal(np.asarray(got), want)


def test_a_known_trip_count_that_disagrees_with_the_condition_is_an_error(backend):
    text = """HloModule lying_count

cond {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}

body {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  v = f32[4] get-tuple-element(s), index=1
  one = s32[] constant(1)
  next = s32[] add(i, one)
  two = f32[] constant(2)
  twos = f32[4] broadcast(two), dimensions={}
  w = f32[4] multiply(v, twos)
  ROOT t = (s32[], f32[4]) tuple(next, w)
}

ENTRY main {
  x = f32[4] parameter(0)
  zero = s32[] constant(0)
  s = (s32[], f32[4]) tuple(zero, x)
  loop = (s32[], f32[4]) while(s), condition=cond, body=body, backend_config=CONFIG
  ROOT r = f32[4] get-tuple-element(loop), index=1
}
"""
    text = text.replace("CONFIG", '{"known_trip_count":{"n":"3"}}')
    module = make_pipeline("default", EVALUATORS).run(tk.hlo.parse(text)).module
    simulated = backend == "gpu-simulated" and not REAL_GPU
    exe = compile_module(module, device=SIMULATED if simulated else None)
    with pytest.raises(RuntimeError, match=r"known_trip_count \(3\) disagrees with its condition"):
        exe.run([np.ones(4, np.float32)])
