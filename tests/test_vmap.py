"""vmap: every batched program equals NumPy run on each batch element in a Python loop."""
import numpy as np
import pytest

import toolkit as tk
import toolkit.numpy as tnp
from toolkit.frontend.errors import UserValueError

RNG = np.random.default_rng(3)
B = 4


def looped(f, in_axes, *args):
    """NumPy's answer: f on each batch element, stacked."""
    axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
    outs = []
    for b in range(B):
        outs.append(f(*[a if ax is None else np.take(a, b, axis=ax) for a, ax in zip(args, axes)]))
    return np.stack(outs)


X = RNG.standard_normal((B, 5))
M = RNG.standard_normal((B, 5, 3))
W = RNG.standard_normal((5, 3))
IDX = np.array([0, 3, 4, 1])

CASES = {
    "elementwise": (lambda x: np.tanh(x) * 2 + np.exp(-(x**2)), 0, (X,)),
    "unbatched_operand": (lambda x, w: x * w[:, 0], (0, None), (X, W)),
    "reductions": (
        lambda x: np.stack([np.sum(x), np.max(x), np.mean(x**2), np.argmax(x) * 1.0]),
        0,
        (X,),
    ),
    "softmax": (lambda x: np.exp(x - x.max()) / np.sum(np.exp(x - x.max())), 0, (X,)),
    "matvec_lhs": (lambda x, w: x @ w, (0, None), (X, W)),
    "matvec_rhs": (lambda w, x: w.T @ x, (None, 0), (W, X)),
    "matmul_both": (lambda x, m: x @ m, (0, 0), (X, M)),
    "matmul_in_axis_2": (lambda m, x: m @ x, (2, 0), (np.moveaxis(M, 0, 2), X[:, :3])),
    "broadcast_outer": (lambda x: np.outer(x, x[:2]), 0, (X,)),
    "reshape_transpose": (lambda m: m.reshape(3, 5).T[::-1], 0, (M,)),
    "slice_concat_pad": (lambda x: np.concatenate([np.pad(x[1:4], 2), x[::-2]]), 0, (X,)),
    "sort": (lambda x: np.sort(x), 0, (X,)),
    "cumsum": (lambda x: np.cumsum(x), 0, (X,)),
    "traced_index": (lambda x, i: x[i] * 2, (0, 0), (X, IDX)),
    "traced_index_unbatched_array": (lambda x, i: x[i], (None, 0), (W[:, 0], IDX)),
    "fancy_index": (lambda x, i: x[np.stack([i, i * 0, i])], (0, 0), (X, IDX)),
    "take_batched_table": (lambda w, i: np.take(w, i, axis=0), (None, 0), (W, IDX)),
    "where": (lambda x: np.where(x > 0, x, -2 * x), 0, (X,)),
    "clip_minimum": (lambda x: np.clip(np.minimum(x, 0.5), -1, 1), 0, (X,)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_vmap_matches_a_python_loop(name):
    f, in_axes, args = CASES[name]
    got = tk.vmap(f, in_axes=in_axes)(*args)
    np.testing.assert_allclose(got, looped(f, in_axes, *args), rtol=1e-12, atol=1e-12)


def test_writes_with_batched_indices():
    def f(x, i):
        y = x.copy()
        y[i] = -1.0  # dynamic-update-slice at a batched index: a scatter, clamped like DUS
        y[0:2] += x[i]
        np.add.at(y, np.stack([i, i]), 1.0)
        return y

    got = tk.vmap(f)(X, IDX)
    np.testing.assert_allclose(got, looped(f, 0, X, IDX))


def test_out_axes_axis_size_and_unbatched_outputs():
    got = tk.vmap(lambda x: (x * 2, np.float64(3.0)), out_axes=(1, 0))(M)
    np.testing.assert_allclose(got[0], np.moveaxis(M * 2, 0, 1))
    np.testing.assert_allclose(got[1], np.full(B, 3.0))
    ones = tk.vmap(lambda: np.ones(2), in_axes=(), axis_size=3)()
    assert ones.shape == (3, 2)
    with pytest.raises(UserValueError, match="inconsistent sizes"):
        tk.vmap(lambda a, b: a + b)(np.ones(3), np.ones(4))
    with pytest.raises(UserValueError, match="out_axes=None"):
        tk.vmap(lambda a: a, out_axes=None)(np.ones(3))


def test_pytree_in_axes():
    params = {"w": W, "b": np.ones(3)}
    got = tk.vmap(lambda p, x: np.tanh(x @ p["w"] + p["b"]), in_axes=({"w": None, "b": None}, 0))(
        params, X
    )
    np.testing.assert_allclose(got, np.tanh(X @ W + 1))


def test_per_example_gradients():
    def loss(w, x, y):
        return np.sum((np.tanh(x @ w) - y) ** 2)

    y = RNG.standard_normal((B, 3))
    per_example = tk.jit(tk.vmap(tk.grad(loss), in_axes=(None, 0, 0)))
    got = per_example(W, X, y)
    for b in range(B):
        np.testing.assert_allclose(got[b], tk.grad(loss)(W, X[b], y[b]), rtol=1e-12)
    # and grad of vmap: the gradient of the summed batch loss
    total = tk.grad(lambda w: np.sum(tk.vmap(loss, in_axes=(None, 0, 0))(w, X, y)))(W)
    np.testing.assert_allclose(total, got.sum(0), rtol=1e-12)


def test_cond_with_a_batched_predicate_runs_both_branches_and_selects():
    f = lambda x: tk.lax.cond(x[0] > 0, lambda a: a * 2.0, lambda a: np.sin(a), x)  # noqa: E731
    np.testing.assert_allclose(
        tk.vmap(f)(X), looped(lambda x: x * 2.0 if x[0] > 0 else np.sin(x), 0, X)
    )
    branches = [lambda a: a + 1, lambda a: a * 3, lambda a: -a]
    g = lambda k, a: tk.lax.switch(k, branches, a)  # noqa: E731
    ks = np.array([0, 2, 9, -3])
    want = np.stack([branches[min(max(k, 0), 2)](X[b]) for b, k in enumerate(ks)])
    np.testing.assert_allclose(tk.vmap(g)(ks, X), want)
    # an unbatched predicate keeps one branch for the whole batch
    h = lambda x, p: tk.lax.cond(p > 0, lambda a: a * 2.0, lambda a: a - 1, x)  # noqa: E731
    np.testing.assert_allclose(tk.vmap(h, in_axes=(0, None))(X, 1.0), X * 2)


def test_while_loop_with_a_batched_predicate_stops_each_element_on_time():
    def f(x):
        return tk.lax.while_loop(lambda s: s[0] < 10.0, lambda s: (s[0] * 2.0, s[1] + 1), (x, 0))

    starts = np.array([0.5, 3.0, 20.0, 1.0])
    value, count = tk.vmap(f)(starts)
    want = [f(float(s)) for s in starts]
    np.testing.assert_allclose(value, [w[0] for w in want])
    np.testing.assert_array_equal(count, [w[1] for w in want])


def test_scan_and_fori_loop_inside_vmap():
    def f(x):
        c, ys = tk.lax.scan(lambda c, v: (c * 0.5 + v, c), 0.0, x)
        return tk.lax.fori_loop(0, 3, lambda i, a: a + ys, ys) + c

    def ref(x):
        c, ys = 0.0, []
        for v in x:
            ys.append(c)
            c = c * 0.5 + v
        return np.array(ys) * 4 + c

    np.testing.assert_allclose(tk.vmap(f)(X), looped(ref, 0, X), rtol=1e-12)


def test_vmap_under_jit_compiles_once():
    f = tk.jit(tk.vmap(lambda x: np.sum(tnp.sin(x) ** 2)))
    f(X)
    f(X + 1)
    assert f.cache_size == 1


def test_numpy_index_errors_are_raised_when_any_batch_element_fails():
    with pytest.raises(IndexError):
        tk.vmap(lambda x, i: x[i])(X, np.array([0, 9, 0, 0]))
    np.testing.assert_allclose(
        tk.vmap(lambda x, i: x[i])(X, np.array([0, -1, 2, 4])), X[np.arange(B), [0, -1, 2, 4]]
    )


# ---- random programs ---------------------------------------------------------------------------
from hypothesis import assume, given, strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

from test_random_programs import BINARY, STRUCTURAL, UNARY, run_program  # noqa: E402


@st.composite
def batched_inputs(draw):
    rows, cols, batch = draw(st.integers(1, 4)), draw(st.integers(1, 5)), draw(st.integers(1, 3))
    elems = st.floats(-5, 5, width=64)
    return (draw(hnp.arrays(np.float64, (batch, rows, cols), elements=elems)),
            draw(hnp.arrays(np.float64, (batch, cols), elements=elems)))


@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from(UNARY + BINARY + STRUCTURAL),
            st.integers(0, 20),
            st.integers(0, 20),
            st.integers(0, 7),
        ),
        min_size=1,
        max_size=10,
    ),
    data=batched_inputs(),
)
def test_vmap_of_random_programs_matches_a_loop(steps, data):
    xs, ys = data
    with np.errstate(all="ignore"):
        want = [np.asarray(run_program(steps, x, y)[0]) for x, y in zip(xs, ys)]
    assume(len({w.shape for w in want}) == 1)
    got = tk.vmap(lambda x, y: run_program(steps, x, y)[0])(xs, ys)
    np.testing.assert_allclose(got, np.stack(want), rtol=1e-12, atol=1e-12, equal_nan=True)


def test_linalg_inside_vmap_runs_once_per_element():
    mats = RNG.standard_normal((B, 3, 3)) + 3 * np.eye(3)
    rhs = RNG.standard_normal((B, 3))
    got = tk.vmap(lambda a, b: np.linalg.solve(a, b) + np.linalg.inv(a)[0])(mats, rhs)
    want = np.stack([np.linalg.solve(a, b) + np.linalg.inv(a)[0] for a, b in zip(mats, rhs)])
    np.testing.assert_allclose(got, want, rtol=1e-12)
    w, v = tk.vmap(np.linalg.eigh)(mats @ np.swapaxes(mats, 1, 2))
    np.testing.assert_allclose(w, np.linalg.eigh(mats @ np.swapaxes(mats, 1, 2))[0], rtol=1e-10)
    # an unbatched matrix, batched right-hand sides
    shared = tk.vmap(lambda b: np.linalg.solve(mats[0], b))(rhs)
    np.testing.assert_allclose(shared, np.linalg.solve(mats[0], rhs.T).T, rtol=1e-12)
