"""Array creation inside traces: zeros, ones, full, the *_like family, arange, linspace, eye,
asarray. Outside a trace these are NumPy's own."""
from __future__ import annotations

import builtins
import math
import operator
import warnings

import numpy as np

from . import lax
from .errors import UnsupportedNumpyError
from .arguments import as_tracer
from .registry import has_tracer, numpy_function
from .shape_functions import stack
from .tracer import Tracer, current_trace


def _creation_dtype(dtype, default=np.float64):
    return lax.check_supported_dtype(default if dtype is None else dtype, "requested dtype")


def _shape_tuple(shape) -> tuple[int, ...]:
    return (
        tuple(operator.index(d) for d in shape)
        if isinstance(shape, (tuple, list))
        else (operator.index(shape),)
    )


@numpy_function(np.zeros, creation=True)
def zeros(shape, dtype=None, order="C", **kwargs):
    return lax.full(current_trace(), _shape_tuple(shape), 0, _creation_dtype(dtype))


@numpy_function(np.ones, creation=True)
def ones(shape, dtype=None, order="C", **kwargs):
    return lax.full(current_trace(), _shape_tuple(shape), 1, _creation_dtype(dtype))


@numpy_function(np.empty, creation=True)
def empty(shape, dtype=None, order="C", **kwargs):
    return zeros(shape, dtype)


@numpy_function(np.full, creation=True)
def full(shape, fill_value, dtype=None, order="C", **kwargs):
    trace = current_trace()
    if isinstance(fill_value, Tracer):
        v = fill_value if dtype is None else lax.convert(fill_value, dtype)
        return lax.broadcast_to(v, _shape_tuple(shape))
    dtype = _creation_dtype(dtype, np.asarray(fill_value).dtype)
    return lax.full(trace, _shape_tuple(shape), _numpys_fill(fill_value, dtype), dtype)


def _numpys_fill(fill_value, dtype):
    """A number as np.full stores it (copyto, casting='unsafe'): NaN into uint8 is 0, -1 an
    OverflowError (NumPy's own, from NumPy itself); an array of values is left as it is."""
    if np.ndim(fill_value):
        return fill_value
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.full((), fill_value, dtype)


def _like(a, dtype, shape):
    a = as_tracer(a)
    return (
        (a.shape if shape is None else _shape_tuple(shape)),
        (a.dtype if dtype is None else np.dtype(dtype)),
        a.trace,
    )


@numpy_function(np.zeros_like)
def zeros_like(a, dtype=None, order="K", subok=True, shape=None, **kwargs):
    shape, dtype, trace = _like(a, dtype, shape)
    return lax.full(trace, shape, 0, dtype)


@numpy_function(np.ones_like)
def ones_like(a, dtype=None, order="K", subok=True, shape=None, **kwargs):
    shape, dtype, trace = _like(a, dtype, shape)
    return lax.full(trace, shape, 1, dtype)


@numpy_function(np.empty_like)
def empty_like(a, dtype=None, order="K", subok=True, shape=None, **kwargs):
    return zeros_like(a, dtype, shape=shape)


@numpy_function(np.full_like)
def full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, **kwargs):
    shape, dtype, trace = _like(a, dtype, shape)
    if isinstance(fill_value, Tracer):
        return lax.broadcast_to(lax.convert(fill_value, dtype), shape)
    return lax.full(trace, shape, _numpys_fill(fill_value, dtype), dtype)


@numpy_function(np.arange, creation=True)
def arange(start, stop=None, step=1, dtype=None, **kwargs):
    if stop is None:
        start, stop = 0, start
    for v in (start, stop, step):
        if isinstance(v, Tracer):
            raise UnsupportedNumpyError(
                "arange bounds must be Python numbers (the length must be known while tracing)"
            )
    n = builtins.max(0, math.ceil((stop - start) / step))
    out_dtype = (
        np.dtype(dtype)
        if dtype is not None
        else np.result_type(
            *[
                np.asarray(v).dtype if not isinstance(v, (int, float)) else type(v)
                for v in (start, stop, step)
            ]
        )
    )
    out_dtype = lax.check_supported_dtype(out_dtype, "arange dtype")
    trace = current_trace()
    floats = out_dtype.kind == "f" or builtins.any(isinstance(v, float) for v in (start, step))
    compute = np.dtype(np.float64) if floats else np.dtype(np.int64)
    ramp = lax.iota(trace, compute, (n,), 0)
    if step != 1:
        ramp = lax.elementwise("multiply", ramp, lax.full(trace, (n,), step, compute))
    if start != 0:
        ramp = lax.elementwise("add", ramp, lax.full(trace, (n,), start, compute))
    return lax.convert(ramp, out_dtype)


@numpy_function(np.linspace, creation=True)
def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    if retstep or axis != 0 or not all(type(v) in (int, float) for v in (start, stop)):
        from .matrices import traced_linspace  # traced or array endpoints
        return traced_linspace(start, stop, num, endpoint, retstep, dtype, axis)
    num = operator.index(num)
    trace = current_trace()
    div = (num - 1) if endpoint else num
    step = (stop - start) / div if div > 0 else math.nan
    ramp = lax.iota(trace, np.float64, (num,), 0)
    values = lax.elementwise(
        "add",
        lax.elementwise("multiply", ramp, lax.full(trace, (num,), step, np.float64)),
        lax.full(trace, (num,), float(start), np.float64),
    )
    if endpoint and num > 1:
        last = lax.compare(ramp, lax.full(trace, (num,), num - 1, np.float64), "EQ")
        values = lax.select(last, lax.full(trace, (num,), float(stop), np.float64), values)
    out_dtype = _creation_dtype(dtype)
    if out_dtype.kind in "iu":
        values = lax.elementwise("floor", values)
    return lax.convert(values, out_dtype)


@numpy_function(np.eye, creation=True)
def eye(N, M=None, k=0, dtype=float, order="C", **kwargs):
    trace = current_trace()
    M = N if M is None else M
    rows = lax.iota(trace, np.int64, (N, M), 0)
    cols = lax.iota(trace, np.int64, (N, M), 1)
    diag = lax.compare(
        lax.elementwise("add", rows, lax.full(trace, (N, M), k, np.int64)), cols, "EQ"
    )
    return lax.convert(diag, _creation_dtype(dtype))


@numpy_function(np.asarray, creation=True)
def asarray(a, dtype=None, order=None, **kwargs):
    if isinstance(a, Tracer):
        return a if dtype is None else lax.convert(a, dtype)
    if isinstance(a, (list, tuple)) and has_tracer(a):
        if dtype is not None:  # (NumPy converts each number through a Python int: it checks)
            from .scalar_stores import check_scalar_fits

            for x in a:
                if isinstance(x, Tracer) and not x.shape and (x._scalar or x.weak_type):
                    check_scalar_fits(x, dtype)
        return stack([asarray(x, dtype) for x in a])
    trace = current_trace()
    value = np.asarray(a, dtype=dtype)
    return lax.lift(trace, value, value.dtype, weak=False)


@numpy_function(np.array, creation=True)
def array(object, dtype=None, copy=True, order="K", subok=False, ndmin=0, **kwargs):
    return asarray(object, dtype)
