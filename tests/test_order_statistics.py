"""np.median, np.quantile, np.percentile and their nan-versions against NumPy, bit for bit and
type for type: odd and even lengths, every method, NaN and infinite entries, Python, float32
and array quantiles (NumPy's weak promotion), integer and float16 data. The median of an odd
number of entries was the mean of the middle one and the one after it until this file."""
import warnings

import numpy as np
import pytest

import toolkit as tk

BACKENDS = ["interpreter", "cpu"]  # the large grids run on the CPU only: the frontend is the same
METHODS = ["linear", "lower", "higher", "midpoint", "nearest"]
ROWS = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, 6.0], [np.nan, np.nan, np.nan], [1.0, 2.0, np.inf],
                 [np.inf, np.inf, 1.0], [-np.inf, 0.0, 1.0], [2.0, -0.0, 0.0]])


def same(fn, *args, backend):
    """``fn``'s results (one, or a tuple: one compile for several checks) are NumPy's."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NumPy warns about all-NaN slices and inf - inf
        want = fn(*args)
        got = tk.jit(fn, backend=backend, on_recompile="ignore")(*args)
    for g, w in zip(
        got if isinstance(want, tuple) else (got,), want if isinstance(want, tuple) else (want,)
    ):
        assert np.asarray(g).dtype == np.asarray(w).dtype, (
            np.asarray(g).dtype,
            np.asarray(w).dtype,
        )
        assert np.shape(g) == np.shape(w)
        np.testing.assert_array_equal(g, w)  # NaN equals NaN here


@pytest.mark.parametrize("backend", ["cpu"])
@pytest.mark.parametrize(
    "shape, axis",
    [((6, 5), 1), ((6, 5), 0), ((7,), None), ((1,), 0), ((5, 7, 3), (0, 2)), ((3, 1), 1)],
)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16, np.uint8])
def test_median_is_numpys(backend, shape, axis, dtype):
    x = (np.random.default_rng(0).standard_normal(shape) * 40).astype(dtype)
    same(
        lambda v: (np.median(v, axis=axis), np.median(v, axis=axis, keepdims=True)),
        x,
        backend=backend,
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_median_and_nanmedian_of_nan_and_infinite_rows(backend):
    same(
        lambda v: (np.median(v, axis=1), np.nanmedian(v, axis=1), np.nanmedian(v)),
        ROWS,
        backend=backend,
    )


@pytest.mark.parametrize("backend", ["cpu"])
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize(
    "q",
    [2 / 3, 1.0, np.float32(0.3), [0.0, 0.1, 0.5, 0.9], np.array([0.25, 0.75], np.float32)],
    ids=["two-thirds", "one", "float32", "list", "float32-array"],
)
def test_quantiles_of_every_method_are_numpys(backend, method, q):
    x = (np.random.default_rng(1).standard_normal((7, 9)) * 100).astype(np.float32)
    same(
        lambda rows, v, ints: (
            np.quantile(rows, q, axis=1, method=method),
            np.nanquantile(rows, q, axis=1, method=method),
            np.quantile(v, q, axis=0, method=method, keepdims=True),
            np.quantile(ints, q, method=method),
        ),
        ROWS,
        x,
        x.astype(np.int64),
        backend=backend,
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_percentiles_keep_numpys_types(backend):
    x = (np.random.default_rng(2).standard_normal((5, 8)) * 10).astype(np.float32)
    qs = (50, 12.5, np.float32(70.0), [5, 95], np.float16(30))
    same(lambda v: tuple(np.percentile(v, q, axis=1) for q in qs) + tuple(
        np.nanpercentile(v, q, axis=0, method="midpoint") for q in qs), x, backend=backend)
    same(lambda v: np.percentile(v, 40), x.astype(np.float16), backend=backend)


def test_boolean_data_raise_numpys_error_unless_the_method_takes_an_entry():
    b = np.array([True, False, True, True])
    with pytest.raises(TypeError, match="boolean subtract"):
        tk.jit(lambda v: np.quantile(v, 0.5))(b)
    same(lambda v: np.quantile(v, 0.5, method="lower"), b, backend="cpu")


@pytest.mark.parametrize("seed", range(2))
def test_random_order_statistics_match_numpy(seed):
    rng = np.random.default_rng(seed)
    for _ in range(10):
        dtype = rng.choice([np.float16, np.float32, np.float64, np.int8, np.int64, np.uint16])
        shape = tuple(int(v) for v in rng.integers(1, 8, size=rng.integers(1, 4)))
        x = (rng.standard_normal(shape) * 50).astype(dtype)
        if x.dtype.kind == "f" and rng.random() < 0.4:
            x.flat[rng.integers(0, x.size)] = rng.choice([np.nan, np.inf, -np.inf])
        method = str(rng.choice(METHODS))
        q = [0.5, float(rng.random()), np.float32(rng.random()), [0.1, 0.9, 1.0]][
            rng.integers(0, 4)
        ]
        axis = None if rng.random() < 0.3 else int(rng.integers(0, len(shape)))
        fn = [
            lambda v: np.quantile(v, q, axis=axis, method=method),
            lambda v: np.nanquantile(v, q, axis=axis, method=method),
            lambda v: np.median(v, axis=axis),
            lambda v: np.nanmedian(v, axis=axis, keepdims=True),
        ][rng.integers(0, 4)]
        same(fn, x, backend="cpu")
