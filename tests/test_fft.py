"""np.fft on traced arrays: NumPy's pocketfft as a library call, NumPy's results and dtypes."""
import numpy as np
import pytest

import toolkit as tk
import toolkit.numpy as tnp
from helpers import assert_same
from test_gpu_emulated import DEVICE  # noqa: F401  (registers the gpu-emulated backend)
from toolkit.frontend.ad_engine import NotDifferentiableError

RNG = np.random.default_rng(0)
X = RNG.standard_normal((6, 8))

CASES = {
    "fft": lambda a: np.fft.fft(a),
    "fft_n_axis": lambda a: np.fft.fft(a, n=5, axis=0),
    "ifft_ortho": lambda a: np.fft.ifft(a, norm="ortho"),
    "rfft": lambda a: np.fft.rfft(a),
    "rfft_padded": lambda a: np.fft.rfft(a, n=11),
    "irfft_roundtrip": lambda a: np.fft.irfft(np.fft.rfft(a)),
    "irfft_n_forward": lambda a: np.fft.irfft(np.fft.rfft(a), n=8, norm="forward"),
    "fft2": lambda a: np.fft.fft2(a),
    "rfft2_cropped": lambda a: np.fft.rfft2(a, s=(4, 6)),
    "irfft2": lambda a: np.fft.irfft2(np.fft.rfft2(a)),
    "fftn": lambda a: np.fft.fftn(a),
    "ifftn_axes": lambda a: np.fft.ifftn(a, axes=(0,)),
    "hfft": lambda a: np.fft.hfft(a[0]),
    "ihfft": lambda a: np.fft.ihfft(a),
    "fftshift": lambda a: np.fft.fftshift(np.fft.fft(a)),
    "ifftshift_axis": lambda a: np.fft.ifftshift(a, axes=1),
    "power_spectrum": lambda a: np.abs(np.fft.rfft(a - a.mean(-1, keepdims=True))) ** 2,
    "convolution": lambda a: np.fft.irfft(np.fft.rfft(a, n=16) * np.fft.rfft(a[::-1], n=16), n=16),
}


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32])
@pytest.mark.parametrize("name", sorted(CASES))
def test_fft_matches_numpy(name, dtype):
    a = (X * 10).astype(dtype) if dtype == np.int32 else X.astype(dtype)
    got, want = tk.jit(CASES[name])(a), CASES[name](a)
    assert_same(got, want, approx=True, rtol=2e-5 if dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("backend", ["cpu", "gpu-emulated"])
def test_fft_on_the_compiled_backends(backend):
    f = tk.jit(CASES["convolution"], backend=backend)
    got = tk.device_get(f(X)) if backend == "gpu-emulated" else f(X)
    np.testing.assert_allclose(got, CASES["convolution"](X), rtol=1e-12, atol=1e-12)


def test_complex_input_frequencies_and_namespace():
    z = X + 1j * RNG.standard_normal(X.shape)
    np.testing.assert_allclose(tk.jit(lambda v: np.fft.ifft(np.fft.fft(v)))(z), z, atol=1e-14)
    np.testing.assert_allclose(tk.jit(lambda d: np.fft.fftfreq(8, d))(0.5), np.fft.fftfreq(8, 0.5))
    np.testing.assert_allclose(
        tk.jit(lambda d: tnp.fft.rfftfreq(9, d))(0.25), np.fft.rfftfreq(9, 0.25)
    )
    np.testing.assert_allclose(tk.jit(lambda v: tnp.fft.rfft(v))(X), np.fft.rfft(X), rtol=1e-12)
    np.testing.assert_allclose(tk.vmap(np.fft.fft)(X), np.fft.fft(X), rtol=1e-12)


def test_fft_errors_are_numpys():
    with pytest.raises(ValueError, match="Invalid norm"):
        tk.jit(lambda v: np.fft.fft(v, norm="bad"))(X)
    with pytest.raises(ValueError, match="Invalid number of FFT data points"):
        tk.jit(lambda v: np.fft.fft(v, n=0))(X)
    with pytest.raises(NotDifferentiableError, match="complex|np.fft"):
        tk.grad(lambda v: np.sum(np.abs(np.fft.rfft(v))))(X)
