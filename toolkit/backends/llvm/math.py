"""toolkit's own branch-free float32 math, emitted inline as LLVM IR so the loop vectoriser can
widen it (libm's scalar ``expf``/``tanhf`` calls cost 30-40 ns an element and block that).

Range reduction plus polynomials, as XLA's CPU emitter does. Maximum errors against a float64
reference, the bounds tests/test_cpu_math.py holds (log, tanh, sin and cos measured over every
float32 of the tested range):

    exp 1.2 ulp · log 2.85 · log1p 3.5 · expm1 4 · tanh 6.9 · logistic 2.5 · erf 6 (3.3e-7
    absolute). sin, cos 3 ulp on [-pi, pi]; for |x| <= 8192 within 8.7e-8 absolute (three-part
    Cody-Waite reduction by pi/2), which near their zeros is up to 478 (sin) and 975 (cos) ulp.
    Beyond |x| = 8192 results lose accuracy (there is no Payne-Hanek reduction) but stay within
    [-1, 1]; use float64 where large arguments matter.

Special values (nan, +-inf, +-0, overflow and underflow edges) follow IEEE/libm.

float64 exp, log, log1p, expm1, tanh and atan2 (so arctan, arcsin, arccos) are toolkit's own too
(the same schemes with more terms and fused multiply-adds; Cephes' rational atan): within 1, 3,
3, 2, 3 and 2 ulp of NumPy's results, special values (C99's for atan2) as NumPy's; on 1M elements
exp 1.6x, log 1.2x, expm1 1.4x, tanh 2.3x and atan2 2.5x NumPy's speed on this 2-core VM. The other
float64
functions (sin, cos, tan, cbrt, erf, sinh, ...; and f32 pow, cbrt, tan, atan2) call the math
library: on the CPU, where glibc's libmvec is there, its vector variants (``vector_math``: within
4 ulp, glibc's bound; sin 2.2x, tan 7.5x, cbrt 5.6x faster than libm lane by lane), else libm's
scalar functions."""
from __future__ import annotations

import math

from llvmlite import ir

from .types import F16, F32, I32

LOG2E = 1.4426950408889634
LN2_HI, LN2_LO = 0.693145751953125, 1.428606765330187e-06


def _f(v: float) -> ir.Constant:
    return ir.Constant(F32, v)


def _poly(b: ir.IRBuilder, x, coefficients):
    """Horner evaluation; coefficients from the highest degree down."""
    acc = _f(coefficients[0])
    for c in coefficients[1:]:
        acc = b.fadd(b.fmul(acc, x), _f(c))
    return acc


def declare(module: ir.Module, name: str, overloads, ret, params) -> ir.Function:
    """An LLVM intrinsic with an explicit signature (llvmlite guesses one operand otherwise)."""
    return module.declare_intrinsic(name, overloads, ir.FunctionType(ret, params))


def _intrinsic(b: ir.IRBuilder, name: str, args, ty=F32):
    return b.call(declare(b.module, name, [ty], ty, [a.type for a in args]), args)


def _is_nan(b, x):
    return b.fcmp_unordered("uno", x, x)


def _pow2i(b: ir.IRBuilder, n):
    """2**n for an i32 n in [-126, 127], built from the exponent bits."""
    return b.bitcast(b.shl(b.add(n, ir.Constant(I32, 127)), ir.Constant(I32, 23)), F32)


def exp_f32(b: ir.IRBuilder, x):
    clamped = _intrinsic(
        b, "llvm.minnum", [_intrinsic(b, "llvm.maxnum", [x, _f(-104.0)]), _f(89.0)]
    )
    k = _intrinsic(b, "llvm.roundeven", [b.fmul(clamped, _f(LOG2E))])
    r = b.fsub(b.fsub(clamped, b.fmul(k, _f(LN2_HI))), b.fmul(k, _f(LN2_LO)))
    p = _poly(b, r, [1 / 5040, 1 / 720, 1 / 120, 1 / 24, 1 / 6, 0.5, 1.0, 1.0])
    n = b.fptosi(k, I32)
    half = b.ashr(n, ir.Constant(I32, 1))
    result = b.fmul(b.fmul(p, _pow2i(b, half)), _pow2i(b, b.sub(n, half)))
    return b.select(_is_nan(b, x), x, result)


def log_f32(b: ir.IRBuilder, x):
    tiny = b.fcmp_ordered("<", x, _f(1.1754943508222875e-38))
    scaled = b.select(tiny, b.fmul(x, _f(8388608.0)), x)  # denormals: scale by 2**23 first
    bits = b.bitcast(scaled, I32)
    e = b.sub(
        b.and_(b.lshr(bits, ir.Constant(I32, 23)), ir.Constant(I32, 255)), ir.Constant(I32, 127)
    )
    e = b.select(tiny, b.sub(e, ir.Constant(I32, 23)), e)
    m = b.bitcast(
        b.or_(b.and_(bits, ir.Constant(I32, 0x7FFFFF)), ir.Constant(I32, 0x3F800000)), F32
    )
    big = b.fcmp_ordered(">", m, _f(1.4142135623730951))
    m = b.select(big, b.fmul(m, _f(0.5)), m)
    e = b.select(big, b.add(e, ir.Constant(I32, 1)), e)
    f = b.fsub(m, _f(1.0))
    s = b.fdiv(f, b.fadd(f, _f(2.0)))
    s2 = b.fmul(s, s)
    series = b.fmul(s, _poly(b, s2, [2 / 11, 2 / 9, 2 / 7, 2 / 5, 2 / 3, 2.0]))
    ef = b.sitofp(e, F32)
    result = b.fadd(b.fmul(ef, _f(LN2_HI)), b.fadd(b.fmul(ef, _f(LN2_LO)), series))
    result = b.select(b.fcmp_ordered("==", x, _f(0.0)), _f(-math.inf), result)
    result = b.select(b.fcmp_ordered("==", x, _f(math.inf)), x, result)
    return b.select(b.fcmp_unordered("<", x, _f(0.0)), _f(math.nan), result)


def log1p_f32(b: ir.IRBuilder, x):
    u = b.fadd(x, _f(1.0))
    correction = b.fdiv(b.fsub(b.fsub(u, _f(1.0)), x), u)
    result = b.fsub(log_f32(b, u), correction)
    exact = b.fcmp_ordered("==", u, _f(1.0))
    result = b.select(exact, x, result)
    result = b.select(b.fcmp_ordered("==", u, _f(0.0)), _f(-math.inf), result)  # log1p(-1)
    return b.select(b.fcmp_ordered("==", x, _f(math.inf)), x, result)


def expm1_f32(b: ir.IRBuilder, x):
    u = exp_f32(b, x)
    um1 = b.fsub(u, _f(1.0))
    # Kahan: (u - 1) * x / log(u) cancels the rounding error of u where that matters (|x| < 1);
    # beyond, u - 1 is exact enough and the product could overflow
    kahan = b.fdiv(b.fmul(um1, x), log_f32(b, u))
    small = b.fcmp_ordered("<", _intrinsic(b, "llvm.fabs", [x]), _f(1.0))
    result = b.select(small, kahan, um1)
    result = b.select(b.fcmp_ordered("==", u, _f(1.0)), x, result)
    result = b.select(b.fcmp_ordered("==", um1, _f(-1.0)), _f(-1.0), result)
    result = b.select(b.fcmp_ordered("==", u, _f(math.inf)), u, result)
    return b.select(_is_nan(b, x), x, result)


_TANH_P = [-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11,
           5.12229709037114e-08, 1.48572235717979e-05, 6.37261928875436e-04, 4.89352455891786e-03]
_TANH_Q = [1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03, 4.89352518554385e-03]


def tanh_f32(b: ir.IRBuilder, x):
    """A rational approximation on [-9, 9] (the same form as Eigen's and XLA's)."""
    c = _intrinsic(b, "llvm.minnum", [_intrinsic(b, "llvm.maxnum", [x, _f(-9.0)]), _f(9.0)])
    c2 = b.fmul(c, c)
    p = b.fmul(c, _poly(b, c2, _TANH_P))
    q = _poly(b, c2, _TANH_Q)
    result = b.fdiv(p, q)
    small = b.fcmp_ordered("<", _intrinsic(b, "llvm.fabs", [x]), _f(0.0004))
    result = b.select(small, x, result)
    return b.select(_is_nan(b, x), x, result)


def logistic_f32(b: ir.IRBuilder, x):
    e = exp_f32(b, b.fneg(x))
    return b.fdiv(_f(1.0), b.fadd(_f(1.0), e))


_PIO2_1, _PIO2_2, _PIO2_3 = 1.5703125, 4.837512969970703125e-4, 7.54978995489188216e-8


def _sincos_reduce(b: ir.IRBuilder, x):
    k = _intrinsic(b, "llvm.roundeven", [b.fmul(x, _f(2 / math.pi))])
    r = b.fsub(
        b.fsub(b.fsub(x, b.fmul(k, _f(_PIO2_1))), b.fmul(k, _f(_PIO2_2))), b.fmul(k, _f(_PIO2_3))
    )
    q = b.and_(b.fptosi(k, I32), ir.Constant(I32, 3))
    r2 = b.fmul(r, r)
    s = b.fmul(r, _poly(b, r2, [1 / 362880, -1 / 5040, 1 / 120, -1 / 6, 1.0]))
    c = _poly(b, r2, [-1 / 3628800, 1 / 40320, -1 / 720, 1 / 24, -0.5, 1.0])
    return q, s, c


def _quadrant(b, q, v0, v1, v2, v3):
    out = b.select(b.icmp_signed("==", q, ir.Constant(I32, 1)), v1, v0)
    out = b.select(b.icmp_signed("==", q, ir.Constant(I32, 2)), v2, out)
    return b.select(b.icmp_signed("==", q, ir.Constant(I32, 3)), v3, out)


def _finite_or_nan(b, x, result):
    # beyond the reduction's range the value is not accurate, but it stays within [-1, 1]
    result = _intrinsic(
        b, "llvm.minnum", [_intrinsic(b, "llvm.maxnum", [result, _f(-1.0)]), _f(1.0)]
    )
    inf = b.fcmp_ordered("==", _intrinsic(b, "llvm.fabs", [x]), _f(math.inf))
    return b.select(b.or_(inf, _is_nan(b, x)), _f(math.nan), result)


def sin_f32(b: ir.IRBuilder, x):
    q, s, c = _sincos_reduce(b, x)
    result = _finite_or_nan(b, x, _quadrant(b, q, s, c, b.fneg(s), b.fneg(c)))
    return b.select(b.fcmp_ordered("==", x, _f(0.0)), x, result)  # sin(-0) is -0


def cos_f32(b: ir.IRBuilder, x):
    q, s, c = _sincos_reduce(b, x)
    return _finite_or_nan(b, x, _quadrant(b, q, c, b.fneg(s), b.fneg(c), s))


_ERF_SMALL = [-1 / 1320, 1 / 216, -1 / 42, 1 / 10, -1 / 3, 1.0]  # x * P(x^2) * 2/sqrt(pi)
_AS_P = 0.3275911
_AS_A = [1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592]


def erf_f32(b: ir.IRBuilder, x):
    ax = _intrinsic(b, "llvm.fabs", [x])
    x2 = b.fmul(x, x)
    small = b.fmul(b.fmul(x, _poly(b, x2, _ERF_SMALL)), _f(2 / math.sqrt(math.pi)))
    t = b.fdiv(_f(1.0), b.fadd(_f(1.0), b.fmul(_f(_AS_P), ax)))
    tail = b.fsub(_f(1.0), b.fmul(b.fmul(t, _poly(b, t, _AS_A)), exp_f32(b, b.fneg(x2))))
    signed = b.select(b.fcmp_ordered("<", x, _f(0.0)), b.fneg(tail), tail)
    result = b.select(b.fcmp_ordered("<", ax, _f(0.5)), small, signed)
    return b.select(_is_nan(b, x), x, result)


def pow_f32(b: ir.IRBuilder, x, y):
    """exp(y * log|x|) with IEEE pow's special cases (negative x with integer y, zeros, ones).
    Its relative error grows with |y * log2 x| (about 1 ulp per unit); the GPU backend uses it,
    the CPU backend calls libm's powf."""
    ax = _intrinsic(b, "llvm.fabs", [x])
    magnitude = exp_f32(b, b.fmul(y, log_f32(b, ax)))
    y_int = b.fcmp_ordered("==", _intrinsic(b, "llvm.roundeven", [y]), y)
    half = b.fmul(y, _f(0.5))
    y_odd = b.and_(y_int, b.fcmp_ordered("!=", _intrinsic(b, "llvm.roundeven", [half]), half))
    negative = b.fcmp_ordered("<", x, _f(0.0))
    result = b.select(b.and_(negative, y_odd), b.fneg(magnitude), magnitude)
    result = b.select(b.and_(negative, b.not_(y_int)), _f(math.nan), result)
    result = b.select(b.fcmp_ordered("==", x, _f(1.0)), _f(1.0), result)
    return b.select(b.fcmp_ordered("==", y, _f(0.0)), _f(1.0), result)


# ---- float64: exp and log, the same schemes with float64 constants and more terms ----------------
F64 = ir.DoubleType()
I64 = ir.IntType(64)
# fdlibm's split of ln 2
LN2_HI_64, LN2_LO_64 = 6.93147180369123816490e-01, 1.90821492927058770002e-10


def _d(v: float) -> ir.Constant:
    return ir.Constant(F64, v)


def _poly64(b: ir.IRBuilder, x, coefficients):
    """Horner with fused multiply-adds (one rounding a step, and half the latency of the chain)."""
    fma = declare(b.module, "llvm.fma", [F64], F64, [F64, F64, F64])
    acc = _d(coefficients[0])
    for c in coefficients[1:]:
        acc = b.call(fma, [acc, x, _d(c)])
    return acc


def _pow2i_64(b: ir.IRBuilder, n):
    """2**n for an i64 n in [-1022, 1023], built from the exponent bits."""
    return b.bitcast(b.shl(b.add(n, ir.Constant(I64, 1023)), ir.Constant(I64, 52)), F64)


def exp_f64(b: ir.IRBuilder, x):
    """exp: k = round(x / ln 2), r = x - k ln 2 (two-part ln 2), a degree-13 Taylor polynomial
    on |r| <= ln2/2, then 2**k in two halves (so that subnormal results round once)."""
    clamp = declare(b.module, "llvm.maxnum", [F64], F64, [F64, F64])
    clamped = b.call(declare(b.module, "llvm.minnum", [F64], F64, [F64, F64]),
                     [b.call(clamp, [x, _d(-746.0)]), _d(710.0)])
    k = b.call(declare(b.module, "llvm.roundeven", [F64], F64, [F64]), [b.fmul(clamped, _d(LOG2E))])
    r = b.fsub(b.fsub(clamped, b.fmul(k, _d(LN2_HI_64))), b.fmul(k, _d(LN2_LO_64)))
    p = _poly64(b, r, [1 / math.factorial(i) for i in range(13, 1, -1)] + [1.0, 1.0])
    n = b.fptosi(k, I64)
    half = b.ashr(n, ir.Constant(I64, 1))
    result = b.fmul(b.fmul(p, _pow2i_64(b, half)), _pow2i_64(b, b.sub(n, half)))
    return b.select(b.fcmp_unordered("uno", x, x), x, result)


def _log_reduce_f64(b: ir.IRBuilder, x):
    """(e, m) with x = 2**e m, m in [sqrt(1/2), sqrt(2)), e an i64; subnormals scaled by 2**54
    first."""
    tiny = b.fcmp_ordered("<", x, _d(2.2250738585072014e-308))
    scaled = b.select(tiny, b.fmul(x, _d(18014398509481984.0)), x)
    bits = b.bitcast(scaled, I64)
    e = b.sub(
        b.and_(b.lshr(bits, ir.Constant(I64, 52)), ir.Constant(I64, 0x7FF)), ir.Constant(I64, 1023)
    )
    e = b.select(tiny, b.sub(e, ir.Constant(I64, 54)), e)
    m = b.bitcast(
        b.or_(
            b.and_(bits, ir.Constant(I64, 0xFFFFFFFFFFFFF)), ir.Constant(I64, 0x3FF0000000000000)
        ),
        F64,
    )
    big = b.fcmp_ordered(">", m, _d(1.4142135623730951))
    m = b.select(big, b.fmul(m, _d(0.5)), m)
    e = b.select(big, b.add(e, ir.Constant(I64, 1)), e)
    return e, m


def log_f64(b: ir.IRBuilder, x):
    """log: x = 2**e m with m in [sqrt(1/2), sqrt(2)), log m = 2 atanh(s), s = (m-1)/(m+1), an odd
    series to s**23 (|s| <= 0.172); e ln 2 in two parts. Subnormals are scaled by 2**54 first."""
    e, m = _log_reduce_f64(b, x)
    f = b.fsub(m, _d(1.0))
    s = b.fdiv(f, b.fadd(f, _d(2.0)))
    s2 = b.fmul(s, s)
    series = b.fmul(s, _poly64(b, s2, [2.0 / (2 * k + 1) for k in range(11, 0, -1)] + [2.0]))
    ef = b.sitofp(e, F64)
    result = b.fadd(b.fmul(ef, _d(LN2_HI_64)), b.fadd(b.fmul(ef, _d(LN2_LO_64)), series))
    result = b.select(b.fcmp_ordered("==", x, _d(0.0)), _d(-math.inf), result)
    result = b.select(b.fcmp_ordered("==", x, _d(math.inf)), x, result)
    return b.select(b.fcmp_unordered("<", x, _d(0.0)), _d(math.nan), result)


def _minmax64(b, name, x, bound):
    return b.call(declare(b.module, name, [F64], F64, [F64, F64]), [x, _d(bound)])


def _expm1_core_f64(b: ir.IRBuilder, y):
    """expm1(y) for y in [-40, 700]: y = k ln 2 + r, expm1(y) = 2**k expm1(r) + (2**k - 1), with
    expm1(r) a degree-13 polynomial r (1 + r/2 + r^2/6 + ...): exact near 0, no cancellation."""
    k = b.call(declare(b.module, "llvm.roundeven", [F64], F64, [F64]), [b.fmul(y, _d(LOG2E))])
    r = b.fsub(b.fsub(y, b.fmul(k, _d(LN2_HI_64))), b.fmul(k, _d(LN2_LO_64)))
    p = b.fmul(r, _poly64(b, r, [1 / math.factorial(i) for i in range(13, 1, -1)] + [1.0]))
    scale = _pow2i_64(b, b.fptosi(k, I64))
    fma = declare(b.module, "llvm.fma", [F64], F64, [F64, F64, F64])
    return b.call(fma, [scale, p, b.fsub(scale, _d(1.0))])


def expm1_f64(b: ir.IRBuilder, x):
    core = _expm1_core_f64(
        b, _minmax64(b, "llvm.minnum", _minmax64(b, "llvm.maxnum", x, -40.0), 700.0)
    )
    result = b.select(b.fcmp_ordered(">", x, _d(700.0)), exp_f64(b, x), core)  # (inf beyond 709.78)
    result = b.select(b.fcmp_ordered("<", x, _d(-40.0)), _d(-1.0), result)
    result = b.select(b.fcmp_ordered("==", x, _d(0.0)), x, result)  # -0.0 stays -0.0
    return b.select(b.fcmp_unordered("uno", x, x), x, result)


def tanh_f64(b: ir.IRBuilder, x):
    """tanh |x| = t / (t + 2), t = expm1(2|x|); 1 from |x| = 22 on; the sign of x put back."""
    a = _minmax64(
        b, "llvm.minnum", b.call(declare(b.module, "llvm.fabs", [F64], F64, [F64]), [x]), 22.0
    )
    t = _expm1_core_f64(b, b.fmul(a, _d(2.0)))
    r = b.select(b.fcmp_ordered(">=", a, _d(22.0)), _d(1.0), b.fdiv(t, b.fadd(t, _d(2.0))))
    signed = b.call(declare(b.module, "llvm.copysign", [F64], F64, [F64, F64]), [r, x])
    return b.select(b.fcmp_unordered("uno", x, x), x, signed)


def log1p_f64(b: ir.IRBuilder, x):
    """log1p: log(u) for u = 1 + x, corrected by the rounding of u ((u - 1) - x) / u."""
    u = b.fadd(x, _d(1.0))
    correction = b.fdiv(b.fsub(b.fsub(u, _d(1.0)), x), u)
    result = b.fsub(log_f64(b, u), correction)
    result = b.select(b.fcmp_ordered("==", u, _d(1.0)), x, result)  # tiny x (and -0.0): x itself
    result = b.select(b.fcmp_ordered("==", u, _d(0.0)), _d(-math.inf), result)
    return b.select(b.fcmp_ordered("==", x, _d(math.inf)), x, result)


# Cephes' atan: atan t = t + t z P(z)/Q(z), z = t^2, on |t| <= 0.66; pi/4 + atan((t-1)/(t+1)) above
_ATAN_P = [-8.750608600031904122785e-1, -1.615753718733365076637e1, -7.500855792314704667340e1,
           -1.228866684490136173410e2, -6.485021904942025371773e1]
_ATAN_Q = [1.0, 2.485846490142306297962e1, 1.650270098316988542046e2, 4.328810604912902668951e2,
           4.853903996359136964868e2, 1.945506571482613964425e2]
PI_HI, PI_LO = 3.141592653589793, 1.2246467991473532e-16
PIO2_HI, PIO2_LO = 1.5707963267948966, 6.123233995736766e-17
PIO4_HI, PIO4_LO = 0.7853981633974483, 3.061616997868383e-17


def _atan_unit_f64(b: ir.IRBuilder, t):
    """atan t for t in [0, 1]."""
    mid = b.fcmp_ordered(">", t, _d(0.66))
    xr = b.select(mid, b.fdiv(b.fsub(t, _d(1.0)), b.fadd(t, _d(1.0))), t)
    z = b.fmul(xr, xr)
    r = b.fadd(xr, b.fmul(b.fmul(xr, z), b.fdiv(_poly64(b, z, _ATAN_P), _poly64(b, z, _ATAN_Q))))
    return b.select(mid, b.fadd(_d(PIO4_HI), b.fadd(r, _d(PIO4_LO))), r)


def atan2_f64(b: ir.IRBuilder, y, x):
    """atan2 by octant: atan of min/max in [0, 1], reflected about pi/2 (|y| > |x|) and pi
    (x < 0, -0.0 included), the sign of y put back; pi and pi/2 in two parts. C99's special
    values: signed zeros, both infinite (pi/4, 3pi/4), NaN."""
    fabs = declare(b.module, "llvm.fabs", [F64], F64, [F64])
    ay, ax = b.call(fabs, [y]), b.call(fabs, [x])
    swap = b.fcmp_ordered(">", ay, ax)
    num, den = b.select(swap, ax, ay), b.select(swap, ay, ax)
    t = b.fdiv(num, den)
    t = b.select(b.fcmp_ordered("==", den, _d(0.0)), _d(0.0), t)  # both zero
    both_inf = b.and_(
        b.fcmp_ordered("==", ay, _d(math.inf)), b.fcmp_ordered("==", ax, _d(math.inf))
    )
    t = b.select(both_inf, _d(1.0), t)
    at = _atan_unit_f64(b, t)
    # the octant: atan t, pi/2 - atan t, pi/2 + atan t or pi - atan t, each offset added once
    # (hi part, then lo part) so the result rounds once
    # the sign bit (-0.0 too)
    x_negative = b.icmp_signed("<", b.bitcast(x, I64), ir.Constant(I64, 0))
    hi = b.select(swap, _d(PIO2_HI), b.select(x_negative, _d(PI_HI), _d(0.0)))
    lo = b.select(swap, _d(PIO2_LO), b.select(x_negative, _d(PI_LO), _d(0.0)))
    signed_at = b.select(b.xor(swap, x_negative), b.fneg(at), at)
    a = b.fadd(b.fadd(hi, signed_at), lo)
    signed = b.call(declare(b.module, "llvm.copysign", [F64], F64, [F64, F64]), [a, y])
    nan = b.or_(b.fcmp_unordered("uno", x, x), b.fcmp_unordered("uno", y, y))
    return b.select(nan, b.fadd(x, y), signed)



# ---- float64 power: exp(y log x) with log x carried in two doubles -----------------------------
TWO_THIRDS_HI, TWO_THIRDS_LO = 0.6666666666666666, 3.700743415417188e-17  # 2/3 in two parts


def _fma64(b, a, c, d):
    return b.call(declare(b.module, "llvm.fma", [F64], F64, [F64, F64, F64]), [a, c, d])


def _two_sum(b, a, c):
    """(s, e) with s + e == a + c exactly (Knuth's TwoSum: no ordering needed)."""
    s = b.fadd(a, c)
    bb = b.fsub(s, a)
    return s, b.fadd(b.fsub(a, b.fsub(s, bb)), b.fsub(c, bb))


def _log_two_part_f64(b: ir.IRBuilder, x):
    """ln x as hi + lo for a finite x > 0 (subnormals too), to about 2^-62 |ln x|: the scheme of
    log_f64, ln m = 2s + (2/3)s^3 + s^5 R(s^2) with s = (m-1)/(m+1), where s, 2s and (2/3)s^3
    are carried in two parts (one division: the low part of s comes from an FMA remainder) and
    only the small rest s^5 R (|s^5 R| < 2^-13 |2s|) is rounded once."""
    e, m = _log_reduce_f64(b, x)
    f = b.fsub(m, _d(1.0))  # exact
    d_hi = b.fadd(m, _d(1.0))
    d_lo = b.fsub(m, b.fsub(d_hi, _d(1.0)))  # m + 1 == d_hi + d_lo exactly
    inv = b.fdiv(_d(1.0), d_hi)
    s_hi = b.fmul(f, inv)
    s_lo = b.fmul(b.fsub(_fma64(b, b.fneg(s_hi), d_hi, f), b.fmul(s_hi, d_lo)), inv)
    s2 = b.fmul(s_hi, s_hi)
    s2_lo = _fma64(b, s_hi, s_hi, b.fneg(s2))
    s3 = b.fmul(s2, s_hi)
    s3_lo = b.fadd(
        _fma64(b, s2, s_hi, b.fneg(s3)),
        b.fadd(b.fmul(s2_lo, s_hi), b.fmul(b.fmul(s2, s_lo), _d(3.0))),
    )
    a_hi = b.fmul(s3, _d(TWO_THIRDS_HI))
    a_lo = b.fadd(_fma64(b, s3, _d(TWO_THIRDS_HI), b.fneg(a_hi)),
                  b.fadd(b.fmul(s3, _d(TWO_THIRDS_LO)), b.fmul(s3_lo, _d(TWO_THIRDS_HI))))
    rest = b.fmul(b.fmul(s3, s2), _poly64(b, s2, [2.0 / (2 * k + 1) for k in range(12, 1, -1)]))
    ef = b.sitofp(e, F64)
    # both exact (|e| < 2^11)
    u, err1 = _two_sum(b, b.fmul(ef, _d(LN2_HI_64)), b.fmul(s_hi, _d(2.0)))
    v, err2 = _two_sum(b, u, a_hi)
    low = b.fadd(
        b.fadd(err1, err2),
        b.fadd(b.fadd(b.fmul(s_lo, _d(2.0)), a_lo), b.fadd(rest, b.fmul(ef, _d(LN2_LO_64)))),
    )
    hi = b.fadd(v, low)
    return hi, b.fsub(low, b.fsub(hi, v))


def _exp_two_part_f64(b: ir.IRBuilder, hi, lo):
    """exp(hi + lo) for |lo| <= ulp(hi), as exp_f64 with lo added to the reduced argument."""
    clamped = _minmax64(b, "llvm.minnum", _minmax64(b, "llvm.maxnum", hi, -746.0), 710.0)
    k = b.call(declare(b.module, "llvm.roundeven", [F64], F64, [F64]), [b.fmul(clamped, _d(LOG2E))])
    r = b.fsub(b.fsub(clamped, b.fmul(k, _d(LN2_HI_64))), b.fmul(k, _d(LN2_LO_64)))
    r = b.fadd(r, b.select(b.fcmp_ordered("==", clamped, hi), lo, _d(0.0)))
    p = _poly64(b, r, [1 / math.factorial(i) for i in range(13, 1, -1)] + [1.0, 1.0])
    n = b.fptosi(k, I64)
    half = b.ashr(n, ir.Constant(I64, 1))
    return b.fmul(b.fmul(p, _pow2i_64(b, half)), _pow2i_64(b, b.sub(n, half)))


def pow_f64(b: ir.IRBuilder, x, y):
    """pow: exp(y ln|x|) with ln|x| in two parts and y ln|x| in two parts (an FMA gives the
    product's rounding error), so the result's error stays near exp's for |y ln x| up to the
    overflow bound. C99's special values: y = 0 or x = 1 give 1 (NaN too); negative x needs
    an integer y (odd: negative result); zeros and infinities by the sign and parity of y."""
    fabs = declare(b.module, "llvm.fabs", [F64], F64, [F64])
    roundeven = declare(b.module, "llvm.roundeven", [F64], F64, [F64])
    ax, ay = b.call(fabs, [x]), b.call(fabs, [y])
    safe = b.select(
        b.and_(b.fcmp_ordered(">", ax, _d(0.0)), b.fcmp_ordered("<", ax, _d(math.inf))), ax, _d(1.0)
    )
    l_hi, l_lo = _log_two_part_f64(b, safe)
    p_hi = b.fmul(y, l_hi)
    p_lo = b.fadd(_fma64(b, y, l_hi, b.fneg(p_hi)), b.fmul(y, l_lo))
    magnitude = _exp_two_part_f64(b, p_hi, p_lo)
    # the parity of y: an integer when roundeven(y) == y; odd when y/2 is not (|y| >= 2^53 is even)
    y_int = b.fcmp_ordered("==", b.call(roundeven, [y]), y)
    half = b.fmul(y, _d(0.5))
    y_odd = b.and_(y_int, b.fcmp_ordered("!=", b.call(roundeven, [half]), half))
    x_neg = b.icmp_signed("<", b.bitcast(x, I64), ir.Constant(I64, 0))  # the sign bit: -0.0 too
    y_neg = b.fcmp_ordered("<", y, _d(0.0))
    # |x| = 0 or inf: 0 or inf by the sign of y (and whether |x| is 0)
    edge = b.select(b.xor(b.fcmp_ordered("==", ax, _d(0.0)), y_neg), _d(0.0), _d(math.inf))
    result = b.select(
        b.or_(b.fcmp_ordered("==", ax, _d(0.0)), b.fcmp_ordered("==", ax, _d(math.inf))),
        edge,
        magnitude,
    )
    # y = +-inf: 1 for |x| = 1; else 0 or inf by whether |x| < 1 and the sign of y
    y_inf = b.fcmp_ordered("==", ay, _d(math.inf))
    inf_edge = b.select(b.xor(b.fcmp_ordered("<", ax, _d(1.0)), y_neg), _d(0.0), _d(math.inf))
    inf_edge = b.select(b.fcmp_ordered("==", ax, _d(1.0)), _d(1.0), inf_edge)
    result = b.select(y_inf, inf_edge, result)
    # a negative x: odd integer y flips the sign (zeros and infinities too); non-integer y: NaN
    result = b.select(b.and_(x_neg, b.and_(y_odd, b.not_(y_inf))), b.fneg(result), result)
    finite_nonint = b.and_(b.not_(y_int), b.not_(y_inf))
    finite_nonzero = b.and_(b.fcmp_ordered("<", ax, _d(math.inf)), b.fcmp_ordered(">", ax, _d(0.0)))
    result = b.select(b.and_(b.and_(x_neg, finite_nonint), finite_nonzero), _d(math.nan), result)
    result = b.select(
        b.or_(b.fcmp_unordered("uno", x, x), b.fcmp_unordered("uno", y, y)), b.fadd(x, y), result
    )
    result = b.select(b.fcmp_ordered("==", x, _d(1.0)), _d(1.0), result)
    return b.select(b.fcmp_ordered("==", y, _d(0.0)), _d(1.0), result)


OWN_F64 = {
    "exponential": exp_f64,
    "log": log_f64,
    "exponential-minus-one": expm1_f64,
    "tanh": tanh_f64,
    "log-plus-one": log1p_f64,
}

OWN_F32 = {"exponential": exp_f32, "log": log_f32, "log-plus-one": log1p_f32,
           "exponential-minus-one": expm1_f32, "tanh": tanh_f32, "logistic": logistic_f32,
           "sine": sin_f32, "cosine": cos_f32, "erf": erf_f32}


def convert_float(b: ir.IRBuilder, x, to, target: str = "cpu"):
    """``x`` as float type ``to``, rounded to nearest even. float64 to float16 has no x86
    instruction: LLVM would call compiler-rt's ``__truncdfhf2``, which nothing provides to JIT
    code (a call to address 0). It rounds to float32 *to odd* first (truncate, then set the last
    bit if anything was lost), which leaves the float16 rounding that follows exact: float32
    carries 13 bits more than float16, so no value lands on a false tie."""
    if x.type == F64 and to == F16 and target == "cpu":
        return b.fptrunc(_round_to_odd_f32(b, x), F16)
    return b.fpext(x, to) if _bits(to) > _bits(x.type) else b.fptrunc(x, to)


def _bits(ty) -> int:
    return {F16: 16, F32: 32, F64: 64}[ty]


def _round_to_odd_f32(b: ir.IRBuilder, x):
    nearest = b.fptrunc(x, F32)
    back = b.fpext(nearest, F64)
    fabs = declare(b.module, "llvm.fabs", [F64], F64, [F64])
    beyond = b.fcmp_ordered(">", b.call(fabs, [back]), b.call(fabs, [x]))  # rounded away from zero
    bits = b.bitcast(nearest, I32)
    bits = b.select(beyond, b.sub(bits, ir.Constant(I32, 1)), bits)  # one step back toward zero
    inexact = b.fcmp_ordered("!=", back, x)  # (false for NaN, which keeps its bits)
    return b.bitcast(b.select(inexact, b.or_(bits, ir.Constant(I32, 1)), bits), F32)

