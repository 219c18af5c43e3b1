"""The rest of NumPy's array API that traces: vector products (vecdot, matvec, vecmat),
nanargmax/nanargmin, apply_along_axis/apply_over_axes, piecewise, place, ix_, poly,
ravel_multi_index/unravel_index and the set operations (with a static ``size=``).

``STATIC_FUNCTIONS`` are NumPy functions that take no arrays (shapes, dtypes, window lengths,
print options): toolkit.numpy hands out NumPy's own, whose results are constants in a trace."""
from __future__ import annotations

import operator

import numpy as np

from . import lax
from .errors import UnsupportedNumpyError, UserValueError
from .inplace import check_writable, write
from .arguments import as_tracer, check_python_ints_fit, normalize_axis
from .registry import EXPORTS, FUNCTIONS, numpy_function
from .promotion import numpy_stand_in
from .tracer import Tracer
from .ufuncs import apply_ufunc

STATIC_FUNCTIONS = (
    "bartlett",
    "blackman",
    "hamming",
    "hanning",
    "kaiser",
    "broadcast_shapes",
    "can_cast",
    "promote_types",
    "isdtype",
    "issubdtype",
    "isscalar",
    "iterable",
    "get_printoptions",
    "set_printoptions",
    "printoptions",
    "diag_indices",
    "tril_indices",
    "triu_indices",
    "mask_indices",
    "indices",
    "fromfunction",
)


def _t(x) -> Tracer:
    return as_tracer(x)


def _u(ufunc, *args):
    return apply_ufunc(ufunc, args)


def result_type(*arrays_and_dtypes):
    """np.result_type with traced arrays standing for their dtype (weak ones as Python scalars)."""
    return np.result_type(*[numpy_stand_in(v) if isinstance(v, Tracer) else v
                            for v in arrays_and_dtypes])


def can_cast(from_, to, casting="safe"):
    return np.can_cast(from_.dtype if isinstance(from_, Tracer) else from_, to, casting)


EXPORTS["result_type"] = result_type
EXPORTS["can_cast"] = can_cast
FUNCTIONS[np.result_type], FUNCTIONS[np.can_cast] = result_type, can_cast


# ---- vector products (NumPy 2's gufuncs) ---------------------------------------------------------
def vecdot(x1, x2, /, *, axis=-1, **kwargs):
    a, b = (
        _t(v) if isinstance(v, Tracer) else lax.lift(lax.trace_of([x1, x2]), v, weak=False)
        for v in (x1, x2)
    )
    if a.dtype.kind == "c":  # (NumPy's vecdot conjugates its first argument)
        a = _u(np.conjugate, a)
    product = _u(np.multiply, a, b)
    # (the gufunc's type: an int8 vecdot sums in int8, a boolean one is an or of ands)
    return EXPORTS["sum"](product, axis=axis, dtype=product.dtype)


def matvec(x1, x2, /, **kwargs):
    return EXPORTS["matmul"](x1, EXPORTS["expand_dims"](x2, -1))[..., 0]


def vecmat(x1, x2, /, **kwargs):
    x1 = _t(x1) if isinstance(x1, Tracer) else lax.lift(lax.trace_of([x1, x2]), x1, weak=False)
    if x1.dtype.kind == "c":  # (NumPy's vecmat conjugates the vector)
        x1 = _u(np.conjugate, x1)
    return EXPORTS["matmul"](EXPORTS["expand_dims"](x1, -2), x2)[..., 0, :]


GUFUNCS = {np.vecdot: vecdot, np.matvec: matvec, np.vecmat: vecmat}
EXPORTS.update(vecdot=vecdot, matvec=matvec, vecmat=vecmat)


# ---- nan-aware arg reductions ------------------------------------------------------------------
def _nan_arg(a, axis, keepdims, name, fill):
    a = _t(a)
    if a.dtype.kind != "f":
        return EXPORTS[name](a, axis=axis, keepdims=keepdims)
    nan = _u(np.isnan, a)
    result = EXPORTS[name](EXPORTS["where"](nan, fill, a), axis=axis, keepdims=keepdims)
    all_nan = EXPORTS["all"](nan, axis=axis, keepdims=keepdims)
    # NumPy's error, after the call
    lax.add_check(all_nan, UserValueError, "All-NaN slice encountered")
    return result


@numpy_function(np.nanargmax)
def nanargmax(a, axis=None, out=None, *, keepdims=False):
    return _nan_arg(a, axis, keepdims, "argmax", -np.inf)


@numpy_function(np.nanargmin)
def nanargmin(a, axis=None, out=None, *, keepdims=False):
    return _nan_arg(a, axis, keepdims, "argmin", np.inf)


# ---- applying functions -----------------------------------------------------------------------
@numpy_function(np.apply_along_axis)
def apply_along_axis(func1d, axis, arr, *args, **kwargs):
    """func1d on every 1-d slice along ``axis``, unrolled: one call per slice while tracing."""
    arr = _t(arr)
    axis = normalize_axis(axis, arr.ndim)
    moved = EXPORTS["moveaxis"](arr, axis, -1)
    outer = moved.shape[:-1]
    if int(np.prod(outer)) > 4096:
        raise UnsupportedNumpyError(
            f"np.apply_along_axis over {int(np.prod(outer))} slices would unroll that many "
            "calls; write func1d to work on the whole array (with axis=)"
        )
    results = [
        EXPORTS["asarray"](func1d(moved[index], *args, **kwargs)) for index in np.ndindex(*outer)
    ]
    stacked = EXPORTS["stack"](results) if results else None
    if stacked is None:
        raise UserValueError("Cannot apply_along_axis when any iteration dimensions are 0")
    out = lax.reshape(stacked, tuple(outer) + tuple(stacked.shape[1:]))
    extra = out.ndim - len(outer)  # the result's own dimensions replace the axis, as in NumPy
    order = list(range(len(outer)))
    order[axis:axis] = list(range(len(outer), len(outer) + extra))
    return lax.transpose(out, order) if extra else out


@numpy_function(np.apply_over_axes)
def apply_over_axes(func, a, axes):
    val = _t(a)
    for axis in (axes if isinstance(axes, (tuple, list)) else (axes,)):
        axis = normalize_axis(axis, val.ndim)
        res = _t(func(val, axis))
        if res.ndim == val.ndim:
            val = res
        elif res.ndim == val.ndim - 1:
            val = EXPORTS["expand_dims"](res, axis)
        else:
            raise UserValueError("function is not returning an array of the correct shape")
    return val


def _numpy_i0_pieces():
    try:
        from numpy.lib import _function_base_impl as impl  # NumPy 2
    except ImportError:  # pragma: no cover - NumPy 1.x
        from numpy.lib import function_base as impl
    return impl._i0_1, impl._i0_2


@numpy_function(np.i0)
def i0(x):
    """NumPy's own Chebyshev expansions (Cephes), run on the traced array: both pieces on every
    element, the one NumPy's piecewise picks kept; in the input's float type, as NumPy's."""
    x = as_tracer(x)
    if x.dtype.kind == "c":
        raise UnsupportedNumpyError("np.i0 is not supported for complex values (NumPy raises too)")
    if x.dtype.kind != "f":
        x = lax.convert(x, np.float64)
    x = apply_ufunc(np.absolute, (x,))
    small, large = _numpy_i0_pieces()
    near = apply_ufunc(np.less_equal, (x, 8.0))
    where = EXPORTS["where"]
    # each piece reads only the values it is kept for (8 elsewhere): the other stays finite, so
    # a gradient's zero cotangent through it stays zero (32 / 0 at x = 0 made it NaN)
    result = where(near, small(where(near, x, 8.0)), large(where(near, 8.0, x)))
    return lax.convert(result, x.dtype)


def _bit_weights(bitorder: str, dtype=np.uint8) -> np.ndarray:
    if bitorder not in ("big", "little"):
        raise UserValueError("'order' must be either 'little' or 'big'")
    weights = 1 << np.arange(8)
    return (weights[::-1] if bitorder == "big" else weights).astype(dtype)


@numpy_function(np.packbits)
def packbits(a, axis=None, bitorder="big"):
    a = as_tracer(a)
    if a.dtype.kind not in "biu":
        raise UserValueError(
            f"Expected an input array of integer or boolean data type, got {a.describe()}"
        )
    if axis is None:
        a, axis = lax.reshape(a, (a.size,)), 0
    axis = normalize_axis(operator.index(axis), a.ndim)
    bits = lax.convert(apply_ufunc(np.not_equal, (a, 0)), np.uint8)
    bits = EXPORTS["moveaxis"](bits, axis, -1)
    n = bits.shape[-1]
    padded = -(-n // 8) * 8
    if padded != n:
        bits = EXPORTS["pad"](bits, [(0, 0)] * (bits.ndim - 1) + [(0, padded - n)])
    groups = lax.reshape(bits, tuple(bits.shape[:-1]) + (padded // 8, 8))
    packed = EXPORTS["sum"](
        apply_ufunc(np.multiply, (groups, _bit_weights(bitorder))), axis=-1, dtype=np.uint8
    )
    return EXPORTS["moveaxis"](packed, -1, axis)


@numpy_function(np.unpackbits)
def unpackbits(a, axis=None, count=None, bitorder="big"):
    a = as_tracer(a)
    if a.dtype != np.uint8:
        raise UserValueError(
            f"Expected an input array of unsigned byte data type, got {a.describe()}"
        )
    if axis is None:
        a, axis = lax.reshape(a, (a.size,)), 0
    axis = normalize_axis(operator.index(axis), a.ndim)
    moved = EXPORTS["moveaxis"](a, axis, -1)
    wide = lax.reshape(moved, tuple(moved.shape) + (1,))
    bits = apply_ufunc(
        np.not_equal, (apply_ufunc(np.bitwise_and, (wide, _bit_weights(bitorder))), 0)
    )
    bits = lax.convert(
        lax.reshape(bits, tuple(moved.shape[:-1]) + (moved.shape[-1] * 8,)), np.uint8
    )
    if count is not None:
        count = operator.index(count)
        n = bits.shape[-1]
        keep = count if count >= 0 else n + count
        if keep < 0:
            raise UserValueError(f"-count larger than number of elements ({-count} > {n})")
        bits = (
            bits[..., :keep]
            if keep <= n
            else EXPORTS["pad"](bits, [(0, 0)] * (bits.ndim - 1) + [(0, keep - n)])
        )
    return EXPORTS["moveaxis"](bits, -1, axis)


@numpy_function(np.piecewise)
def piecewise(x, condlist, funclist, *args, **kw):
    """Each function is evaluated on the whole array and selected where its condition holds
    (NumPy calls it on the selected elements only): the same for elementwise functions."""
    x = _t(x)
    if (
        isinstance(condlist, (Tracer, np.ndarray))
        and np.ndim(condlist) == x.ndim
        or isinstance(condlist, bool)
    ):
        condlist = [condlist]
    condlist = list(condlist)
    if len(funclist) not in (len(condlist), len(condlist) + 1):
        raise UserValueError(
            f"with {len(condlist)} condition(s), either {len(condlist)} or {len(condlist) + 1} "
            f"functions are expected"
        )
    conds = [
        c if isinstance(c, Tracer) else lax.lift(x.trace, np.asarray(c, bool), weak=False)
        for c in condlist
    ]
    if len(funclist) == len(conds) + 1:  # the last function applies where no condition holds
        others = _u(
            np.logical_not,
            EXPORTS["any"](EXPORTS["stack"]([lax.broadcast_to(c, x.shape) for c in conds]), axis=0),
        )
        conds.append(others)
    y = lax.full(x.trace, x.shape, 0, x.dtype)
    for cond, f in zip(conds, funclist):
        value = f(x, *args, **kw) if callable(f) else f
        y = EXPORTS["where"](cond, value, y).astype(x.dtype)
    return y


@numpy_function(np.place)
def place(arr, mask, vals):
    if not isinstance(arr, Tracer):
        raise UnsupportedNumpyError(
            "np.place into a NumPy array with traced values: make the array with toolkit.numpy"
        )
    if isinstance(mask, Tracer):
        raise UnsupportedNumpyError(
            "np.place with a traced mask: how many values it takes depends on the data; "
            "use arr[...] = np.where(mask, values, arr)"
        )
    check_writable(arr, "np.place")
    where = np.flatnonzero(np.asarray(mask))
    if where.size == 0:
        return None
    check_python_ints_fit(vals, arr.dtype, "np.place values")
    v = (
        vals
        if isinstance(vals, Tracer)
        else lax.lift(arr.trace, np.asarray(vals).ravel(), weak=False)
    )
    if v.size == 0:
        raise UserValueError("Cannot insert from an empty array!")
    v = lax.convert(lax.reshape(v, (v.size,)), arr.dtype)
    take = np.arange(where.size) % v.size  # NumPy repeats the values cyclically
    from .indexing import scatter_into
    flat = scatter_into(lax.reshape(arr, (arr.size,)), (where,), v[take], "assign")
    write(arr, lax.reshape(flat, arr.shape))
    return None


@numpy_function(np.ix_)
def ix_(*args):
    out = []
    n = len(args)
    for k, a in enumerate(args):
        a = _t(a) if isinstance(a, Tracer) else np.asarray(a)
        if a.ndim != 1:
            raise UserValueError("Cross index must be 1 dimensional")
        if a.dtype == np.bool_:
            if isinstance(a, Tracer):
                raise UnsupportedNumpyError(
                    "np.ix_ with a traced boolean mask has a data-dependent size"
                )
            a = np.nonzero(a)[0]
        shape = [1] * n
        shape[k] = a.shape[0]
        out.append(EXPORTS["reshape"](a, shape) if isinstance(a, Tracer) else a.reshape(shape))
    return tuple(out)


@numpy_function(np.poly)
def poly(seq_of_zeros):
    z = _t(seq_of_zeros)
    if z.ndim != 1:
        raise UnsupportedNumpyError(
            "np.poly of a matrix (its characteristic polynomial) is not supported on traced arrays"
        )
    p = lax.full(z.trace, (1,), 1, np.result_type(z.dtype, np.float64))
    for i in range(z.shape[0]):
        p = EXPORTS["convolve"](
            p,
            EXPORTS["stack"](
                [lax.full(z.trace, (), 1, p.dtype), lax.convert(_u(np.negative, z[i]), p.dtype)]
            ),
        )
    return p


@numpy_function(np.ravel_multi_index)
def ravel_multi_index(multi_index, dims, mode="raise", order="C"):
    if order != "C":
        raise UnsupportedNumpyError(
            "np.ravel_multi_index(order='F') is not supported on traced arrays"
        )
    dims = tuple(operator.index(d) for d in dims)
    modes = (mode,) * len(dims) if isinstance(mode, str) else tuple(mode)
    trace = lax.trace_of(list(multi_index))
    flat = None
    stride = 1
    for index, d, m in reversed(list(zip(multi_index, dims, modes))):
        i = index if isinstance(index, Tracer) else lax.lift(trace, np.asarray(index), weak=False)
        i = lax.convert(i, np.int64)
        if m == "wrap":
            i = _u(np.mod, i, d)
        elif m == "clip":
            i = EXPORTS["clip"](i, 0, d - 1)
        elif isinstance(index, Tracer):  # 'raise': NumPy's error, after the call (a runtime check)
            lax.add_check(_u(np.logical_or, _u(np.less, i, 0), _u(np.greater_equal, i, d)),
                          UserValueError, "invalid entry in coordinates array")
        elif ((np.asarray(index) < 0) | (np.asarray(index) >= d)).any():
            raise UserValueError("invalid entry in coordinates array")
        term = _u(np.multiply, i, stride)
        flat = term if flat is None else _u(np.add, flat, term)
        stride *= d
    return flat


@numpy_function(np.unravel_index)
def unravel_index(indices, shape, order="C"):
    if order != "C":
        raise UnsupportedNumpyError("np.unravel_index(order='F') is not supported on traced arrays")
    dims = tuple(operator.index(s) for s in shape)
    size = int(np.prod(dims))
    i = lax.convert(_t(indices), np.int64)
    # NumPy's error, after the call
    lax.add_check(_u(np.logical_or, _u(np.less, i, 0), _u(np.greater_equal, i, size)),
                  UserValueError, f"an index is out of bounds for array with size {size}")
    out = []
    for d in reversed(dims):
        out.append(_u(np.mod, i, d))
        i = _u(np.floor_divide, i, d)
    return tuple(reversed(out))


# ---- set operations with a static size -----------------------------------------------------------
def _set_result(values_mask, values, size, fill, name):
    from .sorting import _compact, _need_size
    size = _need_size(size, name, values_mask)
    return _compact(values_mask, values, size, values[0] if fill is None else fill)


def _unique_sorted(a):
    """``a`` flattened and sorted by NumPy's default sort, and a mask of each value's first
    occurrence: np.unique's, whose NaNs (sorted last) stand as one (equal_nan=True)."""
    flat = lax.reshape(a, (a.size,))
    s = EXPORTS["sort"](flat)
    differs = _u(np.not_equal, s[1:], s[:-1])
    if s.dtype.kind in "fc":
        differs = _u(np.logical_and, differs,
                     _u(np.logical_not, _u(np.logical_and, _u(np.isnan, s[1:]),
                                           _u(np.isnan, s[:-1]))))
    first = EXPORTS["concatenate"]([lax.full(a.trace, (1,), True, np.bool_), differs])
    return s, first


def _pair(ar1, ar2):
    trace = lax.trace_of([ar1, ar2])
    a = ar1 if isinstance(ar1, Tracer) else lax.lift(trace, np.asarray(ar1), weak=False)
    b = ar2 if isinstance(ar2, Tracer) else lax.lift(trace, np.asarray(ar2), weak=False)
    dtype = np.result_type(a.dtype, b.dtype)
    return lax.convert(a, dtype), lax.convert(b, dtype)


def union1d(ar1, ar2, *, size=None, fill_value=None):
    if not isinstance(ar1, Tracer) and not isinstance(ar2, Tracer):
        return np.union1d(ar1, ar2)
    a, b = _pair(ar1, ar2)
    s, first = _unique_sorted(
        EXPORTS["concatenate"]([lax.reshape(a, (a.size,)), lax.reshape(b, (b.size,))])
    )
    return _set_result(first, s, size, fill_value, "np.union1d")


def intersect1d(ar1, ar2, assume_unique=False, return_indices=False, *, size=None, fill_value=None):
    if not isinstance(ar1, Tracer) and not isinstance(ar2, Tracer):
        return np.intersect1d(ar1, ar2, assume_unique, return_indices)
    if return_indices:
        raise UnsupportedNumpyError(
            "np.intersect1d(return_indices=True) is not supported on traced arrays"
        )
    a, b = _pair(ar1, ar2)
    s, first = _unique_sorted(a)
    keep = _u(np.logical_and, first, EXPORTS["isin"](s, b))
    return _set_result(keep, s, size, fill_value, "np.intersect1d")


def setdiff1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    if not isinstance(ar1, Tracer) and not isinstance(ar2, Tracer):
        return np.setdiff1d(ar1, ar2, assume_unique)
    a, b = _pair(ar1, ar2)
    own = ar1.dtype if isinstance(ar1, Tracer) else np.asarray(ar1).dtype
    s, first = _unique_sorted(lax.convert(a, own))  # (NumPy's: ar1's values, in ar1's type)
    keep = _u(np.logical_and, first, EXPORTS["isin"](s, b, invert=True))
    return _set_result(keep, s, size, fill_value, "np.setdiff1d")


def setxor1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    if not isinstance(ar1, Tracer) and not isinstance(ar2, Tracer):
        return np.setxor1d(ar1, ar2, assume_unique)
    a, b = _pair(ar1, ar2)
    s, first = _unique_sorted(
        EXPORTS["concatenate"]([lax.reshape(a, (a.size,)), lax.reshape(b, (b.size,))])
    )
    in_a, in_b = EXPORTS["isin"](s, a), EXPORTS["isin"](s, b)
    keep = _u(np.logical_and, first, _u(np.logical_xor, in_a, in_b))
    if s.dtype.kind in "fc":
        # NumPy sorts np.unique(ar1) and np.unique(ar2) together, one NaN from each that has
        # one, and keeps what differs from both neighbours: NaN always does, so there are as
        # many NaNs (sorted last) as arrays with a NaN
        nan = _u(np.isnan, s)
        wanted = _u(np.add, *(lax.convert(EXPORTS["any"](_u(np.isnan, v)), np.int64)
                              for v in (a, b)))
        rank = _u(np.subtract, EXPORTS["cumsum"](lax.convert(nan, np.int64)), 1)
        keep = lax.select(nan, _u(np.less, rank, wanted), keep)
    return _set_result(keep, s, size, fill_value, "np.setxor1d")


for _fn in (union1d, intersect1d, setdiff1d, setxor1d):
    EXPORTS[_fn.__name__] = _fn
    FUNCTIONS[getattr(np, _fn.__name__)] = _fn


@numpy_function(np.identity, creation=True)
def identity(n, dtype=None, *, like=None):
    return EXPORTS["eye"](n, dtype=float if dtype is None else dtype)
