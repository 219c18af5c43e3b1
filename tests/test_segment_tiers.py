"""Tiered segments (jitting/segment_tiers.py): a segment between graph breaks runs on the
reference interpreter until its fourth run and compiles then, so a call that traces hundreds
of segments, each run once, compiles none of them, and a loop body that breaks every trip
compiles within the first call."""
import numpy as np
import pytest

import toolkit as tk
from toolkit.jitting.segment_tiers import HOT_RUNS, TieredSegment


def _table(n, seq):
    """A dynamic-programming table filled cell by cell, an int() of a traced comparison in each
    cell (a graph break each: a segment of its own per cell, every segment run once). The
    comparison is of float arithmetic (exact here), which the host does not compute for
    Python (jitting/host_values.py): each break cuts a segment."""
    table = np.zeros((n, n), np.int32)
    for i in range(n - 1, -1, -1):
        for j in range(i + 1, n):
            pair = int(seq[i] * 0.5 + seq[j] * 0.5 == 1.5)
            table[i, j] = max(table[i, j - 1], table[i + 1, j - 1] + pair)
    return table


def _segments(f):
    return f.graph_breaks.segments


def test_segments_run_once_are_interpreted_not_compiled():
    seq = np.random.default_rng(0).integers(0, 4, 9).astype(np.int32)
    f = tk.jit(_table, backend="cpu")
    before = len(f.compiles)
    np.testing.assert_array_equal(f(9, seq), _table(9, seq))
    events = f.compiles[before:]
    segments = [e for e in events if e.signature.startswith("segment")]
    assert len(segments) >= 30 and {e.cache for e in segments} == {"interpreted"}
    assert all(not s.compiled and "interpreted, not compiled" in s.text for s in _segments(f))


def test_a_loop_body_that_breaks_every_trip_compiles_at_its_fourth_trip():
    def halve_until_small(x):
        steps = 0
        while float(np.abs(x).max()) > 1.0:  # a break every trip, the same segment
            x = np.tanh(x) * 0.1 + x * 0.7
            steps += 1
        return x, steps

    x = np.linspace(-40.0, 40.0, 64)
    f = tk.jit(halve_until_small, backend="cpu")
    got, steps = f(x)
    want, want_steps = halve_until_small(x)
    assert steps == want_steps >= HOT_RUNS + 2
    np.testing.assert_allclose(got, want, rtol=1e-12)
    caches = [e.cache for e in f.compiles if e.signature.startswith("segment")]
    assert "interpreted" in caches and any(c != "interpreted" for c in caches)
    hot = [s for s in _segments(f) if s.runs >= HOT_RUNS]
    assert hot and all(s.compiled and s.interpreted_runs == HOT_RUNS - 1 for s in hot)
    assert f"interpreted {HOT_RUNS - 1}x, then compiled" in str(f.graph_breaks)


def test_a_replayed_call_finds_the_segment_compiled_once_it_is_hot():
    """The replay record holds the tiered segment itself: later calls run what it became."""
    def clipped(x, limit):
        if float(x.sum()) > limit:  # one break a call
            return x - limit
        return x + limit

    f = tk.jit(clipped, backend="cpu")
    x = np.arange(4.0)
    for k in range(HOT_RUNS + 2):
        np.testing.assert_array_equal(f(x, 1.0), clipped(x, 1.0))
    tiered = [s for s in _segments(f) if s.runs > HOT_RUNS]
    assert tiered and all(s.compiled for s in tiered)


def test_hot_runs_one_compiles_every_segment_at_once(monkeypatch):
    monkeypatch.setenv("TOOLKIT_SEGMENT_HOT_RUNS", "1")
    seq = np.random.default_rng(1).integers(0, 4, 5).astype(np.int32)
    f = tk.jit(_table, backend="cpu")
    before = len(f.compiles)
    np.testing.assert_array_equal(f(5, seq), _table(5, seq))
    caches = {e.cache for e in f.compiles[before:] if e.signature.startswith("segment")}
    assert caches and "interpreted" not in caches


def test_a_tiered_segment_compiles_once_at_its_hot_run():
    compiled = []

    class Program:
        def __init__(self, name):
            self.name = name

        def execute_leaves(self, arguments):
            return [self.name]

    def compile_now():
        compiled.append(1)
        return Program("compiled")

    segment = TieredSegment(Program("interpreted"), compile_now, 3)
    assert [segment.execute_leaves([]) for _ in range(5)] == \
        [["interpreted"]] * 2 + [["compiled"]] * 3
    assert compiled == [1] and segment.interpreted_runs == 2


@pytest.mark.parametrize("backend", ["interpreter"])
def test_the_interpreter_backend_is_not_tiered(backend):
    f = tk.jit(lambda x: x * 2 if float(x.sum()) > 0 else x, backend=backend)
    np.testing.assert_array_equal(f(np.ones(3)), np.full(3, 2.0))
    assert all(s.interpreted_runs is None for s in _segments(f))
