"""An error NumPy raises inside the user's ``try ... except`` is raised there under tk.jit too,
so the ``except`` sees it: toolkit's checks (an index out of bounds, the max of an empty
selection) run at that point through a graph break, where elsewhere they run with the
program and raise after it. ``with`` blocks and ``finally`` catch nothing and change nothing."""
from __future__ import annotations

import numpy as np
import pytest

import toolkit as tk


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
