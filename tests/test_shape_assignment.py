"""``x.shape = (...)`` on a traced array: NumPy's in-place reshape, as a rebinding."""
import numpy as np
import pytest

import toolkit as tk
from toolkit.frontend.errors import UnsupportedNumpyError


def reshaped(x):
    y = x * 2
    y.shape = (3, -1)
    y[0, 1] = 5.0
    z = y + 0
    z.shape = 6
    return y, y.sum(axis=1), z, y.shape == (3, 2)


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_assigning_shape_reshapes_as_numpy(backend):
    x = np.arange(6.0)
    got, want = tk.jit(reshaped, backend=backend)(x), reshaped(x.copy())
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
        assert np.asarray(g).shape == np.asarray(w).shape


def test_a_size_that_differs_is_numpys_value_error():
    def bad(x):
        y = x + 1
        y.shape = (4,)
        return y

    with pytest.raises(ValueError, match="cannot reshape array of size 6 into shape"):
        bad(np.arange(6.0))
    with pytest.raises(ValueError, match=r"cannot reshape .*6 elements.* into shape \(4,\)"):
        tk.jit(bad)(np.arange(6.0))


@pytest.mark.parametrize("body, message", [
    ("x.shape = (2, 3)", "caller's array"),
    ("v = y[:4]\n    v.shape = (2, 2)\n    v[0, 0] = 9", "a view"),
    ("v = y[:4]\n    y.shape = (2, 3)\n    v[0] = 9", "live views"),
])
def test_reshapes_toolkit_cannot_follow_are_errors_not_lost_writes(body, message):
    namespace = {"np": np}
    exec(f"def f(x):\n    y = x + 0\n    {body}\n    return y", namespace)
    with pytest.raises(UnsupportedNumpyError, match=message):
        tk.jit(namespace["f"])(np.arange(6.0))
