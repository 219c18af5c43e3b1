"""Graph breaks: a jitted function that needs a concrete value runs the program traced so far,
hands Python the value, and traces on; segments are cached under their guards. Every test
compares with NumPy itself (values, dtypes, arguments written in place)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

import toolkit as tk
from toolkit.frontend.errors import TracerConversionError, UnsupportedNumpyError

BACKENDS = ["interpreter", "cpu", "gpu-simulated"]


def _same(expected, got):
    if isinstance(expected, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(expected)
        for e, g in zip(expected, got):
            _same(e, g)
        return
    e, g = np.asarray(expected), np.asarray(got)
    assert e.shape == g.shape, (e.shape, g.shape)
    assert e.dtype == g.dtype, (e.dtype, g.dtype)
    if e.dtype.kind in "fc":  # (the compiler may round a chain of additions once less)
        np.testing.assert_allclose(g, e, rtol=1e-14, atol=0)
    else:
        np.testing.assert_array_equal(g, e)
    assert np.array_equal(np.signbit(e), np.signbit(g)) if e.dtype.kind == "f" else True


def _check(fn, *args, backend="cpu"):
    """fn jitted matches fn run by NumPy, on copies of the arguments (which it may write), in
    its first call (traced), its second (traced and recorded) and its third (replayed)."""
    jitted = tk.jit(fn, backend=backend)
    for _ in range(3):
        np_args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        tk_args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        expected = fn(*np_args)
        got = jitted(*tk_args)
        _same(expected, got)
        for a, b in zip(np_args, tk_args):
            if isinstance(a, np.ndarray):
                _same(a, b)
    return jitted


# ---- the kinds of break --------------------------------------------------------------------
def branch(x):
    y = x * 2.0
    if y.sum() > 0:
        return y + 1.0
    return y - 1.0


def residual_loop(x, tol):
    residual = np.abs(x).max()
    while residual > tol:
        x = x * 0.5
        residual = np.abs(x).max()
    return x


def int_bounds(x):
    n = int(x[0])
    return x[:n].sum(), x[n:] * 2


def traced_slice_bounds(x, ptr):
    return [x[ptr[i]:ptr[i + 1]].sum() for i in range(len(ptr) - 1)]


def masks(x):
    big = x[x > 0.5]
    rows = x.reshape(4, -1)[rows_mask(x)]
    return big, rows, np.nonzero(x > 0.2)[0], np.where(x < 0.3)[0], np.flatnonzero(x > 0.9)


def rows_mask(x):
    return x.reshape(4, -1).sum(axis=1) > 1.0


def uniques(x):
    return np.unique(np.floor(x * 4)), np.argwhere(x.reshape(4, -1) > 0.5)


def conversions(x):
    total = float(x.sum())
    count = int((x > 0.5).sum())
    flag = bool(x[0] > 0.5)
    items = x[:3].tolist()
    first = x[1].item()
    host = np.asarray(x * 2)  # a real NumPy array from here on
    return x * total + count + flag + sum(items) + first + host.mean()


def written_in_place(x, out):
    out += x
    if out.sum() > 3:
        out *= 2
    x[0] = -0.0
    return out.sum()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn, make", [
    (branch, lambda r: (r.standard_normal(8),)),
    (residual_loop, lambda r: (r.standard_normal(8), 0.05)),
    (int_bounds, lambda r: (np.array([3.0, 1.0, 2.0, 5.0, 4.0]),)),
    (traced_slice_bounds, lambda r: (r.standard_normal(10), np.array([0, 3, 3, 7, 10]))),
    (masks, lambda r: (r.random(16),)),
    (uniques, lambda r: (r.random(16),)),
    (conversions, lambda r: (r.random(8),)),
    (written_in_place, lambda r: (r.random(6), r.random(6))),
], ids=lambda v: getattr(v, "__name__", ""))
def test_each_kind_of_break_matches_numpy(fn, make, backend):
    rng = np.random.default_rng(7)
    jitted = _check(fn, *make(rng), backend=backend)
    report = jitted.graph_breaks
    assert report.break_count >= 1
    if fn is not uniques:  # (np.unique breaks twice inside one operation: traced from there)
        assert report.replayed_calls == 1, report.text


def test_dtypes_and_integer_values_cross_breaks():
    def f(a, b):
        c = a * b  # int32 * int32 stays int32
        if c.max() > 10:
            c = c - np.int32(3)
        return c, c.astype(np.float32) / 2
    _check(f, np.arange(6, dtype=np.int32), np.full(6, 3, np.int32))


# ---- guards ----------------------------------------------------------------------------------
def test_a_branch_taken_the_other_way_compiles_that_segment_only():
    f = tk.jit(branch, numpy_fallback=False)  # (on 4 elements NumPy would take over)
    x = np.ones(4)
    f(x)
    compiled = len(f._breaks.cache)
    assert compiled == 2  # to the break, and from it to the return
    np.testing.assert_array_equal(f(-x), branch(-x))
    assert len(f._breaks.cache) == compiled + 1  # the segment before the break was reused
    report = f.graph_breaks
    assert report.return_guard_failures == 1
    for _ in range(3):  # both branches now hit
        f(x), f(-x)
    assert len(f._breaks.cache) == compiled + 1
    assert f.graph_breaks.breaks[0].count == 8


def test_new_mask_values_of_the_same_count_do_not_recompile():
    f = tk.jit(lambda x: np.sort(x[x > 0])[-1])  # (a sort needs the selection's length)
    f(np.array([1.0, -1.0, 2.0, -2.0]))
    compiled = len(f._breaks.cache)
    assert f(np.array([-1.0, 1.0, -2.0, 2.0])) == 2.0  # other positions, same count
    assert len(f._breaks.cache) == compiled
    assert f(np.array([1.0, 1.0, 3.0, -2.0])) == 3.0  # a new count: the rest compiles again
    assert len(f._breaks.cache) == compiled + 1


def test_the_python_glue_runs_on_every_call_as_numpy_would():
    seen = []

    def f(x):
        seen.append("before")
        if x.sum() > 0:
            seen.append("positive")
        return x + 1

    g = tk.jit(f)
    g(np.ones(3))
    g(np.ones(3))
    g(-np.ones(3))
    assert seen == ["before", "positive"] * 2 + ["before"]


def test_runtime_errors_in_a_segment_raise_numpys_error():
    def f(x, i):
        y = x[i]  # a traced index out of range: NumPy's IndexError
        if y > 0:
            return y
        return -y
    with pytest.raises(IndexError):
        tk.jit(f)(np.ones(3), np.int64(5))


# ---- where breaks cannot happen ---------------------------------------------------------------
def test_fullgraph_makes_a_break_an_error():
    with pytest.raises(TracerConversionError, match="bool()"):
        tk.jit(branch, fullgraph=True)(np.ones(3))
    with pytest.raises(UnsupportedNumpyError, match="traced boolean mask"):
        tk.jit(lambda x: x[x > 0], fullgraph=True)(np.ones(3))
    with pytest.raises(UnsupportedNumpyError, match="data-dependent size"):
        tk.jit(lambda x: np.nonzero(x), fullgraph=True)(np.ones(3))


def test_no_break_inside_a_loop_body_or_a_derivative():
    calls = []

    def body(i, x):
        calls.append(i)  # (a helper that writes is not pure: its if is not made a select)
        if x.sum() > 0:  # inside the loop's program: no segment can end here
            return x
        return x
    with pytest.raises(TracerConversionError):
        tk.jit(lambda x: tk.lax.fori_loop(0, 2, body, x))(np.ones(3))

    def loss(w):
        if w.sum() > 0:
            return (w * w).sum()
        return w.sum()
    with pytest.raises(TracerConversionError):
        tk.jit(tk.grad(loss))(np.ones(3))


def test_a_function_without_breaks_stays_one_program():
    f = tk.jit(lambda x: x * 2 + 1)
    f(np.ones(3))
    assert f.cache_size == 1 and len(f._breaks.cache) == 0
    assert f.graph_breaks.break_count == 0


# ---- the report ------------------------------------------------------------------------------
def test_explain_lists_each_break_with_reason_line_and_fix():
    report = tk.explain(residual_loop, np.linspace(-1, 1, 9), 0.1)
    np.testing.assert_array_equal(report.result, residual_loop(np.linspace(-1, 1, 9), 0.1))
    (loop,) = report.breaks
    assert loop.reason == "bool()" and loop.source == "while residual > tol:"
    assert loop.location.endswith(f":{residual_loop.__code__.co_firstlineno + 2}")
    assert "tk.lax.while_loop" in loop.suggestion
    assert loop.count == report.break_count == 5  # 1, 0.5, 0.25, 0.125 > 0.1, then 0.0625
    assert report.graph_count == 6
    assert len(report.segments) >= 2
    assert all(s.instructions > 0 for s in report.segments)
    text = report.text
    assert "5 graph break(s) over 1 call(s)" in text and "Python glue" in text
    assert "while residual &gt; tol" in report._repr_html_()


def test_the_report_counts_guard_failures_with_the_values_seen():
    def f(x):
        n = int(x[0])
        return x * n
    g = tk.jit(f)
    for v in (1.0, 2.0, 3.0):
        g(np.array([v, 0.0]))
    (site,) = g.graph_breaks.breaks
    assert site.reason == "int()"
    assert site.count == 3
    assert g.graph_breaks.return_guard_failures == 2  # x * 1, x * 2, x * 3: three programs
    assert "static_argnums" in site.suggestion
    assert site.bucketing == ""  # the values changed, not the shapes


def test_segments_that_compile_again_for_new_shapes_get_the_bucketing_advice():
    def grow(prompt, steps):
        ids = prompt.tolist()
        for _ in range(steps):
            # (float arithmetic: a segment computes it, not the host, so each new length of
            # ids compiles that segment again)
            ids.append(int((np.array(ids) * 0.5).sum() + prompt[0]) % 7)
        return np.array(ids)

    report = tk.explain(tk.jit(grow, static_argnums=1), np.array([1, 2]), 4)
    np.testing.assert_array_equal(report.result, grow(np.array([1, 2]), 4))
    site = next(b for b in report.breaks if b.reason == "int()")
    assert site.count == 4 and site.compiles == 4
    assert "powers of two" in site.bucketing and "s64[2]" in site.bucketing
    assert "shapes:" in report.text


def test_the_profile_records_segments_and_glue():
    f = tk.jit(branch)
    f(np.ones(3))
    with tk.profile() as prof:
        f(np.ones(3))
    events = prof.graph_breaks
    assert [e.reason for e in events] == ["bool()", "return"]
    assert all(e.duration > 0 and e.glue >= 0 and not e.compiled for e in events)


# ---- random programs -------------------------------------------------------------------------
_OPS = [np.sin, np.cos, np.tanh, lambda v: v * 1.5, lambda v: v - 0.25, np.abs, np.exp2]


@given(ops=st.lists(st.integers(0, len(_OPS) - 1), min_size=1, max_size=8),
       breaks=st.lists(st.booleans(), min_size=8, max_size=8),
       kinds=st.lists(st.integers(0, 3), min_size=8, max_size=8))
def test_random_programs_with_breaks_anywhere_match_numpy(ops, breaks, kinds):
    def program(x):
        acc = x
        for k, op in enumerate(ops):
            acc = _OPS[op](acc)
            if breaks[k]:
                kind = kinds[k]
                if kind == 0 and acc.sum() > 0:  # a branch
                    acc = acc + 1.0
                elif kind == 1:  # a mask: a data-dependent length, summed back to a scalar
                    acc = acc * acc[acc > 0].size
                elif kind == 2:
                    acc = acc * float(acc.mean())
                else:
                    acc = acc[: int(np.abs(acc[0]) * 3) % acc.size + 1].sum() + acc
        return acc

    x = np.linspace(-2, 2, 7)
    expected = program(x)
    got = tk.jit(program)(x)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    assert got.dtype == expected.dtype


def test_segments_and_glue_are_spans_in_the_chrome_trace_and_the_summary():
    from toolkit.profiler.chrome_trace import chrome_trace
    from toolkit.widgets.report import graph_break_section

    f = tk.jit(branch)
    with tk.profile() as prof:
        f(np.ones(3))
    spans = [e for e in chrome_trace(prof.events)["traceEvents"]
             if e.get("cat") in ("segment", "python_glue")]
    assert [e["cat"] for e in spans] == ["python_glue", "segment"] * 2
    assert spans[1]["name"].startswith("branch: segment to bool() at ")
    assert spans[1]["args"]["compiled"] is True
    summary = prof.summary()
    assert "graph breaks: 1" in summary and "branch: bool() at" in summary
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from toolkit.plots.timeline import timeline

    fig, ax = plt.subplots()
    artists = timeline(prof, ax=ax, window="all")
    assert "graph segments" in artists["lanes"] and len(artists["segments"]) == 4
    plt.close(fig)
    section = graph_break_section(prof)
    assert "<h3>Graph breaks</h3>" in section and "bool()" in section


def test_values_that_cross_a_break_stay_on_the_device(monkeypatch):
    """On a device backend the values a segment hands to the next are device arrays; only the
    value Python asked for is copied to the host."""
    import toolkit.jitting.graph_breaks as graph_breaks
    from toolkit.backends.gpu import DeviceArray

    def f(x):
        y = np.sin(x) * 2.0
        if y.sum() > 0:  # one scalar to the host
            y = y + 1.0
        return y

    carried = []
    resume = graph_breaks.Breaker._resume

    def spy(self, live, values, moved):
        rebound = resume(self, live, values, moved)
        carried.extend(type(v) for _, v in self.bound.values())
        return rebound

    monkeypatch.setattr(graph_breaks.Breaker, "_resume", spy)
    x = np.linspace(0, 1, 8)
    got = tk.jit(f, backend="gpu-simulated")(x)
    np.testing.assert_allclose(np.asarray(got), f(x), rtol=1e-12)
    assert DeviceArray in carried


def _segment_parameters(jitted) -> list[int]:
    return sorted(s.parameters for s in jitted.graph_breaks.segments)


def test_an_array_python_made_is_one_parameter_however_often_it_is_read():
    """After a break, a NumPy array read by many operations of a segment is one parameter of
    it (a loop reading it every trip does not make one a trip); written by Python between two
    reads, it is read anew, as NumPy reads it."""
    def reads(x):
        scale = float(x.sum() > 0)  # a break
        w = np.arange(x.size, dtype=np.float64) + scale
        for _ in range(20):
            x = x * 0.5 + w
        return x

    def written(x):
        scale = float(x.sum() > 0)
        w = np.arange(x.size, dtype=np.float64) + scale
        y = x + w
        w[0] = -7.0  # Python writes the array between two reads
        return y + w

    x = np.linspace(-1.0, 2.0, 6)
    for fn, most in ((reads, 3), (written, 4)):
        jitted = tk.jit(fn, backend="cpu")
        for value in (x, -x, x):
            np.testing.assert_array_equal(jitted(value), fn(value))
        # the last segment's parameters: x and the value asked for (carried over the break),
        # then w once (twice when written in between)
        assert max(_segment_parameters(jitted)) == most, jitted.graph_breaks.text


def _misses(cache, keys) -> int:
    missed = 0
    for key in keys:
        if cache.get(key) is None:
            cache.put(key, ("compiled", key))
            missed += 1
    return missed


def test_the_segment_cache_keeps_most_of_a_call_with_more_segments_than_it_holds():
    """A loop that breaks on data every trip runs more distinct segments per call than the
    cache holds: least-recently-used order would evict each one just before its next use and
    recompile all of them on every call; bimodal insertion keeps most of them."""
    from toolkit.jitting.segment_cache import SegmentCache

    cache = SegmentCache(8)
    cycle = list(range(12))
    assert _misses(cache, cycle) == 12
    for _ in range(3):
        assert _misses(cache, cycle) <= 12 - 7  # all but one of the 8 it holds are hits
    assert len(cache) == 8


def test_the_segment_cache_still_moves_on_to_a_new_set_of_segments():
    from toolkit.jitting.segment_cache import SegmentCache

    cache = SegmentCache(8)
    for _ in range(2):
        _misses(cache, range(8))
    new = list(range(100, 104))  # the old segments are never used again
    calls = 0
    while _misses(cache, new) and calls < 200:
        calls += 1
    assert calls < 200 and all(cache.get(k) is not None for k in new)
