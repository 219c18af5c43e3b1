"""Advanced indexing with NumPy's rules: reads (gather, dynamic-slice), writes (scatter,
dynamic-update-slice), ufunc.at, take/put and their along-axis forms, on every backend, each
checked against NumPy itself, including the caller's arrays after a call that writes them."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import toolkit as tk
from toolkit.frontend.errors import UnsupportedNumpyError

BACKENDS = ["interpreter", "cpu", "gpu-simulated"]


def _same_as_numpy(fn, *args, backend="interpreter"):
    ours = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    theirs = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    got = tk.jit(fn, backend=backend)(*ours)
    want = fn(*theirs)
    for o, t in zip(ours, theirs):
        np.testing.assert_array_equal(o, t)  # the arguments after the call, as NumPy left them
    if want is not None:
        got = got if isinstance(got, tuple) else (got,)
        want = want if isinstance(want, tuple) else (want,)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert np.asarray(g).dtype == np.asarray(w).dtype and np.shape(g) == np.shape(w)
            np.testing.assert_array_equal(g, w)


# ---- random keys ---------------------------------------------------------------------------
@st.composite
def keys(draw, shape):
    """A NumPy index of an array of ``shape``: ints, slices, None, ..., integer arrays (with
    negative and repeated entries, broadcastable shapes) and boolean masks; sometimes invalid."""
    entries, dim = [], 0
    used_ellipsis = False
    while dim < len(shape) and draw(st.booleans()) or not entries:
        kind = draw(st.sampled_from(["int", "slice", "array", "array", "none", "ellipsis", "bool"]))
        size = shape[dim] if dim < len(shape) else 1
        if kind == "int":
            entries.append(draw(st.integers(-size - 1, size)))
            dim += 1
        elif kind == "slice":
            entries.append(
                slice(
                    draw(st.none() | st.integers(-6, 6)),
                    draw(st.none() | st.integers(-6, 6)),
                    draw(st.none() | st.sampled_from([1, 2, -1, -2, 3])),
                )
            )
            dim += 1
        elif kind == "array":
            n = draw(st.integers(0, 3))
            side = draw(st.sampled_from([(n,), (1, n), (n, 1), (2, n)]))
            entries.append(
                np.array(
                    draw(
                        st.lists(
                            st.integers(-size, max(size - 1, 0)),
                            min_size=int(np.prod(side)),
                            max_size=int(np.prod(side)),
                        )
                    ),
                    np.int64,
                ).reshape(side)
            )
            dim += 1
        elif kind == "none":
            entries.append(None)
        elif kind == "ellipsis" and not used_ellipsis:
            entries.append(Ellipsis)
            used_ellipsis = True
        elif kind == "bool" and dim < len(shape):
            entries.append(
                np.array(draw(st.lists(st.booleans(), min_size=shape[dim], max_size=shape[dim])))
            )
            dim += 1
        if len(entries) > 5:
            break
    return tuple(entries)


def _numpy_or_error(fn):
    try:
        return fn(), None
    except (IndexError, ValueError) as e:
        return None, type(e)


@st.composite
def indexed_arrays(draw):
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=1, max_size=3)))
    x = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape) - 3.5
    return x, draw(keys(shape))


def _check_read(x, key, backend):
    want, error = _numpy_or_error(lambda: x[key])
    if error is not None:
        with pytest.raises(error):
            tk.jit(lambda a: a[key], backend=backend)(x)
        return
    got = tk.jit(lambda a: a[key], backend=backend)(x)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def _check_write(x, key, backend, augmented: bool):
    def numpy_write(a):
        v = np.linspace(-1, 1, num=max(a[key].size, 1))[: a[key].size].reshape(a[key].shape)
        if augmented:
            a[key] += v
        else:
            a[key] = v
        return a

    want, error = _numpy_or_error(lambda: numpy_write(x.copy()))
    if error is not None:
        return  # the read tests check the errors
    _same_as_numpy(numpy_write, x, backend=backend)


@given(indexed_arrays())
def test_random_reads_match_numpy(case):
    _check_read(*case, "interpreter")


@given(indexed_arrays(), st.booleans())
def test_random_writes_match_numpy(case, augmented):
    _check_write(*case, "interpreter", augmented)


@settings(max_examples=12)
@given(indexed_arrays(), st.booleans())
def test_random_reads_and_writes_compile_for_cpu(case, augmented):
    _check_read(*case, "cpu")
    _check_write(*case, "cpu", augmented)


@settings(max_examples=6)
@given(indexed_arrays())
def test_random_writes_on_the_gpu_executor(case):
    _check_write(*case, "gpu-simulated", False)


# ---- traced indices ----------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_traced_index_arrays_and_scalars(backend):
    x = np.arange(60.0).reshape(5, 4, 3)

    def reads(a, i, j):
        return (
            a[i],
            a[j],
            a[j, 1:, i[:2] % 3],
            a[:, i % 4][..., None, 0],
            np.take(a, i, axis=0),
            a[-1 - j],
        )

    _same_as_numpy(reads, x, np.array([4, -5, 0, 2, 2]), np.int64(-2), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_writes_with_repeated_indices_keep_the_last(backend):
    def writes(a, i, v):
        a[i] = v  # repeated rows: the last write wins, as in NumPy
        a[i[:2], 0] += 100.0  # gather, add, scatter: applied once per distinct index
        a[:, [1, 1]] = a[:, [2, 0]]
        return a.sum()

    _same_as_numpy(writes, np.arange(12.0).reshape(4, 3), np.array([1, 3, 1, -1]),
                   np.arange(12.0, 24.0).reshape(4, 3), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_ufunc_at_accumulates_repeated_indices(backend):
    def at(a, i, v):
        np.add.at(a, i, v)
        np.subtract.at(a, [0, 0], 1.0)
        np.maximum.at(a, i, 3.0)
        np.multiply.at(a, (i, i % 2), 2.0)

    _same_as_numpy(
        at, np.zeros((5, 2)), np.array([4, 1, 4, 4, -1]), np.ones((5, 2)), backend=backend
    )


def test_integer_ufunc_at_and_histogram_style_counting():
    def counts(bins):
        out = np.zeros(6, np.int64)
        np.add.at(out, bins, 1)
        return out

    bins = np.array([0, 5, 5, 2, 2, 2, 1])
    got = tk.jit(counts)(bins)
    np.testing.assert_array_equal(got, np.bincount(bins, minlength=6))


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_take_put_and_along_axis(backend):
    order = np.array([[2, 0, 1], [1, 1, 0]])

    def fns(a, i):
        b = a.copy()
        np.put(b, [0, 5, -1], [7.0, 8.0])  # values repeat cyclically
        np.put_along_axis(b, order, -1.0, axis=1)
        c = np.zeros_like(a)
        c[np.arange(2)[:, None], order] = a[:, :3]
        return (
            np.take(a, i, axis=1),
            np.take(a, [[0, 5]]),
            np.take(a, i + 10, axis=1, mode="wrap"),
            np.take(a, i * 7, mode="clip"),
            np.take_along_axis(a, order, axis=1),
            np.take_along_axis(a, np.argmax(a, axis=1, keepdims=True), axis=1),
            b,
            c,
        )

    _same_as_numpy(fns, np.arange(8.0).reshape(2, 4), np.array([3, -1, 0]), backend=backend)


def test_writes_into_an_argument_through_an_advanced_index_reach_the_caller():
    def k(table, ids, rows):
        table[ids] += rows
        table[ids[0], ::2] = 0.0

    _same_as_numpy(k, np.ones((6, 4)), np.array([5, 1, 5]), np.arange(12.0).reshape(3, 4))


# ---- what cannot be traced says why --------------------------------------------------------------
def test_out_of_range_concrete_indices_raise_like_numpy():
    with pytest.raises(IndexError, match="index 5 is out of bounds for axis 0 with size 5"):
        tk.jit(lambda a: a[[0, 5]])(np.ones(5))
    with pytest.raises(IndexError, match="shape mismatch"):
        tk.jit(lambda a: a[[0, 1], [0, 1, 2]])(np.ones((3, 3)))
    with pytest.raises(IndexError, match="integer"):
        tk.jit(lambda a: a[np.array([0.5])])(np.ones(3))


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_traced_out_of_range_indices_raise_numpys_index_error_after_the_call(backend):
    """The program returns a flag per traced index; the call raises IndexError as NumPy, before
    writing any argument back."""
    def f(a, i):
        a[i] = -1.0
        return a[i] * 2

    g = tk.jit(f, backend=backend)
    a = np.arange(4.0)
    np.testing.assert_array_equal(g(a, np.array([3, -4])), [-2.0, -2.0])
    a = np.arange(4.0)
    with pytest.raises(IndexError, match="out of bounds for axis 0 with size 4"):
        g(a, np.array([1, 4]))
    np.testing.assert_array_equal(a, np.arange(4.0))  # nothing written
    with pytest.raises(IndexError):
        g(a, np.array([-5]))
    with pytest.raises(IndexError):
        tk.jit(lambda x, k: x[k], backend=backend)(np.ones((2, 3)), np.int64(2))


def test_data_dependent_reads_are_explained():
    with pytest.raises(UnsupportedNumpyError, match="np.where"):
        tk.jit(lambda a: a[a > 0], fullgraph=True)(np.ones(3))
    with pytest.raises(UnsupportedNumpyError, match="scalar boolean"):
        tk.jit(lambda a: a[True])(np.ones(3))


# ---- golden HLO and XLA's spellings --------------------------------------------------------------
def test_mutating_scatter_prints_input_output_alias():
    def k(table, ids, rows):
        table[ids] += rows

    text = tk.jit(k).lower(np.ones((6, 4), np.float32), np.array([1, 2], np.int32),
                           np.ones((2, 4), np.float32)).as_text(metadata=False)
    assert text.splitlines()[0] == (
        "HloModule jit_k, input_output_alias={ {0}: (0, {}, may-alias) }, "
        "entry_computation_layout={(f32[6,4]{1,0}, s32[2]{0}, f32[2,4]{1,0})->(f32[6,4]{1,0}, "
        "pred[], pred[])}"
    )
    # (the two pred[] outputs: the traced indices' range checks, of the read and of the write)
    assert (
        "gather(%table.2, %reshape." in text
        and "offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, "
        "index_vector_dim=1, slice_sizes={1,4}"
        in text
    )
    assert (
        "update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, "
        "index_vector_dim=1, "
        "to_apply=%region." in text
    )


XLA_PARSER_CASES = """HloModule indexing

add_F32.v3 {
  lhs = f32[] parameter(0)
  rhs = f32[] parameter(1)
  ROOT add = f32[] add(lhs, rhs)
}

overwrite {
  p0 = f32[] parameter(0)
  ROOT p1 = f32[] parameter(1)
}

ENTRY main {
  input = f32[5,4,3] parameter(0)
  starts = s64[2,2] parameter(1)
  updates = f32[2,3] parameter(2)
  i = s32[] parameter(3)
  gather = f32[2,4,2]{2,1,0} gather(input, starts), offset_dims={1,2}, collapsed_slice_dims={0}, start_index_map={0,2}, index_vector_dim=1, slice_sizes={1,4,2}, indices_are_sorted=true
  rows = s64[2] parameter(4)
  one = s64[2,1] reshape(rows)
  scatter = f32[5,4,3] scatter(input, one, updates), update_window_dims={1}, inserted_window_dims={0,1}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, unique_indices=true, to_apply=add_F32.v3
  set = f32[5,4,3] scatter(input, one, updates), update_window_dims={1}, inserted_window_dims={0,1}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=overwrite
  ds = f32[2,2,3] dynamic-slice(input, i, i, i), dynamic_slice_sizes={2,2,3}
  dus = f32[5,4,3] dynamic-update-slice(input, ds, i, i, i)
  ROOT t = (f32[2,4,2], f32[5,4,3], f32[5,4,3], f32[2,2,3], f32[5,4,3]) tuple(gather, scatter, set, ds, dus)
}
"""  # noqa: E501


def _manual(x, starts, updates, i, rows):
    """The same five results computed with plain NumPy from XLA's definitions."""
    gather = np.stack(
        [x[min(max(s0, 0), 4), :, min(max(s2, 0), 1) : min(max(s2, 0), 1) + 2] for s0, s2 in starts]
    )
    scatter, overwrite = x.copy(), x.copy()
    for row, u in zip(rows, updates):
        if 0 <= row < 5:
            scatter[row, 0, :] += u
            overwrite[row, 0, :] = u
    b = [min(max(i, 0), n - s) for n, s in zip(x.shape, (2, 2, 3))]
    ds = x[b[0]:b[0] + 2, b[1]:b[1] + 2, b[2]:b[2] + 3]
    dus = x.copy()
    dus[b[0]:b[0] + 2, b[1]:b[1] + 2, b[2]:b[2] + 3] = ds
    return gather, scatter, overwrite, ds, dus


@pytest.mark.parametrize("backend", ["interpreter", "cpu", "gpu-simulated"])
def test_xla_spellings_parse_print_and_run(backend):
    module = tk.hlo.parse(XLA_PARSER_CASES)
    text = module.to_text()
    assert "indices_are_sorted=true" in text and "unique_indices=true, to_apply=%add_F32.v3" in text
    assert tk.hlo.parse(text).to_text() == text
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 4, 3)).astype(np.float32)
    starts = np.array([[4, 9], [-3, 1]], np.int64)
    updates = rng.standard_normal((2, 3)).astype(np.float32)
    rows = np.array([3, 7], np.int64)  # 7 is out of range: that update is skipped
    for i in (np.int32(1), np.int32(-7), np.int32(9)):
        got = tk.hlo.run(module, x, starts, updates, i, rows, backend=backend)
        for g, w in zip(got, _manual(x, starts, updates, int(i), rows)):
            np.testing.assert_array_equal(g, w)


def test_indexing_shape_errors_name_the_problem():
    bad = XLA_PARSER_CASES.replace("slice_sizes={1,4,2}", "slice_sizes={2,4,2}")
    with pytest.raises(ValueError, match="collapses dimension 0, whose slice size 2 is not 1"):
        tk.hlo.parse(bad)
    bad = XLA_PARSER_CASES.replace("dynamic_slice_sizes={2,2,3}", "dynamic_slice_sizes={2,2,4}")
    with pytest.raises(ValueError, match="dynamic_slice_sizes"):
        tk.hlo.parse(bad)
    bad = XLA_PARSER_CASES.replace("unique_indices=true", "unique_indices=maybe")
    with pytest.raises(ValueError, match="true or false"):
        tk.hlo.parse(bad)
