"""NumPy's API under jit, one case per function, each checked against NumPy itself; and the
share of the NumPy callables that jax.numpy also provides that toolkit.numpy supports.

The list of those callables (tests/data/jax_numpy_callables.txt) was taken from jax 0.10.2:
the public callables of jax.numpy that NumPy also has, dtype classes left out."""
import pathlib
import warnings

import numpy as np
import pytest

import toolkit as tk
import toolkit.numpy as tnp
from toolkit.frontend.more_functions import STATIC_FUNCTIONS
from toolkit.frontend.registry import EXPORTS
from toolkit.frontend.ufuncs import UFUNCS

CALLABLES = (pathlib.Path(__file__).parent / "data" / "jax_numpy_callables.txt").read_text().split()
# NumPy callables that cannot be part of a compiled program, and why
NOT_TRACEABLE = {
    "load": "file I/O",
    "save": "file I/O",
    "savez": "file I/O",
    "fromfile": "file I/O",
    "frombuffer": "reads a Python buffer",
    "fromstring": "parses text",
    "fromiter": "consumes a Python iterator",
    "from_dlpack": "imports a foreign buffer",
    "frompyfunc": "a Python function per element",
    "array_repr": "prints values",
    "array_str": "prints values",
    "einsum_path": "plans from concrete operands",
    "trim_zeros": "output size depends on the data",
    "polydiv": "trims the remainder by its values",
    "roots": "trims leading zero coefficients by value; non-symmetric eigenvalues",
}


def test_share_of_numpy_api_that_jax_numpy_also_has():
    supported = [n for n in CALLABLES if hasattr(tnp, n)]
    missing = sorted(set(CALLABLES) - set(supported))
    share = len(supported) / len(CALLABLES)
    print(
        f"toolkit.numpy supports {len(supported)} of {len(CALLABLES)} ({share:.0%}); missing: "
        f"{' '.join(missing)}"
    )
    assert share >= 0.85, f"only {share:.0%}; missing: {missing}"
    assert not set(NOT_TRACEABLE) & set(supported)


rng = np.random.default_rng(0)
X = rng.standard_normal((4, 6))
XI = rng.integers(-3, 3, (4, 6)).astype(np.int32)
B = rng.random(6) > 0.5
N = np.where(X > 0.8, np.nan, X)
N[2, :2] = np.nan
S = np.sort(rng.standard_normal(9))
ARGS = (X, XI, B, N, S)

# name -> function of (x, xi, b, n, s); the name is the function under test
CASES = {
    # ufuncs beyond arithmetic
    "arcsin": lambda x, xi, b, n, s: np.arcsin(x / 4),
    "arccos": lambda x, xi, b, n, s: np.arccos(x / 4),
    "arctan": lambda x, xi, b, n, s: np.arctan(x),
    "sinh": lambda x, xi, b, n, s: np.sinh(x * 3),
    "cosh": lambda x, xi, b, n, s: np.cosh(x * 3),
    "arcsinh": lambda x, xi, b, n, s: np.arcsinh(x * 1e3),
    "arccosh": lambda x, xi, b, n, s: np.arccosh(1 + np.abs(x) * 10),
    "arctanh": lambda x, xi, b, n, s: np.arctanh(x / 4),
    "hypot": lambda x, xi, b, n, s: np.hypot(x, xi),
    "copysign": lambda x, xi, b, n, s: np.copysign(xi, x),
    "heaviside": lambda x, xi, b, n, s: np.heaviside(xi, 0.5),
    "logaddexp": lambda x, xi, b, n, s: np.logaddexp(x, xi),
    "logaddexp2": lambda x, xi, b, n, s: np.logaddexp2(x, x[0]),
    "deg2rad": lambda x, xi, b, n, s: np.deg2rad(xi),
    "rad2deg": lambda x, xi, b, n, s: np.rad2deg(x),
    "degrees": lambda x, xi, b, n, s: np.degrees(x),
    "radians": lambda x, xi, b, n, s: np.radians(x),
    "fabs": lambda x, xi, b, n, s: np.fabs(xi),
    "float_power": lambda x, xi, b, n, s: np.float_power(np.abs(x), xi),
    "ldexp": lambda x, xi, b, n, s: np.ldexp(x, xi),
    "nextafter": lambda x, xi, b, n, s: np.nextafter(x, xi),
    "spacing": lambda x, xi, b, n, s: np.spacing(x),
    "signbit": lambda x, xi, b, n, s: np.signbit(n),
    "modf": lambda x, xi, b, n, s: np.modf(x * 3),
    "gcd": lambda x, xi, b, n, s: np.gcd(xi, 6),
    "lcm": lambda x, xi, b, n, s: np.lcm(xi, 4),
    "conjugate": lambda x, xi, b, n, s: np.conjugate(x),
    "bitwise_count": lambda x, xi, b, n, s: (
        np.bitwise_count(xi),
        np.bitwise_count(xi.astype(np.uint16) * 977),
    ),
    # joining, splitting, reordering
    "hstack": lambda x, xi, b, n, s: np.hstack([x, xi]),
    "vstack": lambda x, xi, b, n, s: np.vstack([x[0], n[1]]),
    "dstack": lambda x, xi, b, n, s: np.dstack([x, x]),
    "column_stack": lambda x, xi, b, n, s: np.column_stack([x[0], xi[1]]),
    "row_stack": lambda x, xi, b, n, s: np.vstack([x, x]),
    "block": lambda x, xi, b, n, s: np.block([[x, x[:, :2]], [x[:1], x[:1, :2]]]),
    "split": lambda x, xi, b, n, s: tuple(np.split(x, 3, axis=1)),
    "array_split": lambda x, xi, b, n, s: tuple(np.array_split(x, 4, axis=1)),
    "hsplit": lambda x, xi, b, n, s: tuple(np.hsplit(x, [1, 4])),
    "vsplit": lambda x, xi, b, n, s: tuple(np.vsplit(x, 2)),
    "dsplit": lambda x, xi, b, n, s: tuple(np.dsplit(x.reshape(2, 2, 6), 3)),
    "unstack": lambda x, xi, b, n, s: np.unstack(x, axis=1),
    "tile": lambda x, xi, b, n, s: np.tile(x, (2, 1, 3)),
    "repeat": lambda x, xi, b, n, s: np.repeat(x, [1, 0, 2, 3], axis=0),
    "append": lambda x, xi, b, n, s: np.append(x, xi[0]),
    "delete": lambda x, xi, b, n, s: np.delete(x, [0, 2], axis=1),
    "insert": lambda x, xi, b, n, s: np.insert(x, [1, 3], x[:, :2], axis=1),
    "resize": lambda x, xi, b, n, s: np.resize(x, (5, 7)),
    "roll": lambda x, xi, b, n, s: np.roll(x, (1, -2), axis=(0, 1)),
    "rot90": lambda x, xi, b, n, s: np.rot90(x, 3),
    "fliplr": lambda x, xi, b, n, s: np.fliplr(x),
    "flipud": lambda x, xi, b, n, s: np.flipud(x),
    "atleast_1d": lambda x, xi, b, n, s: np.atleast_1d(x[0, 0]),
    "atleast_2d": lambda x, xi, b, n, s: np.atleast_2d(x[0]),
    "atleast_3d": lambda x, xi, b, n, s: np.atleast_3d(x[0]),
    "broadcast_arrays": lambda x, xi, b, n, s: np.broadcast_arrays(x, x[0]),
    "rollaxis": lambda x, xi, b, n, s: np.rollaxis(x[None], 2),
    "permute_dims": lambda x, xi, b, n, s: np.permute_dims(x, (1, 0)),
    "matrix_transpose": lambda x, xi, b, n, s: np.matrix_transpose(x),
    # triangles, grids, products
    "tri": lambda x, xi, b, n, s: np.tri(3, 5, 1) + x[0, 0],
    "tril": lambda x, xi, b, n, s: np.tril(x, 1),
    "triu": lambda x, xi, b, n, s: np.triu(x, -1),
    "diag": lambda x, xi, b, n, s: (np.diag(x, 2), np.diag(x[0], -1)),
    "diagonal": lambda x, xi, b, n, s: np.diagonal(x.reshape(2, 3, 4), 1, 1, 2),
    "diagflat": lambda x, xi, b, n, s: np.diagflat(x[:2, :2], 1),
    "trace": lambda x, xi, b, n, s: np.trace(xi, -1),
    "vander": lambda x, xi, b, n, s: np.vander(x[0], 4),
    "kron": lambda x, xi, b, n, s: np.kron(x[:2, :2], xi[:2]),
    "cross": lambda x, xi, b, n, s: np.cross(x[:, :3], x[:, 3:]),
    "meshgrid": lambda x, xi, b, n, s: np.meshgrid(x[0], x[1, :3]),
    "linspace": lambda x, xi, b, n, s: np.linspace(x[0, 0], x[1], 5, axis=1),
    "logspace": lambda x, xi, b, n, s: np.logspace(x[0, 0], 2.0, 5),
    "geomspace": lambda x, xi, b, n, s: np.geomspace(np.abs(x[0, 0]) + 1, 100.0, 6),
    "vecdot": lambda x, xi, b, n, s: np.vecdot(x, x),
    "matvec": lambda x, xi, b, n, s: np.matvec(x[:, :4], x[0, :4]),
    "vecmat": lambda x, xi, b, n, s: np.vecmat(x[0, :4], x[:4]),
    "identity": lambda x, xi, b, n, s: np.identity(3) * x[0, 0],
    "ix_": lambda x, xi, b, n, s: x[np.ix_((xi[0, :3] + 3) % 4, (xi[1, :2] + 3) % 6)],
    # scans and differences
    "cumsum": lambda x, xi, b, n, s: (np.cumsum(x, axis=1), np.cumsum(b)),
    "cumprod": lambda x, xi, b, n, s: np.cumprod(xi, axis=0),
    "nancumsum": lambda x, xi, b, n, s: np.nancumsum(n, axis=0),
    "nancumprod": lambda x, xi, b, n, s: np.nancumprod(n),
    "cumulative_sum": lambda x, xi, b, n, s: np.cumulative_sum(x, axis=1, include_initial=True),
    "cumulative_prod": lambda x, xi, b, n, s: np.cumulative_prod(xi[0]),
    "diff": lambda x, xi, b, n, s: (np.diff(x, 2, axis=0), np.diff(b)),
    "ediff1d": lambda x, xi, b, n, s: np.ediff1d(x, to_begin=[9.0]),
    "gradient": lambda x, xi, b, n, s: np.gradient(x),
    "trapezoid": lambda x, xi, b, n, s: np.trapezoid(x[0], x=np.arange(6.0) ** 2),
    "unwrap": lambda x, xi, b, n, s: np.unwrap(np.cumsum(x[0]) * 3),
    "convolve": lambda x, xi, b, n, s: np.convolve(x[0], x[1, :4], "same"),
    "correlate": lambda x, xi, b, n, s: np.correlate(x[0, :3], x[1], "full"),
    "searchsorted": lambda x, xi, b, n, s: np.searchsorted(s, x, side="right"),
    "digitize": lambda x, xi, b, n, s: np.digitize(x, s[:5]),
    "interp": lambda x, xi, b, n, s: np.interp(x, s, np.arange(9.0) ** 2),
    "frexp": lambda x, xi, b, n, s: (
        np.frexp(x * 1e-310),
        np.frexp(np.append(x[0], [0.0, -0.0, np.inf])),
    ),
    "i0": lambda x, xi, b, n, s: (np.i0(x * 5), np.i0(xi)),
    "packbits": lambda x, xi, b, n, s: (np.packbits(xi, axis=1), np.packbits(b, bitorder="little")),
    "unpackbits": lambda x, xi, b, n, s: np.unpackbits(
        np.packbits(xi > 0, axis=0), axis=0, count=3
    ),
    "histogram2d": lambda x, xi, b, n, s: np.histogram2d(
        x[0], x[1], bins=(3, [-1.0, 0.0, 2.0]), density=True
    ),
    "histogramdd": lambda x, xi, b, n, s: (lambda h, e: (h, *e))(
        *np.histogramdd(
            x[:3].T, bins=(2, 3, 4), range=[(-2, 2), None, (-1, 3)], weights=np.arange(6.0)
        )
    ),
    "histogram": lambda x, xi, b, n, s: np.histogram(x, 5),
    "histogram_bin_edges": lambda x, xi, b, n, s: np.histogram_bin_edges(x, 3),
    # statistics
    "nansum": lambda x, xi, b, n, s: np.nansum(n, axis=1),
    "nanprod": lambda x, xi, b, n, s: np.nanprod(n, axis=0),
    "nanmax": lambda x, xi, b, n, s: np.nanmax(n, axis=1),
    "nanmin": lambda x, xi, b, n, s: np.nanmin(n),
    "nanmean": lambda x, xi, b, n, s: np.nanmean(n, axis=1),
    "nanvar": lambda x, xi, b, n, s: np.nanvar(n, axis=0, ddof=1),
    "nanstd": lambda x, xi, b, n, s: np.nanstd(n),
    "nanargmax": lambda x, xi, b, n, s: np.nanargmax(n[:2], axis=1),
    "nanargmin": lambda x, xi, b, n, s: np.nanargmin(n),
    "average": lambda x, xi, b, n, s: np.average(x, axis=1, weights=np.arange(6.0)),
    "cov": lambda x, xi, b, n, s: np.cov(x),
    "corrcoef": lambda x, xi, b, n, s: np.corrcoef(x[0], x[1]),
    "ptp": lambda x, xi, b, n, s: np.ptp(x, axis=0),
    "count_nonzero": lambda x, xi, b, n, s: np.count_nonzero(xi, axis=1),
    "median": lambda x, xi, b, n, s: (np.median(x, axis=1), np.median(n)),
    "nanmedian": lambda x, xi, b, n, s: np.nanmedian(n, axis=1),
    "percentile": lambda x, xi, b, n, s: np.percentile(x, [10, 50, 90], axis=1),
    "quantile": lambda x, xi, b, n, s: np.quantile(xi, 0.25, axis=0),
    "nanpercentile": lambda x, xi, b, n, s: np.nanpercentile(n, 40, axis=0),
    "nanquantile": lambda x, xi, b, n, s: np.nanquantile(n, [0.2, 0.8]),
    # comparison, rounding, selection
    "isclose": lambda x, xi, b, n, s: np.isclose(n, n + 1e-9, equal_nan=True),
    "allclose": lambda x, xi, b, n, s: np.allclose(x, x * (1 + 1e-7)),
    "array_equal": lambda x, xi, b, n, s: np.array_equal(n, n, equal_nan=True),
    "array_equiv": lambda x, xi, b, n, s: np.array_equiv(x, x[0]),
    "round": lambda x, xi, b, n, s: (np.round(x * 100, 1), np.round(xi * 37, -1)),
    "fix": lambda x, xi, b, n, s: (np.fix(x * 3), np.fix(-np.abs(x) * 0.1), np.fix(xi), np.fix(n)),
    "around": lambda x, xi, b, n, s: np.around(x, 2),
    "nan_to_num": lambda x, xi, b, n, s: np.nan_to_num(n, nan=-1.0),
    "isposinf": lambda x, xi, b, n, s: np.isposinf(1 / x),
    "isneginf": lambda x, xi, b, n, s: np.isneginf(-1 / x),
    "isreal": lambda x, xi, b, n, s: np.isreal(x),
    "iscomplex": lambda x, xi, b, n, s: np.iscomplex(x),
    "real": lambda x, xi, b, n, s: np.real(x) + 0,
    "imag": lambda x, xi, b, n, s: np.imag(x) + 0,
    "angle": lambda x, xi, b, n, s: np.angle(x, deg=True),
    "select": lambda x, xi, b, n, s: np.select([x > 0.5, x < -0.5], [x, x * 2], default=-1.0),
    "choose": lambda x, xi, b, n, s: np.choose(
        np.abs(xi[:, :3]) % 3, [x[:, :3], x[:, 3:], x[:, :3] * 10]
    ),
    "compress": lambda x, xi, b, n, s: np.compress([True, False, True, True], x, axis=0),
    "extract": lambda x, xi, b, n, s: np.extract(np.arange(24).reshape(4, 6) % 5 == 0, x),
    "piecewise": lambda x, xi, b, n, s: np.piecewise(
        x, [x < 0, x > 0.5], [lambda v: -v, lambda v: v * 2, 7.0]
    ),
    "sinc": lambda x, xi, b, n, s: np.sinc(np.append(x[0], 0.0)),
    "polyval": lambda x, xi, b, n, s: np.polyval(x[0], x[1]),
    "polyadd": lambda x, xi, b, n, s: np.polyadd(x[0, :3], x[1]),
    "polysub": lambda x, xi, b, n, s: np.polysub(x[0], x[1, :2]),
    "polymul": lambda x, xi, b, n, s: np.polymul(x[0, :3], x[1, :2]),
    "polyder": lambda x, xi, b, n, s: np.polyder(x[0], 2),
    "polyint": lambda x, xi, b, n, s: np.polyint(x[0, :3], 2, k=[1.0, 2.0]),
    "poly": lambda x, xi, b, n, s: np.poly(x[0, :3]),
    "polyfit": lambda x, xi, b, n, s: (
        np.polyfit(s, s**3 - s, 3),
        np.polyfit(x[0], x[1:].T, 2, w=np.arange(1.0, 7.0)),
    ),
    # sorting and indexing helpers
    "sort": lambda x, xi, b, n, s: (np.sort(n, axis=0), np.sort(xi, axis=None)),
    "argsort": lambda x, xi, b, n, s: np.argsort(n, axis=0, kind="stable"),
    "lexsort": lambda x, xi, b, n, s: np.lexsort((x[0], xi[0])),
    "partition": lambda x, xi, b, n, s: np.partition(x, 2)[:, 2],
    "argpartition": lambda x, xi, b, n, s: np.take_along_axis(x, np.argpartition(x, 2), axis=-1)[
        :, 2
    ],
    "isin": lambda x, xi, b, n, s: np.isin(xi, [0, 2]),
    "ravel_multi_index": lambda x, xi, b, n, s: np.ravel_multi_index((xi, xi), (7, 5), mode="wrap"),
    "unravel_index": lambda x, xi, b, n, s: np.unravel_index(xi + 3, (2, 3)),
    "apply_along_axis": lambda x, xi, b, n, s: np.apply_along_axis(lambda r: r * r.sum(), 1, x),
    "apply_over_axes": lambda x, xi, b, n, s: np.apply_over_axes(np.sum, x, [0, 1]),
    "take": lambda x, xi, b, n, s: np.take(x, xi, axis=1, mode="wrap"),
    "take_along_axis": lambda x, xi, b, n, s: np.take_along_axis(
        x, np.argsort(x, axis=1, kind="stable"), axis=1
    ),
    "result_type": lambda x, xi, b, n, s: x.astype(np.result_type(xi, 1.0)),
    "can_cast": lambda x, xi, b, n, s: x + np.can_cast(xi, np.float64),
}


def _check(fn, backend="interpreter"):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = fn(*ARGS)
        got = tk.jit(fn, backend=backend)(*ARGS)
    got = got if isinstance(got, (tuple, list)) else (got,)
    want = want if isinstance(want, (tuple, list)) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-13, equal_nan=True)


@pytest.mark.parametrize("name", sorted(CASES))
def test_function_matches_numpy(name):
    _check(CASES[name])


@pytest.mark.parametrize(
    "name",
    [
        "cumsum",
        "convolve",
        "searchsorted",
        "histogram",
        "median",
        "sort",
        "unwrap",
        "nanvar",
        "cross",
        "insert",
        "interp",
        "gcd",
        "arcsinh",
        "percentile",
        "lexsort",
    ],
)
def test_function_matches_numpy_on_cpu(name):
    _check(CASES[name], "cpu")


def test_every_function_added_here_has_a_case():
    """The functions and ufuncs added for API breadth each have a case above (the ones that
    predate this table are tested in test_numpy_functions/test_ufuncs)."""
    from toolkit.frontend import (comparisons, complex_numbers, convolution, differences,
                                  float_functions, histograms, joining, matrices, more_functions,
                                  nan_reductions, polynomials, rounding, scans, searching,
                                  selection, sorting, statistics, ufuncs_math)

    modules = (histograms, joining, matrices, more_functions, scans, differences, convolution,
               searching, sorting, nan_reductions, statistics, comparisons, rounding,
               float_functions, selection, polynomials, complex_numbers)
    # where and clip (selection) are tested in test_numpy_functions, sort_complex in test_complex
    older = {"where", "clip", "sort_complex"}
    added = {
        name
        for name, fn in EXPORTS.items()
        if getattr(fn, "__module__", "") in {m.__name__ for m in modules}
    }
    added |= {u.__name__ for u, impl in UFUNCS.items() if impl.__module__ == ufuncs_math.__name__}
    size_functions = {
        "unique",
        "unique_values",
        "unique_counts",
        "unique_inverse",
        "unique_all",
        "nonzero",
        "flatnonzero",
        "argwhere",
        "union1d",
        "intersect1d",
        "setdiff1d",
        "setxor1d",
        "bincount",
        # tested in test_indexing / below
        "place",
        "fill_diagonal",
        "put",
        "put_along_axis",
    }
    untested = sorted(
        added
        - set(CASES)
        - size_functions
        - set(STATIC_FUNCTIONS)
        - older
        - {
            "diag_indices_from",
            "tril_indices_from",
            "triu_indices_from",
            "isrealobj",
            "iscomplexobj",
            "conj",
            "broadcast_to",
        }
    )
    assert not untested, untested


def test_histogramdd_raises_numpys_error_for_a_non_finite_autodetected_range():
    f = tk.jit(lambda a, c: np.histogram2d(a, c, bins=3))
    f(np.array([1.0, 2.0]), np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match="not finite"):
        f(np.array([1.0, np.inf]), np.array([0.0, 1.0]))


def _weighted_mean_by_bin(data, radius, bins):
    return np.histogram(radius, bins, weights=data)[0] / np.histogram(radius, bins)[0]


def test_a_bin_count_passed_as_an_argument_is_a_count_not_edges():
    """npbench's azimint_hist passes its bin count as an argument: a traced integer scalar
    was taken for an array of edges (an IndexError). The count sets the result's shape, so
    the call is specialised on its value; a float count raises NumPy's error."""
    rng = np.random.default_rng(0)
    data, radius = rng.random(500), rng.random(500)
    f = tk.jit(_weighted_mean_by_bin)
    for bins in (100, 7, np.int64(7)):
        np.testing.assert_array_equal(f(data, radius, bins),
                                      _weighted_mean_by_bin(data, radius, bins))
    with pytest.raises(TypeError, match="`bins` must be an integer"):
        np.histogram(radius, 2.5)
    with pytest.raises(TypeError, match="`bins` must be an integer"):
        f(data, radius, 2.5)
    pairs = tk.jit(lambda x, y, bins: np.histogram2d(x, y, bins)[0])
    np.testing.assert_array_equal(pairs(data, radius, 4), np.histogram2d(data, radius, 4)[0])
    for call in (np.histogram2d, tk.jit(np.histogram2d)):
        with pytest.raises(TypeError, match=r"`bins\[0\]` must be an integer, when a scalar"):
            call(data, radius, 2.5)
        with pytest.raises(ValueError, match=r"`bins\[0\]` must be positive"):  # (checked first)
            call(data, radius, 0.5)
    np.testing.assert_array_equal(tk.jit(np.histogram2d)(data, radius, True)[0],
                                  np.histogram2d(data, radius, True)[0])  # (True: one bin)


def test_static_size_functions_pad_as_jax_does():
    def f(a, c):
        return (
            tnp.unique(
                a, return_index=True, return_inverse=True, return_counts=True, size=8, fill_value=-9
            ),
            tnp.nonzero(a > 1, size=5),
            tnp.argwhere(a > 1, size=3),
            tnp.flatnonzero(a, size=30),
            tnp.union1d(a, c, size=8),
            tnp.intersect1d(a[0], c[0], size=4),
            tnp.setdiff1d(a, c, size=2),
            tnp.setxor1d(a[0], c[1], size=6),
            tnp.bincount(a.ravel() + 3, length=7),
        )

    xi, yi = XI, np.roll(XI, 1)
    values, index, inverse, counts = np.unique(xi, True, True, True)
    got = tk.jit(f)(xi, yi)
    k = len(values)
    np.testing.assert_array_equal(got[0][0][:k], values)
    assert (got[0][0][k:] == -9).all()
    np.testing.assert_array_equal(got[0][1][:k], index)
    np.testing.assert_array_equal(got[0][2], inverse.reshape(xi.shape))
    np.testing.assert_array_equal(got[0][3][:k], counts)

    def padded(a, size, fill=0):
        return np.concatenate([a, np.full(max(size - len(a), 0), fill, a.dtype)])[:size]

    rows, cols = np.nonzero(xi > 1)
    np.testing.assert_array_equal(got[1][0], padded(rows, 5))
    np.testing.assert_array_equal(got[1][1], padded(cols, 5))
    np.testing.assert_array_equal(got[2], np.argwhere(xi > 1)[:3])
    np.testing.assert_array_equal(got[3], padded(np.flatnonzero(xi), 30))
    union = np.union1d(xi, yi)
    np.testing.assert_array_equal(got[4][:len(union)], union)
    inter = np.intersect1d(xi[0], yi[0])
    np.testing.assert_array_equal(got[5][:len(inter)], inter)
    np.testing.assert_array_equal(got[8], np.bincount(xi.ravel() + 3, minlength=7))


def test_data_dependent_sizes_name_the_fix():
    from toolkit.frontend.errors import UnsupportedNumpyError

    with pytest.raises(UnsupportedNumpyError, match=r"size=N"):
        tk.jit(lambda a: np.unique(a), fullgraph=True)(XI)
    with pytest.raises(UnsupportedNumpyError, match=r"length=N"):
        tk.jit(lambda a: np.bincount(a), fullgraph=True)(XI.ravel() + 3)
    with pytest.raises(UnsupportedNumpyError, match="size=N"):
        tk.jit(lambda a: np.nonzero(a), fullgraph=True)(XI)
    # without fullgraph, each is a graph break: the size crosses it, the values stay traced
    for fn in (np.unique, np.nonzero, lambda a: np.bincount(a.ravel() + 3)):
        got, want = tk.jit(fn)(XI), fn(XI)
        for g, w in zip(got if isinstance(got, tuple) else [got],
                        want if isinstance(want, tuple) else [want]):
            np.testing.assert_array_equal(g, w)
            assert np.asarray(g).dtype == w.dtype


def test_ndarray_methods_including_the_in_place_ones():
    def f(a):
        b = a.copy()
        b.sort()  # in place, as ndarray.sort
        c = a.copy()
        c.sort(axis=0)
        d = a.copy()
        d.put([0, 5], [9.0, 8.0])
        e = a.copy()
        e.partition(1)
        return (
            b,
            c,
            d,
            e[:, 1],
            a.argsort(kind="stable"),
            a.cumsum(1),
            a.cumprod(0),
            a.round(1),
            a.take([0, 2], axis=1),
            a.repeat(2, axis=0),
            a[0].searchsorted(2.0),
            a.diagonal(),
            a.view(np.int64),
            a.real,
            a.imag,
            a.nbytes,
            a.itemsize,
            a.compress([True, False, True], axis=1),
            a.conj(),
        )

    x = np.array([[3.0, 1.0, 2.0], [0.5, -1.0, 4.0]])
    got, want = tk.jit(f)(x), f(x)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    from toolkit.frontend.errors import UnsupportedNumpyError

    with pytest.raises(UnsupportedNumpyError, match="np.resize"):
        tk.jit(lambda a: a.resize((3, 3)))(x)


@pytest.mark.parametrize("backend", ["interpreter", "cpu", "gpu-simulated"])
def test_float16_computes_in_float32_and_stores_half(backend):
    """As NumPy's float16 loops and XLA:CPU: each op in float32, rounded to half; sums accumulate
    in float32 (NumPy's contiguous pairwise sum does too: 5000 ones sum to 5000, not 2048)."""
    x = np.linspace(-3, 3, 5000).astype(np.float16)
    ones = np.ones(5000, np.float16)

    def f(a, o):
        return (
            np.exp(a) * a + 1,
            np.tanh(a),
            o.sum(),
            np.mean(a),
            a.max(),
            a.astype(np.int16),
            np.sqrt(np.abs(a)),
        )

    got, want = tk.jit(f, backend=backend)(x, ones), f(x, ones)
    got = [np.asarray(g) for g in got]  # the GPU executor returns device arrays
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=1e-3, atol=1e-3)
    assert got[2] == 5000


def test_where_and_initial_follow_numpy():
    def f(x, n, b):
        out = np.zeros_like(x)
        np.add(x, 1.0, out=out, where=x > 0)
        return (
            np.sum(x, where=x > 0, axis=1),
            np.prod(x, initial=2.0),
            np.max(n, initial=-5.0, where=~np.isnan(n)),
            np.min(x[:0], initial=3.0, axis=0),
            np.max(x, axis=(0, 1), initial=10.0),
            np.any(x > 1, where=b),
            np.all(x > -5, axis=1, where=b),
            np.sum(x, initial=1.5, axis=0),
            out,
        )

    got, want = tk.jit(f)(X, N, B), f(X, N, B)
    for g, w in zip(got, want):
        assert np.asarray(g).dtype == np.asarray(w).dtype and np.shape(g) == np.shape(w)
        np.testing.assert_allclose(g, w, rtol=1e-13)
    from toolkit.frontend.errors import UnsupportedNumpyError
    with pytest.raises(UnsupportedNumpyError, match="uninitialized"):
        tk.jit(lambda x: np.add(x, 1, where=x > 0))(X)
    with pytest.raises(ValueError, match="initial"):
        tk.jit(lambda x: np.max(x, where=x > 0))(X)


def test_traced_values_numpy_refuses_raise_its_error_after_the_call():
    """Never a quiet clamp or drop: the runtime check raises what NumPy raises."""
    cases = [
        (lambda a: tnp.bincount(a, length=5), (np.array([1, -1]),), "no negative elements"),
        (
            lambda a, b: np.choose(a, [b, b * 2]),
            (np.array([0, 2]), np.ones(2)),
            "invalid entry in choice",
        ),
        (
            lambda a: np.ravel_multi_index((a, a), (3, 3)),
            (np.array([0, 3]),),
            "invalid entry in coordinates",
        ),
        (
            lambda a: np.unravel_index(a, (2, 2)),
            (np.array([0, 4]),),
            "out of bounds for array with size 4",
        ),
    ]
    for fn, args, message in cases:
        with pytest.raises(ValueError, match=message):
            tk.jit(fn)(*args)
    np.testing.assert_array_equal(
        tk.jit(lambda a: np.choose(a, [a, a * 2], mode="clip"))(np.array([0, 5])), [0, 10]
    )
