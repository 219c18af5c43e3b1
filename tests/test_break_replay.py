"""Replay of recorded calls (frontend.replay): a function that breaks its graph records its
operations and breaks in a trie (from its second call on: the first finds out that it
breaks); a later call that asks the same replays them without tracing,
and the first operation asked differently traces on from there. Replay must never change a
result: every test compares each call with NumPy (values, dtypes, signs of zero, arguments
written in place), over calls that replay, diverge and record new branches."""
from __future__ import annotations

import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import toolkit as tk
from toolkit.frontend import replay

BACKENDS = ["interpreter", "cpu", "gpu-simulated"]


def _same(expected, got):
    if isinstance(expected, (tuple, list)):
        assert len(got) == len(expected)
        for e, g in zip(expected, got):
            _same(e, g)
        return
    e, g = np.asarray(expected), np.asarray(got)
    assert e.shape == g.shape and e.dtype == g.dtype, (e.shape, g.shape, e.dtype, g.dtype)
    np.testing.assert_allclose(g, e, rtol=1e-14, atol=0)
    if e.dtype.kind == "f":
        assert np.array_equal(np.signbit(e), np.signbit(g))


def _close(expected, got):
    """As _same, within the rounding of a chain of transcendental functions (toolkit's vector
    math and NumPy's may differ in the last place); zeros keep their sign."""
    e, g = np.asarray(expected), np.asarray(got)
    assert e.shape == g.shape and e.dtype == g.dtype
    np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-13)
    zeros = e == 0
    assert np.array_equal(np.signbit(e[zeros]), np.signbit(g[zeros]))


def _calls(fn, argument_sets, backend="cpu", compare=_same, **options):
    """Call ``fn`` jitted on each set of arguments in turn; each call must equal NumPy's."""
    jitted = tk.jit(fn, backend=backend, **options)
    for args in argument_sets:
        np_args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        tk_args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        compare(fn(*np_args), jitted(*tk_args))
        for a, b in zip(np_args, tk_args):
            if isinstance(a, np.ndarray):
                compare(a, b)
    return jitted


def _counting_operations(monkeypatch) -> list:
    """Count the ufuncs traced for real (a replayed operation traces nothing)."""
    from toolkit.frontend import dispatch

    traced = []
    real = dispatch.apply_ufunc

    def counted(*args, **kwargs):
        traced.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(dispatch, "apply_ufunc", counted)
    return traced


def steps(x):
    for _ in range(4):
        x = x * 1.5 + 1.0
        if x[0] > 2.0:
            x = x - 0.5
        else:
            x = x + 0.25
    return x


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_repeated_call_replays_every_operation_without_tracing(backend, monkeypatch):
    x = np.linspace(-1, 1, 8)
    jitted = _calls(steps, [(x,), (x,)], backend)  # traced; traced and recorded
    traced = _counting_operations(monkeypatch)
    _same(steps(x.copy()), jitted(x.copy()))
    _same(steps(x + 0.125), jitted(x + 0.125))  # other values, the same branches
    assert traced == []
    report = jitted.graph_breaks
    assert report.replayed_calls == 2 and report.calls == 4


def test_a_branch_taken_the_other_way_traces_from_there_and_is_recorded_too(monkeypatch):
    up, down = np.linspace(1, 2, 8), np.linspace(-3, -2, 8)
    jitted = _calls(steps, [(up,), (up,), (down,), (up,), (down,)])
    assert jitted.graph_breaks.replayed_calls == 2  # the fourth and fifth calls
    traced = _counting_operations(monkeypatch)
    _same(steps(down.copy()), jitted(down.copy()))
    assert traced == []  # both branches are in the trie


def _iterations(x):
    count = 0
    while x.max() > 1.0 and count < 10:  # a break a trip
        x = x * 0.5
        count += 1
    return x, count  # a Python int, made by Python


def test_a_python_number_returned_replays_and_a_new_value_is_told_apart(monkeypatch):
    """The count is lifted into the last segment by its value, as an operation of the record:
    lifting it outside the record ended every call's replay (npbench's channel_flow traced
    every call again). A call returning another count diverges there and is right."""
    x = np.array([8.0, 2.0, 0.5])
    jitted = _calls(_iterations, [(x,), (x,)], numpy_fallback=False)
    for start in (x, x, x * 4, x * 4, x * 4):
        got, want = jitted(start.copy()), _iterations(start.copy())
        _same(want[0], got[0])
        assert type(got[1]) is int and got[1] == want[1]
    # (the 3rd and 4th calls, and the 6th and 7th: the first with x * 4 traced a new branch)
    assert jitted.graph_breaks.replayed_calls == 4, jitted.graph_breaks.text


def test_python_numbers_are_guarded_by_their_exact_bits():
    def f(x):
        c = float(x[0])  # a Python float that decides the next program's constant
        y = x * c
        if y.sum() >= 0:
            return np.copysign(1.0, y), y
        return y, -y

    base = np.array([0.0, 1.0, -2.0, 3.0])
    neg = base.copy()
    neg[0] = -0.0  # the same value, the other sign: a different constant, a different result
    jitted = _calls(f, [(base,), (neg,), (base,), (neg,), (base * 2,)])
    assert jitted.graph_breaks.replayed_calls >= 2


def test_an_operand_that_is_a_number_one_call_and_an_array_the_next_is_told_apart():
    # (``x * other`` is one step of the trie after the break; its operand is the Python int 1
    # one call and the array ``y``, whose slot number is 1, the next: a replay that compared
    # the recorded step's operand by number alone would take ``y`` for the 1)
    def f(x, y):
        other = 1 if x[0] > 0 else y
        return x * other

    x_up, x_down, y = np.array([1.0, 2.0]), np.array([-1.0, 2.0]), np.array([5.0, 7.0])
    _calls(f, [(x_up, y), (x_up, y), (x_down, y), (x_up, y), (x_down, y), (x_down, y)])


def test_writes_through_views_replay():
    def f(x):
        buf = np.zeros((3, 4))
        row = buf[1]
        row[:] = x
        if row.sum() > 0:
            buf[2] = row * 2
        col = buf[:, 0]
        col += 1.0
        row[1] = -0.0
        if buf[2, 3] > 1:
            row *= 3
        return buf, row, col

    sets = [(np.array(v),) for v in ([1.0, 2, 3, 4], [-1.0, -2, 3, 4], [0.1, 0.2, 0.3, 0.2],
                                     [1.0, 2, 3, 4], [-1.0, -2, 3, 4], [0.1, 0.2, 0.3, 0.2])]
    jitted = _calls(f, sets)
    assert jitted.graph_breaks.replayed_calls >= 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_arguments_written_in_place_replay(backend):
    def f(x, out):
        out += x
        if out.sum() > 3:
            out *= 2
        x[0] = -0.0
        out[1:3] = x[1:3] * 4
        return out.sum()

    rng = np.random.default_rng(3)
    sets = [(rng.random(6), rng.random(6) * k) for k in (1, 1, 0.1, 0.1, 1)]
    jitted = _calls(f, sets, backend)
    assert jitted.graph_breaks.replayed_calls >= 2


def test_arrays_python_makes_are_guarded_by_their_bytes():
    def generate(x, steps):
        ids = [1]
        for _ in range(steps):
            logits = x * np.array(ids).sum() - np.arange(x.size)
            ids.append(int(np.argmax(logits)))
        return np.array(ids), logits

    sets = [(np.linspace(0, 1, 6), 3), (np.linspace(0, 1, 6), 3), (np.linspace(1, 0, 6), 3),
            (np.linspace(0, 1, 6), 3)]
    _calls(generate, sets, static_argnums=(1,))


def test_a_python_number_argument_decides_branches():
    def f(x, n):
        if n > 2:
            return x * n
        return x - n

    _calls(f, [(np.ones(3), 1), (np.ones(3), 5), (np.ones(3), 1), (np.ones(3), 7)])


def test_dtypes_and_weak_scalars_cross_replayed_breaks():
    def f(a, b):
        c = a * b
        if c.max() > 10:
            c = c - np.int32(3)
        s = c.sum()
        k = int(s) % 3
        return c.astype(np.float32) / 2 + k, np.float32(1.5) * c

    sets = [(np.arange(6, dtype=np.int32), np.full(6, k, np.int32)) for k in (3, 3, 1, 3, 1)]
    _calls(f, sets)


def test_a_nested_trace_after_a_break_ends_the_replay_correctly():
    def f(x):
        if x.sum() > 0:
            x = x * 2
        return tk.lax.fori_loop(0, 3, lambda i, v: v * 1.5 + i, x)

    def reference(x):
        if x.sum() > 0:
            x = x * 2
        for i in range(3):
            x = x * 1.5 + i
        return x

    jitted = tk.jit(f)
    for v in ([1.0, 2.0], [-1.0, -2.0], [1.0, 2.0]):
        x = np.array(v)
        np.testing.assert_allclose(jitted(x), reference(x), rtol=1e-15)


def test_an_error_raised_and_caught_by_the_function_is_raised_again():
    def f(x, y):
        if x.sum() > 0:
            try:
                z = x + y  # shapes (3,) and (2,): NumPy's broadcast error
            except ValueError:
                z = x * 2
        else:
            z = x
        return z

    x, y = np.ones(3), np.ones(2)
    _calls(f, [(x, y), (x, y), (-x, y), (x, y)])


def test_an_operation_with_a_users_function_is_traced_every_call():
    def f(x, g):
        if x[0] > 0:
            x = x + 1
        return np.apply_along_axis(g, 0, x.reshape(2, 2))

    jitted = tk.jit(f, static_argnums=(1,))
    x = np.arange(4.0)
    for scale in (2.0, 3.0):
        g = (lambda s: (lambda v: v * s))(scale)
        try:
            got = jitted(x, g)
        except Exception as e:  # an unsupported function is fine; a wrong value is not
            pytest.skip(f"np.apply_along_axis unsupported: {e}")
        _same(np.apply_along_axis(g, 0, x.reshape(2, 2)) if x[0] <= 0 else
              np.apply_along_axis(g, 0, (x + 1).reshape(2, 2)), got)


def test_the_trie_is_bounded(monkeypatch):
    monkeypatch.setattr(replay, "NODES_LIMIT", 6)
    x = np.linspace(-1, 1, 8)
    jitted = _calls(steps, [(x,), (x,), (-x,), (x * 3,), (x,)])
    roots = list(jitted._breaks.tries.values())
    assert roots and all(r.size <= 6 for r in roots)


@settings(max_examples=25, deadline=None)
@given(ops=st.lists(st.integers(0, 6), min_size=1, max_size=8),
       breaks=st.lists(st.integers(0, 5), min_size=8, max_size=8),
       signs=st.lists(st.sampled_from([1.0, -1.0, 0.5]), min_size=3, max_size=3))
def test_random_programs_replayed_over_calls_match_numpy(ops, breaks, signs):
    ufuncs = [np.sin, np.cos, np.tanh, lambda v: v * 1.5, lambda v: v - 0.25, np.abs, np.exp2]

    def program(x):
        acc = x
        for k, op in enumerate(ops):
            acc = ufuncs[op](acc)
            kind = breaks[k]
            if kind == 1 and acc[0] > 0.1:  # (an element: a sum near 0 may round either way)
                acc = acc + 1.0
            elif kind == 2:
                acc = acc * float(acc.mean())
            elif kind == 3:
                acc[int(abs(acc[0]) * 3) % acc.size] = -0.0
            elif kind == 4:  # a write through a view, then a branch on the parent
                window = acc[1:4]
                window *= 2.0
                if acc[2] > 0.5:
                    window[0] = acc[5]
            elif kind == 5:  # an argument-free buffer filled from traced values
                out = np.zeros(acc.size)
                out[::2] = acc[::2]
                acc = out + acc[0]
        return acc

    x = np.linspace(-2, 2.5, 7)  # (not symmetric: a mean near 0 would round either way)
    _calls(program, [(x * s,) for s in signs + signs], compare=_close)


SCALE = 2.0
TABLE = np.arange(4.0)


def uses_globals(x):
    y = x * SCALE + TABLE
    if y.sum() > 0:
        y = y - TABLE * SCALE
    return y


def test_a_global_python_number_or_array_changed_between_calls_is_seen(monkeypatch):
    jitted = tk.jit(uses_globals)
    x = np.linspace(-1, 1, 4)
    for scale, row in ((2.0, 0.0), (2.0, 0.0), (2.0, 0.0), (-0.0, 0.0), (3.0, 5.0), (3.0, 5.0)):
        monkeypatch.setattr(sys.modules[__name__], "SCALE", scale)
        TABLE[0] = row  # written in place between calls: the same object, other bytes
        _same(uses_globals(x), jitted(x))


def test_values_kept_in_python_across_breaks_replay():
    def f(x):
        kept = []
        for k in range(4):
            y = x * (k + 1)
            kept.append(y)
            if y[0] > 1.5:  # a break: everything kept crosses it
                x = x + kept[0]
        return sum(kept[1:], kept[0]) * len(x) + x.shape[0]

    _calls(f, [(np.array([1.0, 2.0]),), (np.array([1.0, 2.0]),), (np.array([0.1, 2.0]),),
               (np.array([1.0, 2.0]),), (np.array([0.1, 2.0]),)])


def test_an_in_place_reshape_replays():
    def f(x):
        y = x * 2
        y.shape = (2, 3)
        if y[1, 2] > 3:
            y = y.T
        return y.sum(axis=0), y

    _calls(f, [(np.arange(6.0),), (np.arange(6.0),), (np.arange(6.0) - 10,), (np.arange(6.0),)])


HELD = []
HOLD = [False]


def test_a_value_held_only_in_this_call_at_a_break_traces_that_break_again():
    def f(x):
        y = x + 1.0
        z = y * 2.0
        if HOLD[0]:  # Python keeps z alive across the break in this call only
            HELD.append(z)
        del z
        if y[0] > 0:
            y = y * 3.0
        return y - (HELD.pop() if HOLD[0] else 0.0)

    def reference(x, hold):
        y = x + 1.0
        z = y * 2.0
        return (y * 3.0 if y[0] > 0 else y) - (z if hold else 0.0)

    jitted = tk.jit(f)
    x = np.array([1.0, 2.0])
    for hold in (False, False, False, True, False, True):
        HELD.clear()
        HOLD[0] = hold
        _same(reference(x, hold), jitted(x))


def test_the_report_says_where_and_why_replay_ended():
    def looped(x):
        if x.sum() > 1:
            x = x + 1
        return tk.lax.fori_loop(0, 3, lambda i, v: v * 1.5, x)  # a nested trace: traced

    jitted = tk.jit(looped)
    for _ in range(4):
        np.testing.assert_allclose(jitted(np.linspace(0, 2, 8)),
                                   (np.linspace(0, 2, 8) + 1) * 1.5 ** 3, rtol=1e-15)
    report = jitted.graph_breaks
    assert report.replayed_calls == 0
    ((reason, where, count),) = report.replay_stops
    assert reason.startswith("a nested trace") and count == 3  # (the first call records
    assert where.endswith(f":{looped.__code__.co_firstlineno + 3}")  # nothing)
    assert "replay ended 3x at" in report.text

    def along(x, g):
        if x[0] > 0:
            x = x + 1
        return np.apply_along_axis(g, 0, x.reshape(2, 2))

    jitted = tk.jit(along, static_argnums=(1,))
    double = lambda v: v * 2  # noqa: E731
    for _ in range(3):
        _same(along(np.arange(4.0), double), jitted(np.arange(4.0), double))
    ((reason, _, count),) = jitted.graph_breaks.replay_stops
    assert reason.startswith("a function of the user's, <lambda>") and count == 2


def test_threads_calling_one_function_replay_and_record_side_by_side():
    import threading

    jitted = tk.jit(steps, numpy_fallback=False)  # (the replay is what this tests)
    inputs = [np.linspace(-1, 1, 8) * s for s in (1.0, -1.0, 0.5, 3.0)]
    errors = []

    def worker(k):
        try:
            for i in range(40):
                x = inputs[(i + k) % 4]
                _same(steps(x.copy()), jitted(x.copy()))
        except Exception as e:  # (reported below: an assertion in a thread is not raised)
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert jitted.graph_breaks.replayed_calls > 100


def test_breaks_inside_an_operation_replay_guarded_by_the_value_they_gave():
    def masked(x, ptr):
        y = x * 2
        if y.sum() > 1:
            y = y + 1
        big = y[y > 2.5]  # one break inside: the count
        parts = [y[ptr[i]:ptr[i + 1]].sum() for i in range(len(ptr) - 1)]  # two: the bounds
        return big.sum() * 2, big, np.unique(np.floor(y)), parts

    ptr = np.array([0, 3, 3, 8])
    a, b = np.linspace(0, 2, 8), np.linspace(0, 3, 8)  # (other counts, other uniques)
    jitted = _calls(masked, [(a, ptr), (a, ptr), (a, ptr), (b, ptr), (b, ptr), (a, ptr),
                             (a, ptr[::-1].copy() * 0 + np.array([0, 2, 5, 8]))])
    report = jitted.graph_breaks
    assert report.replayed_calls >= 2, report.text  # the third and the fifth call
    assert any("gave a value not recorded" in reason for reason, _, _ in report.replay_stops)


def csr_rows(row, col, val, x):  # a CSR product: every row's slice bounds are data
    y = np.empty(row.size - 1)
    for i in range(row.size - 1):
        y[i] = val[row[i]:row[i + 1]] @ x[col[row[i]:row[i + 1]]]
    return y


def test_recorded_views_keep_no_values_of_the_call_alive():
    """The record of ``val[row[i]:row[i + 1]]`` (a view with traced bounds) holds the bounds by
    their slots, not the tracers: were they kept, every bound of every row would stay alive
    and cross each later break, and the segments would grow with the row number."""
    rng = np.random.default_rng(4)
    n = 12
    dense = (rng.random((n, n)) < 0.3) * rng.random((n, n))
    row = np.concatenate([[0], np.cumsum((dense != 0).sum(1))]).astype(np.int64)
    col, val, x = np.nonzero(dense)[1].astype(np.int64), dense[dense != 0], rng.random(n)
    # (the replay is what this tests: 48 breaks a call would make the second call NumPy's)
    jitted = _calls(csr_rows, [(row, col, val, x)] * 3, numpy_fallback=False)
    report = jitted.graph_breaks
    assert report.replayed_calls == 1
    assert max(s.parameters for s in report.segments) <= 12, report
