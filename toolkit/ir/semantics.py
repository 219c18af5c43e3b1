"""XLA's element semantics on NumPy arrays, where they differ from NumPy's own.

Integer division truncates toward zero, ``x / 0`` is -1 (all bits set) and ``x % 0`` is x;
shifts by the bit width or more give 0 (or the sign fill); float -> int conversion
saturates and maps NaN to 0; integer power by repeated squaring, wrapping."""
from __future__ import annotations

import math

import numpy as np


def int_divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    dtype = np.result_type(a, b)
    a, b = np.asarray(a, dtype), np.asarray(b, dtype)
    zero = b == 0
    safe = np.where(zero, 1, b).astype(dtype)
    if dtype.kind == "u":
        q = a // safe
        return np.where(zero, np.array(-1).astype(dtype), q).astype(dtype)
    info = np.iinfo(dtype)
    overflow = (a == info.min) & (safe == -1)
    safe = np.where(overflow, 1, safe).astype(dtype)
    q = a // safe
    r = a - q * safe
    q = q + ((r != 0) & ((a < 0) != (safe < 0))).astype(dtype)
    q = np.where(overflow, a, q)
    return np.where(zero, np.array(-1, dtype), q).astype(dtype)


def int_remainder(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    dtype = np.result_type(a, b)
    a, b = np.asarray(a, dtype), np.asarray(b, dtype)
    zero = b == 0
    safe_b = np.where(zero, 1, b).astype(dtype)
    r = a - int_divide(a, safe_b) * safe_b
    return np.where(zero, a, r).astype(dtype)


def int_power(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    dtype = np.result_type(a, b)
    a, b = np.asarray(a, dtype), np.asarray(b, dtype)
    result = np.ones(np.broadcast(a, b).shape, dtype)
    base = np.broadcast_to(a, result.shape).copy()
    exp = np.broadcast_to(b, result.shape).copy()
    negative = exp < 0 if dtype.kind == "i" else np.zeros(result.shape, bool)
    exp = np.where(negative, 0, exp).astype(dtype)
    for _ in range(dtype.itemsize * 8):
        if not exp.any():
            break
        odd = (exp & 1).astype(bool)
        result = np.where(odd, result * base, result).astype(dtype)
        base = (base * base).astype(dtype)
        exp = exp >> 1
    if negative.any():  # x ** -n is 0, except 1 ** -n == 1 and (-1) ** -n == +-1
        odd = (np.broadcast_to(b, result.shape) & 1).astype(bool)
        neg_one = np.where(odd, -1, 1).astype(dtype)
        special = np.where(
            base_is(a, 1, result.shape), 1, np.where(base_is(a, -1, result.shape), neg_one, 0)
        )
        result = np.where(negative, special, result).astype(dtype)
    return result


def base_is(a, value, shape) -> np.ndarray:
    return np.broadcast_to(a == value, shape)


def _unsigned(dtype: np.dtype) -> np.dtype:
    return np.dtype(f"u{dtype.itemsize}")


def shift(a: np.ndarray, b: np.ndarray, kind: str) -> np.ndarray:
    dtype = np.result_type(a, b)
    bits = dtype.itemsize * 8
    a, b = np.asarray(a, dtype), np.asarray(b, dtype)
    amount = b.astype(_unsigned(dtype))  # negative amounts are huge: out of range
    in_range = amount < bits
    safe = np.where(in_range, amount, 0).astype(dtype)
    if kind == "left":
        out = np.left_shift(a, safe)
        return np.where(in_range, out, 0).astype(dtype)
    if kind == "logical":
        ua = a.astype(_unsigned(dtype))
        out = np.right_shift(ua, safe.astype(ua.dtype)).astype(dtype)
        return np.where(in_range, out, 0).astype(dtype)
    out = np.right_shift(a, safe)
    fill = np.where(a < 0, -1, 0) if dtype.kind == "i" else np.zeros_like(a)
    return np.where(in_range, out, fill).astype(dtype)


def convert(x: np.ndarray, to: np.dtype) -> np.ndarray:
    to = np.dtype(to)
    if to.kind == "b":
        return x != 0
    if x.dtype.kind == "f" and to.kind in "iu":
        info = np.iinfo(to)
        clipped = np.where(np.isnan(x), 0, x)
        lo = np.asarray(info.min, dtype=np.float64)
        hi = np.asarray(info.max, dtype=np.float64)
        wide = clipped.astype(np.float64)
        out = np.where(wide <= lo, info.min, np.where(wide >= hi, info.max, 0))
        inside = (wide > lo) & (wide < hi)
        return np.where(
            inside, np.trunc(np.where(inside, wide, 0)).astype(to), out.astype(to)
        ).astype(to)
    return x.astype(to)


def round_half_away(x: np.ndarray) -> np.ndarray:
    t = np.trunc(x)
    frac = np.abs(x - t)
    return np.where(frac >= 0.5, t + np.copysign(np.ones_like(x), x), t).astype(x.dtype)


def sign(x: np.ndarray) -> np.ndarray:
    if x.dtype.kind == "f":
        s = np.sign(x)
        return np.where(x == 0, x, s).astype(x.dtype)  # keeps -0.0 and nan
    if x.dtype.kind == "b":
        return x.copy()
    return np.sign(x).astype(x.dtype)


def logistic(x: np.ndarray) -> np.ndarray:
    one = np.ones((), x.dtype)
    e = np.exp(-np.abs(x))
    pos = one / (one + e)
    return np.where(x >= 0, pos, e / (one + e)).astype(x.dtype)


_erf = np.vectorize(math.erf, otypes=[np.float64])


def erf(x: np.ndarray) -> np.ndarray:
    if x.size == 0:
        return x.copy()
    return _erf(x.astype(np.float64)).astype(x.dtype)


def count_leading_zeros(x: np.ndarray) -> np.ndarray:
    bits = x.dtype.itemsize * 8
    u = x.astype(_unsigned(x.dtype))
    n = np.full(x.shape, bits, dtype=x.dtype)
    for i in range(bits):
        set_bit = ((u >> np.array(bits - 1 - i, u.dtype)) & 1).astype(bool)
        n = np.where(set_bit & (n == bits), i, n).astype(x.dtype)
    return n


def make_complex(re: np.ndarray, im: np.ndarray) -> np.ndarray:
    """XLA's complex(re, im), part by part (``re + 1j * im`` would turn inf parts into NaN)."""
    out = np.empty(
        np.broadcast_shapes(np.shape(re), np.shape(im)), np.result_type(re, im, np.complex64)
    )
    out.real, out.imag = re, im
    return out
