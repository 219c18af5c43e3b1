"""The dashboard widget: an ipywidgets Tab over a profile (Summary, Recompilations, Fusion with
a reason filter, Kernels with a sort order, an interactive Timeline, Roofline, IR with a stage
selector).

Displayed, it is a mimebundle: the live widget, the static HTML report (for nbconvert,
nbviewer, GitHub, VS Code without a kernel) and a plain-text summary."""
from __future__ import annotations

import html

import ipywidgets as widgets

from . import report, static_fallback


class Dashboard:
    def __init__(
        self,
        prof,
        ceilings=None,
        compiled: dict | None = None,
        title: str = "toolkit profile",
        sections=report.SECTIONS,
    ):
        self.profile = prof
        self.ceilings = ceilings
        self.compiled = compiled or {}
        self.title = title
        self.sections = tuple(sections)
        self._widget = None
        self._live = None
        self._static_id = static_fallback.new_static_id()

    # ---- the live widget ------------------------------------------------------------------
    def _fusion_tab(self) -> widgets.Widget:
        reasons = sorted({d.reason for d in self.profile.fusion_decisions})
        pick = widgets.Dropdown(options=["all"] + reasons, value="all", description="reason")
        body = widgets.HTML(_styled(report.fusion_section(self.profile)))

        def changed(change):
            body.value = _styled(
                report.fusion_section(
                    self.profile, None if change["new"] == "all" else change["new"]
                )
            )

        pick.observe(changed, names="value")
        children = [pick, body]
        fusions = report.fusions_of(self.compiled)
        if fusions:
            labels = [
                (f"{prog}: {inst.name} ({inst.attrs['kind']})", i)
                for i, (prog, inst) in enumerate(fusions)
            ]
            chooser = widgets.Dropdown(options=labels, value=0, description="fusion")
            detail = widgets.HTML(_styled(report.fusion_detail(fusions[0][1])))

            def chosen(change):
                detail.value = _styled(report.fusion_detail(fusions[change["new"]][1]))

            chooser.observe(chosen, names="value")
            children += [chooser, detail]
        return widgets.VBox(children)

    def _kernel_tab(self) -> widgets.Widget:
        order = widgets.Dropdown(
            options=[
                ("time", "seconds"),
                ("GFLOP/s", "gflops"),
                ("GB/s", "gbps"),
                ("calls", "calls"),
            ],
            value="seconds",
            description="sort by",
        )
        body = widgets.HTML(_styled(report.kernel_section(self.profile, self.ceilings)))

        def changed(change):
            body.value = _styled(report.kernel_section(self.profile, self.ceilings, change["new"]))

        order.observe(changed, names="value")
        return widgets.VBox([order, body])

    def _ir_tab(self) -> widgets.Widget:
        if not self.compiled:
            return widgets.HTML(report.ir_section({}))
        names = list(self.compiled)
        stages = ["hlo", "optimized_hlo", "llvm", "asm", "ptx", "sass"]
        which = widgets.Dropdown(options=names, value=names[0], description="program")
        stage = widgets.Dropdown(options=stages, value="optimized_hlo", description="stage")
        body = widgets.HTML()

        def show(_=None):
            try:
                text = self.compiled[which.value].as_text(stage.value)
            except (ValueError, RuntimeError) as err:  # a stage this backend or machine lacks
                text = str(err)
            body.value = (
                f"<pre style='font-size:11px;max-height:480px;overflow:auto'>{html.escape(text)}</"
                "pre>"
            )

        which.observe(show, names="value")
        stage.observe(show, names="value")
        show()
        return widgets.VBox([widgets.HBox([which, stage]), body])

    def widget(self) -> widgets.Tab:
        if self._widget is None:
            children = []
            for name in self.sections:
                if name == "Fusion":
                    children.append(self._fusion_tab())
                elif name == "Kernels":
                    children.append(self._kernel_tab())
                elif name == "IR":
                    children.append(self._ir_tab())
                elif name == "Timeline":
                    # zoom, pan, hover; the static report keeps the picture
                    from .timeline_widget import TimelineWidget
                    children.append(TimelineWidget(self.profile))
                else:
                    children.append(
                        widgets.HTML(
                            report.STYLE
                            + "<div class='tk-report'>"
                            + report.section_html(name, self.profile, self.ceilings, self.compiled)
                            + "</div>"
                        )
                    )
            tab = widgets.Tab(children=children)
            for i, name in enumerate(self.sections):
                tab.set_title(i, name)
            self._widget = tab
        return self._widget

    # ---- static forms -----------------------------------------------------------------------
    def to_html(self, full_document: bool = False) -> str:
        return report.report_html(
            self.profile, self.ceilings, self.compiled, self.title, full_document, self.sections
        )

    def save(self, path: str) -> None:
        with open(path, "w") as f:
            f.write(self.to_html(full_document=True))

    def static_html(self) -> str:
        """The static dashboard as its own output: shown where widgets do not render (nbconvert
        without network, nbviewer, GitHub); the live widget beside it hides it once it renders."""
        return static_fallback.static_output(self.to_html(), self._static_id)

    def live_widget(self) -> widgets.Box:
        """The tabs, with the watcher that hides the static dashboard once they render."""
        if self._live is None:
            hider = static_fallback.StaticFallbackHider(static_id=self._static_id)
            self._live = widgets.VBox([self.widget(), hider])
        return self._live

    def _ipython_display_(self):
        """Two outputs: the static dashboard, then the widget. nbconvert stores widget state by
        default and then shows a widget output's view alone, which needs the widget CDN; a
        separate static output survives it."""
        from IPython.display import display

        display(
            {"text/html": self.static_html(), "text/plain": report.report_text(self.profile)},
            raw=True,
        )
        if _has_widget_frontend():
            display(self.live_widget())

    def _repr_mimebundle_(self, include=None, exclude=None):
        bundle = {"text/plain": report.report_text(self.profile), "text/html": self.to_html()}
        widget_bundle = self.widget()._repr_mimebundle_(include=include, exclude=exclude) or {}
        bundle.update({k: v for k, v in widget_bundle.items() if k != "text/plain"})
        return bundle


def _has_widget_frontend() -> bool:
    """A kernel that can talk to a front end (JupyterLab, Notebook, VS Code, nbclient), not
    terminal IPython, where a widget would only print its repr."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - the notebook layer needs IPython
        return False
    shell = get_ipython()
    formatter = getattr(shell, "display_formatter", None)
    return formatter is not None and "text/html" in getattr(formatter, "active_types", ())


def _styled(section_html: str) -> str:
    """A widget's HTML with the static report's table style: borders, numbers right-aligned."""
    return report.STYLE + "<div class='tk-report'>" + section_html + "</div>"
