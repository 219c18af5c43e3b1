"""np.pad's copying modes on traced arrays ('edge', 'wrap', 'reflect', 'symmetric': a gather
of the array at NumPy's own source indices per axis) and 'constant'/'empty', against NumPy:
pads wider than the array, one axis or all, every dtype kind, NumPy's errors, and a stencil
that pads by edge values in one fused kernel."""
import numpy as np
import pytest

import toolkit as tk

from test_gpu_emulated import DEVICE  # noqa: F401  (registers gpu-emulated)

X = np.arange(12.0).reshape(3, 4)


@pytest.mark.parametrize("mode", ["edge", "wrap", "reflect", "symmetric", "constant"])
@pytest.mark.parametrize("width", [1, ((2, 0), (1, 3)), ((5, 7), (9, 2)), ((0, 0), (4, 0))],
                         ids=["1", "uneven", "wider than the array", "one axis"])
@pytest.mark.parametrize("backend", ["cpu", "gpu-emulated"])
def test_pad_modes_are_numpys(mode, width, backend):
    got = tk.device_get(tk.jit(lambda x: np.pad(x, width, mode=mode), backend=backend)(X))
    want = np.pad(X, width, mode=mode)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("x", [np.array([True, False, True]), np.arange(5, dtype=np.int8),
                               np.array([1 + 2j, -3j]), np.array([-0.0, np.nan, np.inf])],
                         ids=["bool", "int8", "complex", "specials"])
def test_every_kind_of_element_is_copied_exactly(x):
    for mode in ("edge", "wrap", "reflect", "symmetric"):
        got = tk.jit(lambda x: np.pad(x, (2, 3), mode=mode), backend="cpu")(x)
        want = np.pad(x, (2, 3), mode=mode)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(np.asarray(got).view(np.uint8), want.view(np.uint8))


def test_numpys_errors_and_what_is_not_compiled():
    with pytest.raises(ValueError, match="can't extend empty axis 0"):
        tk.jit(lambda x: np.pad(x, 1, mode="edge"))(np.zeros((0, 3)))
    with pytest.raises(Exception, match="reflect_type=odd"):
        tk.jit(lambda x: np.pad(x, 1, mode="reflect", reflect_type="odd"), fullgraph=True)(X)
    with pytest.raises(Exception, match="'linear_ramp' is not supported"):
        tk.jit(lambda x: np.pad(x, 1, mode="linear_ramp"), fullgraph=True)(X)
    # (not compiled: run by NumPy at a graph break, with NumPy's result)
    f = tk.jit(lambda x: np.pad(x, 1, mode="linear_ramp") * 2.0)
    np.testing.assert_array_equal(f(X), np.pad(X, 1, mode="linear_ramp") * 2.0)


def test_a_stencil_over_edge_padding_is_one_kernel():
    def blur(img):
        p = np.pad(img, 1, mode="edge")
        return (p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:] + p[1:-1, 1:-1]) / 5.0

    img = np.random.default_rng(0).random((64, 48))
    f = tk.jit(blur, backend="cpu")
    np.testing.assert_array_equal(f(img), blur(img))
    assert [s.kind for s in f.compiled(img)._executable.steps] == ["kernel"]


@pytest.mark.parametrize("width", [1.5, np.uint8(1), True])
def test_a_pad_width_that_is_not_a_signed_integer_is_numpys_type_error(width):
    for mode in ("edge", "constant"):
        with pytest.raises(TypeError, match="must be of integral type"):
            np.pad(X, width, mode=mode)
        with pytest.raises(TypeError, match="must be of integral type"):
            tk.jit(lambda x: np.pad(x, width, mode=mode))(X)
