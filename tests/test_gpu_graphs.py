"""Whole-program launch: a GPU program recorded once as a CUDA graph and replayed per call
(backends/gpu/graph_replay.py), and dots as direct cuBLAS GEMMs (backends/gpu/gemm.py).

On the simulated device the recording and its re-pointing are visible (graph launches, nodes
re-pointed, kernels run); on a real device (``gpu``) the same programs must give the same
numbers as the interpreter, call after call, with new and reused arguments."""
import warnings

import numpy as np
import pytest

import toolkit as tk
from toolkit.backends import Backend, register_backend
from toolkit.backends.gpu import DeviceArray, compile_module
from toolkit.backends.gpu.device import cupy_or_reason
from toolkit.backends.gpu.gemm import GemmSpec
from toolkit.workloads import dot_chain, gpt2_args, gpt2_forward

from conftest import REAL_GPU
from helpers import assert_close_scaled, host_values
from simulated_gpu import SimulatedDevice, SimulatedGraph

_why_no_gpu = cupy_or_reason()[1]
simulated = pytest.mark.skipif(REAL_GPU, reason="reads the simulated device's counters")


def _device_backend(name: str, device) -> str:
    register_backend(Backend(name, "a simulated device of its own (tests)", -1,
                             lambda module: compile_module(module, device=device)))
    return name


@pytest.fixture
def sim():
    device = SimulatedDevice()
    return device, _device_backend(f"gpu-graph-{device.label}", device)


@pytest.fixture(params=["simulated", pytest.param("gpu", marks=pytest.mark.gpu)])
def backend(request, sim):
    if request.param == "gpu":
        if _why_no_gpu:
            pytest.skip(f"GPU execution: {_why_no_gpu}")
        return "gpu"
    return sim[1]


def _mlp(x, w1, b1, w2):
    h = np.tanh(x @ w1 + b1)
    return h @ w2, np.sum(h * h, axis=1)


def _mlp_args(rng, n=16):
    return (rng.standard_normal((n, 8), dtype=np.float32),
            rng.standard_normal((8, 12), dtype=np.float32),
            rng.standard_normal(12, dtype=np.float32),
            rng.standard_normal((12, 5), dtype=np.float32))




def test_a_program_replays_as_one_graph_call_after_call(backend, rng):
    f = tk.jit(_mlp, backend=backend)
    args = _mlp_args(rng)
    want = tk.jit(_mlp, backend="interpreter")(*args)
    device_args = [tk.device_put(a, f.compiled(*args)._executable.device) for a in args]
    results = [host_values(f(*device_args)) for _ in range(3)]
    for got in results:
        assert_close_scaled(got, want)
    exe = f.compiled(*args)._executable
    assert exe.launch_mode.startswith("one CUDA graph"), exe.launch_mode


def _graph_launches(device) -> int:
    return sum(g.launches for g in device.graphs)


@simulated
def test_later_calls_are_one_launch_each(sim, rng):
    device, backend = sim
    f = tk.jit(_mlp, backend=backend)
    args = [tk.device_put(a, device) for a in _mlp_args(rng)]
    for _ in range(3):  # records (at most two recordings), each checked against kernel by kernel
        f(*args)
    replay = f.compiled(*map(np.asarray, args))._executable._graph
    launches, kernels, repoints = _graph_launches(device), len(device.launches), replay.repoints
    for _ in range(4):
        f(*args)  # the results are dropped, so the pool hands the same buffers back
    nodes = len(replay.recordings[0].nodes)
    assert _graph_launches(device) - launches == 4 and len(device.graphs) <= 2
    # every kernel ran inside the replays, none launched one by one, nothing re-pointed
    assert len(device.launches) - kernels == 4 * nodes
    assert replay.repoints == repoints


@simulated
def test_a_loop_whose_state_alternates_between_two_buffers_never_repoints(sim, rng):
    device, backend = sim
    step = tk.jit(lambda x, w: np.tanh(x @ w) + 0.5, backend=backend)
    x0 = rng.standard_normal((6, 6), dtype=np.float32)
    w = tk.device_put(rng.standard_normal((6, 6), dtype=np.float32) * np.float32(0.3), device)
    x, want = tk.device_put(x0, device), x0

    def steps(n):
        nonlocal x, want
        for _ in range(n):
            x = step(x, w)
            want = np.tanh(want @ np.asarray(w)) + np.float32(0.5)

    steps(4)
    replay = step.compiled(x0, np.asarray(w))._executable._graph
    launches, repoints = _graph_launches(device), replay.repoints
    steps(10)
    assert_close_scaled(np.asarray(x), want, rtol=1e-5)
    assert len(replay.recordings) == 2
    assert replay.repoints == repoints and _graph_launches(device) - launches == 10


@simulated
def test_new_arguments_repoint_only_the_nodes_that_read_them(sim, rng):
    device, backend = sim
    f = tk.jit(_mlp, backend=backend)
    x, w1, b1, w2 = [tk.device_put(a, device) for a in _mlp_args(rng)]
    for _ in range(3):
        f(x, w1, b1, w2)
    xs = [tk.device_put(rng.standard_normal((16, 8), dtype=np.float32), device)
          for _ in range(3)]
    for x_new in xs:  # new addresses: the least recently used recording is re-pointed
        got = host_values(f(x_new, w1, b1, w2))
        want = tk.jit(_mlp, backend="interpreter")(*map(np.asarray, (x_new, w1, b1, w2)))
        assert_close_scaled(got, want)
    replay = f.compiled(*map(np.asarray, (x, w1, b1, w2)))._executable._graph
    # node 1 (tanh(x @ w1 + b1) into a pooled temporary) reads no argument that moved and
    # writes no result: it is never re-pointed; node 0 (the GEMM reading x) is
    repointed = [n for g in device.graphs for n in g.repointed]
    assert 1 not in repointed and 0 in repointed and replay.repoints == len(repointed)


def test_results_of_earlier_calls_are_not_overwritten(backend, rng):
    f = tk.jit(_mlp, backend=backend)
    a1, a2 = _mlp_args(rng), _mlp_args(rng)
    first = f(*a1)
    first_host = host_values(first)
    second = f(*a2)
    third = f(*a1)
    for kept, want in zip(first, first_host):
        np.testing.assert_array_equal(np.asarray(kept), want)
    assert_close_scaled(host_values(second), tk.jit(_mlp, backend="interpreter")(*a2))
    assert_close_scaled(host_values(third), first_host, rtol=0)


@simulated
def test_temporaries_share_pooled_buffers_by_lifetime(sim, rng):
    device, backend = sim
    x = rng.standard_normal((8, 8), dtype=np.float32)
    w = rng.standard_normal((8, 8), dtype=np.float32) * np.float32(0.3)
    f = tk.jit(dot_chain(np), backend=backend)
    assert_close_scaled(host_values(f(x, w)), dot_chain(np)(x, w), rtol=1e-4)
    exe = f.compiled(x, w)._executable
    temporaries = {s for step in exe.steps for s in step.outputs} - set(exe.plan.out_slots)
    # each tanh is written over its product (in place: nothing else reads the product)
    in_place = [s for s in exe.steps if s.kind == "kernel" and s.outputs[0] in s.inputs]
    assert len(in_place) >= 99 and len(temporaries) >= 99
    pooled = {id(b) for b in exe._graph.pool.values()}
    assert len(exe._graph.pool) == len(temporaries) and len(pooled) <= 3


@simulated
def test_gpt2_forward_replays_on_the_simulated_device(sim):
    device, backend = sim
    args = gpt2_args(n_layer=2, d=24, n=8)(np.random.default_rng(0))
    f = tk.jit(gpt2_forward(np), backend=backend)
    want = gpt2_forward(np)(*args)
    for _ in range(2):
        assert_close_scaled(host_values(f(*args)), want, rtol=1e-4)
    exe = f.compiled(*args)._executable
    assert exe.launch_mode.startswith("one CUDA graph"), exe.launch_mode
    assert device.graph_launches == 2  # the check at recording, then one replay


def test_host_steps_and_the_switch_keep_kernel_by_kernel_launches(backend, rng, monkeypatch):
    x = rng.standard_normal(64).astype(np.float32)
    f = tk.jit(lambda x: np.sort(x * 2) + 1, backend=backend)
    np.testing.assert_array_equal(np.asarray(f(x)), np.sort(x * 2) + 1)
    mode = f.compiled(x)._executable.launch_mode
    assert mode.startswith("kernel by kernel (%") and "runs on the host" in mode, mode
    monkeypatch.setenv("TOOLKIT_GPU_GRAPHS", "0")
    g = tk.jit(_mlp, backend=backend)
    args = _mlp_args(rng)
    assert_close_scaled(host_values(g(*args)), tk.jit(_mlp, backend="interpreter")(*args))
    assert g.compiled(*args)._executable.launch_mode == "kernel by kernel (TOOLKIT_GPU_GRAPHS=0)"


class _DroppingGraph(SimulatedGraph):
    """A faulty recording: its replay leaves out the last node."""

    def launch(self):
        last = self.nodes.pop()
        try:
            super().launch()
        finally:
            self.nodes.append(last)


class _FaultyDevice(SimulatedDevice):
    def new_graph(self):
        return _DroppingGraph(self)


class _RefusingGraph(SimulatedGraph):
    """A driver that refuses to re-point a node (as a real one did, with CUDA error 1)."""

    def set_kernel(self, *args):
        raise RuntimeError("cuGraphExecKernelNodeSetParams failed with CUDA error 1")


class _RefusingDevice(SimulatedDevice):
    def new_graph(self):
        return _RefusingGraph(self)


def test_a_driver_failure_falls_back_to_kernel_by_kernel_launches():
    device = _RefusingDevice()
    backend = _device_backend("gpu-graph-refusing", device)
    args = _mlp_args(np.random.default_rng(4))
    want = tk.jit(_mlp, backend="interpreter")(*args)
    f = tk.jit(_mlp, backend=backend)
    kept = [f(*args), f(*args)]  # two recordings; the results are kept, so new buffers follow
    with pytest.warns(RuntimeWarning, match="CUDA error 1"):
        kept.append(f(*args))  # re-pointing the older recording fails
    kept.append(f(*args))
    for results in kept:
        assert_close_scaled(host_values(results), want)
    assert "kernel by kernel (RuntimeError: cuGraphExecKernelNodeSetParams" in \
        f.compiled(*args)._executable.launch_mode


def test_a_recording_that_differs_is_never_used():
    device = _FaultyDevice()
    backend = _device_backend("gpu-graph-faulty", device)
    args = _mlp_args(np.random.default_rng(3))
    want = tk.jit(_mlp, backend="interpreter")(*args)
    f = tk.jit(_mlp, backend=backend)
    with pytest.warns(RuntimeWarning, match="runs kernel by kernel, not as one CUDA graph: "
                                            "RuntimeError: the replayed graph's results differ"):
        first = f(*args)
    assert_close_scaled(host_values(first), want)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_close_scaled(host_values(f(*args)), want)
    assert f.compiled(*args)._executable.launch_mode.startswith("kernel by kernel (RuntimeError")


def test_profiles_say_how_graphed_kernels_were_timed(backend, rng):
    f = tk.jit(_mlp, backend=backend)
    args = _mlp_args(rng)
    f(*args)
    with tk.profile() as prof:
        host_values(f(*args))
    launches = [k.launch for k in prof.kernels]
    assert len(launches) == 4 and all("timed launch by launch" in t for t in launches), launches
    assert any(t.startswith("cuBLAS gemm 16x12x8") for t in launches), launches


# ---- the GEMM's layout ---------------------------------------------------------------------
DOTS = {
    "matrix @ matrix": (lambda a, b: a @ b, (5, 7), (7, 3)),
    "matrix @ matrix.T": (lambda a, b: a @ b.T, (5, 7), (3, 7)),
    "matrix.T @ matrix": (lambda a, b: a.T @ b, (7, 5), (7, 3)),
    "matrix.T @ matrix.T": (lambda a, b: a.T @ b.T, (7, 5), (3, 7)),
    "vector @ matrix": (lambda a, b: a @ b, (7,), (7, 3)),
    "matrix @ vector": (lambda a, b: a @ b, (5, 7), (7,)),
    "vector @ vector": (lambda a, b: a @ b, (7,), (7,)),
    "batched": (lambda a, b: a @ b, (4, 5, 7), (4, 7, 3)),
    "batched, transposed": (lambda a, b: a @ np.swapaxes(b, 1, 2), (4, 5, 7), (4, 3, 7)),
    "einsum over two batch axes": (lambda a, b: np.einsum("ijmk,ijkn->ijmn", a, b),
                                   (2, 3, 5, 7), (2, 3, 7, 3)),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(DOTS))
def test_every_gemm_layout_matches_numpy(name, dtype, backend, rng):
    fn, lshape, rshape = DOTS[name]
    a = rng.standard_normal(lshape).astype(dtype)
    b = rng.standard_normal(rshape).astype(dtype)
    f = tk.jit(fn, backend=backend)
    got = np.asarray(f(a, b))
    np.testing.assert_allclose(got, fn(a, b), rtol=1e-5 if dtype == np.float32 else 1e-12)
    dots = [s for s in f.compiled(a, b)._executable.steps if s.kind == "dot"]
    assert dots and all(s.gemm is not None for s in dots), [s.inst for s in dots]


@pytest.mark.parametrize("case", ["int32", "complex64", "mixed types", "zero-size"])
def test_dots_that_are_not_one_gemm_keep_the_general_path(case, backend, rng):
    a = rng.standard_normal((4, 6))
    b = rng.standard_normal((6, 3))
    a, b = {"int32": (a.astype(np.int32), b.astype(np.int32)),
            "complex64": (a.astype(np.complex64), b.astype(np.complex64)),
            "mixed types": (a.astype(np.float32), b.astype(np.float64)),
            "zero-size": (a[:, :0].astype(np.float32), b[:0].astype(np.float32))}[case]
    f = tk.jit(lambda a, b: a @ b, backend=backend)
    got = f(a, b)
    assert isinstance(got, DeviceArray)
    np.testing.assert_allclose(np.asarray(got), a @ b, rtol=1e-5)
    assert np.asarray(got).dtype == (a @ b).dtype


def test_gemm_spec_reads_the_layout_from_the_dot():
    a = np.ones((6, 4), np.float32)
    b = np.ones((5, 6), np.float32)
    f = tk.jit(lambda a, b: a.T @ b.T, backend="interpreter")
    dot = [i for i in f.compiled(a, b).optimized_hlo.entry.instructions if i.opcode == "dot"]
    spec = GemmSpec.from_dot(dot[0])
    assert (spec.m, spec.n, spec.k, spec.lhs_transposed, spec.rhs_transposed) == (4, 5, 6, True,
                                                                                 True)
    args = spec.cublas_arguments()
    assert (args["transa"], args["transb"], args["lda"], args["ldb"], args["ldc"]) == (1, 1, 6, 4,
                                                                                      5)
