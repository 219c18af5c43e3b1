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
