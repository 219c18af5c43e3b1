"""The GPU backend's own emitted kernels run on the host (tests/host_simt.py) against the
interpreter: loop kernels and thread-per-output reductions one simulated thread at a time;
warp, block and split reductions with every thread of a block an OS thread, shuffles and
__syncthreads as waits on pthread barriers. What is left to a GPU (test_gpu_runtime.py,
marked gpu) is LLVM's NVPTX back end and the hardware; ptxas checks the PTX here."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import toolkit as tk
from toolkit.backends import Backend, register_backend
from toolkit.backends.gpu import compile_module, reductions

import programs
from host_simt import EmulatedDevice
from backend_checks import assert_close, check_every_binary_ufunc, check_every_unary_ufunc
from helpers import sweep_examples
from test_random_programs import inputs_strategy, run_program, steps_strategy

DEVICE = EmulatedDevice()
register_backend(Backend("gpu-emulated", "emitted GPU kernels run on the host (tests)", -1,
                         lambda module: compile_module(module, device=DEVICE)))


def both(fn, *args):
    got = tk.jit(fn, backend="gpu-emulated", on_recompile="ignore")(*args)
    return tk.device_get(got), tk.jit(fn, backend="interpreter", on_recompile="ignore")(*args)


def emulated_during(call) -> list[str]:
    before = len(DEVICE.emulated)
    call()
    return DEVICE.emulated[before:]


@pytest.mark.parametrize("kind", sorted(programs.FUSION_KINDS))
def test_every_fusion_kind(kind):
    x = np.random.default_rng(1).standard_normal((64, 96)).astype(np.float32)
    assert_close(*both(programs.FUSION_KINDS[kind], x), approx=True)


@pytest.mark.parametrize("name", sorted(programs.make_cases(np.random.default_rng(0))))
def test_programs(name):
    fn, args = programs.make_cases(np.random.default_rng(0))[name]
    assert_close(*both(fn, *args), approx=True)


@pytest.mark.parametrize(
    "shape",
    [
        (0,),
        (1,),
        (0, 5),
        (5, 0),
        (1, 1),
        (3, 17),
        (7, 33),
        (2, 3, 65),
        (20000, 3),
        (5000, 40),
        (2, 9000),
    ],
)
def test_awkward_shapes(shape):
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    for fn in (
        lambda a: np.tanh(a * 2 + 1),
        lambda a: a.sum(axis=0),
        lambda a: a.max(axis=0) if a.shape[0] else a,
        lambda a: (a > 0).any(axis=0),
        lambda a: a[::-1] * 2,
    ):
        assert_close(*both(fn, x), approx=True)


def test_thread_split_reductions_run_their_own_code_and_reset_their_counts():
    x = np.random.default_rng(3).standard_normal((50000, 7)).astype(np.float32)
    f = tk.jit(lambda a: (a.sum(axis=0), a.min(axis=0)), backend="gpu-emulated")
    (kernel,) = [k for k in f.compiled(x)._executable.program.kernels]
    assert kernel.mode == "thread_split"
    ran = emulated_during(lambda: f(x))
    assert ran == [kernel.symbol]
    first = tk.device_get(f(x))
    # the arrival counts went back to 0: the next launch combines again
    second = tk.device_get(f(x * 2))
    np.testing.assert_allclose(first[0], x.astype(np.float64).sum(axis=0), rtol=1e-4)
    np.testing.assert_array_equal(first[1], x.min(axis=0))
    np.testing.assert_allclose(second[0], 2 * x.astype(np.float64).sum(axis=0), rtol=1e-4)


def test_float64_math_runs_the_libdevice_calls_as_libm():
    x = np.linspace(-3, 3, 1001)
    fn = lambda a: (  # noqa: E731
        np.exp(a),
        np.tanh(a),
        np.arctan2(a, a + 0.5),
        np.abs(a) ** 1.5,
        np.log1p(np.abs(a)),
    )
    assert_close(*both(fn, x), approx=True)


# each example compiles ~20 kernels twice (PTX, host)
@settings(max_examples=sweep_examples(5), deadline=None)
@given(data=st.data())
def test_every_unary_ufunc(data):
    check_every_unary_ufunc(data, both)


@settings(max_examples=sweep_examples(5), deadline=None)
@given(data=st.data())
def test_every_binary_ufunc(data):
    check_every_binary_ufunc(data, both)


@settings(max_examples=20, deadline=None)
# float32 dots differ by an ulp that sin() amplifies
@given(steps=steps_strategy, data=inputs_strategy(np.float64))
def test_random_programs(steps, data):
    x, y = data
    assert_close(*both(lambda a, b: run_program(steps, a, b), x, y), approx=True)


COOPERATIVE = {  # (shape, mode): small enough for 256 OS threads a block on 2 cores
    "warp": ((40, 100), "warp"),
    "block": ((6, 5000), "block"),
    "split": ((3, 5000), "split"),
    "full split": ((20000,), "split"),
}


@pytest.mark.parametrize(
    "dtype", [np.float32, np.float64, np.int32, np.int64, np.bool_], ids=lambda d: np.dtype(d).name
)
@pytest.mark.parametrize("case", sorted(COOPERATIVE))
def test_cooperative_reductions_run_their_own_code(case, dtype, monkeypatch):
    shape, mode = COOPERATIVE[case]
    if mode == "block":
        monkeypatch.setattr(reductions, "TARGET_BLOCKS", 1)  # one block a row even for few rows
    rng = np.random.default_rng(4)
    x = (
        (rng.standard_normal(shape) * 100).astype(dtype)
        if dtype != np.bool_
        else rng.random(shape) > 0.9
    )
    if dtype == np.bool_:
        fn = lambda a: (a.any(axis=-1), a.all(axis=-1), ~a)  # noqa: E731  (and an extra output)
    else:
        fn = lambda a: (a.sum(axis=-1, dtype=a.dtype), a.max(axis=-1), a * 2)  # noqa: E731
    f = tk.jit(fn, backend="gpu-emulated", on_recompile="ignore")
    modes = {k.mode for k in f.compiled(x)._executable.program.kernels if k.spec.kind == "row"}
    assert modes == {mode}
    before = len(DEVICE.interpreted)
    got = tk.device_get(f(x))
    assert len(DEVICE.interpreted) == before
    assert_close(got, tk.jit(fn, backend="interpreter", on_recompile="ignore")(x), approx=True)


def test_every_kernel_ran_its_emitted_code():
    # (its own programs: under xdist's work stealing this test may be a worker's first)
    x = np.random.default_rng(2).standard_normal((16, 40)).astype(np.float32)
    interpreted = len(DEVICE.interpreted)
    ran = emulated_during(lambda: [both(fn, x) for fn in programs.FUSION_KINDS.values()])
    assert ran and DEVICE.interpreted[interpreted:] == []


def test_scatter_with_repeated_indices_reads_its_own_writes_on_the_gpu():
    """The GPU scatter reads the output it updates: those loads must not be marked invariant
    (read-only cache), or a repeated index sees a stale value (np.add.at gave 1.5, not 4.5)."""
    def add_at(b, ids):
        out = b.copy()
        np.add.at(out, ids, 1.5)
        return out

    b = np.array([0.0, 10.0])
    ids = np.array([0, 0, 1, 0])
    got = tk.device_get(tk.jit(add_at, backend="gpu-emulated")(b, ids))
    np.testing.assert_array_equal(got, [4.5, 11.5])
    from toolkit.backends.gpu import compile_ptx
    program = compile_ptx(
        tk.jit(add_at, backend="interpreter").compiled(b, ids).optimized_hlo, "sm_80"
    )
    assert "ld.global.b64" in program.ptx  # the output's reads bypass the read-only cache


def _tails_scaled(d):
    return tuple(d[:, i] @ d[:, i:] / (d.shape[0] - 1) for i in range(d.shape[1]))


def test_kernels_alike_in_code_run_one_entry_each_over_its_own_length():
    """Divides of ever shorter vectors share a PTX entry (backends/llvm/shared_code): each
    launch runs that entry's emitted code over its own buffers and count, and every result is
    the interpreter's."""
    d = np.random.default_rng(5).standard_normal((12, 24))
    before = len(DEVICE.emulated)
    got, want = both(_tails_scaled, d)
    ran = [s for s in DEVICE.emulated[before:] if s.startswith("loop_divide_fusion")]
    # (the call may run the program more than once: a graph's capture, then its replay)
    assert len(ran) >= 24 and len(ran) % 24 == 0 and len(set(ran)) <= 3
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-12, atol=1e-15)
