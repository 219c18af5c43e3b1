"""LLVM IR for the elementwise ops on real scalars (``UNARY``/``BINARY``: one emitter per op,
given the operand values and their element type), float16 computed in float32 as NumPy does,
and conversions between real types. The complex emitters and the elemental rules build on
these."""
from __future__ import annotations

import math

from llvmlite import ir

from ...ir import dtypes
from . import math as lmath
from .emitter import ElementalEmitter
from .emitter import intrinsic as _intrinsic
from .types import F16, F32, I1, value_type


def _unary_float(fn_name):
    def emit(e, x, t):
        return _intrinsic(e, fn_name, [x], value_type(t))
    return emit


def _transcendental(opcode, intrinsic=None, libm=None):
    def emit(e, x, t):
        if t.name == "f32" and opcode in lmath.OWN_F32:
            return lmath.OWN_F32[opcode](e.b, x)
        if t.name == "f64" and opcode in lmath.OWN_F64:
            return lmath.OWN_F64[opcode](e.b, x)
        ty = value_type(t)
        e.libm(f"{opcode} on {t.name}")
        if e.target == "gpu":  # NVPTX lowers none of LLVM's math intrinsics
            return e.math_call(libm or intrinsic.removeprefix("llvm."), [x], t)
        stem = libm or intrinsic.removeprefix("llvm.")
        if intrinsic is not None and not e.vectorizable(stem, t):
            return _intrinsic(e, intrinsic, [x], ty)
        return e.math_call(stem, [x], t)
    return emit


def _abs(e, x, t):
    if t.is_float:
        return _intrinsic(e, "llvm.fabs", [x], value_type(t))
    if t.is_bool or t.kind == "u":
        return x
    return e.b.select(e.b.icmp_signed("<", x, ir.Constant(x.type, 0)), e.b.neg(x), x)


def _sign(e, x, t):
    b = e.b
    if t.is_float:
        zero = ir.Constant(x.type, 0.0)
        one = ir.Constant(x.type, 1.0)
        s = b.select(
            b.fcmp_ordered(">", x, zero),
            one,
            b.select(b.fcmp_ordered("<", x, zero), b.fneg(one), x),
        )
        return s  # keeps -0.0, 0.0 and nan as they are
    if t.is_bool or t.kind == "u":
        return (
            b.zext(b.icmp_unsigned("!=", x, ir.Constant(x.type, 0)), x.type) if not t.is_bool else x
        )
    pos = b.zext(b.icmp_signed(">", x, ir.Constant(x.type, 0)), x.type)
    neg = b.zext(b.icmp_signed("<", x, ir.Constant(x.type, 0)), x.type)
    return b.sub(pos, neg)


def _round_afz(e, x, t):
    return _intrinsic(e, "llvm.round", [x], value_type(t))


def _is_finite(e, x, t):
    a = _intrinsic(e, "llvm.fabs", [x], value_type(t))
    return e.b.fcmp_ordered("<", a, ir.Constant(x.type, math.inf))


def _rsqrt(e, x, t):
    return e.b.fdiv(ir.Constant(x.type, 1.0), _intrinsic(e, "llvm.sqrt", [x], value_type(t)))


UNARY = {
    "negate": lambda e, x, t: e.b.fneg(x) if t.is_float else e.b.neg(x),
    "abs": _abs,
    "sign": _sign,
    "not": lambda e, x, t: e.b.not_(x),
    "floor": _unary_float("llvm.floor"),
    "ceil": _unary_float("llvm.ceil"),
    "round-nearest-even": _unary_float("llvm.roundeven"),
    "round-nearest-afz": _round_afz,
    "is-finite": _is_finite,
    "sqrt": _unary_float("llvm.sqrt"),
    "rsqrt": _rsqrt,
    "exponential": _transcendental("exponential", "llvm.exp"),
    "exponential-minus-one": _transcendental("exponential-minus-one", libm="expm1"),
    "log": _transcendental("log", "llvm.log"),
    "log-plus-one": _transcendental("log-plus-one", libm="log1p"),
    "tanh": _transcendental("tanh", libm="tanh"),
    "logistic": None,  # below: 1 / (1 + exp(-x)) for f64
    "sine": _transcendental("sine", "llvm.sin"),
    "cosine": _transcendental("cosine", "llvm.cos"),
    "tan": _transcendental("tan", libm="tan"),
    "cbrt": _transcendental("cbrt", libm="cbrt"),
    "erf": _transcendental("erf", libm="erf"),
    "popcnt": lambda e, x, t: _intrinsic(e, "llvm.ctpop", [x], x.type),
    "count-leading-zeros": lambda e, x, t: e.b.call(
        lmath.declare(e.module, "llvm.ctlz", [x.type], x.type, [x.type, I1]),
        [x, ir.Constant(I1, 0)],
    ),
}


def _logistic(e, x, t):
    if t.name == "f32":
        return lmath.logistic_f32(e.b, x)
    e.libm(f"logistic on {t.name}")
    one = ir.Constant(x.type, 1.0)
    if t.name == "f64":  # toolkit's own vectorisable exp
        exp = lmath.exp_f64(e.b, e.b.fneg(x))
    else:
        exp = (
            e.math_call("exp", [e.b.fneg(x)], t)
            if e.target == "gpu"
            else _intrinsic(e, "llvm.exp", [e.b.fneg(x)], x.type)
        )
    return e.b.fdiv(one, e.b.fadd(one, exp))


UNARY["logistic"] = _logistic


def _int_divide(e, a, b_, t, remainder: bool):
    b = e.b
    zero = ir.Constant(a.type, 0)
    is_zero = b.icmp_unsigned("==", b_, zero)
    safe = b.select(is_zero, ir.Constant(a.type, 1), b_)
    if t.kind == "u":
        q = b.urem(a, safe) if remainder else b.udiv(a, safe)
        return b.select(is_zero, a if remainder else ir.Constant(a.type, -1), q)
    bits = a.type.width
    min_value = ir.Constant(a.type, -(1 << (bits - 1)))
    overflow = b.and_(
        b.icmp_signed("==", a, min_value), b.icmp_signed("==", b_, ir.Constant(a.type, -1))
    )
    safe = b.select(overflow, ir.Constant(a.type, 1), safe)
    if remainder:
        r = b.srem(a, safe)
        return b.select(is_zero, a, b.select(overflow, zero, r))
    q = b.sdiv(a, safe)
    return b.select(is_zero, ir.Constant(a.type, -1), q)  # overflow: a / 1 == INT_MIN, as XLA


def _shift(kind):
    def emit(e, a, s, t):
        b = e.b
        bits = a.type.width
        in_range = b.icmp_unsigned("<", s, ir.Constant(a.type, bits))
        safe = b.select(in_range, s, ir.Constant(a.type, 0))
        if kind == "left":
            return b.select(in_range, b.shl(a, safe), ir.Constant(a.type, 0))
        if kind == "logical":
            return b.select(in_range, b.lshr(a, safe), ir.Constant(a.type, 0))
        fill = b.ashr(a, ir.Constant(a.type, bits - 1)) if t.kind == "i" else ir.Constant(a.type, 0)
        return b.select(in_range, b.ashr(a, safe) if t.kind == "i" else b.lshr(a, safe), fill)
    return emit


def _int_power(e, a, y, t):
    """Exponentiation by squaring, unrolled over the exponent's bits (branch-free)."""
    b = e.b
    ty = a.type
    result = ir.Constant(ty, 1)
    base = a
    exp = y
    negative = b.icmp_signed("<", y, ir.Constant(ty, 0)) if t.kind == "i" else ir.Constant(I1, 0)
    exp = b.select(negative, ir.Constant(ty, 0), exp)
    for _ in range(ty.width):
        odd = b.trunc(exp, I1)
        result = b.select(odd, b.mul(result, base), result)
        base = b.mul(base, base)
        exp = b.lshr(exp, ir.Constant(ty, 1))
    one, minus_one = ir.Constant(ty, 1), ir.Constant(ty, -1)
    odd_y = b.trunc(y, I1)
    special = b.select(
        b.icmp_signed("==", a, one),
        one,
        b.select(
            b.icmp_signed("==", a, minus_one), b.select(odd_y, minus_one, one), ir.Constant(ty, 0)
        ),
    )
    return b.select(negative, special, result)


def _float_power(e, a, y, t):
    if e.target == "gpu" and t.name == "f32":
        return lmath.pow_f32(e.b, a, y)
    if t.name == "f64":
        return lmath.pow_f64(e.b, a, y)
    e.libm(f"power on {t.name}")
    if e.target == "gpu" or e.vectorizable("pow", t, 2):
        return e.math_call("pow", [a, y], t)
    return _intrinsic(e, "llvm.pow", [a, y], value_type(t))


def _minmax(which):
    """NumPy's maximum/minimum: NaN from either side, and of two equal values (+0.0 and -0.0)
    the second, as the reference interpreter gives."""
    def emit(e, a, c, t):
        b = e.b
        if t.is_float:
            wins = b.fcmp_ordered(">" if which == "max" else "<", a, c)
            return b.select(b.fcmp_unordered("uno", a, a), a, b.select(wins, a, c))
        cmp = (b.icmp_unsigned if t.kind in "ub" else b.icmp_signed)(
            ">" if which == "max" else "<", a, c
        )
        return b.select(cmp, a, c)
    return emit


def _float_remainder(e, a, c, t):
    """C's fmod, exact. On the GPU libdevice's: LLVM's NVPTX back end expands ``frem`` as
    x - y*trunc(x/y), which is wrong when x/y is large or rounds (float64 fmod(1, 0.0004) gave
    -4.8e-17 where the exact answer is 0.0004, fmod(1e308, 1e-308) gave -inf)."""
    if e.target == "gpu":
        return e.math_call("fmod", [a, c], t)
    return e.b.frem(a, c)


def _atan2(e, a, c, t):
    if t.name == "f64":
        return lmath.atan2_f64(e.b, a, c)
    e.libm(f"atan2 on {t.name}")
    return e.math_call("atan2", [a, c], t)


def _arith(float_op, int_op):
    def emit(e, a, c, t):
        if t.is_float:
            return getattr(e.b, float_op)(a, c)
        return getattr(e.b, int_op)(a, c)
    return emit


BINARY = {
    "add": _arith("fadd", "add"),
    "subtract": _arith("fsub", "sub"),
    "multiply": _arith("fmul", "mul"),
    "divide": lambda e, a, c, t: e.b.fdiv(a, c) if t.is_float else _int_divide(e, a, c, t, False),
    "remainder": lambda e, a, c, t: _float_remainder(e, a, c, t) if t.is_float
    else _int_divide(e, a, c, t, True),
    "power": lambda e, a, c, t: _float_power(e, a, c, t) if t.is_float else _int_power(e, a, c, t),
    "maximum": _minmax("max"),
    "minimum": _minmax("min"),
    "atan2": _atan2,
    "and": lambda e, a, c, t: e.b.and_(a, c),
    "or": lambda e, a, c, t: e.b.or_(a, c),
    "xor": lambda e, a, c, t: e.b.xor(a, c),
    "shift-left": _shift("left"),
    "shift-right-arithmetic": _shift("arithmetic"),
    "shift-right-logical": _shift("logical"),
}

def widened(e: ElementalEmitter, fn, xs, t):
    """``fn(e, *xs, t)``, computed in float32 when ``t`` is float16 and rounded back, as XLA:CPU
    and NumPy's float16 loops compute (exact for +, -, *, /, sqrt: float32 has the bits)."""
    if t.name != "f16":
        return fn(e, *xs, t)
    result = fn(e, *[e.b.fpext(x, F32) for x in xs], dtypes.F32)
    return e.b.fptrunc(result, F16) if result.type == F32 else result


def convert_real(e, x, src, dst):
    """``x`` of real type ``src`` as real type ``dst``, with XLA's conversion semantics."""
    b = e.b
    sty, dty = value_type(src), value_type(dst)
    if src == dst:
        return x
    if dst.is_bool:
        return b.fcmp_unordered("!=", x, ir.Constant(sty, 0.0)) if src.is_float else \
            b.icmp_unsigned("!=", x, ir.Constant(sty, 0))
    if src.is_float and dst.is_float:
        return lmath.convert_float(b, x, dty, e.target)
    if src.is_float:  # saturating, NaN -> 0: XLA's semantics, LLVM's fptosi.sat
        name = "llvm.fptosi.sat" if dst.kind == "i" else "llvm.fptoui.sat"
        return b.call(lmath.declare(e.module, name, [dty, sty], dty, [sty]), [x])
    if dst.is_float:
        return b.uitofp(x, dty) if src.kind in "ub" else b.sitofp(x, dty)
    if dty.width == sty.width:
        return x
    if dty.width < sty.width:
        return b.trunc(x, dty)
    return b.zext(x, dty) if src.kind in "ub" else b.sext(x, dty)
