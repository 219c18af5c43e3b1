"""Every notebook in notebooks/ runs top to bottom against a real IPython kernel, as
``jupyter nbconvert --to html --execute`` runs it (widget state stored), and its exported page,
opened in headless Chromium with the network cut off, shows the static dashboard: its sections
and tables visible, a screenshot per notebook in ``test-artifacts/notebooks/``."""
import contextlib
import fcntl
import os
import pathlib
import shutil

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
ARTIFACTS = pathlib.Path(os.environ.get("TOOLKIT_ARTIFACTS", ROOT / "test-artifacts")) / "notebooks"
CHROMIUM = next((p for p in (os.environ.get("TOOLKIT_CHROMIUM"), shutil.which("chromium"),
                             shutil.which("chromium-browser"), "/usr/bin/chromium")
                 if p and os.path.exists(p)), None)
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


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
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors, errors


def _offline_page(browser):
    """A page that may load file:// and data: URLs only; every other request is aborted."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    blocked: list[str] = []

    def route(r):
        if r.request.url.startswith(("file://", "data:")):
            r.continue_()
        else:
            blocked.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    return page, blocked


def _visible(locator) -> bool:
    """Shown as a user sees it: laid out with an area, and no ancestor hidden by CSS."""
    box = locator.bounding_box()
    if not box or box["width"] <= 0 or box["height"] <= 0:
        return False
    return locator.evaluate("""e => { for (let n = e; n && n.nodeType === 1; n = n.parentElement) {
        const s = getComputedStyle(n);
        if (s.display === 'none' || s.visibility === 'hidden' || +s.opacity === 0) return false; }
        return true; }""")


@contextlib.contextmanager
def _chromium():
    if CHROMIUM is None:
        pytest.skip("no Chromium: apt-get install chromium (Debian), or set TOOLKIT_CHROMIUM")
    api = pytest.importorskip("playwright.sync_api",
                              reason="playwright is not installed: pip install '.[test]'")
    with api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.mark.browser
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_exported_notebook_shows_the_dashboard_offline(path, shared_dir, tmp_path):
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
    with _chromium() as browser:
        page, blocked = _offline_page(browser)
        page.goto(exported.as_uri(), wait_until="load")
        page.wait_for_timeout(1500)  # scripts that would hide or replace outputs had their turn
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"{path.stem}.png"), full_page=True)
        statics = page.locator(".toolkit-static")
        assert statics.count() == len(expected), (statics.count(), expected)
        for i, sections in enumerate(expected):
            static = statics.nth(i)
            assert _visible(static), f"dashboard {i + 1} of {path.name} is not shown offline"
            headings = static.locator("h2")
            shown = [headings.nth(j).inner_text() for j in range(headings.count())
                     if _visible(headings.nth(j))]
            assert shown == list(sections), (shown, sections)
            tables = static.locator("table")
            unfolded = [tables.nth(j) for j in range(tables.count())
                        if tables.nth(j).evaluate("e => !e.closest('details')")]  # not in a fold
            assert unfolded and all(_visible(t) for t in unfolded), \
                f"a table of dashboard {i + 1} of {path.name} is hidden"
        # every other output (text, pictures, tables) shows too
        outputs = page.locator(".jp-OutputArea-output:not(.jupyter-widgets)")
        hidden = [outputs.nth(j).inner_text()[:80] for j in range(outputs.count())
                  if not _visible(outputs.nth(j)) and outputs.nth(j).inner_text().strip()]
        assert not hidden, hidden
        page.close()
    assert all(not url.startswith("file://") for url in blocked)


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
