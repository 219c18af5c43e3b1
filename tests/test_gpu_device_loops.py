"""Loops on the device (backends/gpu/device_loop.py) and updates in place on the GPU.

- A dynamic-update-slice or scatter whose destination is dead afterwards writes its window
  alone into that buffer (the GPU's plan now asks the same questions as the CPU's), and the
  emitted window kernel runs its own code on the host emulation.
- A while loop whose body is one CUDA graph runs as one graph launch per trip into state
  buffers the loop owns: no re-pointing once bound, no predicate download per trip for a known
  trip count, a scan's stacked outputs written in place.

On the simulated device the counters show it; on a real GPU (``gpu``) the same programs must
give NumPy's numbers call after call."""
import shutil
import subprocess

import numpy as np
import pytest

import toolkit as tk
from toolkit.backends import Backend, register_backend
from toolkit.backends.gpu import compile_module
from toolkit.backends.gpu.device import cupy_or_reason
from toolkit.backends.gpu.device_loop import DeviceLoop
from toolkit.workloads import BENCHMARK

from conftest import REAL_GPU
from host_simt import EmulatedDevice
from helpers import assert_close_scaled, host_values
from simulated_gpu import SimulatedDevice

_why_no_gpu = cupy_or_reason()[1]
simulated = pytest.mark.skipif(REAL_GPU, reason="reads the simulated device's counters")
EMULATED = EmulatedDevice()
register_backend(Backend("gpu-loops-emulated", "emitted GPU kernels on the host (tests)", -1,
                         lambda module: compile_module(module, device=EMULATED)))


@pytest.fixture
def sim():
    device = SimulatedDevice()
    name = f"gpu-loops-{device.label}"
    register_backend(Backend(name, "a simulated device of its own (tests)", -1,
                             lambda module: compile_module(module, device=device)))
    return device, name


@pytest.fixture(params=["simulated", "emulated", pytest.param("gpu", marks=pytest.mark.gpu)])
def backend(request, sim):
    if request.param == "gpu":
        if _why_no_gpu:
            pytest.skip(f"GPU execution: {_why_no_gpu}")
        return "gpu"
    return sim[1] if request.param == "simulated" else "gpu-loops-emulated"




def _loops(executable) -> list[DeviceLoop]:
    return [s.run.loop for s in executable.steps
            if s.kind == "control" and getattr(s.run, "loop", None) is not None]


# ---- updates in place ---------------------------------------------------------------------
def _write_rows(x, u):
    y = x * 2.0  # a buffer of the program's own, dead after the writes
    y[1:3] = u
    y[5] = -u[0]
    return y + 1.0


def test_window_writes_go_in_place_and_write_only_the_window(backend):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 33)).astype(np.float32)
    u = rng.standard_normal((2, 33)).astype(np.float32)
    f = tk.jit(_write_rows, backend=backend)
    for _ in range(2):
        np.testing.assert_array_equal(host_values(f(x, u)), _write_rows(x.copy(), u))
    exe = f.compiled(x, u)._executable
    # the first write fuses with x * 2 (one kernel makes the array and its window); the
    # second writes its row into that array's buffer, a thread per element of the window
    in_place = [s for s in exe.steps if s.kind == "kernel" and s.outputs[0] in s.inputs]
    assert [s.count for s in in_place] == [33], exe.plan.report()
    assert "1 in place, 0 copies inserted" in exe.plan.report()


def test_the_window_kernel_runs_its_own_code_on_the_host_emulation():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 33)).astype(np.float32)
    u = rng.standard_normal((2, 33)).astype(np.float32)
    before = len(EMULATED.emulated)
    got = host_values(tk.jit(_write_rows, backend="gpu-loops-emulated")(x, u))
    np.testing.assert_array_equal(got, _write_rows(x.copy(), u))
    assert any("dynamic" in k for k in EMULATED.emulated[before:]), EMULATED.interpreted[-5:]


def test_an_update_whose_old_value_is_read_later_is_copied_first(backend):
    def keep_old(x, u):
        y = x * 2.0
        z = y.copy()
        z[2:4] = u  # y is read after: z's buffer is its own
        return z + y

    x = np.arange(24, dtype=np.float32).reshape(6, 4)
    u = -np.ones((2, 4), np.float32)
    f = tk.jit(keep_old, backend=backend)
    np.testing.assert_array_equal(host_values(f(x, u)), keep_old(x, u))


def test_scatter_add_in_place_with_repeated_indices(backend):
    x = np.zeros(6)
    ids = np.array([0, 3, 0, 5, 0])
    v = np.array([1.0, 2.0, 4.0, 8.0, 16.0])
    f = tk.jit(_add_at, backend=backend)
    np.testing.assert_array_equal(host_values(f(x, ids, v)), _add_at(x, ids, v))


def test_a_top_level_argument_is_never_written_in_place_on_the_gpu(sim):
    """A device array handed to a jitted function may share its buffer with another array:
    the new value of a donated argument gets a buffer of its own."""
    device, backend = sim

    def bump(x):
        x[0] += 1.0

    x = tk.device_put(np.zeros(4, np.float32), device)
    alias = tk.backends.gpu.DeviceArray(x._buffer, device, "another view")
    tk.jit(bump, backend=backend)(x)
    np.testing.assert_array_equal(np.asarray(x), [1, 0, 0, 0])
    np.testing.assert_array_equal(np.asarray(alias), [0, 0, 0, 0])


# ---- loops on the device ------------------------------------------------------------------
def _cumulative(xs, h0):
    def step(h, x):
        h = np.tanh(h * 0.5 + x)
        return h, h.sum()
    return tk.lax.scan(step, h0, xs)


def _cumulative_numpy(xs, h0):
    h, ys = h0, []
    for x in xs:
        h = np.tanh(h * np.float32(0.5) + x)
        ys.append(h.sum())
    return h, np.array(ys, np.float32)


def test_a_scan_replays_its_body_graph_once_per_trip(sim):
    device, backend = sim
    rng = np.random.default_rng(2)
    xs = rng.standard_normal((40, 8, 16)).astype(np.float32)
    h0 = np.zeros((8, 16), np.float32)
    f = tk.jit(_cumulative, backend=backend)
    args = (tk.device_put(xs, device), tk.device_put(h0, device))
    assert_close_scaled(host_values(f(*args)), _cumulative_numpy(xs, h0), rtol=1e-5)
    (loop,) = _loops(f.compiled(*args)._executable)
    graph = loop.body._graph
    before = (device.graph_launches, graph.repoints, len(device.downloads), loop.rebinds)
    for _ in range(3):
        assert_close_scaled(host_values(f(*args)), _cumulative_numpy(xs, h0), rtol=1e-5)
    launches, repoints, downloads, rebinds = (
        device.graph_launches - before[0], graph.repoints - before[1],
        len(device.downloads) - before[2], loop.rebinds - before[3])
    assert launches == 3 * 40  # one launch a trip
    assert repoints == 0  # the same arguments: the two bound graphs as they were
    # the condition once per loop (the known trip count checked), then the two results
    assert downloads == 3 * (1 + 2)
    assert rebinds <= 3 * 2  # each call binds each parity to its state at most once
    assert loop.kinds.count("in_place") >= 1  # the stacked outputs, written row by row


def test_a_while_with_a_data_dependent_count_downloads_its_predicate_each_trip(sim):
    device, backend = sim

    def halve(x):
        return tk.lax.while_loop(lambda s: s[1] > 1.0, lambda s: (s[0] + 1, s[1] * 0.5),
                                 (np.int32(0), np.abs(x).sum()))

    x = np.full(8, 8.0, np.float32)  # 64 -> 6 halvings
    f = tk.jit(halve, backend=backend)
    trips, value = host_values(f(x))
    assert (int(trips), float(value)) == (6, 1.0)
    before = len(device.downloads)
    trips, value = host_values(f(x))
    assert (int(trips), float(value)) == (6, 1.0)
    assert len(device.downloads) - before == 6 + 1 + 2  # a predicate per trip, the last, results


def test_rnn_gradients_match_numpys_backpropagation(backend):
    w = next(w for w in BENCHMARK if w.name == "rnn grads 256 steps")
    rng = np.random.default_rng(3)
    xs = rng.standard_normal((24, 4, 8)).astype(np.float32)
    wh = rng.standard_normal((16, 16)).astype(np.float32) * np.float32(0.2)
    wx = rng.standard_normal((8, 16)).astype(np.float32) * np.float32(0.2)
    f = tk.jit(w.toolkit_function(), backend=backend)
    want = w.make(np)(xs, wh, wx)
    for _ in range(2):
        assert_close_scaled(host_values(f(xs, wh, wx)), want, rtol=2e-4)


def test_swapped_state_and_nested_loops_run_as_before(backend):
    def swap(a, b):
        return tk.lax.fori_loop(0, 5, lambda i, s: (s[1] * 2.0, s[0] + 1.0), (a, b))

    def nested(x):
        def outer(i, acc):
            return tk.lax.fori_loop(0, 3, lambda j, a: a * 0.5 + 1.0, acc) + i
        return tk.lax.fori_loop(0, 4, outer, x)

    a, b = np.ones(4, np.float32), np.zeros(4, np.float32)
    got = host_values(tk.jit(swap, backend=backend)(a, b))
    ra, rb = a.copy(), b.copy()
    for _ in range(5):
        ra, rb = rb * 2, ra + 1
    assert_close_scaled(got, (ra, rb))
    x = np.arange(6, dtype=np.float32)
    want = x.copy()
    for i in range(4):
        for _ in range(3):
            want = want * np.float32(0.5) + np.float32(1.0)
        want = want + np.float32(i)
    assert_close_scaled(host_values(tk.jit(nested, backend=backend)(x)), want)


def test_a_loop_driven_on_the_device_says_so_in_the_profile(sim):
    device, backend = sim
    xs = np.ones((12, 4, 4), np.float32)
    f = tk.jit(_cumulative, backend=backend)
    f(xs, np.zeros((4, 4), np.float32))
    with tk.profile() as p:
        f(xs, np.zeros((4, 4), np.float32))
    (event,) = [e for e in p.kernels if e.kind == "while"]
    assert "trips=12, device graph" in event.launch, event.launch


def _add_at(x, ids, v):
    y = x * 3.0  # (x * 1.0 would simplify to x, the caller's: a copy, not in place)
    np.add.at(y, ids, v)
    return y


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas (CUDA toolkit) is not on the PATH")
def test_in_place_kernels_assemble(sim, tmp_path):
    """The window, scatter and over-the-product kernels written in place, through ptxas."""
    device, backend = sim
    rng = np.random.default_rng(4)
    cases = [
        (_write_rows, (rng.standard_normal((8, 33)).astype(np.float32),
                       rng.standard_normal((2, 33)).astype(np.float32))),
        (_add_at, (np.zeros(6), np.array([0, 3, 0]), np.ones(3))),
        (lambda x, w: np.tanh(x @ w), (np.ones((4, 4), np.float32),) * 2),
    ]
    for fn, args in cases:
        exe = tk.jit(fn, backend=backend).compiled(*args)._executable
        assert any(s.kind == "kernel" and s.outputs[0] in s.inputs for s in exe.steps)
        path = tmp_path / "in_place.ptx"
        path.write_text(exe.ptx)
        done = subprocess.run(["ptxas", f"-arch={device.arch}", str(path), "-o",
                               str(tmp_path / "out.cubin")], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
