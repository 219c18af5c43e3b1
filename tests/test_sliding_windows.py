"""np.lib.stride_tricks.sliding_window_view on traced arrays: NumPy's windows (every axis
form, repeated axes, empty windows), a read-only view that follows later writes to its
parent as NumPy's does, NumPy's errors, and a moving mean that is one fused kernel."""
import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

import toolkit as tk

from test_gpu_emulated import DEVICE  # noqa: F401  (registers gpu-emulated)

X = np.arange(24.0).reshape(4, 6)


@pytest.mark.parametrize("window, kw", [
    ((3,), {"axis": 1}), ((2, 3), {}), ((2, 2), {"axis": (1, 1)}), ((2,), {"axis": 0}),
    ((0,), {"axis": 1}), ((4, 6), {}), (3, {"axis": -1}), ((1, 2), {"axis": (1, 0)}),
])
@pytest.mark.parametrize("backend", ["cpu", "gpu-emulated"])
def test_windows_are_numpys(window, kw, backend):
    def f(x):
        return sliding_window_view(x, window, **kw)

    got = tk.device_get(tk.jit(f, backend=backend)(X))
    want = f(X)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_the_view_follows_later_writes_to_its_parent_and_cannot_be_written():
    def follow(x):
        v = sliding_window_view(x, 3)
        x[0] = 100.0
        return v.sum(axis=-1)

    a, b = np.arange(6.0), np.arange(6.0)
    np.testing.assert_array_equal(tk.jit(follow)(a), follow(b))
    np.testing.assert_array_equal(a, b)

    def write(x):
        v = sliding_window_view(x, 3)
        v[0, 0] = 1.0
        return v

    with pytest.raises(ValueError):  # NumPy's: "assignment destination is read-only"
        write(np.arange(6.0))
    with pytest.raises(Exception, match="read-only view"):
        tk.jit(write)(np.arange(6.0))


@pytest.mark.parametrize("call, message", [
    (lambda x: sliding_window_view(x, -1), "cannot contain negative values"),
    (lambda x: sliding_window_view(x, 3), "must provide window_shape for all dimensions"),
    (lambda x: sliding_window_view(x, (2, 2), axis=0), "Must provide matching length"),
    (lambda x: sliding_window_view(x, 7, axis=1), "cannot be larger than input array shape"),
])
def test_numpys_errors(call, message):
    with pytest.raises(ValueError, match=message):
        tk.jit(call)(X)
    with pytest.raises(ValueError, match=message):
        call(X)


def test_a_writable_view_is_refused_by_name():
    """NumPy's writeable=True view is run by NumPy on a copy, which toolkit refuses: the view
    would not see later writes to its parent."""
    from toolkit.frontend.errors import UnsupportedNumpyError

    with pytest.raises(UnsupportedNumpyError, match="returns a view of its argument"):
        tk.jit(lambda x: sliding_window_view(x, 2, axis=0, writeable=True))(X)


def test_a_moving_mean_reads_the_windows_in_place():
    """The windows are never materialised: the gather fuses into the sums that read it."""
    x = np.random.default_rng(0).standard_normal(2000)
    f = tk.jit(lambda x: sliding_window_view(x, 20).mean(axis=-1), backend="cpu")
    np.testing.assert_allclose(f(x), sliding_window_view(x, 20).mean(axis=-1), rtol=1e-12)
    steps = f.compiled(x)._executable.steps
    assert all(s.kind == "kernel" for s in steps) and len(steps) <= 2
    assert all(s.inst.shape.size < 1981 * 20 for s in steps)


@pytest.mark.parametrize("shape, window, kw", [((0,), 0, {}), ((0, 5), 2, {"axis": 1}),
                                               ((3, 0), 0, {"axis": 1})])
def test_windows_of_an_empty_array(shape, window, kw):
    x = np.zeros(shape)
    got = tk.jit(lambda x: sliding_window_view(x, window, **kw) + 0)(x)
    want = sliding_window_view(x, window, **kw) + 0
    assert got.shape == want.shape and got.dtype == want.dtype
