"""The operator fast paths for two traced arrays of one type (frontend/operator_fast_paths:
``same_type_arrays`` and ``same_type_loop``, broadcasting included) and for a traced array and
a Python number its type holds (``exact_python_number``) make what the general ufunc path makes,
instruction for instruction, and NumPy's results; every other pairing still goes the general way."""
import itertools
import re

import numpy as np
import pytest

import toolkit as tk
from toolkit.frontend import operator_fast_paths as fast_paths
from toolkit.frontend.errors import ShapeMismatchError


def _hlo(fn, *args) -> str:
    return tk.jit(fn).lower(*args).as_text(metadata=False)


OPERATORS = [("add", lambda a, b: a + b, lambda a, b: np.add(a, b)),
             ("subtract", lambda a, b: a - b, lambda a, b: np.subtract(a, b)),
             ("multiply", lambda a, b: a * b, lambda a, b: np.multiply(a, b)),
             ("divide", lambda a, b: a / b, lambda a, b: np.true_divide(a, b))]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name, operator, ufunc", OPERATORS)
def test_an_operator_traces_as_its_ufunc_does(dtype, name, operator, ufunc):
    a = np.array([0.0, -0.0, np.inf, np.nan, 1.5, -3.0], dtype)
    b = np.array([-0.0, 0.0, np.inf, 2.0, 0.0, -0.0], dtype)
    # np.add(a, b) goes through __array_ufunc__, the general path
    text = _hlo(operator, a, b)
    assert text == _hlo(ufunc, a, b) and f" {name}(" in text
    with np.errstate(all="ignore"):
        want = operator(a, b)
    got = tk.jit(operator)(a, b)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))  # -0.0 kept


def _answers(monkeypatch, predicate: str) -> list:
    """The answers the fast paths' ``predicate`` gives from now on, in order."""
    taken = []
    real = getattr(fast_paths, predicate)

    def spy(*args):
        answer = real(*args)
        taken.append(answer)
        return answer

    monkeypatch.setattr(fast_paths, predicate, spy)
    return taken


def test_the_fast_path_is_asked_only_for_one_type_and_a_strong_operand(monkeypatch):
    taken = _answers(monkeypatch, "same_type_arrays")
    f32, f64 = np.ones(4, np.float32), np.ones(4, np.float64)
    cases = [
        ((f32, f32), True), ((f64, f64), True),
        ((f32, f64), False),  # promotes to float64
        ((np.ones(3), np.ones((2, 3))), True),  # broadcasts as NumPy does
        # one type: same_type_loop then refuses float16 (rounded through float32) and complex
        # numbers (below)
        ((np.ones(4, np.float16),) * 2, True),
        ((np.ones(4, np.int64),) * 2, True),  # integers: int64 * int64 is computed in int64
        ((np.ones(4, np.complex128),) * 2, True),
    ]
    for (a, b), fast in cases:
        taken.clear()
        got = tk.jit(lambda x, y: x * y)(a, b)
        assert taken == [fast], (a.dtype, b.dtype, a.shape, b.shape)
        want = a * b
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    taken.clear()
    got = tk.jit(lambda x, y: x * y)(np.float64(2.0), 3.0)  # a Python float argument: weak
    assert taken == [True] and got == 6.0 and type(got) is np.float64
    taken.clear()
    got = tk.jit(lambda x, y: x * y)(2.0, 3.0)  # two Python floats: Python's arithmetic
    assert taken == [False] and got == 6.0 and type(got) is float


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name, operator, ufunc", OPERATORS)
def test_broadcasting_and_weak_operands_trace_as_the_ufunc_does(dtype, name, operator, ufunc):
    row = np.array([0.0, -0.0, np.inf, np.nan, 1.5, -3.0], dtype)
    grid = np.arange(12, dtype=dtype).reshape(2, 6) - 5
    for a, b in ((row, grid), (grid, row), (grid, dtype(-0.0)), (dtype(2.5), row),
                 (grid[:, :1], row), (row, 3.0), (-0.0, grid)):
        text = _hlo(operator, a, b)
        assert text == _hlo(ufunc, a, b), (a, b)
        with np.errstate(all="ignore"):
            want = operator(a, b)
            got = tk.jit(operator)(a, b)
        assert type(got) is type(want) and got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_shapes_that_do_not_broadcast_raise_the_general_paths_error():
    with pytest.raises(ShapeMismatchError) as fast:
        tk.jit(lambda x, y: x + y)(np.ones(3), np.ones(4))
    with pytest.raises(ShapeMismatchError) as general:
        tk.jit(lambda x, y: np.add(x, y))(np.ones(3), np.ones(4))
    # (each names its own line)
    assert re.sub(r":\d+\)", ")", str(fast.value)) == re.sub(r":\d+\)", ")", str(general.value))
    message = str(fast.value)
    assert "could not be broadcast" in message and "test_trace_fast_paths.py" in message


@pytest.mark.parametrize("dtype, shape", list(itertools.product([np.float32, np.float64],
                                                                [(), (0,), (3, 2)])))
def test_zero_size_and_zero_rank_arrays_keep_numpys_types(dtype, shape):
    a = np.full(shape, 2.5, dtype)
    got = tk.jit(lambda x: (x + x, x / x, x * x - x))(a)
    want = (a + a, a / a, a * a - a)
    for g, w in zip(got, want):
        assert type(g) is type(w) and g.dtype == w.dtype and np.shape(g) == np.shape(w)
        np.testing.assert_array_equal(g, w)


def test_an_error_handling_state_still_raises_as_numpy_does():
    a, b = np.ones(3), np.zeros(3)
    with np.errstate(divide="raise"):
        with pytest.raises(FloatingPointError):
            tk.jit(lambda x, y: x / y)(a, b)


# ---- a traced float array and a Python number (``exact_python_number``) -----------------------
NUMBERS = [2.5, -0.0, 0.0, np.inf, -np.inf, np.nan, 0.1, 1e300, 3, -7, 1 << 24]


@pytest.mark.parametrize("shape", [(), (0,), (3, 2)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name, operator, ufunc", OPERATORS)
def test_an_operator_with_a_python_number_traces_as_its_ufunc_does(dtype, shape, name, operator,
                                                                   ufunc):
    a = np.full(shape, -1.25, dtype) if shape != (3, 2) else \
        np.array([[0.0, -0.0], [np.inf, np.nan], [1.5, -3.0]], dtype)
    for number in NUMBERS:
        for left, right in ((lambda x: operator(x, number), lambda x: ufunc(x, number)),
                            (lambda x: operator(number, x), lambda x: ufunc(number, x))):
            text = _hlo(left, a)
            assert text == _hlo(right, a), (number, text)
            with np.errstate(all="ignore"):
                want = left(a)
                got = tk.jit(left)(a)
            assert type(got) is type(want) and got.dtype == want.dtype, (number, got, want)
            np.testing.assert_array_equal(got, want)
            np.testing.assert_array_equal(np.signbit(got), np.signbit(want))  # -0.0 kept


def test_the_python_number_path_is_taken_only_for_exact_numbers_and_strong_arrays(monkeypatch):
    taken = _answers(monkeypatch, "exact_python_number")
    f32, f64 = np.ones(4, np.float32), np.ones(4, np.float64)
    cases = [
        ((f32, 0.5), True), ((f64, 3), True), ((f64, 1 << 24), True),
        ((f64, (1 << 24) + 1), False),  # an int float32 would round: the general path
        ((f64, True), False),  # a bool
        ((np.ones(4, np.float16), 0.5), False),  # float16 rounds through float32
        ((np.ones(4, np.int32), 0.5), False),  # promotes
        ((np.ones(4, np.int32), 7), True),  # an int its type holds: computed in int32
        ((np.ones(4, np.int8), -128), True),
        ((np.ones(4, np.bool_), 1), False),  # (NumPy makes bool * 1 an int64)
        ((np.ones(4, np.complex64), 0.5), False),
    ]
    for (a, number), fast in cases:
        taken.clear()
        got = tk.jit(lambda x: x * number)(a)
        assert taken == [fast], (a.dtype, number)
        want = a * number
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_a_python_number_still_raises_under_numpys_error_handling():
    with np.errstate(divide="raise"):
        with pytest.raises(FloatingPointError):
            tk.jit(lambda x: x / 0.0)(np.ones(3))


# ---- two traced arrays of one type, every operator (``same_type_loop``) -----------------------
ALL_OPERATORS = [
    ("add", lambda a, b: a + b, np.add), ("subtract", lambda a, b: a - b, np.subtract),
    ("multiply", lambda a, b: a * b, np.multiply), ("divide", lambda a, b: a / b, np.true_divide),
    ("floor_divide", lambda a, b: a // b, np.floor_divide),
    ("remainder", lambda a, b: a % b, np.remainder),
    ("and", lambda a, b: a & b, np.bitwise_and), ("or", lambda a, b: a | b, np.bitwise_or),
    ("xor", lambda a, b: a ^ b, np.bitwise_xor), ("left_shift", lambda a, b: a << b, np.left_shift),
    ("right_shift", lambda a, b: a >> b, np.right_shift),
    ("less", lambda a, b: a < b, np.less), ("less_equal", lambda a, b: a <= b, np.less_equal),
    ("greater", lambda a, b: a > b, np.greater),
    ("greater_equal", lambda a, b: a >= b, np.greater_equal),
    ("equal", lambda a, b: a == b, np.equal), ("not_equal", lambda a, b: a != b, np.not_equal),
    ("power", lambda a, b: a ** b, np.power),
]
# (complex numbers take the general path, with lowerings of their own: test_complex*.py)
ALL_DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
              np.uint64, np.float16, np.float32, np.float64]


def _operands(dtype):
    if dtype is np.bool_:
        return np.array([True, False, True, False]), np.array([True, True, False, False])
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        a = np.array([info.max, info.min, 7, 0, 5, 3], dtype)
        return a, np.array([3, 2, 0, 7, 1, 5], dtype)  # (0: NumPy's integer division by zero)
    return (np.array([0.0, -0.0, np.inf, np.nan, 1.5, -3.0], dtype),
            np.array([-0.0, 0.0, np.inf, 2.0, 0.0, -0.5], dtype))


def _result(fn, *args):
    try:
        with np.errstate(all="ignore"):
            return fn(*args)
    except Exception as error:  # noqa: BLE001 - the error is the result compared
        return type(error)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("name, operator, ufunc", ALL_OPERATORS,
                         ids=[name for name, _, _ in ALL_OPERATORS])
def test_every_operator_on_one_type_traces_as_its_ufunc_does(monkeypatch, dtype, name, operator,
                                                             ufunc):
    a, b = _operands(dtype)
    for x, y in ((a, b), (a[0], b), (a[:1], b[:, None][:2])):
        want = _result(operator, x, y)
        got = _result(tk.jit(operator), x, y)
        if isinstance(want, type):  # NumPy's error (bool - bool, float & float) is toolkit's
            assert got is want or isinstance(got, type) and issubclass(got, want), (got, want)
            continue
        assert type(got) is type(want) and got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
        if want.dtype.kind == "f":
            np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
        # np.add(a, b) goes through __array_ufunc__, the general path, as do operators with
        # the fast paths turned off
        assert _hlo(operator, x, y) == _hlo(lambda a, b: ufunc(a, b), x, y)
        assert _hlo(operator, x, y) == _general_hlo(monkeypatch, operator, x, y)


def test_the_same_type_path_is_taken_only_where_numpy_computes_in_that_type(monkeypatch):
    taken = _answers(monkeypatch, "same_type_loop")
    i32 = np.array([5, 3], np.int32)
    cases = [
        (lambda x, y: x + y, i32, np.dtype(np.int32)),
        (lambda x, y: x < y, i32, np.dtype(np.bool_)),
        (lambda x, y: x / y, i32, None),  # NumPy divides integers in float64
        (lambda x, y: x ** y, i32, None),  # integer powers check their exponents
        (lambda x, y: x + y, np.ones(2, np.float16), None),  # float16 computes in float32
        (lambda x, y: x + y, np.ones(2, np.complex64), None),
        (lambda x, y: x == y, np.ones(2, np.float64), np.dtype(np.bool_)),
    ]
    for fn, a, out in cases:
        taken.clear()
        tk.jit(fn)(a, a)
        assert taken == [out], (a.dtype, out)


PYTHON_INTS = [0, 3, -1, 127, -128, 255, 2 ** 31 - 1, -2 ** 31, 2 ** 40, -2 ** 63, 2 ** 64 - 1]


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8, np.uint64,
                                   np.float32, np.float64])
@pytest.mark.parametrize("name, operator, ufunc", ALL_OPERATORS,
                         ids=[name for name, _, _ in ALL_OPERATORS])
def test_every_operator_with_a_python_int_traces_as_the_general_path_does(
        monkeypatch, dtype, name, operator, ufunc):
    # (an int the integer type holds takes the fast path; one beyond it is NumPy's
    # OverflowError, or for a comparison NumPy 2's exact answer, from the general path)
    a = _operands(dtype)[0]
    for number in PYTHON_INTS + ([0.5, -0.0, np.nan] if np.dtype(dtype).kind == "f" else []):
        for fn in (lambda x: operator(x, number), lambda x: operator(number, x)):
            want = _result(fn, a)
            got = _result(tk.jit(fn), a)
            if isinstance(want, type):
                assert isinstance(got, type) and issubclass(got, want), (number, got, want)
                continue
            assert type(got) is type(want) and got.dtype == want.dtype, (number, got, want)
            np.testing.assert_array_equal(got, want)
            assert _hlo(fn, a) == _general_hlo(monkeypatch, fn, a), number


def _general_hlo(monkeypatch, fn, *args) -> str:
    """``fn``'s HLO with the operator fast paths turned off: the general ufunc path's."""
    with monkeypatch.context() as patched:
        patched.setattr(fast_paths, "same_type_loop", lambda ufunc, dtype: None)
        return _hlo(fn, *args)
