"""Every notebook in notebooks/ runs top to bottom against a real IPython kernel."""
import pathlib

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((pathlib.Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert {p.stem for p in NOTEBOOKS} >= {"quickstart", "recompilations", "fusion_explorer",
                                          "roofline_timeline", "gpu"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path, tmp_path):
    nb = nbformat.read(path, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), "commit notebooks without outputs"
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors, errors


def test_nbconvert_with_its_defaults_shows_the_static_dashboard(tmp_path):
    """nbconvert --execute stores widget state, and then renders a widget output as the widget
    alone (from a CDN, absent offline). The static dashboard is an output of its own, so the
    exported page shows it with no network."""
    nbconvert = pytest.importorskip("nbconvert", reason="nbconvert not installed")
    import html as html_lib
    import re

    nb = nbformat.read(next(p for p in NOTEBOOKS if p.stem == "quickstart"), as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3", store_widget_state=True,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert nb.metadata.get("widgets"), "nbclient stored the widget state, as nbconvert does by default"
    page, _ = nbconvert.HTMLExporter().from_notebook_node(nb)
    visible = re.sub(r"<script\b.*?</script>", "", page, flags=re.S)  # what shows without running scripts
    text = html_lib.unescape(re.sub(r"<[^>]+>", " ", visible))
    assert "toolkit-static" in visible
    for words in ("Summary", "Fusion", "Kernels", "compiles"):
        assert words in text, words


def _run_cells(sources, tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    return nb.cells


def _text(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream") + "".join(
        o.get("data", {}).get("text/plain", "") for o in cell.outputs if "data" in o)


def test_a_kernel_names_cells_and_fails_xla_cells_with_their_own_error(tmp_path):
    """In a real kernel (cells compiled as /tmp/ipykernel_PID/HASH.py): recompile banners, the
    HLO's source_file and errors say ``cell [n], line m``; an %%xla cell's runtime error is the
    cell's own (ename NameError, not UsageError), one line, and the cell fails."""
    cells = _run_cells([
        "%load_ext toolkit\nimport numpy as np, toolkit as tk\n"
        "from toolkit.profiler.report import recompile_text",
        "a = np.ones((4, 4), np.float32)",
        "%%xla --quiet\nz = np.tanh(a) + 1",
        "a = np.ones((6, 4), np.float32)",
        "%%xla --quiet\nz = np.tanh(a) + 1",
        "@tk.jit(on_recompile='ignore')\ndef g(x):\n    return np.sin(x) * 2",
        "g(np.ones(3))\ng(np.ones(4))\nprint(recompile_text(g.recompiles[-1]))\n"
        "print(g.lower(np.ones(3)).as_text())",
        "%%xla --quiet\nr = a * 2\nt = r + undefined_name",
    ], tmp_path)
    count = [c.execution_count for c in cells]
    banner = _text(cells[4])
    site = f"(defined cell [{count[2]}], line 2) at call site cell [{count[4]}], line 1"
    assert site in banner, banner
    printed = _text(cells[6])
    site = f"(defined cell [{count[5]}], line 1) at call site cell [{count[6]}], line 2"
    assert site in printed, printed
    assert f'source_file="cell [{count[5]}]" source_line=3' in printed, printed
    assert "ipykernel_" not in banner + printed
    errors = [o for o in cells[7].outputs if o.output_type == "error"]
    assert len(errors) == 1 and errors[0].ename == "NameError", cells[7].outputs
    assert errors[0].traceback == [
        f"NameError at cell [{count[7]}], line 3: name 'undefined_name' is not defined"]
    assert all(o.output_type == "error" for o in cells[7].outputs)
