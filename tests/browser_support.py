"""Headless Chromium for the tests that check what a browser shows: Debian's ``chromium`` driven
by playwright's Python API. ``chromium()`` skips the test, saying why, where either is missing."""
import contextlib
import os
import pathlib
import shutil

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
ARTIFACTS = pathlib.Path(os.environ.get("TOOLKIT_ARTIFACTS", ROOT / "test-artifacts"))
CHROMIUM = next((p for p in (os.environ.get("TOOLKIT_CHROMIUM"), shutil.which("chromium"),
                             shutil.which("chromium-browser"), "/usr/bin/chromium")
                 if p and os.path.exists(p)), None)
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@contextlib.contextmanager
def chromium():
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


def offline_page(browser, width: int = 1400, height: int = 1000):
    """A page that may load file:// and data: URLs only; every other request is aborted (and
    listed in the second value returned)."""
    page = browser.new_page(viewport={"width": width, "height": height})
    blocked: list[str] = []

    def route(r):
        if r.request.url.startswith(("file://", "data:")):
            r.continue_()
        else:
            blocked.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    return page, blocked


def visible(locator) -> bool:
    """Shown as a user sees it: laid out with an area, and no ancestor hidden by CSS."""
    box = locator.bounding_box()
    if not box or box["width"] <= 0 or box["height"] <= 0:
        return False
    return locator.evaluate("""e => { for (let n = e; n && n.nodeType === 1; n = n.parentElement) {
        const s = getComputedStyle(n);
        if (s.display === 'none' || s.visibility === 'hidden' || +s.opacity === 0) return false; }
        return true; }""")
