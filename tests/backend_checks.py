"""Checks every compiling backend runs against the interpreter: every ufunc over drawn dtypes,
shapes and values. ``both(fn, *args)`` runs ``fn`` on the backend under test and on the
interpreter; the tolerances allow the backends' own float32 math (a few ulp)."""
import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from toolkit.frontend.complex_ufuncs import COMPLEX_UFUNCS
from toolkit.frontend.promotion import SUPPORTED
from toolkit.frontend.pytree import flatten
from toolkit.frontend.ufuncs import UFUNCS

from helpers import DTYPES
from test_ufuncs import arrays

APPROX = {np.exp, np.expm1, np.log, np.log1p, np.log2, np.log10, np.tanh, np.sin, np.cos, np.tan,
          np.exp2, np.power, np.cbrt, np.arctan2, np.floor_divide, np.remainder, np.divmod}
TRIG = {np.sin, np.cos, np.tan}
# compositions of transcendental functions: a few ulp from the backends' own float32 math
APPROX |= {
    np.arcsin,
    np.arccos,
    np.arctan,
    np.sinh,
    np.cosh,
    np.arcsinh,
    np.arccosh,
    np.arctanh,
    np.hypot,
    np.logaddexp,
    np.logaddexp2,
    np.float_power,
    np.ldexp,
}
# Euclid's algorithm unrolled 93 times compiles in seconds: gcd and lcm have their own tests
# (test_numpy_api) instead of joining every drawn example here
SLOW_TO_COMPILE = {np.gcd, np.lcm}
COMPLEX_APPROX = {np.exp, np.log, np.sqrt}  # own formulas for C99's cexp/clog/csqrt
UNARY = sorted((u for u in UFUNCS if u.nin == 1), key=lambda u: u.__name__)
BINARY = sorted(
    (u for u in UFUNCS if u.nin == 2 and u not in SLOW_TO_COMPILE), key=lambda u: u.__name__
)


def assert_close(got, ref, approx=False):
    got, ref = flatten(got)[0], flatten(ref)[0]
    assert len(got) == len(ref)
    for c, r in zip(got, ref):
        c, r = np.asarray(c), np.asarray(r)
        assert c.dtype == r.dtype and c.shape == r.shape
        if approx and r.dtype.kind in "fc":
            # a few ulp of own vector math; cancellations (1 + tanh(x) near -1) amplify it to
            # absolute errors at the scale of the values
            tol = 3e-6 if r.dtype in (np.float32, np.complex64) else 1e-13
            scale = max(1.0, float(np.max(np.abs(r[np.isfinite(r)]), initial=0.0)))
            np.testing.assert_allclose(c, r, rtol=tol, atol=tol * scale, equal_nan=True)
        else:
            np.testing.assert_array_equal(c, r)


def supported(ufunc, dtypes) -> bool:
    try:
        resolved = ufunc.resolve_dtypes(tuple(dtypes) + (None,) * ufunc.nout)
    except TypeError:
        return False
    if any(d.kind == "c" for d in resolved) and ufunc not in COMPLEX_UFUNCS:
        return False  # refused on complex numbers (test_ufuncs checks the error)
    return all(d in SUPPORTED for d in resolved)


def check_every_unary_ufunc(data, both) -> None:
    dtype = data.draw(st.sampled_from(DTYPES))
    x = data.draw(
        arrays(dtype, data.draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=7)))
    )
    chosen = [u for u in UNARY if supported(u, [dtype])]
    approx = APPROX | COMPLEX_APPROX if dtype.kind == "c" else APPROX
    groups = (
        ([u for u in chosen if u not in approx], False),
        ([u for u in chosen if u in approx and u not in TRIG], True),
    )
    for group, is_approx in groups:
        if group:
            # complex exp/log/sqrt at infinite or NaN parts: test_complex checks C99's special
            # values
            xs = np.nan_to_num(x) if is_approx and dtype.kind == "c" else x
            assert_close(*both(lambda a: tuple(u(a) for u in group), xs), approx=is_approx)
    trig = [u for u in chosen if u in TRIG]
    if trig:  # float32 sin/cos are accurate for |x| < 8192 (toolkit/backends/llvm/math.py)
        xt = np.clip(x, -8192, 8192) if dtype == np.float32 else x
        assert_close(*both(lambda a: tuple(u(a) for u in trig), xt), approx=True)


def check_every_binary_ufunc(data, both) -> None:
    da, db = data.draw(st.sampled_from(DTYPES)), data.draw(st.sampled_from(DTYPES))
    shapes = data.draw(
        hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=6)
    )
    a = data.draw(arrays(da, shapes.input_shapes[0]))
    b = data.draw(arrays(db, shapes.input_shapes[1]))
    chosen = [u for u in BINARY if supported(u, [da, db])]
    if any(u in (np.left_shift, np.right_shift) for u in chosen):
        b = np.clip(b, 0, 31) if np.asarray(b).dtype.kind == "i" else b
    for group, is_approx in (
        ([u for u in chosen if u not in APPROX], False),
        ([u for u in chosen if u in APPROX], True),
    ):
        if group:
            assert_close(*both(lambda x, y: tuple(u(x, y) for u in group), a, b), approx=is_approx)
