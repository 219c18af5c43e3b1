"""A view made by a function toolkit does not track for writes (a reshape, a transpose, a
broadcast, np.split's pieces) still reads what NumPy's view reads: later writes into its
parent show in it. Where NumPy's reshape copies (a parent that is not contiguous) the result
keeps the values it had. Writing through such a view stays a clear error."""
from __future__ import annotations

import numpy as np
import pytest

import toolkit as tk
from toolkit.frontend.errors import UnsupportedNumpyError

BACKENDS = ["interpreter", "cpu", "gpu-simulated"]


def later_writes(x):
    y = x * 1.0
    grid = y.reshape(2, 3)
    cols = grid.T
    row = np.broadcast_to(y[:3], (2, 3))
    first, second = np.split(y, 2)
    flat = grid.ravel()
    swapped = np.swapaxes(grid, 0, 1)
    copied = grid.T.reshape(6)  # a copy in NumPy: grid.T is not contiguous
    y[0] = 99.0
    y[4] += 7.0
    grid2 = grid * 1.0  # (a new array: later writes do not reach it)
    y[5] = -1.0
    return grid.sum(), cols[0], row[1], first, second, flat, swapped[2], copied, grid2


@pytest.mark.parametrize("backend", BACKENDS)
def test_views_see_later_writes_into_their_parent(backend):
    x = np.arange(6.0)
    jitted = tk.jit(later_writes, backend=backend)
    for _ in range(3):  # (traced, recorded, replayed)
        for e, g in zip(later_writes(x.copy()), jitted(x.copy())):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(e))


def test_a_view_of_a_view_follows_through_a_graph_break():
    def f(x):
        y = x * 2.0
        v = y.reshape(3, 2).T
        if y[1] > 0:  # a break: v crosses it
            y[2] = 50.0
        return v * 1.0

    x = np.arange(6.0)
    jitted = tk.jit(f)
    for _ in range(3):
        np.testing.assert_array_equal(jitted(x.copy()), f(x.copy()))
    assert jitted.graph_breaks.break_count >= 1


def test_writing_through_a_reshape_view_stays_an_error():
    def f(x):
        y = x * 1.0
        v = y.reshape(2, 2)
        v[0, 0] = 5.0
        return y

    with pytest.raises(UnsupportedNumpyError, match="np.reshape"):
        tk.jit(f)(np.arange(4.0))
