"""Runs of small kernels and plain matrix products execute as one native call per run
(toolkit/backends/cpu/native_program.py), with exactly the numbers of step-by-step dispatch."""
import numpy as np
import pytest

import toolkit as tk
from toolkit.backends.cpu.executor import native_run_steps
from toolkit.workloads import dot_chain

import programs

pytestmark = pytest.mark.skipif(native_run_steps is None,
                                reason="the C extension (_kernel_call) was built without run_steps")


def _run(fn, args, monkeypatch, native: bool):
    monkeypatch.setenv("TOOLKIT_NATIVE_PROGRAM", "1" if native else "0")
    f = tk.jit(lambda *a: fn(*a), backend="cpu")
    out = f(*args)
    return out, f.compiled(*args)._executable


@pytest.mark.parametrize("name", sorted(programs.make_cases(np.random.default_rng(0))))
def test_native_segments_give_the_numbers_of_step_by_step_dispatch(name, monkeypatch):
    fn, args = programs.make_cases(np.random.default_rng(0))[name]
    got, _ = _run(fn, args, monkeypatch, True)
    want, exe = _run(fn, args, monkeypatch, False)
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    assert all(program is None for program, *_ in exe.segments)


def test_a_chain_of_small_dots_is_one_native_call(monkeypatch):
    x = np.random.default_rng(0).standard_normal((16, 16), dtype=np.float32)
    w = x * np.float32(0.1)
    got, exe = _run(dot_chain(np), (x, w), monkeypatch, True)
    ((program, steps, *_),) = exe.segments
    assert program is not None and len(steps) == 200
    want, _ = _run(dot_chain(np), (x, w), monkeypatch, False)
    np.testing.assert_array_equal(got, want)
    again = tk.jit(dot_chain(np), backend="cpu")
    for _ in range(3):  # later calls reuse the plan, and fresh results every call
        first, second = again(x, w), again(x, w)
        assert first is not second
        np.testing.assert_array_equal(first, want)


def test_host_steps_split_the_native_runs(monkeypatch):
    def f(x, w):
        y = np.tanh(x @ w) @ w
        z = np.sort(y, axis=1)  # a host routine between two native runs
        return np.exp(z @ w) @ w

    x = np.random.default_rng(1).standard_normal((8, 8))
    got, exe = _run(f, (x, x * 0.1), monkeypatch, True)
    kinds = [(program is not None, len(steps)) for program, steps, *_ in exe.segments]
    assert kinds[0][0] and not kinds[1][0] and kinds[2][0], kinds
    np.testing.assert_allclose(got, f(x, x * 0.1), rtol=1e-12)


def test_profiled_runs_still_time_every_kernel(monkeypatch):
    x = np.random.default_rng(2).standard_normal((16, 16), dtype=np.float32)
    f = tk.jit(dot_chain(np), backend="cpu")
    f(x, x)
    with tk.profile() as prof:
        f(x, x)
    assert len(prof.kernels) == 200
