"""A jitted function's Python side effects run on every call, as NumPy's do: a print, a
counter bumped through ``global`` or ``nonlocal``, a list appended to, an attribute or a dict
entry set (``frontend.python_effects``). Where the graph may not break, a warning names the
line that runs only when traced."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import toolkit as tk

BACKENDS = ["interpreter", "cpu", "gpu-simulated"]
calls = 0
LOSSES: list = []
STATS = {"n": 0}


def bump(x):
    global calls
    calls += 1
    return x * 2 + calls  # (a Python int read after it was written: the new value)


def logged(x):
    y = (x * x).sum()
    LOSSES.append(float(y))  # (a value made concrete: a break, then a list grown)
    return y


def counted(x):
    STATS["n"] += 1
    return x - 1


class Model:
    def __init__(self):
        self.steps = 0
        self.history = []

    def step(self, x):
        self.steps += 1
        self.history.append(self.steps)
        return x * 0.5


def _with_counter():
    count = 0

    def f(x):
        nonlocal count
        count += 1
        return x + count
    return f, lambda: count


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_global_counter_is_bumped_on_every_call_and_read_anew(backend):
    global calls
    calls = 0
    x = np.arange(3.0)
    jitted = tk.jit(bump, backend=backend)
    got = [jitted(x) for _ in range(3)]
    assert calls == 3
    for k, g in enumerate(got, start=1):
        np.testing.assert_array_equal(g, x * 2 + k)
    (site,) = jitted.graph_breaks.breaks
    assert site.reason == "Python state changed: global `calls` rebound"
    assert "update the state after the call" in site.suggestion


@pytest.mark.parametrize("backend", BACKENDS)
def test_lists_dicts_attributes_and_closure_variables_change_on_every_call(backend):
    LOSSES.clear()
    STATS["n"] = 0
    model = Model()
    f, count = _with_counter()
    x = np.arange(4.0)
    for fn in (logged, counted, model.step, f):
        jitted = tk.jit(fn, backend=backend)
        for _ in range(3):
            jitted(x)
    assert LOSSES == [float((x * x).sum())] * 3
    assert STATS["n"] == 3
    assert model.steps == 3 and model.history == [1, 2, 3]
    assert count() == 3


def test_print_prints_on_every_call(capsys):
    def show(x):
        print("mean", x.mean())
        return x + 1
    jitted = tk.jit(show)
    for k in range(3):
        jitted(np.full(2, float(k)))
    assert capsys.readouterr().out.splitlines() == ["mean 0.0", "mean 1.0", "mean 2.0"]
    reasons = {site.reason for site in jitted.graph_breaks.breaks}
    assert "print() runs every call" in reasons


def test_a_function_that_only_reads_python_state_stays_one_program():
    def reads(x):
        return x * STATS["n"] + len(LOSSES) + calls
    jitted = tk.jit(reads)
    x = np.ones(2)
    jitted(x), jitted(x)
    assert jitted.graph_breaks.break_count == 0 and jitted.cache_size == 1


def test_where_the_graph_may_not_break_a_warning_names_the_line():
    global calls
    calls = 0
    jitted = tk.jit(bump, fullgraph=True)
    with pytest.warns(UserWarning, match=r"global `calls` rebound\) inside a compiled program "
                                         r"runs once, when traced"):
        jitted(np.ones(2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jitted(np.ones(2))  # (the compiled program: nothing runs, nothing is said)
    assert calls == 1


def test_state_a_call_traced_again_for_a_python_int_changed_is_put_back_first(capsys):
    # (range(n) of a Python int argument traces the call again with n static; what the first
    # trace did must not happen twice: the list is put back, and a print, which cannot be,
    # keeps the call in segments instead)
    seen = []

    def appends(n, a):
        seen.append(len(seen))
        for _ in range(n):
            a = a + 1
        return a

    def prints(n, a):
        print("start")
        for _ in range(n):
            a = a + 1
        return a

    a = np.zeros(2)
    for fn in (appends, prints):
        jitted = tk.jit(fn)
        for n in (2, 2, 3):
            np.testing.assert_array_equal(jitted(n, a), a + n)
    assert seen == [0, 1, 2]
    assert capsys.readouterr().out.splitlines() == ["start"] * 3


class Tracker:
    def __init__(self):
        self.last = None
        self.best = {}


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_traced_values_left_in_python_state_become_numpys_values(backend):
    """``losses.append(loss)`` inside the step: after each call the list holds NumPy's values
    (an np.float64 here, as NumPy's sum gives), not traced values of a finished trace."""
    losses, tracker = [], Tracker()

    def step(x):
        loss = (x ** 2).sum()
        losses.append(loss)
        tracker.last = x * 2
        tracker.best["loss"] = loss
        return x - 0.1 * x

    jitted = tk.jit(step, backend=backend)
    x = y = np.array([1.0, -2.0, 3.0])
    want_losses = []
    for _ in range(3):
        want_losses.append((y ** 2).sum())
        x, y = jitted(x), y - 0.1 * y
        np.testing.assert_allclose(x, y, rtol=1e-15)
        np.testing.assert_allclose(tracker.last, (y / 0.9) * 2, rtol=1e-15)
    assert [type(v) for v in losses] == [np.float64] * 3
    np.testing.assert_allclose(losses, want_losses, rtol=1e-15)
    assert type(tracker.last) is np.ndarray and tracker.best["loss"] is losses[-1]


def test_an_argument_stored_as_it_came_is_the_callers_array():
    kept = []
    jitted = tk.jit(lambda x: kept.append(x) or x + 1)
    a, b = np.ones(2), np.zeros(3)
    jitted(a), jitted(b)
    assert kept[0] is a and kept[1] is b  # (NumPy appends the very object)


def test_tuples_of_traced_values_left_in_python_state_become_tuples_of_values():
    history = []

    def step(x, i):
        loss = (x * x).sum()
        history.append((i, loss, "step"))
        return x * 0.5

    jitted = tk.jit(step)
    x = np.array([1.0, 2.0])
    for i in range(3):
        x = jitted(x, i)
    assert [(i, type(loss), tag) for i, loss, tag in history] == [
        (i, np.float64, "step") for i in range(3)]
    np.testing.assert_allclose([loss for _, loss, _ in history], [5.0, 1.25, 0.3125])
