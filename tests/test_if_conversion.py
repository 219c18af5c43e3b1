"""If-conversion of pure helpers (frontend.if_conversion): a data-dependent ``if`` in a small
pure function of the traced module is a select, not a graph break; anything that could make
the merged result differ from Python's (an impure helper, types that differ between the paths,
a path that needs another concrete value) runs the helper plainly, breaking as before. Every
test compares with NumPy: values, dtypes, signs of zero, and errors."""
from __future__ import annotations

import types

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import toolkit as tk
from toolkit.frontend.if_conversion import MAX_PATHS
from toolkit.frontend.purity import pure_helper

from helpers import assert_same_bits

BACKENDS = ["interpreter", "cpu", "gpu-simulated"]
CALLS: list = []  # what impure helpers append to (a side effect NumPy shows once per call)
LIMIT = 3  # a module constant helpers may read


_same = assert_same_bits


# ---- helpers, as scientific code writes them -----------------------------------------------
def match(b1, b2):
    if b1 + b2 == LIMIT:
        return 1
    else:
        return 0


def nussinov(N, seq):
    table = np.zeros((N, N), np.int32)
    for i in range(N - 1, -1, -1):
        for j in range(i + 1, N):
            if j - 1 >= 0:
                table[i, j] = max(table[i, j], table[i, j - 1])
            if i + 1 < N:
                table[i, j] = max(table[i, j], table[i + 1, j])
            if j - 1 >= 0 and i + 1 < N:
                if i < j - 1:
                    table[i, j] = max(table[i, j], table[i + 1, j - 1] + match(seq[i], seq[j]))
                else:
                    table[i, j] = max(table[i, j], table[i + 1, j - 1])
            for k in range(i + 1, j):
                table[i, j] = max(table[i, j], table[i, k] + table[k + 1, j])
    return table


def clipped_step(x, lo, hi):  # two decisions, three paths (and a helper calling a helper)
    if x < lo and hi > lo:
        return lo
    elif x > hi:
        return _plain_max(hi, lo)
    return x


def _plain_max(a, b):
    return np.maximum(a, b)


def walk(xs, bounds):
    out = np.empty_like(xs)
    for i in range(xs.shape[0]):
        out[i] = clipped_step(xs[i], bounds[0], bounds[1])
    return out


def oriented(v):  # arrays on both sides
    if v.sum() > 0:
        return v * 2.0
    return -v


def orient_rows(m):
    return np.stack([oriented(m[i]) for i in range(m.shape[0])])


def signed_zero(x):
    if x >= 0:
        return 0.0
    return -0.0


def zeros_of(xs):
    return np.array([signed_zero(xs[i]) for i in range(xs.shape[0])]) + xs * 0


def int_or_float(x):  # a Python int on one side, a float on the other: Python's types differ
    if x > 0:
        return 1
    return 0.5


def mixed(xs):
    return xs * 0 + int_or_float(xs[0])


def logged(x):  # impure: runs once per call, as in NumPy
    CALLS.append(1)
    if x > 0:
        return 1.0
    return 2.0


def uses_logged(xs):
    return xs * logged(xs[0])


def pick(x, i):  # the path not taken would index out of range: its error must not be raised
    if i < x.shape[0]:
        return x[i]
    return x[0]


def picks(x, idx):
    return pick(x, idx[0]) + pick(x, idx[1])


def counts(x):  # a path needs int() of a traced value: the plain call breaks, as before
    if x[0] > 0:
        return np.zeros(int(x[1]))
    return np.ones(2)


def uses_counts(x):
    return counts(x).sum() + x[0]


def many(x):  # more paths than MAX_PATHS
    total = 0.0
    for k in range(MAX_PATHS):
        if x[k] > 0:
            total = total + 1.0
    return total


def uses_many(x):
    return x * many(x)


# ---- tests ---------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_dynamic_programming_fill_with_a_branching_helper_is_one_program(backend):
    rng = np.random.default_rng(5)
    n = 7
    jitted = tk.jit(nussinov, backend=backend)
    for _ in range(3):
        seq = rng.integers(0, 4, n).astype(np.int32)
        _same(nussinov(n, seq), jitted(n, seq))
    report = jitted.graph_breaks
    assert report.break_count == 0, report
    assert len(jitted._cache) == 1  # one program for every sequence


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_decisions_merge_into_three_paths_with_numpys_values(backend):
    xs = np.array([-3.0, -0.0, 0.0, 0.5, 2.0, 7.5, np.nan, np.inf, -np.inf])
    jitted = tk.jit(walk, backend=backend)
    for bounds in ((0.0, 1.0), (1.0, 0.0), (-1.0, 5.0), (-0.0, 0.0)):
        _same(walk(xs, np.array(bounds)), jitted(xs, np.array(bounds)))
    assert jitted.graph_breaks.break_count == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_array_results_select_and_zero_signs_survive(backend):
    m = np.array([[1.0, -2.0, 0.5], [-1.0, -0.0, 0.25], [0.0, 0.0, -0.0]])
    _same(orient_rows(m), tk.jit(orient_rows, backend=backend)(m))
    xs = np.array([-1.0, 2.0, -0.0, 0.0])
    _same(zeros_of(xs), tk.jit(zeros_of, backend=backend)(xs))


def test_python_ints_from_a_helper_keep_the_arrays_dtype():
    seq = np.array([1, 2, 0, 3], np.int32)

    jitted = tk.jit(nussinov)
    out = jitted(4, seq)
    assert out.dtype == np.int32
    _same(nussinov(4, seq), out)


def big_or_one(b):
    if b > 0:
        return 1000
    return 1


def test_a_helpers_python_ints_that_fit_need_no_overflow_check():
    # (a select of the constants 1 and 0 fits int32 whatever the condition: NumPy 2's check
    # that a computed Python int fits is not built; 1 or 1000 meeting int8 still checks, on
    # every call)
    table = np.arange(4, dtype=np.int32)
    fits = tk.jit(lambda t, s: t + match(s[0], s[1]))
    text = fits.lower(table, table).as_text(metadata=False)
    assert text.count(" compare(") == 1  # (the helper's condition; no range check)
    _same(table + match(table[1], table[2]), fits(table, table[1:]))
    small = table.astype(np.int8)
    checked = tk.jit(lambda t, s: t + big_or_one(s[0]))
    assert checked.lower(small, table).as_text(metadata=False).count(" compare(") > 1
    _same(small + 1, checked(small, -table))
    with pytest.raises(OverflowError, match="out of bounds for int8"):
        checked(small, table + 1)
    with pytest.raises(OverflowError, match="out of bounds for int8"):
        small + big_or_one(table[1])  # (NumPy's)


def test_paths_that_return_different_python_types_break_as_before():
    for xs in (np.array([2.0]), np.array([-2.0])):
        jitted = tk.jit(mixed)
        _same(mixed(xs), jitted(xs))
        assert jitted.graph_breaks.break_count == 1


def test_an_impure_helper_runs_once_per_call_as_in_numpy():
    xs = np.array([1.0, -1.0])
    CALLS.clear()
    expected = uses_logged(xs)
    assert len(CALLS) == 1
    jitted = tk.jit(uses_logged)
    _same(expected, jitted(xs))
    assert len(CALLS) == 2  # once more, not once per path
    _same(expected, jitted(xs))
    assert len(CALLS) == 3  # and once on each later call (Python state: python_effects)
    report = jitted.graph_breaks
    assert {site.reason for site in report.breaks} == {
        "bool()", "Python state changed: global `CALLS` grew or shrank"}


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_the_error_of_a_path_not_taken_is_not_raised_and_the_taken_ones_is(backend):
    x = np.array([1.5, -2.5, 4.0])
    jitted = tk.jit(picks, backend=backend)
    _same(picks(x, np.array([1, 5])), jitted(x, np.array([1, 5])))  # x[5]: the path not taken
    assert jitted.graph_breaks.break_count == 0
    with pytest.raises(IndexError):
        picks(x, np.array([-7, 0]))
    with pytest.raises(IndexError):
        jitted(x, np.array([-7, 0]))


def test_a_path_that_needs_another_concrete_value_breaks_as_before():
    for x in (np.array([1.0, 3.0]), np.array([-1.0, 3.0])):
        jitted = tk.jit(uses_counts)
        _same(uses_counts(x), jitted(x))
        assert jitted.graph_breaks.break_count >= 1


def test_more_paths_than_the_limit_break_as_before():
    x = np.linspace(-1, 1, MAX_PATHS)
    jitted = tk.jit(uses_many)
    _same(uses_many(x), jitted(x))
    assert jitted.graph_breaks.break_count >= 1


def test_fullgraph_functions_may_call_branching_pure_helpers():
    seq = np.array([1, 2, 3, 0, 2], np.int32)
    _same(nussinov(5, seq), tk.jit(nussinov, fullgraph=True, static_argnums=0)(5, seq))


# ---- which helpers count as pure -----------------------------------------------------------
def _stores_into(x):
    if x > 0:
        x[0] = 1
    return x


def _adds_in_place(x):
    if x[0] > 0:
        x += 1
    return x


def _draws(x):
    if x > 0:
        return np.random.rand()
    return 0.0


def _writes_out(x, y):
    if x[0] > 0:
        np.add(x, 1, out=y)
    return y


def _prints(x):
    if x > 0:
        print("positive")
    return x


def _sorts(x):
    if x[0] > 0:
        x.sort()
    return x


def _appends(x):
    if x > 0:
        CALLS.append(x)
    return x


def _calls_impure(x):
    if x > 0:
        return _prints(x)
    return x


def _no_branch(x):
    return x + 1


def _reads_numpy_and_math(x):
    if np.abs(x).max() > LIMIT and abs(float(LIMIT)) > 0:
        return np.linalg.norm(x) + np.pi
    return x.sum()


@pytest.mark.parametrize("fn, pure", [
    (match, True), (clipped_step, True), (oriented, True), (_reads_numpy_and_math, True),
    (_stores_into, False), (_adds_in_place, False), (_draws, False), (_writes_out, False),
    (_prints, False), (_sorts, False), (_appends, False), (_calls_impure, False),
    (_no_branch, False), (logged, False)])
def test_which_helpers_are_pure(fn, pure):
    assert pure_helper(fn) is pure


def converted_then_break(x, seq):
    total = x * 0
    for i in range(seq.shape[0]):
        total = total + match(seq[i], seq[0])
    if total.sum() > 1:  # a real break after the converted helper calls
        total = total * 2
    return total


@pytest.mark.parametrize("fn, inputs", [
    (converted_then_break, [(np.zeros(2, np.int64), np.array([1, 2, 2, 0], np.int32)),
                            (np.zeros(2, np.int64), np.array([1, 2, 2, 0], np.int32)),
                            (np.zeros(2, np.int64), np.array([0, 3, 0, 3], np.int32)),
                            (np.zeros(2, np.int64), np.array([1, 2, 2, 0], np.int32))]),
    (uses_counts, [(np.array([1.0, 3.0]),), (np.array([1.0, 3.0]),), (np.array([2.0, 3.0]),),
                   (np.array([-1.0, 2.0]),)]),
])
def test_converted_and_fallen_back_helpers_replay_with_numpys_results(fn, inputs):
    jitted = tk.jit(fn)
    for args in inputs:
        _same(fn(*args), jitted(*args))
    assert jitted.graph_breaks.replayed_calls >= 1


def test_the_report_says_which_helpers_merged_and_why_others_did_not():
    text = str(tk.explain(nussinov, 5, np.array([1, 2, 0, 3, 1], np.int32)))
    assert "no graph breaks" in text
    assert "match (" in text and "merged from up to 2 paths" in text
    text = str(tk.explain(mixed, np.array([2.0])))
    assert "int_or_float (" in text and "the paths return an int and a float" in text
    text = str(tk.explain(uses_counts, np.array([1.0, 3.0])))
    assert "counts (" in text and "a path needs a concrete value (int())" in text
    text = str(tk.explain(uses_many, np.linspace(-1, 1, MAX_PATHS)))
    assert f"more than {MAX_PATHS} paths" in text


# ---- random helpers ------------------------------------------------------------------------
_LEAVES = {  # by family: a helper mostly returns one kind of value (merged), sometimes mixes
    "arrays": ["a", "b", "a + b", "a * 2", "b - a", "abs(a)", "a * 0 - 0.0", "np.sqrt(abs(b))"],
    "floats": ["2.5", "-0.0", "0.0", "1.0", "-1.5", "float('inf')"],
    "ints": ["0", "1", "-1", "7", "LIMIT"],
    "mixed": ["0", "2.5", "a", "np.float64(3.0)", "a > b", "None"],
}
_TESTS = ["a > 0", "b < a", "a == b", "a + b > 1", "b != 0", "a >= LIMIT", "not (a < b)",
          "a > 0 and b > 0", "a < 0 or b > 2"]


@st.composite
def _helpers(draw):
    """A module with a random pure helper of nested ifs over two traced scalars, and a caller
    that accumulates its results over pairs of an array's elements."""
    lines = ["import numpy as np", "LIMIT = 1", "def h(a, b):"]
    leaves = _LEAVES[draw(st.sampled_from(sorted(_LEAVES)))]
    depth = draw(st.integers(1, 3))
    for level in range(depth):
        pad = "    " * (level + 1)
        lines.append(f"{pad}if {draw(st.sampled_from(_TESTS))}:")
        lines.append(f"{pad}    return {draw(st.sampled_from(leaves))}")
        if draw(st.booleans()):
            lines.append(f"{pad}elif {draw(st.sampled_from(_TESTS))}:")
            lines.append(f"{pad}    return {draw(st.sampled_from(leaves))}")
        lines.append(f"{pad}else:")
    lines.append("    " * (depth + 1) + f"return {draw(st.sampled_from(leaves))}")
    lines += ["def f(xs):",
              "    out = np.zeros(xs.shape[0])",
              "    for i in range(xs.shape[0]):",
              "        out[i] = out[i - 1] + h(xs[i], xs[(i + 1) % xs.shape[0]])",
              "    return out"]
    values = draw(st.lists(st.sampled_from([-2.0, -1.0, -0.0, 0.0, 0.5, 1.0, 3.0, np.nan]),
                           min_size=2, max_size=5))
    return "\n".join(lines), np.array(values)


@settings(max_examples=40, deadline=None)
@given(_helpers())
def test_random_branching_helpers_match_numpy(case):
    source, xs = case
    m = types.ModuleType("random_helper_module")
    exec(compile(source, "<random helper>", "exec"), m.__dict__)
    try:
        expected = m.f(xs.copy())
    except Exception as e:  # (NumPy's own error: toolkit must raise one too)
        with pytest.raises(type(e)):
            tk.jit(m.f, backend="interpreter")(xs.copy())
        return
    got = tk.jit(m.f, backend="interpreter")(xs.copy())
    _same(expected, got)


def complex_zero(x):
    if x > 0:
        return complex(1.0, 0.0)
    return complex(1.0, -0.0)


def complex_of(xs):
    return complex_zero(xs[0])


def test_complex_zeros_keep_the_sign_of_their_parts():
    for xs in (np.array([1.0]), np.array([-1.0])):
        jitted = tk.jit(complex_of, backend="interpreter")
        got, want = np.asarray(jitted(xs)), np.asarray(complex_of(xs))
        assert got == want and np.signbit(got.imag) == np.signbit(want.imag)
        assert jitted.graph_breaks.break_count == 0


def _ufunc_at(x):
    if x[0] > 0:
        np.add.at(x, [0], 1.0)
    return x


def _draws_imported(x):
    from_random = RAND
    if x > 0:
        return from_random()
    return 0.0


RAND = np.random.rand


def test_writing_library_calls_are_impure():
    assert pure_helper(_ufunc_at) is False  # ufunc.at writes its first argument
    assert pure_helper(_draws_imported) is False  # (a generator's state: a global read)
    assert pure_helper(_reads_numpy_and_math) is True
