"""The roofline plot: attained FLOP/s against arithmetic intensity, one point per kernel.

Every point is numbered (its number placed where it covers no other label) and the numbers are
explained in a table beside the axes; every ceiling has a colour of its own and is labelled at
its line. Ceilings that contradict themselves, or that a kernel exceeds, are flagged in the
title with the date and load they were measured at."""
from __future__ import annotations

import math
import re
import textwrap

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D

from ..profiler.report import kernel_table
from ..roofline import Ceiling, Ceilings, bound_text
from .labels import Spot, marker_box, place, ring
from .style import kind_color, literal

# one colour per ceiling (none of them a kernel kind's colour), in the order they are drawn
CEILING_COLORS = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d",
                  "#17becf", "#666666", "#8c564b")
_SPOTS_ALONG_A_LINE = 24


def _points(profile) -> list[dict]:
    rows = []
    for r in kernel_table(profile.kernels):
        if r["flops"] > 0 and r["bytes"] > 0 and r["seconds"] > 0:
            r = dict(r)
            r["intensity"] = r["flops"] / r["bytes"]
            r["attained"] = r["flops"] / r["seconds"]
            rows.append(r)
    return rows


def ceiling_label(c: Ceiling) -> str:
    """``STREAM copy, 2 thread(s): 46.8 GB/s``: the name without its parenthesised details."""
    name = re.sub(r"\s+\([^)]*\)", "", c.name)
    unit, scale = ("GB/s", 1e9) if c.kind == "bandwidth" else ("GFLOP/s", 1e9)
    return f"{name}: {c.value / scale:.1f} {unit}" + ("" if c.source == "measured" else " (spec)")


def roofline(profile, ceilings: Ceilings | None = None, ax=None):
    """Plot ``profile``'s kernels against ``ceilings`` (measured here when not given).

    ``profile`` may be a pair ``(before, after)``: both are drawn, with arrows from each
    kernel's old point to its new one. Returns the artists: ``points``, ``roofs``, ``ridges``,
    ``labels`` (the points' numbers), ``ceiling_labels``, ``table`` (the legend that explains
    the numbers), ``arrows``, ``flag`` (the title's warning, or None), and the plotted ``rows``
    (number, name, intensity, attained, % of bound)."""
    if ceilings is None:
        from ..roofline import measure_ceilings

        ceilings = measure_ceilings(progress=False)
    pair = isinstance(profile, (tuple, list))
    before, after = (profile[0], profile[1]) if pair else (None, profile)
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 5.5))
    rows = sorted(_points(after), key=lambda r: -r["seconds"])
    old_rows = {r["name"]: r for r in _points(before)} if before is not None else {}
    xs = [r["intensity"] for r in rows] + [r["intensity"] for r in old_rows.values()] or [1.0]
    x_lo = 10 ** math.floor(math.log10(min(xs) / 4))
    x_hi = 10 ** math.ceil(math.log10(max(xs) * 4))
    peak_compute = max((c.value for c in ceilings.of_kind("compute")), default=None)
    for bw in ceilings.of_kind("bandwidth"):
        for peak in ceilings.of_kind("compute"):
            if (bw.source == "measured") == (peak.source == "measured"):
                x_hi = max(x_hi, 10 ** math.ceil(math.log10(peak.value / bw.value * 2)))
    grid = np.logspace(math.log10(x_lo), math.log10(x_hi), 200)
    drawn = ceilings.of_kind("bandwidth") + ceilings.of_kind("compute")
    colors = {id(c): CEILING_COLORS[i % len(CEILING_COLORS)] for i, c in enumerate(drawn)}
    roofs, ridges = [], []
    for c in drawn:
        style = "-" if c.source == "measured" else "--"
        if c.kind == "bandwidth":
            (line,) = ax.plot(grid, c.value * grid, style, color=colors[id(c)], lw=1.2)
        else:
            line = ax.axhline(c.value, ls=style, color=colors[id(c)], lw=1.2)
        roofs.append(line)
    for source in ("measured", "spec sheet"):
        bw, peak = ceilings.best("bandwidth", source), ceilings.best("compute", source)
        if bw is not None and peak is not None:
            ridges.append(ax.axvline(peak.value / bw.value, color="#bbbbbb",
                                     ls=":" if source == "measured" else "-.", lw=1))
    total = sum(r["seconds"] for r in rows) or 1.0
    for number, r in enumerate(rows, 1):
        r["number"] = number
        r["bound"] = ceilings.attainable(r["intensity"])
        r["percent_of_bound"] = 100 * r["attained"] / r["bound"] if r["bound"] else float("nan")
        r["size"] = 30 + 600 * r["seconds"] / total
    points = ax.scatter([r["intensity"] for r in rows], [r["attained"] for r in rows],
                        s=[r["size"] for r in rows], c=[kind_color(r["kind"]) for r in rows],
                        edgecolors="black", linewidths=0.5, zorder=3, alpha=0.85)
    arrows = []
    for r in rows:
        old = old_rows.get(r["name"])
        if old is not None:
            arrows.append(ax.annotate("", (r["intensity"], r["attained"]),
                                      (old["intensity"], old["attained"]),
                                      arrowprops={"arrowstyle": "->", "color": "#777777"}))
    if old_rows:
        ax.scatter(
            [o["intensity"] for o in old_rows.values()],
            [o["attained"] for o in old_rows.values()],
            s=20,
            facecolors="none",
            edgecolors="#777777",
            zorder=2,
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    ys = [r["attained"] for r in rows] + ([peak_compute] if peak_compute else [])
    if ys:
        ax.set_ylim(
            10 ** math.floor(math.log10(min(ys) / 4)), 10 ** math.ceil(math.log10(max(ys) * 2))
        )
    ax.set_xlabel("arithmetic intensity (FLOP/byte, compiler estimate)")
    ax.set_ylabel("attained FLOP/s (measured time)")
    flag = _flag(ceilings, rows, peak_compute)
    title = ax.set_title(literal(f"roofline: {ceilings.device}") + ("\n" + flag if flag else ""),
                         fontsize=9, **({"color": "#b00020"} if flag else {}))
    ax.grid(True, which="both", alpha=0.2)
    table = _table(ax, rows)
    # Labels are placed in display space: the layout (a table beside the axes) settles first.
    root = ax.get_figure(root=True) if hasattr(ax, "get_figure") else ax.figure  # not a subfigure
    root.draw_without_rendering()
    placed: list = []
    markers = [marker_box(ax, r["intensity"], r["attained"], r["size"]) for r in rows]
    ceiling_labels = [_label_ceiling(ax, c, colors[id(c)], placed, markers) for c in drawn]
    labels = []
    for r, marker in zip(rows, markers):
        radius = math.sqrt(r["size"]) / 2
        note, index = place(ax, str(r["number"]), ring(r["intensity"], r["attained"], radius),
                            placed, markers, fontsize=7, fontweight="bold", zorder=4)
        if index >= 8:  # moved out of the first ring: a leader line back to its point
            arrows.append(ax.annotate("", (r["intensity"], r["attained"]), xytext=note.xyann,
                                      textcoords="offset points", zorder=2,
                                      arrowprops={"arrowstyle": "-", "color": "#999999",
                                                  "lw": 0.5}))
        labels.append(note)
    return {"points": points, "roofs": roofs, "ridges": ridges, "labels": labels,
            "ceiling_labels": ceiling_labels, "table": table, "arrows": arrows,
            "flag": title if flag else None, "rows": rows, "axes": ax}


def _label_ceiling(ax, c: Ceiling, color: str, placed: list, markers: list):
    """The ceiling's name and value just above (or below) its line, where it covers no label."""
    x_lo, x_hi = ax.get_xlim()
    y_lo, y_hi = ax.get_ylim()
    spots = []
    for k in range(_SPOTS_ALONG_A_LINE):
        if c.kind == "bandwidth":  # along the slope, from the left
            x = 10 ** (math.log10(x_lo) + (k + 0.5) / _SPOTS_ALONG_A_LINE * math.log10(x_hi / x_lo))
            y = c.value * x
            if not y_lo <= y <= y_hi:
                continue
            spots += [Spot(x, y, 3, 2, "right", "bottom"), Spot(x, y, -3, -2, "left", "top")]
        else:  # along the flat line, from the right
            x = 10 ** (math.log10(x_hi) - (k + 0.3) / _SPOTS_ALONG_A_LINE * math.log10(x_hi / x_lo))
            spots += [Spot(x, c.value, 0, 2, "right", "bottom"),
                      Spot(x, c.value, 0, -2, "right", "top")]
    if not spots:
        spots = [Spot(x_lo, y_lo, 3, 3)]
    note, _ = place(ax, literal(ceiling_label(c)), spots, placed, markers, fontsize=6.5,
                    color=color, zorder=4)
    return note


def _table(ax, rows):
    """The numbers explained, beside the axes: kernel, share of the bound, source line."""
    handles, texts = [], []
    for r in rows:
        state = bound_text(r["attained"], r["bound"])
        state = state if state.startswith("cache") else f"{state} of bound"
        where = f", {r['source']}" if r["source"] else ""
        handles.append(Line2D([], [], ls="", marker="o", markersize=6, color=kind_color(r["kind"]),
                              markeredgecolor="black", markeredgewidth=0.5))
        texts.append(literal(f"{r['number']}. {r['name']} ({state}{where})"))
    if not rows:
        return None
    return ax.legend(handles, texts, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=6.5,
                     frameon=False, title="kernels, by time", title_fontsize=7,
                     handletextpad=0.3, borderaxespad=0.0)


def _flag(ceilings: Ceilings, rows: list[dict], peak_compute: float | None) -> str:
    """Why these ceilings may be stale, with when and under what load they were measured."""
    reasons = list(ceilings.doubts)
    for r in rows:
        above = r["bound"] and r["attained"] > r["bound"]
        explained = bound_text(r["attained"], r["bound"]).startswith("cache") and not (
            peak_compute and r["attained"] > peak_compute)
        if above and not explained:
            reasons.append(f"{r['name']} reached {r['percent_of_bound']:.0f}% of its roof")
    if not reasons:
        return ""
    when = ceilings.when() or "ceilings"
    text = (f"⚠ ceilings may be stale ({when}): " + "; ".join(literal(x) for x in reasons[:3])
            + ". Measure again: tk.roofline.measure_ceilings(remeasure=True)")
    return textwrap.fill(text, 110)
