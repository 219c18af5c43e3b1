"""Complex numbers on traced arrays (``complex64``/``complex128``).

What is traced: arithmetic (+, -, *, /, negation, ``square``, ``reciprocal``, integer powers),
``abs``, ``exp``, ``log``, ``sqrt``, ``conj``, ``real``, ``imag``, ``angle``, ``==``/``!=``,
``isnan``/``isinf``/``isfinite``, the logical ufuncs, sums and products, dots and data movement.
Each follows NumPy's own formula (see ``backends/llvm/complex.py`` for the HLO ops, and
``reciprocal`` and ``power`` below). Any other ufunc on a complex operand raises an error that
names it: NumPy's complex ordering, complex trigonometry and friends are not traced yet, and
nothing falls back to a real-number path that would quietly give a different answer."""
from __future__ import annotations

import math

import numpy as np

from . import lax
from .errors import UnsupportedNumpyError
from .numpy_functions import numpy_function
from .tracer import Tracer
from .ufuncs import UFUNCS, apply_ufunc


def _t(x) -> Tracer:
    if isinstance(x, Tracer):
        return x
    trace = lax.trace_of([x])
    return lax.lift(trace, x)


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
    out_im = lax.select(small_imag, _e("divide", _e("negate", r1), d1), _e("divide", _e("negate", one), d2))
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
        return lax.elementwise(opcode, *truths) if opcode != "not" else lax.elementwise("not", truths[0])
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
                                    "|n| >= 100, which toolkit does not trace")
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


# ---- np.real, np.imag, np.angle and the complex predicates ----------------------------------
@numpy_function(np.real)
def real(val):
    return real_part(_t(val))


@numpy_function(np.imag)
def imag(val):
    return imag_part(_t(val))


@numpy_function(np.angle)
def angle(z, deg=False):
    z = _t(z)
    if z.dtype.kind == "c":
        a = _e("atan2", imag_part(z), real_part(z))
    else:
        zf = z if z.dtype.kind == "f" else lax.convert(z, np.float64)
        a = apply_ufunc(np.arctan2, (lax.full(zf.trace, zf.shape, 0, zf.dtype), zf))
    return apply_ufunc(np.multiply, (a, 180.0 / math.pi)) if deg else a


def _imaginary_test(x, direction: str, real_answer: bool) -> Tracer:
    x = _t(x)
    if x.dtype.kind == "c":
        im = imag_part(x)
        return lax.compare(im, lax.full_like(im, 0), direction)
    return lax.full(x.trace, x.shape, real_answer, np.bool_)


@numpy_function(np.isreal)
def isreal(x):
    return _imaginary_test(x, "EQ", True)


@numpy_function(np.iscomplex)
def iscomplex(x):
    return _imaginary_test(x, "NE", False)


@numpy_function(np.isrealobj)
def isrealobj(x):
    return _t(x).dtype.kind != "c"


@numpy_function(np.iscomplexobj)
def iscomplexobj(x):
    return _t(x).dtype.kind == "c"


UFUNCS[np.conjugate] = lambda x, out: x  # a real number is its own conjugate


@numpy_function(np.sort_complex)
def sort_complex(a):
    """NumPy's complex order along the last axis: lexicographic (real, then imaginary), with
    NaNs after the numbers as NumPy places them: R + Rj, R + nanj, nan + Rj, nan + nanj."""
    from .numpy_functions import EXPORTS

    a = _t(a)
    if a.dtype.kind != "c":
        small = a.dtype in (np.int8, np.uint8, np.int16, np.uint16)
        return lax.convert(EXPORTS["sort"](a), np.complex64 if small else np.complex128)
    re, im = real_part(a), imag_part(a)
    re_nan, im_nan = lax.compare(re, re, "NE"), lax.compare(im, im, "NE")
    group = apply_ufunc(np.add, (apply_ufunc(np.multiply, (lax.convert(re_nan, np.int8), 2)),
                                 lax.convert(apply_ufunc(np.logical_and, (im_nan, apply_ufunc(np.logical_not, (re_nan,)))), np.int8)))
    group = EXPORTS["where"](apply_ufunc(np.logical_and, (re_nan, im_nan)), 3, group)
    order = EXPORTS["lexsort"]((im, re, group))
    return EXPORTS["take_along_axis"](a, order, axis=-1)
