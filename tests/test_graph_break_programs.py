"""Unmodified NumPy kernels of the kinds public benchmark suites have, that need Python to
see values: a loop `while residual > tol`, a CRC branching on bits, a dynamic-programming fill
branching on comparisons, a Mandelbrot set that drops finished points (`x.shape = n`,
`Z = Z[rem]`), an azimuthal integral over masks, a sparse CSR matrix-vector product (slices
with bounds read from an array), a buffer made with `np.ndarray(shape)`, and complex powers.
Each runs under tk.jit, graph breaks and all, and must equal NumPy's result."""
from __future__ import annotations

import numpy as np
import pytest

import toolkit as tk


def mandelbrot1(xmin, xmax, ymin, ymax, xn, yn, maxiter, horizon=2.0):
    X = np.linspace(xmin, xmax, xn, dtype=np.float64)
    Y = np.linspace(ymin, ymax, yn, dtype=np.float64)
    C = X + Y[:, None] * 1j
    N = np.zeros(C.shape, dtype=np.int64)
    Z = np.zeros(C.shape, dtype=np.complex128)
    for n in range(maxiter):
        I = np.less(abs(Z), horizon)  # noqa: E741  (the suite's own code, unmodified)
        N[I] = n
        Z[I] = Z[I]**2 + C[I]
    N[N == maxiter-1] = 0
    return Z, N

def mandelbrot2(xmin, xmax, ymin, ymax, xn, yn, itermax, horizon=2.0):
    Xi, Yi = np.mgrid[0:xn, 0:yn]
    Xi, Yi = Xi.astype(np.uint32), Yi.astype(np.uint32)
    X = np.linspace(xmin, xmax, xn, dtype=np.float64)[Xi]
    Y = np.linspace(ymin, ymax, yn, dtype=np.float64)[Yi]
    C = X + Y * 1j
    N_ = np.zeros(C.shape, dtype=np.int64)
    Z_ = np.zeros(C.shape, dtype=np.complex128)
    Xi.shape = Yi.shape = C.shape = xn * yn
    Z = np.zeros(C.shape, np.complex128)
    for i in range(itermax):
        if not len(Z):
            break
        np.multiply(Z, Z, Z)
        np.add(Z, C, Z)
        rem = abs(Z) > horizon
        N_[Xi[rem], Yi[rem]] = i + 1
        Z_[Xi[rem], Yi[rem]] = Z[rem]
        rem = ~rem
        Z = Z[rem]
        Xi, Yi = Xi[rem], Yi[rem]
        C = C[rem]
    return Z_.T, N_.T

def crc16(data, poly=0x8408):
    crc = 0xFFFF
    for b in data:
        cur_byte = 0xFF & b
        for _ in range(0, 8):
            if (crc & 0x0001) ^ (cur_byte & 0x0001):
                crc = (crc >> 1) ^ poly
            else:
                crc >>= 1
            cur_byte >>= 1
    crc = (~crc & 0xFFFF)
    crc = (crc << 8) | ((crc >> 8) & 0xFF)
    return crc & 0xFFFF

def spmv(A_row, A_col, A_val, x):
    y = np.empty(A_row.size - 1, A_val.dtype)
    for i in range(A_row.size - 1):
        cols = A_col[A_row[i]:A_row[i + 1]]
        vals = A_val[A_row[i]:A_row[i + 1]]
        y[i] = vals @ x[cols]
    return y

def cfd_like(u, tol):
    residual = tol + 1.0
    it = 0
    while residual > tol and it < 200:
        un = u.copy()
        u[1:-1] = 0.5 * (un[2:] + un[:-2])
        residual = np.abs(u - un).max()
        it += 1
    return u, it

def dp_fill(a, b):
    n, m = len(a), len(b)
    table = np.ndarray((n + 1, m + 1), np.int64)
    table[0, :] = 0
    table[:, 0] = 0
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            if a[i - 1] == b[j - 1]:
                table[i, j] = table[i - 1, j - 1] + 1
            else:
                table[i, j] = max(table[i - 1, j], table[i, j - 1])
    return table[n, m]

def azimint(data, radius, npt):
    rmax = radius.max()
    res = np.zeros(npt, dtype=np.float64)
    for i in range(npt):
        r1 = rmax * i / npt
        r2 = rmax * (i + 1) / npt
        mask_r12 = np.logical_and((r1 <= radius), (radius < r2))
        values_r12 = data[mask_r12]
        res[i] = values_r12.mean()
    return res

def cpow(z, w):
    return np.power(z, w) + z ** 0.5



def _csr(rng, n):
    a = (rng.random((n, n)) < 0.3) * rng.random((n, n))
    rowptr = np.concatenate([[0], np.cumsum((a != 0).sum(1))]).astype(np.int64)
    return rowptr, np.nonzero(a)[1].astype(np.int64), a[a != 0], rng.random(n)


_RNG = np.random.default_rng(0)
CASES = [
    ("mandelbrot1", mandelbrot1, (-2.0, 0.5, -1.25, 1.25, 6, 5, 4), (4, 5, 6)),
    ("mandelbrot2", mandelbrot2, (-2.0, 0.5, -1.25, 1.25, 6, 5, 4), (4, 5, 6)),
    ("crc16", crc16, (_RNG.integers(0, 256, 3).astype(np.uint8),), ()),
    ("spmv", spmv, _csr(_RNG, 6), ()),
    ("cfd", cfd_like, (_RNG.random(16), 1e-2), ()),
    ("dp", dp_fill, (_RNG.integers(0, 3, 4), _RNG.integers(0, 3, 3)), ()),
    ("azimint", azimint, (_RNG.random(64), _RNG.random(64), 3), (2,)),
    ("cpow", cpow, (_RNG.standard_normal(5) + 1j * _RNG.standard_normal(5), 0.3 + 0.2j), ()),
]


def _copies(args):
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


@pytest.mark.parametrize("name, fn, args, static", CASES, ids=[c[0] for c in CASES])
def test_unmodified_kernels_with_graph_breaks_match_numpy(name, fn, args, static):
    want = fn(*_copies(args))
    jitted = tk.jit(fn, static_argnums=static)
    for _ in range(3):  # the first call compiles its segments, the second finds them (and
        # records its operations), the third replays them
        got = jitted(*_copies(args))
        for g, w in zip(got if isinstance(got, tuple) else (got,),
                        want if isinstance(want, tuple) else (want,)):
            g, w = np.asarray(g), np.asarray(w)
            assert g.shape == w.shape
            assert g.dtype == w.dtype or g.ndim == 0  # (a Python int result is a 0-d array)
            np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("name", ["mandelbrot1", "azimint"])
def test_selections_written_back_or_averaged_need_no_break(name):
    """Z[I] = Z[I]**2 + C[I] and data[mask].mean(): no length is needed, so no graph break
    (frontend/masked.py); the kernels that need one (mandelbrot2 shrinks its arrays) keep it."""
    _, fn, args, static = next(c for c in CASES if c[0] == name)
    jitted = tk.jit(fn, static_argnums=static)
    for _ in range(2):
        jitted(*_copies(args))
    assert jitted.graph_breaks.break_count == 0, jitted.graph_breaks
