"""np.convolve and np.correlate on traced arrays against NumPy: every mode, short filters
(summed as shifted copies: one loop kernel) and long ones (a reduction over gathered windows),
either operand the longer, integer, boolean and complex operands."""
import numpy as np
import pytest

import toolkit as tk
from toolkit.frontend.convolution import SHIFTED_TERMS

rng = np.random.default_rng(4)


@pytest.mark.parametrize("n, m", [(200, 1), (200, 5), (200, SHIFTED_TERMS),
                                  (200, SHIFTED_TERMS + 1), (7, 30), (64, 64)])
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("fn", [np.convolve, np.correlate])
def test_float_convolutions_are_numpys(fn, mode, n, m):
    a, v = rng.standard_normal(n), rng.standard_normal(m)
    got = tk.jit(lambda a, v: fn(a, v, mode), backend="cpu")(a, v)
    want = fn(a, v, mode)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("make", [
    lambda s: rng.integers(-9, 9, s).astype(np.int32),
    lambda s: rng.integers(0, 2, s).astype(bool),
    lambda s: (rng.standard_normal(s) + 1j * rng.standard_normal(s)).astype(np.complex64),
], ids=["int32", "bool", "complex64"])
def test_other_types_are_numpys(make):
    a, v = make(100), make(6)
    for mode in ("full", "same", "valid"):
        got = tk.jit(lambda a, v: np.convolve(a, v, mode), backend="cpu")(a, v)
        want = np.convolve(a, v, mode)
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=2e-6)


def test_a_short_filter_is_one_loop_kernel_of_contiguous_reads():
    a, v = rng.standard_normal(20000), np.ones(20) / 20
    f = tk.jit(lambda a, v: np.convolve(a, v, mode="valid"), backend="cpu")
    np.testing.assert_allclose(f(a, v), np.convolve(a, v, mode="valid"), rtol=1e-12, atol=1e-15)
    steps = f.compiled(a, v)._executable.steps
    assert [s.kind for s in steps] == ["kernel"]
    assert "gather" not in {i.opcode for i in steps[0].inst.attrs["calls"].instructions}


def test_sums_start_from_plus_zero_as_numpys_dot():
    for a, v in [(np.array([-0.0, -0.0]), np.array([1.0])),
                 (np.array([-0.0, -0.0, -0.0]), np.array([1.0, 1.0])),
                 (np.array([False, True]), np.array([-1.0, -2.0]))]:
        got = tk.jit(np.convolve, backend="cpu")(a, v)
        want = np.convolve(a, v)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
        np.testing.assert_array_equal(got, want)


def test_float16_adds_in_float32_and_rounds_once_as_numpys_half_dot():
    a = rng.standard_normal(300).astype(np.float16)
    v = rng.standard_normal(7).astype(np.float16)
    got = tk.jit(lambda a, v: np.convolve(a, v, "valid"), backend="cpu")(a, v)
    np.testing.assert_allclose(got.astype(np.float64),
                               np.convolve(a, v, "valid").astype(np.float64), rtol=2e-3)
    assert got.dtype == np.float16


def test_a_scalar_operand_is_a_one_element_filter():
    a = rng.standard_normal(10)
    np.testing.assert_array_equal(tk.jit(lambda a: np.convolve(a, 2.0))(a), np.convolve(a, 2.0))
