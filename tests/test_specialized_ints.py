"""Python int arguments that Python needs as numbers (``range(steps)``, ``if flag:``) are
specialized after the first call's graph break, as torch.compile specializes ints: later calls
compile the whole function as one program, keyed by the value, and the recompile report says
so. Everything else about the argument stays as NumPy has it."""
from __future__ import annotations

import numpy as np
import pytest

import toolkit as tk
from toolkit.frontend.errors import TracerConversionError


def relax(steps, a):
    for _ in range(steps):
        a = 0.5 * (a + np.roll(a, 1))
    return a


def relax_in_place(TSTEPS, A, B):  # PolyBench's jacobi-1d, as its NumPy port writes it
    for _ in range(1, TSTEPS):
        B[1:-1] = 0.33333 * (A[:-2] + A[1:-1] + A[2:])
        A[1:-1] = 0.33333 * (B[:-2] + B[1:-1] + B[2:])


def _reference(fn, *args):
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    return fn(*copies), copies


def test_the_first_call_is_one_program_keyed_by_the_value():
    a = np.linspace(-1, 1, 64)
    f = tk.jit(relax, backend="cpu")
    with tk.profile() as first:
        np.testing.assert_array_equal(f(5, a), relax(5, a))
    # 'steps' was asked for before anything ran: the call traced again with it static, so
    # no segment was compiled and no call ran in segments
    assert [c.cache for c in first.compiles][0] == "specialized"
    assert not first.graph_breaks
    np.testing.assert_array_equal(f(5, a), relax(5, a))
    f.compiled(5, a)  # one program (a segmented signature has none, and this would raise)
    assert f.graph_breaks.calls == 0
    with tk.profile() as prof:
        np.testing.assert_array_equal(f(5, a), relax(5, a))
    assert not prof.compiles and not prof.graph_breaks
    assert "specialized: 'steps' is a Python int" in str(f.graph_breaks)


def test_in_place_writes_into_the_callers_arrays_match_numpy_on_every_call():
    rng = np.random.default_rng(0)
    f = tk.jit(relax_in_place, backend="cpu")
    for steps in (10, 10, 7):
        A, B = rng.random(300), rng.random(300)
        _, (_, A_ref, B_ref) = _reference(relax_in_place, steps, A, B)
        assert f(steps, A, B) is None
        np.testing.assert_allclose(A, A_ref, rtol=1e-15)
        np.testing.assert_allclose(B, B_ref, rtol=1e-15)


def test_the_recompile_report_names_the_specialization_and_a_new_value():
    a = np.ones(8)
    f = tk.jit(relax, backend="cpu", on_recompile="ignore")
    f(3, a)
    f(3, a)
    f(4, a)
    report = f.explain_recompiles()
    codes = [[c.code for c in e.causes] for e in report.recompiles]
    assert ["SPECIALIZED"] in codes, codes
    assert codes[-1] == ["STATIC_VALUE"], codes
    text = report.text()
    assert "'steps' is a Python int that Python needed as a number" in text
    assert "tk.lax.fori_loop" in text  # the way to compile once for every value


def test_a_bool_flag_is_specialized_and_both_branches_match_numpy():
    def pick(flag, x):
        if flag:
            return np.sin(x)
        return np.cos(x)

    x = np.linspace(0, 3, 16, dtype=np.float32)
    f = tk.jit(pick, backend="cpu")
    for flag in (True, True, False, False, True):
        out = f(flag, x)
        np.testing.assert_allclose(out, pick(flag, x), rtol=4e-7, atol=1e-7)  # (libm ulps)
        assert out.dtype == np.float32


def test_keywords_are_specialized_by_name():
    a = np.arange(6.0)
    f = tk.jit(relax, backend="cpu")
    np.testing.assert_array_equal(f(a=a, steps=2), relax(2, a))
    np.testing.assert_array_equal(f(a=a, steps=2), relax(2, a))
    assert f.graph_breaks.calls == 0
    assert f.cache_size == 1


def test_only_python_ints_are_specialized():
    a = np.arange(6.0)
    f = tk.jit(relax, backend="cpu")
    n = np.array(3)  # an array holds data: it stays traced (and the call runs in segments)
    for _ in range(2):
        np.testing.assert_array_equal(f(n, a), relax(3, a))
    assert f.graph_breaks.calls == 2

    def scale(n, x):  # an int that only enters arithmetic is never needed as a number
        return x * n

    g = tk.jit(scale, backend="cpu", on_recompile="error", max_recompiles=0)
    for n in (2, 3, 4):
        np.testing.assert_array_equal(g(n, a), a * n)
    assert g.cache_size == 1


def test_an_int_inside_a_pytree_is_not_specialized_but_still_right():
    a = np.arange(5.0)

    def f(config, x):
        return relax(config["steps"], x)

    g = tk.jit(f, backend="cpu")
    for _ in range(2):
        np.testing.assert_array_equal(g({"steps": 2}, a), relax(2, a))
    assert g.graph_breaks.calls == 2


def test_fullgraph_still_raises_at_the_first_use_as_a_number():
    f = tk.jit(relax, backend="cpu", fullgraph=True)
    with pytest.raises(TracerConversionError, match="static_argnums"):
        f(2, np.ones(3))


def test_an_int_asked_for_after_a_segment_ran_specializes_the_next_call():
    def late(x, steps):  # Python sees a computed value first: that segment has run
        if x.sum() > 0:
            x = x + 1
        return relax(steps, x)

    a = np.linspace(0, 1, 16)
    f = tk.jit(late, backend="cpu")
    for _ in range(3):
        np.testing.assert_array_equal(f(a, 4), late(a, 4))
    assert "specialized: 'steps'" in str(f.graph_breaks)
    assert f.graph_breaks.calls == 3  # the data-dependent `if` breaks every call


def test_a_broad_except_in_the_users_code_does_not_swallow_the_retrace():
    def guarded(steps, a):
        try:
            for _ in range(steps):
                a = a * 2
        except Exception:  # noqa: BLE001 (the user's code, as written)
            return None
        return a

    a = np.arange(4.0)
    f = tk.jit(guarded, backend="cpu")
    np.testing.assert_array_equal(f(3, a), a * 8)
    assert f.graph_breaks.calls == 0


def test_a_function_with_side_effects_before_the_break_runs_them_once_a_call():
    seen = []

    def noisy(steps, a):
        seen.append(steps)  # Python state: runs on every call, as in NumPy (python_effects)
        return relax(steps, a)

    a = np.arange(4.0)
    f = tk.jit(noisy, backend="cpu")
    np.testing.assert_array_equal(f(2, a), relax(2, a))
    assert seen == [2]  # (not traced again for the int: the append would run twice)
    np.testing.assert_array_equal(f(2, a), relax(2, a))
    np.testing.assert_array_equal(f(3, a), relax(3, a))
    assert seen == [2, 2, 3]


def seidel_like(TSTEPS, N, A):  # PolyBench's seidel-2d: loops over values computed from ints
    for _ in range(0, TSTEPS - 1):
        for i in range(1, N - 1):
            A[i, 1:-1] += A[i - 1, :-2] + A[i + 1, 2:]
            for j in range(1, N - 1):
                A[i, j] += A[i, j - 1]
                A[i, j] /= 9.0


def test_ints_computed_from_python_int_arguments_specialize_those_arguments():
    rng = np.random.default_rng(2)
    f = tk.jit(seidel_like, backend="cpu")
    for steps in (3, 3, 4):
        A = rng.random((7, 7))
        _, (_, _, want) = _reference(seidel_like, steps, 7, A)
        assert f(steps, 7, A) is None
        np.testing.assert_allclose(A, want, rtol=1e-14)
    report = f.graph_breaks
    assert report.calls == 0, report  # every call one program: no segments
    assert "'TSTEPS'" in str(report) and "'N'" in str(report)
    assert f.cache_size == 2  # one program per value of TSTEPS


def test_a_value_computed_from_an_int_and_an_array_is_not_specialized():
    def mixed(n, x):
        for _ in range(int(n + x[0])):  # data decides: a break every call, n stays traced
            x = x * 0.5
        return x

    a = np.array([2.0, 1.0])
    f = tk.jit(mixed, backend="cpu")
    for _ in range(3):
        np.testing.assert_array_equal(f(1, a), mixed(1, a))
    assert f.graph_breaks.calls == 3 and "specialized: '" not in str(f.graph_breaks)


def test_python_int_arithmetic_beyond_int64_raises_rather_than_wrapping():
    """A traced Python int is a weak int64; Python's would grow past it (2**30 cubed). The
    call raises OverflowError where NumPy's result came from a larger int, and within int64
    it matches."""
    def cube(n, x):
        return x * 0 + n * n * n

    x = np.array([1.0, 2.0])
    f = tk.jit(cube, backend="cpu")
    np.testing.assert_array_equal(f(2 ** 20, x), cube(2 ** 20, x))  # 2**60: fits
    with pytest.raises(OverflowError, match="Python ints"):
        f(2 ** 30, x)
    for shift, fits in ((40, True), (70, False)):
        def shifted(n, v):
            return v * 0 + (n << shift)
        g = tk.jit(shifted, backend="interpreter")
        if fits:
            np.testing.assert_array_equal(g(3, x), shifted(3, x))
        else:
            with pytest.raises(OverflowError):
                g(3, x)
