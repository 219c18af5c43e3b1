"""grad, value_and_grad, jvp and vjp: every derivative is checked against central finite
differences of NumPy itself, forward mode against reverse mode (<J t, c> = <t, J^T c>), and
against JAX where it is installed."""
import numpy as np
import pytest

import toolkit as tk
import toolkit.numpy as tnp
from toolkit.frontend.ad_engine import NotDifferentiableError
from toolkit.frontend.errors import UserTypeError

RNG = np.random.default_rng(7)


def numeric_grad(f, x, eps=1e-6):
    x = np.array(x, dtype=np.float64)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        g[i] = (f(up) - f(down)) / (2 * eps)
    return g


def check(f, x, rtol=1e-5, atol=1e-6):
    """tk.grad(f) at x equals NumPy's finite differences of f; jvp and vjp agree."""
    got = tk.grad(f)(x)
    want = numeric_grad(f, x)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    t = RNG.standard_normal(np.shape(x))
    _, tangent = tk.jvp(f, (x,), (t,))
    np.testing.assert_allclose(tangent, np.sum(want * t), rtol=rtol * 10, atol=atol * 10)
    return got


POSITIVE = np.array([0.3, 0.7, 1.2, 2.5, 0.9, 1.7])
SIGNED = np.array([-1.3, 0.4, 2.2, -0.6, 0.8, -2.1])

ELEMENTWISE = {
    "sin": (lambda x: np.sum(np.sin(x)), SIGNED),
    "cos": (lambda x: np.sum(np.cos(x) * x), SIGNED),
    "tan": (lambda x: np.sum(np.tan(x)), SIGNED * 0.5),
    "exp": (lambda x: np.sum(np.exp(x)), SIGNED),
    "expm1": (lambda x: np.sum(np.expm1(x)), SIGNED),
    "log": (lambda x: np.sum(np.log(x)), POSITIVE),
    "log1p": (lambda x: np.sum(np.log1p(x)), POSITIVE),
    "log2": (lambda x: np.sum(np.log2(x)), POSITIVE),
    "log10": (lambda x: np.sum(np.log10(x)), POSITIVE),
    "sqrt": (lambda x: np.sum(np.sqrt(x)), POSITIVE),
    "cbrt": (lambda x: np.sum(np.cbrt(x)), SIGNED),
    "tanh": (lambda x: np.sum(np.tanh(x)), SIGNED),
    "sinh": (lambda x: np.sum(np.sinh(x)), SIGNED),
    "cosh": (lambda x: np.sum(np.cosh(x)), SIGNED),
    "arctan": (lambda x: np.sum(np.arctan(x)), SIGNED),
    "arcsin": (lambda x: np.sum(np.arcsin(x)), SIGNED * 0.4),
    "arccos": (lambda x: np.sum(np.arccos(x)), SIGNED * 0.4),
    "arcsinh": (lambda x: np.sum(np.arcsinh(x)), SIGNED),
    "arctan2": (lambda x: np.sum(np.arctan2(x, x[::-1] + 3)), SIGNED),
    "abs": (lambda x: np.sum(np.abs(x) * x), SIGNED),
    "square": (lambda x: np.sum(np.square(x)), SIGNED),
    "reciprocal": (lambda x: np.sum(np.reciprocal(x)), POSITIVE),
    "power_float": (lambda x: np.sum(x ** 2.5), POSITIVE),
    "power_int": (lambda x: np.sum(x ** 3), SIGNED),
    "power_base": (lambda x: np.sum(np.power(1.7, x)), SIGNED),
    "divide": (lambda x: np.sum(x / (x[::-1] + 4)), SIGNED),
    "subtract": (lambda x: np.sum((x - x[::-1] * 2) ** 2), SIGNED),
    "maximum": (lambda x: np.sum(np.maximum(x, 0.5) * x), SIGNED),
    "minimum": (lambda x: np.sum(np.minimum(x, x[::-1])), SIGNED),
    "fmod": (lambda x: np.sum(np.fmod(x * 3 + 0.05, 1.1)), SIGNED),
    "mod": (lambda x: np.sum(np.mod(x * 3 + 0.05, 1.1)), SIGNED),
    "hypot": (lambda x: np.sum(np.hypot(x, 2.0)), SIGNED),
    "logaddexp": (lambda x: np.sum(np.logaddexp(x, x[::-1])), SIGNED),
    "sigmoid": (lambda x: np.sum(1 / (1 + np.exp(-x))), SIGNED),
    "where": (lambda x: np.sum(np.where(x > 0, x ** 2, -x)), SIGNED),
    "clip": (lambda x: np.sum(np.clip(x, -1.0, 1.0) * x), SIGNED),
    "floor_zero": (lambda x: np.sum(np.floor(x) + x), SIGNED),
    "sign": (lambda x: np.sum(np.sign(x) * x), SIGNED),
}


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_elementwise_gradients_match_finite_differences(name):
    f, x = ELEMENTWISE[name]
    check(f, x)


A = RNG.standard_normal((3, 4))
STRUCTURAL = {
    "broadcast_sum": (lambda x: np.sum(x[:, None, :] * np.ones((3, 2, 4))), A),
    "reshape_T": (lambda x: np.sum(x.reshape(4, 3).T * np.arange(12.0).reshape(3, 4)), A),
    "strided_slice": (lambda x: np.sum(x[::2, 1::2] ** 2), A),
    "reverse": (lambda x: np.sum(x[::-1, ::-1] * np.arange(12.0).reshape(3, 4)), A),
    "concatenate": (lambda x: np.sum(np.concatenate([x, 2 * x[:1]], axis=0) ** 2), A),
    "pad": (lambda x: np.sum(np.pad(x, ((1, 2), (0, 1))) * np.arange(30.0).reshape(6, 5)), A),
    "stack": (lambda x: np.sum(np.stack([x, x * x]) * 1.5), A),
    "sum_axis": (lambda x: np.sum(np.sum(x, axis=0) ** 2), A),
    "mean_var": (lambda x: np.var(x, axis=1).sum() + np.mean(x) ** 2, A),
    "std": (lambda x: np.std(x), A),
    "max": (lambda x: np.max(x * x, axis=1).sum(), A),
    "min": (lambda x: np.min(x), A),
    "prod": (lambda x: np.prod(x[0]), A),
    "prod_axis": (lambda x: np.sum(np.prod(x, axis=0)), A),
    "matmul": (lambda x: np.sum((x @ x.T) ** 2), A),
    "matvec": (lambda x: np.sum(x @ np.arange(4.0)), A),
    "batched": (lambda x: np.sum(np.matmul(x.reshape(3, 2, 2), x.reshape(3, 2, 2)) ** 2), A),
    "einsum": (lambda x: np.einsum("ij,kj->", x, x * x), A),
    "outer": (lambda x: np.sum(np.outer(x[0], x[1]) ** 2), A),
    "fancy_index": (lambda x: np.sum(x[[0, 2, 2], :] ** 2), A),
    "take": (lambda x: np.sum(np.take(x, [3, 0, 3], axis=1) * 2), A),
    "boolean_mask_where": (lambda x: np.sum(np.where(x > 0, x, 0.0) ** 2), A),
    "sort": (lambda x: np.sum(np.sort(x, axis=1) * np.arange(4.0)), A),
    "cumsum": (lambda x: np.sum(np.cumsum(x, axis=1) ** 2), A),
    "cumprod": (lambda x: np.sum(np.cumprod(x, axis=1)), A),
    "softmax": (
        lambda x: np.sum(np.exp(x) / np.exp(x).sum(axis=1, keepdims=True) * np.arange(4.0)),
        A,
    ),
    "logsumexp": (lambda x: np.log(np.sum(np.exp(x - x.max()))) + x.max(), A),
    "norm": (lambda x: np.linalg.norm(x), A),
    "diff": (lambda x: np.sum(np.diff(x, axis=1) ** 2), A),
    "tile": (lambda x: np.sum(np.tile(x, (2, 1)) ** 3), A),
    "roll": (lambda x: np.sum(np.roll(x, 1, axis=1) * np.arange(12.0).reshape(3, 4)), A),
    "trace": (lambda x: np.trace(x[:, :3] @ x[:, :3].T), A),
    "median": (lambda x: np.median(x, axis=1).sum(), A),
}


@pytest.mark.parametrize("name", sorted(STRUCTURAL))
def test_structural_gradients_match_finite_differences(name):
    f, x = STRUCTURAL[name]
    check(f, x)


def test_dtype_conversions_carry_the_gradient_in_each_dtype():
    g = tk.grad(lambda x: np.sum(x.astype(np.float32) ** 2).astype(np.float64))(SIGNED)
    assert g.dtype == np.float64
    np.testing.assert_allclose(g, 2 * SIGNED.astype(np.float32), rtol=1e-7)
    g32 = tk.grad(lambda x: np.sum(x.astype(np.float64) * 3))(SIGNED.astype(np.float32))
    assert g32.dtype == np.float32 and np.all(g32 == 3)


def test_in_place_writes_inside_the_function_are_differentiated():
    def f(x):
        y = tnp.zeros(5)
        y[1:4] = x[:3] * 2
        y[0] += x[3]
        np.add.at(y, [4, 4, 2], x[:3])
        return np.sum(y ** 2)

    check(f, SIGNED[:4])


def test_scatter_assignment_with_duplicate_indices_gives_the_winner_the_gradient():
    idx = np.array([1, 1, 3])

    def f(x):
        y = tnp.zeros(5)
        y[idx] = x[:3] * np.array([1.0, 2.0, 3.0])
        return np.sum(y * np.arange(1.0, 6.0))

    check(f, SIGNED[:3])


def test_traced_index_reads_and_writes():
    @tk.jit
    def loss(x, i):
        row = x[i]  # dynamic-slice with a traced index
        x2 = x.copy()
        x2[i + 1] = row * 3  # dynamic-update-slice
        return np.sum(x2 ** 2) + np.sum(row)

    x = RNG.standard_normal((4, 3))
    for i in (0, 2):
        got = tk.grad(loss)(x, np.int64(i))
        want = numeric_grad(lambda v: loss(v, np.int64(i)), x)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_ties_in_maximum_and_max_split_the_gradient_as_jax_does():
    x = np.array([1.0, 1.0, 0.5])
    np.testing.assert_array_equal(tk.grad(lambda v: np.max(v))(x), [0.5, 0.5, 0.0])
    np.testing.assert_array_equal(tk.grad(lambda v: np.sum(np.maximum(v, 1.0)))(x), [0.5, 0.5, 0.0])
    np.testing.assert_array_equal(
        tk.grad(lambda v: np.sum(np.abs(v)))(np.array([0.0, -2.0])), [0.0, -1.0]
    )


def test_product_with_zeros_has_the_exact_gradient():
    for x in ([2.0, 0.0, 3.0], [0.0, 0.0, 4.0], [1.5, 2.0, -1.0]):
        x = np.array(x)
        want = [np.prod(np.delete(x, i)) for i in range(3)]
        np.testing.assert_allclose(tk.grad(np.prod)(x), want)


def test_pytrees_argnums_has_aux_and_float32():
    params = {"w": RNG.standard_normal((3, 2)).astype(np.float32), "b": np.zeros(2, np.float32)}
    x = RNG.standard_normal((5, 3)).astype(np.float32)
    y = RNG.standard_normal((5, 2)).astype(np.float32)

    def loss(p, x, y):
        pred = np.tanh(x @ p["w"] + p["b"])
        err = np.mean((pred - y) ** 2)
        return err, {"pred": pred}

    (value, aux), grads = tk.value_and_grad(loss, has_aux=True)(params, x, y)
    assert (
        set(grads) == {"w", "b"} and grads["w"].dtype == np.float32 and grads["w"].shape == (3, 2)
    )
    assert aux["pred"].shape == (5, 2)
    for key in ("w", "b"):
        def f(v, key=key):
            p = dict(params, **{key: v.astype(np.float32)})
            return float(loss(p, x, y)[0])
        np.testing.assert_allclose(
            grads[key],
            numeric_grad(f, params[key].astype(np.float64), eps=1e-3),
            rtol=2e-2,
            atol=2e-3,
        )
    gx, gy = tk.grad(lambda p, x, y: loss(p, x, y)[0], argnums=(1, 2))(params, x, y)
    assert gx.shape == x.shape and gy.shape == y.shape


def test_jit_of_grad_is_one_program_and_compiles_once():
    def f(x):
        return np.sum(np.tanh(x) ** 2)

    g = tk.jit(tk.grad(f))
    x = RNG.standard_normal(16)
    np.testing.assert_allclose(g(x), 2 * np.tanh(x) * (1 - np.tanh(x) ** 2), rtol=1e-12)
    g(x + 1)
    assert g.cache_size == 1
    text = g.lower(x).as_text()
    assert "transpose(jvp(" in text  # backward instructions say what they are


def test_second_derivatives_and_grad_of_vjp_compose():
    f = lambda x: np.sin(x) * x ** 2  # noqa: E731
    d2 = tk.grad(tk.grad(f))
    x = 0.7
    want = -np.sin(x) * x ** 2 + 4 * x * np.cos(x) + 2 * np.sin(x)
    np.testing.assert_allclose(d2(x), want, rtol=1e-12)
    d3 = tk.grad(tk.grad(tk.grad(f)))
    np.testing.assert_allclose(
        d3(x), numeric_grad(lambda v: d2(float(v)), np.array(x), eps=1e-5), rtol=1e-6
    )
    # Hessian-vector product: forward over reverse
    v = np.array([1.0, -2.0, 0.5])
    w = np.array([0.3, 0.1, -0.4])
    g = tk.grad(lambda x: np.sum(np.sin(x) * x[::-1]))
    _, hvp = tk.jvp(g, (w,), (v,))
    num = (g(w + 1e-6 * v) - g(w - 1e-6 * v)) / 2e-6
    np.testing.assert_allclose(hvp, num, rtol=1e-6, atol=1e-8)


def test_vjp_and_jvp_agree_on_a_vector_function():
    def f(x):
        return np.concatenate([np.sin(x) * x[0], np.cumsum(x) ** 2])

    x = RNG.standard_normal(4)
    out, pullback = tk.vjp(f, x)
    ct = RNG.standard_normal(out.shape)
    (g,) = pullback(ct)
    t = RNG.standard_normal(4)
    _, jt = tk.jvp(f, (x,), (t,))
    np.testing.assert_allclose(np.dot(jt, ct), np.dot(t, g), rtol=1e-12)


def test_closed_over_traced_values_are_constants():
    @tk.jit
    def f(a, x):
        return tk.grad(lambda w: np.sum((a * w - x) ** 2))(np.ones(3))

    a, x = np.array([1.0, 2.0, 3.0]), np.array([0.5, 0.5, 0.5])
    np.testing.assert_allclose(f(a, x), 2 * (a - x) * a)


def test_errors_name_the_problem():
    with pytest.raises(UserTypeError, match="floating-point inputs.*int64"):
        tk.grad(lambda x: np.sum(x * 2.0))(np.arange(3))
    with pytest.raises(UserTypeError, match="one real scalar"):
        tk.grad(lambda x: x * 2)(np.ones(3))
    with pytest.raises(UserTypeError, match="pair"):
        tk.grad(lambda x: np.sum(x), has_aux=True)(np.ones(3))
    with pytest.raises(NotDifferentiableError, match="complex"):
        tk.grad(lambda x: np.sum(np.abs(x * 1j + 1)))(np.ones(3))
    with pytest.raises(
        NotDifferentiableError,
        match="np.linalg.cholesky is not differentiated yet.*test_autodiff.py|"
        "test_autodiff.py.*np.linalg.cholesky is not differentiated",
    ):
        tk.grad(lambda x: np.sum(np.linalg.cholesky(x.reshape(2, 2) + 3 * np.eye(2))))(np.ones(4))


def test_integer_paths_have_zero_gradient_and_no_error():
    def f(x):
        k = np.argmax(x)
        return x[k] * 2.0 + np.sum(np.round(x))

    np.testing.assert_array_equal(tk.grad(f)(np.array([0.2, 3.0, 1.0])), [0.0, 2.0, 0.0])


def test_gradient_checks_still_raise_numpy_errors():
    def f(x, i):
        return np.sum(x[i] ** 2)

    with pytest.raises(IndexError):
        tk.grad(f)(np.ones(3), np.int64(5))


jax = pytest.importorskip  # noqa: E305 (used below, as a function)


@pytest.mark.parametrize("name", ["sin", "tanh", "power_float", "maximum", "clip", "abs", "where"])
def test_matches_jax_grad(name):
    jax_ = pytest.importorskip("jax")
    jax_.config.update("jax_enable_x64", True)
    jnp = pytest.importorskip("jax.numpy")
    f, x = ELEMENTWISE[name]
    source = {
        "sin": lambda v, m: m.sum(m.sin(v)),
        "tanh": lambda v, m: m.sum(m.tanh(v)),
        "power_float": lambda v, m: m.sum(v**2.5),
        "maximum": lambda v, m: m.sum(m.maximum(v, 0.5) * v),
        "clip": lambda v, m: m.sum(m.clip(v, -1.0, 1.0) * v),
        "abs": lambda v, m: m.sum(m.abs(v) * v),
        "where": lambda v, m: m.sum(m.where(v > 0, v**2, -v)),
    }[name]
    np.testing.assert_allclose(
        tk.grad(lambda v: source(v, np))(x), jax_.grad(lambda v: source(v, jnp))(x), rtol=1e-13
    )


# ---- control flow ----------------------------------------------------------------------------
def test_fori_loop_with_static_bounds_differentiates_in_reverse():
    def f(x):
        return np.sum(tk.lax.fori_loop(0, 5, lambda i, v: np.sin(v) * 1.1 + x * i, x))

    check(f, np.array([0.3, -0.2, 0.9]))


def test_scan_gradients_for_xs_init_and_closed_over_weights():
    xs = RNG.standard_normal((6, 3))
    w = RNG.standard_normal(3)

    def loss(xs, c0, w):
        def step(c, x):
            c = np.tanh(c * w + x)
            return c, np.sum(c * x)
        c, ys = tk.lax.scan(step, c0, xs)
        return np.sum(ys ** 2) + np.sum(c)

    c0 = np.zeros(3)
    g_xs, g_c0, g_w = tk.grad(loss, argnums=(0, 1, 2))(xs, c0, w)
    np.testing.assert_allclose(
        g_xs, numeric_grad(lambda v: loss(v, c0, w), xs), rtol=1e-6, atol=1e-8
    )
    np.testing.assert_allclose(
        g_c0, numeric_grad(lambda v: loss(xs, v, w), c0), rtol=1e-6, atol=1e-8
    )
    np.testing.assert_allclose(
        g_w, numeric_grad(lambda v: loss(xs, c0, v), w), rtol=1e-6, atol=1e-8
    )
    g_rev = tk.grad(
        lambda xs: np.sum(tk.lax.scan(lambda c, x: (c * x, c), 1.0, xs, reverse=True)[1])
    )(xs[:, 0])
    np.testing.assert_allclose(
        g_rev,
        numeric_grad(
            lambda v: np.sum(tk.lax.scan(lambda c, x: (c * x, c), 1.0, v, reverse=True)[1]),
            xs[:, 0],
        ),
        rtol=1e-6,
    )



def test_scan_inputs_not_differentiated_get_no_backward_work():
    """Activity is tracked per element of the loop state: with grad for the weights alone,
    the backward loop computes no cotangent for xs (one dot fewer per trip, as JAX)."""
    xs = RNG.standard_normal((7, 2, 3))
    w, u = RNG.standard_normal((4, 4)) * 0.5, RNG.standard_normal((3, 4)) * 0.5

    def loss(xs, w, u):
        def step(h, x):
            h = np.tanh(h @ w + x @ u)
            return h, np.sum(h)
        h, ys = tk.lax.scan(step, np.zeros((2, 4)), xs)
        return np.sum(ys) + np.sum(h * h)

    weights_only = tk.jit(tk.grad(loss, argnums=(1, 2)))
    everything = tk.jit(tk.grad(loss, argnums=(0, 1, 2)))
    g_w, g_u = weights_only(xs, w, u)
    g_xs, g_w2, g_u2 = everything(xs, w, u)
    np.testing.assert_allclose(g_w, numeric_grad(lambda v: loss(xs, v, u), w), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(g_u, numeric_grad(lambda v: loss(xs, w, v), u), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(
        g_xs, numeric_grad(lambda v: loss(v, w, u), xs), rtol=1e-6, atol=1e-8
    )
    np.testing.assert_allclose(g_w, g_w2, rtol=1e-12)
    np.testing.assert_allclose(g_u, g_u2, rtol=1e-12)
    dots = [
        tk.jit(f).lower(xs, w, u).compile().as_text().count(" dot(")
        for f in (weights_only, everything)
    ]
    assert dots[0] == dots[1] - 1, dots
    # the backward trip reads the state the forward trip produced (tanh's output: the next trip's
    # carry) instead of recomputing it, so the forward dots are not repeated: 2 forward, 3 back
    # (h.T @ d, x.T @ d, d @ w.T), as the hand-written backpropagation through time
    assert dots[0] == 2 + 3, dots


def test_the_backward_loop_reads_each_trips_results_instead_of_recomputing_them():
    """Loop states of several kinds (a counter, a carried array, a scalar accumulator, a
    carry computed from a captured array): the gradient through the last trip, which reads the
    final state, and through the others, which read the next trip's stacked start, agrees with
    finite differences; zero and one trips too."""
    w = RNG.standard_normal((3, 3)) * 0.5

    def loss(x, w, trips):
        def body(i, state):
            h, acc = state
            h = np.sin(h @ w) + 0.1 * i
            return h, acc + np.sum(h * h)
        h, acc = tk.lax.fori_loop(0, trips, body, (x, 0.0))
        return acc + np.sum(np.cos(h))

    x = RNG.standard_normal((2, 3))
    for trips in (0, 1, 4):
        g = tk.jit(tk.grad(loss, argnums=(0, 1)), static_argnums=(2,))(x, w, trips)
        np.testing.assert_allclose(
            g[0], numeric_grad(lambda v: loss(v, w, trips), x), rtol=1e-6, atol=1e-8
        )
        np.testing.assert_allclose(
            g[1], numeric_grad(lambda v: loss(x, v, trips), w), rtol=1e-6, atol=1e-8
        )

def test_scan_reverse_mode_is_linear_in_the_trip_count():
    """The backward loop writes one row of the xs cotangent per trip (in place), so twice the
    trips cost about twice the time, not four times (checked on work, not on a clock: the
    cotangent accumulator is updated through a dynamic-update-slice of one row)."""
    def loss(xs):
        return np.sum(tk.lax.scan(lambda c, x: (c + x, c), np.zeros(4), xs)[1])

    text = tk.jit(tk.grad(loss)).lower(np.ones((50, 4))).compile().as_text()
    assert "f64[50,4]{1,0} add(" not in text  # no full-size accumulation per trip


def test_while_loop_forward_mode_and_reverse_mode_error():
    def f(x):
        return np.sum(tk.lax.while_loop(lambda v: v[0] < 3.0, lambda v: v * 1.5, x))

    x = np.array([1.0, 2.0])
    value, tangent = tk.jvp(f, (x,), (np.array([1.0, 0.0]),))
    assert value == 1.5 ** 3 * 3 and tangent == 1.5 ** 3
    with pytest.raises(NotDifferentiableError, match="fori_loop with Python-int bounds|scan"):
        tk.grad(f)(x)
    with pytest.raises(NotDifferentiableError, match="trip count"):
        tk.grad(lambda x, n: np.sum(tk.lax.fori_loop(0, n, lambda i, v: v * 2, x)))(x, np.int64(3))


def test_while_loop_jvp_carries_tangents_into_elements_that_start_at_zero():
    def f(x):
        def body(s):
            a, b, i = s
            return a * 2.0, b + a, i + 1
        a, b, _ = tk.lax.while_loop(lambda s: s[2] < 3, body, (x, 0.0, 0))
        return b

    _, t = tk.jvp(f, (1.0,), (1.0,))
    assert t == 1 + 2 + 4


def test_cond_and_switch_gradients_follow_the_branch_taken():
    def f(x):
        return tk.lax.cond(x[0] > 0, lambda a: np.sum(np.sin(a)), lambda a: np.sum(a ** 2), x)

    x = np.array([0.4, -1.2])
    np.testing.assert_allclose(tk.grad(f)(x), np.cos(x))
    np.testing.assert_allclose(tk.grad(f)(-x), -2 * x)
    branches = [lambda a, b: a * b, lambda a, b: a + b * 3, lambda a, b: np.exp(a)]

    def s(k, a, b):
        return tk.lax.switch(k, branches, a, b)

    for k, want in ((0, (2.0, 0.5)), (1, (1.0, 3.0)), (7, (np.exp(0.5), 0.0)), (-1, (2.0, 0.5))):
        got = tk.grad(s, argnums=(1, 2))(np.int64(k), 0.5, 2.0)
        np.testing.assert_allclose(got, want, rtol=1e-12)
    _, t = tk.jvp(
        lambda a: tk.lax.cond(a > 1.0, lambda v: v * 3.0, lambda v: v * v, a), (0.5,), (1.0,)
    )
    assert t == 1.0


def test_grad_through_scan_inside_jit_and_second_order():
    def f(x):
        c, _ = tk.lax.scan(lambda c, _: (np.sin(c) * x, None), x, None, length=3)
        return c

    d1 = tk.grad(f)
    d2 = tk.grad(d1)
    x = 0.8
    np.testing.assert_allclose(
        tk.jit(d1)(x), numeric_grad(lambda v: f(float(v)), np.array(x)), rtol=1e-7
    )
    np.testing.assert_allclose(
        d2(x), numeric_grad(lambda v: d1(float(v)), np.array(x), eps=1e-5), rtol=1e-5
    )


# ---- residuals and checkpoint ----------------------------------------------------------------
def _block(x, w):
    return np.sin(np.tanh(np.tanh(x @ w) @ w))


def _deep_loss(w, x, remat):
    f = tk.checkpoint(_block) if remat else _block
    return np.sum(f(f(x, w), w) ** 2)


def test_saved_residuals_name_what_the_backward_pass_keeps():
    w, x = RNG.standard_normal((8, 8)) / 4, RNG.standard_normal((16, 8))
    compiled = tk.jit(tk.grad(_deep_loss), static_argnums=2).lower(w, x, False).compile()
    rows = compiled.saved_residuals()
    kinds = {r.kind for r in rows}
    assert kinds == {"argument", "intermediate"}
    tanh_rows = [r for r in rows if r.produced_by.startswith("tanh at")]
    assert tanh_rows and all(r.shape == "f64[16,8]" and r.bytes == 16 * 8 * 8 for r in tanh_rows)
    assert any("transpose(jvp(tanh))" in reader for r in tanh_rows for reader in r.read_by)
    assert "saved residuals:" in compiled.residuals_text()
    assert tk.jit(lambda v: v * 2).lower(w).compile().saved_residuals() == []


def test_checkpoint_recomputes_instead_of_keeping():
    w, x = RNG.standard_normal((8, 8)) / 4, RNG.standard_normal((16, 8))
    g = tk.jit(tk.grad(_deep_loss), static_argnums=2)
    kept = sum(
        r.bytes
        for r in g.lower(w, x, False).compile().saved_residuals()
        if r.kind == "intermediate"
    )
    remat = g.lower(w, x, True).compile()
    kept_remat = sum(r.bytes for r in remat.saved_residuals() if r.kind == "intermediate")
    assert kept_remat < kept / 2
    assert "opt-barrier(" in remat.as_text() and "remat(tanh)" in remat.as_text()
    np.testing.assert_allclose(g(w, x, True), g(w, x, False), rtol=1e-13)
    # outside differentiation it is the function itself; under jit the call is inlined
    np.testing.assert_allclose(tk.checkpoint(_block)(x, w), _block(x, w))
    np.testing.assert_allclose(tk.jit(tk.checkpoint(_block))(x, w), _block(x, w), rtol=1e-12)
    # forward mode, vmap and second order go through it
    _, t = tk.jvp(lambda v: np.sum(tk.checkpoint(_block)(v, w)), (x,), (np.ones_like(x),))
    _, t_plain = tk.jvp(lambda v: np.sum(_block(v, w)), (x,), (np.ones_like(x),))
    np.testing.assert_allclose(t, t_plain, rtol=1e-12)
    h = tk.grad(
        lambda s: tk.grad(lambda v: np.sum(tk.checkpoint(np.sin)(v * s)))(np.ones(2)).sum()
    )(0.3)
    np.testing.assert_allclose(h, -2 * 0.3 * np.sin(0.3) + 2 * np.cos(0.3), rtol=1e-12)


def test_the_profile_splits_forward_and_backward_kernels():
    import matplotlib
    matplotlib.use("Agg")
    from toolkit.plots.timeline import timeline
    from toolkit.widgets import report

    def loss(w, x):
        return np.sum(np.tanh(x @ w) ** 2)

    g = tk.jit(tk.grad(loss), backend="cpu")
    w, x = RNG.standard_normal((8, 8)), RNG.standard_normal((16, 8))
    g(w, x)
    with tk.profile() as prof:
        g(w, x)
    phases = {k.phase for k in prof.kernels}
    assert phases == {"forward", "backward"}
    backward = [k for k in prof.kernels if k.phase == "backward"]
    # the forward op's line, not grad's caller
    assert all("test_autodiff.py" in k.source for k in backward)
    assert "differentiated program: forward" in prof.summary()
    lanes = timeline(prof)["lanes"]
    assert lanes.index("cpu:0 stream 0 (forward)") < lanes.index("cpu:0 stream 0 (backward)")
    html = report.report_html(prof, compiled={"grad": g.compiled(w, x)})
    assert "saved residuals: grad" in html and "<th>pass</th>" in html and "backward pass" in html


# ---- composition ------------------------------------------------------------------------------
def _rnn(w, xs):
    c, ys = tk.lax.scan(lambda c, x: (np.tanh(c * w + x), c * x), 0.0, xs)
    return np.sum(ys) + c


def _gated(w, x):
    return tk.lax.cond(x > 0, lambda v: np.sin(v * w), lambda v: (v * w) ** 2, x)


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_transformations_compose_through_control_flow(backend):
    xs = RNG.standard_normal((5, 6))  # a batch of 5 sequences of 6
    w = 0.7
    per_sequence = tk.jit(tk.vmap(tk.grad(_rnn), in_axes=(None, 0)), backend=backend)(w, xs)
    for b in range(5):
        np.testing.assert_allclose(
            per_sequence[b], numeric_grad(lambda v: _rnn(float(v), xs[b]), np.array(w)), rtol=1e-6
        )
    total = tk.jit(
        tk.grad(lambda w: np.sum(tk.vmap(_rnn, in_axes=(None, 0))(w, xs))), backend=backend
    )(w)
    np.testing.assert_allclose(total, per_sequence.sum(), rtol=1e-10)
    points = np.array([-1.2, 0.4, 2.0])
    g = tk.jit(tk.vmap(tk.grad(_gated), in_axes=(None, 0)), backend=backend)(w, points)
    want = [np.cos(p * w) * p if p > 0 else 2 * p * p * w for p in points]
    np.testing.assert_allclose(g, want, rtol=1e-12)
    # forward over vmap and vmap over forward agree
    _, t1 = tk.jvp(lambda w: tk.vmap(_gated, in_axes=(None, 0))(w, points), (w,), (1.0,))
    t2 = tk.vmap(lambda p: tk.jvp(lambda w: _gated(w, p), (w,), (1.0,))[1])(points)
    np.testing.assert_allclose(t1, t2, rtol=1e-12)
    np.testing.assert_allclose(t1, g, rtol=1e-12)
    # second order through a scan: d2/dw2, checked against finite differences of the gradient
    d2 = tk.jit(tk.grad(tk.grad(_rnn)), backend=backend)(w, xs[0])
    np.testing.assert_allclose(
        d2, numeric_grad(lambda v: tk.grad(_rnn)(float(v), xs[0]), np.array(w), eps=1e-5), rtol=1e-5
    )


def test_checkpoint_inside_a_scan_body():
    xs = RNG.standard_normal((4, 3))

    def loss(w):
        step = tk.checkpoint(lambda c, x: (np.tanh(c * w + x), np.sum(c)))
        c, ys = tk.lax.scan(step, np.zeros(3), xs)
        return np.sum(ys) + np.sum(c ** 2)

    w = RNG.standard_normal(3)
    np.testing.assert_allclose(tk.grad(loss)(w), numeric_grad(loss, w), rtol=1e-6, atol=1e-9)


# ---- np.linalg ----------------------------------------------------------------------------------
SPD = RNG.standard_normal((3, 3))
SPD = SPD @ SPD.T + 3 * np.eye(3)
LINALG = {
    "inv": lambda a: np.sum(np.linalg.inv(a) * np.arange(9.0).reshape(3, 3)),
    "solve_vector": lambda a: np.sum(np.linalg.solve(a, np.array([1.0, -2.0, 0.5])) ** 2),
    "solve_matrix": lambda a: np.sum(np.linalg.solve(a, a[:, :2] * 2 + 1)),
    "det": lambda a: np.linalg.det(a),
    "slogdet": lambda a: np.linalg.slogdet(a)[1],
    "batched_inv": lambda a: np.sum(np.linalg.inv(np.stack([a, a + np.eye(3)])) ** 2),
    "gaussian_log_likelihood": lambda a: (
        -0.5
        * (
            np.linalg.slogdet(a)[1]
            + np.array([1.0, 2.0, -1.0]) @ np.linalg.solve(a, np.array([1.0, 2.0, -1.0]))
        )
    ),
}


@pytest.mark.parametrize("name", sorted(LINALG))
def test_linalg_gradients_match_finite_differences(name):
    check(LINALG[name], SPD, rtol=1e-6, atol=1e-8)


def test_a_transformation_written_again_reuses_its_compiled_program():
    from toolkit import transformations

    def loss(w):
        return np.sum(np.sin(w) ** 2)

    w = np.ones(3)
    for _ in range(4):  # a training loop that writes tk.grad(loss) each step
        w = w - 0.1 * tk.grad(loss)(w)
    assert tk.grad(loss) is tk.grad(loss) and tk.grad(loss)._compiled.cache_size == 1
    assert tk.grad(loss, argnums=(0,)) is not tk.grad(loss)
    for k in range(transformations.TRANSFORM_CACHE_SIZE + 5):  # bounded: the oldest go
        tk.grad(lambda v, k=k: np.sum(v * k))
    assert len(transformations._RUNNERS) <= transformations.TRANSFORM_CACHE_SIZE


def _uses_numpy_buffers(w):
    out = np.zeros((4, 3))  # a NumPy buffer made inside the function, written with traced values
    out[:, 0] = w[:, 0] ** 2
    out[1:] += w[:-1] * 3
    return np.sum(out * w)


def test_numpy_buffers_made_inside_transformed_functions_are_traced():
    w = RNG.standard_normal((4, 3))
    check(_uses_numpy_buffers, w)
    got = tk.vmap(_uses_numpy_buffers)(np.stack([w, w * 2]))
    np.testing.assert_allclose(got, [_uses_numpy_buffers(w), _uses_numpy_buffers(w * 2)])
    body = tk.jit(lambda w: tk.lax.fori_loop(0, 2, lambda i, v: v + _uses_numpy_buffers(w), 0.0))
    np.testing.assert_allclose(body(w), 2 * _uses_numpy_buffers(w))


def test_transformed_functions_keep_their_own_compile_histories():
    from toolkit.runtime.history import RecompileWarning

    tk.grad(lambda v: np.sum(v ** 2))(np.ones(2))  # other functions' grads: no shared history
    tk.grad(lambda v: np.sum(v ** 3))(np.ones(2))
    tk.vmap(lambda v: v * 2)(np.ones(2))
    # one lambda re-created in a loop: said, at its line
    with pytest.warns(RecompileWarning) as caught:
        for k in range(8):
            tk.grad(lambda v, k=k: np.sum(v ** 2) * k)(np.ones(2))
    text = str(caught[0].message)
    assert "test_autodiff.py" in text and "transformations.py" not in text and "6×" in text


# ---- against JAX on the MLP, RNN (scan) and power-iteration (fori_loop) examples -----------------
def _examples(xp, lax):
    def mlp(params, x, y):
        h = xp.tanh(x @ params["w1"] + params["b1"])
        return xp.mean((h @ params["w2"] - y) ** 2)

    def rnn(w, xs):
        def step(h, x):
            h = xp.tanh(h * w + x)
            return h, xp.sum(h)
        h, ys = lax.scan(step, xp.zeros(xs.shape[1]), xs)
        return xp.sum(ys) + xp.sum(h ** 2)

    def power_iteration(a):
        def body(i, v):
            v = a @ v
            return v / xp.sqrt(xp.sum(v * v))
        v = lax.fori_loop(0, 8, body, xp.ones(a.shape[0]))
        return v @ a @ v

    return mlp, rnn, power_iteration


def test_grad_jvp_and_vmap_match_jax_on_training_examples():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    ours, theirs = _examples(np, tk.lax), _examples(jnp, jax.lax)
    params = {
        "w1": RNG.standard_normal((5, 7)),
        "b1": RNG.standard_normal(7),
        "w2": RNG.standard_normal((7, 2)),
    }
    x, y = RNG.standard_normal((9, 5)), RNG.standard_normal((9, 2))
    xs = RNG.standard_normal((12, 4))
    a = RNG.standard_normal((6, 6))
    a = a @ a.T
    cases = [((params, x, y), 0), ((RNG.standard_normal(4), xs), (0, 1)), ((a,), 0)]
    for (mine, jaxs), (args, argnums) in zip(zip(ours, theirs), cases):
        got = tk.grad(mine, argnums=argnums)(*args)
        want = jax.grad(jaxs, argnums=argnums)(*args)
        for g, w in zip(_leaves(got), _leaves(want)):
            np.testing.assert_allclose(g, np.asarray(w), rtol=1e-10, atol=1e-12)
        tangents = tuple(jax.tree_util.tree_map(lambda v: np.ones_like(v), arg) for arg in args)
        _, t_got = tk.jvp(mine, args, tangents)
        _, t_want = jax.jvp(jaxs, args, tangents)
        np.testing.assert_allclose(t_got, np.asarray(t_want), rtol=1e-10)
    per_example = tk.vmap(tk.grad(ours[0]), in_axes=(None, 0, 0))(params, x[:, None], y[:, None])
    want = jax.vmap(jax.grad(theirs[0]), in_axes=(None, 0, 0))(params, x[:, None], y[:, None])
    for g, w in zip(_leaves(per_example), _leaves(want)):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-10, atol=1e-12)


def _leaves(tree):
    """Leaves by key (JAX's dicts come with sorted keys, toolkit's in the argument's order)."""
    from toolkit.frontend.pytree import flatten
    if hasattr(tree, "keys"):
        tree = {k: tree[k] for k in sorted(tree)}
    return flatten(tree)[0]
