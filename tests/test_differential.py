"""Differential fuzzing of the CPU backend against NumPy itself (not the interpreter): random
programs on non-contiguous views, Python ints at the limits of the dtypes they meet, and ndarray
subclasses. Either toolkit gives NumPy's result (values, dtype, shape, untouched arguments), or
both raise; toolkit never quietly differs."""
import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

import toolkit as tk
from test_random_programs import run_program, steps_strategy

# ---- random programs on views -----------------------------------------------------------------
VIEWS = {
    "contiguous": lambda a: a,
    "reversed": lambda a: np.ascontiguousarray(a[::-1])[::-1],
    "strided": lambda a: np.repeat(a, 2, axis=0)[::2],
    "fortran": lambda a: np.asfortranarray(a),
    "transposed-twice": lambda a: np.ascontiguousarray(a.T).T if a.ndim == 2 else a,
}


@st.composite
def viewed_inputs(draw, dtype):
    rows, cols = draw(st.integers(0, 5)), draw(st.integers(1, 6))
    elems = st.floats(-10, 10, width=32 if dtype == np.float32 else 64)
    x = draw(hnp.arrays(dtype, (rows, cols), elements=elems))
    y = draw(hnp.arrays(dtype, (cols,), elements=elems))
    vx, vy = draw(st.sampled_from(sorted(VIEWS))), draw(st.sampled_from(sorted(VIEWS)))
    x2, y2 = VIEWS[vx](x), VIEWS[vy](y)
    np.testing.assert_array_equal(x2, x)
    return x2, y2


_CPU = {}


def _cpu_program(steps):
    key = repr(steps)
    if key not in _CPU:
        if len(_CPU) > 64:
            _CPU.clear()
        _CPU[key] = tk.jit(
            lambda a, b: run_program(steps, a, b), backend="cpu", on_recompile="ignore"
        )
    return _CPU[key]


@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-9), (np.float32, 2e-4)])
def test_random_programs_on_views_match_numpy_on_the_cpu_backend(dtype, rtol):
    @given(steps=steps_strategy, data=viewed_inputs(dtype))
    def check(steps, data):
        x, y = data
        before = (x.copy(), y.copy())
        with np.errstate(all="ignore"):
            expected = run_program(steps, x, y)
        got = _cpu_program(steps)(x, y)
        for g, e in zip([got[0], *got[1]], [expected[0], *expected[1]]):
            e = np.asarray(e)
            assert g.shape == e.shape and g.dtype == e.dtype
            np.testing.assert_allclose(g, e, rtol=rtol, atol=rtol, equal_nan=True)
        np.testing.assert_array_equal(x, before[0])  # arguments are never written
        np.testing.assert_array_equal(y, before[1])

    check()


# ---- Python ints at dtype limits ------------------------------------------------------------
LIMITS = [0, 1, -1, 7, 2 ** 31 - 1, -2 ** 31, 2 ** 31, -2 ** 31 - 1, 2 ** 40, 2 ** 63 - 1, -2 ** 63]
INT_OPS = {
    "add": lambda x, s: x + s, "radd": lambda x, s: s + x, "subtract": lambda x, s: x - s,
    "multiply": lambda x, s: x * s, "maximum": lambda x, s: np.maximum(x, s),
    "where": lambda x, s: np.where(x > 0, x, s), "equal": lambda x, s: x == s,
    "less": lambda x, s: x < s, "greater_equal": lambda x, s: s >= x,
    "chain": lambda x, s: (x * 2 + s) - 1,
}


def _numpy_outcome(fn, x, s):
    try:
        with np.errstate(all="ignore"):
            return np.asarray(fn(x, s)), None
    except OverflowError as e:
        return None, e


@pytest.mark.parametrize("op", sorted(INT_OPS))
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32, np.bool_])
def test_python_ints_at_dtype_limits_match_numpy_or_raise_as_it_does(op, dtype):
    fn = INT_OPS[op]
    x = np.array([0, 1, -3, 5], dtype=dtype)
    compiled = tk.jit(fn, backend="cpu")  # one compile; every limit is a cache hit
    for s in LIMITS:
        expected, error = _numpy_outcome(fn, x, s)
        if error is not None:
            with pytest.raises(OverflowError):
                compiled(x, s)
            continue
        got = compiled(x, s)
        assert got.dtype == expected.dtype, (s, got.dtype, expected.dtype)
        np.testing.assert_array_equal(got, expected, err_msg=f"s={s}")


# ---- subclasses -------------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")
@pytest.mark.parametrize("make", [
    lambda: np.ma.masked_array([1.0, 2.0, 1e6], mask=[0, 0, 1]),
    lambda: np.matrix([[1.0, 2.0], [3.0, 4.0]]),
    lambda: np.recarray((2,), dtype=[("a", np.float64)]),
])
@pytest.mark.parametrize("fn", [lambda v: v * v, lambda v: v.sum(), lambda v: (v + 1, v)])
def test_subclasses_raise_instead_of_computing_something_else(make, fn):
    with pytest.raises(TypeError):
        tk.jit(fn, backend="cpu")(make())


@pytest.mark.parametrize("value", [2 ** 31, 2 ** 40, -2 ** 63, 2 ** 63 - 1])
def test_constant_python_ints_follow_numpy_ufuncs_raise_where_wraps(value):
    x = np.array([0, 1, -3, 5], dtype=np.int32)
    np.testing.assert_array_equal(tk.jit(lambda x: np.where(x > 0, x, value), backend="cpu")(x),
                                  np.where(x > 0, x, value))
    np.testing.assert_array_equal(tk.jit(lambda x: x < value, backend="cpu")(x), x < value)
    with pytest.raises(OverflowError):
        x + value
    with pytest.raises(OverflowError):
        tk.jit(lambda x: x + value, backend="cpu")(x)
