"""``x[key] op= y`` on a traced array: Python runs ``v = x[key]; v op= y; x[key] = v``. The
augmented assignment writes through the view; storing the view back is the identity and is not
traced again, so a loop of such updates traces one write per update. Everything else about
item assignment is unchanged, and NumPy's results are the contract."""
from __future__ import annotations

import numpy as np
import pytest

import toolkit as tk


def syrk_rows(alpha, beta, C, A):  # PolyBench's syrk as its NumPy port writes it
    for i in range(A.shape[0]):
        C[i, :i + 1] *= beta
        for k in range(A.shape[1]):
            C[i, :i + 1] += alpha * A[i, k] * A[:i + 1, k]


def _count(text: str, opcode: str) -> int:
    return sum(f" {opcode}(" in line for line in text.splitlines())


def test_each_augmented_assignment_traces_one_write():
    rng = np.random.default_rng(1)
    C, A = rng.random((5, 5)), rng.random((5, 3))
    text = tk.jit(syrk_rows, backend="cpu").lower(1.5, 1.2, C, A).as_text()
    writes = sum(1 + A.shape[1] for _ in range(A.shape[0]))
    assert _count(text, "dynamic-update-slice") == writes


@pytest.mark.parametrize("backend", ["cpu", "interpreter"])
def test_the_results_match_numpy(backend):
    rng = np.random.default_rng(2)
    C, A = rng.random((7, 7)), rng.random((7, 4))
    C_ref = C.copy()
    syrk_rows(1.5, 1.2, C_ref, A)
    tk.jit(syrk_rows, backend=backend)(1.5, 1.2, C, A)
    np.testing.assert_allclose(C, C_ref, rtol=1e-14)


def test_stores_that_are_not_the_same_view_still_write():
    def f(a):
        v = a[0:2]
        a[1:3] = v  # another window, overlapping: NumPy copies first
        w = a[2:4]
        a[2] = 7.0  # w sees the write (a view) ...
        a[2:4] = w  # ... and storing it back changes nothing
        u = a[::2]
        a = a * 2.0  # a new array: ``u`` is a view of the old one
        a[::2] = u
        return a

    x = np.arange(8.0)
    np.testing.assert_array_equal(tk.jit(f, backend="cpu")(x.copy()), f(x.copy()))


def test_a_read_only_array_still_refuses_the_augmented_assignment():
    def f(x):
        ro = np.broadcast_to(x, (3, 4))
        ro[0, :2] += 1.0
        return ro

    with pytest.raises(ValueError, match="read-only"):
        f(np.ones(4))
    with pytest.raises(ValueError, match="read-only"):
        tk.jit(f, backend="cpu")(np.ones(4))
