"""Kernels split over native helper threads inside a native program (_kernel_call's run_split,
op 9): the chunks cover each kernel's range exactly once, so a split run computes the bits of
one thread's run, in loops, through packed entries, beside BLAS calls, under a thread budget,
from several Python threads at once, and in a forked child (which starts its own helpers)."""
import multiprocessing
import threading

import numpy as np
import pytest

import toolkit as tk
from toolkit.backends.cpu import executor
from toolkit.backends.cpu.executor import available_cores, kernel_threads, native_split

pytestmark = pytest.mark.skipif(
    not native_split or available_cores() < 2,
    reason="needs the C extension's split kernels and two cores")


def _softmax_then_mix(x, w):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)  # row kernels: split on whole rows
    return np.tanh(p @ w) * 1.5 + np.sqrt(np.abs(x)) * 0.25


def _chain(x):
    for k in range(3):
        x = np.tanh(x * 1.25 + k) - 0.5 * x
        x = x.T.copy()  # (a transpose between: kernels that cannot fuse)
    return x


def _compiled(fn, args, split_work: int, monkeypatch):
    monkeypatch.setattr(executor, "NATIVE_SPLIT_WORK", split_work)
    f = tk.jit(lambda *a: fn(*a), backend="cpu")
    return f, f(*args)


def _launches(f, args) -> list[str]:
    with tk.profile() as prof:
        f(*args)
    return [k.launch for k in prof.kernels]


def _args(seed=0, n=64):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, n)).astype(np.float32), \
        (rng.standard_normal((n, n)) * 0.1).astype(np.float32)


@pytest.mark.parametrize("fn, arity", [(_softmax_then_mix, 2), (_chain, 1)])
def test_split_kernels_compute_the_bits_of_one_thread(fn, arity, monkeypatch):
    args = _args()[:arity]
    split, got = _compiled(fn, args, 256, monkeypatch)
    _, want = _compiled(fn, args, 1 << 62, monkeypatch)
    assert any(launch.startswith("threads=2, native program") for launch in _launches(split, args))
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, fn(*args), rtol=2e-5, atol=2e-6)
    for _ in range(20):  # (later calls: helpers lingering or woken, the same bits each time)
        np.testing.assert_array_equal(split(*args), want)


def test_one_large_kernel_is_a_one_op_native_program_that_splits(monkeypatch):
    x = _args(1, 96)[0]
    f, got = _compiled(np.tanh, (x,), 256, monkeypatch)
    exe = f.compiled(x)._executable
    ((program, steps, *_),) = exe.segments
    assert program is not None and len(steps) == 1 and exe.plain_run is None
    assert _launches(f, (x,)) == ["threads=2, native program"]
    _, whole = _compiled(np.tanh, (x,), 1 << 62, monkeypatch)
    np.testing.assert_array_equal(got, whole)
    np.testing.assert_allclose(got, np.tanh(x), rtol=2e-6, atol=1e-7)


def test_a_thread_budget_of_one_runs_split_kernels_whole(monkeypatch):
    args = _args(2)
    f, want = _compiled(_softmax_then_mix, args, 256, monkeypatch)
    with kernel_threads(1):
        got = f(*args)
        launches = _launches(f, args)
    assert launches and all(not launch.startswith("threads=2") for launch in launches)
    np.testing.assert_array_equal(got, want)
    assert any(launch.startswith("threads=2") for launch in _launches(f, args))  # (restored)


def test_split_kernels_inside_a_rolled_loop(monkeypatch):
    x = _args(3)[0]

    def loop(x):
        return tk.lax.fori_loop(0, 6, lambda i, y: np.tanh(y) * 1.5 + 0.125, x)

    split, got = _compiled(loop, (x,), 256, monkeypatch)
    _, want = _compiled(loop, (x,), 1 << 62, monkeypatch)
    np.testing.assert_array_equal(got, want)
    y = x
    for _ in range(6):
        y = np.tanh(y) * np.float32(1.5) + np.float32(0.125)
    np.testing.assert_allclose(got, y, rtol=2e-5, atol=2e-6)


def _weighted_sum(xs):
    """One fusion over twenty arrays: a kernel of 21 buffers, called through its packed
    entry."""
    return sum(np.tanh(x) * (k + 1) for k, x in enumerate(xs))


def test_split_kernels_of_many_buffers_go_through_their_packed_entry(monkeypatch):
    xs = [np.random.default_rng(k).random((48, 48)) for k in range(20)]
    f, got = _compiled(_weighted_sum, (xs,), 256, monkeypatch)
    exe = f.compiled(xs)._executable
    wide = [s for s in exe.steps if s.kind == "kernel" and len(s.inputs) + len(s.outputs) > 16]
    assert wide and all(s.packed_address and s.extra["split_threads"] > 1 for s in wide)
    _, want = _compiled(_weighted_sum, (xs,), 1 << 62, monkeypatch)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, _weighted_sum(xs), rtol=1e-13)


def test_python_threads_calling_split_programs_at_once_get_their_own_results(monkeypatch):
    """One split runs at a time: a second caller runs its kernel on its own thread."""
    f, _ = _compiled(_chain, _args()[:1], 256, monkeypatch)
    inputs = [_args(seed)[0] for seed in range(4)]
    wants = [f(x) for x in inputs]
    failures: list = []

    def work(k):
        try:
            for _ in range(30):
                np.testing.assert_array_equal(f(inputs[k]), wants[k])
        except AssertionError as e:  # pragma: no cover - reported below
            failures.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[0]


_forked = None


def _in_child(x):
    return _forked(x)


def test_a_forked_child_starts_its_own_helpers(monkeypatch):
    global _forked
    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("no fork on this platform")
    x = _args(5)[0]
    _forked, want = _compiled(_chain, (x,), 256, monkeypatch)
    _forked(x)  # the parent's helpers exist before the fork
    with multiprocessing.get_context("fork").Pool(1) as pool:
        got = pool.apply_async(_in_child, (x,)).get(timeout=120)
    np.testing.assert_array_equal(got, want)


def test_the_split_weighs_a_kernels_arithmetic_not_only_its_elements(monkeypatch):
    """At the default threshold (about a million elements of ``x + 1``), three chained tanh
    over 64k elements split: each costs about as much as six elements moved, so the kernel
    runs as long as x + 1 over a million; so do twelve Mandelbrot rounds over 15.6k complex
    points (a complex abs is a hypot). x + 1 itself at 64k runs whole, and so does an 8-term
    polynomial (16 cheap operations). The split bits are the whole run's."""
    from toolkit.backends.llvm.planning import CHEAP_OPS_PER_ELEMENT, EXPENSIVE_WORK, loop_work

    x = np.random.default_rng(4).standard_normal(1 << 16)
    tanh3 = lambda x: np.tanh(np.tanh(np.tanh(x)))  # noqa: E731
    split = tk.jit(tanh3, backend="cpu")
    assert _launches(split, (x,)) == ["threads=2, native program"]
    _, whole = _compiled(tanh3, (x,), 1 << 62, monkeypatch)
    np.testing.assert_array_equal(split(x), whole)
    np.testing.assert_allclose(whole, tanh3(x), rtol=1e-15, atol=1e-300)
    for cheap in (lambda x: x + 1.0, lambda x: ((((((x * 1.1 + 2) * x + 3) * x + 4) * x + 5)
                                                   * x + 6) * x + 7) * x + 8):
        (launch,) = _launches(tk.jit(cheap, backend="cpu"), (x,))
        assert launch.startswith("threads=1"), launch
    def rounds(c):  # complex arithmetic: a Mandelbrot iteration's rounds, 15.6k points
        z = np.zeros_like(c)
        for _ in range(12):
            z = np.where(np.abs(z) < 2, z * z + c, z)
        return z

    c = (np.linspace(-2, 0.5, 125)[None] + 1j * np.linspace(-1, 1, 125)[:, None])
    split = tk.jit(rounds, backend="cpu")
    (launch,) = _launches(split, (c,))
    assert launch.startswith("threads=2"), launch
    _, whole = _compiled(rounds, (c,), 1 << 62, monkeypatch)
    np.testing.assert_array_equal(split(c), whole)
    np.testing.assert_array_equal(whole, rounds(c))
    (kernel,) = [i for i in tk.jit(np.tanh, backend="cpu").lower(x).compile().optimized_hlo
                 .entry.instructions if i.opcode == "fusion"]
    comp = kernel.attrs["calls"]
    assert loop_work(comp, x.size) == x.size * (1 + EXPENSIVE_WORK)
    assert CHEAP_OPS_PER_ELEMENT > 1
