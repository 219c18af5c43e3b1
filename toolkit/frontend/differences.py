"""Differences on traced arrays: diff, ediff1d, gradient, trapezoid, unwrap."""
from __future__ import annotations

import builtins
import math
import operator

import numpy as np

from . import lax
from .arguments import as_tracer as _t
from .arguments import normalize_axis
from .errors import UnsupportedNumpyError, UserTypeError, UserValueError
from .registry import EXPORTS, numpy_function
from .scans import cumsum
from .tracer import Tracer
from .ufuncs import apply_ufunc


def _axis_slice(a: Tracer, axis: int, lo: int, hi: int) -> Tracer:
    spec = [(0, d, 1) for d in a.shape]
    spec[axis] = (lo, hi, 1)
    return lax.slice_(a, spec)


@numpy_function(np.diff)
def diff(a, n=1, axis=-1, prepend=np._NoValue, append=np._NoValue):
    a = _t(a)
    if a.ndim == 0:
        raise UserValueError("diff requires input that is at least one dimensional")
    axis = normalize_axis(axis, a.ndim)
    parts = []
    for extra in (prepend, append):
        if extra is np._NoValue:
            parts.append(None)
            continue
        e = extra if isinstance(extra, Tracer) else lax.lift(a.trace, extra, weak=False)
        if e.ndim == 0:
            shape = list(a.shape)
            shape[axis] = 1
            e = lax.broadcast_to(e, shape)
        parts.append(e)
    pieces = [p for p in (parts[0], a, parts[1]) if p is not None]
    if len(pieces) > 1:
        a = EXPORTS["concatenate"](pieces, axis=axis)
    n = operator.index(n)
    if n < 0:
        raise UserValueError(f"order must be non-negative but got {n}")
    for _ in range(n):
        m = a.shape[axis]
        if m == 0:
            break
        hi, lo = _axis_slice(a, axis, 1, m), _axis_slice(a, axis, 0, m - 1)
        a = lax.compare(hi, lo, "NE") if a.dtype == np.bool_ else apply_ufunc(np.subtract, (hi, lo))
    return a


def _no_boolean_subtract(a: Tracer) -> None:
    """NumPy's differences of booleans subtract them, which NumPy refuses."""
    if a.dtype == np.bool_:
        raise UserTypeError(
            "numpy boolean subtract, the `-` operator, is not supported, use the bitwise_xor, "
            "the `^` operator, or the logical_xor function instead.")


@numpy_function(np.ediff1d)
def ediff1d(ary, to_end=None, to_begin=None):
    a = _t(ary)
    _no_boolean_subtract(a)
    for name, extra in (("to_begin", to_begin), ("to_end", to_end)):
        if extra is not None and not np.can_cast(
                extra.dtype if isinstance(extra, Tracer) else np.asarray(extra).dtype, a.dtype,
                casting="same_kind"):
            raise UserTypeError(f"dtype of `{name}` must be compatible with input `ary` under "
                                "the `same_kind` rule.")
    flat = lax.reshape(a, (a.size,))
    d = diff(flat) if a.size else flat
    pieces = []
    if to_begin is not None:
        b = (
            to_begin
            if isinstance(to_begin, Tracer)
            else lax.lift(a.trace, np.asarray(to_begin).ravel(), a.dtype, weak=False)
        )
        pieces.append(lax.convert(lax.reshape(b, (b.size,)), a.dtype))
    pieces.append(d)
    if to_end is not None:
        e = (
            to_end
            if isinstance(to_end, Tracer)
            else lax.lift(a.trace, np.asarray(to_end).ravel(), a.dtype, weak=False)
        )
        pieces.append(lax.convert(lax.reshape(e, (e.size,)), a.dtype))
    return lax.concatenate(pieces, 0) if len(pieces) > 1 else d


@numpy_function(np.gradient)
def gradient(f, *varargs, axis=None, edge_order=1):
    f = _t(f)
    axes = tuple(range(f.ndim)) if axis is None else tuple(
        normalize_axis(a, f.ndim) for a in (axis if isinstance(axis, (tuple, list)) else (axis,)))
    spacing = list(varargs) if varargs else [1.0] * len(axes)
    if len(spacing) == 1 and len(axes) > 1:
        spacing = spacing * len(axes)
    if len(spacing) != len(axes) or builtins.any(
        np.ndim(h) != 0 or isinstance(h, Tracer) for h in spacing
    ):
        raise UnsupportedNumpyError(
            "np.gradient on traced arrays takes uniform spacings (Python scalars) only"
        )
    if edge_order not in (1, 2):
        raise UserValueError("'edge_order' greater than 2 not supported")
    _no_boolean_subtract(f)
    if f.dtype.kind in "iub":
        f = lax.convert(f, np.float64)
    out = []
    for ax, h in zip(axes, spacing):
        n = f.shape[ax]
        if n < edge_order + 1:
            raise UserValueError("Shape of array too small to calculate a numerical gradient, "
                                 "at least (edge_order + 1) elements are required.")
        h = float(h)
        interior = apply_ufunc(
            np.true_divide,
            (
                apply_ufunc(np.subtract, (_axis_slice(f, ax, 2, n), _axis_slice(f, ax, 0, n - 2))),
                2.0 * h,
            ),
        )
        s = [_axis_slice(f, ax, i, i + 1) for i in (0, 1, 2)] if edge_order == 2 else None
        if edge_order == 1:
            first = apply_ufunc(
                np.true_divide,
                (apply_ufunc(np.subtract, (_axis_slice(f, ax, 1, 2), _axis_slice(f, ax, 0, 1))), h),
            )
            last = apply_ufunc(
                np.true_divide,
                (
                    apply_ufunc(
                        np.subtract,
                        (_axis_slice(f, ax, n - 1, n), _axis_slice(f, ax, n - 2, n - 1)),
                    ),
                    h,
                ),
            )
        else:
            first = (s[0] * -1.5 + s[1] * 2.0 - s[2] * 0.5) / h
            e = [_axis_slice(f, ax, i, i + 1) for i in (n - 3, n - 2, n - 1)]
            last = (e[0] * 0.5 - e[1] * 2.0 + e[2] * 1.5) / h
        out.append(lax.concatenate([first, interior, last], ax))
    return out[0] if len(out) == 1 else tuple(out)


@numpy_function(np.trapezoid)
def trapezoid(y, x=None, dx=1.0, axis=-1):
    y = _t(y)
    axis = normalize_axis(axis, y.ndim)
    n = y.shape[axis]
    avg = apply_ufunc(np.add, (_axis_slice(y, axis, 1, n), _axis_slice(y, axis, 0, n - 1)))
    if x is None:
        widths = dx
    else:
        xs = x if isinstance(x, Tracer) else lax.lift(y.trace, x, weak=False)
        if xs.ndim == 1:
            d = diff(xs)
            shape = [1] * y.ndim
            shape[axis] = d.shape[0]
            widths = lax.reshape(d, shape)
        else:
            widths = diff(xs, axis=axis)
    return EXPORTS["sum"](apply_ufunc(np.multiply, (widths, avg)) / 2.0, axis=axis)


@numpy_function(np.unwrap)
def unwrap(p, discont=None, axis=-1, *, period=2 * math.pi):
    """NumPy's unwrap, step for step: in result_type(diff, period), so an integer array with
    an integer period stays integer (its half period by divmod, ambiguous only when even)."""
    p = _t(p)
    axis = normalize_axis(axis, p.ndim)
    dd = diff(p, axis=axis)
    discont = period / 2 if discont is None else discont
    dtype = np.result_type(dd.dtype, period)
    if np.issubdtype(dtype, np.integer):
        high, rem = divmod(period, 2)
        ambiguous = rem == 0
    else:
        high, ambiguous = period / 2, True
    low = -high
    ddmod = apply_ufunc(
        np.add, (apply_ufunc(np.mod, (apply_ufunc(np.subtract, (dd, low)), period)), low)
    )
    if ambiguous:  # (copyto(ddmod, high, where=...): high in ddmod's type)
        at_low = apply_ufunc(
            np.logical_and, (apply_ufunc(np.equal, (ddmod, low)), apply_ufunc(np.greater, (dd, 0))))
        ddmod = EXPORTS["where"](at_low, lax.full_like(ddmod, high), ddmod)
    correct = apply_ufunc(np.subtract, (ddmod, dd))
    small = apply_ufunc(np.less, (apply_ufunc(np.absolute, (dd,)), discont))
    correct = EXPORTS["where"](small, lax.full_like(correct, 0), correct)
    up = lax.convert(p, dtype)
    n = p.shape[axis]
    if n == 0:
        return up
    rest = apply_ufunc(np.add, (_axis_slice(p, axis, 1, n), cumsum(correct, axis=axis)))
    return lax.concatenate([_axis_slice(up, axis, 0, 1), lax.convert(rest, dtype)], axis)
