"""The interactive timeline's data (what the browser renders; tests/test_browser.py drives the
renderer itself): lanes in order, spans with their details, recompilation markers."""
import numpy as np

import toolkit as tk
from toolkit.widgets import TimelineWidget, timeline
from toolkit.widgets.timeline_widget import timeline_data


def test_timeline_data_lanes_spans_and_markers():
    f = tk.jit(lambda v: np.tanh(v) * 2, backend="cpu")
    with tk.profile() as prof:
        f(np.ones(8))
        f(np.ones(16))  # a recompilation
        f(np.ones(16))
    data = timeline_data(prof)
    assert (
        data["lanes"][:2] == ["compilation", "host dispatch"] and "cpu:0 stream 0" in data["lanes"]
    )
    kernels = [s for s in data["spans"] if data["lanes"][s["lane"]].startswith("cpu:0")]
    assert kernels and all(s["dur"] >= 0 and s["start"] >= 0 for s in data["spans"])
    details = dict(kernels[0]["details"])
    assert {"kernel", "kind", "time", "launch", "source"} <= set(details)
    assert "test_timeline_widget.py" in details["source"]
    assert len(data["markers"]) == 1 and "16" in data["markers"][0]["cause"]
    widget = timeline(prof)
    assert (
        isinstance(widget, TimelineWidget)
        and widget.lanes == data["lanes"]
        and len(widget.spans) == len(data["spans"])
    )


def test_a_differentiated_program_has_forward_and_backward_lanes():
    x = np.random.default_rng(0).standard_normal((16, 8))
    g = tk.jit(tk.grad(lambda w: np.sum(np.tanh(x @ w) ** 2)), backend="cpu")
    g(np.ones((8, 8)))
    with tk.profile() as prof:
        g(np.ones((8, 8)))
    lanes = timeline_data(prof)["lanes"]
    assert lanes.index("cpu:0 stream 0 (forward)") < lanes.index("cpu:0 stream 0 (backward)")
