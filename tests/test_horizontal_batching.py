"""Horizontal batching (passes/horizontal_batching.py): alike computations over windows of one
array (attention one head at a time, a list of columns stacked) run once over a batch
dimension, with the bits each lane computed alone, on every backend."""
import shutil
import subprocess

import numpy as np
import pytest

import toolkit as tk
import toolkit.passes.horizontal_batching as horizontal_batching
from helpers import assert_close_scaled, host_values

BACKENDS = ["cpu", "interpreter", "gpu-simulated"]


@pytest.fixture(autouse=True)
def _no_disk_cache(monkeypatch):
    monkeypatch.setenv("TOOLKIT_CACHE_DIR", "off")


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention(heads):
    def attention(qkv, mask):
        d = qkv.shape[1] // 3
        hd = d // heads
        q, k, v = qkv[:, :d], qkv[:, d:2 * d], qkv[:, 2 * d:]
        out = []
        for i in range(heads):  # one head at a time, as people write it
            s = slice(i * hd, (i + 1) * hd)
            out.append(_softmax(q[:, s] @ k[:, s].T / float(np.sqrt(hd)) + mask) @ v[:, s])
        return np.concatenate(out, axis=1)
    return attention


def _attention_args(n=16, d=32, dtype=np.float32):
    rng = np.random.default_rng(0)
    return (rng.standard_normal((n, 3 * d)).astype(dtype),
            np.triu(np.full((n, n), -1e10, dtype), 1))


def stacked_columns(x, w):
    return np.stack([np.tanh(x[:, j]) * w[j] + np.sum(x[:, j]) for j in range(x.shape[1])],
                    axis=1)


def _compiled(fn, *args, backend="cpu"):
    return tk.jit(fn, backend=backend).lower(*args).compile()


def _entry_ops(compiled, opcode):
    return [i for i in compiled.optimized_hlo.entry.instructions if i.opcode == opcode]


def _batched(compiled):
    return [d for d in compiled.fusion_decisions if d.reason == "BATCHED_ALIKE"]


def _unbatched(monkeypatch):
    monkeypatch.setattr(horizontal_batching, "MIN_LANES", 1 << 30)


@pytest.mark.parametrize("backend", BACKENDS)
def test_attention_one_head_at_a_time_runs_as_two_batched_dots(backend):
    args = _attention_args()
    fn = attention(4)
    compiled = _compiled(fn, *args, backend=backend)
    dots = _entry_ops(compiled, "dot")
    assert len(dots) == 2 and all(d.shape.dims[0] == 4 for d in dots), dots
    assert {d.message.split(": ")[1].split(" (")[0] for d in _batched(compiled)} >= {"4 dots"}
    assert_close_scaled(host_values(compiled(*args)), fn(*args), rtol=1e-5)


def test_batched_attention_keeps_the_bits_of_each_head_alone(monkeypatch):
    args = _attention_args(n=24, d=48)
    fn = attention(6)
    batched = _compiled(fn, *args)
    assert len(_entry_ops(batched, "dot")) == 2
    _unbatched(monkeypatch)
    alone = _compiled(attention(6), *args)
    assert len(_entry_ops(alone, "dot")) == 12 and not _batched(alone)
    np.testing.assert_array_equal(batched(*args), alone(*args))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_list_of_columns_stacked_is_one_batched_computation(backend):
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((50, 12)), rng.standard_normal(12)
    compiled = _compiled(stacked_columns, x, w, backend=backend)
    assert not _entry_ops(compiled, "concatenate")
    kinds = {d.message.split(": ")[1].split(" (")[0] for d in _batched(compiled)}
    assert {"12 tanhs", "12 reduces"} <= kinds, kinds
    assert len(_entry_ops(compiled, "fusion")) <= 3
    assert_close_scaled(host_values(compiled(x, w)), stacked_columns(x, w), rtol=1e-13)


def test_stacked_columns_keep_each_columns_bits(monkeypatch):
    def columns(x, w):  # (a max is exact in any order; a float sum's last bits follow its order)
        return np.stack([np.tanh(x[:, j]) * w[j] + np.max(x[:, j]) for j in range(x.shape[1])],
                        axis=1)

    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((300, 10)), rng.standard_normal(10)
    batched = _compiled(columns, x, w)
    _unbatched(monkeypatch)
    alone = _compiled(columns, x, w)
    assert _batched(batched) and not _batched(alone)
    np.testing.assert_array_equal(batched(x, w), alone(x, w))


def _windows(x):
    # windows of 2 at a step of 3, single columns at a step of 3 ending on the last column
    # (a strided slice), and rows in blocks of 5, each reduced and stacked
    a = np.stack([x[:, 3 * j:3 * j + 2].max(axis=1) for j in range(4)], axis=1)
    b = np.concatenate([x[:, 3 * j + 2:3 * j + 3] * 2 for j in range(4)], axis=1)
    c = np.concatenate([x[5 * i:5 * i + 5].sum(axis=0, keepdims=True) for i in range(2)])
    return a, b, c


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.int32, np.float64])
def test_windows_at_a_step_and_integer_lanes_match_numpy_exactly(backend, dtype):
    x = np.arange(120).reshape(10, 12).astype(dtype)
    x[3, 4] = np.iinfo(np.int32).max if dtype == np.int32 else -0.0
    compiled = _compiled(_windows, x, backend=backend)
    assert _batched(compiled)
    for got, want in zip(host_values(compiled(x)), _windows(x)):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("backend", ["cpu", "interpreter"])
def test_zero_rows_and_a_shared_right_operand(backend):
    def per_block(x, w):
        return np.concatenate([x[:, 2 * i:2 * i + 2] @ w for i in range(3)], axis=1)
    w = np.arange(8.0).reshape(2, 4)
    for rows in (0, 7):
        x = np.linspace(-1, 1, rows * 6).reshape(rows, 6)
        compiled = _compiled(per_block, x, w, backend=backend)
        got = host_values(compiled(x, w))
        assert got.shape == (rows, 12)
        np.testing.assert_allclose(got, per_block(x, w), rtol=1e-14, atol=0)
    assert len(_entry_ops(compiled, "dot")) == 1


def test_lanes_read_one_at_a_time_or_chained_stay_unbatched():
    x = np.random.default_rng(3).standard_normal((8, 6))

    def separate(x):  # elementwise lanes read one at a time: each fuses into its reader
        return [np.exp(x[:, j]) + 1 for j in range(6)]

    def chained(x):  # each column needs the one before
        acc = x[:, 0]
        for j in range(1, 6):
            acc = np.tanh(acc * x[:, j])
        return acc

    def overlapping(x):  # a stencil's windows overlap: fusion's business
        return np.stack([x[:, j:j + 2].sum(axis=1) for j in range(5)], axis=1)

    def self_products(x):  # x_h @ x_h.T: NumPy's syrk per head, which a batched GEMM is not
        return np.stack([x[:, 2 * i:2 * i + 2] @ x[:, 2 * i:2 * i + 2].T for i in range(3)])

    for fn in (separate, chained, overlapping, self_products):
        compiled = _compiled(fn, x)
        assert not _batched(compiled), fn.__name__
        assert_close_scaled(host_values(compiled(x)), fn(x), rtol=1e-13)
    np.testing.assert_array_equal(compiled(x), self_products(x))


def test_the_simulated_gpu_records_one_strided_batched_gemm_per_product():
    from toolkit.backends import Backend, register_backend
    from toolkit.backends.gpu import compile_module
    from simulated_gpu import SimulatedDevice

    device = SimulatedDevice()
    name = f"gpu-batching-{device.label}"
    register_backend(Backend(name, "a simulated device of its own (tests)", -1,
                             lambda module: compile_module(module, device=device)))
    args = _attention_args()
    f = tk.jit(attention(4), backend=name)
    want = attention(4)(*args)
    for _ in range(2):
        done = len(device.launches)
        assert_close_scaled(host_values(f(*args)), want, rtol=1e-5)
    assert device.launches[done:].count("dot") == 2  # one replay: two GEMMs, not eight
    gemms = [node[1] for node in device.graphs[-1].nodes if node[0] == "gemm"]
    assert [g.batch for g in gemms] == [4, 4], gemms


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas (CUDA toolkit) is not on the PATH")
@pytest.mark.parametrize("case", ["attention", "columns"])
def test_batched_kernels_assemble_for_the_gpu(case, tmp_path):
    from toolkit.backends.gpu import compile_ptx

    rng = np.random.default_rng(4)
    fn, args = {"attention": (attention(4), _attention_args()),
                "columns": (stacked_columns, (rng.standard_normal((50, 12)),
                                              rng.standard_normal(12)))}[case]
    module = tk.jit(fn, backend="interpreter").compiled(*args).optimized_hlo
    if case == "attention":  # (the heads' products: two strided-batched GEMMs)
        assert [i.shape.dims[0] for i in module.entry.instructions if i.opcode == "dot"] == [4, 4]
    program = compile_ptx(module, "sm_90")
    assert program.kernels and not program.unsupported, program.unsupported
    path = tmp_path / "batched.ptx"
    path.write_text(program.ptx)
    done = subprocess.run(["ptxas", "-arch=sm_90", str(path), "-o", str(tmp_path / "out.cubin")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
