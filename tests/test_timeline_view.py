"""The timeline opens on the execution: the kernels, copies and cache-hit calls fill the view,
and the compilation before them (tens of ms against runs of microseconds) is noted in its lane,
not drawn across the view. The static picture here; tests/test_browser.py checks the widget as
the browser draws it."""
import matplotlib.pyplot as plt
import numpy as np
import pytest

import toolkit as tk
from toolkit.profiler.timeline_window import execution_window, origin_of
from toolkit.widgets.timeline_widget import TimelineWidget, timeline_data


@pytest.fixture(scope="module")
def compiled_then_run():
    """One compile (LLVM: tens of ms), then 20 runs of a few µs each: the quickstart's story."""
    f = tk.jit(lambda v: np.tanh(v) * 2 + 1, backend="cpu")
    x = np.ones(256, np.float32)
    with tk.profile() as prof:
        for _ in range(20):
            f(x)
    return prof


def _runs_ms(prof):
    """The runs' span: their kernels and their cache-hit dispatches (a dispatch's Python around
    its kernel belongs to the run; under load a preempted one stretches it, and the view with
    it, which a kernels-only span did not allow for)."""
    origin = origin_of(prof)
    spans = [(k.start, k.start + k.duration) for k in prof.kernels]
    spans += [(d.start, d.start + d.duration) for d in prof.dispatches if d.cache_hit]
    return (min(s for s, _ in spans) - origin) * 1e3, (max(e for _, e in spans) - origin) * 1e3


def test_the_profile_is_mostly_compilation(compiled_then_run):
    first, last = _runs_ms(compiled_then_run)
    compile_ms = sum(c.duration for c in compiled_then_run.compiles) * 1e3
    assert compile_ms > 2 * (last - first), "the case the opening view is for"


def test_the_static_timeline_opens_on_the_runs(compiled_then_run):
    art = tk.plot.timeline(compiled_then_run)
    lo, hi = art["axes"].get_xlim()
    first, last = _runs_ms(compiled_then_run)
    assert lo <= first and last <= hi, ((lo, hi), (first, last))
    assert (last - first) / (hi - lo) > 0.85, "the runs fill the view"
    notes = [t.get_text() for t in art["elided"]]
    assert len(notes) == 1 and "ms of compilation before this view" in notes[0]
    everything = tk.plot.timeline(compiled_then_run, window="all")["axes"].get_xlim()
    assert everything[0] == 0.0 and everything[1] >= last
    assert everything[1] - everything[0] > 2 * (hi - lo)
    with pytest.raises(ValueError, match="window='everything'"):
        tk.plot.timeline(compiled_then_run, window="everything")
    plt.close("all")


def test_the_widget_opens_on_the_runs(compiled_then_run):
    data = timeline_data(compiled_then_run)
    first, last = _runs_ms(compiled_then_run)
    lo, hi = data["runs"]
    assert lo <= first and last <= hi and (last - first) / (hi - lo) > 0.85
    widget = TimelineWidget(compiled_then_run)
    assert widget.window == data["runs"] == widget.runs


def test_a_profile_that_ran_nothing_opens_on_everything():
    with tk.profile() as prof:
        tk.jit(lambda v: v + 1, backend="cpu").lower(np.ones(4)).compile()
    assert execution_window(prof) is None
    art = tk.plot.timeline(prof)
    assert art["axes"].get_xlim()[0] == 0.0 and not art["elided"]
    assert TimelineWidget(prof).window == []
    plt.close("all")


def test_a_narrow_window_on_a_long_session_draws(compiled_then_run, tmp_path):
    """Labels of spans far outside the view are not drawn: at thousands of axis widths away
    their text overflowed FreeType's rasteriser when the figure was saved."""
    first, _ = _runs_ms(compiled_then_run)
    art = tk.plot.timeline(compiled_then_run, window=(first, first + 1e-4))
    art["axes"].figure.savefig(tmp_path / "narrow.png")
    lo, hi = art["axes"].get_xlim()
    assert all(lo <= t.get_position()[0] <= hi for t in art["labels"])
    plt.close("all")
