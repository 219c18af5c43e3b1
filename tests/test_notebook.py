"""The notebook face through a real IPython shell: magics, dashboard widget, static HTML."""
import html.parser
import json
import re

import numpy as np
from IPython import get_ipython
import pytest
from IPython.core.error import UsageError
from IPython.testing.globalipapp import start_ipython
from IPython.utils.capture import capture_output

import toolkit as tk
from toolkit.widgets.dashboard import Dashboard
from toolkit.widgets.report import report_html

# Roofline measures ceilings: slow
TABS = "--show summary,recompilations,fusion,kernels,timeline,ir"


@pytest.fixture(scope="module")
def ip():
    shell = start_ipython() or get_ipython()  # one shell per process, whoever starts it
    shell.display_formatter.active_types = shell.display_formatter.format_types  # as a notebook has
    shell.run_cell("%load_ext toolkit")
    shell.run_cell("import numpy as np\nimport toolkit as tk")
    return shell


def run(ip, code):
    with capture_output() as out:
        result = ip.run_cell(code)
    return result, out


def test_cell_magic_binds_outputs_and_shows_a_dashboard(ip):
    ip.user_ns["x"] = np.random.default_rng(0).standard_normal((8, 128)).astype(np.float32)
    ip.user_ns["scale"] = 2.0
    result, out = run(ip, f"%%xla {TABS} -o res\nm = np.max(x, axis=-1, keepdims=True)\n"
                          "e = np.exp(x - m) * scale\ny = e / e.sum(axis=-1, keepdims=True)\n")
    assert result.error_in_exec is None, out.stderr
    x = ip.user_ns["x"]
    ref = np.exp(x - x.max(-1, keepdims=True)) * 2
    np.testing.assert_allclose(ip.user_ns["y"], ref / ref.sum(-1, keepdims=True), rtol=1e-5)
    res = ip.user_ns["res"]
    assert set(res.outputs) == {"m", "e", "y"} and res.profile.compiles
    # two outputs: see Dashboard._ipython_display_
    static, widget = out.outputs[-2].data, out.outputs[-1].data
    assert {"text/plain", "text/html"} <= set(
        static
    ) and "application/vnd.jupyter.widget-view+json" in widget
    assert "Fusion" in static["text/html"] and "toolkit-static" in static["text/html"]
    assert "toolkit profile" in static["text/plain"]


def test_rerun_with_a_new_shape_leads_with_the_recompilation_cause(ip):
    cell = "%%xla --quiet\nz = np.tanh(a) + 1\n"
    ip.user_ns["a"] = np.ones((4, 4), np.float32)
    run(ip, cell)
    ip.user_ns["a"] = np.ones((6, 4), np.float32)
    _, out = run(ip, cell)
    first = out.stdout.splitlines()[0]
    assert re.match(r"RECOMPILE #2 of xla_cell \(defined cell \[\d+\], line 2\) at call site "
                    r"cell \[\d+\], line 1: cost", first), first
    assert "a.shape[0]: now 6, was 4" in out.stdout
    assert ip.user_ns["z"].shape == (6, 4)


def test_static_values_are_part_of_the_key(ip):
    ip.user_ns["b"] = np.ones(3, np.float32)
    for n in (2, 3):
        ip.user_ns["n"] = n
        run(ip, "%%xla --quiet -o r\nw = b * n\n")
    assert list(ip.user_ns["w"]) == [3, 3, 3]
    assert ip.user_ns["r"].recompiled


def test_repeat_times_steady_state_runs(ip):
    ip.user_ns["c"] = np.ones(1000, np.float32)
    _, out = run(ip, "%%xla --quiet --repeat 5 --warmup 2 -o t\nd = np.exp(c)\n")
    res = ip.user_ns["t"]
    assert len(res.timings) == 5 and res.best <= res.median
    assert "5 runs after 2 warm-up: best" in out.stdout and "compile time excluded" in out.stdout


def test_trace_option_writes_a_chrome_trace(ip, tmp_path):
    path = tmp_path / "cell.json"
    ip.user_ns["c"] = np.ones(10, np.float32)
    run(ip, f"%%xla --quiet --trace {path}\nd = c * 2\n")
    assert "traceEvents" in json.loads(path.read_text())


def _failed(result, out, message, usage=True):
    """The cell failed (Run All stops, nbconvert exits non-zero), with one line and no traceback;
    ``usage``: as a bad magic invocation (IPython's ``UsageError:``), else as the cell's own
    error."""
    shown = out.stderr + out.stdout
    assert result.error_in_exec is not None
    assert message in shown, shown
    assert "Traceback" not in shown
    if not usage:
        assert "UsageError" not in shown and message in shown.strip().splitlines()[0], shown
        assert not isinstance(result.error_in_exec, UsageError)


def test_errors_fail_the_cell_and_point_at_its_line_without_a_traceback(ip):
    ip.user_ns["q"] = np.ones(3, np.float32)
    result, out = run(ip, "%%xla --quiet --fullgraph\nr = q * 2\nif r.sum() > 0:\n    s = r\n")
    count = ip.execution_count  # run_cell without history: every cell is this one's number
    _failed(result, out, "TracerConversionError: bool() was called on a traced value at "
            f"cell [{count}], line 3", usage=False)
    assert type(result.error_in_exec).__name__ == "TracerConversionError"
    result, out = run(ip, "%%xla --quiet\nr = q * 2\nt = r + undefined_name\n")
    _failed(result, out, f"NameError at cell [{count}], line 3: name 'undefined_name' is not "
            "defined", usage=False)
    assert isinstance(result.error_in_exec, NameError)
    result, out = run(ip, "%%xla --quiet --backend tpu\nr = q * 2\n")
    _failed(result, out, "unknown backend 'tpu'; choose from")
    result, out = run(ip, "%%xla --quiet\nr = q *\n")
    _failed(result, out, f"SyntaxError at cell [{count}], line 2")


def test_bare_xla_hlo_shows_the_last_xla_cell(ip):
    ip.user_ns["hx"] = np.ones((2, 3), np.float32)
    result, _ = run(ip, "%%xla --quiet\nhy = np.tanh(hx) * 3\n")
    assert result.error_in_exec is None
    result, out = run(ip, "%xla_hlo --stage hlo")
    assert result.error_in_exec is None, out.stderr
    text = out.outputs[-1].data["text/plain"]
    assert "ENTRY" in text and "tanh(" in text and "f32[2,3]" in text


def test_xla_recompiles_counts_what_xla_hlo_compiled(ip):
    run(ip, "_hlo_softmax = tk.jit(lambda x: np.exp(x) / np.exp(x).sum())\n_hlo_x = np.ones(5)")
    result, out = run(ip, "%xla_hlo _hlo_softmax(_hlo_x)")
    assert result.error_in_exec is None, out.stderr
    result, out = run(ip, "%xla_recompiles _hlo_softmax")
    text = out.outputs[-1].data["text/plain"]
    assert "nothing compiled yet" not in text and "1 compiles of 1 function(s)" in text, text
    result, out = run(ip, "%xla_hlo _hlo_softmax(np.ones(7))")  # a new shape: a recompile
    result, out = run(ip, "%xla_recompiles _hlo_softmax")
    assert "_hlo_x.shape[0]" in out.outputs[-1].data["text/plain"] or \
        "x.shape[0]: now 7, was 5" in out.outputs[-1].data["text/plain"], out.outputs[-1].data


def test_bad_options_fail_with_usage_and_one_line(ip):
    result, out = run(ip, "%%xla --bogus\ny = 1\n")
    _failed(result, out, "unrecognized arguments: --bogus")
    assert "%%xla [--backend" in out.stderr
    result, out = run(ip, "%%xla --show nonsense\ny = 1\n")
    _failed(result, out, "unknown tab(s) nonsense")


def test_underscore_names_stay_local_and_out_chooses_the_outputs(ip):
    ip.user_ns["z"] = np.arange(4.0)
    result, out = run(ip, "%%xla --quiet -o r1\n_m = z.max()\nw = z - _m\n")
    assert result.error_in_exec is None and set(ip.user_ns["r1"].outputs) == {"w"}
    result, out = run(ip, "%%xla --quiet -o r2 --out v\nu = z * 2\nv = u + 1\n")
    assert result.error_in_exec is None and set(ip.user_ns["r2"].outputs) == {"v"}
    result, out = run(ip, "%%xla --quiet --out nope\nu = z * 2\n")
    _failed(result, out, "--out names nope, which the cell does not assign")


def test_the_dashboard_says_what_returning_intermediates_costs(ip):
    ip.user_ns["x"] = np.random.default_rng(0).standard_normal((8, 128)).astype(np.float32)
    result, out = run(
        ip,
        "%%xla --quiet -o r3\nm = np.max(x, axis=-1, keepdims=True)\ne = np.exp(x - m)\n"
        "y = e / e.sum(axis=-1, keepdims=True)\n",
    )
    assert result.error_in_exec is None
    notes = ip.user_ns["r3"].profile.notes
    # (in the order the cell assigns them)
    assert len(notes) == 1 and "m, e are intermediates" in notes[0] and "--out y" in notes[0]
    assert "e (f32[8,128], 0.00 MB)" in notes[0]
    assert "note: m, e are intermediates" in ip.user_ns["r3"].profile.summary()
    result, out = run(
        ip,
        "%%xla --quiet -o r4\n_m = np.max(x, axis=-1, keepdims=True)\n_e = np.exp(x - _m)\n"
        "y = _e / _e.sum(axis=-1, keepdims=True)\n",
    )
    assert ip.user_ns["r4"].profile.notes == []


def test_help_is_not_run_as_code(ip):
    result, out = run(ip, "%xla_profile --help")
    assert result.error_in_exec is None and "profile every tk.jit function" in out.stdout


def test_line_magics(ip):
    run(
        ip,
        "f = tk.jit(lambda v: np.exp(v) * 2)\nv = np.ones(4, np.float32)\nf(v)\n"
        "f(np.ones(5, np.float32))",
    )
    _, out = run(ip, "%xla_hlo f(v) --stage optimized_hlo")
    page = out.outputs[-1].data["text/html"]
    assert "<b>HloModule</b>" in page and "kind=" in page and "<b>fusion</b>" in page
    _, out = run(ip, "%xla_hlo --stage hlo f(v)")
    assert "exponential" in out.outputs[-1].data["text/html"]
    result, out = run(ip, "%xla_hlo g(v)")
    _failed(result, out, "cannot evaluate 'g(v)': NameError")
    assert out.outputs == [] or True
    _, out = run(ip, "%xla_recompiles f")
    assert "v.shape[0]: now 5, was 4" in out.outputs[-1].data["text/plain"]
    _, out = run(ip, "%xla_profile f(v); f(v)")
    assert "_xla_profile" in ip.user_ns and len(ip.user_ns["_xla_profile"].dispatches) == 2


def _profile():
    def evil(x):
        return np.exp(x) / np.exp(x).sum()

    evil.__name__ = "<script>alert(1)</script>"
    f = tk.jit(evil)
    with tk.profile() as prof:
        f(np.ones(4, np.float32))
        f(np.ones(5, np.float32))
    return prof, {"<script>": f.lower(np.ones(4, np.float32)).compile()}


class _Balance(html.parser.HTMLParser):
    VOID = {"br", "img", "meta", "hr", "input", "link"}

    def __init__(self):
        super().__init__()
        self.stack, self.errors = [], []

    def handle_starttag(self, tag, attrs):
        if tag not in self.VOID:
            self.stack.append(tag)
        if tag == "script":
            self.errors.append("script tag")
        for k, v in attrs:
            if k in ("src", "href") and v and not v.startswith("data:"):
                self.errors.append(f"external reference {v}")

    def handle_startendtag(self, tag, attrs):  # <img .../> opens and closes itself
        self.handle_starttag(tag, attrs)
        if tag not in self.VOID:
            self.stack.pop()

    def handle_endtag(self, tag):
        if not self.stack or self.stack.pop() != tag:
            self.errors.append(f"unbalanced </{tag}>")


def test_static_html_is_well_formed_self_contained_and_escaped():
    prof, compiled = _profile()
    page = report_html(prof, None, compiled, full_document=True)
    checker = _Balance()
    checker.feed(page)
    assert not checker.errors and not checker.stack, (checker.errors, checker.stack)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>" not in page
    assert "data:image/png;base64," in page  # plots inline


def test_dashboard_widget_tree_and_state():
    prof, compiled = _profile()
    dash = Dashboard(prof, None, compiled)
    tab = dash.widget()
    state = tab.get_state()
    assert state["titles"] == (
        "Summary",
        "Recompilations",
        "Fusion",
        "Kernels",
        "Timeline",
        "Roofline",
        "IR",
    )
    fusion = tab.children[2]
    pick, table = fusion.children[:2]
    reasons = [o for o in pick.options if o != "all"]
    pick.value = reasons[0]
    assert reasons[0] in table.value
    # the static report's tables
    assert "class='tk-report'" in table.value and "text-align:right" in table.value
    assert "class='tk-report'" in tab.children[3].children[1].value  # the kernel table too
    chooser, detail = fusion.children[2], fusion.children[3]
    assert "exponential" in detail.value and "source" in detail.value  # the fusion's instructions
    assert len(chooser.options) >= 1
    ir = tab.children[6]
    (_, stage), text = ir.children[0].children, ir.children[1]
    stage.value = "hlo"
    assert "HloModule" in text.value and "&lt;" in text.value or "HloModule" in text.value
    bundle = dash._repr_mimebundle_()
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == tab.model_id


def test_a_rerun_keeps_the_story_of_its_compile(ip):
    ip.user_ns["k"] = np.ones((4, 8), np.float32)
    cell = "%%xla --quiet -o rr\nw2 = np.exp(k - k.max(axis=-1, keepdims=True))\n"
    run(ip, cell)
    first = ip.user_ns["rr"].profile
    result, out = run(ip, cell)
    again = ip.user_ns["rr"].profile
    assert result.error_in_exec is None and not again.compiles
    assert len(again.fusion_decisions) == len(first.fusion_decisions) > 0
    assert "cached: compiled earlier" in again.summary()


def test_call_sites_in_cells_read_as_cell_and_line(ip):
    from toolkit.frontend.source_info import SourceLocation

    result, _ = run(
        ip, "import toolkit.frontend.source_info as _si\n_loc_here = _si.user_location(1)\n"
    )
    loc = ip.user_ns["_loc_here"]
    count = ip.compile._filename_map.get(loc.file)
    assert count is not None and str(loc) == f"cell [{count}], line 2"
    assert str(SourceLocation("/srv/model.py", 7, "f")) == "/srv/model.py:7"


def test_kernels_and_residuals_of_code_in_a_cell_name_the_cell(ip):
    """The kernel table, the fusions' sources and the residuals table say ``cell [n], line k``
    for code defined in a cell, not the kernel's temporary file name."""
    code = ("import numpy as np, toolkit as tk\n"
            "def _cell_loss(w, x):\n"
            "    h = np.tanh(x @ w)\n"
            "    return np.sum(h * h)\n"
            "_cell_step = tk.jit(tk.grad(_cell_loss))\n"
            "_cell_args = (np.ones((4, 3)), np.ones((2, 4)))\n"
            "_cell_step(*_cell_args)\n"
            "with tk.profile() as _cell_prof:\n"
            "    _cell_step(*_cell_args)\n"
            "_cell_residuals = _cell_step.lower(*_cell_args).compile().residuals_text()\n")
    result, _ = run(ip, code)
    assert result.error_in_exec is None, result.error_in_exec
    summary = ip.user_ns["_cell_prof"].summary()
    residuals = ip.user_ns["_cell_residuals"]
    count = result.execution_count
    assert f"cell [{count}], line" in summary, summary
    assert f"cell [{count}], line 3" in residuals, residuals
    assert "ipykernel_" not in summary + residuals and ".py:" not in residuals


def test_a_cell_that_breaks_its_graph_runs_in_segments_and_shows_them(ip):
    ip.user_ns["gq"] = np.array([0.5, -1.0, 2.0])
    result, out = run(ip, "%%xla -o gres\nr = gq * 2\nif r.sum() > 0:\n    s = r + 1\nelse:\n"
                          "    s = r - 1\n")
    assert result.error_in_exec is None, out.stderr
    np.testing.assert_array_equal(ip.user_ns["s"], np.array([0.5, -1.0, 2.0]) * 2 + 1)
    res = ip.user_ns["gres"]
    assert res.compiled is None  # no one program: segments
    events = res.profile.graph_breaks
    assert [e.reason for e in events] == ["bool()", "return"]
    page = report_html(res.profile)
    assert "Graph breaks" in page and "bool()" in page


def test_ranks_runs_the_cell_on_host_devices_with_its_collectives_in_the_dashboard(ip):
    """``%%xla --ranks 4 --split x,y,per_example``: the cell is every device's program; the
    data-parallel gradient is psum'd; split outputs are assembled, the others agree."""
    rng = np.random.default_rng(1)
    ip.user_ns.update(x=rng.standard_normal((16, 3)), y=rng.standard_normal(16),
                      w=rng.standard_normal(3))
    result, out = run(ip, "%%xla --ranks 4 --split x,y,per_example --show summary,timeline "
                          "-o spmd\n_err = x @ w - y\nper_example = _err ** 2\n"
                          "grad = tk.lax.psum(2 * x.T @ _err, 'ranks') / 16\n")
    assert result.error_in_exec is None, out.stderr
    x, y, w = (ip.user_ns[n] for n in "xyw")
    np.testing.assert_allclose(ip.user_ns["per_example"], (x @ w - y) ** 2, rtol=1e-13)
    np.testing.assert_allclose(ip.user_ns["grad"], 2 * x.T @ (x @ w - y) / 16, rtol=1e-12)
    prof = ip.user_ns["spmd"].profile
    assert {c.device for c in prof.collectives} == {0, 1, 2, 3}
    assert {k.device for k in prof.kernels} >= {"device 0", "device 3"}
    html = out.outputs[-2].data["text/html"]
    assert "communication share" in html and "device 3 collectives" not in html  # (a plot)
    # an output the devices do not agree on, left unsplit: JAX's replication check names it
    # before anything runs
    result, out = run(ip, "%%xla --quiet --ranks 4 --split x\nlocal = x.sum(axis=0)\n")
    assert result.error_in_exec is not None
    assert "replicated across mesh axis 'ranks'" in out.stdout + out.stderr
    result, out = run(ip, "%%xla --quiet --ranks 4 --split nothing\nq2 = x * 2\n")
    assert "--split names nothing" in out.stdout + out.stderr
    result, out = run(ip, "%%xla --quiet --ranks 4 --split x,q3 --repeat 3 -o timed\n"
                          "q3 = x * 2\n")
    assert result.error_in_exec is None and "3 runs after 1 warm-up" in out.stdout
    assert len(ip.user_ns["timed"].timings) == 3
