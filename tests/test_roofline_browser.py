"""The static dashboard's roofline as a browser shows it: headless Chromium (playwright), no
network, twelve crowded kernels and seven self-contradicting ceilings. The screenshot goes to
``test-artifacts/roofline/`` (or ``$TOOLKIT_ARTIFACTS``)."""
import os
import pathlib
import shutil

import pytest

from test_roofline import STALE, crowded_profile

pytestmark = pytest.mark.browser

ROOT = pathlib.Path(__file__).resolve().parents[1]
CHROMIUM = next((p for p in (os.environ.get("TOOLKIT_CHROMIUM"), shutil.which("chromium"),
                             "/usr/bin/chromium") if p and os.path.exists(p)), None)
ARTIFACTS = pathlib.Path(os.environ.get("TOOLKIT_ARTIFACTS", ROOT / "test-artifacts")) / "roofline"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]

if CHROMIUM is None:
    pytest.skip("no Chromium: apt-get install chromium, or set TOOLKIT_CHROMIUM",
                allow_module_level=True)
playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")


def test_the_static_dashboard_shows_a_readable_roofline(tmp_path):
    from toolkit.roofline import contradictions
    from toolkit.widgets.dashboard import Dashboard

    doubted = STALE.__class__(STALE.device, STALE.items, STALE.measured_at, STALE.load,
                              tuple(contradictions(STALE)))
    page_path = tmp_path / "dashboard.html"
    Dashboard(crowded_profile(), doubted, sections=("Kernels", "Roofline")).save(str(page_path))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.route("**/*", lambda route: route.continue_()  # offline: only the file itself
                       if route.request.url.startswith("file:") else route.abort())
            page.goto(page_path.as_uri())
            image = page.locator("img[alt='roofline']")
            image.scroll_into_view_if_needed()
            assert image.is_visible()
            shown = image.evaluate(
                "i => ({complete: i.complete, width: i.naturalWidth, height: i.naturalHeight, "
                "display: getComputedStyle(i).display})")
            assert shown["complete"] and shown["width"] > 600 and shown["height"] > 300, shown
            assert shown["display"] != "none"
            box = image.bounding_box()
            assert box["width"] > 500 and box["height"] > 250, box
            assert box["x"] + box["width"] <= 1400 + 1, box  # inside the page, not cut off
            image.screenshot(path=str(ARTIFACTS / "static-dashboard-roofline.png"))
            page.screenshot(path=str(ARTIFACTS / "static-dashboard.png"), full_page=True)
        finally:
            browser.close()
