"""The reference interpreter follows XLA's semantics, checked on hand-written HLO."""
import numpy as np
import pytest

import toolkit as tk
from toolkit.backends.reference.interpreter import ArgumentError


def run1(body: str, *args, params: str = ""):
    text = f"HloModule m\nENTRY e {{\n{params}{body}\n}}\n"
    return tk.hlo.run(tk.hlo.parse(text), *args)


def binary(op: str, dtype: str, a, b, out: str | None = None):
    n = len(a)
    out = out or dtype
    body = (f"  a = {dtype}[{n}] parameter(0)\n  b = {dtype}[{n}] parameter(1)\n"
            f"  ROOT r = {out}[{n}] {op}(a, b)")
    np_dtype = {"s32": np.int32, "s64": np.int64, "f32": np.float32, "u32": np.uint32}[dtype]
    return run1(body, np.array(a, np_dtype), np.array(b, np_dtype))[0]


def test_integer_division_truncates_toward_zero():
    got = binary("divide", "s32", [7, -7, 7, -7, 5, -2**31], [2, 2, -2, -2, 0, -1])
    assert list(got) == [3, -3, -3, 3, -1, -2**31]  # x / 0 = -1, INT_MIN / -1 = INT_MIN


def test_integer_remainder_has_the_dividend_sign():
    got = binary("remainder", "s32", [7, -7, 7, -7, 5, -2**31], [2, 2, -2, -2, 0, -1])
    assert list(got) == [1, -1, 1, -1, 5, 0]  # x % 0 = x


def test_unsigned_division_by_zero_is_all_ones():
    assert list(binary("divide", "u32", [7, 9], [2, 0])) == [3, 2**32 - 1]


def test_float_remainder_is_fmod():
    got = binary("remainder", "f32", [7.5, -7.5, 1.0], [2.0, 2.0, 0.0])
    assert got[0] == 1.5 and got[1] == -1.5 and np.isnan(got[2])


def test_shifts_past_the_bit_width():
    a, b = [1, -8, -8, 5], [33, 1, 40, -1]
    assert list(binary("shift-left", "s32", a, b)) == [0, -16, 0, 0]
    assert list(binary("shift-right-arithmetic", "s32", a, b)) == [0, -4, -1, 0]
    assert list(binary("shift-right-logical", "s32", a, b)) == [0, 2**31 - 4, 0, 0]


def test_integer_overflow_wraps():
    assert list(binary("add", "s32", [2**31 - 1], [1])) == [-2**31]
    assert list(binary("multiply", "s64", [2**62], [4])) == [0]


def test_integer_power():
    got = binary("power", "s32", [2, 3, 2, 1, -1, -1, 0, 7], [10, 3, -1, -5, -3, -4, 0, 20])
    assert list(got) == [1024, 27, 0, 1, -1, 1, 1, np.int32(np.int64(7) ** 20 % 2**32 - 2**32)]


def test_compare_with_nan():
    nan = np.nan
    a, b = [nan, 1.0, nan], [nan, nan, 1.0]
    for direction, expected in [
        ("EQ", [0, 0, 0]),
        ("NE", [1, 1, 1]),
        ("LT", [0, 0, 0]),
        ("GE", [0, 0, 0]),
    ]:
        body = ("  a = f32[3] parameter(0)\n  b = f32[3] parameter(1)\n"
                f"  ROOT r = pred[3] compare(a, b), direction={direction}")
        (got,) = run1(body, np.array(a, np.float32), np.array(b, np.float32))
        assert list(got) == [bool(e) for e in expected], direction


def test_maximum_and_minimum_propagate_nan():
    assert np.isnan(binary("maximum", "f32", [np.nan, 1.0], [1.0, np.nan])).all()
    assert np.isnan(binary("minimum", "f32", [np.nan, 1.0], [1.0, np.nan])).all()


def test_float_to_int_conversion_saturates_and_maps_nan_to_zero():
    body = "  a = f32[6] parameter(0)\n  ROOT r = s32[6] convert(a)"
    (got,) = run1(body, np.array([1e10, -1e10, np.nan, np.inf, -2.7, 2.7], np.float32))
    assert list(got) == [2**31 - 1, -2**31, 0, 2**31 - 1, -2, 2]


def test_sign_keeps_negative_zero_and_nan():
    (got,) = run1("  a = f32[4] parameter(0)\n  ROOT r = f32[4] sign(a)",
                  np.array([-0.0, 0.0, np.nan, -3.0], np.float32))
    assert np.signbit(got[0]) and not np.signbit(got[1]) and np.isnan(got[2]) and got[3] == -1


def test_round_nearest_afz_and_even():
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.49999997], np.float32)
    (afz,) = run1("  a = f32[6] parameter(0)\n  ROOT r = f32[6] round-nearest-afz(a)", x)
    (even,) = run1("  a = f32[6] parameter(0)\n  ROOT r = f32[6] round-nearest-even(a)", x)
    assert list(afz) == [1, 2, 3, -1, -3, 0]
    assert list(even) == [0, 2, 2, -0.0, -2, 0]


def test_pad_with_negative_and_interior_padding():
    body = ("  a = s32[4] parameter(0)\n  c = s32[] constant(9)\n"
            "  ROOT r = s32[6] pad(a, c), padding=-1_0_1")
    (got,) = run1(body, np.array([1, 2, 3, 4], np.int32))
    assert list(got) == [9, 2, 9, 3, 9, 4]


def test_general_reducer_computation():
    # a reducer that is not a single ufunc: sum of squares of the running accumulator plus x
    text = """HloModule m
    r {
      acc = f32[] parameter(0)
      x = f32[] parameter(1)
      sq = f32[] multiply(x, x)
      ROOT s = f32[] add(acc, sq)
    }
    ENTRY e {
      p = f32[2,3] parameter(0)
      z = f32[] constant(0)
      ROOT out = f32[2] reduce(p, z), dimensions={1}, to_apply=r
    }"""
    (got,) = tk.hlo.run(tk.hlo.parse(text), np.arange(6, dtype=np.float32).reshape(2, 3))
    assert list(got) == [5, 50]


def test_variadic_reduce_argmax():
    text = (TESTS_DATA / "jax" / "argmax.hlo").read_text()
    module = tk.hlo.parse(text)
    x = np.array([[1, 5, 5, 0], [3, 2, 1, 9]], np.float32).repeat(1, 0)
    x = np.resize(x, (6, 9))
    am, _ = tk.hlo.run(module, x)
    np.testing.assert_array_equal(am, np.argmax(x, axis=1))


def test_dot_general_batch_and_contracting():
    body = ("  a = f32[2,3,4] parameter(0)\n  b = f32[2,5,4] parameter(1)\n"
            "  ROOT r = f32[2,3,5] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, "
            "rhs_batch_dims={0}, rhs_contracting_dims={2}")
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    b = np.arange(40, dtype=np.float32).reshape(2, 5, 4)
    (got,) = run1(body, a, b)
    np.testing.assert_array_equal(got, np.einsum("bik,bjk->bij", a, b))


def test_arguments_are_checked():
    module = tk.hlo.parse("HloModule m\nENTRY e {\n  ROOT a = f32[2] parameter(0)\n}")
    with pytest.raises(ArgumentError, match="must be f32\\[2\\], got float64\\[2\\]"):
        tk.hlo.run(module, np.ones(2))
    with pytest.raises(ArgumentError, match="takes 1 argument"):
        tk.hlo.run(module)


import pathlib  # noqa: E402

TESTS_DATA = pathlib.Path(__file__).parent / "data"
