"""``x[mask]`` with a traced mask stays dense until its length is needed (frontend/masked.py):
elementwise expressions of selections by one mask, written back by that mask, and their sums
and means compile as one program with no graph break; anything else materializes the selection
as before. Every test compares with NumPy: values, dtypes, signs of zero."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import toolkit as tk

from helpers import assert_same_bits

BACKENDS = ["interpreter", "cpu", "gpu-simulated"]


_same = assert_same_bits


def mandelbrot(c, maxiter):  # npbench's mandelbrot1, on a grid passed in
    n = np.zeros(c.shape, dtype=np.int64)
    z = np.zeros(c.shape, dtype=np.complex128)
    for it in range(maxiter):
        inside = np.less(abs(z), 2.0)
        n[inside] = it
        z[inside] = z[inside] ** 2 + c[inside]
    n[n == maxiter - 1] = 0
    return z, n


def inverse_cubes(d):  # an N-body step's r[r > 0] = r[r > 0] ** -1.5
    r = d * d + 0.0
    r[r > 0] = r[r > 0] ** (-1.5)
    return r


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_mandelbrot_iteration_is_one_program_with_numpys_bits(backend):
    x, y = np.linspace(-2.0, 0.5, 13), np.linspace(-1.25, 1.25, 11)
    c = x + y[:, None] * 1j
    f = tk.jit(mandelbrot, static_argnums=1, backend=backend)
    (z, n), (wz, wn) = f(c, 12), mandelbrot(c, 12)
    _same(wn, n)
    finite = np.isfinite(wz)
    _same(wz[finite].real, np.asarray(z)[finite].real)
    _same(wz[finite].imag, np.asarray(z)[finite].imag)
    assert f.graph_breaks.break_count == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_equal_masks_update_in_place_without_a_break(backend):
    d = np.array([[0.0, 1.5, -2.0], [0.5, 0.0, -0.0]])
    f = tk.jit(inverse_cubes, backend=backend)
    _same(inverse_cubes(d), f(d))
    assert f.graph_breaks.break_count == 0


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32, np.int64, np.bool_])
@pytest.mark.parametrize("values", [[1, -2, 3, 0], [-1, -2, -3, -4], [0, 0, 0, 0]])
def test_sums_and_means_of_a_selection_are_numpys(dtype, values):
    x = np.array(values).astype(dtype)

    def stats(v):
        m = v > 0
        return v[m].sum(), v[m].mean(), np.sum(v[~m]), np.mean(v[~m])

    f = tk.jit(stats, backend="interpreter")
    with np.errstate(all="ignore"):
        want = stats(x)
    got = f(x)
    for w, g in zip(want, got):
        w, g = np.asarray(w), np.asarray(g)
        assert w.dtype == g.dtype, (w.dtype, g.dtype)
        np.testing.assert_allclose(g, w, rtol=1e-6)
        if w.dtype.kind == "f":
            assert np.signbit(w) == np.signbit(g)
    assert f.graph_breaks.break_count == 0


def test_a_sum_of_negative_zeros_keeps_its_sign_and_an_empty_one_is_positive():
    x = np.array([-0.0, -0.0, 1.0])

    def sums(v):
        return v[v < 1].sum(), v[v > 5].sum()

    got = tk.jit(sums, backend="interpreter")(x)
    for w, g in zip(sums(x), got):
        assert np.signbit(w) == np.signbit(g) and w == g


def test_what_needs_the_length_materializes_the_selection():
    x = np.array([3.0, -1.0, 2.0, 5.0])

    def uses(v):
        s = v[v > 0]
        return s.shape[0], np.sort(s), s, s[1], s * np.arange(3.0)

    got = tk.jit(uses, backend="interpreter")(x)
    for w, g in zip(uses(x), got):
        _same(w, g)


def test_the_selection_holds_the_values_it_was_taken_from():
    def later(v):
        s = v[v > 0]
        v[...] = 7.0  # written after the selection
        return s + 1.0, s.sum(), v

    x = np.array([1.0, -1.0, 2.0])
    got = tk.jit(later, backend="interpreter")(x.copy())
    for w, g in zip(later(x.copy()), got):
        _same(w, g)


def test_selections_by_different_masks_follow_numpy():
    def other(v):
        return v[v > 0] + v[v < 10]  # lengths 2 and 3: NumPy's broadcasting error

    with pytest.raises(ValueError):
        other(np.array([1.0, -1.0, 2.0]))
    with pytest.raises(ValueError):
        tk.jit(other, backend="interpreter")(np.array([1.0, -1.0, 2.0]))

    def same_length(v):
        return v[v > 0] * v[v > -5]

    x = np.array([1.0, 2.0, 3.0])
    _same(same_length(x), tk.jit(same_length, backend="interpreter")(x))


def test_writes_into_a_selection_are_numpys_and_every_name_for_it_sees_them():
    def writes(v):
        s = v[v > 0]
        t = s
        s += 1.0  # in place: t is the same array
        u = v[v > 0]
        np.multiply(u, u, u)  # out= the selection itself
        w = v[v > 0]
        w[0] = -9.0  # into the selection (a copy of v's elements)
        return t, s, u, w, v

    x = np.array([1.5, -1.0, 2.0, 4.0])
    got = tk.jit(writes, backend="interpreter")(x.copy())
    for w, g in zip(writes(x.copy()), got):
        _same(w, g)


def test_a_selection_that_shrinks_an_array_each_step_follows_numpy():
    def shrink(z, c):
        for _ in range(3):
            np.multiply(z, z, z)
            np.add(z, c, z)
            keep = abs(z) < 2.0
            z, c = z[keep], c[keep]
        return z, c

    z0 = np.zeros(6, np.complex128)
    c0 = np.array([0.1, 1.5, -0.5, 2.5, 0.3j, -1.9], np.complex128)
    got = tk.jit(shrink, backend="interpreter")(z0.copy(), c0)
    for w, g in zip(shrink(z0.copy(), c0), got):
        np.testing.assert_array_equal(np.asarray(g), w)


def test_complex_sums_keep_negative_zero_parts():
    x = np.array([complex(-0.0, -0.0), complex(2.0, 1.0)])

    def first(v):
        return v[v.real < 1].sum()

    got, want = tk.jit(first, backend="interpreter")(x), first(x)
    assert got == want
    assert np.signbit(np.asarray(got).real) == np.signbit(want.real)
    assert np.signbit(np.asarray(got).imag) == np.signbit(want.imag)


_EXPRESSIONS = [
    lambda s, t: s * 2.0 + t,
    lambda s, t: s ** 2 - t,
    lambda s, t: np.sqrt(abs(s)) / (t + 3.0),
    lambda s, t: -s,
    lambda s, t: np.maximum(s, t) * 0.5,
    lambda s, t: np.where(s > t, s, t),  # (another NumPy function: materialized)
]


@settings(max_examples=40, deadline=None)
@given(values=st.lists(st.sampled_from([-2.0, -0.0, 0.0, 0.5, 3.0, np.inf, -np.inf, np.nan]),
                       min_size=1, max_size=7),
       threshold=st.sampled_from([-1.0, 0.0, 1.0, 10.0]),
       which=st.integers(0, len(_EXPRESSIONS) - 1), reduce=st.booleans())
def test_random_selections_written_back_match_numpy(values, threshold, which, reduce):
    x = np.array(values)
    expression = _EXPRESSIONS[which]

    def update(v, w):
        m = v > threshold
        v[m] = expression(v[m], w[m])
        return (v, w[m].sum(), w[m].mean()) if reduce else (v,)

    with np.errstate(all="ignore"):
        want = update(x.copy(), x[::-1].copy())
        got = tk.jit(update, backend="interpreter")(x.copy(), x[::-1].copy())
    for w, g in zip(want, got):
        w, g = np.asarray(w), np.asarray(g)
        assert w.dtype == g.dtype
        np.testing.assert_array_equal(g, w)
        assert np.array_equal(np.signbit(w), np.signbit(g)) or np.isnan(w).any()


def test_the_report_says_which_selections_needed_their_length():
    x, y = np.linspace(-2.0, 0.5, 5), np.linspace(-1.25, 1.25, 4)
    text = str(tk.explain(mandelbrot, x + y[:, None] * 1j, 3))
    assert "kept dense until its length is needed" in text
    assert "6 selection(s), 6 without a break" in text  # z[inside] and c[inside], 3 steps

    def sorted_positive(v):
        s = v[v > 0]
        return np.sort(s)

    text = str(tk.explain(sorted_positive, np.array([2.0, -1.0, 1.0])))
    assert "1 selection(s), 0 without a break; the length was needed at" in text


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32, np.uint8, np.int64, np.bool_])
def test_the_largest_and_smallest_of_a_selection_are_numpys_without_a_break(backend, dtype):
    picked = np.array([True, False, True, True, False, True])
    x = (np.array([3, 9, -1, 0, -7, 5]) if dtype != np.uint8 else
         np.array([3, 9, 1, 0, 250, 5])).astype(dtype)

    def extremes(v, m):
        return v[m].max(), v[m].min(), np.max(v[~m]), np.amin(v[~m])

    f = tk.jit(extremes, backend=backend)
    for got, want in zip(f(x, picked), extremes(x, picked)):
        _same(want, tk.device_get(got))
    assert f.graph_breaks.break_count == 0


def test_a_nan_selected_wins_a_nan_left_out_does_not():
    x = np.array([2.0, np.nan, -np.inf, 7.0, np.nan])

    def extremes(v, m):
        return v[m].max(), v[m].min()

    f = tk.jit(extremes, backend="cpu")
    for mask in ([True, True, True, False, False], [True, False, True, True, False],
                 [False, False, True, False, False]):
        m = np.array(mask)
        for got, want in zip(f(x, m), extremes(x, m)):
            _same(want, got)


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_the_largest_of_an_empty_selection_raises_numpys_error(backend):
    def largest(v):
        return v[v > 100].max()

    f = tk.jit(largest, backend=backend)
    assert f(np.array([1.0, 200.0])) == 200.0
    with pytest.raises(ValueError, match="zero-size array to reduction operation maximum"):
        largest(np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="zero-size array to reduction operation maximum "
                                         "which has no identity"):
        f(np.array([1.0, 2.0]))
