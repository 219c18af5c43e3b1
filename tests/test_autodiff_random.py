"""Differentiation of random NumPy programs (the op graphs of test_random_programs): reverse
mode agrees with forward mode on every program (<J t, c> = <t, J^T c>, whatever the ops), and
with NumPy's own finite differences on programs of smooth ops."""
import numpy as np
from hypothesis import assume, given, strategies as st
from hypothesis.extra import numpy as hnp

import toolkit as tk
from test_random_programs import BINARY, STRUCTURAL, UNARY, run_program

SMOOTH = [
    "negative",
    "exp",
    "tanh",
    "sin",
    "square",
    "add",
    "subtract",
    "multiply",
    "sum",
    "mean",
    "transpose",
    "reshape_flat",
    "slice",
    "concat",
    "matmul",
    "broadcast_add",
    "flip",
    "pad",
    "expand",
    "gather_rows",
    "set_rows",
    "add_at",
    "shift_update",
    "cumsum",
]


def steps_of(kinds):
    return st.lists(
        st.tuples(
            st.sampled_from(kinds), st.integers(0, 20), st.integers(0, 20), st.integers(0, 7)
        ),
        min_size=1,
        max_size=10,
    )


@st.composite
def inputs(draw):
    rows = draw(st.integers(1, 4))
    cols = draw(st.integers(1, 5))
    elems = st.floats(-3, 3, width=64)
    return (draw(hnp.arrays(np.float64, (rows, cols), elements=elems)),
            draw(hnp.arrays(np.float64, (cols,), elements=elems)))


def _scalar_loss(steps, out_shape, seed=0):
    weights = np.random.default_rng(seed).standard_normal(out_shape)

    def loss(a, b):
        return np.sum(run_program(steps, a, b)[0] * weights)
    return loss


@given(steps=steps_of(UNARY + BINARY + STRUCTURAL), data=inputs())
def test_reverse_mode_is_the_transpose_of_forward_mode(steps, data):
    x, y = data
    with np.errstate(all="ignore"):
        out = np.asarray(run_program(steps, x, y)[0])
    assume(out.dtype.kind == "f" and out.size and np.all(np.isfinite(out)))
    loss = _scalar_loss(steps, out.shape)
    gx, gy = tk.grad(loss, argnums=(0, 1))(x, y)
    assume(np.all(np.isfinite(gx)) and np.all(np.isfinite(gy)))
    rng = np.random.default_rng(1)
    tx, ty = rng.standard_normal(x.shape), rng.standard_normal(y.shape)
    _, t_out = tk.jvp(loss, (x, y), (tx, ty))
    scale = np.sum(np.abs(gx * tx)) + np.sum(np.abs(gy * ty)) + 1e-12
    # a float32 round trip rounds the tangent and the cotangent each their own way
    tolerance = 1e-6 if any(kind == "astype_roundtrip" for kind, *_ in steps) else 1e-9
    assert abs(t_out - (np.sum(gx * tx) + np.sum(gy * ty))) <= tolerance * scale


@given(steps=steps_of(SMOOTH), data=inputs())
def test_gradients_of_smooth_programs_match_finite_differences(steps, data):
    # (also the case of an output that is an unchanged captured argument: cumsum of one element)
    x, y = data
    out = np.asarray(run_program(steps, x, y)[0])
    assume(out.size and np.all(np.isfinite(out)) and np.max(np.abs(out)) < 1e6)
    loss = _scalar_loss(steps, out.shape)
    gx = tk.grad(loss)(x, y)
    eps = 1e-6
    numeric = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        numeric[i] = (loss(up, y) - loss(down, y)) / (2 * eps)
    np.testing.assert_allclose(gx, numeric, rtol=1e-4, atol=1e-4 * (1 + np.max(np.abs(numeric))))
