"""Statistics, comparison, rounding and selection on traced arrays: the nan-reductions,
average, cov/corrcoef, ptp, count_nonzero, isclose/allclose/array_equal, round, nan_to_num,
the real-number forms of the complex helpers (real, imag, conj, angle), select/choose/
compress/extract, sinc and polynomial evaluation and arithmetic."""
from __future__ import annotations

import builtins
import math
import operator

import numpy as np

from . import lax
from .errors import UnsupportedNumpyError, UserValueError
from .numpy_functions import EXPORTS, FUNCTIONS, _as_tracer, normalize_axes, numpy_function
from .tracer import Tracer
from .ufuncs import UFUNCS, apply_ufunc


def _t(x) -> Tracer:
    return _as_tracer(x)


def _u(ufunc, *args):
    return apply_ufunc(ufunc, args)


def _is_nan(a: Tracer) -> Tracer:
    return _u(np.isnan, a)


def _replace_nan(a: Tracer, value) -> Tracer:
    if a.dtype.kind != "f":
        return a
    return EXPORTS["where"](_is_nan(a), lax.full(a.trace, a.shape, value, a.dtype), a)


def _not_nan_count(a: Tracer, axis, keepdims) -> Tracer:
    valid = _u(np.logical_not, _is_nan(a)) if a.dtype.kind == "f" else lax.full(a.trace, a.shape, True, np.bool_)
    return EXPORTS["sum"](valid, axis=axis, keepdims=keepdims)


def _no(out=None, where=None, name=""):
    if out is not None or (where is not None and where is not True and where is not np._NoValue):
        raise UnsupportedNumpyError(f"np.{name}: out= and where= are not supported on traced arrays")


@numpy_function(np.nansum)
def nansum(a, axis=None, dtype=None, out=None, keepdims=False, initial=np._NoValue, where=np._NoValue):
    _no(out, where, "nansum")
    return EXPORTS["sum"](_replace_nan(_t(a), 0), axis=axis, dtype=dtype, keepdims=keepdims)


@numpy_function(np.nanprod)
def nanprod(a, axis=None, dtype=None, out=None, keepdims=False, initial=np._NoValue, where=np._NoValue):
    _no(out, where, "nanprod")
    return EXPORTS["prod"](_replace_nan(_t(a), 1), axis=axis, dtype=dtype, keepdims=keepdims)


def _nan_extreme(a, axis, keepdims, name, fill):
    a = _t(a)
    if a.dtype.kind != "f":
        return EXPORTS[name](a, axis=axis, keepdims=keepdims)
    result = EXPORTS[name](_replace_nan(a, fill), axis=axis, keepdims=keepdims)
    all_nan = _u(np.equal, _not_nan_count(a, axis, keepdims), 0)
    return EXPORTS["where"](all_nan, np.nan, result).astype(a.dtype)


@numpy_function(np.nanmax)
def nanmax(a, axis=None, out=None, keepdims=False, initial=np._NoValue, where=np._NoValue):
    _no(out, where, "nanmax")
    return _nan_extreme(a, axis, keepdims, "max", -np.inf)


@numpy_function(np.nanmin)
def nanmin(a, axis=None, out=None, keepdims=False, initial=np._NoValue, where=np._NoValue):
    _no(out, where, "nanmin")
    return _nan_extreme(a, axis, keepdims, "min", np.inf)


@numpy_function(np.nanmean)
def nanmean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=np._NoValue):
    _no(out, where, "nanmean")
    a = _t(a)
    if a.dtype.kind != "f":
        return EXPORTS["mean"](a, axis=axis, dtype=dtype, keepdims=keepdims)
    total = EXPORTS["sum"](_replace_nan(a, 0), axis=axis, dtype=dtype, keepdims=keepdims)
    return _u(np.true_divide, total, _not_nan_count(a, axis, keepdims)).astype(total.dtype)


@numpy_function(np.nanvar)
def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=np._NoValue, mean=np._NoValue,
           correction=np._NoValue):
    _no(out, where, "nanvar")
    if correction is not np._NoValue:
        ddof = correction
    a = _t(a)
    if a.dtype.kind != "f":
        return EXPORTS["var"](a, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims)
    centre = nanmean(a, axis=axis, dtype=dtype, keepdims=True)
    dev = _replace_nan(_u(np.subtract, a, centre), 0)
    total = EXPORTS["sum"](_u(np.multiply, dev, dev), axis=axis, keepdims=keepdims)
    count = _u(np.subtract, _not_nan_count(a, axis, keepdims), ddof)
    count = EXPORTS["where"](_u(np.less_equal, count, 0), np.nan, count)
    return _u(np.true_divide, total, count).astype(total.dtype)


@numpy_function(np.nanstd)
def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=np._NoValue, mean=np._NoValue,
           correction=np._NoValue):
    return _u(np.sqrt, nanvar(a, axis, dtype, out, ddof, keepdims, where=where, correction=correction))


@numpy_function(np.average)
def average(a, axis=None, weights=None, returned=False, *, keepdims=False):
    a = _t(a)
    if weights is None:
        avg = EXPORTS["mean"](a, axis=axis, keepdims=keepdims)
        scale = lax.full(a.trace, avg.shape, a.size // builtins.max(avg.size, 1), avg.dtype)
        return (avg, scale) if returned else avg
    w = weights if isinstance(weights, Tracer) else lax.lift(a.trace, weights, weak=False)
    if w.shape != a.shape:
        if axis is None:
            raise UserValueError("Axis must be specified when shapes of a and weights differ.")
        axes = normalize_axes(axis, a.ndim)
        if w.ndim != len(axes) or tuple(a.shape[x] for x in axes) != tuple(w.shape):
            raise UserValueError("Shape of weights must be consistent with shape of a along specified axis.")
        w = lax.broadcast_in_dim(w, a.shape, axes)
    result_dtype = np.result_type(a.dtype, w.dtype, np.float64) if a.dtype.kind in "iub" else np.result_type(a.dtype, w.dtype)
    w = lax.convert(w, result_dtype)
    scale = EXPORTS["sum"](w, axis=axis, keepdims=keepdims)
    total = EXPORTS["sum"](_u(np.multiply, lax.convert(a, result_dtype), w), axis=axis, keepdims=keepdims)
    lax.add_check(_u(np.equal, scale, 0), ZeroDivisionError, "Weights sum to zero, can't be normalized")
    avg = _u(np.true_divide, total, scale)
    return (avg, lax.broadcast_to(scale, avg.shape)) if returned else avg


@numpy_function(np.cov)
def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *, dtype=None):
    if fweights is not None or aweights is not None:
        raise UnsupportedNumpyError("np.cov(fweights=, aweights=) is not supported on traced arrays")
    x = _t(m)
    if x.ndim > 2:
        raise UserValueError("m has more than 2 dimensions")
    x = EXPORTS["atleast_2d"](x)
    if not rowvar and x.shape[0] != 1:
        x = lax.transpose(x, (1, 0))
    if y is not None:
        yy = EXPORTS["atleast_2d"](y if isinstance(y, Tracer) else lax.lift(x.trace, y, weak=False))
        if not rowvar and yy.shape[0] != 1:
            yy = lax.transpose(yy, (1, 0))
        x = EXPORTS["concatenate"]([x, yy], axis=0)
    out_dtype = np.result_type(x.dtype, np.float64) if dtype is None else np.dtype(dtype)
    x = lax.convert(x, out_dtype)
    if ddof is None:
        ddof = 0 if bias else 1
    n = x.shape[1]
    centred = _u(np.subtract, x, EXPORTS["mean"](x, axis=1, keepdims=True))
    c = EXPORTS["matmul"](centred, lax.transpose(centred, (1, 0)))
    fact = n - ddof
    c = _u(np.true_divide, c, float(fact) if fact > 0 else 0.0)
    return EXPORTS["squeeze"](c) if c.shape == (1, 1) or x.shape[0] == 1 else c


@numpy_function(np.corrcoef)
def corrcoef(x, y=None, rowvar=True, *, dtype=None):
    c = cov(x, y, rowvar, dtype=dtype)
    if c.ndim == 0:
        return _u(np.true_divide, c, c)
    d = EXPORTS["diagonal"](c)
    s = _u(np.sqrt, d)
    c = _u(np.true_divide, c, lax.broadcast_in_dim(s, c.shape, (0,)))
    c = _u(np.true_divide, c, lax.broadcast_in_dim(s, c.shape, (1,)))
    return EXPORTS["clip"](c, -1, 1)


@numpy_function(np.ptp)
def ptp(a, axis=None, out=None, keepdims=False):
    _no(out, None, "ptp")
    return _u(np.subtract, EXPORTS["max"](a, axis=axis, keepdims=keepdims), EXPORTS["min"](a, axis=axis, keepdims=keepdims))


@numpy_function(np.count_nonzero)
def count_nonzero(a, axis=None, *, keepdims=False):
    a = _t(a)
    nonzero = a if a.dtype == np.bool_ else _u(np.not_equal, a, 0)
    return EXPORTS["sum"](nonzero, axis=axis, keepdims=keepdims).astype(np.int64)


# ---- comparison and rounding -----------------------------------------------------------------
@numpy_function(np.isclose)
def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    trace = lax.trace_of([a, b])
    x = a if isinstance(a, Tracer) else lax.lift(trace, a)
    y = b if isinstance(b, Tracer) else lax.lift(trace, b)
    dt = np.result_type(y.dtype if not y.weak_type else 0.0, 1.0)
    y = lax.convert(y, dt, y.weak_type)
    finite_y = _u(np.isfinite, y)
    close = _u(np.less_equal, _u(np.absolute, _u(np.subtract, x, y)), _u(np.add, atol, _u(np.multiply, rtol, _u(np.absolute, y))))
    result = _u(np.logical_or, _u(np.logical_and, close, finite_y), _u(np.equal, x, y))
    if equal_nan:
        result = _u(np.logical_or, result, _u(np.logical_and, _u(np.isnan, x), _u(np.isnan, y)))
    return result


@numpy_function(np.allclose)
def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    return EXPORTS["all"](isclose(a, b, rtol, atol, equal_nan))


@numpy_function(np.array_equal)
def array_equal(a1, a2, equal_nan=False):
    trace = lax.trace_of([a1, a2])
    x = a1 if isinstance(a1, Tracer) else lax.lift(trace, a1, weak=False)
    y = a2 if isinstance(a2, Tracer) else lax.lift(trace, a2, weak=False)
    if x.shape != y.shape:
        return lax.full(trace, (), False, np.bool_)
    same = _u(np.equal, x, y)
    if equal_nan and x.dtype.kind == "f" and y.dtype.kind == "f":
        same = _u(np.logical_or, same, _u(np.logical_and, _u(np.isnan, x), _u(np.isnan, y)))
    return EXPORTS["all"](same)


@numpy_function(np.array_equiv)
def array_equiv(a1, a2):
    trace = lax.trace_of([a1, a2])
    x = a1 if isinstance(a1, Tracer) else lax.lift(trace, a1, weak=False)
    y = a2 if isinstance(a2, Tracer) else lax.lift(trace, a2, weak=False)
    try:
        np.broadcast_shapes(x.shape, y.shape)
    except ValueError:
        return lax.full(trace, (), False, np.bool_)
    return EXPORTS["all"](_u(np.equal, x, y))


@numpy_function(np.round)
def round(a, decimals=0, out=None):
    _no(out, None, "round")
    a = _t(a)
    decimals = operator.index(decimals)
    if a.dtype.kind in "iu":
        if decimals >= 0:
            return EXPORTS["copy"](a)
        scale = 10 ** (-decimals)  # NumPy rounds integers half to even too
        return (_u(np.multiply, _u(np.rint, _u(np.true_divide, a, scale)), scale)).astype(a.dtype)
    if a.dtype == np.bool_:
        return EXPORTS["copy"](a)
    if decimals == 0:
        return _u(np.rint, a)
    if decimals > 0:
        scale = 10.0 ** decimals
        return _u(np.true_divide, _u(np.rint, _u(np.multiply, a, scale)), scale)
    scale = 10.0 ** (-decimals)
    return _u(np.multiply, _u(np.rint, _u(np.true_divide, a, scale)), scale)


EXPORTS["around"] = EXPORTS["round"]
FUNCTIONS[np.around] = FUNCTIONS[np.round]


@numpy_function(np.fix)
def fix(x, out=None):
    """Round toward zero as NumPy's fix does: ceil, then floor where x >= 0 (so -0.5 -> -0.0)."""
    _no(out, None, "fix")
    x = _t(x)
    return EXPORTS["where"](_u(np.greater_equal, x, 0), _u(np.floor, x), _u(np.ceil, x))


@numpy_function(np.nan_to_num)
def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    x = _t(x)
    if x.dtype.kind != "f":
        return EXPORTS["copy"](x)
    info = np.finfo(x.dtype)
    x = EXPORTS["where"](_u(np.isnan, x), nan, x).astype(x.dtype)
    x = EXPORTS["where"](_u(np.equal, x, np.inf), info.max if posinf is None else posinf, x).astype(x.dtype)
    return EXPORTS["where"](_u(np.equal, x, -np.inf), info.min if neginf is None else neginf, x).astype(x.dtype)


@numpy_function(np.isposinf)
def isposinf(x, out=None):
    x = _t(x)
    return _u(np.logical_and, _u(np.isinf, x), _u(np.logical_not, _u(np.signbit, x)))


@numpy_function(np.isneginf)
def isneginf(x, out=None):
    x = _t(x)
    return _u(np.logical_and, _u(np.isinf, x), _u(np.signbit, x))


from . import complex_numbers as _complex_numbers  # noqa: E402  (np.real, np.imag, np.angle, ...)

EXPORTS["conj"] = EXPORTS["conjugate"] = lambda x, *args, **kwargs: apply_ufunc(np.conjugate, (x,), kwargs)


# ---- selection ---------------------------------------------------------------------------------
@numpy_function(np.select)
def select(condlist, choicelist, default=0):
    if len(condlist) != len(choicelist):
        raise UserValueError("list of cases must be same length as list of conditions")
    if not condlist:
        raise UserValueError("select with an empty condition list is not possible")
    trace = lax.trace_of(list(condlist) + list(choicelist))
    choices = [c if isinstance(c, Tracer) else lax.lift(trace, c) for c in choicelist]
    dtype = np.result_type(*[c.dtype if not c.weak_type else c.dtype.type(0).item() for c in choices],
                           np.asarray(default).dtype if not isinstance(default, (int, float)) else default)
    result = default
    for cond, choice in zip(reversed(list(condlist)), reversed(choices)):
        c = cond if isinstance(cond, Tracer) else lax.lift(trace, cond)
        if c.dtype != np.bool_:
            raise UserValueError(f"invalid entry in condlist: should be boolean ndarray, got {c.dtype}")
        result = EXPORTS["where"](c, choice, result)
    return lax.convert(_t(result), dtype)


@numpy_function(np.choose)
def choose(a, choices, out=None, mode="raise"):
    _no(out, None, "choose")
    trace = lax.trace_of([a] + list(choices))
    stacked = EXPORTS["stack"](list(EXPORTS["broadcast_arrays"](*[c if isinstance(c, Tracer) else lax.lift(trace, c, weak=False)
                                                                 for c in choices])))
    index = a if isinstance(a, Tracer) else np.asarray(a)
    n = stacked.shape[0]
    if mode == "wrap":
        index = _u(np.mod, index, n) if isinstance(index, Tracer) else np.mod(index, n)
    elif isinstance(index, Tracer):
        if mode != "clip":  # 'raise': NumPy's error, after the call (a runtime check)
            lax.add_check(_u(np.logical_or, _u(np.less, index, 0), _u(np.greater_equal, index, n)),
                                  UserValueError, "invalid entry in choice array")
        index = EXPORTS["clip"](index, 0, n - 1)
    elif mode == "clip":
        index = np.clip(index, 0, n - 1)
    elif (index < 0).any() or (index >= n).any():
        raise UserValueError("invalid entry in choice array")
    shape = np.broadcast_shapes(np.shape(index), stacked.shape[1:])
    stacked = lax.broadcast_to(stacked, (n,) + shape)
    index = EXPORTS["broadcast_to"](index, shape) if isinstance(index, Tracer) else np.broadcast_to(index, shape)
    return EXPORTS["take_along_axis"](stacked, EXPORTS["expand_dims"](index, 0) if isinstance(index, Tracer)
                                      else index[None], axis=0)[0]


def _static_mask(condition, what):
    if isinstance(condition, Tracer):
        raise UnsupportedNumpyError(f"{what} with a traced condition has a data-dependent size; use "
                                    "np.where(condition, a, 0) for a same-shaped result")
    return np.asarray(condition)


@numpy_function(np.compress)
def compress(condition, a, axis=None, out=None):
    _no(out, None, "compress")
    cond = _static_mask(condition, "np.compress")
    return EXPORTS["take"](a, np.nonzero(cond)[0], axis=axis)


@numpy_function(np.extract)
def extract(condition, arr):
    cond = _static_mask(condition, "np.extract")
    return EXPORTS["take"](EXPORTS["ravel"](arr), np.nonzero(np.ravel(cond))[0])


@numpy_function(np.sinc)
def sinc(x):
    x = _t(x)
    if x.dtype.kind != "f":
        x = lax.convert(x, np.float64)
    y = _u(np.multiply, math.pi, EXPORTS["where"](_u(np.equal, x, 0), 1.0e-20, x).astype(x.dtype))
    return _u(np.true_divide, _u(np.sin, y), y)


# ---- polynomials (coefficients highest power first, as np.poly*) -------------------------------
@numpy_function(np.polyval)
def polyval(p, x):
    trace = lax.trace_of([p, x])
    p = p if isinstance(p, Tracer) else lax.lift(trace, np.asarray(p), weak=False)
    x = x if isinstance(x, Tracer) else lax.lift(trace, np.asarray(x), weak=False)
    y = _u(np.multiply, x, 0)
    y = lax.convert(y, np.result_type(p.dtype, y.dtype))
    for i in range(p.shape[0]):  # Horner's rule, as NumPy
        y = _u(np.add, _u(np.multiply, y, x), p[i])
    return y


def _coefficients(*ps):
    trace = lax.trace_of(list(ps))
    out = [p if isinstance(p, Tracer) else lax.lift(trace, np.atleast_1d(np.asarray(p)), weak=False) for p in ps]
    return [EXPORTS["atleast_1d"](p) for p in out]


@numpy_function(np.polyadd)
def polyadd(a1, a2):
    a, b = _coefficients(a1, a2)
    n = builtins.max(a.shape[0], b.shape[0])
    a = EXPORTS["pad"](a, (n - a.shape[0], 0))
    b = EXPORTS["pad"](b, (n - b.shape[0], 0))
    return _u(np.add, a, b)


@numpy_function(np.polysub)
def polysub(a1, a2):
    a, b = _coefficients(a1, a2)
    n = builtins.max(a.shape[0], b.shape[0])
    return _u(np.subtract, EXPORTS["pad"](a, (n - a.shape[0], 0)), EXPORTS["pad"](b, (n - b.shape[0], 0)))


@numpy_function(np.polymul)
def polymul(a1, a2):
    a, b = _coefficients(a1, a2)
    return EXPORTS["convolve"](a, b)


@numpy_function(np.polyder)
def polyder(p, m=1):
    (p,) = _coefficients(p)
    for _ in range(operator.index(m)):
        n = p.shape[0] - 1
        if n <= 0:
            return lax.full(p.trace, (1,), 0, np.result_type(p.dtype, np.int64))
        p = _u(np.multiply, p[:-1], np.arange(n, 0, -1))
    return p


@numpy_function(np.polyint)
def polyint(p, m=1, k=None):
    (p,) = _coefficients(p)
    m = operator.index(m)
    ks = np.zeros(m) if k is None else np.broadcast_to(np.asarray(k, dtype=float), (m,))
    for i in range(m):
        n = p.shape[0]
        scaled = _u(np.true_divide, p, np.arange(n, 0, -1).astype(float))
        p = EXPORTS["concatenate"]([scaled, lax.lift(p.trace, np.asarray([ks[i]]), weak=False)])
    return p
