"""The GPU's persistent compilation cache (backends/gpu/program_cache.py): a second compile of
the same program, in a new process or after the in-memory caches are gone, takes its PTX and
launch facts from disk, runs to the same bits, and an entry that was tampered with, or made for
another architecture or another buffer plan, is never used."""
import numpy as np
import pytest

import toolkit as tk
from toolkit.backends import disk_cache
from toolkit.backends.gpu import compile_module

from host_simt import EmulatedDevice
from simulated_gpu import SimulatedDevice


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLKIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TOOLKIT_CACHE_KEY_FILE", str(tmp_path / "key"))
    return tmp_path / "cache"


def _program(x):
    y = np.tanh(x) * 2.0
    y[1] = x[0] + 1.0  # written in place: part of what the entry is keyed by
    return y / y.sum(axis=1, keepdims=True), np.exp(x).max()


def _module(x):
    return tk.jit(_program, backend="interpreter").compiled(x).optimized_hlo


def _run(executable, device, x):
    return [np.asarray(o) for o in executable([x])]


def test_a_second_compile_takes_the_program_from_disk_and_runs_the_same(cache):
    x = np.random.default_rng(0).standard_normal((6, 40)).astype(np.float32)
    module = _module(x)
    device = EmulatedDevice()  # (the emitted kernels themselves run, from the entry's IR)
    first = compile_module(module, device)
    assert first.cache_status == "miss"
    assert list((cache / "gpu").rglob("*.bin"))
    second = compile_module(module, device)
    assert second.cache_status == "persistent_hit"
    assert second.program.ptx == first.program.ptx
    assert [(k.name, k.symbol, k.work_items, k.mode) for k in second.program.kernels] == \
        [(k.name, k.symbol, k.work_items, k.mode) for k in first.program.kernels]
    assert [name for name, _ in second.compile_phases] == ["ptx_from_cache", "driver_load"]
    want = tk.jit(_program, backend="interpreter")(x)
    fresh, cached = _run(first, device, x), _run(second, device, x)
    for a, b in zip(fresh, cached):  # the same kernels: the same bits
        np.testing.assert_array_equal(a, b)
    # (against the interpreter: the GPU's reductions add in another order)
    np.testing.assert_allclose(cached[0], want[0], rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(cached[1], want[1], rtol=2e-5)


def test_another_architecture_is_another_entry(cache):
    x = np.ones((4, 8), np.float32)
    module = _module(x)
    compile_module(module, SimulatedDevice())
    older = SimulatedDevice()
    older.arch = "sm_80"
    assert compile_module(module, older).cache_status == "miss"
    assert compile_module(module, older).cache_status == "persistent_hit"
    assert len(list((cache / "gpu").rglob("*.bin"))) == 2


def test_a_tampered_entry_is_rebuilt_not_run(cache):
    x = np.ones((4, 8), np.float32)
    module = _module(x)
    device = SimulatedDevice()
    compile_module(module, device)
    (entry,) = (cache / "gpu").rglob("*.bin")
    data = bytearray(entry.read_bytes())
    data[-20] ^= 0x01
    entry.write_bytes(bytes(data))
    again = compile_module(module, device)
    assert again.cache_status == "miss (unauthenticated cache entry rebuilt)"
    np.testing.assert_allclose(_run(again, device, x)[0],
                               tk.jit(_program, backend="interpreter")(x)[0], rtol=2e-5, atol=2e-5)


def test_the_gpu_sources_decide_the_gpu_key():
    names = {p.name for p in disk_cache.codegen_sources("gpu")}
    assert {"codegen.py", "reductions.py", "executor.py", "buffer_plan.py"} <= names
    assert "kernels.py" not in names  # (the CPU's emitter is not the GPU's)
