"""Basic indexing planned once per shape of window (frontend/planned_indexing: ``basic_plan``,
``read``, ``write_box``): a traced Python loop's ``a[i, j]``, ``a[i, :j]`` and ``a[i, j] = v``
emit the very instructions the general path emits, with the shapes shape inference gives, and
NumPy's results, errors and views; every other key still goes the general way."""
import numpy as np
import pytest

import toolkit as tk
from toolkit.frontend import inplace, planned_indexing
from toolkit.frontend.errors import UserIndexError, UserOverflowError, UserValueError
from toolkit.ir.verifier import verify

KEYS = [
    (1, 2), (-1, -3), (0,), 2, (slice(None), 1), (1, slice(None, 3)), (slice(1, -1), slice(2, 4)),
    (slice(None, None, 2), 0), (slice(3, 1), 0), (slice(0, 4), slice(0, 6)), (slice(2, 9, 3),),
    (slice(-3, None), slice(None, -2, 2)), (3, slice(5, 5)),
]


def _general_only(monkeypatch):
    """Every key goes the general way (no plan)."""
    monkeypatch.setattr(planned_indexing, "basic_plan", lambda x, key: None)
    monkeypatch.setattr(inplace, "basic_plan", lambda x, key: None)


def _reads_and_writes(key):
    def f(a, v):
        b = a * 2
        r = b[key]
        b[key] = v
        b[key] += 1
        return r, b
    return f


@pytest.mark.parametrize("key", KEYS, ids=repr)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32, np.int8, np.bool_])
def test_a_planned_read_and_write_trace_as_the_general_path_does(monkeypatch, key, dtype):
    a = (np.arange(24).reshape(4, 6) % 5).astype(dtype)
    v = np.ones((), dtype)
    f = _reads_and_writes(key)
    if dtype == np.bool_:  # (b += 1 on booleans: NumPy's own error, both ways)
        def f(a, v, f=f):
            b = a.copy()
            r = b[key]
            b[key] = v
            return r, b
    planned = tk.jit(f).lower(a, v)
    verify(planned.hlo)  # every shape inferred again from scratch
    got = tk.jit(f)(a, v)
    want = f(a.copy(), v)
    for g, w in zip(got, want):
        assert np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_array_equal(g, w)
    with monkeypatch.context() as m:
        _general_only(m)
        general = tk.jit(f).lower(a, v)
    assert planned.as_text(metadata=True) == general.as_text(metadata=True)


def test_element_reads_are_numpy_scalars_and_window_reads_are_views():
    def f(a):
        row = a[1, 1:4]
        x = a[1, 2]
        a[1, 2] = 7.0  # the view sees the write; the scalar read before it does not
        return row * 1, x
    a = np.arange(12.0).reshape(3, 4)
    row, x = tk.jit(f)(a.copy())
    np.testing.assert_array_equal(row, [5.0, 7.0, 7.0])
    assert x == 6.0 and type(x) is np.float64  # (returned as NumPy returns a scalar)


def test_a_planned_loop_matches_numpy_and_its_shapes_verify():
    def f(a):
        for i in range(1, a.shape[0]):
            for j in range(1, a.shape[1]):
                a[i, j] += a[i, j - 1]
                a[i, j] /= 9.0
            a[i, 1:-1] += a[i - 1, :-2] + a[i - 1, 2:]
        return a
    a = np.random.default_rng(0).random((6, 7))
    verify(tk.jit(f).lower(a).hlo)
    np.testing.assert_allclose(tk.jit(f)(a.copy()), f(a.copy()), rtol=1e-15)


@pytest.mark.parametrize("key", [(4, 0), (0, -7), (-5, 1), 9], ids=repr)
def test_an_index_out_of_range_is_numpys_index_error(key):
    a = np.zeros((4, 6))
    with pytest.raises(IndexError) as want:
        a[key]
    for f in (lambda a: a[key], lambda a: a.__setitem__(key, 1.0)):
        with pytest.raises(UserIndexError) as got:
            tk.jit(f)(a.copy())
        assert str(want.value).split(" with size")[0] in str(got.value)


def test_stored_numbers_are_checked_every_time_as_numpy_checks_them():
    def store(value):
        def f(a):
            a[0] = value
            a[1] = value
            return a
        return f
    a = np.zeros(3, np.int8)
    np.testing.assert_array_equal(tk.jit(store(5))(a.copy()), [5, 5, 0])
    for bad, error in [(300, UserOverflowError), (float("nan"), UserValueError)]:
        for _ in range(2):  # (the second time too: only numbers that fit are remembered)
            with pytest.raises(error):
                tk.jit(store(bad))(a.copy())


def test_the_plans_and_the_remembered_numbers_are_bounded(monkeypatch):
    monkeypatch.setattr(planned_indexing, "_PLANS", {})
    monkeypatch.setattr(planned_indexing, "_PLANS_KEPT", 8)
    monkeypatch.setattr(inplace, "_ASSIGNABLE", set())
    monkeypatch.setattr(inplace, "_ASSIGNABLE_KEPT", 8)

    def f(a):
        for n in range(1, 30):
            a[0, :n] = float(n)
        return a
    a = np.zeros((2, 30))
    np.testing.assert_array_equal(tk.jit(f)(a.copy()), f(a.copy()))
    assert 0 < len(planned_indexing._PLANS) <= 8 and 0 < len(inplace._ASSIGNABLE) <= 8
