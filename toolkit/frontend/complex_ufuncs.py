"""The ufuncs of complex numbers on traced arrays (``complex64``/``complex128``).

What is traced: arithmetic (+, -, *, /, negation, ``square``, ``reciprocal``, integer powers),
``abs``, ``exp``, ``log``, ``sqrt``, ``conj``, ``real``, ``imag``, ``angle``, ``==``/``!=``,
``isnan``/``isinf``/``isfinite``, the logical ufuncs, sums and products, dots and data movement;
complex_math adds ``power`` with any exponent and the trigonometric and hyperbolic functions and
their inverses. Each follows NumPy's own formula (see ``backends/llvm/complex.py`` for the HLO
ops, and ``reciprocal`` and ``power`` below). Any other ufunc on a complex operand raises an
error that names it: NumPy's complex ordering is not traced, and nothing falls back to a
real-number path that would quietly give a different answer."""
from __future__ import annotations

import numpy as np

from . import lax
from .errors import UnsupportedNumpyError
from .tracer import Tracer


def _e(opcode, *xs):
    return lax.elementwise(opcode, *xs)


def real_part(z: Tracer) -> Tracer:
    return _e("real", z) if z.dtype.kind == "c" else z


def imag_part(z: Tracer) -> Tracer:
    return _e("imag", z) if z.dtype.kind == "c" else lax.full_like(z, 0)


def make(re: Tracer, im: Tracer) -> Tracer:
    return _e("complex", re, im)


def _same_op(opcode):
    return lambda *xs, out: lax.elementwise(opcode, *xs)


def _conjugate(z, out):
    return make(real_part(z), _e("negate", imag_part(z)))


def _reciprocal(z, out):
    """NumPy's complex reciprocal loop (not 1/z by division: its rounding differs)."""
    re, im = real_part(z), imag_part(z)
    one = lax.full_like(re, 1.0)
    small_imag = lax.compare(_e("abs", im), _e("abs", re), "LE")
    r1 = _e("divide", im, re)
    d1 = _e("add", re, _e("multiply", im, r1))
    r2 = _e("divide", re, im)
    d2 = _e("add", _e("multiply", re, r2), im)
    out_re = lax.select(small_imag, _e("divide", one, d1), _e("divide", r2, d2))
    out_im = lax.select(
        small_imag, _e("divide", _e("negate", r1), d1), _e("divide", _e("negate", one), d2)
    )
    return make(out_re, out_im)


def _either(test):
    def impl(z, out):
        return lax.elementwise("or", test(real_part(z)), test(imag_part(z)))
    return impl


def _is_nan(x):
    return lax.compare(x, x, "NE")


def _is_inf(x):
    return lax.compare(_e("abs", x), lax.full_like(x, np.inf), "EQ")


def _isfinite(z, out):
    return lax.elementwise("and", _e("is-finite", real_part(z)), _e("is-finite", imag_part(z)))


def _truth(z):
    return lax.compare(z, lax.full_like(z, 0), "NE")


def _logical(opcode):
    def impl(*zs, out):
        truths = [_truth(z) if z.dtype.kind != "b" else z for z in zs]
        return (
            lax.elementwise(opcode, *truths)
            if opcode != "not"
            else lax.elementwise("not", truths[0])
        )
    return impl


def _add(a, b, out):
    return lax.elementwise("add", a, b)


def _multiply(a, b, out):
    return lax.elementwise("multiply", a, b)


# ufunc -> its implementation for complex operands (the real-number ones may take kind-based
# paths that are wrong for complex numbers, so only these run)
COMPLEX_UFUNCS = {
    np.add: _add, np.subtract: _same_op("subtract"), np.multiply: _multiply,
    np.true_divide: _same_op("divide"), np.negative: _same_op("negate"),
    np.positive: lambda z, out: z, np.absolute: _same_op("abs"),
    np.square: lambda z, out: lax.elementwise("multiply", z, z), np.reciprocal: _reciprocal,
    np.exp: _same_op("exponential"), np.log: _same_op("log"), np.sqrt: _same_op("sqrt"),
    np.conjugate: _conjugate,
    np.equal: lambda a, b, out: lax.compare(a, b, "EQ"),
    np.not_equal: lambda a, b, out: lax.compare(a, b, "NE"),
    np.isnan: _either(_is_nan), np.isinf: _either(_is_inf), np.isfinite: _isfinite,
    np.logical_and: _logical("and"), np.logical_or: _logical("or"), np.logical_xor: _logical("xor"),
    np.logical_not: _logical("not"),
}


def unsupported_complex_ufunc(name: str) -> UnsupportedNumpyError:
    supported = ", ".join(sorted(u.__name__ for u in COMPLEX_UFUNCS))
    return UnsupportedNumpyError(
        f"np.{name} of complex numbers is not supported by toolkit (on complex operands toolkit "
        f"traces: {supported}; take .real/.imag to work on the parts)")


def _plain_multiply(z: Tracer, w: Tracer) -> Tracer:
    """``z * w`` without fused multiply-adds, as NumPy's scalar complex code computes it."""
    zr, zi, wr, wi = real_part(z), imag_part(z), real_part(w), imag_part(w)
    return make(_e("subtract", _e("multiply", zr, wr), _e("multiply", zi, wi)),
                _e("add", _e("multiply", zr, wi), _e("multiply", zi, wr)))


def integer_power(z: Tracer, n: int) -> Tracer:
    """``z ** n`` for a Python int ``n``, as NumPy's complex power does it: by repeated
    multiplication (binary powering from 1 + 0j for |n| > 3), then ``1 / r`` for n < 0."""
    if n == 0:
        return lax.full_like(z, 1)
    if n == 1:
        return z
    if n == 2:
        return _plain_multiply(z, z)
    if n == 3:
        return _plain_multiply(_plain_multiply(z, z), z)
    if not -100 < n < 100:
        raise UnsupportedNumpyError(f"complex ** {n}: NumPy uses its general complex power for "
                                    "|n| >= 100 (np.power traces it)")
    k, mask = abs(n), 1
    acc, p = lax.full_like(z, 1), z
    while True:
        if k & mask:
            acc = _plain_multiply(acc, p)
        mask <<= 1
        if k < mask:
            break
        p = _plain_multiply(p, p)
    return acc if n > 0 else _e("divide", lax.full_like(z, 1), acc)
