"""The notebook face in a real browser: JupyterLab on a loopback port, headless Chromium (Debian's
``chromium``, driven by playwright's Python API), the quickstart notebook run cell by cell as a
user runs it. Checks that every dashboard renders (no "Error displaying widget"), that each tab
switches and shows its content, that the IR stage picker changes the text, and that the
interactive timeline zooms (mouse wheel) and shows a span's details on hover. Screenshots go to
``test-artifacts/browser/`` (or ``$TOOLKIT_ARTIFACTS``).

Skips, saying why, when Chromium, JupyterLab or playwright is missing (``.ci/run`` installs
them: ``apt-get install chromium`` and the ``test`` extra)."""
import json
import os
import pathlib
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

pytestmark = pytest.mark.browser

ROOT = pathlib.Path(__file__).resolve().parents[1]
CHROMIUM = next(
    (
        p
        for p in (
            os.environ.get("TOOLKIT_CHROMIUM"),
            shutil.which("chromium"),
            shutil.which("chromium-browser"),
            "/usr/bin/chromium",
        )
        if p and os.path.exists(p)
    ),
    None,
)
ARTIFACTS = pathlib.Path(os.environ.get("TOOLKIT_ARTIFACTS", ROOT / "test-artifacts")) / "browser"

if CHROMIUM is None:
    pytest.skip(
        "no Chromium: apt-get install chromium (Debian), or set TOOLKIT_CHROMIUM",
        allow_module_level=True,
    )
pytest.importorskip("jupyterlab", reason="JupyterLab is not installed: pip install '.[test]'")
playwright_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed: pip install '.[test]'"
)

TIMELINE_CELL = """\
import numpy as np
import toolkit as tk
from toolkit.widgets import Dashboard, TimelineWidget

f = tk.jit(lambda v: np.tanh(v) * 2 + v.sum())
with tk.profile() as prof:
    for n in (1000, 2000, 2000):
        f(np.ones(n))
dashboard = Dashboard(prof, compiled={"f": f.compiled(np.ones(2000))})
dashboard
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on a loopback port serving a copy of the quickstart notebook and a
    notebook that shows a full dashboard; yields its base URL with the token."""
    root = tmp_path_factory.mktemp("lab")
    shutil.copy(ROOT / "notebooks" / "quickstart.ipynb", root / "quickstart.ipynb")
    nb = {
        "cells": [
            {
                "cell_type": "code",
                "execution_count": None,
                "metadata": {},
                "outputs": [],
                "source": TIMELINE_CELL,
            }
        ],
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    (root / "dashboard.ipynb").write_text(json.dumps(nb))
    port, token = _free_port(), secrets.token_hex(16)
    settings = root / ".lab-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    # no news pop-up
    (settings / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(root / ".jupyter"),
        JUPYTER_RUNTIME_DIR=str(root / ".runtime"),
        JUPYTERLAB_SETTINGS_DIR=str(root / ".lab-settings"),
        TOOLKIT_BACKEND="cpu",
    )
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            f"--port={port}",
            "--ip=127.0.0.1",
            f"--IdentityProvider.token={token}",
            *(["--allow-root"] if os.geteuid() == 0 else []),
            f"--ServerApp.root_dir={root}",
            "--ServerApp.disable_check_xsrf=True",
            "--LabApp.news_url=",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ],
        cwd=root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(root / "server.log", "w"),
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
            break
        except OSError:
            if server.poll() is not None:
                pytest.fail("JupyterLab exited: " + (root / "server.log").read_text()[-2000:])
            time.sleep(0.5)
    else:
        server.kill()
        pytest.fail(
            "JupyterLab did not start in 60 s: " + (root / "server.log").read_text()[-2000:]
        )
    yield base, token
    server.terminate()
    try:
        server.wait(10)
    except subprocess.TimeoutExpired:
        server.kill()


@pytest.fixture(scope="module")
def browser():
    with playwright_api.sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=["--no-sandbox", "--disable-dev-shm-usage"],
        )
        yield b
        b.close()


def _open(browser, lab, name):
    base, token = lab
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    # a workspace of its own, so that JupyterLab does not restore the other test's notebook beside
    # it
    workspace = name.replace(".", "-")
    page.goto(f"{base}/lab/workspaces/{workspace}/tree/{name}?token={token}&reset")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    # the kernel is started and idle (the status bar says so) before anything is run
    page.locator("#jp-main-statusbar", has_text="Idle").wait_for(timeout=60_000)
    page.wait_for_timeout(500)
    return page


def _run_all(page, timeout_s=180):
    page.locator(".jp-Notebook").first.click()  # the notebook has the focus the Run menu acts on
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(
        ".lm-Menu-item:not(.lm-mod-disabled) .lm-Menu-itemLabel", has_text="Run All Cells"
    ).first.click()
    deadline = time.time() + timeout_s
    while time.time() < deadline:  # every code cell numbered, none waiting ('[*]')
        prompts = page.locator(".jp-CodeCell .jp-InputPrompt").all_inner_texts()
        if prompts and all(p.strip() not in ("[ ]:", "[*]:", "") for p in prompts):
            return
        time.sleep(0.5)
    raise AssertionError(f"cells did not finish in {timeout_s} s: {prompts}")


def _shot(page, name):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def _no_widget_errors(page):
    text = page.locator(".jp-Notebook").inner_text()
    assert "Error displaying widget" not in text, text[:2000]
    errors = page.locator(
        ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
    ).all_inner_texts()
    assert not [e for e in errors if "Traceback" in e], errors


def _shown_once(page):
    """Once the live dashboard renders, its static copy (the output before it, for viewers with
    no widgets) is hidden: the dashboard shows once, as tabs."""
    page.locator(".widget-tab .lm-TabBar-tab").first.wait_for(state="visible", timeout=30_000)
    statics = page.locator(".toolkit-static")
    assert statics.count() >= 1, "the static dashboard is an output of its own"
    for i in range(statics.count()):
        statics.nth(i).wait_for(state="hidden", timeout=10_000)
    assert page.locator(".widget-tab").count() == statics.count()
    assert all(page.locator(".widget-tab").nth(i).is_visible() for i in range(statics.count()))


def test_quickstart_runs_and_its_dashboard_works(browser, lab):
    page = _open(browser, lab, "quickstart.ipynb")
    _run_all(page)
    page.wait_for_selector(".widget-tab", timeout=30_000)
    _shown_once(page)
    _shot(page, "quickstart")
    _no_widget_errors(page)
    tab = page.locator(".widget-tab").first
    titles = tab.locator(".lm-TabBar-tab").all_inner_texts()
    assert {"Summary", "Fusion", "Kernels", "IR"} <= set(t.strip() for t in titles), titles
    for title in titles:
        tab.locator(".lm-TabBar-tab", has_text=title.strip()).first.click()
        shown = tab.locator(".widget-tab-contents > .lm-Widget:not(.lm-mod-hidden)").first
        shown.wait_for(state="visible", timeout=10_000)
        assert shown.inner_text().strip(), f"tab {title} shows nothing"
    # the IR tab's stage picker changes the text shown
    tab.locator(".lm-TabBar-tab", has_text="IR").first.click()
    panel = tab.locator(".widget-tab-contents > .lm-Widget:not(.lm-mod-hidden)").first
    before = panel.locator("pre").first.inner_text()
    stage = panel.locator("select").nth(1)
    stage.select_option("hlo")
    page.wait_for_timeout(1000)
    after = panel.locator("pre").first.inner_text()
    assert before != after and "HloModule" in after
    _shot(page, "quickstart-ir")


def _opens_on_the_runs(page, svg, lanes):
    """The first view spans the kernels (the runs), not the compilation before them: the
    kernels' bars reach from the plot's left edge to its right, as the browser lays them out."""
    box = svg.bounding_box()
    plot_left, plot_right = 170, box["width"] - 40  # the renderer's margins (LEFT, right gap)
    streams = {i for i, lane in enumerate(lanes) if "stream" in lane}
    bars = page.evaluate("""() => [...document.querySelectorAll('.tk-span')].map(r => ({
        y: +r.getAttribute('y'), x: +r.getAttribute('x'), w: +r.getAttribute('width')}))""")
    kernels = [b for b in bars if round((b["y"] - 8 - 3) / 24) in streams]
    assert kernels, bars
    first, last = min(b["x"] for b in kernels), max(b["x"] + b["w"] for b in kernels)
    width = plot_right - plot_left
    assert first - plot_left < 0.1 * width and plot_right - last < 0.1 * width, \
        (first, last, plot_left, plot_right)
    for bar in bars:  # every bar drawn inside the plot (one reaching past an edge ends there)
        assert plot_left - 1 <= bar["x"] and bar["x"] + bar["w"] <= plot_right + 1, bar
    note = page.locator(".tk-elided").first
    assert note.is_visible() and "ms of compilation before this view" in note.inner_text()
    page.locator(".tk-fit-all").first.click()  # everything: the compilation comes into view
    page.wait_for_timeout(200)
    assert not page.locator(".tk-elided").first.inner_text()
    page.locator(".tk-fit-runs").first.click()
    page.wait_for_timeout(200)


def test_the_timeline_zooms_and_hovers(browser, lab):
    page = _open(browser, lab, "dashboard.ipynb")
    _run_all(page, timeout_s=120)
    page.wait_for_selector(".widget-tab", timeout=30_000)
    _shown_once(page)
    _no_widget_errors(page)
    tab = page.locator(".widget-tab").first
    tab.locator(".lm-TabBar-tab", has_text="Timeline").first.click()
    svg = page.locator(".tk-timeline-svg").first
    svg.wait_for(state="visible", timeout=15_000)
    lanes = page.locator(".tk-lane-label").all_text_contents()
    assert "compilation" in lanes and any("stream" in lane for lane in lanes), lanes
    _opens_on_the_runs(page, svg, lanes)
    _shot(page, "timeline-opening")
    ticks_before = page.locator(".tk-tick").all_text_contents()
    box = svg.bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + box["height"] * 0.5)
    for _ in range(6):
        page.mouse.wheel(0, -300)  # zoom in around the pointer
        page.wait_for_timeout(100)
    ticks_after = page.locator(".tk-tick").all_text_contents()
    assert ticks_after != ticks_before, (ticks_before, ticks_after)
    page.locator(".tk-tick").first.wait_for()
    # hover a span: its details appear
    page.mouse.dblclick(box["x"] + box["width"] * 0.6, box["y"] + 5)  # reset the view
    spans = page.locator(".tk-span")
    widest = max(range(spans.count()), key=lambda i: spans.nth(i).bounding_box()["width"])
    target = spans.nth(widest).bounding_box()
    page.mouse.move(target["x"] + target["width"] / 2, target["y"] + target["height"] / 2)
    tip = page.locator(".tk-timeline-tip")
    tip.wait_for(state="visible", timeout=5_000)
    assert "time:" in tip.inner_text(), tip.inner_text()
    _shot(page, "timeline")
    # and a kernel's details: its kind, rates and source line
    kernels = [i for i in range(spans.count()) if spans.nth(i).get_attribute("y") and
               float(spans.nth(i).get_attribute("y")) > target["height"] * 2]
    kernel = spans.nth(kernels[-1]).bounding_box()
    page.mouse.move(kernel["x"] + kernel["width"] / 2, kernel["y"] + kernel["height"] / 2)
    page.wait_for_timeout(300)
    assert "source:" in tip.inner_text() or "dispatch:" in tip.inner_text(), tip.inner_text()
