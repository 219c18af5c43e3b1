"""The timeline: compilation phases, host dispatch, each device stream and the copy engine on
one time axis, with recompilation markers and their causes."""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ..profiler.timeline_window import compilation_before, execution_window, origin_of
from .style import PHASE_COLORS, kind_color, literal


def _kernel_lane(k) -> str:
    """A stream's lane; a differentiated program's forward and backward kernels in lanes of
    their own, so the two passes read apart."""
    return f"{k.device} stream {k.stream}" + (f" ({k.phase})" if k.phase else "")


def _lanes(profile) -> list[str]:
    lanes = ["compilation", "host dispatch"]
    if getattr(profile, "graph_breaks", ()):
        lanes.append("graph segments")
    order = {"": 0, "forward": 1, "backward": 2}
    kernels = sorted(
        {
            (k.device, k.stream, order.get(k.phase, 3)): _kernel_lane(k) for k in profile.kernels
        }.items()
    )
    lanes += [lane for _, lane in kernels]
    lanes += sorted({_copy_lane(t) for t in profile.transfers})
    lanes += [_collective_lane(d) for d in sorted({c.device for c in _collectives(profile)})]
    return lanes


def _collectives(profile):
    return getattr(profile, "collectives", ())


def _collective_lane(device: int) -> str:
    return f"device {device} collectives"


def _copy_lane(transfer) -> str:
    return f"{transfer.device} copy engine" if transfer.device else "copy engine"


def timeline(profile, ax=None, window: tuple[float, float] | str | None = None,
             min_label_fraction: float = 0.06):
    """Plot ``profile`` on a time axis in ms from its start. It opens on the execution (kernels,
    copies, cache-hit calls: ``execution_window``), with the compilation before it noted in the
    compilation lane; ``window="all"`` shows the whole session, ``window=(ms, ms)`` any range.
    Labels appear only on bars wide enough to hold them. Returns the artists: ``lanes``,
    ``phases``, ``dispatches``, ``kernels``, ``transfers``, ``segments`` (graph breaks: the Python
    glue and the compiled segments), ``collectives`` (per device of an SPMD run: the wait for
    the group's last device, then the exchange), ``markers``, ``labels``, ``elided``."""
    if ax is None:
        # keeps the legend below in view
        _, ax = plt.subplots(figsize=(10, 4), layout="constrained")
    origin = origin_of(profile)
    lanes = _lanes(profile)
    row = {name: i for i, name in enumerate(lanes)}
    end = max([e.start + getattr(e, "duration", 0.0) for e in profile.events] + [origin])
    everything = (0.0, max((end - origin) * 1e3, 1e-3))
    if isinstance(window, str):
        if window != "all":
            raise ValueError(f"timeline: window={window!r}; pass 'all', (start_ms, end_ms) "
                             "or None (the runs)")
        lo, hi = everything
    else:
        lo, hi = window or execution_window(profile) or everything
    span = max(hi - lo, 1e-9)
    artists = {"lanes": lanes, "phases": [], "dispatches": [], "kernels": [], "transfers": [],
               "segments": [], "collectives": [], "markers": [], "labels": [], "elided": []}

    def ms(t: float) -> float:
        return (t - origin) * 1e3

    legend: dict[str, object] = {}  # label -> handle, in order of first appearance

    def bar(
        lane: str, start: float, duration: float, color: str, label: str, bucket: str, key: str = ""
    ):
        y = row[lane]
        # compile phases stay visible at the scale of a whole run: at least 0.3% of the axis
        least = span * (3e-3 if bucket == "phases" else 1e-4)
        if key and key not in legend:
            legend[key] = Patch(facecolor=color, label=literal(key))
        coll = ax.broken_barh([(ms(start), max(duration * 1e3, least))], (y - 0.38, 0.76),
                              facecolors=color, edgecolors="white", linewidth=0.3)
        artists[bucket].append(coll)
        # a label needs a bar wider than its text (about 1.1% of the axis per character), and
        # its centre in view: text far outside the axes is still rastered, and at thousands of
        # axis widths away FreeType overflows
        centre = ms(start) + duration * 5e2
        if (label and duration * 1e3 / span >= max(min_label_fraction, 0.011 * len(label))
                and lo <= centre <= hi):
            artists["labels"].append(
                ax.text(
                    centre,
                    y,
                    literal(label),
                    ha="center",
                    va="center",
                    fontsize=6,
                    clip_on=True,
                )
            )

    for c in profile.compiles:
        for p in c.phases:
            bar(
                "compilation",
                p.start,
                p.duration,
                PHASE_COLORS.get(p.name, "#cccccc"),
                p.name,
                "phases",
                f"compile: {p.name}",
            )
    for d in profile.dispatches:
        bar(
            "host dispatch",
            d.start,
            d.duration,
            "#bdbdbd" if d.cache_hit else "#969696",
            d.function,
            "dispatches",
            "dispatch (cache hit)" if d.cache_hit else "dispatch (compiled)",
        )
    for g in getattr(profile, "graph_breaks", ()):  # Python glue, then the compiled segment
        bar("graph segments", g.start - g.glue, g.glue, "#fdd0a2", "glue", "segments",
            "Python glue (graph break)")
        bar("graph segments", g.start, g.duration, "#e6550d", f"to {g.reason}", "segments",
            "compiled segment")
    for k in profile.kernels:
        bar(_kernel_lane(k), k.start, k.duration, kind_color(k.kind), k.name, "kernels",
            f"kernel: {k.kind}")
    for c in _collectives(profile):  # the wait for the group's last device, then the exchange
        lane = _collective_lane(c.device)
        if c.wait > 0:
            bar(lane, c.start, c.wait, "#fee391", "wait", "collectives",
                "waiting for peers")
        bar(lane, c.start + c.wait, c.duration, "#8c6bb1", c.op, "collectives",
            "collective (exchange)")
    for t in profile.transfers:
        arrow = {"host_to_device": "H→D", "device_to_host": "D→H"}.get(t.direction, "D→D")
        bar(
            _copy_lane(t),
            t.start,
            t.duration,
            "#74c476",
            f"{arrow} {t.bytes / 1e6:.1f} MB",
            "transfers",
            "copy",
        )
    for r in profile.recompiles:
        x = ms(r.start)
        artists["markers"].append(ax.axvline(x, color="#d62728", lw=1, ls="--"))
        cause = r.causes[0].message if r.causes else "recompiled"
        right = (x - lo) / span > 0.6  # keep the label inside the axes
        if not lo <= x <= hi:
            continue  # its line is out of view, and so is its label
        artists["labels"].append(
            ax.text(
                x,
                -0.75,
                literal(f"recompile: {cause} "),
                color="#d62728",
                fontsize=6,
                ha="right" if right else "left",
                va="top",
                clip_on=True,
            )
        )
    if profile.recompiles:
        legend["recompile"] = Line2D([], [], color="#d62728", lw=1, ls="--", label="recompile")
    if legend:
        # below the axis, outside the lanes: it never covers a bar or a label
        artists["legend"] = ax.legend(
            handles=list(legend.values()),
            fontsize=6,
            loc="upper center",
            bbox_to_anchor=(0.5, -0.18),
            ncol=min(5, len(legend)),
            frameon=False,
        )
    hidden = compilation_before(profile, lo)
    if hidden > 0:  # the opening view leaves the compilation out: say so, above the lanes
        note = f"◂ {hidden:.1f} ms of compilation before this view (window='all' shows it)"
        artists["elided"].append(ax.text(0.0, 1.01, note, transform=ax.transAxes, ha="left",
                                         va="bottom", fontsize=6, color="#555"))
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels([literal(lane) for lane in lanes], fontsize=7)
    ax.set_ylim(len(lanes) - 0.5, -1.2)
    ax.set_xlim(lo, hi)
    ax.set_xlabel("time (ms from the start of the profile)")
    ax.grid(True, axis="x", alpha=0.2)
    artists["axes"] = ax
    return artists
