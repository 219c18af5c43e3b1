"""A ``DeviceArray`` is an array: NumPy's functions, ufuncs, operators, methods and indexing
run on its device as cached jitted calls (toolkit/jitting/device_arrays.py), results stay on
the device, and nothing is copied to the host but what is asked for. What cannot be traced
(a boolean mask) runs on host copies with a warning. DLPack hands the memory to others."""
import warnings

import numpy as np
import pytest

import toolkit as tk
from toolkit.backends.gpu import DeviceArray
from toolkit.backends.gpu.device import cupy_or_reason
from toolkit.jitting import device_arrays

from conftest import REAL_GPU
from simulated_gpu import SimulatedDevice

_why_no_gpu = cupy_or_reason()[1]


@pytest.fixture(params=["simulated", pytest.param("gpu", marks=pytest.mark.gpu)])
def device(request):
    if request.param == "gpu":
        if _why_no_gpu:
            pytest.skip(f"GPU execution: {_why_no_gpu}")
        from toolkit.backends.gpu.device import default_device
        return default_device()
    return SimulatedDevice()


X = np.arange(-5, 7, dtype=np.float32).reshape(3, 4) / np.float32(3)
CASES = {
    "T": lambda a: a.T,
    "reshape(4, 3)": lambda a: a.reshape(4, 3),
    "reshape((2, 6))": lambda a: a.reshape((2, 6)),
    "reshape(-1)": lambda a: a.reshape(-1),
    "transpose(1, 0)": lambda a: a.transpose(1, 0),
    "astype(float64)": lambda a: a.astype(np.float64),
    "astype(int32)": lambda a: a.astype(np.int32),
    "sum(axis=0)": lambda a: a.sum(axis=0),
    "mean()": lambda a: a.mean(),
    "max(axis=1, keepdims)": lambda a: a.max(axis=1, keepdims=True),
    "std(ddof=1)": lambda a: a.std(ddof=1),
    "argmax()": lambda a: a.argmax(),
    "cumsum(axis=1)": lambda a: a.cumsum(axis=1),
    "ravel()": lambda a: a.ravel(),
    "clip(-1, 1)": lambda a: a.clip(-1, 1),
    "np.exp": lambda a: np.exp(a),
    "np.add.reduce": lambda a: np.add.reduce(a, axis=1),
    "a + 1": lambda a: a + 1,
    "2.5 * a": lambda a: 2.5 * a,
    "a / a": lambda a: a / (a + 10),
    "-a": lambda a: -a,
    "abs(a)": lambda a: abs(a),
    "a > 0": lambda a: a > 0,
    "a @ a.T": lambda a: a @ a.T,
    "np.concatenate": lambda a: np.concatenate([a, a * 2], axis=1),
    "np.where": lambda a: np.where(a > 0, a, 0.0),
    "a[1:, ::2]": lambda a: a[1:, ::2],
    "a[None, 0]": lambda a: a[None, 0],
    "a[..., -1]": lambda a: a[..., -1],
    "a[[2, 0]]": lambda a: a[[2, 0]],
    "a[np.array([1, 1])]": lambda a: a[np.array([1, 1])],
    "a + host array": lambda a: a + np.ones(4, np.float32),
    "host array * a": lambda a: np.ones(4, np.float32) * a,
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_numpy_on_a_device_array_runs_on_the_device(case, device):
    a = tk.device_put(X, device)
    got = CASES[case](a)
    want = CASES[case](X.copy())
    assert isinstance(got, DeviceArray), type(got)
    host = np.asarray(got)
    assert host.dtype == want.dtype and host.shape == want.shape
    np.testing.assert_allclose(host, want, rtol=1e-6, atol=1e-6)


def test_nothing_is_copied_to_the_host_but_what_is_asked_for():
    device = SimulatedDevice()
    a = tk.device_put(X, device)
    b = (np.tanh(a) * 2).sum(axis=1)  # warm: compiled, graphs recorded and checked
    before = len(device.downloads)
    for _ in range(3):
        b = (np.tanh(a) * 2).sum(axis=1)
    assert len(device.downloads) == before
    np.testing.assert_allclose(np.asarray(b), (np.tanh(X) * 2).sum(axis=1), rtol=1e-6)
    assert len(device.downloads) == before + 1


def test_item_and_scalars_read_one_element():
    device = SimulatedDevice()
    a = tk.device_put(X, device)
    before = len(device.downloads)
    value = a.item(1, 2)
    assert value == X[1, 2] and isinstance(value, float)
    assert float(a.sum()) == pytest.approx(float(X.sum()), rel=1e-6)
    assert device.downloads[before:] == [4, 4]  # one float32 each
    with pytest.raises(ValueError, match="size 1"):
        a.item()


def test_data_dependent_sizes_run_on_the_device_through_a_graph_break():
    """A boolean mask or np.unique: only the count crosses to the host (a graph break), the
    values are computed and stay on the device."""
    import warnings

    a = tk.device_put(X, SimulatedDevice())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no host-copy warning
        got = a[a > 0]
        unique = np.unique(a)
    assert isinstance(got, DeviceArray) and isinstance(unique, DeviceArray)
    np.testing.assert_array_equal(np.asarray(got), X[X > 0])
    np.testing.assert_array_equal(np.asarray(unique), np.unique(X))


def test_what_cannot_be_traced_runs_on_host_copies_with_a_warning():
    a = tk.device_put(X, SimulatedDevice())
    device_arrays._warned.discard("frompyfunc")
    with pytest.warns(RuntimeWarning, match="on a device array runs on host copies"):
        got = np.frompyfunc(abs, 1, 1)(a)
    np.testing.assert_array_equal(got.astype(np.float32), np.abs(X))


def test_a_device_array_inside_a_traced_function_is_a_constant():
    a = tk.device_put(X, SimulatedDevice())
    f = tk.jit(lambda x: x * a + np.sum(a), backend="interpreter")
    np.testing.assert_allclose(f(np.ones((3, 4), np.float32)), X + X.sum(), rtol=1e-6)


def test_the_cache_of_jitted_calls_is_bounded(monkeypatch):
    monkeypatch.setattr(device_arrays, "CACHE_LIMIT", 8)
    a = tk.device_put(X, SimulatedDevice())
    for k in range(1, 20):
        np.asarray(a.reshape(12 // (k % 3 + 1), -1) * 1.0)
        np.asarray(a.sum(axis=k % 2))
        np.asarray(np.roll(a, k))
    assert len(device_arrays._calls) <= 8


def test_ufunc_out_into_a_device_array_is_refused():
    a = tk.device_put(X, SimulatedDevice())
    with pytest.raises(TypeError):
        np.add(a, 1, out=a)


def test_dlpack_shares_the_memory(device):
    a = tk.device_put(X, device)
    if isinstance(device, SimulatedDevice):
        np.testing.assert_array_equal(np.from_dlpack(a), X)
        return
    import cupy

    c = cupy.from_dlpack(a)
    np.testing.assert_array_equal(cupy.asnumpy(c), X)
    assert c.data.ptr == a.buffer.data.ptr
    try:
        import jax.dlpack
    except ImportError:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        j = jax.dlpack.from_dlpack(a)
    np.testing.assert_array_equal(np.asarray(j), X)


@pytest.mark.skipif(REAL_GPU, reason="the simulated device's counters")
def test_operators_between_two_device_arrays_copy_nothing():
    device = SimulatedDevice()
    a, b = tk.device_put(X, device), tk.device_put(X * 2, device)
    (a - b) * b
    before = len(device.uploads)
    c = (a - b) * b
    assert len(device.uploads) == before and isinstance(c, DeviceArray)


def test_shape_and_type_questions_run_nothing():
    device = SimulatedDevice()
    a = tk.device_put(X, device)
    before = len(device_arrays._calls), len(device.launches), len(device.downloads)
    assert (np.shape(a), np.size(a), np.size(a, 1), np.ndim(a)) == ((3, 4), 12, 4, 2)
    assert np.result_type(a, 1.0) == np.float32 and not np.iscomplexobj(a)
    assert (len(device_arrays._calls), len(device.launches), len(device.downloads)) == before
