"""The interactive timeline: compile phases, host dispatch, each device stream (a differentiated
program's forward and backward passes in lanes of their own) and the copy engine, on one time
axis you can zoom (mouse wheel), pan (drag) and reset (double-click, or the "runs" and
"everything" buttons). It opens on the runs, not on the compilation before them. Hovering a
span shows its details (kernel, kind, time, GFLOP/s, GB/s, launch, source line; a copy's size
and cause; a recompilation's cause), as Perfetto's and Nsight's timelines do.

An anywidget (a small SVG renderer shipped inside the package: nothing is fetched, so it works
offline in JupyterLab, Notebook 7 and VS Code). The static report keeps the matplotlib picture
(``plots.timeline``)."""
from __future__ import annotations

import anywidget
import traitlets

from ..plots.style import PHASE_COLORS, kind_color
from ..profiler.timeline_window import execution_window, origin_of


def _kernel_lane(k) -> str:
    return f"{k.device} stream {k.stream}" + (f" ({k.phase})" if k.phase else "")


def _copy_lane(t) -> str:
    return f"{t.device} copy engine" if t.device else "copy engine"


def _rate(amount: float, seconds: float) -> str:
    return f"{amount / seconds / 1e9:.2f}" if seconds > 0 and amount else ""


def timeline_data(profile) -> dict:
    """The timeline as plain data: ``lanes`` (names, top to bottom), ``spans`` (lane index,
    start and duration in ms from the profile's start, label, colour, details), ``markers``
    (recompilations: time, cause), ``runs`` (the window, in ms, the timeline opens on: the
    kernels, copies and cache-hit calls; empty when nothing ran)."""
    origin = origin_of(profile)
    order = {"": 0, "forward": 1, "backward": 2}
    kernel_lanes = [
        lane
        for _, lane in sorted(
            {
                (k.device, k.stream, order.get(k.phase, 3)): _kernel_lane(k)
                for k in profile.kernels
            }.items()
        )
    ]
    lanes = (
        ["compilation", "host dispatch"]
        + kernel_lanes
        + sorted({_copy_lane(t) for t in profile.transfers})
    )
    row = {name: i for i, name in enumerate(lanes)}
    spans = []

    def add(lane, start, duration, label, color, details):
        spans.append(
            {
                "lane": row[lane],
                "start": (start - origin) * 1e3,
                "dur": duration * 1e3,
                "label": label,
                "color": color,
                "details": [[k, str(v)] for k, v in details if v not in ("", None)],
            }
        )

    for c in profile.compiles:
        for p in c.phases:
            add("compilation", p.start, p.duration, p.name, PHASE_COLORS.get(p.name, "#cccccc"),
                [("compile phase", p.name), ("function", c.function), ("signature", c.signature),
                 ("time", f"{p.duration * 1e3:.3f} ms")])
    for d in profile.dispatches:
        add(
            "host dispatch",
            d.start,
            d.duration,
            d.function,
            "#bdbdbd" if d.cache_hit else "#969696",
            [
                ("dispatch", d.function),
                ("cache", "hit" if d.cache_hit else "compiled"),
                ("time", f"{d.duration * 1e6:.1f} µs"),
            ],
        )
    for k in profile.kernels:
        add(
            _kernel_lane(k),
            k.start,
            k.duration,
            k.name,
            kind_color(k.kind),
            [
                ("kernel", k.name),
                ("function", k.function),
                ("kind", k.kind),
                ("pass", k.phase),
                ("time", f"{k.duration * 1e6:.1f} µs"),
                ("GFLOP/s", _rate(k.flops + k.transcendentals, k.duration)),
                ("GB/s", _rate(k.bytes_accessed, k.duration)),
                ("launch", k.launch),
                ("source", k.source),
            ],
        )
    for t in profile.transfers:
        arrow = {"host_to_device": "H→D", "device_to_host": "D→H"}.get(t.direction, "D→D")
        add(_copy_lane(t), t.start, t.duration, f"{arrow} {t.bytes / 1e6:.1f} MB", "#74c476",
            [("copy", t.direction), ("bytes", f"{t.bytes:,}"), ("GB/s", _rate(t.bytes, t.duration)),
             ("what", t.what), ("where", t.location), ("avoidable", t.avoidable)])
    markers = [
        {"at": (r.start - origin) * 1e3, "cause": r.causes[0].message if r.causes else "recompiled"}
        for r in profile.recompiles
    ]
    runs = execution_window(profile)
    return {"lanes": lanes, "spans": spans, "markers": markers, "runs": list(runs or ())}


_ESM = r"""
const NS = "http://www.w3.org/2000/svg";
function svgEl(name, attrs) {
  const e = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  return e;
}
function render({ model, el }) {
  const root = document.createElement("div");
  root.className = "tk-timeline";
  const help = document.createElement("div");
  help.className = "tk-timeline-help";
  help.textContent =
    "wheel: zoom · drag: pan · double-click: back to the runs · hover a span for its details";
  const bar = document.createElement("div");
  bar.className = "tk-timeline-bar";
  const fitRuns = document.createElement("button");
  fitRuns.className = "tk-fit-runs"; fitRuns.textContent = "runs";
  fitRuns.title = "fit the kernels, copies and cache-hit calls";
  const fitAll = document.createElement("button");
  fitAll.className = "tk-fit-all"; fitAll.textContent = "everything";
  fitAll.title = "the whole session, compilation included";
  const elided = document.createElement("span");
  elided.className = "tk-elided";
  bar.append(fitRuns, fitAll, elided, help);
  const svg = svgEl("svg", { class: "tk-timeline-svg" });
  const tip = document.createElement("div");
  tip.className = "tk-timeline-tip";
  root.append(bar, svg, tip);
  el.append(root);
  const LEFT = 170, LANE = 24, TOP = 8, AXIS = 26;
  let view = null;
  function opening() {  // the runs, where there are any: compilation would squeeze them to a sliver
    const runs = model.get("runs");
    return runs && runs.length === 2 && runs[1] > runs[0] ? runs.slice() : extent();
  }
  function extent() {
    const spans = model.get("spans"), marks = model.get("markers");
    let end = 0;
    for (const s of spans) end = Math.max(end, s.start + s.dur);
    for (const m of marks) end = Math.max(end, m.at);
    return [0, Math.max(end, 1e-3)];
  }
  function width() { return Math.max(root.clientWidth || 900, 400); }
  function draw() {
    if (!view) {
      const w = model.get("window");
      view = w && w.length === 2 && w[1] > w[0] ? w.slice() : opening();
    }
    const lanes = model.get("lanes"), spans = model.get("spans"), marks = model.get("markers");
    const W = width(), H = TOP + lanes.length * LANE + AXIS;
    svg.setAttribute("width", W); svg.setAttribute("height", H);
    svg.replaceChildren();
    const [lo, hi] = view, span = hi - lo, plotW = W - LEFT - 40;
    const x = (t) => LEFT + (t - lo) / span * plotW;
    lanes.forEach((name, i) => {
      svg.append(svgEl("rect", { x: 0, y: TOP + i * LANE, width: W, height: LANE, class: i % 2 ? "tk-lane-odd" : "tk-lane" }));
      const label = svgEl("text", { x: 6, y: TOP + i * LANE + LANE * 0.65, class: "tk-lane-label" });
      label.textContent = name;
      svg.append(label);
    });
    const clip = svgEl("clipPath", { id: "tk-clip-" + model.cid });
    clip.append(svgEl("rect", { x: LEFT, y: 0, width: plotW, height: H }));
    svg.append(clip);
    const g = svgEl("g", { "clip-path": `url(#tk-clip-${model.cid})` });
    svg.append(g);
    spans.forEach((s, i) => {
      if (s.start + s.dur < lo || s.start > hi) return;
      // drawn only where it is in view: a span reaching past an edge (the compile before the
      // opening view) ends at that edge, so what can be hovered is what is shown
      const x0 = Math.max(x(s.start), LEFT), x1 = Math.min(x(s.start + s.dur), LEFT + plotW);
      const w = Math.max(x1 - x0, 1.5);
      const r = svgEl("rect", { x: x0, y: TOP + s.lane * LANE + 3, width: w, height: LANE - 6, fill: s.color, class: "tk-span" });
      r.dataset.index = i;
      g.append(r);
      if (w > 7 * s.label.length) {
        const t = svgEl("text", { x: x0 + w / 2, y: TOP + s.lane * LANE + LANE * 0.65, class: "tk-span-label" });
        t.textContent = s.label;
        g.append(t);
      }
    });
    marks.forEach((m) => {
      if (m.at < lo || m.at > hi) return;
      const line = svgEl("line", { x1: x(m.at), x2: x(m.at), y1: TOP, y2: TOP + lanes.length * LANE, class: "tk-marker" });
      const title = svgEl("title"); title.textContent = "recompile: " + m.cause; line.append(title);
      g.append(line);
    });
    // compilation left of the view: say how much, so that opening on the runs hides nothing
    const compileLane = lanes.indexOf("compilation");
    let before = 0;
    for (const s of spans) if (s.lane === compileLane && s.start + s.dur <= lo) before += s.dur;
    elided.textContent =
      before > 0 ? `◂ ${before.toFixed(1)} ms of compilation before this view` : "";
    const axisY = TOP + lanes.length * LANE;
    svg.append(svgEl("line", { x1: LEFT, x2: LEFT + plotW, y1: axisY, y2: axisY, class: "tk-axis" }));
    for (let k = 0; k <= 5; k++) {
      const t = lo + span * k / 5;
      const tick = svgEl("text", { x: x(t), y: axisY + 16, class: "tk-tick" });
      tick.textContent = (span < 0.1 ? (t * 1e3).toFixed(1) + " µs" : t.toFixed(span < 10 ? 3 : 1) + " ms");
      svg.append(tick);
    }
  }
  function publish() {
    model.set("window", [view[0], view[1]]);
    model.save_changes();
  }
  svg.addEventListener("wheel", (ev) => {
    ev.preventDefault();
    const [lo, hi] = view, plotW = width() - LEFT - 40;
    const at = lo + Math.min(Math.max((ev.offsetX - LEFT) / plotW, 0), 1) * (hi - lo);
    const f = ev.deltaY > 0 ? 1.25 : 0.8;
    view = [at - (at - lo) * f, at + (hi - at) * f];
    draw(); publish();
  }, { passive: false });
  let drag = null;
  svg.addEventListener("mousedown", (ev) => { drag = { x: ev.clientX, view: view.slice() }; });
  window.addEventListener("mouseup", () => { if (drag) { drag = null; publish(); } });
  svg.addEventListener("mousemove", (ev) => {
    if (drag) {
      const plotW = width() - LEFT - 40, dt = (ev.clientX - drag.x) / plotW * (drag.view[1] - drag.view[0]);
      view = [drag.view[0] - dt, drag.view[1] - dt];
      draw();
      return;
    }
    const target = ev.target;
    if (target.classList && target.classList.contains("tk-span")) {
      const s = model.get("spans")[+target.dataset.index];
      tip.replaceChildren();
      for (const [k, v] of s.details) {
        const row = document.createElement("div");
        const key = document.createElement("b"); key.textContent = k + ": ";
        row.append(key, document.createTextNode(v));
        tip.append(row);
      }
      tip.style.left = (ev.offsetX + 14) + "px";
      tip.style.top = (ev.offsetY + 14) + "px";
      tip.style.display = "block";
    } else {
      tip.style.display = "none";
    }
  });
  svg.addEventListener("mouseleave", () => { tip.style.display = "none"; });
  svg.addEventListener("dblclick", () => { view = opening(); draw(); publish(); });
  fitRuns.addEventListener("click", () => { view = opening(); draw(); publish(); });
  fitAll.addEventListener("click", () => { view = extent(); draw(); publish(); });
  model.on("change:spans", () => { view = opening(); draw(); });
  model.on("change:window", () => {
    const w = model.get("window");
    if (w && w.length === 2 && w[1] > w[0] && (!view || w[0] !== view[0] || w[1] !== view[1])) { view = w.slice(); draw(); }
  });
  requestAnimationFrame(draw);
}
export default { render };
"""  # noqa: E501

_CSS = """
.tk-timeline { position: relative; font: 11px system-ui, sans-serif; }
.tk-timeline-bar { display: flex; gap: 6px; align-items: center; margin: 2px 0 4px 0; }
.tk-timeline-bar button { font-size: 11px; padding: 1px 8px; }
.tk-timeline-help { color: #666; }
.tk-elided { color: #555; font-style: italic; }
.tk-timeline-svg { user-select: none; cursor: grab; display: block; }
.tk-lane { fill: #fafafa; } .tk-lane-odd { fill: #f0f0f0; }
.tk-lane-label { font-size: 11px; fill: #333; }
.tk-span { stroke: white; stroke-width: 0.5; } .tk-span:hover { stroke: #000; stroke-width: 1.2; }
.tk-span-label { font-size: 10px; text-anchor: middle; pointer-events: none; fill: #111; }
.tk-marker { stroke: #d62728; stroke-dasharray: 4 3; stroke-width: 1.5; }
.tk-axis { stroke: #999; } .tk-tick { font-size: 10px; text-anchor: middle; fill: #555; }
.tk-timeline-tip { position: absolute; display: none; background: #fff; border: 1px solid #bbb;
  box-shadow: 0 2px 6px rgba(0,0,0,.15); padding: 4px 6px; pointer-events: none; z-index: 10; max-width: 420px; }
"""  # noqa: E501


class TimelineWidget(anywidget.AnyWidget):
    """``TimelineWidget(profile)``: the profile's timeline, interactive. ``window`` is the shown
    range in ms (set it to zoom from Python; zooming in the browser updates it); it opens on
    ``runs``, the kernels, copies and cache-hit calls, not on the compilation before them."""

    _esm = _ESM
    _css = _CSS
    lanes = traitlets.List([]).tag(sync=True)
    spans = traitlets.List([]).tag(sync=True)
    markers = traitlets.List([]).tag(sync=True)
    window = traitlets.List([]).tag(sync=True)
    runs = traitlets.List([]).tag(sync=True)

    def __init__(self, profile, **kwargs):
        data = timeline_data(profile)
        kwargs.setdefault("window", list(data["runs"]))  # it opens on the runs
        super().__init__(lanes=data["lanes"], spans=data["spans"], markers=data["markers"],
                         runs=data["runs"], **kwargs)


def timeline(profile) -> TimelineWidget:
    return TimelineWidget(profile)


__all__ = ["TimelineWidget", "timeline", "timeline_data"]
