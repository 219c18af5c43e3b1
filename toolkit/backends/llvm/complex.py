"""Complex numbers in the elemental emitter. A ``c64``/``c128`` value is an LLVM struct
``{float, float}``/``{double, double}`` (real, imaginary): the same bytes NumPy stores.

Each formula is NumPy's, so results agree with NumPy where it matters:

- ``multiply``: ``(fma(ar, br, -ai*bi), fma(ar, bi, ai*br))``, as NumPy's SIMD loop computes
  it on x86-64 with FMA3 or AVX-512 (bit for bit; NumPy's scalar ``complex ** n`` multiplies
  without fused multiply-adds, which the frontend spells out with real operations);
- ``divide``: Smith's algorithm exactly as NumPy's loop writes it (its branches as selects);
- ``abs``: NumPy's SIMD ``cabs`` (``big * sqrt(fma(r, r, 1))``), not libm's ``hypot``;
- ``exp``, ``log``, ``sqrt``: C99's ``cexp``/``clog``/``csqrt`` (NumPy calls libm's). ``sqrt``
  follows FreeBSD's csqrt (scaled near overflow; C99's special values); ``log`` takes
  ``log1p`` of ``|z|^2 - 1`` near the unit circle, where ``log(hypot)`` would lose the real
  part. Results agree with glibc's to a few ulp; ``exp`` of an infinite real part with an
  infinite or NaN imaginary part gives NaN parts where C99 specifies signed zeros or infinity."""
from __future__ import annotations

import math

from llvmlite import ir

from ...ir import dtypes
from ...ir.dtypes import ElementType
from .emitter import CodegenUnsupported, intrinsic as _intrinsic
from .scalars import BINARY as REAL_BINARY, UNARY as REAL_UNARY, convert_real, widened
from .types import value_type


def parts(b: ir.IRBuilder, z):
    return b.extract_value(z, 0), b.extract_value(z, 1)


def make(b: ir.IRBuilder, t: ElementType, re, im):
    z = ir.Constant(value_type(t), ir.Undefined)
    return b.insert_value(b.insert_value(z, re, 0), im, 1)


def _c(x, v: float) -> ir.Constant:
    return ir.Constant(x.type, v)


def _fabs(e, x):
    return _intrinsic(e, "llvm.fabs", [x], x.type)


def _copysign(e, magnitude, sign):
    return _intrinsic(e, "llvm.copysign", [magnitude, sign], magnitude.type)


def _real_op(e, opcode: str, xs, part: ElementType):
    table = REAL_UNARY if len(xs) == 1 else REAL_BINARY
    return table[opcode](e, *xs, part)


def _fma(e, a, c, d):
    return _intrinsic(e, "llvm.fma", [a, c, d], a.type)


def hypot(e, x, y, part: ElementType = None):
    """NumPy's complex absolute value (its SIMD loop): ``big * sqrt(fma(r, r, 1))`` with
    ``r = small / big``; an infinite part gives inf even beside a NaN; no division of 0 by 0
    or inf by inf. No library call, so every target computes the same bits."""
    b = e.b
    ax, ay = _fabs(e, x), _fabs(e, y)
    inf, nan, zero = _c(x, math.inf), _c(x, math.nan), _c(x, 0.0)
    x_inf, y_inf = b.fcmp_ordered("==", ax, inf), b.fcmp_ordered("==", ay, inf)
    ay = b.select(x_inf, inf, ay)
    ax = b.select(y_inf, inf, ax)
    x_num, y_num = b.fcmp_ordered("ord", ax, ax), b.fcmp_ordered("ord", ay, ay)
    ay = b.select(x_num, ay, nan)
    ax = b.select(y_num, ax, nan)
    x_larger = b.fcmp_ordered(">", ax, ay)
    big = b.select(x_larger, ax, ay)  # NaN when either is (both are, by now)
    small = b.select(x_larger, ay, ax)
    divide = b.not_(b.or_(b.fcmp_ordered("==", big, zero), b.fcmp_ordered("==", small, inf)))
    ratio = b.select(divide, b.fdiv(small, big), zero)
    root = _intrinsic(e, "llvm.sqrt", [_fma(e, ratio, ratio, _c(x, 1.0))], x.type)
    return b.fmul(root, big)


def libm_hypot(e, x, y, part: ElementType):
    """libm's hypot (C99's csqrt and clog use it), where the target has a math library."""
    if e.target == "cpu" or e.device_math:
        return e.math_call("hypot", [x, y], part)
    return hypot(e, x, y, part)


# ---- arithmetic ----------------------------------------------------------------------------
def add(e, z, w, t, flags=()):
    b = e.b
    (zr, zi), (wr, wi) = parts(b, z), parts(b, w)
    return make(b, t, b.fadd(zr, wr, flags=flags), b.fadd(zi, wi, flags=flags))


def subtract(e, z, w, t):
    b = e.b
    (zr, zi), (wr, wi) = parts(b, z), parts(b, w)
    return make(b, t, b.fsub(zr, wr), b.fsub(zi, wi))


def multiply(e, z, w, t):
    """NumPy's SIMD loop: ``(fma(ar, br, -(ai*bi)), fma(ar, bi, ai*br))``."""
    b = e.b
    (ar, ai), (br, bi) = parts(b, z), parts(b, w)
    return make(b, t, _fma(e, ar, br, b.fneg(b.fmul(ai, bi))), _fma(e, ar, bi, b.fmul(ai, br)))


def divide(e, z, w, t):
    """NumPy's complex division (Smith's algorithm), both branches computed, one selected."""
    b = e.b
    (ar, ai), (br, bi) = parts(b, z), parts(b, w)
    one = _c(ar, 1.0)
    abs_r, abs_i = _fabs(e, br), _fabs(e, bi)
    real_larger = b.fcmp_ordered(">=", abs_r, abs_i)
    both_zero = b.and_(
        b.fcmp_ordered("==", abs_r, _c(ar, 0.0)), b.fcmp_ordered("==", abs_i, _c(ar, 0.0))
    )
    # |br| >= |bi|, not both zero
    rat = b.fdiv(bi, br)
    scl = b.fdiv(one, b.fadd(br, b.fmul(bi, rat)))
    r1 = b.fmul(b.fadd(ar, b.fmul(ai, rat)), scl)
    i1 = b.fmul(b.fsub(ai, b.fmul(ar, rat)), scl)
    # both zero: a complex inf or nan
    r0, i0 = b.fdiv(ar, abs_r), b.fdiv(ai, abs_r)
    # |br| < |bi| (or a NaN)
    rat2 = b.fdiv(br, bi)
    scl2 = b.fdiv(one, b.fadd(bi, b.fmul(br, rat2)))
    r2 = b.fmul(b.fadd(b.fmul(ar, rat2), ai), scl2)
    i2 = b.fmul(b.fsub(b.fmul(ai, rat2), ar), scl2)
    re = b.select(real_larger, b.select(both_zero, r0, r1), r2)
    im = b.select(real_larger, b.select(both_zero, i0, i1), i2)
    return make(b, t, re, im)


def negate(e, z, t):
    b = e.b
    zr, zi = parts(b, z)
    return make(b, t, b.fneg(zr), b.fneg(zi))


def modulus(e, z, t):
    zr, zi = parts(e.b, z)
    return hypot(e, zr, zi, t.component)


# ---- exp, log, sqrt ------------------------------------------------------------------------
def exp(e, z, t):
    b = e.b
    part = t.component
    x, y = parts(b, z)
    ex = _real_op(e, "exponential", [x], part)
    re = b.fmul(ex, _real_op(e, "cosine", [y], part))
    im = b.fmul(ex, _real_op(e, "sine", [y], part))
    real_axis = b.fcmp_ordered("==", y, _c(y, 0.0))  # exp(x + 0i) = exp(x) + 0i, even for x = inf
    return make(b, t, b.select(real_axis, ex, re), b.select(real_axis, y, im))


def log(e, z, t):
    b = e.b
    part = t.component
    x, y = parts(b, z)
    ax, ay = _fabs(e, x), _fabs(e, y)
    big = b.select(b.fcmp_ordered(">=", ax, ay), ax, ay)
    small = b.select(b.fcmp_ordered(">=", ax, ay), ay, ax)
    far = _real_op(e, "log", [libm_hypot(e, x, y, part)], part)
    # near |z| = 1: log|z| = log1p((big - 1)(big + 1) + small^2) / 2 keeps the small real part
    one = _c(x, 1.0)
    near_arg = b.fadd(b.fmul(b.fsub(big, one), b.fadd(big, one)), b.fmul(small, small))
    near = b.fmul(_c(x, 0.5), _real_op(e, "log-plus-one", [near_arg], part))
    use_near = b.and_(b.fcmp_ordered(">=", big, _c(x, 0.5)), b.fcmp_ordered("<", big, _c(x, 2.0)))
    re = b.select(use_near, near, far)
    im = _real_op(e, "atan2", [y, x], part)
    return make(b, t, re, im)


_SQRT_THRESHOLD = {
    "f64": float.fromhex("0x1.a827999fcef32p+1022"),
    "f32": float.fromhex("0x1.a8279ap+126"),
}


def sqrt(e, z, t):
    """FreeBSD's csqrt: C99's special values, scaled by 1/4 near overflow."""
    b = e.b
    part = t.component
    a, y = parts(b, z)
    zero, inf, nan = _c(a, 0.0), _c(a, math.inf), _c(a, math.nan)
    threshold = _c(a, _SQRT_THRESHOLD[part.name])
    large = b.or_(
        b.fcmp_ordered(">=", _fabs(e, a), threshold), b.fcmp_ordered(">=", _fabs(e, y), threshold)
    )
    quarter = _c(a, 0.25)
    sa = b.select(large, b.fmul(a, quarter), a)
    sy = b.select(large, b.fmul(y, quarter), y)
    h = libm_hypot(e, sa, sy, part)

    def root(v):
        return _intrinsic(e, "llvm.sqrt", [v], v.type)

    half = _c(a, 0.5)
    t_pos = root(b.fmul(b.fadd(sa, h), half))
    t_neg = root(b.fmul(b.fadd(b.fneg(sa), h), half))
    two = _c(a, 2.0)
    non_negative = b.fcmp_ordered(">=", sa, zero)
    re = b.select(non_negative, t_pos, b.fdiv(_fabs(e, sy), b.fmul(two, t_neg)))
    im = b.select(non_negative, b.fdiv(sy, b.fmul(two, t_pos)), _copysign(e, t_neg, sy))
    re = b.select(large, b.fmul(re, two), re)
    im = b.select(large, b.fmul(im, two), im)
    # special values, the last applied first in C99's order: later selects override earlier
    a_inf = b.fcmp_ordered("==", _fabs(e, a), inf)
    neg = b.fcmp_ordered("<", a, zero)
    y_minus_y = b.fsub(y, y)  # 0 for finite y, NaN for inf or NaN
    re = b.select(a_inf, b.select(neg, _fabs(e, y_minus_y), a), re)
    im = b.select(a_inf, b.select(neg, _copysign(e, a, y), _copysign(e, y_minus_y, y)), im)
    a_nan = b.fcmp_unordered("uno", a, a)
    re = b.select(a_nan, a, re)
    im = b.select(a_nan, nan, im)
    y_inf = b.fcmp_ordered("==", _fabs(e, y), inf)
    re = b.select(y_inf, inf, re)
    im = b.select(y_inf, y, im)
    both_zero = b.and_(b.fcmp_ordered("==", a, zero), b.fcmp_ordered("==", y, zero))
    re = b.select(both_zero, zero, re)
    im = b.select(both_zero, y, im)
    return make(b, t, re, im)


UNARY = {"negate": negate, "exponential": exp, "log": log, "sqrt": sqrt}
BINARY = {"add": add, "subtract": subtract, "multiply": multiply, "divide": divide}


def elementwise_binary(e, opcode: str, a, c, t):
    """``opcode`` on two values as the elementwise op computes it (NumPy's semantics: complex
    pairs by the rules above, float16 widened to float32 and rounded): a scan's running fold,
    a scatter's combiner (``np.add.at``)."""
    if t.is_complex:
        rule = BINARY.get(opcode)
        if rule is None:
            raise CodegenUnsupported(f"{opcode} of complex numbers")
        return rule(e, a, c, t)
    return widened(e, REAL_BINARY[opcode], [a, c], t)


def compare(e, z, w, direction: str):
    b = e.b
    (zr, zi), (wr, wi) = parts(b, z), parts(b, w)
    if direction == "EQ":
        return b.and_(b.fcmp_ordered("==", zr, wr), b.fcmp_ordered("==", zi, wi))
    return b.or_(b.fcmp_unordered("!=", zr, wr), b.fcmp_unordered("!=", zi, wi))


def convert(e, x, src: ElementType, dst: ElementType):
    """Into a complex type: a real value becomes (value, 0); a complex one changes width."""

    part = dst.component
    if src.is_complex:
        re, im = parts(e.b, x)
        return make(
            e.b,
            dst,
            convert_real(e, re, src.component, part),
            convert_real(e, im, src.component, part),
        )
    re = convert_real(e, x, src, part)
    return make(e.b, dst, re, ir.Constant(re.type, 0.0))


__all__ = ["UNARY", "BINARY", "compare", "convert", "modulus", "make", "parts", "dtypes"]
