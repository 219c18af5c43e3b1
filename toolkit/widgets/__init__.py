"""Views over profiles: the static HTML report and the ipywidgets dashboard."""
from .report import report_html

__all__ = ["report_html", "Dashboard", "TimelineWidget", "timeline"]


def __getattr__(name):
    if name == "Dashboard":  # ipywidgets only when a live dashboard is asked for
        from .dashboard import Dashboard

        return Dashboard
    # anywidget only when the interactive timeline is asked for
    if name in ("TimelineWidget", "timeline"):
        from . import timeline_widget

        return getattr(timeline_widget, name)
    raise AttributeError(name)
