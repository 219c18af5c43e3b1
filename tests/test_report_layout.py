"""The demo's report (``python -m toolkit demo``) as a reader sees it in Chromium at 1400 px:
the page uses the width, and no text runs off a right edge: fix hints and HLO lines wrap
within their boxes. A screenshot goes to ``test-artifacts/report/``."""
import pytest
from browser_support import ARTIFACTS, chromium, offline_page

from toolkit.__main__ import main

pytestmark = pytest.mark.browser

WIDTH = 1400


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    assert main(["demo", "--out", str(out), "--scale", "0.01"]) == 0
    return out / "report.html"


def test_the_demo_report_uses_the_width_and_nothing_runs_off_the_edge(report, capsys):
    capsys.readouterr()
    with chromium() as browser:
        page, blocked = offline_page(browser, WIDTH)
        page.goto(report.as_uri(), wait_until="load")
        (ARTIFACTS / "report").mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "report" / "demo.png"), full_page=True)
        layout = page.evaluate("""() => {
            const doc = document.documentElement, main = document.querySelector('.tk-report');
            const clipped = (e) => e.scrollWidth > e.clientWidth + 1;
            const describe = (e) => [e.tagName, e.className, e.textContent.slice(0, 80)];
            return {
              pageScrolls: doc.scrollWidth > doc.clientWidth, viewport: doc.clientWidth,
              main: main.getBoundingClientRect().width,
              blocks: document.querySelectorAll('.tk-report pre').length,
              // text cut off inside a box (scrolled away to the right)
              clipped: [...document.querySelectorAll('.tk-report pre, .tk-report td, .tk-report p')]
                .filter(clipped).map(describe),
              // anything laid out past the page's right edge
              past: [...document.querySelectorAll('.tk-report *')]
                .filter(e => e.getBoundingClientRect().right > doc.clientWidth + 1).map(describe),
              hints: [...document.querySelectorAll('.toolkit-recompiles pre')].map(e => e.innerText),
            }; }""")  # noqa: E501
        page.close()
    assert not blocked, blocked  # a self-contained report: nothing asked of the network
    assert layout["blocks"] > 5 and layout["hints"], layout
    assert any("fix:" in h for h in layout["hints"]), layout["hints"]
    assert not layout["pageScrolls"], layout
    assert not layout["clipped"], layout["clipped"][:5]
    assert not layout["past"], layout["past"][:5]
    assert layout["main"] >= 0.9 * layout["viewport"], (layout["main"], layout["viewport"])
