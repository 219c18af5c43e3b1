"""More NumPy ufuncs, each composed from HLO ops as XLA's and JAX's math libraries compose
them: inverse trigonometric and hyperbolic functions, hypot, copysign, nextafter, spacing,
signbit, logaddexp, heaviside, degrees, ldexp, modf, bit counting. Where NumPy treats a corner
(signed zeros, infinities, NaN) specially, so does the composition; accuracy is a few ulp."""
from __future__ import annotations

import math

import numpy as np

from . import lax
from .tracer import Tracer
from .ufuncs import UFUNCS, _const, _register


def _e(opcode, *xs):
    return lax.elementwise(opcode, *xs)


def _mul(a, b):
    return _e("multiply", a, b)


def _add(a, b):
    return _e("add", a, b)


def _sub(a, b):
    return _e("subtract", a, b)


def _div(a, b):
    return _e("divide", a, b)


def _select(p, a, b):
    return lax.select(p, a, b)


def _lt(a, b):
    return lax.compare(a, b, "LT")


def _is_nan(x):
    return lax.compare(x, x, "NE")


def _abs(x):
    return _e("abs", x)


def _folded_abs(x: Tracer) -> Tracer:
    """|x| as the branch of x's sign: the same value as abs (the sign bit cleared), and a
    derivative of +1 or -1 at zero too, where abs has none (0). An odd function computed as
    sign(x) f(|x|) (sinh, arcsinh) then has f'(0) at zero, not 0."""
    return _select(_signbit(x), _e("negate", x), x)


_SAME_WIDTH_INT = {2: np.int16, 4: np.int32, 8: np.int64}
_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _bits(x: Tracer) -> Tracer:
    """The bits of a float as a signed integer: negative exactly when the sign bit is set."""
    return lax.bitcast_convert(x, _SAME_WIDTH_INT[x.dtype.itemsize])


def _signbit(x: Tracer) -> Tracer:
    """The sign bit (set for -0.0 and negative NaNs too)."""
    if x.dtype.kind != "f":
        return _lt(x, _const(x, 0)) if x.dtype.kind == "i" else _const(x, False, np.bool_)
    bits = _bits(x)
    return _lt(bits, _const(bits, 0))


@_register(np.signbit)
def _signbit_ufunc(x, out):
    return _signbit(x)


@_register(np.copysign)
def _copysign(a, b, out):
    magnitude = _abs(a)
    return _select(_signbit(b), _e("negate", magnitude), magnitude)


@_register(np.arcsin)
def _arcsin(x, out):
    one = _const(x, 1.0)
    return _e("atan2", x, _e("sqrt", _mul(_sub(one, x), _add(one, x))))


@_register(np.arccos)
def _arccos(x, out):
    one = _const(x, 1.0)
    return _e("atan2", _e("sqrt", _mul(_sub(one, x), _add(one, x))), x)


@_register(np.arctan)
def _arctan(x, out):
    return _e("atan2", x, _const(x, 1.0))


def _in_float64(formula):
    """``formula`` evaluated in float64 for narrower floats, rounded once at the end: the
    float32 formulas lose up to ~12 ulp near the overflow edge (e^(|x| - ln 2), ln 2 rounded),
    where NumPy's float32 sinh/cosh are within an ulp."""
    def evaluate(x, out):
        if x.dtype.kind == "f" and x.dtype.itemsize < 8:
            return lax.convert(formula(lax.convert(x, np.float64), out), x.dtype)
        return formula(x, out)
    evaluate.__name__ = formula.__name__
    return evaluate


@_register(np.sinh)
@_in_float64
def _sinh(x, out):
    # fdlibm's scheme: sinh|x| = (t + t/(t+1)) / 2 with t = expm1|x| below 22 (exact near 0, and
    # -0.0 stays -0.0); e^|x| / 2 above, as (h/2) h with h = e^(|x|/2): finite up to the true
    # overflow (|x| = 710.47), and no rounded |x| - ln 2 (which cost up to ~500 ulp near 709)
    a = _folded_abs(x)
    below = _lt(a, _const(x, 22.0))
    # (each branch reads only the values it is kept for: the other stays finite, and a
    # gradient's zero cotangent through it zero; inf / inf was NaN)
    t = _e("exponential-minus-one", _select(below, a, _const(x, 0.0)))
    small = _mul(_add(t, _div(t, _add(t, _const(x, 1.0)))), _const(x, 0.5))
    magnitude = _select(below, small, _half_exp(x, _select(below, _const(x, 22.0), a)))
    return _select(_signbit(x), _e("negate", magnitude), magnitude)


def _half_exp(x: Tracer, a: Tracer) -> Tracer:
    """e^a / 2 for a >= 0, as (h/2) h with h = e^(a/2): no overflow before the result's own."""
    h = _e("exponential", _mul(a, _const(x, 0.5)))
    return _mul(_mul(h, _const(x, 0.5)), h)


@_register(np.cosh)
@_in_float64
def _cosh(x, out):
    # (e^|x| + e^-|x|) / 2 as t/2 + (1/2)/t with t = e^|x| below 22; e^|x| / 2 above (_half_exp)
    a = _abs(x)
    half = _const(x, 0.5)
    t = _e("exponential", a)
    small = _add(_mul(t, half), _div(half, t))
    return _select(_lt(a, _const(x, 22.0)), small, _half_exp(x, a))


def _large(x: Tracer) -> Tracer:
    """Where squaring |x| would lose the result: asinh and acosh are log(2|x|) there."""
    return _const(x, 1e8 if x.dtype.itemsize >= 8 else 4096.0)


@_register(np.arcsinh)
def _arcsinh(x, out):
    a = _folded_abs(x)
    one = _const(x, 1.0)
    below = _lt(a, _large(x))
    # each branch reads only the values it is kept for (1 elsewhere): the one not kept stays
    # finite, so its zero cotangent stays zero (0 * inf is NaN) in a gradient
    m = _select(below, a, one)
    m2 = _mul(m, m)
    moderate = _e("log-plus-one", _add(m, _div(m2, _add(one, _e("sqrt", _add(one, m2))))))
    huge = _add(_e("log", _select(below, one, a)), _const(x, math.log(2.0)))
    r = _select(below, moderate, huge)
    return _select(_signbit(x), _e("negate", r), r)


@_register(np.arccosh)
def _arccosh(x, out):
    one = _const(x, 1.0)
    t = _sub(x, one)
    moderate = _e("log-plus-one", _add(t, _e("sqrt", _mul(t, _add(t, _const(x, 2.0))))))
    huge = _add(_e("log", x), _const(x, math.log(2.0)))
    r = _select(_lt(x, _large(x)), moderate, huge)
    return _select(_lt(x, one), _const(x, np.nan), r)


@_register(np.arctanh)
def _arctanh(x, out):
    one = _const(x, 1.0)
    return _mul(_const(x, 0.5), _e("log-plus-one", _div(_add(x, x), _sub(one, x))))


@_register(np.hypot)
def _hypot(a, b, out):
    x, y = _abs(a), _abs(b)
    big, small = _e("maximum", x, y), _e("minimum", x, y)
    ratio = _div(small, big)
    r = _mul(big, _e("sqrt", _add(_const(a, 1.0), _mul(ratio, ratio))))
    r = _select(lax.compare(big, _const(a, 0.0), "EQ"), _const(a, 0.0), r)
    inf = _const(a, np.inf)
    either_inf = _e("or", lax.compare(x, inf, "EQ"), lax.compare(y, inf, "EQ"))
    return _select(either_inf, inf, r)  # hypot(inf, nan) is inf, as in C


@_register(np.deg2rad, np.radians)
def _deg2rad(x, out):  # NumPy's constant is computed in the operand's type (NPY_PIf / 180.0f)
    t = x.dtype.type
    return _mul(x, _const(x, t(math.pi) / t(180.0)))


@_register(np.rad2deg, np.degrees)
def _rad2deg(x, out):
    t = x.dtype.type
    return _mul(x, _const(x, t(180.0) / t(math.pi)))


@_register(np.heaviside)
def _heaviside(x, h0, out):
    zero, one = _const(x, 0.0), _const(x, 1.0)
    r = _select(_lt(x, zero), zero, _select(lax.compare(x, zero, "GT"), one, h0))
    return _select(_is_nan(x), x, r)


def _logaddexp(base_log, exp_fn, log1p_fn):
    def impl(a, b, out):
        same = lax.compare(a, b, "EQ")  # also inf == inf: a + log(2)
        d = _sub(a, b)
        pos = _add(a, log1p_fn(exp_fn(_e("negate", d))))
        neg = _add(b, log1p_fn(exp_fn(d)))
        r = _select(
            lax.compare(d, _const(a, 0.0), "GT"),
            pos,
            _select(lax.compare(d, _const(a, 0.0), "LE"), neg, d),
        )
        # a tie: (a + b) / 2 as a/2 + b/2, which is a (and finite where a + b is not), and
        # differentiates as it should, half to each operand (a + log 2 gave all to a)
        half = _const(a, 0.5)
        tie = _add(_add(_mul(a, half), _mul(b, half)), _const(a, base_log))
        return _select(same, tie, r)
    return impl


UFUNCS[np.logaddexp] = _logaddexp(math.log(2.0), lambda v: _e("exponential", v),
                                  lambda v: _e("log-plus-one", v))
UFUNCS[np.logaddexp2] = _logaddexp(1.0, lambda v: _e("power", _const(v, 2.0), v),
                                   lambda v: _div(_e("log-plus-one", v), _const(v, math.log(2.0))))


@_register(np.fabs)
def _fabs(x, out):
    return _abs(x)


@_register(np.float_power)
def _float_power(a, b, out):
    return _e("power", a, b)


@_register(np.ldexp)
def _ldexp(x, e, out):
    # 2**e in two halves, so that a tiny x times a huge power of two stays finite when the
    # result is
    e = lax.convert(e, x.dtype)
    half = _e("floor", _mul(e, _const(x, 0.5)))
    two = _const(x, 2.0)
    scaled = _mul(_mul(x, _e("power", two, half)), _e("power", two, _sub(e, half)))
    # zeros, infinities and NaN are what they are, whatever the exponent (0 * 2**big is not NaN)
    special = _e("or", lax.compare(x, _const(x, 0.0), "EQ"), _e("not", _e("is-finite", x)))
    return _select(special, x, scaled)


def _step(x: Tracer, up: Tracer) -> Tracer:
    """The next float from finite, nonzero-or-zero ``x`` toward +inf (``up``) or -inf."""
    bits = _bits(x)
    one = _const(bits, 1)
    toward_bigger_magnitude = lax.compare(up, _e("not", _signbit(x)), "EQ")
    stepped = lax.bitcast_convert(
        _select(toward_bigger_magnitude, _add(bits, one), _sub(bits, one)), x.dtype
    )
    tiny = lax.bitcast_convert(one, x.dtype)  # the smallest subnormal
    from_zero = _select(up, tiny, _e("negate", tiny))
    return _select(lax.compare(x, _const(x, 0.0), "EQ"), from_zero, stepped)


@_register(np.nextafter)
def _nextafter(x, y, out):
    up = _lt(x, y)
    r = _step(x, up)
    # equal: C's nextafter returns y, NumPy's half one x (nextafter(-0.0, 0.0) is -0.0 there)
    r = _select(lax.compare(x, y, "EQ"), x if x.dtype == np.float16 else y, r)
    return _select(_e("or", _is_nan(x), _is_nan(y)), _add(x, y), r)


def _without_derivative(x: Tracer) -> Tracer:
    """``x``'s value (bit for bit) through its bits, which carry no tangent: for a function
    that is piecewise constant in ``x``, whose derivative is 0 almost everywhere."""
    return lax.bitcast_convert(_bits(x), x.dtype)


@_register(np.spacing)
def _spacing(x, out):
    x = _without_derivative(x)  # (a step function of x: its derivative is 0, not step' - 1)
    up = _e("or", _e("not", _signbit(x)), lax.compare(x, _const(x, 0.0), "EQ"))  # spacing(-0.0) > 0
    r = _sub(_step(x, up), x)
    # NumPy's half spacing of a negative x is |x| minus the float below |x|
    if x.dtype == np.float16:
        a = _abs(x)
        below = _sub(a, _step(a, lax.full(x.trace, x.shape, False, np.bool_)))
        r = _select(_e("and", _signbit(x), lax.compare(x, _const(x, 0.0), "NE")), below, r)
    bad = _e("or", _is_nan(x), lax.compare(_abs(x), _const(x, np.inf), "EQ"))
    return _select(bad, _const(x, np.nan), r)


@_register(np.modf)
def _modf(x, out):
    whole = _select(_lt(x, _const(x, 0.0)), _e("ceil", x), _e("floor", x))
    whole = _select(_signbit(x), _e("negate", _abs(whole)), whole)  # -0.5 -> -0.0
    frac = _sub(x, whole)
    infinite = lax.compare(_abs(x), _const(x, np.inf), "EQ")
    signed_zero = _select(_signbit(x), _const(x, -0.0), _const(x, 0.0))
    frac = _select(infinite, signed_zero, _select(_signbit(x), _e("negate", _abs(frac)), frac))
    return frac, whole


_FLOAT_LAYOUT = {4: (23, 127), 8: (52, 1023)}  # (mantissa bits, exponent bias)


@_register(np.frexp)
def _frexp(x, out):
    """``x = m * 2**e`` with 0.5 <= |m| < 1, from the bits: subnormals are scaled into the
    normal range first; zeros, infinities and NaN give (x, 0), as C's frexp."""
    mbits, bias = _FLOAT_LAYOUT[x.dtype.itemsize]
    itype = _SAME_WIDTH_INT[x.dtype.itemsize]
    scale = mbits + 2
    tiny = lax.compare(_abs(x), _const(x, float(np.finfo(x.dtype).tiny)), "LT")
    scaled = _select(tiny, _mul(x, _const(x, 2.0 ** scale)), x)
    bits = _bits(scaled)
    exponent_field = _e(
        "and",
        _e("shift-right-logical", bits, _const(bits, mbits)),
        _const(bits, 0x7FF if mbits == 52 else 0xFF),
    )
    exponent = _sub(exponent_field, _const(bits, bias - 1))
    exponent = _select(tiny, _sub(exponent, _const(bits, scale)), exponent)
    keep = ~(((1 << (11 if mbits == 52 else 8)) - 1) << mbits) & ((1 << (8 * x.dtype.itemsize)) - 1)
    keep = int(np.array(keep, dtype=_UNSIGNED[x.dtype.itemsize]).view(itype))
    mantissa_bits = _e("or", _e("and", bits, _const(bits, keep)), _const(bits, (bias - 1) << mbits))
    mantissa = lax.bitcast_convert(mantissa_bits, x.dtype)
    special = _e("or", lax.compare(x, _const(x, 0.0), "EQ"), _e("not", _e("is-finite", x)))
    mantissa = _select(special, x, mantissa)
    exponent = _select(special, _const(exponent, 0), exponent)
    return mantissa, lax.convert(exponent, np.int32)


@_register(np.bitwise_count)
def _bitwise_count(x, out):  # NumPy: uint8 counts of |x|
    if x.dtype.kind == "b":
        return lax.convert(x, out)
    magnitude = _abs(x) if x.dtype.kind == "i" else x  # NumPy counts the bits of |x|
    return lax.convert(_e("popcnt", magnitude), out)


def _gcd_values(a: Tracer, b: Tracer) -> Tracer:
    """Euclid's algorithm unrolled: 93 steps cover every pair of 64-bit integers (consecutive
    Fibonacci numbers are the worst case)."""
    signed = a.dtype
    # |INT_MIN| does not fit the signed type: run Euclid on the magnitudes as unsigned, as NumPy
    a, b = (lax.convert(_abs(v), _UNSIGNED[v.dtype.itemsize]) for v in (a, b))
    zero = _const(a, 0)
    steps = {1: 12, 2: 24, 4: 47, 8: 93}[a.dtype.itemsize]
    for _ in range(steps):
        b_zero = lax.compare(b, zero, "EQ")
        safe = _select(b_zero, _const(a, 1), b)
        r = _e("remainder", a, safe)
        a, b = _select(b_zero, a, b), _select(b_zero, zero, r)
    return lax.convert(a, signed)


@_register(np.gcd)
def _gcd(a, b, out):
    return _gcd_values(a, b)


@_register(np.lcm)
def _lcm(a, b, out):
    g = _gcd_values(a, b)
    zero = _const(a, 0)
    safe = _select(lax.compare(g, zero, "EQ"), _const(a, 1), g)
    return _mul(_e("divide", _abs(a), safe), _abs(b))  # as NumPy: wraps, never abs() of the product
