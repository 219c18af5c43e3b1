"""NumPy scalars under tk.jit: what NumPy returns as a scalar (a reduction, a ufunc's 0-d
result, ``x[i, j]``) comes back as one, and is immutable inside the function as in NumPy
(``v = x[0]; v += 1`` leaves ``x`` alone, ``t = s; s += 1`` leaves ``t`` alone); a 0-d array
stays a 0-d array. Printing and formatting a traced value show NumPy's text, and ``x.flat``
reads and writes as NumPy's flat iterator."""
from __future__ import annotations

import numpy as np
import pytest

import toolkit as tk
from toolkit.frontend.errors import TracerConversionError

HOST_BACKENDS = ["interpreter", "cpu"]


def _check(fn, *args, backend="cpu", calls=3):
    """Results equal NumPy's with the same Python types, and arguments written as NumPy writes
    them, over a traced, a recorded and a replayed call."""
    jitted = tk.jit(fn, backend=backend)
    for _ in range(calls):
        np_args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        tk_args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        expected, got = fn(*np_args), jitted(*tk_args)
        expected = expected if isinstance(expected, tuple) else (expected,)
        got = got if isinstance(got, tuple) else (got,)
        assert len(expected) == len(got)
        for e, g in zip(expected, got):
            assert type(g) is type(e), (type(e), type(g), e, g)
            assert np.asarray(g).dtype == np.asarray(e).dtype
            np.testing.assert_array_equal(np.asarray(g), np.asarray(e))
        for e, g in zip(np_args, tk_args):
            np.testing.assert_array_equal(g, e)
    return jitted


def result_types(x):
    s = x.sum()
    a0 = np.asarray(s)  # a 0-d array of a scalar
    return (s, x.max(), np.mean(x), x[1], x[-1] * 2, np.sqrt(x[0]), np.dot(x, x), x @ x,
            np.linalg.norm(x), np.argmax(x), x[0] > 1, a0, np.reshape(x[:1], ()), x[0, ...],
            np.where(x[0] > 1, x[0], x[1]), s.astype(np.float32), a0.astype(np.float32),
            np.add.reduce(x), -x[2], abs(x[2]),
            *np.unravel_index(np.argmax(x), (2, 2)))


@pytest.mark.parametrize("backend", HOST_BACKENDS)
def test_numpy_scalars_come_back_as_numpy_scalars_and_0d_arrays_as_arrays(backend):
    _check(result_types, np.array([3.0, -1.5, 2.0, 0.5]), backend=backend)


def accumulators(x):
    acc = x[0]
    history = []
    for i in range(1, 4):
        history.append(acc)
        acc += x[i]  # rebinds acc: history keeps each value
    v = x[1]
    v *= 10  # a scalar copy: x is not written
    s = x.sum()
    t = s
    s -= 1  # t keeps the sum
    return history[0], history[1], history[2], acc, v, t, s, x


@pytest.mark.parametrize("backend", HOST_BACKENDS)
def test_in_place_operators_on_numpy_scalars_rebind_as_in_numpy(backend):
    _check(accumulators, np.arange(5.0), backend=backend)


def test_in_place_operators_on_0d_arrays_still_write():
    def f(x):
        a = np.asarray(x.sum())  # a 0-d array: mutable, shared by b
        b = a
        a += 1
        y = x[0, ...]  # a 0-d view of x
        y += 5
        return a, b, x

    _check(f, np.arange(3.0))


def test_writing_into_a_numpy_scalar_raises_numpys_type_error():
    def f(x):
        s = x[0]
        s[...] = 1.0
        return s

    with pytest.raises(TypeError, match="'numpy.float64' object does not support item"):
        f(np.arange(3.0))  # (NumPy's own words, for the record)
    with pytest.raises(TypeError, match="'numpy.float64' object does not support item"):
        tk.jit(f)(np.arange(3.0))

    def written_by_out(x):
        s = x.sum()
        np.add(x[0], 1.0, out=s)  # NumPy: TypeError, a scalar is no output array
        return s

    with pytest.raises(TypeError):
        written_by_out(np.arange(3.0))
    with pytest.raises(TypeError, match="NumPy scalar"):
        tk.jit(written_by_out)(np.arange(3.0))


def test_scalars_survive_breaks_and_replay():
    def f(x):
        best = x[0]
        for i in range(1, x.shape[0]):
            if x[i] > best:  # a break per element
                best = x[i]
            best += 0.0
        return best, x.sum()

    jitted = _check(f, np.array([1.0, 5.0, 2.0, 7.0]), calls=4)
    assert jitted.graph_breaks.replayed_calls >= 1


def test_print_and_format_show_numpys_text(capsys):
    def f(x):
        print("total", x.sum(), x[1:], repr(x[0]))
        print(f"mean {x.mean():.3f} first {x[0]:+.1e}")
        return x * 2

    x = np.array([1.0, 2.5, 4.0])
    f(x)
    expected = capsys.readouterr().out
    jitted = tk.jit(f)
    for _ in range(3):
        np.testing.assert_array_equal(jitted(x), x * 2)
        assert capsys.readouterr().out == expected
    assert any(b.reason.startswith(("str()", "format()", "repr()"))
               for b in jitted.graph_breaks.breaks)


def test_where_the_graph_may_not_break_printing_describes_and_formatting_raises(capsys):
    def f(x):
        print(x)
        return x + 1

    tk.jit(f, fullgraph=True)(np.ones(2))
    assert "Tracer<f64[2]" in capsys.readouterr().out
    with pytest.raises(TracerConversionError, match="formatting with '.2f'"):
        tk.jit(lambda x: f"{x[0]:.2f}", fullgraph=True)(np.ones(2))


def flat_uses(x):
    m = x.reshape(3, 4) * 1.0
    m.flat[5] = -1.0
    m.flat[[0, 11]] = 7.0
    total = sum(v for v in m.flat)
    filled = np.zeros((2, 3))
    filled.flat = 4.0
    copied = np.zeros((2, 2))
    copied.flat = x[:4]
    return m, total, filled, copied, m.flat[2:6], m.flat[3], len(m.flat)


@pytest.mark.parametrize("backend", HOST_BACKENDS)
def test_flat_reads_and_writes_as_numpys_flat_iterator(backend):
    _check(flat_uses, np.arange(12.0), backend=backend)


def test_storing_an_element_back_where_it_was_read_writes_nothing():
    """``cov[j, i] = cov[i, j]`` with i == j (a symmetric fill's diagonal) traces no write;
    with a write in between, the stored value is the one read, as in NumPy."""
    def same(a):
        b = a * 1.0
        b[1, 1] = b[1, 1]
        return b

    def written_between(a):
        b = a * 1.0
        v = b[1, 1]
        b[1, 1] = 5.0
        b[1, 1] = v
        return b

    a = np.arange(9.0).reshape(3, 3)
    ops = [i.opcode for i in tk.jit(same).lower(a).hlo.entry.instructions]
    assert "dynamic-update-slice" not in ops and "scatter" not in ops, ops
    _check(same, a)
    _check(written_between, a)


def rounding_and_types(x):
    s = x[1]
    return (round(s), round(s, 2), round(x.sum(), -1), isinstance(x, np.ndarray),
            isinstance(s, np.ndarray), x.dtype, f"{x.max():.2f}", x.shape)


@pytest.mark.parametrize("backend", HOST_BACKENDS)
def test_round_isinstance_and_outputs_that_are_no_arrays(backend):
    """round() of a NumPy scalar (a Python int without ndigits), isinstance against np.ndarray
    (a traced array is one, a NumPy scalar is not), and a dtype or a string returned as is."""
    _check(rounding_and_types, np.array([1.25, 2.567, -3.5]), backend=backend)
    with pytest.raises(TypeError, match="doesn't define __round__"):
        tk.jit(lambda x: round(x, 1))(np.ones(2))
