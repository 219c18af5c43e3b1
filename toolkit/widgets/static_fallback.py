"""The static dashboard's hand-over to the live one.

A dashboard is shown as two outputs: the static report (tables, inline pictures, no scripts),
which every viewer can show, then the live widget. Where the widget renders, the static copy
must go, or the dashboard shows twice; where it does not (an exported page offline, nbviewer,
GitHub), the static copy must stay. Only the widget's own front-end knows that it rendered, so
it hides the static copy: ``StaticFallbackHider`` sits beside the dashboard's tabs and, once
those tabs are on the page, hides the static outputs carrying its ``static_id``. A CSS rule
cannot tell a rendered widget from nbconvert's placeholder for one."""
from __future__ import annotations

import uuid

import anywidget
import traitlets

STATIC_CLASS = "toolkit-static"

_ESM = r"""
function render({ model, el }) {
  el.style.display = "none";  // takes no room; it only watches
  const id = model.get("static_id");
  let tries = 0;
  function rendered() {
    // the dashboard's tabs, rendered beside this view by the same front-end
    const box = el.parentElement;
    const tabs = box && box.querySelector(".lm-TabBar-tab, .p-TabBar-tab");
    return el.isConnected && tabs && tabs.getBoundingClientRect().width > 0;
  }
  function check() {
    if (rendered()) {
      for (const s of document.querySelectorAll(`.toolkit-static[data-toolkit-static="${id}"]`)) {
        s.style.display = "none";
        s.dataset.toolkitLive = "hidden";
      }
      return;
    }
    if (++tries < 600) setTimeout(check, 50);  // up to 30 s for the tabs to appear
  }
  check();
}
export default { render };
"""


class StaticFallbackHider(anywidget.AnyWidget):
    """Hides the static dashboard with the same ``static_id`` once the live tabs beside it have
    rendered; where no widget front-end runs, nothing runs and the static dashboard stays."""

    _esm = _ESM
    static_id = traitlets.Unicode("").tag(sync=True)


def new_static_id() -> str:
    return uuid.uuid4().hex


def static_output(html_report: str, static_id: str) -> str:
    """The static dashboard as an output of its own, tagged for its live widget to hide."""
    return f"<div class='{STATIC_CLASS}' data-toolkit-static='{static_id}'>{html_report}</div>"
