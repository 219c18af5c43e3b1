"""Every notebook in notebooks/ runs top to bottom against a real IPython kernel, as
``jupyter nbconvert --to html --execute`` runs it (widget state stored), and its exported page,
opened in headless Chromium with the network cut off, shows the static dashboard: its sections
and tables visible, a screenshot per notebook in ``test-artifacts/notebooks/``."""
import fcntl
import os
import pathlib

import nbformat
import pytest
from browser_support import ARTIFACTS, ROOT, chromium, offline_page, visible
from nbclient import NotebookClient

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert {p.stem for p in NOTEBOOKS} >= {"quickstart", "recompilations", "fusion_explorer",
                                          "roofline_timeline", "gpu"}


@pytest.fixture(scope="session")
def shared_dir(tmp_path_factory):
    """A folder every xdist worker of this session sees (workers' temp folders share a parent)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def executed(path: pathlib.Path, shared_dir: pathlib.Path) -> nbformat.NotebookNode:
    """``path`` run once per test session, as nbconvert --execute runs it (nbclient with its
    defaults: widget state stored); the tests of one notebook share the run, across workers too
    (a file lock: the first executes, the others wait and read its result)."""
    folder = shared_dir / "executed-notebooks" / path.stem
    folder.mkdir(parents=True, exist_ok=True)
    done = folder / "executed.ipynb"
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not done.exists():
                nb = nbformat.read(path, as_version=4)
                assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), \
                    "commit notebooks without outputs"
                NotebookClient(nb, timeout=300, kernel_name="python3",
                               resources={"metadata": {"path": str(folder)}}).execute()
                nbformat.write(nb, done)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return nbformat.read(done, as_version=4)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path, shared_dir):
    nb = executed(path, shared_dir)
    errors = [
        o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"
    ]
    assert not errors, errors


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


@pytest.mark.browser
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_exported_notebook_shows_the_dashboard_offline(path, shared_dir, tmp_path, browser):
    """nbconvert's HTML with its defaults: widget outputs become views that need the widget
    manager from a CDN, absent offline. The static dashboard, an output of its own, must show:
    its section headings and tables visible in the browser, and every other output too."""
    nbconvert = pytest.importorskip("nbconvert", reason="nbconvert not installed")
    nb = executed(path, shared_dir)
    assert nb.metadata.get("widgets") or not _widget_outputs(nb), "nbconvert stores widget state"
    page_html, _ = nbconvert.HTMLExporter().from_notebook_node(nb)
    exported = tmp_path / f"{path.stem}.html"
    exported.write_text(page_html)
    expected = _dashboards(nb)
    page, blocked = offline_page(browser)
    try:
        page.goto(exported.as_uri(), wait_until="load")
        page.wait_for_timeout(1000)  # scripts that would hide or replace outputs had their turn
        (ARTIFACTS / "notebooks").mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "notebooks" / f"{path.stem}.png"), full_page=True)
        statics = page.locator(".toolkit-static")
        assert statics.count() == len(expected), (statics.count(), expected)
        for i, sections in enumerate(expected):
            static = statics.nth(i)
            assert visible(static), f"dashboard {i + 1} of {path.name} is not shown offline"
            headings = static.locator("h2")
            shown = [headings.nth(j).inner_text() for j in range(headings.count())
                     if visible(headings.nth(j))]
            assert shown == list(sections), (shown, sections)
            tables = static.locator("table")
            unfolded = [tables.nth(j) for j in range(tables.count())
                        if tables.nth(j).evaluate("e => !e.closest('details')")]  # not in a fold
            assert unfolded and all(visible(t) for t in unfolded), \
                f"a table of dashboard {i + 1} of {path.name} is hidden"
        # every other output (text, pictures, tables) shows too
        outputs = page.locator(".jp-OutputArea-output:not(.jupyter-widgets)")
        hidden = [outputs.nth(j).inner_text()[:80] for j in range(outputs.count())
                  if not visible(outputs.nth(j)) and outputs.nth(j).inner_text().strip()]
        assert not hidden, hidden
    finally:
        page.close()
    # the page asked for the widget manager (a CDN), and was refused: this is the offline view
    assert blocked or not _widget_outputs(nb), "no request was blocked: was the page offline?"


def _widget_outputs(nb) -> list:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
            if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]


def _dashboards(nb) -> list[tuple[str, ...]]:
    """The section names of each static dashboard the notebook displayed, in order."""
    import re

    found = []
    for c in nb.cells:
        for o in c.get("outputs", []):
            text = o.get("data", {}).get("text/html", "")
            if "toolkit-static" in text:
                found.append(tuple(re.findall(r"<h2>([^<]*)</h2>", text)))
    return found


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
