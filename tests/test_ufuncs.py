"""Every supported ufunc, traced and interpreted, against NumPy itself."""
import numpy as np
import pytest
from hypothesis import assume, given, strategies as st
from hypothesis.extra import numpy as hnp

import toolkit as tk
from toolkit.frontend.complex_ufuncs import COMPLEX_UFUNCS
from toolkit.frontend.errors import DTypeMismatchError, UnsupportedNumpyError
from toolkit.frontend.promotion import SUPPORTED
from toolkit.frontend.ufuncs import UFUNCS

from helpers import DTYPES, assert_same

UNARY = sorted((u for u in UFUNCS if u.nin == 1), key=lambda u: u.__name__)
BINARY = sorted((u for u in UFUNCS if u.nin == 2), key=lambda u: u.__name__)
# computed differently from NumPy (log via ln, exp2 via power): equal to a few ulp
APPROX = {
    np.log2,
    np.log10,
    np.exp2,
    np.power,
    np.arctan2,
    np.cbrt,
    # composed from other functions (as XLA's and JAX's math libraries compose them)
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
SHIFTS = {np.left_shift, np.right_shift}
# on complex numbers: C99's cexp/clog/csqrt are libm's in NumPy, toolkit's own formulas here
COMPLEX_APPROX = {np.exp, np.log, np.sqrt, np.power, np.sin, np.cos, np.tan, np.sinh, np.cosh,
                  np.tanh, np.arcsin, np.arccos, np.arctan, np.arcsinh, np.arccosh, np.arctanh}
# NumPy gives either zero of a +0.0/-0.0 tie, depending on the dtype and the SIMD path taken
UNPINNED_ZERO_SIGN = {np.fmax, np.fmin}


def arrays(dtype, shape):
    if dtype.kind == "f":
        elements = st.floats(width=dtype.itemsize * 8, allow_nan=True, allow_infinity=True)
    elif dtype.kind == "c":
        elements = st.complex_numbers(width=dtype.itemsize * 8, allow_nan=True, allow_infinity=True)
    elif dtype.kind in "iu":
        info = np.iinfo(dtype)
        small = st.integers(max(-300, int(info.min)), min(300, int(info.max)))
        edges = [int(info.min), int(info.max), 0, 1] + (
            [-1] if dtype.kind == "i" else [int(info.max) - 1]
        )
        elements = st.one_of(small, st.sampled_from(edges))
    else:
        elements = st.booleans()
    return hnp.arrays(dtype, shape, elements=elements)


def _numpy_result_dtype(ufunc, dtypes):
    try:
        resolved = ufunc.resolve_dtypes(tuple(dtypes) + (None,) * ufunc.nout)
        computed = resolved[: ufunc.nin] + resolved[ufunc.nin:]
        # the type NumPy computes in matters too: np.signbit of bool runs a float16 loop
        unsupported = next((d for d in computed if d not in SUPPORTED), None)
        return (unsupported if unsupported is not None else resolved[-1]), True
    except TypeError:
        return None, False


@pytest.mark.parametrize("ufunc", UNARY, ids=lambda u: u.__name__)
@given(data=st.data())
def test_unary_ufunc_matches_numpy(ufunc, data):
    dtype = data.draw(st.sampled_from(DTYPES))
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5))
    x = data.draw(arrays(dtype, shape))
    out_dtype, ok = _numpy_result_dtype(ufunc, [dtype])
    f = tk.jit(lambda a: ufunc(a))
    if not ok:
        with pytest.raises(TypeError):
            f(x)
        return
    if out_dtype not in SUPPORTED:
        with pytest.raises(DTypeMismatchError):
            f(x)
        return
    if out_dtype.kind == "c" or dtype.kind == "c":
        return _check_complex(ufunc, f, (x,))
    with np.errstate(all="ignore"):
        expected = ufunc(x)
    assert_same(f(x), expected, approx=ufunc in APPROX)


def _check_complex(ufunc, f, args):
    """A ufunc toolkit traces on complex numbers matches NumPy; any other says it is not
    supported where the graph may not break, and runs in NumPy where it may."""
    if ufunc not in COMPLEX_UFUNCS:
        with pytest.raises(UnsupportedNumpyError, match=f"np.{ufunc.__name__} of complex numbers"):
            tk.jit(lambda *a: ufunc(*a), fullgraph=True)(*args)
        with np.errstate(all="ignore"):
            assert_same(f(*args), ufunc(*args))
        return
    with np.errstate(all="ignore"):
        expected = ufunc(*args)
    got = f(*args)
    if ufunc in COMPLEX_APPROX:
        finite = np.isfinite(np.asarray(expected)) & np.all(
            [np.isfinite(a) for a in np.broadcast_arrays(*args)], axis=0
        )
        assert_same(np.where(finite, got, 0), np.where(finite, expected, 0), approx=True, rtol=1e-5)
    else:
        assert_same(got, expected)


@pytest.mark.parametrize("ufunc", BINARY, ids=lambda u: u.__name__)
@given(data=st.data())
def test_binary_ufunc_matches_numpy(ufunc, data):
    da, db = data.draw(st.sampled_from(DTYPES)), data.draw(st.sampled_from(DTYPES))
    shapes = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3,
                                                         min_side=0, max_side=4))
    a = data.draw(arrays(da, shapes.input_shapes[0]))
    b = data.draw(arrays(db, shapes.input_shapes[1]))
    out_dtype, ok = _numpy_result_dtype(ufunc, [da, db])
    f = tk.jit(lambda x, y: ufunc(x, y))
    if not ok:
        with pytest.raises(TypeError):
            f(a, b)
        return
    if out_dtype not in SUPPORTED or ufunc.resolve_dtypes((da, db, None))[0] not in SUPPORTED:
        with pytest.raises(DTypeMismatchError):
            f(a, b)
        return
    if ufunc is np.power and out_dtype.kind in "iu":
        assume(not np.any(b < 0))  # NumPy raises for negative integer powers; XLA gives 0
    if ufunc is np.power and out_dtype.kind == "f":
        # NumPy's scalar-exponent fast path computes x ** 0.5 as sqrt(x): (-inf) ** 0.5 is nan
        # there but +inf under IEEE pow (XLA, and NumPy itself with an array exponent).
        assume(not (np.any(np.isneginf(a)) and np.any(b == 0.5)))
    if ufunc in SHIFTS:
        bits = out_dtype.itemsize * 8
        assume(np.all((b >= 0) & (b < bits)))  # out-of-range shifts are undefined in NumPy
    if out_dtype.kind == "c" or "c" in (da.kind, db.kind):
        return _check_complex(ufunc, f, (a, b))
    with np.errstate(all="ignore"):
        expected = ufunc(a, b)
    assert_same(
        f(a, b), expected, approx=ufunc in APPROX, signed_zeros=ufunc not in UNPINNED_ZERO_SIGN
    )


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
@pytest.mark.parametrize("scalar", [2, -3, 2.5, True])
@pytest.mark.parametrize("op", ["+", "-", "*", "/", "//", "%", "**", "<", "max"])
def test_python_scalars_are_weak(dtype, scalar, op):
    x = (np.arange(1, 7).reshape(2, 3) - 3).astype(dtype)
    fns = {"+": lambda a: a + scalar, "-": lambda a: scalar - a, "*": lambda a: a * scalar,
           "/": lambda a: a / scalar, "//": lambda a: a // scalar, "%": lambda a: scalar % a,
           "**": lambda a: np.abs(a) ** scalar, "<": lambda a: a < scalar,
           "max": lambda a: np.maximum(a, scalar)}
    fn = fns[op]
    if op == "**" and np.dtype(dtype).kind == "i" and not isinstance(scalar, float) and scalar < 0:
        return  # NumPy raises for negative integer powers; XLA defines them as 0
    with np.errstate(all="ignore"):
        try:
            expected = fn(x)
        except TypeError:  # e.g. bool - array
            with pytest.raises(TypeError):
                tk.jit(fn)(x)
            return
    assert_same(tk.jit(fn)(x), expected, approx=op == "**")


def test_f32_times_python_float_stays_f32():
    lowered = tk.jit(lambda x: x * 2.0).lower(np.ones(3, np.float32))
    assert "f64" not in lowered.as_text()
    assert tk.jit(lambda x: x * 2.0)(np.ones(3, np.float32)).dtype == np.float32


def test_python_int_out_of_range_for_int32_raises_like_numpy():
    with pytest.raises(OverflowError, match="out of bounds for int32"):
        tk.jit(lambda x: x + 2**40)(np.ones(3, np.int32))


def test_weak_scalar_argument_promotes_like_a_python_scalar():
    f = tk.jit(lambda x, s: x * s)
    assert f(np.ones(3, np.float32), 2.0).dtype == np.float32
    assert f(np.ones(3, np.int32), 2).dtype == np.int32
    assert f(np.ones(3, np.int32), 2.0).dtype == np.float64
    # NumPy scalars are strong
    assert f(np.ones(3, np.float32), np.float64(2.0)).dtype == np.float64


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_integer_floor_division_and_modulo_follow_numpy(dtype):
    info = np.iinfo(dtype)
    a = np.array([7, -7, 7, -7, 0, 5, info.min, info.max, info.min], dtype)
    b = np.array([2, 2, -2, -2, 3, 0, -1, -1, 1], dtype)
    with np.errstate(all="ignore"):
        assert_same(tk.jit(lambda x, y: x // y)(a, b), a // b)
        assert_same(tk.jit(lambda x, y: x % y)(a, b), a % b)
        assert_same(tk.jit(lambda x, y: np.fmod(x, y))(a, b), np.fmod(a, b))


def test_float_floor_division_and_modulo_edge_cases():
    a = np.array(
        [7.5, -7.5, 7.5, -7.5, 0.0, -0.0, 1.0, -1.0, np.inf, 5.0, -5.0, 1e300, 0.3], np.float64
    )
    b = np.array(
        [2.0, 2.0, -2.0, -2.0, -3.0, 3.0, 0.0, 0.0, 2.0, np.inf, np.inf, 1e-300, 0.1], np.float64
    )
    with np.errstate(all="ignore"):
        for fn in (np.floor_divide, np.remainder, np.divmod):
            got = tk.jit(lambda x, y: fn(x, y))(a, b)
            expected = fn(a, b)
            for g, e in zip(
                got if fn is np.divmod else [got], expected if fn is np.divmod else [expected]
            ):
                assert_same(g, e)
                np.testing.assert_array_equal(np.signbit(g), np.signbit(e))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("exponent", [2.0, -1.0, 0.5])
def test_power_with_one_exponent_takes_numpys_fast_paths(dtype, exponent):
    """NumPy's float loops square, take the reciprocal or the square root for a single exponent
    of 2, -1 or 0.5 (np.power(-0.0, 0.5) is -0.0, np.power(-inf, 0.5) NaN; pow gives 0 and inf),
    whether the exponent is a constant or an argument."""
    x = np.array([-0.0, 0.0, -np.inf, np.inf, 3.0, -2.5, 7.8397546, 1e-3], dtype)
    e = dtype(exponent)
    with np.errstate(all="ignore"):
        want = np.power(x, e)
    for got in (tk.jit(lambda x: np.power(x, e))(x), tk.jit(np.power)(x, e)):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got[~np.isnan(got)]),
                                      np.signbit(want[~np.isnan(want)]))
