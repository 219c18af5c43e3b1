"""Complex power and the complex trigonometric and hyperbolic functions (and their inverses) on
traced arrays, composed from real HLO ops on the parts, so every backend gets them.

NumPy computes these with libm's C99 functions (``cpow``, ``csin``, ``casinh`` ...). The
formulas here are the textbook ones in their overflow-safe forms: ``sinh(x+iy) = sinh x cos y +
i cosh x sin y`` with ``e^|x|/2`` applied in halves for large ``|x|``; tanh's ``(sinh x cosh x + i
sin y cos y) / (sinh^2 x + cos^2 y)``; Kahan's ("Branch cuts for complex elementary functions",
1987) ``asin``/``acos`` from ``sqrt(1 - z)`` and ``sqrt(1 + z)``, whose products never cancel,
and ``log(2z)`` where ``|z|`` is so large that squaring it would overflow; atanh's
``log1p(4x / ((1-x)^2 + y^2)) / 4 + i atan2(2y, (1-x)(1+x) - y^2) / 2``. C99's special values
(zeros' signs, infinities, NaN: the ones glibc returns) are selected explicitly. complex64 is
computed in float64 and rounded once, as NumPy's float32 libm is within an ulp or so.

``np.power`` is NumPy's ``npy_cpow``: 1 for a zero exponent, 0 or NaN for a zero base, exact
repeated multiplication for integer exponents of magnitude below 100 (the same products in the
same order, so bit for bit), else ``exp(w * log z)``."""
from __future__ import annotations

import math

import numpy as np

from . import lax
from .complex_ufuncs import COMPLEX_UFUNCS, imag_part, make, real_part
from .tracer import Tracer
from .ufuncs_math import _add, _arcsinh, _cosh, _e, _mul, _signbit, _sinh, _sub

_LN2 = math.log(2.0)


def _c(x: Tracer, value) -> Tracer:
    return lax.full_like(x, value)


def _neg(a):
    return _e("negate", a)


def _sel(p, a, b):
    return lax.select(p, a, b)


def _eq(a, b):
    return lax.compare(a, b, "EQ")


def _lt(a, b):
    return lax.compare(a, b, "LT")


def _and(a, b):
    return _e("and", a, b)


def _or(a, b):
    return _e("or", a, b)


def _not(a):
    return _e("not", a)


def _finite(x):
    return _e("is-finite", x)


def _is_nan(x):
    return lax.compare(x, x, "NE")


def _is_inf(x):
    return _eq(_e("abs", x), _c(x, np.inf))


def _copysign(magnitude, sign):
    a = _e("abs", magnitude)
    return _sel(_signbit(sign), _neg(a), a)


def _times_sign_of(v, x):
    """``v`` negated where ``x`` has its sign bit set (sinh's oddness: ``v``'s own sign stays)."""
    return _sel(_signbit(x), _neg(v), v)


def _parts64(z: Tracer) -> tuple[Tracer, Tracer]:
    return (lax.convert(real_part(z), np.float64), lax.convert(imag_part(z), np.float64))


def _pack(re: Tracer, im: Tracer, like: np.dtype) -> Tracer:
    part = np.float32 if np.dtype(like) == np.complex64 else np.float64
    return make(lax.convert(re, part), lax.convert(im, part))


def _in_float64(kernel):
    """A kernel on float64 parts ``(x, y) -> (re, im)`` as a ufunc implementation for complex
    operands: complex64 rounds once at the end."""
    def impl(z, out):
        z = lax.convert(z, out) if z.dtype != out else z
        return _pack(*kernel(*_parts64(z)), out)
    impl.__name__ = kernel.__name__
    return impl


def _csqrt(x, y):
    r = _e("sqrt", make(x, y))
    return real_part(r), imag_part(r)


def _clog(x, y):
    r = _e("log", make(x, y))
    return real_part(r), imag_part(r)


def _cexp(x, y):
    """C99's cexp: the HLO op, with the infinite real parts beside a non-finite imaginary part
    that C99 defines (``e^(-inf + i y)`` is 0, ``e^(+inf + i y)`` is inf + i NaN)."""
    r = _e("exponential", make(x, y))
    re, im = real_part(r), imag_part(r)
    edge = _and(_is_inf(x), _not(_finite(y)))
    negative = _signbit(x)
    re = _sel(edge, _sel(negative, _c(x, 0.0), x), re)
    im = _sel(edge, _sel(negative, _copysign(_c(x, 0.0), y), _sub(y, y)), im)
    return re, im


# -- sinh, cosh, tanh and (via z -> iz) sin, cos, tan --------------------------------------


def _scaled_exp(a, t):
    """``e^a / 2 * t`` for ``a >= 22``, never overflowing before the product does: the halves
    ``e^(a/2)`` (halving is exact) up to a = 1400, the rest (capped) as a third factor."""
    m = _e("minimum", a, _c(a, 1400.0))
    h = _e("exponential", _mul(m, _c(a, 0.5)))
    rest = _e("exponential", _e("minimum", _sub(a, m), _c(a, 700.0)))
    return _mul(_mul(_mul(_mul(t, _c(a, 0.5)), h), h), rest)


def _sinh_parts(x, y):
    """``(sinh x cos y, cosh x sin y)``, finite wherever the true values are."""
    s, c = _e("sine", y), _e("cosine", y)
    a = _e("abs", x)
    small = _lt(a, _c(a, 22.0))
    re = _sel(small, _mul(_sinh(x, None), c), _times_sign_of(_scaled_exp(a, c), x))
    im = _sel(small, _mul(_cosh(x, None), s), _scaled_exp(a, s))
    return re, im


def _csinh(x, y):
    re, im = _sinh_parts(x, y)
    if_y_zero = _eq(y, _c(y, 0.0))
    re = _sel(if_y_zero, _sinh(x, None), re)
    im = _sel(if_y_zero, y, im)
    # y infinite or NaN: the real part is 0 (x = 0) or +-inf (x infinite), the imaginary NaN
    y_bad = _not(_finite(y))
    re = _sel(_and(y_bad, _eq(x, _c(x, 0.0))), x, re)
    re = _sel(_and(y_bad, _is_inf(x)), _c(x, np.inf), re)  # glibc: +inf, whatever x's sign
    im = _sel(_and(y_bad, _not(_is_nan(x))), _sub(y, y), im)
    return re, im


def _ccosh(x, y):
    s, c = _e("sine", y), _e("cosine", y)
    a = _e("abs", x)
    small = _lt(a, _c(a, 22.0))
    re = _sel(small, _mul(_cosh(x, None), c), _scaled_exp(a, c))
    im = _sel(small, _mul(_sinh(x, None), s), _times_sign_of(_scaled_exp(a, s), x))
    if_y_zero = _eq(y, _c(y, 0.0))
    re = _sel(if_y_zero, _cosh(x, None), re)
    im = _sel(if_y_zero, _sel(_is_nan(x), y, _mul(_copysign(_c(x, 0.0), x), y)), im)
    y_bad = _not(_finite(y))
    x_zero = _eq(x, _c(x, 0.0))
    re = _sel(_and(y_bad, _is_inf(x)), _c(x, np.inf), _sel(y_bad, _sub(y, y), re))
    im = _sel(_and(y_bad, x_zero), _c(x, 0.0), _sel(y_bad, _sub(y, y), im))
    return re, im


def _ctanh(x, y):
    s, c = _e("sine", y), _e("cosine", y)
    a = _e("abs", x)
    sh, ch = _sinh(x, None), _cosh(x, None)
    den = _add(_mul(sh, sh), _mul(c, c))
    e = _e("exponential", _neg(a))
    large = _lt(_c(a, 20.0), a)
    re = _sel(large, _copysign(_c(x, 1.0), x), _e("divide", _mul(sh, ch), den))
    im = _sel(large, _mul(_mul(_mul(_mul(_c(x, 4.0), s), c), e), e),
              _e("divide", _mul(s, c), den))
    im = _sel(_eq(y, _c(y, 0.0)), y, im)
    y_bad = _not(_finite(y))
    im = _sel(_and(y_bad, _is_inf(x)), _copysign(_c(x, 0.0), y), im)
    # a finite x beside an infinite or NaN y: NaN + i NaN, but tanh(+-0 + i y) = +-0 + i NaN
    x_finite = _finite(x)
    re = _sel(_and(y_bad, x_finite), _sel(_eq(x, _c(x, 0.0)), x, _sub(y, y)), re)
    im = _sel(_and(y_bad, x_finite), _sub(y, y), im)
    return re, im


def _rotated(kernel):
    """``f(z) = -i g(iz)``: sin from sinh, tan from tanh, asin from asinh, atan from atanh."""
    def rotated(x, y):
        re, im = kernel(_neg(y), x)
        return im, _neg(re)
    rotated.__name__ = kernel.__name__.replace("_ch", "_c").replace("_ca", "_ca")
    return rotated


def _ccos(x, y):  # cos z = cosh(iz)
    return _ccosh(_neg(y), x)


# -- the inverse functions --------------------------------------------------------------------

_LARGE = 1e10  # above this |z|, asinh(z) = log(2z) to well within an ulp (the next term: 1/4z^2)


def _is_large(x, y, bound=_LARGE):
    """Either part beyond ``bound`` (an infinite one beside a NaN included)."""
    return _or(_lt(_c(x, bound), _e("abs", x)), _lt(_c(y, bound), _e("abs", y)))


def _casinh(x, y):
    # Kahan: asinh z = asinh(Im(conj(sqrt(1 - iz)) sqrt(1 + iz))) + i atan2(y, Re(...)), with
    # 1 + iz = (1 - y) + ix and 1 - iz = (1 + y) - ix; no product below cancels
    a, b = _csqrt(_sub(_c(y, 1.0), y), x)  # sqrt(1 + iz)
    c, d = _csqrt(_add(_c(y, 1.0), y), _neg(x))  # sqrt(1 - iz)
    moderate_re = _arcsinh(_sub(_mul(c, b), _mul(d, a)), None)
    moderate_im = _e("atan2", y, _sub(_mul(c, a), _mul(d, b)))
    # large |z|: asinh z = log(2z), taken for Re z >= 0 (asinh is odd)
    flip = _signbit(x)
    lx, ly = _clog(_e("abs", x), _sel(flip, _neg(y), y))
    large_re = _add(lx, _c(lx, _LN2))
    large_re = _sel(flip, _neg(large_re), large_re)
    large_im = _sel(flip, _neg(ly), ly)
    large = _is_large(x, y)
    re, im = _sel(large, large_re, moderate_re), _sel(large, large_im, moderate_im)
    im = _sel(_eq(y, _c(y, 0.0)), _sel(_is_nan(x), y, im), im)  # asinh(NaN + 0i) = NaN + 0i
    return re, im


def _cacos(x, y):
    a, b = _csqrt(_add(_c(x, 1.0), x), y)  # sqrt(1 + z)
    c, d = _csqrt(_sub(_c(x, 1.0), x), _neg(y))  # sqrt(1 - z)
    moderate_re = _mul(_c(x, 2.0), _e("atan2", c, a))
    moderate_im = _arcsinh(_sub(_mul(a, d), _mul(b, c)), None)
    # large |z|: acos z = arg-like real part, -i log(2z) with the sign of -Im z
    lx, ly = _clog(x, y)
    magnitude = _add(lx, _c(lx, _LN2))
    large_re = _e("abs", ly)
    large_im = _sel(_signbit(y), magnitude, _neg(magnitude))
    large = _is_large(x, y)
    re, im = _sel(large, large_re, moderate_re), _sel(large, large_im, moderate_im)
    # acos(+-0 + i NaN) = pi/2 + i NaN
    re = _sel(_and(_eq(x, _c(x, 0.0)), _is_nan(y)), _c(x, math.pi / 2), re)
    return re, im


def _cacosh(x, y):
    """acosh z = +-i acos z, the sign making the real part non-negative (C99's cacosh)."""
    re, im = _cacos(x, y)
    negative = _signbit(y)
    out_re = _sel(negative, im, _neg(im))
    out_im = _sel(negative, _neg(re), re)
    nan_y = _is_nan(y)  # cacosh(x + i NaN): |acos's imaginary part|, NaN
    out_re = _sel(nan_y, _e("abs", im), out_re)
    out_im = _sel(nan_y, re, out_im)
    return out_re, out_im


def _catanh(x, y):
    one = _c(x, 1.0)
    u = _sub(one, x)
    # the real part for |x| (atanh is odd): log1p(4|x| / d) / 4 with d = (1 - |x|)^2 + y^2;
    # where d underflows (|x| near 1, y tiny) log1p is log(4|x|) - 2 log|1 - |x| + iy|
    ax = _e("abs", x)
    au = _sub(one, ax)
    d = _add(_mul(au, au), _mul(y, y))
    quarter = _c(x, 0.25)
    ratio = _e("log-plus-one", _e("divide", _mul(_c(x, 4.0), ax), d))
    near_pole = _sub(_mul(quarter, _e("log", _mul(_c(x, 4.0), ax))),
                     _mul(_c(x, 0.5), _e("log", _e("abs", make(au, y)))))
    moderate_re = _sel(_lt(d, _c(d, 1e-290)), near_pole, _mul(quarter, ratio))
    moderate_re = _copysign(moderate_re, x)
    moderate_im = _mul(_c(x, 0.5), _e("atan2", _add(y, y),
                                      _sub(_mul(u, _add(one, x)), _mul(y, y))))
    # large |z|: atanh z = 1/z + O(1/z^3): real part x / |z|^2, imaginary +-pi/2
    h = _e("abs", make(x, y))
    large_re = _e("divide", _e("divide", x, h), h)
    large_im = _copysign(_c(x, math.pi / 2), y)
    large = _and(_is_large(x, y, 1e150), _not(_or(_is_nan(x), _is_nan(y))))
    re, im = _sel(large, large_re, moderate_re), _sel(large, large_im, moderate_im)
    # an infinite part: 0 (signed as x) + i pi/2 (signed as y), unless y is NaN
    inf = _or(_is_inf(x), _is_inf(y))
    re = _sel(inf, _copysign(_c(x, 0.0), x), re)
    im = _sel(_and(inf, _not(_is_nan(y))), large_im, im)
    re = _sel(_and(_eq(x, _c(x, 0.0)), _is_nan(y)), x, re)  # atanh(+-0 + i NaN) = +-0 + i NaN
    return re, im




def _csin(x, y):
    """sin z = -i sinh(iz), but glibc's csin gives +inf (not -inf) as the imaginary part of
    sin(inf or NaN + i inf) whatever the signs."""
    re, im = _rotated(_csinh)(x, y)
    return re, _sel(_and(_is_inf(y), _not(_finite(x))), _c(x, np.inf), im)


_ctan = _rotated(_ctanh)
_casin = _rotated(_casinh)
_catan = _rotated(_catanh)


# -- power ----------------------------------------------------------------------------------


def _cmul(a: Tracer, b: Tracer) -> Tracer:
    """``a * b`` as npymath's cmul (no fused multiply-adds)."""
    ar, ai, br, bi = real_part(a), imag_part(a), real_part(b), imag_part(b)
    return make(_sub(_mul(ar, br), _mul(ai, bi)), _add(_mul(ar, bi), _mul(ai, br)))


def _c99_multiply(a, b, c, d):
    """``(a + ib)(c + id)`` as C99 Annex G (gcc's ``__muldc3``, which glibc's ``cpow`` uses):
    where both parts come out NaN but an operand is infinite, the infinities are recovered."""
    ac, bd, ad, bc = _mul(a, c), _mul(b, d), _mul(a, d), _mul(b, c)
    x, y = _sub(ac, bd), _add(ad, bc)
    unit = lambda v: _copysign(_sel(_is_inf(v), _c(v, 1.0), _c(v, 0.0)), v)  # noqa: E731
    nan_to_zero = lambda v: _sel(_is_nan(v), _copysign(_c(v, 0.0), v), v)  # noqa: E731
    first_inf = _or(_is_inf(a), _is_inf(b))
    a, b = _sel(first_inf, unit(a), a), _sel(first_inf, unit(b), b)
    c, d = _sel(first_inf, nan_to_zero(c), c), _sel(first_inf, nan_to_zero(d), d)
    second_inf = _or(_is_inf(c), _is_inf(d))
    c, d = _sel(second_inf, unit(c), c), _sel(second_inf, unit(d), d)
    a, b = _sel(second_inf, nan_to_zero(a), a), _sel(second_inf, nan_to_zero(b), b)
    overflowed = _and(_not(_or(first_inf, second_inf)),
                      _or(_or(_is_inf(ac), _is_inf(bd)), _or(_is_inf(ad), _is_inf(bc))))
    a, b, c, d = (_sel(overflowed, nan_to_zero(v), v) for v in (a, b, c, d))
    recalc = _and(_and(_is_nan(x), _is_nan(y)), _or(_or(first_inf, second_inf), overflowed))
    inf = _c(a, np.inf)
    x = _sel(recalc, _mul(inf, _sub(_mul(a, c), _mul(b, d))), x)
    y = _sel(recalc, _mul(inf, _add(_mul(a, d), _mul(b, c))), y)
    return x, y


def _integer_powers(z: Tracer, n: Tracer) -> Tracer:
    """``z ** n`` for integer ``n`` (an int32 array, -100 < n < 100), as npy_cpow multiplies:
    ``n`` of 1, 2, 3 unrolled, else binary powering from 1 + 0j and ``1 / r`` for n < 0."""
    one = lax.full_like(z, 1)
    k = _e("abs", n)
    acc, p = one, z
    for bit in range(7):  # |n| < 128
        has_bit = lax.compare(_e("and", k, _c(k, 1 << bit)), _c(k, 0), "NE")
        acc = _sel(has_bit, _cmul(acc, p), acc)
        p = _cmul(p, p)
    r = _sel(_lt(n, _c(n, 0)), _e("divide", one, acc), acc)
    square = _cmul(z, z)
    for value, unrolled in ((1, z), (2, square), (3, _cmul(z, square))):
        r = _sel(_eq(n, _c(n, value)), unrolled, r)
    return r


def _power(z, w, out):
    """npy_cpow for any exponent, traced or not."""
    z = lax.convert(z, out) if z.dtype != out else z
    w = lax.convert(w, out) if w.dtype != out else w
    br, bi = real_part(w), imag_part(w)
    zero = _c(br, 0.0)
    integral = _and(_and(_eq(bi, zero), _eq(_e("floor", br), br)),
                    _lt(_e("abs", br), _c(br, 100.0)))
    n = lax.convert(_sel(integral, br, zero), np.int32)
    by_multiplication = _integer_powers(z, n)
    (lx, ly), (wx, wy) = _clog(*_parts64(z)), _parts64(w)
    general = _pack(*_cexp(*_c99_multiply(wx, wy, lx, ly)), out)
    r = _sel(integral, by_multiplication, general)
    zero_base = _and(_eq(real_part(z), zero), _eq(imag_part(z), zero))
    r = _sel(zero_base, _sel(_lt(zero, br), lax.full_like(z, 0), lax.full_like(z, complex(np.nan,
                                                                                          np.nan))),
             r)
    return _sel(_and(_eq(br, zero), _eq(bi, zero)), lax.full_like(z, 1), r)


def _exp(z, out):
    return _pack(*_cexp(real_part(z), imag_part(z)), out)


COMPLEX_UFUNCS.update({
    np.power: _power, np.exp: _exp,
    np.sinh: _in_float64(_csinh), np.cosh: _in_float64(_ccosh), np.tanh: _in_float64(_ctanh),
    np.sin: _in_float64(_csin), np.cos: _in_float64(_ccos), np.tan: _in_float64(_ctan),
    np.arcsinh: _in_float64(_casinh), np.arccosh: _in_float64(_cacosh),
    np.arctanh: _in_float64(_catanh), np.arcsin: _in_float64(_casin),
    np.arccos: _in_float64(_cacos), np.arctan: _in_float64(_catan),
})
