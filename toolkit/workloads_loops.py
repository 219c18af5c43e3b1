"""Benchmark programs written the way people write NumPy: Python loops over rows and columns,
writes into work arrays, triangular bounds (the kernels of public NumPy benchmark suites).
Each is written once against ``xp``; JAX's version is what JAX users write, ``.at[]`` updates
(and ``fori_loop`` where the loop body has one shape)."""
from __future__ import annotations

import numpy as np


def _jax(xp) -> bool:
    return xp.__name__.startswith("jax")


def covariance_by_columns(xp):
    """The covariance matrix filled column by column: each column of the upper triangle is
    one matrix-vector product, mirrored into the row."""
    def covariance_by_columns(data):
        n, m = data.shape
        d = data - data.mean(axis=0)
        cov = xp.zeros_like(d, shape=(m, m))  # made from a traced array: traced too
        for i in range(m):
            column = d[:, i] @ d[:, i:] / (n - 1)
            if _jax(xp):
                cov = cov.at[i:, i].set(column).at[i, i:].set(column)
            else:
                cov[i:, i] = cov[i, i:] = column
        return cov
    return covariance_by_columns


def triangular_solve(xp):
    """Forward substitution, L x = b, one unknown at a time."""
    def triangular_solve(lower, b):
        n = b.shape[0]
        x = xp.zeros_like(b)
        for i in range(n):
            value = (b[i] - lower[i, :i] @ x[:i]) / lower[i, i]
            if _jax(xp):
                x = x.at[i].set(value)
            else:
                x[i] = value
        return x
    return triangular_solve


def lu_no_pivoting(xp):
    """Doolittle's LU decomposition without pivoting, in place, element by element."""
    def lu_no_pivoting(a):
        a = a.copy()
        n = a.shape[0]
        for i in range(n):
            for j in range(i):
                value = (a[i, j] - a[i, :j] @ a[:j, j]) / a[j, j]
                if _jax(xp):
                    a = a.at[i, j].set(value)
                else:
                    a[i, j] = value
            for j in range(i, n):
                value = a[i, j] - a[i, :i] @ a[:i, j]
                if _jax(xp):
                    a = a.at[i, j].set(value)
                else:
                    a[i, j] = value
        return a
    return lu_no_pivoting


def syrk_by_rows(xp):
    """A symmetric rank-k update of the lower triangle, row by row: C = alpha A Aᵀ + beta C."""
    def syrk_by_rows(c, a, alpha, beta):
        c = c.copy()
        for i in range(c.shape[0]):
            row = alpha * (a[i] @ a[: i + 1].T) + beta * c[i, : i + 1]
            if _jax(xp):
                c = c.at[i, : i + 1].set(row)
            else:
                c[i, : i + 1] = row
        return c
    return syrk_by_rows


def stacked_matmul(xp):
    """A stack of row vectors times one shared matrix, written as a 4-D matmul."""
    def stacked_matmul(a, c):
        r, q, p = a.shape
        return (a.reshape(r, q, 1, p) @ c).reshape(r, q, p)
    return stacked_matmul


def _lower(r, n):
    return (np.tril(r.random((n, n))) + n * np.eye(n), r.random(n))


def loop_rows():
    """(name, make, make_args, flops, batch_args) of each program, at the sizes the benchmark
    runs (``batch_args``: the arguments scaled() cuts along their first axis)."""
    n = 40
    return (
        ("covariance by columns 500x80 f64", covariance_by_columns,
         lambda r: (r.standard_normal((500, 80)),), 2.0 * 500 * 80 * 80 / 2, (0,)),
        ("triangular solve 200 f64", triangular_solve,
         lambda r: _lower(r, 200), 200.0 * 200, (0, 1)),
        # (at these sizes the row slices of a large matrix are what the kernels read: npbench's
        # sizes, where grouping them by rows made 0.1x and 0.4x NumPy)
        ("covariance by columns 600x500 f64", covariance_by_columns,
         lambda r: (r.standard_normal((600, 500)),), 2.0 * 600 * 500 * 500 / 2, (0,)),
        ("triangular solve 1000 f64", triangular_solve,
         lambda r: _lower(r, 1000), 1000.0 * 1000, (0, 1)),
        (f"lu no pivoting {n}x{n} f64", lu_no_pivoting,
         lambda r: (r.random((n, n)) + n * np.eye(n),),
         2.0 * n ** 3 / 3, (0,)),
        ("syrk by rows 120x80 f64", syrk_by_rows,
         lambda r: (r.random((120, 120)), r.random((120, 80)), 1.5, 1.2), 120.0 * 121 * 80,
         (0,)),
        ("stacked vector matmul 64x64x256 f32", stacked_matmul,
         lambda r: (r.standard_normal((64, 64, 256), dtype=np.float32),
                    r.standard_normal((256, 256), dtype=np.float32)), 2.0 * 64 * 64 * 256 * 256,
         (0,)),
    )
