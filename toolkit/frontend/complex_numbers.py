"""NumPy's functions of complex arrays on traced arrays: np.real, np.imag, np.angle, the complex
predicates, np.sort_complex, np.conj (the ufuncs of complex numbers are complex_ufuncs)."""
from __future__ import annotations

import math

import numpy as np

from . import lax
from .complex_ufuncs import imag_part, real_part
from .registry import EXPORTS, numpy_function
from .arguments import as_tracer as _t
from .tracer import Tracer
from .ufuncs import UFUNCS, apply_ufunc


def _e(opcode, *xs):
    return lax.elementwise(opcode, *xs)


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
    a = _t(a)
    if a.dtype.kind != "c":
        small = a.dtype in (np.int8, np.uint8, np.int16, np.uint16)
        return lax.convert(EXPORTS["sort"](a), np.complex64 if small else np.complex128)
    re, im = real_part(a), imag_part(a)
    re_nan, im_nan = lax.compare(re, re, "NE"), lax.compare(im, im, "NE")
    group = apply_ufunc(
        np.add,
        (
            apply_ufunc(np.multiply, (lax.convert(re_nan, np.int8), 2)),
            lax.convert(
                apply_ufunc(np.logical_and, (im_nan, apply_ufunc(np.logical_not, (re_nan,)))),
                np.int8,
            ),
        ),
    )
    group = EXPORTS["where"](apply_ufunc(np.logical_and, (re_nan, im_nan)), 3, group)
    order = EXPORTS["lexsort"]((im, re, group))
    return EXPORTS["take_along_axis"](a, order, axis=-1)


EXPORTS["conj"] = EXPORTS["conjugate"] = lambda x, *args, **kwargs: apply_ufunc(
    np.conjugate, (x,), kwargs
)
