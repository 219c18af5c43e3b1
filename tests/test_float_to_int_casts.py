"""Float -> integer casts give NumPy's integers: truncation, then the low bits (636.7 as int8 is
124, -1.5 as uint8 is 255), and for NaN and values out of the intermediate's range the integer
x86's conversion gives (NumPy warns "invalid value encountered in cast" there). XLA's convert
saturates instead (127 for 636.7), which NumPy code never sees."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import toolkit as tk

BACKENDS = ["interpreter", "cpu", "gpu-simulated"]
TARGETS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
VALUES = [0.0, -0.0, 0.9, -0.9, 636.7, -200.2, 127.9, -128.9, 255.5, 256.0, -1.5, 65535.9,
          65536.0, 70000.0, -70000.0, 2147483647.0, 2147483648.0, -2147483648.5,
          -2147483649.0, 3e9, -3e9, 4294967295.0, 4294967296.5, 9.2e18, 9.3e18, -9.2e18,
          -9.3e18, 1.8e19, 1.9e19, np.nan, np.inf, -np.inf]


def _numpy_cast(values: np.ndarray, dtype) -> np.ndarray:
    """NumPy's cast one element at a time (its scalar loop; its vector loops agree with it but
    for uint32 out of [-2**31, 2**32), where they differ among themselves)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.array([np.array(v).astype(dtype) for v in values], dtype)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("source", [np.float16, np.float32, np.float64])
def test_astype_matches_numpy_for_every_integer_type(source, backend):
    values = np.array(VALUES, source)
    jitted = tk.jit(lambda x, dtype: x.astype(dtype), backend=backend, static_argnums=1)
    for dtype in TARGETS:
        expected = _numpy_cast(values, dtype)
        got = np.asarray(jitted(values, dtype))
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected, err_msg=f"{source.__name__} -> "
                                      f"{np.dtype(dtype).name} on {backend}")


def test_numpy_vector_loop_agrees_but_for_uint32_out_of_range():
    """The oracle above is NumPy's whole behaviour where NumPy has one: its contiguous loop
    gives the same integers for every target but uint32 (that one is NumPy's own muddle)."""
    values = np.array(VALUES * 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for dtype in TARGETS:
            whole, one_by_one = values.astype(dtype), _numpy_cast(values, dtype)
            if dtype is np.uint32:
                inside = (values >= -2.0 ** 31) & (values < 2.0 ** 32)
                whole, one_by_one = whole[inside], one_by_one[inside]
            np.testing.assert_array_equal(whole, one_by_one)


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_writes_and_out_cast_as_numpy_does(backend):
    def f(x):
        a = np.zeros(x.shape, np.int8)
        a[:] = x  # (an unsafe cast in NumPy's setitem)
        b = np.zeros(x.shape, np.uint16)
        np.copyto(b, x, casting="unsafe")
        c = np.empty(x.shape, np.int32)
        np.multiply(x, 1.0, out=c, casting="unsafe")
        return a, b, c, np.floor(x).astype(int)

    x = np.array([636.7, -200.2, -1.5, 3e9, 70000.5, np.nan])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = f(x)
    for e, g in zip(expected, tk.jit(f, backend=backend)(x)):
        assert e.dtype == g.dtype
        np.testing.assert_array_equal(g, e)
