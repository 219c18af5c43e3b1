"""In-place updates by buffer assignment (backends/buffer_plan.py, backends/liveness.py), as
XLA's are: a dynamic-update-slice or a scatter writes into its destination's buffer whenever
nothing needs the old value afterwards (buffers the function makes itself, loop state, chains
of writes), and a copy is inserted only where the old value is still read; the plan says which,
and why. Every result is NumPy's: a silent wrong result is the worst bug, so the aliasing
analysis is checked on programs built to trip it."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import toolkit as tk
from toolkit.backends.cpu import compile_module

BACKENDS = ["cpu", "interpreter", "gpu-simulated"]


def _outputs(value):
    return value if isinstance(value, tuple) else (value,)


def _same_as_numpy(fn, *args, backend="cpu"):
    """``fn`` under jit on ``backend`` against NumPy: results, and the arguments after."""
    ours = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    theirs = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    got = tk.jit(fn, backend=backend)(*ours)
    want = fn(*theirs)
    for o, t in zip(ours, theirs):
        np.testing.assert_array_equal(o, t)
    for g, w in zip(_outputs(got), _outputs(want), strict=True):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-12, atol=1e-12)
    return got


def _compiled(fn, *args):
    return tk.jit(fn, backend="cpu").lower(*args).compile()


def _column_filter(x, a, b):
    y = np.zeros_like(x)
    y[:, 0] = x[:, 0]
    for j in range(1, x.shape[1]):
        y[:, j] = a * x[:, j] + b * y[:, j - 1]
    return y


def test_a_column_filling_loop_writes_each_column_in_place():
    """The recursive filter of issue 27: a Python loop filling a work array column by column.
    Every write after the first (which makes the array) goes into the array's own buffer and
    touches only its column: no copy of the whole array anywhere."""
    x = np.random.default_rng(0).standard_normal((64, 40))
    compiled = _compiled(_column_filter, x, 0.5, 0.45)
    writes = [s for s in compiled.executable.steps
              if s.kind == "kernel" and s.extra["spec"].kind == "update_slice"]
    assert len(writes) == 39
    assert all(s.outputs[0] in s.inputs and s.work == 64 for s in writes)  # a column's worth
    decisions = compiled.buffer_decisions
    assert len(decisions) == 39
    assert all(d.in_place and d.reason == "IN_PLACE" and d.bytes_copied == 0 for d in decisions)
    text = compiled.as_text("buffers")
    assert text.endswith("39 in place, 0 copies inserted (0 B copied per run)")
    with tk.profile() as profile:
        got = compiled(x, 0.5, 0.45)
    np.testing.assert_allclose(got, _column_filter(x, 0.5, 0.45), rtol=1e-14)
    # the profile counts the column each write reads and writes, not y twice over (x, which
    # the fusion reads one column of, is counted whole, as XLA's fusion rule counts it)
    moved = {k.name: k.bytes_accessed for k in profile.kernels}
    assert all(moved[s.inst.name] < 1.5 * x.nbytes for s in writes)


@pytest.mark.parametrize("backend", BACKENDS)
def test_column_and_row_filling_loops_match_numpy(backend):
    def rows(x):
        y = np.empty_like(x)
        y[0] = x[0]
        for i in range(1, x.shape[0]):
            y[i] = 0.5 * y[i - 1] + x[i] * np.tanh(y[i - 1])
        return y

    x = np.random.default_rng(1).standard_normal((9, 7))
    _same_as_numpy(_column_filter, x, 0.5, 0.45, backend=backend)
    _same_as_numpy(rows, x, backend=backend)


def test_row_by_row_updates_write_in_place():
    def rows(x):
        y = np.zeros((x.shape[0] + 1, x.shape[1]))
        for i in range(x.shape[0]):
            y[i + 1] = y[i] * 0.5 + x[i]
        return y

    x = np.random.default_rng(2).standard_normal((12, 33))
    compiled = _compiled(rows, x)
    assert [d.reason for d in compiled.buffer_decisions] == ["IN_PLACE"] * 11
    np.testing.assert_allclose(compiled(x), rows(x), rtol=1e-14)


def test_a_row_read_and_written_back_through_reshapes_is_updated_in_place():
    """``C[i, :i + 1] += ...`` reads the row it writes as a vector (a reshape there and back):
    each element is still read only where it is written, so the row is updated in place (a
    symmetric rank-k update, row by row)."""
    def syrk(a):
        c = a @ a.T
        for i in range(a.shape[0]):
            c[i, :i + 1] *= 0.5
            for k in range(a.shape[1]):
                c[i, :i + 1] += 1.5 * a[i, k] * a[:i + 1, k]
        return c

    a = np.random.default_rng(10).standard_normal((7, 3))
    compiled = _compiled(syrk, a)
    assert [d.reason for d in compiled.buffer_decisions] == ["IN_PLACE"] * (7 * 4)
    for backend in BACKENDS:
        _same_as_numpy(syrk, a, backend=backend)


def _read_after(x):
    y = np.zeros_like(x)
    y[0] = x[0]
    old = y.copy()
    y[1] = x[1]  # the old value is read after this write: it must be kept
    return y, old * 3.0


def _returned_before(x):
    y = np.zeros_like(x)
    y[0] = x[0]
    old = y.copy()
    y[1] = x[1]  # the old value is a result: it must be kept
    return y, old


def _view_sees_the_write(x):
    y = np.zeros_like(x)
    y[0] = x[0]
    view = y[1]
    y[1, 2] = 5.0  # NumPy: the view sees it
    y[2] = x[2]
    return y, view


@pytest.mark.parametrize("fn, reasons", [
    (_read_after, ["LIVE_AFTER"]),
    (_returned_before, ["PROGRAM_OUTPUT"]),
    (_view_sees_the_write, ["IN_PLACE", "IN_PLACE"]),
])
def test_an_old_value_still_needed_is_copied_first_and_the_plan_says_why(fn, reasons):
    x = np.random.default_rng(3).standard_normal((4, 5))
    compiled = _compiled(fn, x)
    decisions = compiled.buffer_decisions
    assert [d.reason for d in decisions] == reasons
    for d in decisions:
        assert d.bytes_copied == (0 if d.in_place else x.nbytes)
    text = compiled.as_text("buffers")
    if "LIVE_AFTER" in reasons:
        assert "reads the old value of" in text and "afterwards" in text
    if "PROGRAM_OUTPUT" in reasons:
        assert "is also a result of the program" in text
    for backend in BACKENDS:
        _same_as_numpy(fn, x, backend=backend)


def test_a_reader_the_program_puts_before_the_write_keeps_it_in_place():
    """``s = tanh(y)`` comes before ``y[:, 1] = 0`` in the program: the fused kernels run in
    that order too, so the write needs no copy."""
    def f(x, w):
        y = x @ w
        s = np.tanh(y)
        y[:, 1] = 0.0
        return y, s

    x = np.random.default_rng(4).standard_normal((6, 5))
    w = x.T @ x
    compiled = _compiled(f, x, w)
    assert [d.reason for d in compiled.buffer_decisions] == ["IN_PLACE"]
    _same_as_numpy(f, x, w)


def test_scatters_write_in_place_into_a_buffer_the_function_made():
    def f(x, idx):
        y = np.zeros(10)
        y[idx] = x[:3]
        np.add.at(y, idx, 1.0)
        return y

    x, idx = np.arange(5.0), np.array([1, 7, 1])
    compiled = _compiled(f, x, idx)
    assert [d.reason for d in compiled.buffer_decisions] == ["IN_PLACE", "IN_PLACE"]
    scatters = [s for s in compiled.executable.steps
                if s.kind == "kernel" and s.extra["spec"].kind == "scatter"]
    assert scatters and all(s.extra["spec"].in_place and s.work == 3 for s in scatters)
    for backend in BACKENDS:
        _same_as_numpy(f, x, idx, backend=backend)


def test_large_overlapping_writes_split_over_threads_match_numpy():
    """A window read where it is written (a shift by one row or column): the update runs as a
    kernel of its own first, then the window is written in place, split over threads."""
    def f(x):
        y = x * 1.5
        y[1:] = y[:-1] * 0.5 + 1.0
        y[:, 1:] += y[:, :-1]
        return y

    x = np.random.default_rng(5).standard_normal((1100, 1000)).astype(np.float32)
    compiled = _compiled(f, x)
    # (the first write makes y: its fusion computes x * 1.5 around the window)
    assert [d.reason for d in compiled.buffer_decisions] == ["IN_PLACE"]
    assert any(r.reason == "READS_UPDATED_BUFFER" for r in compiled.fusion_decisions)
    executable = compiled.executable
    (write,) = [s for s in executable.steps if s.kind == "kernel" and s.outputs[0] in s.inputs]
    assert executable.threads == 1 or executable.splits(write)
    np.testing.assert_allclose(compiled(x), f(x), rtol=1e-6)


# ---- loops ---------------------------------------------------------------------------------
def _fori_filter(x, a, b):
    y = np.zeros_like(x)
    y[:, 0] = x[:, 0]

    def column(j, y):
        y = y.copy()
        y[:, j] = a * x[:, j] + b * y[:, j - 1]
        return y

    return tk.lax.fori_loop(1, x.shape[1], column, y)


def test_a_fori_loop_fills_its_state_in_place_and_starts_in_the_buffer_it_is_given():
    x = np.random.default_rng(6).standard_normal((32, 20))
    compiled = _compiled(_fori_filter, x, 0.5, 0.45)
    reasons = sorted(d.reason for d in compiled.buffer_decisions)
    # the loop runs in the buffer of y (dead after the loop); its body writes the column into
    # the state; x, read-only in the loop, is neither copied nor written
    assert reasons == ["IN_PLACE_ARGUMENT", "LOOP_STATE_IN_PLACE"], compiled.as_text("buffers")
    assert "0 copies inserted" in compiled.as_text("buffers")
    np.testing.assert_allclose(compiled(x, 0.5, 0.45), _column_filter(x, 0.5, 0.45), rtol=1e-14)
    for backend in ("interpreter", "gpu-simulated"):
        got = tk.jit(_fori_filter, backend=backend)(x, 0.5, 0.45)
        np.testing.assert_allclose(np.asarray(got), _column_filter(x, 0.5, 0.45), rtol=1e-12)


def test_a_shift_register_in_a_loop_computes_its_overlapping_update_then_writes_in_place():
    def shift(x):
        def body(i, h):
            h = h.copy()
            h[1:] = h[:-1]  # reads the rows it writes, shifted: computed first
            h[0] = x[i % x.shape[0]] * 2.0
            return h

        return tk.lax.fori_loop(0, 7, body, np.zeros((5, 3)))

    def shift_numpy(x):
        h = np.zeros((5, 3))
        for i in range(7):
            h[1:] = h[:-1]
            h[0] = x[i % x.shape[0]] * 2.0
        return h

    x = np.random.default_rng(11).standard_normal((4, 3))
    compiled = _compiled(shift, x)
    assert sorted(d.reason for d in compiled.buffer_decisions) == [
        "IN_PLACE", "IN_PLACE_ARGUMENT", "LOOP_STATE_IN_PLACE"
    ]
    for backend in BACKENDS:
        np.testing.assert_array_equal(np.asarray(tk.jit(shift, backend=backend)(x)), shift_numpy(x))


def test_a_loops_initial_state_read_after_the_loop_is_copied_in():
    def f(x):
        y = np.tanh(x)
        z = tk.lax.fori_loop(0, 3, lambda i, v: v * 2.0 + 1.0, y)
        return z, y.sum(axis=0)

    x = np.random.default_rng(7).standard_normal((8, 6))
    compiled = _compiled(f, x)
    assert [d.reason for d in compiled.buffer_decisions if d.instruction.startswith("while")] == [
        "LIVE_AFTER"
    ]
    for backend in BACKENDS:
        got = tk.jit(f, backend=backend)(x)
        y = np.tanh(x)
        np.testing.assert_allclose(np.asarray(got[0]), ((y * 2 + 1) * 2 + 1) * 2 + 1, rtol=1e-12)
        np.testing.assert_allclose(np.asarray(got[1]), y.sum(axis=0), rtol=1e-12)


def test_a_loop_invariant_argument_is_not_copied_and_never_comes_back_as_the_callers_array():
    def f(x):
        return tk.lax.fori_loop(0, 3, lambda i, s: (s[0] + s[1], s[1]), (np.zeros_like(x), x))

    x = np.random.default_rng(8).standard_normal((5, 4))
    keep = x.copy()
    y, x_again = tk.jit(f, backend="cpu")(x)
    np.testing.assert_array_equal(y, 3 * keep)
    np.testing.assert_array_equal(x_again, keep)
    assert not np.shares_memory(x_again, x)
    x_again[...] = 0.0
    np.testing.assert_array_equal(x, keep)
    compiled = _compiled(f, x)
    assert not [d for d in compiled.buffer_decisions if not d.in_place]

    def g(x):  # an invariant the program made: it comes back in its own buffer, read after
        y, t = tk.lax.fori_loop(
            0, 3, lambda i, s: (s[0] + s[1], s[1]), (np.zeros_like(x), np.tanh(x))
        )
        t[0] = 1.0
        return y, t

    compiled = _compiled(g, x)
    reasons = sorted(d.reason for d in compiled.buffer_decisions)
    assert reasons == ["IN_PLACE", "LOOP_STATE_IN_PLACE"], compiled.as_text("buffers")
    for backend in BACKENDS:
        _same_as_numpy(g, x, backend=backend)


def test_a_while_loops_result_taken_from_the_loop_is_written_in_place_afterwards():
    """The loop's result arrays become the program's buffers (no copy out of the loop), and a
    write after the loop goes into them in place; the same call twice gives the same answer
    (no buffer is shared between calls)."""
    def f(x):
        y = tk.lax.fori_loop(0, 4, lambda i, v: v * 0.5 + 1.0, np.tanh(x))
        y[0] = -1.0
        y[2:4] = x[2:4]
        return y

    x = np.random.default_rng(9).standard_normal((6, 3))
    compiled = _compiled(f, x)
    assert [d.reason for d in compiled.buffer_decisions] == [
        "LOOP_STATE_IN_PLACE", "IN_PLACE", "IN_PLACE"
    ]
    for _ in range(2):
        _same_as_numpy(f, x)


# ---- the aliasing analysis, on hand-written HLO ---------------------------------------------
def _module(body: str):
    return tk.hlo.parse("HloModule m\n\nENTRY %main {\n" + body + "\n}\n")


def test_an_old_value_read_through_a_tuple_alias_after_the_write_is_kept():
    """``%y`` is put in a tuple before the write and read back out of it after: the write's
    operand has no later reader of its own, but its buffer does (through the alias). Writing
    in place here gave ``%r`` the new value."""
    module = _module("""
  %p = f64[6]{0} parameter(0)
  %y = f64[6]{0} add(f64[6]{0} %p, f64[6]{0} %p)
  %t = (f64[6]{0}, f64[6]{0}) tuple(f64[6]{0} %y, f64[6]{0} %p)
  %u = f64[2]{0} constant({5, 6})
  %i = s64[] constant(3)
  %w = f64[6]{0} dynamic-update-slice(f64[6]{0} %y, f64[2]{0} %u, s64[] %i)
  %g = f64[6]{0} get-tuple-element((f64[6]{0}, f64[6]{0}) %t), index=0
  %r = f64[6]{0} multiply(f64[6]{0} %g, f64[6]{0} %g)
  ROOT %out = (f64[6]{0}, f64[6]{0}) tuple(f64[6]{0} %w, f64[6]{0} %r)""")
    executable = compile_module(module)
    (decision,) = executable.buffer_decisions
    assert (decision.reason, decision.operand) == ("LIVE_AFTER", "y")
    assert "%r reads the old value of %y" in decision.message
    p = np.arange(6.0)
    w, r = executable([p])
    np.testing.assert_array_equal(w, [0, 2, 4, 5, 6, 10])
    np.testing.assert_array_equal(r, (2 * p) ** 2)


@pytest.mark.parametrize("destination, reason", [
    ("%p", "ARGUMENT"),
    ("%c", "CONSTANT"),
])
def test_arguments_and_constants_are_never_written(destination, reason):
    module = _module(f"""
  %p = f64[4]{{0}} parameter(0)
  %c = f64[4]{{0}} constant({{1, 2, 3, 4}})
  %u = f64[1]{{0}} constant({{9}})
  %i = s64[] constant(1)
  %w = f64[4]{{0}} dynamic-update-slice(f64[4]{{0}} {destination}, f64[1]{{0}} %u, s64[] %i)
  ROOT %s = f64[4]{{0}} add(f64[4]{{0}} %w, f64[4]{{0}} %w)""")
    executable = compile_module(module)
    assert [d.reason for d in executable.buffer_decisions] == [reason]
    p = np.array([10.0, 20.0, 30.0, 40.0])
    base = p if destination == "%p" else np.array([1.0, 2.0, 3.0, 4.0])
    expected = 2 * np.array([base[0], 9.0, base[2], base[3]])
    for _ in range(2):  # a constant written on the first call would change the second
        np.testing.assert_array_equal(executable([p])[0], expected)
        np.testing.assert_array_equal(p, [10.0, 20.0, 30.0, 40.0])


def test_a_write_that_reads_its_destination_through_another_operand_copies():
    module = _module("""
  %p = f64[3]{0} parameter(0)
  %y = f64[3]{0} negate(f64[3]{0} %p)
  %t = (f64[3]{0}) tuple(f64[3]{0} %y)
  %g = f64[3]{0} get-tuple-element((f64[3]{0}) %t), index=0
  %i = s64[] constant(0)
  ROOT %w = f64[3]{0} dynamic-update-slice(f64[3]{0} %y, f64[3]{0} %g, s64[] %i)""")
    executable = compile_module(module)
    assert [d.reason for d in executable.buffer_decisions] == ["READ_TWICE"]
    np.testing.assert_array_equal(executable([np.arange(3.0)])[0], [0.0, -1.0, -2.0])


# ---- random programs mixing writes and reads, against NumPy ----------------------------------
R, C = 5, 6
_ops = st.one_of(
    st.tuples(st.just("column"), st.integers(0, C - 1), st.integers(0, C - 1),
              st.sampled_from([0.5, -1.0, 2.0])),
    st.tuples(st.just("row"), st.integers(0, R - 1), st.integers(0, R - 1),
              st.sampled_from([0.5, -1.0, 2.0])),
    st.tuples(st.just("shift"), st.integers(0, 1), st.integers(-1, 1), st.integers(-1, 1)),
    st.tuples(st.just("keep"), st.integers(0, R - 1), st.booleans()),
    st.tuples(st.just("scale"), st.sampled_from([0.5, 3.0])),
    st.tuples(st.just("scatter"), st.lists(st.integers(0, R - 1), min_size=1, max_size=3),
              st.booleans()),
    st.tuples(st.just("fresh"), st.sampled_from(["tanh", "copy"])),
)


def _random_program(ops, start):
    def program(x):
        w = np.zeros_like(x) if start == "zeros" else x * 1.0
        kept = []
        for op in ops:
            kind = op[0]
            if kind == "column":
                _, j, k, c = op
                w[:, j] = c * w[:, k] + x[:, j]
            elif kind == "row":
                _, i, k, c = op
                w[i, :] = c * w[k, :] + x[i, :]
            elif kind == "shift":  # a block written from an overlapping block of itself
                _, size, dr, dc = op
                r0, c0 = 1, 1
                w[r0:r0 + size + 2, c0:c0 + size + 2] = (
                    w[r0 + dr:r0 + dr + size + 2, c0 + dc:c0 + dc + size + 2] * 0.5 - 1.0
                )
            elif kind == "keep":  # the old row: a copy, or a view that sees later writes
                _, i, copy = op
                kept.append(w[i].copy() if copy else w[i])
            elif kind == "scale":
                w *= op[1]
            elif kind == "scatter":
                _, rows, add = op
                if add:
                    np.add.at(w, np.array(rows), 1.0)
                else:
                    w[np.array(rows)] = x[: len(rows)]
            else:
                w = np.tanh(w) if op[1] == "tanh" else w.copy()
        return (w, *kept)
    return program


@pytest.mark.parametrize("backend", ["cpu", "interpreter"])
def test_random_programs_of_writes_and_reads_match_numpy(backend):
    @settings(max_examples=40, deadline=None)
    @given(st.lists(_ops, min_size=1, max_size=8), st.sampled_from(["zeros", "copy"]))
    def check(ops, start):
        x = np.arange(R * C, dtype=np.float64).reshape(R, C) / 7.0 - 2.0
        fn = _random_program(ops, start)
        got = tk.jit(fn, backend=backend, on_recompile="ignore")(x.copy())
        want = fn(x.copy())
        for g, w in zip(_outputs(got), want, strict=True):
            np.testing.assert_allclose(np.asarray(g), w, rtol=1e-12, atol=1e-12)

    check()
