"""Views over profiles: the static HTML report and the ipywidgets dashboard."""
from .report import report_html

__all__ = ["report_html", "Dashboard"]


def __getattr__(name):
    if name == "Dashboard":  # ipywidgets only when a live dashboard is asked for
        from .dashboard import Dashboard

        return Dashboard
    raise AttributeError(name)
