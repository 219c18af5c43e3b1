"""np.interp as NumPy's own routine (a ``custom-call``): its values bit for bit where a traced
formula differed (an infinite sample gave NaN instead of NumPy's infinity), complex samples,
left/right, period, its errors; derivatives from its traced form (searching.traced_interp),
checked against finite differences away from the samples."""
import numpy as np
import pytest

import toolkit as tk
from toolkit.frontend.errors import UserValueError

BACKENDS = ["interpreter", "cpu"]
XP = np.array([0.0, 1.0, 1.0, 2.5, 4.0])  # a repeated sample


def _same(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got.real), np.signbit(want.real))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fp", [
    np.array([1.0, 3.0, 5.0, -2.0, 0.5]),
    np.array([np.inf, 1.0, 2.0, -np.inf, 3.0]),  # infinite samples: NumPy's own rules
    np.array([1 + 1j, 2 - 1j, 0j, 3j, -1.0]),
    np.array([1, 2, 3, 4, 5], np.int32),
    np.array([-0.0, 0.0, -0.0, 1.0, -0.0], np.float32),
])
def test_interp_is_numpys(backend, fp):
    x = np.array([-1.0, 0.0, 0.25, 1.0, 1.75, 2.5, 3.9, 4.0, 7.0, np.nan, -0.0])
    f = tk.jit(np.interp, backend=backend)
    _same(f(x, XP, fp), np.interp(x, XP, fp))
    g = tk.jit(lambda v, s: np.interp(v, XP, s, left=-7.0, right=9.0), backend=backend)
    _same(g(x, fp), np.interp(x, XP, fp, left=-7.0, right=9.0))
    h = tk.jit(lambda v, s: np.interp(v, XP, s, period=3.0), backend=backend)
    _same(h(x, fp), np.interp(x, XP, fp, period=3.0))


def test_infinite_samples_were_nan():
    """The traced formula toolkit used gave NaN here; NumPy gives infinity."""
    xp, fp = np.array([0.0, 1.0, 2.0]), np.array([np.inf, 1.0, -np.inf])
    assert np.interp(0.25, xp, fp) == np.inf
    _same(tk.jit(np.interp)(np.array([0.25, 1.5]), xp, fp), np.interp([0.25, 1.5], xp, fp))


def test_scalar_and_float32_points():
    _same(tk.jit(lambda v: np.interp(v, XP, XP * 2))(np.float32(1.3)),
          np.interp(np.float32(1.3), XP, XP * 2))
    _same(tk.jit(lambda v: np.interp(2.2, XP, v))(np.arange(5.0)),
          np.interp(2.2, XP, np.arange(5.0)))


def test_interp_errors_are_numpys():
    x = np.arange(3.0)
    cases = [
        (lambda v: np.interp(v, XP, np.arange(4.0)), "fp and xp are not of the same length"),
        (lambda v: np.interp(v, np.zeros(0), np.zeros(0)), "array of sample points is empty"),
        (lambda v: np.interp(v, XP, XP, period=0), "period must be a non-zero value"),
        (lambda v: np.interp(v, np.ones((2, 2)), np.ones((2, 2))), "object too deep"),
    ]
    for fn, message in cases:
        with pytest.raises(ValueError, match=message):
            fn(x)  # NumPy's own error
        with pytest.raises(UserValueError, match=message):
            tk.jit(fn)(x)


def test_interp_derivatives():
    xp = np.array([0.0, 1.0, 2.0, 3.5])
    fp = np.array([1.0, 3.0, 2.0, -1.0])
    x = np.array([-0.3, 0.2, 0.7, 1.3, 1.9, 3.2, 4.0, 0.99])
    weights = np.arange(1.0, 9.0)

    def f(x, xp, fp):
        return (np.interp(x, xp, fp, left=-2.0) * weights).sum()

    grads = tk.grad(f, argnums=(0, 1, 2))(x, xp, fp)
    eps = 1e-6
    for k, arg in enumerate((x, xp, fp)):
        numeric = np.zeros_like(arg)
        for i in range(arg.size):
            up = [x.copy(), xp.copy(), fp.copy()]
            down = [x.copy(), xp.copy(), fp.copy()]
            up[k][i] += eps
            down[k][i] -= eps
            numeric[i] = (f(*up) - f(*down)) / (2 * eps)
        np.testing.assert_allclose(grads[k], numeric, atol=1e-6)
    _, tangent = tk.jvp(lambda s: np.interp(x, xp, s), (fp,), (np.ones(4),))
    # (outside the samples the value is fp[0] or fp[-1], NumPy's default left and right)
    np.testing.assert_allclose(tangent, np.ones(x.size), atol=1e-15)
    with pytest.raises(Exception, match="period"):
        tk.grad(lambda v: np.interp(v, xp, fp, period=2.0).sum())(x)


def test_batched_interp_is_numpys():
    fps = np.random.default_rng(0).standard_normal((3, 5))
    x = np.linspace(-0.5, 4.5, 9)
    got = tk.vmap(lambda s: np.interp(x, XP, s))(fps)
    _same(got, np.stack([np.interp(x, XP, s) for s in fps]))


def test_interp_on_the_gpu_runs_numpys_routine_on_the_host():
    x = np.linspace(-1, 5, 50)
    fp = np.array([np.inf, 1.0, 2.0, -3.0, 3.0])
    got = tk.jit(np.interp, backend="gpu-simulated")(x, XP, fp)
    _same(np.asarray(got), np.interp(x, XP, fp))


def test_interp_messages_with_a_period_and_of_scalar_samples_are_numpys():
    x = np.arange(3.0)
    cases = [
        (lambda v: np.interp(v, np.ones((2, 2)), np.ones((2, 2)), period=1),
         "Data points must be 1-D sequences"),
        (lambda v: np.interp(v, np.ones(3), np.ones(2), period=1),
         "fp and xp are not of the same length$"),
        (lambda v: np.interp(v, np.array(1.0), np.array(1.0)),
         "object of too small depth for desired array"),
    ]
    for fn, message in cases:
        with pytest.raises(ValueError, match=message):
            fn(x)
        with pytest.raises(UserValueError, match=message):
            tk.jit(fn)(x)
    fn = lambda v: np.interp(v, np.arange(3.0), np.arange(3.0), period=3j)  # noqa: E731
    _same(tk.jit(fn)(x), fn(x))  # NumPy's: a complex period is its magnitude
