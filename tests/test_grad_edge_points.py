"""Derivatives at the points where a formula's pieces meet (found by a differential hunt
against JAX): functions computed as sign(x) f(|x|) at zero, the branch not taken by a select
(its zero cotangent must stay zero: 0 * inf is NaN), logaddexp's tie, remainder's zero, step
functions, and det of a singular matrix (through the adjugate). Expected values are the
calculus' own, written out."""
import math

import numpy as np
import pytest

import toolkit as tk


def _grad(f, x):
    return np.asarray(tk.grad(f)(np.asarray(x, np.float64)))


@pytest.mark.parametrize("x, expected", [
    (0.0, 1.0), (-0.0, 1.0), (1.5, math.cosh(1.5)), (-30.0, math.cosh(30.0)), (800.0, np.inf),
])
def test_sinh_differentiates_to_cosh_everywhere(x, expected):
    np.testing.assert_allclose(_grad(np.sinh, x), expected, rtol=1e-14)


@pytest.mark.parametrize("x", [0.0, -0.0, 0.3, -7.0, 1e9, -1e200, 1e300])
def test_arcsinh_differentiates_to_its_formula_everywhere(x):
    np.testing.assert_allclose(_grad(np.arcsinh, x), 1.0 / math.hypot(1.0, x), rtol=1e-14)


@pytest.mark.parametrize("x", [0.0, 3.0, -9.0, 20.0])
def test_i0_has_a_finite_derivative_on_both_pieces(x):
    h = 1e-6 * max(1.0, abs(x))
    central = (np.i0(x + h) - np.i0(x - h)) / (2 * h)
    np.testing.assert_allclose(_grad(np.i0, x), central, rtol=1e-6, atol=1e-9)


def test_logaddexp_splits_a_tie_between_its_operands():
    np.testing.assert_allclose(_grad(lambda a: np.logaddexp(a, 0.0), 0.0), 0.5)  # softplus'(0)
    da, db = tk.grad(np.logaddexp, argnums=(0, 1))(1.0, 1.0)
    assert (float(da), float(db)) == (0.5, 0.5)
    da, db = tk.grad(np.logaddexp2, argnums=(0, 1))(-3.0, -3.0)
    assert (float(da), float(db)) == (0.5, 0.5)
    np.testing.assert_allclose(_grad(lambda a: np.logaddexp(a, 0.0), 2.0), 1 / (1 + math.exp(-2)))


@pytest.mark.parametrize("divisor", [2.0, -2.0])
def test_remainder_differentiates_to_one_where_it_is_zero(divisor):
    x = np.array([0.0, 4.0, 1.0, -4.0, -3.0])
    np.testing.assert_array_equal(_grad(lambda a: np.sum(np.remainder(a, divisor)), x),
                                  np.ones(5))
    np.testing.assert_array_equal(_grad(lambda a: np.sum(a % divisor), x), np.ones(5))
    # and the values keep NumPy's signed zeros
    got = tk.jit(lambda a: np.remainder(a, divisor))(x)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(np.remainder(x, divisor)))


def test_step_functions_have_a_zero_derivative():
    x = np.array([1.0, 2.0, -0.0, -3.5])
    np.testing.assert_array_equal(_grad(lambda a: np.sum(np.spacing(a)), x), np.zeros(4))


@pytest.mark.parametrize("a, adjugate", [
    ([[1.0, 2.0], [2.0, 4.0]], [[4.0, -2.0], [-2.0, 1.0]]),  # singular
    ([[2.0, 1.0], [1.0, 3.0]], [[3.0, -1.0], [-1.0, 2.0]]),
    (np.zeros((3, 3)), np.zeros((3, 3))),
    (np.diag([2.0, 3.0, 0.0]), np.diag([0.0, 0.0, 6.0])),
    ([[0.0, 1.0], [1.0, 0.0]], [[0.0, -1.0], [-1.0, 0.0]]),
])
def test_det_differentiates_through_the_adjugate(a, adjugate):
    a, adjugate = np.asarray(a), np.asarray(adjugate)
    np.testing.assert_allclose(_grad(np.linalg.det, a), adjugate.T, atol=1e-13)
    t = np.arange(a.size, dtype=np.float64).reshape(a.shape)
    _, tangent = tk.jvp(np.linalg.det, (a,), (t,))
    np.testing.assert_allclose(tangent, np.sum(adjugate.T * t), atol=1e-12)
    batch = np.stack([a, 2 * a])
    np.testing.assert_allclose(_grad(lambda m: np.sum(np.linalg.det(m)), batch),
                               np.stack([adjugate.T, 2 ** (a.shape[0] - 1) * adjugate.T]),
                               atol=1e-12)


def test_a_list_of_traced_scalars_is_assigned_and_differentiated():
    def f(a):
        b = a.copy()
        b[0:2] = [a[3], a[2]]
        return np.sum(b ** 2)

    x = np.array([1.0, 2.0, 3.0, 4.0])
    np.testing.assert_array_equal(_grad(f, x), [0.0, 0.0, 12.0, 16.0])
    jitted = tk.jit(f)
    assert jitted(x) == f(x) and jitted.graph_breaks.break_count == 0


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_sinc_at_zero_is_one_in_every_float_type(dtype):
    x = np.array([0.0, -0.0, 0.5, 3.0], dtype)
    got = tk.jit(np.sinc)(x)
    assert got.dtype == np.sinc(x).dtype
    np.testing.assert_allclose(got, np.sinc(x), rtol=1e-6 if dtype != np.float16 else 1e-3)
    assert got[0] == got[1] == 1.0
