"""Python's max and min on traced scalars are a select inside a traced function, not a graph
break, with Python's own choice: the first of equal values, a NaN only where it comes first,
the sign of zero of the value chosen, and the dtype of the arrays compared."""
from __future__ import annotations

import numpy as np
import pytest

import toolkit as tk

SPECIAL = np.array([np.nan, 1.0, -0.0, 0.0, 2.0, np.nan, -np.inf, np.inf])


def _pairs(v):
    return [max(v[i], v[j]) for i in range(len(v)) for j in range(len(v))] + \
           [min(v[i], v[j]) for i in range(len(v)) for j in range(len(v))]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_pair_of_special_values_chooses_as_python_does(dtype):
    v = SPECIAL.astype(dtype)
    f = tk.jit(_pairs)
    got, want = f(v), _pairs(v)
    for g, w in zip(got, want):
        assert np.asarray(g).dtype == dtype
        np.testing.assert_array_equal(g, w)
        assert np.signbit(g) == np.signbit(w)
    assert f.graph_breaks.calls == 0


def _many(v):
    return (max(v[0], v[1], v[2]), min([v[3], v[1], v[0]]), max(iter([v[4], v[2]])),
            max(v[1], 3.0), min(0.5, v[2]), max([v[5]]), min([v[1], v[2]], default=7))


def test_the_iterable_and_scalar_forms_match_python():
    v = np.array([3.0, -1.0, 2.5, np.nan, 0.5, 9.0])
    f = tk.jit(_many)
    for g, w in zip(f(v), _many(v)):
        np.testing.assert_array_equal(g, w)
    assert f.graph_breaks.calls == 0


def nussinov_like(table):  # a dynamic-programming fill, as npbench's nussinov writes it
    n = table.shape[0]
    for i in range(n - 1, -1, -1):
        for j in range(i + 1, n):
            table[i, j] = max(table[i, j], table[i, j - 1])
            table[i, j] = max(table[i, j], table[i + 1, j])
            for k in range(i + 1, j):
                table[i, j] = max(table[i, j], table[i, k] + table[k + 1, j])
    return table


def test_a_dynamic_programming_fill_is_one_program_with_numpys_bits():
    table = np.random.default_rng(0).integers(0, 9, (9, 9)).astype(np.int32)
    f = tk.jit(nussinov_like)
    got = f(table.copy())
    np.testing.assert_array_equal(got, nussinov_like(table.copy()))
    assert got.dtype == np.int32
    assert f.graph_breaks.calls == 0


def fill_then_ask(table, limit):  # a select per max, and a break on a computed value
    n = table.shape[0]
    for i in range(1, n):
        table[i, 0] = max(table[i, 0], table[i - 1, 0] + 1)
    if table[n - 1, 0] > limit:
        table[0, 0] = min(table[0, 0], table[1, 0])
    return table


def test_a_call_that_breaks_replays_its_selects_without_tracing():
    table = np.random.default_rng(1).integers(0, 9, (6, 2)).astype(np.int32)
    f = tk.jit(fill_then_ask)
    for _ in range(4):
        np.testing.assert_array_equal(f(table.copy(), 3), fill_then_ask(table.copy(), 3))
    report = f.graph_breaks
    assert report.break_count == 4 and report.replayed_calls == 2, report


def test_where_python_would_return_another_type_the_builtin_runs():
    def mixed(a, b):
        return max(a[0], b[0])  # int32 and float64: Python hands back one or the other

    a, b = np.array([2], np.int32), np.array([1.5])
    f = tk.jit(mixed)
    np.testing.assert_array_equal(f(a, b), mixed(a, b))
    assert f.graph_breaks.calls == 1  # the comparison is a break, as before

    def relu_like(x):
        return max(0, x[0])  # Python: the int 0, or the float x[0]

    g = tk.jit(relu_like)
    for x in (np.array([-1.5]), np.array([2.5])):
        got, want = g(x), relu_like(x)
        assert np.asarray(got).dtype == np.asarray(want).dtype and got == want
    assert g.graph_breaks.calls == 2

    def of_array(x):
        return max(x)  # its elements, one by one

    x = np.array([1.0, 3.0, 2.0])
    assert float(tk.jit(of_array)(x)) == 3.0


def test_errors_are_pythons():
    def zero_d(x):
        return max(x.sum())  # iterating a 0-d array

    with pytest.raises(TypeError):
        tk.jit(zero_d)(np.ones(3))

    def with_default(x):
        return max(x[0], x[1], default=0)

    with pytest.raises(TypeError):
        tk.jit(with_default)(np.ones(3))


def test_a_module_that_defines_its_own_max_keeps_it_and_nothing_is_left_behind():
    namespace = {"__name__": "user_module", "np": np}
    exec("max = lambda *a: 42\ndef f(x):\n    return max(x[0], x[1])\n"
         "def g(x):\n    return min(x[0], x[1])\n", namespace)
    assert tk.jit(namespace["f"])(np.ones(2)) == 42
    np.testing.assert_array_equal(tk.jit(namespace["g"])(np.array([2.0, 1.0])), 1.0)
    assert "min" not in namespace  # the traced min was there only during the trace


def _max_of(a, b, c):
    return max(a, b, c), min(a, b)


def _the_same_by_where(a, b, c):
    m = np.where(b > a, b, a)
    return np.where(c > m, c, m), np.where(b < a, b, a)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.uint8, np.bool_])
def test_the_select_of_traced_values_is_the_instructions_np_where_makes(dtype):
    # (the builtins select traced values of one type directly: the same program as np.where's
    # general path, instruction for instruction)
    values = np.array([3, 1, 2], dtype)[:, None] if dtype != np.bool_ else \
        np.array([True, False, True])[:, None]

    def scalars(fn):
        return lambda v: fn(v[0, 0], v[1, 0], v[2, 0])

    got_text = tk.jit(scalars(_max_of)).lower(values).as_text(metadata=False)
    want_text = tk.jit(scalars(_the_same_by_where)).lower(values).as_text(metadata=False)
    assert got_text.replace("_max_of", "") == want_text.replace("_the_same_by_where", "")
    assert got_text.count(" select(") == 3
    got, want = tk.jit(scalars(_max_of))(values), scalars(_max_of)(values)
    for g, w in zip(got, want):
        assert type(g) is type(w) and g == w
