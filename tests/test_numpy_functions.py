"""NumPy functions on traced arrays (through __array_function__, methods and tnp) vs NumPy."""
import numpy as np
import pytest
from hypothesis import assume, given, strategies as st
from hypothesis.extra import numpy as hnp

import toolkit as tk
import toolkit.numpy as tnp
from toolkit.frontend.errors import UnsupportedNumpyError

from helpers import DTYPES, assert_same, run_both


def finite_arrays(dtype, shape):
    if dtype.kind == "f":
        return hnp.arrays(dtype, shape, elements=st.floats(-100, 100, width=dtype.itemsize * 8))
    if dtype.kind == "i":
        return hnp.arrays(dtype, shape, elements=st.integers(-100, 100))
    if dtype.kind == "c":
        return hnp.arrays(
            dtype, shape, elements=st.complex_numbers(max_magnitude=100, width=dtype.itemsize * 8)
        )
    return hnp.arrays(dtype, shape, elements=st.booleans())


@st.composite
def array_and_axis(draw, min_side=0, dtypes=DTYPES):
    dtype = draw(st.sampled_from(dtypes))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=min_side, max_side=5))
    x = draw(finite_arrays(dtype, shape))
    axis = draw(st.one_of(st.none(), hnp.valid_tuple_axes(len(shape)),
                          st.integers(-len(shape), len(shape) - 1) if shape else st.none()))
    return x, axis


REDUCTIONS = {
    "sum": lambda x, axis, k: np.sum(x, axis=axis, keepdims=k),
    "prod": lambda x, axis, k: np.prod(x, axis=axis, keepdims=k),
    "max": lambda x, axis, k: np.max(x, axis=axis, keepdims=k),
    "min": lambda x, axis, k: x.min(axis=axis, keepdims=k),
    "mean": lambda x, axis, k: np.mean(x, axis=axis, keepdims=k),
    "var": lambda x, axis, k: x.var(axis=axis, keepdims=k),
    "std": lambda x, axis, k: np.std(x, axis=axis, keepdims=k),
    "all": lambda x, axis, k: np.all(x, axis=axis, keepdims=k),
    "any": lambda x, axis, k: x.any(axis=axis, keepdims=k),
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@given(case=array_and_axis(), keepdims=st.booleans())
def test_reductions_match_numpy(name, case, keepdims):
    x, axis = case
    fn = REDUCTIONS[name]
    if name in ("mean", "var", "std") and x.dtype == np.bool_:
        x = x.astype(np.int32)
    # NumPy orders complex numbers lexicographically
    if name in ("max", "min") and x.dtype.kind == "c":
        with pytest.raises(UnsupportedNumpyError, match=f"np.{name} of a complex array"):
            tk.jit(lambda a: fn(a, axis, keepdims), fullgraph=True)(x)
        if x.size:  # (where the graph may break, NumPy runs it: its order, its results)
            assert_same(tk.jit(lambda a: fn(a, axis, keepdims))(x), fn(x, axis, keepdims))
        return
    if name in ("max", "min"):
        axes = range(x.ndim) if axis is None else ([axis] if isinstance(axis, int) else axis)
        if any(x.shape[a] == 0 for a in axes) or (x.ndim == 0 and x.size == 0):
            with pytest.raises(ValueError):
                tk.jit(lambda a: fn(a, axis, keepdims))(x)
            return
    with np.errstate(all="ignore"):
        expected = fn(x, axis, keepdims)
    got = tk.jit(lambda a: fn(a, axis, keepdims))(x)
    # float sums associate differently from NumPy's pairwise summation
    assert_same(
        got, expected, approx=True, rtol=2e-5 if x.dtype in (np.float32, np.complex64) else 1e-12
    )


@given(
    case=array_and_axis(
        min_side=1, dtypes=[np.dtype("float32"), np.dtype("int32"), np.dtype("float64")]
    ),
    keepdims=st.booleans(),
    which=st.sampled_from(["argmax", "argmin"]),
    nan=st.booleans(),
)
def test_argmax_argmin_match_numpy(case, keepdims, which, nan):
    x, axis = case
    assume(axis is None or isinstance(axis, int))
    if nan and x.dtype.kind == "f" and x.size > 2:
        x = x.copy()
        x.flat[x.size // 2] = np.nan

    def fn(a):
        return getattr(np, which)(a, axis=axis, keepdims=keepdims)

    got, expected = run_both(fn, x)
    assert_same(got, expected)


@st.composite
def basic_index(draw):
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=0, max_side=6))
    index = draw(hnp.basic_indices(shape, allow_newaxis=True, allow_ellipsis=True))
    return np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape), index


@given(case=basic_index())
def test_basic_indexing_matches_numpy(case):
    x, index = case
    got, expected = run_both(lambda a: a[index], x)
    assert_same(got, np.asarray(expected))


CASES = {
    "reshape": (lambda x: x.reshape(4, -1), (np.arange(12.0).reshape(3, 4),)),
    "reshape_tuple": (lambda x: np.reshape(x, (2, 2, 3)), (np.arange(12).reshape(3, 4),)),
    "ravel": (lambda x: x.ravel(), (np.arange(6.0).reshape(2, 3),)),
    "T": (lambda x: x.T, (np.arange(24.0).reshape(2, 3, 4),)),
    "transpose_axes": (lambda x: x.transpose(1, 0, 2), (np.arange(24.0).reshape(2, 3, 4),)),
    "swapaxes": (lambda x: np.swapaxes(x, 0, -1), (np.arange(24.0).reshape(2, 3, 4),)),
    "moveaxis": (lambda x: np.moveaxis(x, 0, -1), (np.arange(24.0).reshape(2, 3, 4),)),
    "expand_squeeze": (
        lambda x: np.squeeze(np.expand_dims(x, (0, 2)), axis=0),
        (np.arange(6.0).reshape(2, 3),),
    ),
    "broadcast_to": (lambda x: np.broadcast_to(x, (4, 2, 3)), (np.arange(3.0).reshape(1, 3),)),
    "concatenate": (
        lambda x, y: np.concatenate([x, y, x], axis=1),
        (np.ones((2, 3), np.float32), np.zeros((2, 1), np.float32)),
    ),
    "concatenate_none": (
        lambda x: np.concatenate([x, x], axis=None),
        (np.arange(6).reshape(2, 3),),
    ),
    "concatenate_mixed": (
        lambda x: np.concatenate([x, np.ones((1, 3))]),
        (np.arange(6, dtype=np.int32).reshape(2, 3),),
    ),
    "stack": (lambda x, y: np.stack([x, y], axis=-1), (np.ones((2, 3)), np.zeros((2, 3)))),
    "pad": (
        lambda x: np.pad(x, ((1, 0), (2, 3)), constant_values=-1.0),
        (np.arange(6.0).reshape(2, 3),),
    ),
    "flip": (lambda x: np.flip(x), (np.arange(6).reshape(2, 3),)),
    "where": (lambda x: np.where(x > 2, x, 0.5), (np.arange(6.0, dtype=np.float32).reshape(2, 3),)),
    "where_int_cond": (
        lambda x, c: np.where(c, x, -x),
        (np.arange(6.0), np.array([0, 1, 2, 0, 3, 0])),
    ),
    "clip": (lambda x: np.clip(x, 1, 4), (np.arange(6, dtype=np.int32),)),
    "clip_method": (lambda x: x.clip(min=0.5), (np.arange(6.0, dtype=np.float32) - 2,)),
    "matmul_2d": (
        lambda a, b: a @ b,
        (np.arange(6.0).reshape(2, 3), np.arange(12.0).reshape(3, 4)),
    ),
    "matmul_vec": (
        lambda a, b: (a @ b, b @ a.T, b @ b),
        (np.arange(6.0).reshape(2, 3), np.arange(3.0)),
    ),
    "matmul_batch_broadcast": (
        lambda a, b: np.matmul(a, b),
        (np.ones((2, 1, 3, 4)), np.arange(60.0).reshape(5, 4, 3)),
    ),
    "matmul_int": (
        lambda a, b: a @ b,
        (np.arange(6, dtype=np.int32).reshape(2, 3), np.arange(6, dtype=np.int32).reshape(3, 2)),
    ),
    "dot_nd": (
        lambda a, b: np.dot(a, b),
        (np.arange(24.0).reshape(2, 3, 4), np.arange(20.0).reshape(5, 4, 1)),
    ),
    "dot_scalar": (lambda a: np.dot(a, 2.0), (np.arange(3.0),)),
    "vdot_inner": (
        lambda a, b: (np.vdot(a, b), np.inner(a, b)),
        (np.arange(6.0).reshape(2, 3), np.ones((2, 3))),
    ),
    "outer": (lambda a, b: np.outer(a, b), (np.arange(3.0), np.arange(4.0))),
    "tensordot": (
        lambda a, b: np.tensordot(a, b, axes=([1, 2], [0, 1])),
        (np.ones((2, 3, 4)), np.arange(36.0).reshape(3, 4, 3)),
    ),
    "einsum_matmul": (
        lambda a, b: np.einsum("ij,jk->ik", a, b),
        (np.arange(6.0).reshape(2, 3), np.arange(12.0).reshape(3, 4)),
    ),
    "einsum_diagonals": (
        lambda a, b: (
            np.einsum("ii->", a),
            np.einsum("ii->i", a),
            np.einsum("ii", a),
            np.einsum("bii->b", b),
            np.einsum("bij,jj->bi", b, a),
            np.einsum("iji->j", b.transpose(1, 0, 2)[:3]),
        ),
        (np.arange(9.0).reshape(3, 3), np.arange(27.0).reshape(3, 3, 3) % 7),
    ),
    "einsum_batch": (
        lambda a, b: np.einsum("bij,bkj->bki", a, b),
        (np.arange(24.0).reshape(2, 3, 4), np.ones((2, 5, 4))),
    ),
    "einsum_implicit_sum": (
        lambda a, b: np.einsum("ij,jk", a, b),
        (np.arange(6.0).reshape(2, 3), np.ones((3, 2))),
    ),
    "einsum_reduce_one": (
        lambda a, b: np.einsum("ij,k->ik", a, b),
        (np.arange(6.0).reshape(2, 3), np.arange(4.0)),
    ),
    "einsum_unary": (lambda a: np.einsum("ijk->kj", a), (np.arange(24.0).reshape(2, 3, 4),)),
    "astype": (
        lambda x: (x.astype(np.int32), x.astype(bool), x.astype(np.float32)),
        (np.array([-1.5, 0.0, 2.7, 1e3]),),
    ),
    "copy": (lambda x: np.copy(x) + 0, (np.arange(3),)),
    "zeros_ones_full": (
        lambda x: (tnp.zeros((2, 3)), tnp.ones(3, np.int32), tnp.full((2,), 7.5, np.float32), x),
        (np.ones(1),),
    ),
    "likes": (
        lambda x: (np.zeros_like(x), np.ones_like(x), np.full_like(x, 3), np.empty_like(x) * 0),
        (np.arange(6, dtype=np.int32),),
    ),
    "arange": (
        lambda x: (
            tnp.arange(5),
            tnp.arange(1, 10, 3),
            tnp.arange(0.0, 1.0, 0.25),
            tnp.arange(5, dtype=np.float32),
            x,
        ),
        (np.ones(1),),
    ),
    "linspace": (
        lambda x: (
            tnp.linspace(0, 1, 7),
            tnp.linspace(-2.0, 3.0, 4, endpoint=False),
            tnp.linspace(0, 10, 4, dtype=np.int64),
            x,
        ),
        (np.ones(1),),
    ),
    "eye": (lambda x: (tnp.eye(3), tnp.eye(3, 4, k=1, dtype=np.int32), x), (np.ones(1),)),
    "asarray_list": (lambda x: tnp.asarray([x[0], x[1]]) * 2, (np.arange(2.0),)),
    "softmax": (
        lambda x: (
            np.exp(x - x.max(-1, keepdims=True))
            / np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True)
        ),
        (np.linspace(-3, 3, 12).reshape(3, 4),),
    ),
    "len_iter": (
        lambda x: sum(row * i for i, row in enumerate(x)) + len(x),
        (np.arange(6.0).reshape(3, 2),),
    ),
    "ndim_shape": (lambda x: x * np.ndim(x) + np.shape(x)[0] + np.size(x), (np.ones((2, 3)),)),
    "divmod": (lambda x: divmod(x, 3), (np.arange(-4, 4),)),
    "ufunc_reduce": (
        lambda x: (np.add.reduce(x, axis=1), np.maximum.reduce(x)),
        (np.arange(6.0).reshape(2, 3),),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_function_matches_numpy(name):
    fn, args = CASES[name]
    got, expected = run_both(fn, *args)
    if isinstance(expected, tuple):
        assert isinstance(got, tuple) and len(got) == len(expected)
        for g, e in zip(got, expected):
            assert_same(g, np.asarray(e), approx=True, rtol=1e-6)
    else:
        assert_same(got, np.asarray(expected), approx=True, rtol=1e-6)


def test_tnp_outside_jit_is_numpy():
    x = np.arange(4.0)
    np.testing.assert_array_equal(tnp.exp(x), np.exp(x))
    np.testing.assert_array_equal(tnp.sum(x), np.sum(x))
    np.testing.assert_array_equal(tnp.arange(3), np.arange(3))


def test_namespace_exports_what_users_reach_for():
    for name in [
        "exp",
        "log",
        "tanh",
        "sqrt",
        "maximum",
        "where",
        "clip",
        "sum",
        "mean",
        "var",
        "std",
        "max",
        "min",
        "argmax",
        "matmul",
        "einsum",
        "outer",
        "zeros",
        "ones",
        "full",
        "arange",
        "linspace",
        "reshape",
        "transpose",
        "concatenate",
        "stack",
        "pad",
        "abs",
        "float32",
    ]:
        assert hasattr(tnp, name), name


MASKED_STATS = {
    "mean": lambda v: np.mean(v, where=v > 0),
    "mean_axis_keepdims": lambda v: np.mean(v, axis=1, where=v > 0, keepdims=True),
    "mean_all_masked_row": lambda v: np.mean(v, axis=1, where=v > 100),  # 0/0: NaN, as NumPy
    "var_ddof": lambda v: np.var(v, axis=0, where=v > 0, ddof=1),
    "std": lambda v: np.std(v, where=v > -0.5),
    "mean_float32": lambda v: np.mean(v.astype(np.float32), axis=0, where=v > 0),
    "mean_float16": lambda v: np.mean(v.astype(np.float16), axis=0, where=v > 0),
    "mean_int": lambda v: np.mean((v * 10).astype(np.int64), where=v > 0),
    "mean_list_mask": lambda v: np.mean(v, axis=1, where=[True, False, True, False, True]),
}


@pytest.mark.parametrize("name", sorted(MASKED_STATS))
def test_mean_var_std_with_where_masks(name):
    x = np.random.default_rng(5).standard_normal((4, 5))
    got, want = run_both(MASKED_STATS[name], x)
    assert_same(
        got, want, approx=True, rtol=2e-3 if "16" in name else 1e-6 if "32" in name else 1e-13
    )


def test_float16_var_subtracts_the_mean_numpys_var_does():
    """np.var's mean is a float16 sum divided in float16, not np.mean's float32 intermediate:
    [68.3, 68, 68] has variance 0.02344 by NumPy, 0.02214 with np.mean's mean (found by the
    property test above)."""
    x = np.array([68.3, 68, 68], np.float16)
    rows = (np.random.default_rng(3).standard_normal((6, 37)) * 2 + 60).astype(np.float16)
    for a, axis in ((x, None), (rows, 1), (rows, None)):
        got = tk.jit(lambda t: np.var(t, axis=axis))(a)
        np.testing.assert_array_equal(got, np.var(a, axis=axis))
        assert got.dtype == np.float16
