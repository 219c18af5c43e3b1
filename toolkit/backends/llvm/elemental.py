"""The elemental emitter: LLVM IR for the value of one element of an instruction at a given
multi-dimensional index, recursively through the fused computation. Target-neutral: the CPU
backend wraps it in loop nests, the GPU backend in grid-stride loops. One entry per op in
``ELEMENTAL``; values memoised per (instruction, index) within a loop body."""
from __future__ import annotations

import hashlib
import math
from typing import Callable

import numpy as np
from llvmlite import ir

from ...ir.nodes import Instruction
from ...ir.ops import GroupOp
from ...ir.shapes import Shape
from . import complex as lcomplex
from . import math as lmath
from ...ir import dtypes
from .types import F16, F32, I1, I64, constant, storage_type, value_type
from .vector_math import VectorMath, declare_vectorizable


class CodegenUnsupported(NotImplementedError):
    """An instruction this emitter cannot lower (the backend falls back or reports it)."""


def i64(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


def linearize(b: ir.IRBuilder, index, dims) -> ir.Value:
    linear = i64(0)
    for i, d in zip(index, dims):
        linear = b.add(b.mul(linear, i64(d)), i)
    return linear


def delinearize(b: ir.IRBuilder, linear, dims) -> list:
    out = []
    for d in reversed(dims):
        out.append(b.urem(linear, i64(d)) if d != 1 else i64(0))
        linear = b.udiv(linear, i64(d)) if d != 1 else linear
    return out[::-1]


class ElementalEmitter:
    def __init__(self, builder: ir.IRBuilder, inputs: dict[int, tuple[ir.Value, Shape]],
                 module: ir.Module, target: str = "cpu", device_math: bool = False,
                 vector_math: VectorMath | None = None):
        self.b = builder
        self.inputs = inputs  # id(parameter instruction) -> (pointer, shape)
        self.module = module
        self._invariant = None  # the empty metadata node !{} that marks invariant loads
        self.memo: dict[tuple, ir.Value] = {}
        self.target = target  # "cpu" calls libm; "gpu" (NVPTX) calls libdevice's __nv_* when linked
        self.device_math = device_math  # libdevice will be linked into the GPU module
        self.vector_math = vector_math  # the CPU's vector math library (libmvec), if any

    def libm(self, what: str) -> None:
        if self.target != "cpu" and not self.device_math:
            raise CodegenUnsupported(f"{what} needs a math library call: the GPU's is libdevice "
                                     "(the CUDA toolkit's nvvm/libdevice/libdevice.10.bc), not found here; "
                                     "set CUDA_HOME (float32 has toolkit's own)")

    def math_call(self, stem: str, args, t) -> ir.Value:
        """``stem`` (exp, log1p, pow, ...) from the target's math library, for type ``t``:
        libm's exp/expf on the CPU, libdevice's __nv_exp/__nv_expf on the GPU."""
        ty = value_type(t)
        f32 = t.name == "f32"
        name = f"__nv_{stem}{'f' if f32 else ''}" if self.target == "gpu" else stem + ("f" if f32 else "")
        fn = self.module.globals.get(name)
        if fn is None:
            fn_type = ir.FunctionType(ty, [ty] * len(args))
            fn = declare_vectorizable(self.module, self.vector_math, name, fn_type) if self.vector_math is not None \
                else ir.Function(self.module, fn_type, name)
        return self.b.call(fn, args)

    def vectorizable(self, stem: str, t, arguments: int = 1) -> bool:
        """A libm call beats LLVM's intrinsic where the vector library has ``stem`` for ``t``."""
        return self.vector_math is not None and self.vector_math.covers(stem, t.name == "f32", arguments)

    def reset(self) -> None:
        self.memo.clear()

    def load(self, ptr, shape: Shape, index, invariant: bool = True) -> ir.Value:
        """An element of ``ptr``. ``invariant``: the buffer does not change during the kernel (an
        input); a read of what the kernel itself writes (a scatter's read-modify-write) is not."""
        b = self.b
        addr = b.gep(ptr, [linearize(b, index, shape.dims)], inbounds=True)
        v = b.load(addr)
        if self.target == "gpu" and invariant:  # inputs never change during a kernel: the read-only cache (ld.global.nc) may serve them
            if self._invariant is None:
                self._invariant = self.module.add_metadata([])
            v.set_metadata("invariant.load", self._invariant)
        return b.icmp_unsigned("!=", v, ir.Constant(v.type, 0)) if shape.dtype.is_bool else v

    def store(self, ptr, shape: Shape, index, value) -> None:
        b = self.b
        if shape.dtype.is_bool:
            value = b.zext(value, storage_type(shape.dtype))
        b.store(value, b.gep(ptr, [linearize(b, index, shape.dims)], inbounds=True))

    def value(self, inst: Instruction, index) -> ir.Value:
        key = (id(inst), tuple(id(i) for i in index))
        v = self.memo.get(key)
        if v is None:
            rule = ELEMENTAL.get(inst.opcode)
            if rule is None:
                raise CodegenUnsupported(f"no elemental lowering for {inst.opcode} (%{inst.name})")
            v = self.memo[key] = rule(self, inst, list(index))
        return v

    def operand(self, inst: Instruction, i: int, index) -> ir.Value:
        return self.value(inst.operands[i], index)


Rule = Callable[[ElementalEmitter, Instruction, list], ir.Value]
ELEMENTAL: dict[str, Rule] = {}


def rule(*opcodes):
    def deco(fn):
        for op in opcodes:
            ELEMENTAL[op] = fn
        return fn
    return deco


def _dtype(inst):
    return inst.shape.dtype


def _intrinsic(e: ElementalEmitter, name: str, args, ty):
    return e.b.call(lmath.declare(e.module, name, [ty], ty, [a.type for a in args]), args)


# ---- leaves ---------------------------------------------------------------------------------
@rule("parameter")
def _parameter(e, inst, index):
    ptr, shape = e.inputs[id(inst)]
    return e.load(ptr, shape, index)


@rule("constant")
def _constant(e, inst, index):
    lit: np.ndarray = inst.attrs["literal"]
    t = _dtype(inst)
    if lit.size == 1:
        return constant(t, lit.reshape(())[()])
    # named by content: the same text every run, one global for equal constants
    name = f"const_{hashlib.sha1(lit.dtype.str.encode() + str(lit.shape).encode() + lit.tobytes()).hexdigest()[:16]}"
    g = e.module.globals.get(name)
    if g is None:
        st = storage_type(t)
        values = lit.reshape(-1).astype(np.uint8 if t.is_bool else lit.dtype)
        items = [constant(t, v) if t.is_complex else ir.Constant(st, float(v) if t.is_float else int(v))
                 for v in values]
        arr = ir.ArrayType(st, len(items))
        g = ir.GlobalVariable(e.module, arr, name)
        g.initializer = ir.Constant(arr, items)
        g.global_constant = True
        g.linkage = "internal"
    b = e.b
    ptr = b.gep(g, [i64(0), linearize(b, index, inst.shape.dims)], inbounds=True)
    v = b.load(ptr)
    return b.icmp_unsigned("!=", v, ir.Constant(v.type, 0)) if t.is_bool else v


@rule("iota")
def _iota(e, inst, index):
    i = index[inst.attrs["iota_dimension"]]
    t = _dtype(inst)
    if t.is_complex:
        raise CodegenUnsupported(f"iota of complex type {t.name} (%{inst.name})")
    ty = value_type(t)
    return e.b.sitofp(i, ty) if t.is_float else e.b.trunc(i, ty) if ty.width < 64 else i


# ---- elementwise --------------------------------------------------------------------------
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
        s = b.select(b.fcmp_ordered(">", x, zero), one, b.select(b.fcmp_ordered("<", x, zero), b.fneg(one), x))
        return s  # keeps -0.0, 0.0 and nan as they are
    if t.is_bool or t.kind == "u":
        return b.zext(b.icmp_unsigned("!=", x, ir.Constant(x.type, 0)), x.type) if not t.is_bool else x
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
    "abs": _abs, "sign": _sign,
    "not": lambda e, x, t: e.b.not_(x),
    "floor": _unary_float("llvm.floor"), "ceil": _unary_float("llvm.ceil"),
    "round-nearest-even": _unary_float("llvm.roundeven"), "round-nearest-afz": _round_afz,
    "is-finite": _is_finite, "sqrt": _unary_float("llvm.sqrt"), "rsqrt": _rsqrt,
    "exponential": _transcendental("exponential", "llvm.exp"),
    "exponential-minus-one": _transcendental("exponential-minus-one", libm="expm1"),
    "log": _transcendental("log", "llvm.log"),
    "log-plus-one": _transcendental("log-plus-one", libm="log1p"),
    "tanh": _transcendental("tanh", libm="tanh"),
    "logistic": None,  # below: 1 / (1 + exp(-x)) for f64
    "sine": _transcendental("sine", "llvm.sin"), "cosine": _transcendental("cosine", "llvm.cos"),
    "tan": _transcendental("tan", libm="tan"), "cbrt": _transcendental("cbrt", libm="cbrt"),
    "erf": _transcendental("erf", libm="erf"),
    "popcnt": lambda e, x, t: _intrinsic(e, "llvm.ctpop", [x], x.type),
    "count-leading-zeros": lambda e, x, t: e.b.call(
        lmath.declare(e.module, "llvm.ctlz", [x.type], x.type, [x.type, I1]), [x, ir.Constant(I1, 0)]),
}


def _logistic(e, x, t):
    if t.name == "f32":
        return lmath.logistic_f32(e.b, x)
    e.libm(f"logistic on {t.name}")
    one = ir.Constant(x.type, 1.0)
    if t.name == "f64":  # toolkit's own vectorisable exp
        exp = lmath.exp_f64(e.b, e.b.fneg(x))
    else:
        exp = e.math_call("exp", [e.b.fneg(x)], t) if e.target == "gpu" else _intrinsic(e, "llvm.exp", [e.b.fneg(x)], x.type)
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
    overflow = b.and_(b.icmp_signed("==", a, min_value), b.icmp_signed("==", b_, ir.Constant(a.type, -1)))
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
    special = b.select(b.icmp_signed("==", a, one), one,
                       b.select(b.icmp_signed("==", a, minus_one), b.select(odd_y, minus_one, one), ir.Constant(ty, 0)))
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
        cmp = (b.icmp_unsigned if t.kind in "ub" else b.icmp_signed)(">" if which == "max" else "<", a, c)
        return b.select(cmp, a, c)
    return emit


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
    "add": _arith("fadd", "add"), "subtract": _arith("fsub", "sub"), "multiply": _arith("fmul", "mul"),
    "divide": lambda e, a, c, t: e.b.fdiv(a, c) if t.is_float else _int_divide(e, a, c, t, False),
    "remainder": lambda e, a, c, t: e.b.frem(a, c) if t.is_float else _int_divide(e, a, c, t, True),
    "power": lambda e, a, c, t: _float_power(e, a, c, t) if t.is_float else _int_power(e, a, c, t),
    "maximum": _minmax("max"), "minimum": _minmax("min"), "atan2": _atan2,
    "and": lambda e, a, c, t: e.b.and_(a, c), "or": lambda e, a, c, t: e.b.or_(a, c),
    "xor": lambda e, a, c, t: e.b.xor(a, c),
    "shift-left": _shift("left"), "shift-right-arithmetic": _shift("arithmetic"),
    "shift-right-logical": _shift("logical"),
}

_FCMP = {"EQ": ("oeq", True), "NE": ("une", False), "LT": ("olt", True), "LE": ("ole", True),
         "GT": ("ogt", True), "GE": ("oge", True)}
_ICMP = {"EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">="}


_REDUCING_MINMAX = {"maximum": "llvm.maximum", "minimum": "llvm.minimum"}


def emit_binary(e: ElementalEmitter, opcode: str, a, c, t):
    """A reduction's combiner. Float max/min use LLVM's maximum/minimum, which vectorise: which
    of a +0.0/-0.0 tie a reduction keeps depends on its visiting order, unspecified anyway."""
    if t.is_complex:
        return _complex_binary(e, opcode, a, c, t)
    if t.is_float and opcode in _REDUCING_MINMAX:
        return _intrinsic(e, _REDUCING_MINMAX[opcode], [a, c], value_type(t))
    return widened(e, BINARY[opcode], [a, c], t)


def widened(e: ElementalEmitter, fn, xs, t):
    """``fn(e, *xs, t)``, computed in float32 when ``t`` is float16 and rounded back, as XLA:CPU
    and NumPy's float16 loops compute (exact for +, -, *, /, sqrt: float32 has the bits)."""
    if t.name != "f16":
        return fn(e, *xs, t)
    result = fn(e, *[e.b.fpext(x, F32) for x in xs], dtypes.F32)
    return e.b.fptrunc(result, F16) if result.type == F32 else result


def _complex_unary(e, opcode, z, t):
    if opcode == "abs":
        return lcomplex.modulus(e, z, t)
    rule = lcomplex.UNARY.get(opcode)
    if rule is None:
        raise CodegenUnsupported(f"{opcode} of complex numbers")
    return rule(e, z, t)


def _complex_binary(e, opcode, z, w, t):
    rule = lcomplex.BINARY.get(opcode)
    if rule is None:
        raise CodegenUnsupported(f"{opcode} of complex numbers")
    return rule(e, z, w, t)


def _unary_rule(op):
    def emit(e, inst, index):
        t = inst.operands[0].shape.dtype
        x = e.operand(inst, 0, index)
        return _complex_unary(e, op, x, t) if t.is_complex else widened(e, UNARY[op], [x], t)
    return emit


def _binary_rule(op):
    def emit(e, inst, index):
        t = inst.operands[0].shape.dtype
        a, c = e.operand(inst, 0, index), e.operand(inst, 1, index)
        return _complex_binary(e, op, a, c, t) if t.is_complex else widened(e, BINARY[op], [a, c], t)
    return emit


for _op in UNARY:
    ELEMENTAL[_op] = _unary_rule(_op)
for _op in BINARY:
    ELEMENTAL[_op] = _binary_rule(_op)


@rule("real")
def _real(e, inst, index):
    x = e.operand(inst, 0, index)
    return e.b.extract_value(x, 0) if inst.operands[0].shape.dtype.is_complex else x


@rule("imag")
def _imag(e, inst, index):
    t = inst.operands[0].shape.dtype
    x = e.operand(inst, 0, index)
    return e.b.extract_value(x, 1) if t.is_complex else ir.Constant(x.type, 0.0)


@rule("complex")
def _complex(e, inst, index):
    return lcomplex.make(e.b, _dtype(inst), e.operand(inst, 0, index), e.operand(inst, 1, index))


@rule("compare")
def _compare(e, inst, index):
    a, c = e.operand(inst, 0, index), e.operand(inst, 1, index)
    t = inst.operands[0].shape.dtype
    d = inst.attrs["direction"]
    if t.is_complex:
        return lcomplex.compare(e, a, c, d)
    if t.is_float:
        code, ordered = _FCMP[d]
        return (e.b.fcmp_ordered if ordered else e.b.fcmp_unordered)(
            {"oeq": "==", "une": "!=", "olt": "<", "ole": "<=", "ogt": ">", "oge": ">="}[code], a, c)
    if t.kind in "ub":
        return e.b.icmp_unsigned(_ICMP[d], a, c)
    return e.b.icmp_signed(_ICMP[d], a, c)


@rule("select")
def _select(e, inst, index):
    p_inst = inst.operands[0]
    p = e.value(p_inst, index if p_inst.shape.rank else [])
    return e.b.select(p, e.operand(inst, 1, index), e.operand(inst, 2, index))


@rule("clamp")
def _clamp(e, inst, index):
    lo_i, x_i, hi_i = inst.operands
    t = x_i.shape.dtype
    lo = e.value(lo_i, index if lo_i.shape.rank else [])
    hi = e.value(hi_i, index if hi_i.shape.rank else [])
    x = e.value(x_i, index)
    return BINARY["minimum"](e, BINARY["maximum"](e, x, lo, t), hi, t)


@rule("convert")
def _convert(e, inst, index):
    x = e.operand(inst, 0, index)
    src, dst = inst.operands[0].shape.dtype, _dtype(inst)
    if dst.is_complex:
        return lcomplex.convert(e, x, src, dst)
    if src.is_complex:
        raise CodegenUnsupported(f"convert {src.name} -> {dst.name} (take real() first)")
    return convert_real(e, x, src, dst)


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


@rule("bitcast-convert")
def _bitcast_convert(e, inst, index):
    return e.b.bitcast(e.operand(inst, 0, index), value_type(_dtype(inst)))


# ---- data movement: index mapping ------------------------------------------------------------
@rule("broadcast")
def _broadcast(e, inst, index):
    return e.operand(inst, 0, [index[d] for d in inst.attrs["dimensions"]])


@rule("reshape", "bitcast")
def _reshape(e, inst, index):
    src = inst.operands[0].shape.dims
    dst = inst.shape.dims
    if [d for d in src if d != 1] == [d for d in dst if d != 1]:  # only size-1 dims change
        kept = iter([i for i, d in zip(index, dst) if d != 1])
        return e.operand(inst, 0, [next(kept) if d != 1 else i64(0) for d in src])
    return e.operand(inst, 0, delinearize(e.b, linearize(e.b, index, dst), src))


@rule("transpose")
def _transpose(e, inst, index):
    perm = inst.attrs["dimensions"]
    src = [None] * len(perm)
    for out_dim, in_dim in enumerate(perm):
        src[in_dim] = index[out_dim]
    return e.operand(inst, 0, src)


@rule("slice")
def _slice(e, inst, index):
    b = e.b
    src = [b.add(i64(s), b.mul(i, i64(st))) if (s, st) != (0, 1) else i
           for i, (s, _, st) in zip(index, inst.attrs["slice"])]
    return e.operand(inst, 0, src)


@rule("reverse")
def _reverse(e, inst, index):
    dims = inst.attrs["dimensions"]
    size = inst.shape.dims
    return e.operand(inst, 0, [e.b.sub(i64(size[d] - 1), i) if d in dims else i for d, i in enumerate(index)])


@rule("copy")
def _copy(e, inst, index):
    return e.operand(inst, 0, index)


@rule("pad")
def _pad(e, inst, index):
    b = e.b
    x_inst = inst.operands[0]
    inside = ir.Constant(I1, 1)
    src = []
    for d, (i, (lo, _, interior)) in enumerate(zip(index, inst.attrs["padding"])):
        shifted = b.sub(i, i64(lo))
        stride = interior + 1
        q = b.sdiv(shifted, i64(stride)) if stride != 1 else shifted
        ok = b.icmp_signed(">=", shifted, i64(0))
        if stride != 1:
            ok = b.and_(ok, b.icmp_signed("==", b.srem(shifted, i64(stride)), i64(0)))
        ok = b.and_(ok, b.icmp_signed("<", q, i64(x_inst.shape.dims[d])))
        inside = b.and_(inside, ok)
        src.append(b.select(ok, q, i64(0)))
    return b.select(inside, e.value(x_inst, src), e.value(inst.operands[1], []))


@rule("concatenate")
def _concatenate(e, inst, index):
    b = e.b
    axis = inst.attrs["dimensions"][0]
    offset = 0
    result = None
    for op in inst.operands:
        n = op.shape.dims[axis]
        local = list(index)
        local[axis] = b.sub(index[axis], i64(offset))
        clamped = b.select(b.icmp_signed("<", local[axis], i64(0)), i64(0), local[axis])
        clamped = b.select(b.icmp_signed(">=", clamped, i64(max(n, 1))), i64(max(n - 1, 0)), clamped)
        local[axis] = clamped
        if n:
            v = e.value(op, local)
            result = v if result is None else b.select(b.icmp_signed(">=", index[axis], i64(offset)), v, result)
        offset += n
    if result is None:  # every operand is empty along the axis: no element is ever read
        return constant(_dtype(inst), 0)
    return result


def covered_ops() -> set[str]:
    return set(ELEMENTAL)


from . import indexing as _indexing  # noqa: E402,F401 - registers gather, dynamic-slice, dynamic-update-slice

UNSUPPORTED_ELEMENTAL = set(GroupOp.PER_ELEMENT) - set(ELEMENTAL)
