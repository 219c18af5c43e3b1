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
    bits = y.view(np.int64)
    copied = grid.T.reshape(6)  # a copy in NumPy: grid.T is not contiguous
    y[0] = 99.0
    y[4] += 7.0
    grid2 = grid * 1.0  # (a new array: later writes do not reach it)
    y[5] = -1.0
    return grid.sum(), cols[0], row[1], first, second, flat, swapped[2], copied, grid2, bits * 1


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


def writes_through(x):
    y = x * 1.0
    y.reshape(2, 3)[1, 2] = -5.0  # a reshape of a contiguous array: a view
    y.reshape(2, 3).T[0] = 7.0  # a transpose of it
    m = y.reshape(3, 2)
    np.swapaxes(m, 0, 1)[1, 0] += 100.0
    m.ravel()[4] = 42.0
    np.expand_dims(y, 0)[0, 3] = 3.5
    return y, m


@pytest.mark.parametrize("backend", BACKENDS)
def test_writes_through_transposes_and_reshapes_reach_the_parent(backend):
    x = np.arange(6.0)
    jitted = tk.jit(writes_through, backend=backend)
    for _ in range(3):
        for e, g in zip(writes_through(x.copy()), jitted(x.copy())):
            np.testing.assert_array_equal(g, e)


def test_writes_numpy_would_not_carry_back_stay_errors():
    def into_a_piece(x):
        y = x * 1.0
        np.split(y, 2)[0][0] = 5.0  # (a view in NumPy; toolkit does not track the pieces)
        return y

    def into_a_broadcast(x):
        np.broadcast_to(x, (2, 3))[0, 0] = 1.0  # read-only in NumPy too
        return x

    with pytest.raises(UnsupportedNumpyError, match="np.split"):
        tk.jit(into_a_piece)(np.arange(4.0))
    with pytest.raises(ValueError, match="read-only"):
        tk.jit(into_a_broadcast)(np.arange(3.0))
