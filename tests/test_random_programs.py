"""Random NumPy programs (hypothesis-generated op graphs): traced and interpreted, vs NumPy.

Each program is a list of steps over a growing pool of values; the same step list runs eagerly
with NumPy and under tk.jit, and the HLO it prints must parse back and run to the same result."""
import numpy as np
from hypothesis import given, strategies as st

import toolkit as tk

UNARY = [
    "negative",
    "abs",
    "exp",
    "tanh",
    "sin",
    "sqrt_abs",
    "square",
    "floor",
    "sign",
    "log1p_abs",
]
BINARY = ["add", "subtract", "multiply", "maximum", "minimum", "divide_safe", "where_gt"]
STRUCTURAL = ["sum", "max", "mean", "transpose", "reshape_flat", "slice", "concat", "matmul",
              "broadcast_add", "astype_roundtrip", "flip", "pad", "expand",
              # indexing, writes and sorts: gather, scatter, dynamic-update-slice, sort in the mix
              "gather_rows", "set_rows", "add_at", "shift_update", "cumsum", "sort", "take_sorted"]


def _apply(step, pool):
    kind, i, j, axis = step
    a = pool[i % len(pool)]
    b = pool[j % len(pool)]
    ax = axis % a.ndim if a.ndim else None
    if kind == "negative":
        return -a
    if kind == "abs":
        return np.abs(a)
    if kind == "exp":
        return np.exp(np.clip(a, -20, 20))
    if kind == "tanh":
        return np.tanh(a)
    if kind == "sin":
        return np.sin(a)
    if kind == "sqrt_abs":
        return np.sqrt(np.abs(a))
    if kind == "square":
        return a * a
    if kind == "floor":
        return np.floor(a)
    if kind == "sign":
        return np.sign(a)
    if kind == "log1p_abs":
        return np.log1p(np.abs(a))
    if kind in BINARY:
        if not _broadcastable(a.shape, b.shape):
            b = a[::-1] if a.ndim else a
        if kind == "add":
            return a + b
        if kind == "subtract":
            return a - b
        if kind == "multiply":
            return a * b
        if kind == "maximum":
            return np.maximum(a, b)
        if kind == "minimum":
            return np.minimum(a, b)
        if kind == "divide_safe":
            return a / (np.abs(b) + 1.0)
        return np.where(a > b, a, b * 0.5)
    if kind == "sum":
        return a.sum(axis=ax, keepdims=axis % 2 == 0) if ax is not None else a
    if kind == "max":
        return np.max(a, axis=ax) if ax is not None and a.shape[ax] > 0 else a
    if kind == "mean":
        return a.mean(axis=ax) if ax is not None and a.shape[ax] > 0 else a
    if kind == "transpose":
        return a.T
    if kind == "reshape_flat":
        return a.reshape(-1)
    if kind == "slice":
        return a[1::2] if a.ndim else a
    if kind == "concat":
        return np.concatenate([a, a], axis=ax) if ax is not None else a
    if kind == "matmul":
        if a.ndim == 2 and b.ndim == 2 and a.shape[1] == b.shape[0]:
            return a @ b
        if a.ndim == 2:
            return a @ a.T
        return a
    if kind == "broadcast_add":
        return a[..., None] + a[None] if a.ndim == 1 else a
    if kind == "astype_roundtrip":
        return a.astype(np.float32).astype(a.dtype)
    if kind == "flip":
        return np.flip(a, axis=ax) if ax is not None else a
    if kind == "pad":
        return np.pad(a, 1) if a.ndim else a
    if kind == "expand":
        return np.expand_dims(a, 0)
    if kind == "gather_rows":
        return a[[a.shape[0] - 1, 0, a.shape[0] - 1]] if a.ndim and a.shape[0] else a
    if kind == "set_rows":
        if not a.ndim or not a.shape[0]:
            return a
        out = a.copy()
        out[[0, a.shape[0] - 1, 0]] = a[0] * 2 + 1  # repeated rows: the last write wins
        return out
    if kind == "add_at":
        if not a.ndim or not a.shape[0]:
            return a
        out = a.copy()
        np.add.at(out, [0, 0, a.shape[0] - 1], 1.5)
        return out
    if kind == "shift_update":
        if not a.ndim or a.shape[0] < 2:
            return a
        out = a * 1.0
        out[1:] = out[:-1] * 0.5 + a[1:]
        return out
    if kind == "cumsum":
        return np.cumsum(a, axis=ax) if ax is not None else a
    if kind == "sort":
        return np.sort(a, axis=ax) if ax is not None else a
    if kind == "take_sorted":
        return (
            np.take_along_axis(a, np.argsort(a, axis=ax, kind="stable"), axis=ax)
            if ax is not None
            else a
        )
    raise AssertionError(kind)


def _broadcastable(s1, s2):
    try:
        np.broadcast_shapes(s1, s2)
        return True
    except ValueError:
        return False


def run_program(steps, *inputs):
    pool = list(inputs)
    for step in steps:
        out = _apply(step, pool)
        if np.size(out) > 4096:  # keep programs small
            continue
        pool.append(out)
    return pool[-1], pool[len(inputs):][-3:]


steps_strategy = st.lists(
    st.tuples(st.sampled_from(UNARY + BINARY + STRUCTURAL), st.integers(0, 20), st.integers(0, 20),
              st.integers(0, 7)),
    min_size=1, max_size=12)


@st.composite
def inputs_strategy(draw, dtype):
    rows = draw(st.integers(0, 5))
    cols = draw(st.integers(1, 6))
    elems = st.floats(-10, 10, width=32 if dtype == np.float32 else 64)
    from hypothesis.extra import numpy as hnp

    x = draw(hnp.arrays(dtype, (rows, cols), elements=elems))
    y = draw(hnp.arrays(dtype, (cols,), elements=elems))
    return x, y


def _check(steps, x, y, rtol):
    with np.errstate(all="ignore"):
        expected = run_program(steps, x, y)
    f = tk.jit(lambda a, b: run_program(steps, a, b))
    got = f(x, y)
    for g, e in zip([got[0], *got[1]], [expected[0], *expected[1]]):
        e = np.asarray(e)
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_allclose(g, e, rtol=rtol, atol=rtol, equal_nan=True)
    lowered = f.lower(x, y)
    module = tk.hlo.parse(lowered.as_text())
    again = tk.hlo.run(module, x, y)
    for g, a in zip([got[0], *got[1]], again):
        np.testing.assert_array_equal(g, a)


@given(steps=steps_strategy, data=inputs_strategy(np.float64))
def test_random_float64_programs(steps, data):
    _check(steps, *data, rtol=1e-9)


@given(steps=steps_strategy, data=inputs_strategy(np.float32))
def test_random_float32_programs(steps, data):
    _check(steps, *data, rtol=2e-4)
