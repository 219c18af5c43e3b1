"""Kernels of a handful of elements skip LLVM's optimisation pipeline (``optnone``), where that
changes only their speed: an unrolled triangular loop has thousands of them, and O3 spent about
60 ms on each. Results are bit for bit those of optimised kernels."""
import numpy as np
import pytest

import toolkit as tk

import programs


def _compiled(fn, args, monkeypatch, tiny: bool):
    monkeypatch.setenv("TOOLKIT_TINY_OPT", "1" if tiny else "0")
    monkeypatch.setenv("TOOLKIT_CACHE_DIR", "off")  # each compile makes its own machine code
    f = tk.jit(lambda *a: fn(*a), backend="cpu")
    return f(*args), f.compiled(*args)


def lu(a):
    n = a.shape[0]
    for i in range(n):
        for j in range(i):
            a[i, j] -= a[i, :j] @ a[:j, j]
            a[i, j] /= a[j, j]
        for j in range(i, n):
            a[i, j] -= a[i, :i] @ a[:i, j]
    return a


def test_the_scalar_updates_of_an_unrolled_loop_are_compiled_plainly(monkeypatch):
    a = np.random.default_rng(0).random((6, 6)) + 6 * np.eye(6)
    got, compiled = _compiled(lu, (a.copy(),), monkeypatch, True)
    want, plain = _compiled(lu, (a.copy(),), monkeypatch, False)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, lu(a.copy()), rtol=1e-13)
    assert "optnone" in compiled.as_text("llvm") and "optnone" not in plain.as_text("llvm")


@pytest.mark.parametrize("name", sorted(programs.make_cases(np.random.default_rng(0))))
def test_results_are_those_of_optimised_kernels(name, monkeypatch):
    fn, args = programs.make_cases(np.random.default_rng(0))[name]
    got, _ = _compiled(fn, args, monkeypatch, True)
    want, _ = _compiled(fn, args, monkeypatch, False)
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_kernels_that_call_math_functions_keep_the_pipeline(monkeypatch):
    x = np.linspace(0.1, 2.0, 5).astype(np.float32)
    _, compiled = _compiled(lambda x: np.tan(x) * 2, (x,), monkeypatch, True)
    text = compiled.as_text("llvm")
    assert "optnone" not in text
