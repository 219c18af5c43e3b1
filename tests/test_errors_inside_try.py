"""An error NumPy raises inside the user's ``try ... except`` is raised there under tk.jit too,
so the ``except`` sees it: toolkit's checks (an index out of bounds, the max of an empty
selection) run at that point through a graph break, where elsewhere they run with the
program and raise after it. ``with`` blocks and ``finally`` catch nothing and change nothing."""
from __future__ import annotations

import numpy as np
import pytest

import toolkit as tk
from toolkit.frontend.errors import UnsupportedNumpyError


def guarded_index(x, i):
    try:
        return x[np.array([i])] * 2
    except IndexError:
        return x[:1]


def guarded_in_a_helper(x, i):
    def pick(v, k):
        return v[np.array([k])]

    try:
        return pick(x, i) + 1
    except IndexError:
        return -x[:1]


def empty_max(x, limit):
    try:
        return x[x > limit].max()
    except ValueError:  # NumPy: zero-size array to reduction operation maximum
        return x.min()


@pytest.mark.parametrize("backend", ["interpreter", "cpu", "gpu-simulated"])
@pytest.mark.parametrize("fn, cases", [
    (guarded_index, [5, 1, 5, 2, -9, 0]),
    (guarded_in_a_helper, [7, 0, 3, 4]),
    (empty_max, [10.0, 1.5, 10.0, 0.5]),
], ids=lambda v: getattr(v, "__name__", ""))
def test_the_users_except_sees_numpys_error(fn, cases, backend):
    x = np.arange(1.0, 5.0)
    jitted = tk.jit(fn, backend=backend)
    for case in cases:  # (failing and passing calls, in turn: replayed and traced)
        np.testing.assert_array_equal(np.asarray(jitted(x, case)), np.asarray(fn(x, case)))
    assert any(b.reason.endswith("checked inside try") for b in jitted.graph_breaks.breaks)


def test_outside_a_try_the_check_runs_with_the_program():
    def plain(x, i):
        with np.errstate(all="ignore"):  # (a with block is not a try)
            return x[np.array([i])]

    jitted = tk.jit(plain)
    np.testing.assert_array_equal(jitted(np.arange(3.0), 1), [1.0])
    with pytest.raises(IndexError):
        jitted(np.arange(3.0), 5)
    assert jitted.graph_breaks.break_count == 0


def test_a_try_around_the_jitted_call_needs_no_break():
    jitted = tk.jit(lambda x, i: x[np.array([i])])
    try:
        jitted(np.arange(3.0), 9)
        raised = False
    except IndexError:
        raised = True
    assert raised and jitted.graph_breaks.break_count == 0


# ---- library routines that raise for some values (np.linalg.LinAlgError) ----------------------
def guarded_inverse(a):
    try:
        return np.linalg.inv(a) * 2.0
    except np.linalg.LinAlgError:
        return np.zeros_like(a)


def guarded_solve_in_a_helper(a, b):
    def solve(m, v):
        return np.linalg.solve(m, v)

    try:
        return solve(a, b)
    except np.linalg.LinAlgError:
        return -b


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_the_users_except_sees_linalg_errors(backend):
    singular, regular = np.ones((2, 2)), np.array([[2.0, 1.0], [1.0, 3.0]])
    inverse = tk.jit(guarded_inverse, backend=backend)
    solve = tk.jit(guarded_solve_in_a_helper, backend=backend)
    b = np.array([1.0, -1.0])
    for a in (singular, regular, singular, regular):  # (traced, then replayed)
        np.testing.assert_array_equal(inverse(a), guarded_inverse(a))
        np.testing.assert_array_equal(solve(a, b), guarded_solve_in_a_helper(a, b))
    assert any("np.linalg.inv() ran in NumPy" in b.reason for b in inverse.graph_breaks.breaks)


def test_outside_a_try_a_linalg_routine_stays_in_the_program():
    jitted = tk.jit(lambda a: np.linalg.inv(a) @ a)
    np.testing.assert_allclose(jitted(np.array([[2.0, 1.0], [1.0, 3.0]])), np.eye(2),
                               atol=1e-15)
    with pytest.raises(np.linalg.LinAlgError, match="Singular matrix"):
        jitted(np.ones((2, 2)))  # (raised after the call, where no except waits)
    assert jitted.graph_breaks.break_count == 0


# ---- NumPy's floating-point error handling (np.errstate, np.seterr) ----------------------------
def divide_raising(a, b):
    with np.errstate(divide="raise"):
        return a / b


def sqrt_of_shifted(a, shift):
    with np.errstate(all="raise"):
        c = a * 2.0
        return np.sqrt(c - shift) + np.float64(1e308) * a.sum()


def guarded_divide(a, b):
    try:
        with np.errstate(divide="raise", invalid="raise"):
            return a / b, -a, a ** 2, a @ b, divmod(a, b)
    except FloatingPointError:
        return np.zeros_like(a)


def _same(jitted, fn, *args):
    """jitted(*args) and fn(*args) return equal values or raise the same error and text."""
    try:
        expected = fn(*args)
    except Exception as error:  # noqa: BLE001 - any error NumPy raises is the contract
        with pytest.raises(type(error), match=f"^{error}$"):
            jitted(*args)
        return
    got = jitted(*args)
    expected, got = _leaves(expected), _leaves(got)
    assert len(got) == len(expected)
    for e, g in zip(expected, got):
        assert np.asarray(g).dtype == np.asarray(e).dtype
        np.testing.assert_array_equal(g, e)


def _leaves(value) -> list:
    if isinstance(value, tuple):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]


@pytest.mark.parametrize("fn, cases", [
    (divide_raising, [(np.ones(3), np.zeros(3)), (np.ones(3), np.full(3, 2.0))]),
    (sqrt_of_shifted, [(np.ones(3), 10.0), (np.full(3, 9.0), 1.0), (np.full(3, 1e300), 0.0)]),
    (guarded_divide, [(np.eye(2), np.zeros((2, 2))), (np.eye(2), np.full((2, 2), 4.0))]),
], ids=lambda v: getattr(v, "__name__", ""))
@pytest.mark.parametrize("backend", ["interpreter", "cpu", "gpu-simulated"])
def test_errstate_inside_the_function_raises_as_numpy_does(fn, cases, backend):
    jitted = tk.jit(fn, backend=backend)
    for args in cases + cases:  # (traced, then run again)
        _same(jitted, fn, *args)
    assert any("error handling is on" in b.reason for b in jitted.graph_breaks.breaks)


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_a_call_under_errstate_runs_as_numpy_and_later_calls_compiled(backend):
    jitted = tk.jit(lambda a, b: a / b + 1.0, backend=backend)
    a, zero = np.ones(3), np.zeros(3)
    np.testing.assert_array_equal(jitted(a, zero), [np.inf] * 3)  # compiled, no handling
    with np.errstate(divide="raise"):
        with pytest.raises(FloatingPointError, match="divide by zero encountered in divide"):
            jitted(a, zero)  # (the cached program would give inf)
    calls = []
    with np.errstate(divide="call", call=lambda kind, flag: calls.append(kind)):
        np.testing.assert_array_equal(jitted(a, zero), [np.inf] * 3)
    assert calls == ["divide by zero"]
    np.testing.assert_array_equal(jitted(a, zero), [np.inf] * 3)
    assert jitted.cache_size == 1 and jitted.graph_breaks.break_count == 0


def test_a_gpu_call_under_errstate_is_a_clear_error():
    """The GPU backend's results stay on the device, so its call cannot run as NumPy; it
    computed inf where NumPy raises (a silent difference) and now says why it cannot."""
    jitted = tk.jit(lambda a, b: a / b + 1.0, backend="gpu-simulated")
    a, zero = np.ones(3), np.zeros(3)
    np.testing.assert_array_equal(np.asarray(jitted(a, zero)), [np.inf] * 3)
    with np.errstate(divide="raise"):
        with pytest.raises(UnsupportedNumpyError,
                           match=r"lambda: NumPy's floating-point error handling is on "
                                 r"\(np.errstate\(divide='raise'\)\).*'gpu-simulated' backend"):
            jitted(a, zero)
    with np.errstate(divide="ignore", over="warn"):  # (no handling that changes a result)
        np.testing.assert_array_equal(np.asarray(jitted(a, zero)), [np.inf] * 3)


def test_handling_that_changes_no_result_compiles_as_usual():
    def quiet(a, b):
        with np.errstate(divide="ignore", invalid="warn", over="print"):
            return a / b

    jitted = tk.jit(quiet)
    np.testing.assert_array_equal(jitted(np.ones(2), np.zeros(2)), [np.inf, np.inf])
    assert jitted.graph_breaks.break_count == 0


def test_where_the_graph_may_not_break_errstate_is_a_clear_error():
    jitted = tk.jit(divide_raising, fullgraph=True)
    with pytest.raises(Exception, match=r"error handling is on \(np.errstate\(divide='raise'\)\)"):
        jitted(np.ones(2), np.ones(2))
