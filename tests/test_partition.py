"""np.partition and np.argpartition as NumPy's own introselect (a ``custom-call``), and the
order statistics built on it: the whole partitioned array is NumPy's, entry for entry, not just
the kth positions (until this file a partition was a full sort, a valid partition NumPy does not
make); np.median and a static np.percentile partition at NumPy's positions, so even the sign of
a zero tied with another is NumPy's. Also: their derivatives and batching, and the library-call
runner that hands a sort's fresh results over without copies and skips results no one reads."""
import json
import warnings

import numpy as np
import pytest

import toolkit as tk
from toolkit.backends.library_call import fresh_results, library_runner, tuple_reads
from toolkit.frontend.errors import UserTypeError, UserValueError
from toolkit.ir import sorting

BACKENDS = ["interpreter", "cpu"]


def _data(dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "b":
        return rng.random(shape) < 0.5
    if np.dtype(dtype).kind in "iu":
        return rng.integers(0, 9, shape).astype(dtype)  # many ties
    x = (rng.standard_normal(shape) * 3).round()  # ties, and zeros of both signs below
    x = x.astype(dtype)
    if np.dtype(dtype).kind == "c":
        return x + 1j * x[..., ::-1]
    x.flat[::5] = -0.0
    return x


def _same(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    if want.dtype.kind == "f":
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16, np.int64, np.uint8,
                                   np.bool_, np.complex128])
@pytest.mark.parametrize("kth, axis", [(3, -1), ([1, -2], 0), ((0, 4, 6), 1), (10, None)])
def test_partition_is_numpys_whole_array(backend, dtype, kth, axis):
    x = _data(dtype, (7, 9))
    for fn in (np.partition, np.argpartition):
        got = tk.jit(lambda v: fn(v, kth, axis=axis), backend=backend)(x)
        _same(got, fn(x, kth, axis=axis))


def test_partition_is_not_a_sort():
    """NumPy's partition sorts short lines completely, as those above: this line is long
    enough that its partition is not the sorted array, so a sort in its place fails here."""
    x = np.random.default_rng(3).permutation(1000).astype(np.float64)  # no ties
    assert not np.array_equal(np.partition(x, 10), np.sort(x))
    _same(tk.jit(lambda v: np.partition(v, 10))(x), np.partition(x, 10))


def test_partitions_of_nan_and_infinite_entries():
    x = np.array([3.0, np.nan, -np.inf, 1.0, np.nan, np.inf, -0.0, 0.0, 2.0])
    for kth in (0, 4, -1, [2, 6]):
        _same(tk.jit(lambda v: np.partition(v, kth))(x), np.partition(x, kth))
        _same(tk.jit(lambda v: np.argpartition(v, kth))(x), np.argpartition(x, kth))


@pytest.mark.parametrize("backend", BACKENDS)
def test_median_is_numpys_mean_of_the_middle(backend):
    """NumPy's median is np.mean of the middle entries: a sum from +0.0 (a middle -0.0 gives
    +0.0; toolkit gave -0.0), in float32 for float16 data (toolkit's float16 sum of two 65504s
    overflowed to inf)."""
    cases = [np.array([-0.0, 0.0] * 9 + [1.0]), np.array([-0.0, -0.0]),
             np.array([65504, 65504, 1, 1], np.float16), np.array([60000, 65504], np.float16),
             np.array([[np.nan, -0.0, -0.0, 1.0], [-0.0, np.nan, np.nan, np.nan]])]
    for x in cases:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _same(tk.jit(lambda v: np.median(v, axis=-1), backend=backend)(x),
                  np.median(x, axis=-1))
            _same(tk.jit(lambda v: np.nanmedian(v, axis=-1), backend=backend)(x),
                  np.nanmedian(x, axis=-1))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("method", ["linear", "lower", "higher", "midpoint", "nearest"])
@pytest.mark.parametrize("q", [0.5, [0.0, 0.25, 1.0], np.float32(0.3), [0, 1]])
def test_static_quantiles_read_numpys_partition(backend, method, q):
    x = _data(np.float64, (5, 12), seed=1)
    x[2, 3] = np.nan
    fn = lambda v: (np.quantile(v, q, axis=1, method=method),  # noqa: E731
                    np.quantile(v, q, axis=None, method=method))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = fn(x)
        got = tk.jit(fn, backend=backend)(x)
    for g, w in zip(got, want):
        _same(g, w)


def test_quantile_partitions_at_numpys_positions():
    """The compiled program partitions (no sort) at the positions NumPy's _quantile picks."""
    x = _data(np.float32, (40,))
    text = tk.jit(lambda v: np.percentile(v, [1, 99])).lower(x).as_text()
    assert 'custom_call_target="numpy.partition"' in text and " sort(" not in text
    # NumPy: virtual indices 39 * [0.01, 0.99] = [0.39, 38.61]; the entries either side of
    # them, the first and the last, as np.unique leaves them
    assert json.loads(_config(text)) == {"kth": [-1, 0, 1, 38, 39], "axis": 0}


def _config(text: str) -> str:
    start = text.index("backend_config=") + len('backend_config="')
    end = text.index('"', text.index("axis", start) + 7)
    return text[start:end].replace('\\"', '"')


def test_traced_quantiles_and_nan_functions_still_sort():
    x = _data(np.float64, (30,))
    q = np.array([0.2, 0.7])
    _same(tk.jit(lambda v, p: np.quantile(v, p))(x, q), np.quantile(x, q))
    x[4] = np.nan
    _same(tk.jit(lambda v: np.nanmedian(v))(x), np.nanmedian(x))
    assert " sort(" in tk.jit(lambda v: np.nanmedian(v)).lower(x).as_text()


def test_partition_errors_are_numpys():
    x = np.arange(5.0)
    with pytest.raises(UserValueError, match=r"kth\(=5\) out of bounds \(5\)"):
        tk.jit(lambda v: np.partition(v, 5))(x)
    with pytest.raises(UserTypeError, match="Partition index must be integer"):
        tk.jit(lambda v: np.partition(v, 1.5))(x)
    for call in (lambda: np.partition(x, 5), lambda: np.partition(x, 1.5)):
        with pytest.raises((ValueError, TypeError)):
            call()  # (NumPy raises too)


def test_parsed_partition_with_bad_positions_is_rejected():
    text = ('HloModule m\n\nENTRY %main (x: f64[4]) -> f64[4] {\n'
            '  %x = f64[4]{0} parameter(0)\n'
            '  ROOT %p = f64[4]{0} custom-call(%x), custom_call_target="numpy.partition", '
            'backend_config="{\\"kth\\":[4],\\"axis\\":0}"\n}\n')
    with pytest.raises(ValueError, match=r"numpy.partition: kth\(=4\) out of bounds \(4\)"):
        tk.hlo.parse(text)


def test_partition_derivatives_follow_numpys_permutation():
    x = _data(np.float64, (4, 9), seed=2) + np.linspace(0, 0.5, 36).reshape(4, 9)  # no ties
    weights = np.arange(36.0).reshape(4, 9)

    def f(v):
        return (np.partition(v, [2, 6], axis=1) * weights).sum() + np.percentile(v, 30)

    order = np.argpartition(x, [2, 6], axis=1)
    want = np.zeros_like(x)
    np.put_along_axis(want, order, weights, axis=1)
    k = 0.3 * (x.size - 1)  # the percentile's two entries and their weights
    flat = np.argsort(x, axis=None)
    want.flat[flat[int(k)]] += 1 - (k - int(k))
    want.flat[flat[int(k) + 1]] += k - int(k)
    np.testing.assert_allclose(tk.grad(f)(x), want, atol=1e-12)
    _, tangent = tk.jvp(lambda v: np.partition(v, 3), (x,), (weights,))
    np.testing.assert_array_equal(tangent, np.take_along_axis(weights, np.argpartition(x, 3),
                                                              axis=-1))


def test_batched_partition_is_numpys():
    x = _data(np.float64, (6, 11))
    _same(tk.vmap(lambda r: np.partition(r, 4))(x), np.partition(x, 4))
    _same(tk.jit(tk.vmap(np.median))(x), np.median(x, axis=1))


# ---- library calls: fresh results, unread results skipped ----------------------------------------
def test_argsort_gathers_only_the_indices(monkeypatch):
    x = _data(np.float64, (5, 8))
    module = tk.jit(lambda v: np.argsort(v, axis=1)).lower(x).compile().optimized_hlo
    sort = next(i for i in module.entry.instructions if i.opcode == "sort")
    read = tuple_reads(module)[id(sort)]
    assert read == frozenset({1})
    gathered = []
    real = np.take_along_axis
    monkeypatch.setattr(np, "take_along_axis", lambda a, *r, **k: gathered.append(a.dtype)
                        or real(a, *r, **k))
    keys, order = library_runner(sort, read)([x, np.broadcast_to(np.arange(8), (5, 8)).copy()])
    np.testing.assert_array_equal(order, np.argsort(x, axis=1))
    assert gathered == [] and keys.shape == x.shape  # the keys: not computed
    assert tk.jit(lambda v: np.argsort(v, axis=1))(x).tolist() == np.argsort(x, axis=1).tolist()


def test_fresh_results_copy_only_what_an_operand_or_a_view_would_share():
    given = np.arange(12.0).reshape(3, 4)
    own = np.ones(3)
    leaves = fresh_results((own, (given[1], given.T)), [given])
    assert leaves[0] is own  # the routine's own array: handed over
    assert not np.shares_memory(leaves[1], given) and not np.shares_memory(leaves[2], given)
    np.testing.assert_array_equal(leaves[2], given.T)
    assert all(leaf.flags.c_contiguous and leaf.flags.writeable for leaf in leaves)


def test_sorted_results_are_the_programs_own():
    """A sort's result, handed over without a copy, is written in place later without touching
    the argument."""
    x = _data(np.float64, (20,))
    keep = x.copy()

    def f(v):
        s = np.sort(v)
        s[0] = 100.0
        return s, v

    s, v = tk.jit(f)(x)
    want = np.sort(keep)
    want[0] = 100.0
    _same(s, want)
    _same(v, keep)
    _same(x, keep)


def test_sort_wanted_none_computes_everything():
    x = _data(np.int64, (3, 6))
    comparator = tk.jit(lambda v: np.argsort(v)).lower(x).compile().optimized_hlo
    sort = next(i for i in comparator.entry.instructions if i.opcode == "sort")
    iota = np.broadcast_to(np.arange(6), (3, 6)).copy()
    keys, order = sorting.sort([x, iota], 1, sort.attrs["to_apply"], None, stable=False)
    np.testing.assert_array_equal(keys, np.sort(x, axis=1))
    np.testing.assert_array_equal(order, np.argsort(x, axis=1))


def test_partitions_on_the_gpu_run_numpys_routine_on_the_host():
    x = _data(np.float64, (6, 40), seed=4)
    fn = lambda v: (np.partition(v, [3, 20]), np.argpartition(v, 4, axis=0),  # noqa: E731
                    np.median(v, axis=1), np.percentile(v, [5, 95]))
    for got, want in zip(tk.jit(fn, backend="gpu-simulated")(x), fn(x)):
        _same(np.asarray(got), want)


def test_a_sort_with_two_position_results_gives_each_its_own_buffer():
    """Keys already in order with an iota: both results are the same order, which the runner
    must not hand over twice (a write into one changed the other)."""
    m = tk.hlo.parse("""
HloModule m
cmp {
  p0 = s64[] parameter(0)
  p1 = s64[] parameter(1)
  p2 = s64[] parameter(2)
  p3 = s64[] parameter(3)
  ROOT lt = pred[] compare(p0, p1), direction=LT
}
ENTRY e {
  k = s64[5] parameter(0)
  v = s64[5] parameter(1)
  s = (s64[5], s64[5]) sort(k, v), dimensions={0}, to_apply=cmp
  a = s64[5] get-tuple-element(s), index=0
  b = s64[5] get-tuple-element(s), index=1
  u = s64[1] constant({77})
  z = s64[] constant(0)
  d = s64[5] dynamic-update-slice(a, u, z)
  ROOT t = (s64[5], s64[5], s64[5]) tuple(d, b, a)
}""")
    k = np.arange(5)
    for backend in BACKENDS:
        d, b, a = tk.hlo.run(m, k, k.copy(), backend=backend)
        assert d.tolist() == [77, 1, 2, 3, 4] and b.tolist() == a.tolist() == [0, 1, 2, 3, 4]
        assert not np.shares_memory(a, b) and not np.shares_memory(a, d)


def test_partition_argument_errors_are_numpys():
    x = np.arange(5.0)
    cases = [(lambda v: np.partition(v, 0, kind="quicksort"),
              "select kind must be 'introselect' \\(got 'quicksort'\\)"),
             (lambda v: np.partition(v, True), "Booleans unacceptable as partition index"),
             (lambda v: np.partition(v, [[1]]), "setting an array element with a sequence")]
    for fn, message in cases:
        with pytest.raises(ValueError, match=message):
            fn(x)
        with pytest.raises(UserValueError, match=message):
            tk.jit(fn)(x)


def test_order_statistic_errors_are_numpys():
    x = np.arange(5.0)
    cases = [(lambda v: np.quantile(v, np.nan), "Quantiles must be in the range"),
             (lambda v: np.quantile(v, np.zeros((1, 1, 1))), "q must be a scalar or 1d"),
             (lambda v: np.median(v[0], axis=0),
              "axis 0 is out of bounds for array of dimension 0")]
    for fn, message in cases:
        with pytest.raises(ValueError, match=message):
            fn(x)
        with pytest.raises(ValueError, match=message):
            tk.jit(fn)(x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_quantiles_past_the_end_take_numpys_side(backend):
    """NumPy's gamma counts from the lower index after its bounds fix (-1): past the end the
    lerp takes b's side, so one -0.0 stays -0.0 and inf - inf gives NaN, as NumPy's."""
    cases = [([-0.0], 0.1), ([-0.0, -0.0, 2.0, -0.0], 1.0), ([1.0, np.inf], 1.0),
             ([np.inf, np.inf], [0.3, 1.0])]
    for x, q in cases:
        x = np.array(x)
        fn = lambda v: (np.quantile(v, q), np.nanquantile(v, q))  # noqa: E731
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = fn(x)
            got = tk.jit(fn, backend=backend, on_recompile="ignore")(x)
        for g, w in zip(got, want):
            _same(g, w)
