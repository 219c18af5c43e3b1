"""Triangles, diagonals, grids and small products of traced arrays: tri/tril/triu,
diag/diagonal/diagflat/trace/fill_diagonal, the *_indices helpers, vander, kron, cross,
meshgrid/indices/ix_, and ranges with traced endpoints (linspace, logspace, geomspace)."""
from __future__ import annotations

import builtins
import operator

import numpy as np

from . import lax
from .errors import UnsupportedNumpyError, UserValueError
from .inplace import check_writable, write
from .arguments import as_tracer, normalize_axis
from .promotion import array_dtype
from .registry import EXPORTS, numpy_function
from .tracer import Tracer, current_trace, strongly_typed
from .ufuncs import apply_ufunc


def _t(x) -> Tracer:
    return as_tracer(x)


def _band(trace, n: int, m: int, k: int, below: bool) -> Tracer:
    """pred[n, m]: j <= i + k (below) or j >= i + k (above)."""
    rows = lax.iota(trace, np.int64, (n, m), 0)
    cols = lax.iota(trace, np.int64, (n, m), 1)
    shifted = lax.elementwise("add", rows, lax.full(trace, (n, m), k, np.int64))
    return lax.compare(cols, shifted, "LE" if below else "GE")


@numpy_function(np.tri, creation=True)
def tri(N, M=None, k=0, dtype=float, *, like=None):
    M = N if M is None else M
    return lax.convert(
        _band(current_trace(), operator.index(N), operator.index(M), operator.index(k), True),
        lax.check_supported_dtype(dtype, "np.tri dtype"),
    )


def _triangle(m, k, below: bool):
    m = _t(m)
    if m.ndim < 2:
        m = lax.broadcast_to(m, (m.shape[0] if m.ndim else 1,) * 2) if m.ndim == 1 else m
    n, cols = m.shape[-2:]
    keep = lax.broadcast_to(_band(m.trace, n, cols, operator.index(k), below), m.shape)
    return lax.select(keep, m, lax.full(m.trace, m.shape, 0, m.dtype, m.weak_type))


@numpy_function(np.tril)
def tril(m, k=0):
    return _triangle(m, k, True)


@numpy_function(np.triu)
def triu(m, k=0):
    return _triangle(m, k, False)


@numpy_function(np.diagonal)
def diagonal(a, offset=0, axis1=0, axis2=1):
    a = _t(a)
    if a.ndim < 2:
        raise UserValueError("diag requires an array of at least two dimensions")
    a1, a2 = normalize_axis(axis1, a.ndim), normalize_axis(axis2, a.ndim)
    if a1 == a2:
        raise UserValueError("axis1 and axis2 cannot be the same")
    rest = [d for d in range(a.ndim) if d not in (a1, a2)]
    a = lax.transpose(a, rest + [a1, a2])
    n, m = a.shape[-2:]
    offset = operator.index(offset)
    length = builtins.max(0, builtins.min(n + builtins.min(offset, 0), m - builtins.max(offset, 0)))
    rows = np.arange(length) - builtins.min(offset, 0)
    cols = np.arange(length) + builtins.max(offset, 0)
    return (
        a[(Ellipsis, rows, cols)]
        if length
        else lax.full(a.trace, tuple(a.shape[:-2]) + (0,), 0, a.dtype)
    )


@numpy_function(np.diag)
def diag(v, k=0):
    v = _t(v)
    k = operator.index(k)
    if v.ndim == 2:
        return diagonal(v, k)
    if v.ndim != 1:
        raise UserValueError("Input must be 1- or 2-d.")
    n = v.shape[0] + abs(k)
    out = lax.full(v.trace, (n, n), 0, v.dtype, v.weak_type)
    if v.shape[0] == 0:
        return out
    rows = np.arange(v.shape[0]) + builtins.max(-k, 0)
    cols = np.arange(v.shape[0]) + builtins.max(k, 0)
    from .indexing import scatter_into
    return scatter_into(out, (rows, cols), v, "assign")


@numpy_function(np.diagflat)
def diagflat(v, k=0):
    v = _t(v)
    return diag(lax.reshape(v, (v.size,)), k)


@numpy_function(np.trace)
def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    if out is not None:
        raise UnsupportedNumpyError("np.trace(..., out=) is not supported on traced arrays")
    return EXPORTS["sum"](diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


@numpy_function(np.fill_diagonal)
def fill_diagonal(a, val, wrap=False):
    if not isinstance(a, Tracer):
        raise UnsupportedNumpyError(
            "np.fill_diagonal of a NumPy array with a traced value: make the array with "
            "toolkit.numpy"
        )
    check_writable(a, "np.fill_diagonal")
    if a.ndim < 2:
        raise UserValueError("array must be at least 2-d")
    if a.ndim > 2 and len(set(a.shape)) != 1:
        raise UserValueError("All dimensions of input must be of equal length")
    # NumPy's rule: a.flat[:end:step] = val
    step = 1 + int(np.cumprod(a.shape[:-1]).sum()) if a.ndim > 2 else a.shape[1] + 1
    end = a.shape[1] * a.shape[1] if a.ndim == 2 and not wrap else None
    flat_index = np.arange(a.size)[:end:step]
    values = val if isinstance(val, Tracer) else lax.lift(a.trace, val, a.dtype, weak=False)
    values = lax.convert(values, a.dtype)
    n = len(flat_index)
    if values.size != 1 and values.size != n:  # NumPy repeats the values cyclically
        reps = -(-n // values.size)
        values = lax.slice_(
            lax.reshape(
                lax.broadcast_in_dim(
                    lax.reshape(values, (values.size,)), (reps, values.size), (1,)
                ),
                (reps * values.size,),
            ),
            [(0, n, 1)],
        )
    from .indexing import scatter_into
    flat = scatter_into(
        lax.reshape(a, (a.size,)),
        (flat_index,),
        lax.reshape(values, (values.size,)) if values.size != 1 else lax.reshape(values, ()),
        "assign",
    )
    write(a, lax.reshape(flat, a.shape))


def _from_shape(fn):
    def wrapper(arr, *args, **kwargs):
        shape = arr.shape if isinstance(arr, Tracer) else np.shape(arr)
        return fn(np.empty(shape, np.bool_), *args, **kwargs)
    return wrapper


for _name in ("diag_indices_from", "tril_indices_from", "triu_indices_from"):
    numpy_function(getattr(np, _name), name=_name)(_from_shape(getattr(np, _name)))


@numpy_function(np.vander)
def vander(x, N=None, increasing=False):
    x = _t(x)
    if x.ndim != 1:
        raise UserValueError("x must be a one-dimensional array or sequence.")
    n = x.shape[0] if N is None else operator.index(N)
    powers = np.arange(n) if increasing else np.arange(n - 1, -1, -1)
    dtype = np.promote_types(x.dtype, np.int64)
    base = lax.convert(lax.broadcast_in_dim(x, (x.shape[0], n), (0,)), dtype)
    return apply_ufunc(np.power, (base, lax.lift(x.trace, powers.astype(dtype), dtype, weak=False)))


@numpy_function(np.kron)
def kron(a, b):
    a, b = (strongly_typed(v) if isinstance(v, Tracer)
            else lax.lift(lax.trace_of([a, b]), v, weak=False)
            for v in (a, b))  # (arrays first: np.kron(x_int8, 2) is int64)
    nd = builtins.max(a.ndim, b.ndim)
    a = lax.reshape(a, (1,) * (nd - a.ndim) + tuple(a.shape))
    b = lax.reshape(b, (1,) * (nd - b.ndim) + tuple(b.shape))
    wide_a = lax.reshape(a, [d for pair in zip(a.shape, (1,) * nd) for d in pair])
    wide_b = lax.reshape(b, [d for pair in zip((1,) * nd, b.shape) for d in pair])
    product = apply_ufunc(np.multiply, (wide_a, wide_b))
    return lax.reshape(product, [x * y for x, y in zip(a.shape, b.shape)])


@numpy_function(np.cross)
def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    if axis is not None:
        axisa = axisb = axisc = axis
    a = EXPORTS["moveaxis"](
        _t(a) if isinstance(a, Tracer) else lax.lift(lax.trace_of([a, b]), a, weak=False), axisa, -1
    )
    b = EXPORTS["moveaxis"](
        b if isinstance(b, Tracer) else lax.lift(a.trace, b, weak=False), axisb, -1
    )
    if a.shape[-1] not in (2, 3) or b.shape[-1] not in (2, 3):
        raise UserValueError(
            "incompatible dimensions for cross product\n(dimension must be 2 or 3)"
        )
    if a.shape[-1] == 2 and b.shape[-1] == 2:
        return apply_ufunc(np.subtract, (a[..., 0] * b[..., 1], a[..., 1] * b[..., 0]))
    def comp(x, i):
        return x[..., i] if i < x.shape[-1] else None

    a0, a1, a2 = comp(a, 0), comp(a, 1), comp(a, 2)
    b0, b1, b2 = comp(b, 0), comp(b, 1), comp(b, 2)

    def term(p, q, r, s):  # p*q - r*s with missing (2-vector) components as zero
        first = p * q if p is not None and q is not None else None
        second = r * s if r is not None and s is not None else None
        if first is None and second is None:
            return apply_ufunc(np.multiply, (a0, 0 * b0))
        if second is None:
            return first
        if first is None:
            return -second
        return first - second

    c = EXPORTS["stack"](
        [term(a1, b2, a2, b1), term(a2, b0, a0, b2), term(a0, b1, a1, b0)], axis=-1
    )
    return EXPORTS["moveaxis"](c, -1, axisc)


@numpy_function(np.meshgrid)
def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    if indexing not in ("xy", "ij"):
        raise UserValueError("Valid values for `indexing` are 'xy' and 'ij'.")
    trace = lax.trace_of(list(xi))
    xs = [x if isinstance(x, Tracer) else lax.lift(trace, x, weak=False) for x in xi]
    xs = [lax.reshape(x, (x.size,)) for x in xs]
    n = len(xs)
    shape = [x.shape[0] for x in xs]
    if indexing == "xy" and n > 1:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, x in enumerate(xs):
        axis = i
        if indexing == "xy" and n > 1 and i < 2:
            axis = 1 - i
        if sparse:
            s = [1] * n
            s[axis] = x.shape[0]
            out.append(lax.reshape(x, s))
        else:
            out.append(lax.broadcast_in_dim(x, shape, (axis,)))
    return tuple(out)


def _stand_in(v):
    """What NumPy's type resolution sees for an endpoint: a weak (Python) number stays one."""
    if isinstance(v, Tracer):
        return v.dtype.type(0).item() if v.weak_type else np.zeros((), v.dtype)
    return v if isinstance(v, (int, float, complex, np.generic)) else np.asarray(v)


def _range_endpoints(start, stop):
    """The endpoints in NumPy's computation type: their result type (a Python number weak:
    float32 endpoints stay float32), made inexact (integers: float64)."""
    trace = lax.trace_of([start, stop])
    dtype = np.result_type(_stand_in(start), _stand_in(stop))
    if dtype.kind not in "fc":
        dtype = np.result_type(dtype, 1.0)
    s = lax.convert(
        _t(start) if isinstance(start, Tracer) else lax.lift(trace, start, dtype, weak=False), dtype
    )
    e = lax.convert(
        _t(stop) if isinstance(stop, Tracer) else lax.lift(trace, stop, dtype, weak=False), dtype
    )
    shape = np.broadcast_shapes(s.shape, e.shape)
    return lax.broadcast_to(s, shape), lax.broadcast_to(e, shape), dtype


def traced_linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    """np.linspace as NumPy computes it (start + i * step, the last set to stop), with
    traced endpoints."""
    num = operator.index(num)
    if num < 0:
        raise UserValueError(f"Number of samples, {num}, must be non-negative.")
    s, e, dt = _range_endpoints(start, stop)
    div = (num - 1) if endpoint else num
    ramp = lax.iota(s.trace, dt, (num,) + tuple(s.shape), 0)
    sb = lax.broadcast_in_dim(s, ramp.shape, tuple(range(1, ramp.ndim)))
    eb = lax.broadcast_in_dim(e, ramp.shape, tuple(range(1, ramp.ndim)))
    delta = apply_ufunc(np.subtract, (eb, sb))
    if div > 0:
        step = apply_ufunc(np.true_divide, (delta, float(div)))
        y = apply_ufunc(np.add, (apply_ufunc(np.multiply, (ramp, step)), sb))
    else:
        step = apply_ufunc(np.multiply, (delta, np.nan))
        y = apply_ufunc(np.add, (apply_ufunc(np.multiply, (ramp, delta)), sb))
    if endpoint and num > 1:
        last = lax.compare(ramp, lax.full(s.trace, ramp.shape, num - 1, dt), "EQ")
        y = lax.select(last, eb, y)
    if axis != 0:
        y = EXPORTS["moveaxis"](y, 0, axis)
    if dtype is not None:
        out = np.dtype(dtype)
        if out.kind in "iu":
            y = apply_ufunc(np.floor, (y,))
        y = lax.convert(y, lax.check_supported_dtype(out, "np.linspace dtype"))
    if retstep:  # (NumPy's undefined step, for fewer than two samples, is the Python float nan)
        return y, step[0] if div > 0 else float("nan")
    return y


@numpy_function(np.logspace)
def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    if not isinstance(base, (float, int)) and np.ndim(base):
        # NumPy's: an array base broadcasts with start and stop, and gets the samples' axis
        ndmax = len(np.broadcast_shapes(np.shape(start), np.shape(stop), np.shape(base)))
        start, stop, base = (_with_ndmin(v, ndmax) for v in (start, stop, base))
        base = EXPORTS["expand_dims"](base, axis)
    y = traced_linspace(start, stop, num=num, endpoint=endpoint, axis=axis)
    out = apply_ufunc(np.power, (base, y))
    return (
        out
        if dtype is None
        else lax.convert(out, lax.check_supported_dtype(dtype, "np.logspace dtype"))
    )


def _with_ndmin(value, ndmin: int):
    """np.array(value, copy=None, ndmin=ndmin): leading axes of 1 (a traced value reshaped)."""
    if not isinstance(value, Tracer):
        return np.array(value, copy=None, ndmin=ndmin)
    return lax.reshape(value, (1,) * (ndmin - value.ndim) + tuple(value.shape)) \
        if value.ndim < ndmin else value


@numpy_function(np.geomspace)
def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    s, e, _ = _range_endpoints(start, stop)
    # NumPy computes in result_type(start, stop, float(num), np.zeros((), dtype)): with no dtype
    # that includes float64, so float32 endpoints give a float64 sequence
    work = np.result_type(array_dtype(start), array_dtype(stop), float(num),
                          np.zeros((), dtype).dtype)
    s, e = lax.convert(s, work), lax.convert(e, work)
    log_s = apply_ufunc(np.log10, (apply_ufunc(np.absolute, (s,)),))
    log_e = apply_ufunc(np.log10, (apply_ufunc(np.absolute, (e,)),))
    y = traced_linspace(log_s, log_e, num=num, endpoint=endpoint)
    y = apply_ufunc(np.power, (10.0, y))
    ramp_shape = y.shape
    sb = lax.broadcast_in_dim(s, ramp_shape, tuple(range(1, len(ramp_shape))))
    eb = lax.broadcast_in_dim(e, ramp_shape, tuple(range(1, len(ramp_shape))))
    # exact endpoints, and the sign of the (same-signed) endpoints, as NumPy does
    index = lax.iota(s.trace, np.int64, ramp_shape, 0)
    y = lax.select(
        lax.compare(index, lax.full(s.trace, ramp_shape, 0, np.int64), "EQ"),
        apply_ufunc(np.absolute, (sb,)),
        y,
    )
    if endpoint and num > 1:
        y = lax.select(lax.compare(index, lax.full(s.trace, ramp_shape, num - 1, np.int64), "EQ"),
                       apply_ufunc(np.absolute, (eb,)), y)
    y = apply_ufunc(np.multiply, (y, apply_ufunc(np.sign, (sb,))))
    if axis != 0:
        y = EXPORTS["moveaxis"](y, 0, axis)
    return (
        y
        if dtype is None
        else lax.convert(y, lax.check_supported_dtype(dtype, "np.geomspace dtype"))
    )
