"""``np.ndarray(shape, dtype)`` as an empty buffer inside traced code, while ``np.ndarray``
stays NumPy's class for every other use, inside and outside the trace."""
import numpy
import numpy as np
import pytest

import toolkit as tk

BACKENDS = ["interpreter", "cpu"]
CONSTANT = np.arange(3.0)
NDARRAY = numpy.ndarray  # NumPy's class itself (inside the trace the module's numpy is rebound)


def fill(x):
    buf = np.ndarray((3,), np.float64)
    buf[0] = x[0]
    buf[1:] = x[1:] * 2
    counts = np.ndarray(shape=(2, 2), dtype=np.int32)
    counts[...] = 0
    counts[1, 0] = 7
    return buf + 1, counts


def class_uses(x):
    class Sub(np.ndarray):  # subclassing inside the trace subclasses NumPy's class
        pass

    checks = (isinstance(CONSTANT, np.ndarray), isinstance(3.0, np.ndarray),
              issubclass(Sub, np.ndarray), issubclass(np.ndarray, object),
              np.ndarray.__name__ == "ndarray", np.ndarray == NDARRAY, NDARRAY == np.ndarray,
              np.ndarray.shape is NDARRAY.shape, Sub.__mro__[1] is NDARRAY,
              isinstance(np.ndarray((2,), buffer=CONSTANT), np.ndarray))
    return x * sum(checks)


@pytest.mark.parametrize("backend", BACKENDS)
def test_ndarray_buffer_filled_with_traced_values_matches_numpy(backend):
    x = np.array([1.5, -2.0, 4.0])
    got, want = tk.jit(fill, backend=backend)(x), fill(x)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("backend", BACKENDS)
def test_ndarray_is_numpys_class_for_everything_else(backend):
    x = np.array([1.0, 2.0])
    np.testing.assert_array_equal(tk.jit(class_uses, backend=backend)(x), class_uses(x))
    assert class_uses(x)[0] == 9.0  # all but isinstance(3.0, ...)
    # the trace is over: the module's np is numpy again, np.ndarray its class
    assert np is numpy and np.ndarray is NDARRAY


def test_the_forms_with_a_buffer_stay_numpys():
    def viewed(x):
        v = np.ndarray((2,), np.float64, buffer=CONSTANT, offset=8)
        return x + v.sum()

    x = np.array([1.0])
    np.testing.assert_array_equal(tk.jit(viewed, backend="interpreter")(x), viewed(x))
