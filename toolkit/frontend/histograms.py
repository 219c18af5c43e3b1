"""Histograms of traced arrays: ``histogram``, ``histogram_bin_edges``, ``histogramdd`` and
``histogram2d``, with NumPy's algorithms (its uniform-bin fast path, the last edge inclusive,
outlier bins cut off). Bin counts and edges are static; the data, and an autodetected range,
may be traced."""
from __future__ import annotations

import builtins
import operator

import numpy as np

from . import lax
from .errors import UnsupportedNumpyError, UserTypeError, UserValueError
from .registry import EXPORTS, numpy_function
from .arguments import as_tracer as _t
from .differences import diff
from .searching import bin_counts, search_sorted
from .tracer import Tracer
from .ufuncs import apply_ufunc


def _given_range(range_):
    """NumPy's checks of a histogram's ``range=`` (and its widening of an empty one), on the
    values as given (their types decide the edges' type, as in NumPy)."""
    first, last = range_
    if first > last:
        raise UserValueError("max must be larger than min in range parameter.")
    if not (np.isfinite(first) and np.isfinite(last)):
        raise UserValueError(f"supplied range of [{first}, {last}] is not finite")
    return (first - 0.5, last + 0.5) if first == last else (first, last)


def _bin_type(first, last, dtype: np.dtype) -> np.dtype:
    """NumPy's ``np.result_type(first_edge, last_edge, a)``, float64 for integers: a Python
    number range is weak (float32 data keep float32 edges), a traced edge is of the data's
    type."""
    def stand_in(v):
        return np.zeros((), v.dtype)[()] if isinstance(v, Tracer) else v
    bin_type = np.result_type(stand_in(first), stand_in(last), np.empty(0, dtype))
    return np.result_type(bin_type, float) if bin_type.kind in "iub" else bin_type


def _ndim(value) -> int:
    return value.ndim if isinstance(value, Tracer) else np.ndim(value)


def _value(scalar):
    """A scalar bin count as the Python value NumPy checks: a traced one (an argument of the
    jitted function) is asked for its value, which makes that argument static."""
    return scalar.tolist() if isinstance(scalar, Tracer) else scalar


def _histogram_edges(a: Tracer, bins, range_, weights):
    """NumPy's _get_bin_edges: (edges, the count of uniform bins or None, (first, last)): a
    bin count's edges in NumPy's bin type (float32 data: float32), an array's as given."""
    if isinstance(bins, str):
        raise UnsupportedNumpyError(
            f"np.histogram(bins={bins!r}): estimator names are not supported on traced arrays"
        )
    if _ndim(bins) == 0:
        # a count of bins, also when it is an argument of the jitted function: the count is
        # the result's shape, so its value is read (the call is specialized on it), never
        # taken for an array of edges
        try:  # (NumPy's own checks, in its order, on the value)
            n = operator.index(_value(bins))
        except TypeError:
            raise UserTypeError("`bins` must be an integer, a string, or an array") from None
        if n < 1:
            raise UserValueError("`bins` must be positive, when an integer")
        if range_ is not None or a.size == 0:
            first, last = _given_range(range_) if range_ is not None else (0, 1)
            bin_type = _bin_type(first, last, a.dtype)
            edges = np.linspace(first, last, n + 1, endpoint=True, dtype=bin_type)
            if np.any(edges[:-1] >= edges[1:]):
                raise UserValueError(_TOO_MANY_BINS.format(n))
            return lax.lift(a.trace, edges, bin_type, weak=False), n, (first, last)
        first, last = EXPORTS["min"](a), EXPORTS["max"](a)
        if a.dtype.kind in "fc":  # NumPy raises for data with inf or NaN and no range=
            finite = apply_ufunc(np.logical_and, (apply_ufunc(np.isfinite, (first,)),
                                                  apply_ufunc(np.isfinite, (last,))))
            lax.add_check(apply_ufunc(np.logical_not, (finite,)), UserValueError,
                          "autodetected range of the data is not finite (np.histogram: it has "
                          "inf or NaN; pass range=)")
        same = apply_ufunc(np.equal, (first, last))
        first = EXPORTS["where"](same, apply_ufunc(np.subtract, (first, 0.5)), first)
        last = EXPORTS["where"](same, apply_ufunc(np.add, (last, 0.5)), last)
        bin_type = _bin_type(first, last, a.dtype)
        edges = traced_edges(first, last, n, bin_type)
        # (NumPy's check: a range so wide that the edges overflow, or so narrow they repeat)
        lax.add_check(apply_ufunc(np.greater_equal, (lax.slice_(edges, [(0, n, 1)]),
                                                     lax.slice_(edges, [(1, n + 1, 1)]))),
                      UserValueError, _TOO_MANY_BINS.format(n))
        return edges, n, (first, last)
    if isinstance(bins, Tracer):
        edges = bins
    else:
        given = np.asarray(bins)
        if given.ndim == 1 and given.size and np.any(given[:-1] > given[1:]):
            raise UserValueError("`bins` must increase monotonically, when an array")
        edges = lax.lift(a.trace, given, weak=False)
    if edges.ndim != 1:
        raise UserValueError("`bins` must be 1d, when an array")
    return edges, None, None


_TOO_MANY_BINS = "Too many bins for data range. Cannot create {} finite-sized bins."


def traced_edges(lo, hi, n, dtype=None):
    from .matrices import traced_linspace
    return traced_linspace(lo, hi, n + 1, dtype=dtype)


@numpy_function(np.histogram_bin_edges)
def histogram_bin_edges(a, bins=10, range=None, weights=None):
    a = _t(a)
    return _histogram_edges(lax.reshape(a, (a.size,)), bins, range, weights)[0]


@numpy_function(np.histogram)
def histogram(a, bins=10, range=None, density=None, weights=None):
    a = _t(a)
    a = lax.reshape(a, (a.size,))
    edges, uniform, span = _histogram_edges(a, bins, range, weights)
    nbins = edges.shape[0] - 1
    if uniform is not None:  # NumPy's fast path: the bin from arithmetic, corrected by the edges
        first, last = span
        x = lax.convert(a, edges.dtype)
        # (in the edges' type, as NumPy's tmp_a.astype(bin_edges.dtype) - first_edge)
        low, high = (v if isinstance(v, Tracer) else
                     lax.lift(a.trace, np.asarray(v), weak=False) for v in (first, last))
        low, high = lax.convert(low, edges.dtype), lax.convert(high, edges.dtype)
        scaled = apply_ufunc(np.divide, (apply_ufunc(np.subtract, (x, low)),
                                         apply_ufunc(np.subtract, (high, low))))
        idx = lax.convert(apply_ufunc(np.multiply, (scaled, nbins)), np.int64)
        idx = EXPORTS["where"](apply_ufunc(np.equal, (idx, nbins)), nbins - 1, idx)
        idx = EXPORTS["clip"](*(idx, 0, nbins - 1))
        lower = EXPORTS["take"](edges, idx)
        idx = EXPORTS["where"](apply_ufunc(np.less, (x, lower)), idx - 1, idx)
        upper = EXPORTS["take"](edges, EXPORTS["clip"](*(idx + 1, 0, nbins)))
        idx = EXPORTS["where"](
            apply_ufunc(
                np.logical_and,
                (
                    apply_ufunc(np.greater_equal, (x, upper)),
                    apply_ufunc(np.not_equal, (idx, nbins - 1)),
                ),
            ),
            idx + 1,
            idx,
        )
        # (the data, as given, against the outer edges: NumPy's keep)
        keep = apply_ufunc(
            np.logical_and,
            (apply_ufunc(np.greater_equal, (a, first)), apply_ufunc(np.less_equal, (a, last))),
        )
    else:
        wide = np.result_type(a.dtype, edges.dtype)  # (NumPy's searchsorted promotes both)
        x, wide_edges = lax.convert(a, wide), lax.convert(edges, wide)
        idx = apply_ufunc(np.subtract, (search_sorted(wide_edges, x, "right"), 1))
        idx = EXPORTS["where"](apply_ufunc(np.equal, (x, wide_edges[-1])), nbins - 1, idx)
        keep = apply_ufunc(np.logical_and, (apply_ufunc(np.greater_equal, (x, wide_edges[0])),
                                            apply_ufunc(np.less_equal, (x, wide_edges[-1]))))
    idx = EXPORTS["where"](keep, idx, -1)
    counts = _weighted_counts(idx, weights, nbins)  # idx -1: outside the range, skipped
    if density:
        widths = diff(edges)
        counts = apply_ufunc(
            np.true_divide, (apply_ufunc(np.true_divide, (counts, widths)), EXPORTS["sum"](counts))
        )
    return counts, edges


def _outer_edges(x: Tracer, bins: int, range_, dim: int) -> Tracer:
    """NumPy's ``_get_outer_edges`` and linspace for one dimension of histogramdd: the range
    given (float64 edges), or the data's min and max (edges in the data's float type; a
    non-finite autodetected range raises NumPy's ValueError after the call)."""
    if range_ is not None:
        first, last = _given_range(range_)
        return lax.lift(x.trace, np.linspace(first, last, bins + 1), weak=False)
    if x.size == 0:
        return lax.lift(x.trace, np.linspace(0, 1, bins + 1), weak=False)
    lo, hi = EXPORTS["min"](x), EXPORTS["max"](x)
    lax.add_check(apply_ufunc(np.logical_not, (apply_ufunc(np.logical_and, (
        apply_ufunc(np.isfinite, (lo,)), apply_ufunc(np.isfinite, (hi,)))),)), UserValueError,
        f"histogramdd: the autodetected range of dimension {dim} is not finite")
    dtype = np.result_type(x.dtype, np.float64) if x.dtype.kind != "f" else x.dtype
    lo, hi = lax.convert(lo, dtype), lax.convert(hi, dtype)
    same = apply_ufunc(np.equal, (lo, hi))
    lo = EXPORTS["where"](same, apply_ufunc(np.subtract, (lo, 0.5)), lo)
    hi = EXPORTS["where"](same, apply_ufunc(np.add, (hi, 0.5)), hi)
    return traced_edges(lo, hi, bins)


_BLOCK = 65536  # NumPy's histogram counts blocks of this many values


def _weighted_counts(idx: Tracer, weights, nbins: int) -> Tracer:
    """NumPy's counts: intp without weights; with them, in the weights' type, each block's
    float64 bincount cast to that type and added to the total in it (int8 weights wrap,
    float32 ones round per block, as NumPy's do)."""
    if weights is None:
        return bin_counts(idx, None, nbins)
    w = weights if isinstance(weights, Tracer) else lax.lift(idx.trace, weights, weak=False)
    if w.shape != idx.shape:
        raise UserValueError("weights should have the same shape as a.")
    if w.dtype.kind == "c":
        raise UnsupportedNumpyError("np.histogram with complex weights is not supported on "
                                    "traced arrays")
    ntype = w.dtype
    if ntype == np.float64 or ntype.kind in "iub" or idx.size <= _BLOCK:
        # (integer totals wrap alike summed at once; one block is one cast)
        return lax.convert(bin_counts(idx, w, nbins), ntype)
    total = None
    for start in range(0, idx.size, _BLOCK):
        block = slice(start, builtins.min(start + _BLOCK, idx.size))
        part = lax.convert(bin_counts(idx[block], w[block], nbins), ntype)
        total = part if total is None else apply_ufunc(np.add, (total, part))
    return total


@numpy_function(np.histogramdd)
def histogramdd(sample, bins=10, range=None, density=None, weights=None):
    """NumPy's algorithm: per dimension the bin from a search of its edges (the last edge
    inclusive), the flat index over bins plus an outlier bin at each end, counts by a scatter-add,
    the outlier bins cut off. Bin counts and edges must be static; the data may be traced."""
    if isinstance(sample, (list, tuple)):
        columns = [_t(s) for s in sample]
        sample = EXPORTS["stack"]([lax.reshape(c, (c.size,)) for c in columns], axis=1)
    sample = _t(sample)
    if sample.ndim == 1:
        sample = lax.reshape(sample, (sample.shape[0], 1))
    n, d = sample.shape
    try:
        if len(bins) != d:
            raise UserValueError(
                "The dimension of bins must be equal to the dimension of the sample x."
            )
        bins = list(bins)
    except TypeError:
        bins = [bins] * d
    if range is None:
        range = (None,) * d
    elif len(range) != d:
        raise UserValueError("range argument must have one entry per dimension")
    edges, counts_index, nbin = [], None, []
    for i in builtins.range(d):
        column = sample[:, i]
        if _ndim(bins[i]) == 0:  # a count (an argument's value too: it sets the shape)
            value = _value(bins[i])  # (NumPy's own checks, in its order, on the value)
            if value < 1:
                raise UserValueError(f"`bins[{i}]` must be positive, when an integer")
            try:
                count = operator.index(value)
            except TypeError:
                raise UserTypeError(f"`bins[{i}]` must be an integer, when a scalar") from None
            e = _outer_edges(column, count, range[i], i)
        else:
            e = (
                _t(bins[i])
                if isinstance(bins[i], Tracer)
                else lax.lift(sample.trace, np.asarray(bins[i]), weak=False)
            )
            if e.ndim != 1:
                raise UserValueError(f"`bins[{i}]` must be a scalar or 1d array")
        edges.append(e)
        nbin.append(e.shape[0] + 1)
        wide = np.result_type(e.dtype, column.dtype)
        col, ew = lax.convert(column, wide), lax.convert(e, wide)
        k = search_sorted(ew, col, "right")
        k = EXPORTS["where"](
            apply_ufunc(np.equal, (col, ew[-1])), apply_ufunc(np.subtract, (k, 1)), k
        )
        counts_index = (
            k
            if counts_index is None
            else apply_ufunc(np.add, (apply_ufunc(np.multiply, (counts_index, nbin[-1])), k))
        )
    total = int(np.prod(nbin))
    if counts_index is None:
        counts_index = lax.full(sample.trace, (n,), 0, np.int64)
    hist = lax.convert(bin_counts(counts_index, weights, total), np.float64)
    hist = lax.reshape(hist, tuple(nbin))[(slice(1, -1),) * d]
    if density:
        s = EXPORTS["sum"](hist)
        for i, e in enumerate(edges):
            shape = [1] * d
            shape[i] = nbin[i] - 2
            hist = apply_ufunc(np.true_divide, (hist, lax.reshape(diff(e), tuple(shape))))
        hist = apply_ufunc(np.true_divide, (hist, s))
    return hist, edges


@numpy_function(np.histogram2d)
def histogram2d(x, y, bins=10, range=None, density=None, weights=None):
    try:
        n_bins = len(bins)
    except TypeError:
        n_bins = 1
    if n_bins != 1 and n_bins != 2:
        bins = [bins, bins]
    hist, edges = histogramdd([x, y], bins, range, density, weights)
    return hist, edges[0], edges[1]
