"""Kernels of a handful of elements skip LLVM's optimisation pipeline (``optnone``), where that
changes only their speed: an unrolled triangular loop has thousands of them, and O3 spent about
60 ms on each. Results are bit for bit those of optimised kernels."""
import re

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


def _rows_written_one_by_one(c, a):
    """A row-by-row update whose trips differ in width: one small kernel per trip."""
    for i in range(c.shape[0]):
        c[i, : i + 1] = 1.5 * (a[i] @ a[: i + 1].T) + 0.5 * c[i, : i + 1]
    return c


def _functions(llvm_text: str) -> dict[str, tuple[str, str]]:
    """name -> (its attributes, its body) in optimised LLVM IR, where a definition names its
    attribute group (``define ... #1 {`` and ``attributes #1 = { optsize ... }``)."""
    groups = dict(re.findall(r"^attributes #(\d+) = \{(.*)\}$", llvm_text, re.M))
    found = {}
    for name, group, body in re.findall(r"^define [^@]*@([\w.$-]+)\(.*?(?:#(\d+))? \{$(.*?)^\}",
                                        llvm_text, re.M | re.S):
        found[name] = (groups.get(group, ""), body)
    return found


def test_small_kernels_of_a_program_of_many_compile_for_size(monkeypatch):
    """An unrolled loop whose trips differ in shape: each trip's kernel is small, and compiles
    without the vectorisers (optsize, noimplicitfloat); the numbers are those of O3 bit for
    bit. Trips whose code is alike share one function (the others are its aliases)."""
    r = np.random.default_rng(1)
    c, a = r.random((24, 24)), r.random((24, 8))
    got, compiled = _compiled(_rows_written_one_by_one, (c.copy(), a), monkeypatch, True)
    want, plain = _compiled(_rows_written_one_by_one, (c.copy(), a), monkeypatch, False)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, _rows_written_one_by_one(c.copy(), a), rtol=1e-13)
    text = compiled.as_text("llvm")
    functions = _functions(text)
    sized = [name for name, (attributes, _) in functions.items() if "optsize" in attributes]
    # (the row slices the dots read in place never run: compiled without optimisation at all)
    never_run = [name for name, (attributes, _) in functions.items() if "optnone" in attributes]
    aliases = re.findall(r"^@([\w.$-]+) = alias [^@]*@([\w.$-]+)$", text, re.M)
    covered = sized + never_run + [name for name, target in aliases
                                   if target in sized or target in never_run]
    assert len(covered) >= 40, \
        f"the trips' kernels were not compiled for size: {sized}, {never_run}, {aliases}"
    assert all("noimplicitfloat" in functions[name][0] for name in sized)
    assert not any("optsize" in attributes
                   for attributes, _ in _functions(plain.as_text("llvm")).values())


def test_a_reassociating_reduction_keeps_the_vectorisers(monkeypatch):
    """A reduction's reassoc flags let O3's vectoriser sum in its own order: compiling it for
    size would change its last bits, so it keeps O3, however many kernels the program has."""
    r = np.random.default_rng(2)
    xs = [r.random(300).astype(np.float32) for _ in range(12)]

    def sums(*xs):
        return tuple(x[: 100 + 10 * k].sum() for k, x in enumerate(xs))

    got, compiled = _compiled(sums, xs, monkeypatch, True)
    want, _ = _compiled(sums, xs, monkeypatch, False)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    functions = _functions(compiled.as_text("llvm"))
    reducing = [name for name, (_, body) in functions.items() if "reassoc" in body]
    assert len(reducing) >= 12, "the sums' kernels were not found"
    for name in reducing:
        assert "optsize" not in functions[name][0], name
