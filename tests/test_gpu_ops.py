"""Every op on the GPU executor against the interpreter, over dtypes, broadcasting and awkward
shapes (0-size dims, single rows, odd widths): on the simulated device everywhere, on a CUDA
device (marked ``gpu``) where there is one. The tolerances are the CPU backend's: the GPU runs
the same float32 math code, and libdevice's float64 functions are within 2 ulp."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import toolkit as tk
from toolkit.backends.gpu.device import cupy_or_reason

from backend_checks import assert_close, check_every_binary_ufunc, check_every_unary_ufunc
from helpers import sweep_examples

_why_no_gpu = cupy_or_reason()[1]
BACKENDS = ["gpu-simulated", pytest.param("gpu", marks=[pytest.mark.gpu, pytest.mark.skipif(
    _why_no_gpu is not None, reason=f"GPU execution: {_why_no_gpu}")])]


def both(backend, fn, *args):
    got = tk.jit(fn, backend=backend, on_recompile="ignore")(*args)
    want = tk.jit(fn, backend="interpreter", on_recompile="ignore")(*args)
    return tk.device_get(got), want


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=sweep_examples(8), deadline=None)
@given(data=st.data())
def test_every_unary_ufunc(backend, data):
    check_every_unary_ufunc(data, lambda fn, *a: both(backend, fn, *a))


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=sweep_examples(8), deadline=None)
@given(data=st.data())
def test_every_binary_ufunc(backend, data):
    check_every_binary_ufunc(data, lambda fn, *a: both(backend, fn, *a))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "shape",
    [
        (0,),
        (1,),
        (0, 5),
        (5, 0),
        (1, 1),
        (3, 17),
        (7, 33),
        (1, 1023),
        (2, 3, 65),
        (3, 9000),
        (20000, 3),
    ],
)
def test_awkward_shapes_for_every_reduction_mode(backend, shape):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    fns = [lambda a: np.tanh(a * 2 + 1),
           lambda a: np.exp(a - a.max(-1, keepdims=True)) if a.shape[-1] else a,
           lambda a: a.sum(axis=0),
           lambda a: (a.sum(axis=-1), (a * a).sum(axis=-1)),
           lambda a: a.sum(),
           lambda a: (a > 0).any(axis=-1)]
    for fn in fns:
        assert_close(*both(backend, fn, x), approx=True)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("ufunc", [np.sign, np.maximum, np.minimum], ids=lambda u: u.__name__)
def test_signed_zeros_and_nans_match_numpy(ufunc, backend):
    a = np.array([-0.0, 0.0, -0.0, 0.0, np.nan, 1.0, 2.0, -np.inf], np.float32)
    b = np.array([0.0, -0.0, -0.0, 0.0, 1.0, np.nan, 1.0, np.inf], np.float32)
    args = (a,) if ufunc.nin == 1 else (a, b)
    got, expected = np.asarray(tk.jit(ufunc, backend=backend)(*args)), ufunc(*args)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))


# float64 fmod on the GPU: LLVM's NVPTX back end expands frem as x - y*trunc(x/y), which an H200
# showed wrong (-4.8e-17 for fmod(1, 0.0004), -inf for remainder(1e308, 1e-308)).
FMOD_CASES = {
    "fmod int8 by a small float": (lambda x, y: np.fmod(x, y), np.int8(1), np.float64(0.0004)),
    "remainder of huge by tiny": (lambda x, y: np.remainder(x, y), 1e308, 1e-308),
    "divmod": (lambda x, y: np.divmod(x, y), np.array([1.0, -7.5, 1e300, 5e-324]),
               np.array([0.0004, 2.25, 3e-300, 3.0])),
    "float32 fmod": (lambda x, y: np.fmod(x, y), np.array([1.0, 1e30, -3.5], np.float32),
                     np.array([0.0004, 7e-30, 0.3], np.float32)),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", sorted(FMOD_CASES))
def test_float_remainders_are_exact(case, backend):
    fn, x, y = FMOD_CASES[case]
    got = tk.jit(fn, backend=backend)(np.asarray(x), np.asarray(y))
    want = fn(np.asarray(x), np.asarray(y))
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple)
                    else (want,)):
        np.testing.assert_array_equal(np.asarray(g), w)

