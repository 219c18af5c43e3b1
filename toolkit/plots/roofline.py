"""The roofline plot: attained FLOP/s against arithmetic intensity, one point per kernel."""
from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np

from ..profiler.report import kernel_table
from ..roofline import Ceilings, bound_text
from .style import kind_color, literal


def _points(profile) -> list[dict]:
    rows = []
    for r in kernel_table(profile.kernels):
        if r["flops"] > 0 and r["bytes"] > 0 and r["seconds"] > 0:
            r = dict(r)
            r["intensity"] = r["flops"] / r["bytes"]
            r["attained"] = r["flops"] / r["seconds"]
            rows.append(r)
    return rows


def roofline(profile, ceilings: Ceilings | None = None, ax=None, top: int = 5):
    """Plot ``profile``'s kernels against ``ceilings`` (measured here when not given).

    ``profile`` may be a pair ``(before, after)``: both are drawn, with arrows from each
    kernel's old point to its new one. Returns the artists: ``points``, ``roofs``, ``ridges``,
    ``labels``, ``arrows``, and the plotted ``rows`` (name, intensity, attained, % of bound)."""
    if ceilings is None:
        from ..roofline import measure_ceilings

        ceilings = measure_ceilings(progress=False)
    pair = isinstance(profile, (tuple, list))
    before, after = (profile[0], profile[1]) if pair else (None, profile)
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 5.5))
    rows = _points(after)
    old_rows = {r["name"]: r for r in _points(before)} if before is not None else {}
    xs = [r["intensity"] for r in rows] + [r["intensity"] for r in old_rows.values()] or [1.0]
    x_lo = 10 ** math.floor(math.log10(min(xs) / 4))
    x_hi = 10 ** math.ceil(math.log10(max(xs) * 4))
    peak_compute = max((c.value for c in ceilings.of_kind("compute")), default=None)
    roofs, ridges = [], []
    for bw in ceilings.of_kind("bandwidth"):
        for peak in ceilings.of_kind("compute"):
            if (bw.source == "measured") != (peak.source == "measured"):
                continue
            ridge = peak.value / bw.value
            x_hi = max(x_hi, 10 ** math.ceil(math.log10(ridge * 2)))
    grid = np.logspace(math.log10(x_lo), math.log10(x_hi), 200)
    for bw in ceilings.of_kind("bandwidth"):
        style = "-" if bw.source == "measured" else "--"
        (line,) = ax.plot(grid, bw.value * grid, style, color="#555555", lw=1,
                          label=literal(f"{bw.name}: {bw.value / 1e9:.0f} GB/s ({bw.source})"))
        roofs.append(line)
    for peak in ceilings.of_kind("compute"):
        style = "-" if peak.source == "measured" else "--"
        line = ax.axhline(peak.value, ls=style, color="#222222", lw=1,
                          label=literal(f"{peak.name}: {peak.value / 1e9:.0f} GFLOP/s ({peak.source})"))
        roofs.append(line)
    for source in ("measured", "spec sheet"):
        bw, peak = ceilings.best("bandwidth", source), ceilings.best("compute", source)
        if bw is not None and peak is not None:
            ridges.append(ax.axvline(peak.value / bw.value, color="#bbbbbb", ls=":" if source == "measured" else "-.", lw=1))
    total = sum(r["seconds"] for r in rows) or 1.0
    for r in rows:
        r["bound"] = ceilings.attainable(r["intensity"])
        r["percent_of_bound"] = 100 * r["attained"] / r["bound"] if r["bound"] else float("nan")
    sizes = [30 + 600 * r["seconds"] / total for r in rows]
    points = ax.scatter([r["intensity"] for r in rows], [r["attained"] for r in rows], s=sizes,
                        c=[kind_color(r["kind"]) for r in rows], edgecolors="black", linewidths=0.5,
                        zorder=3, alpha=0.85)
    labels = []
    placed: list[tuple[float, float]] = []  # labelled points, in decades: near ones stack their labels
    for r in sorted(rows, key=lambda r: -r["seconds"])[:top]:
        lx, ly = math.log10(r["intensity"]), math.log10(r["attained"])
        crowd = sum(abs(lx - px) < 0.6 and abs(ly - py) < 0.4 for px, py in placed)
        placed.append((lx, ly))
        where = r["source"].rsplit("/", 1)[-1] if r["source"] else ""
        state = bound_text(r["attained"], r["bound"])
        state = state if state.startswith("cache") else f"{state} of bound"
        text = f"{r['name']} ({state})" + (f"\n{where}" if where else "")
        labels.append(ax.annotate(literal(text), (r["intensity"], r["attained"]), xytext=(6, 6 - 22 * crowd),
                                  textcoords="offset points", fontsize=7,
                                  arrowprops={"arrowstyle": "-", "color": "#999999", "lw": 0.5} if crowd else None))
    arrows = []
    for r in rows:
        old = old_rows.get(r["name"])
        if old is not None:
            arrows.append(ax.annotate("", (r["intensity"], r["attained"]), (old["intensity"], old["attained"]),
                                      arrowprops={"arrowstyle": "->", "color": "#777777"}))
    if old_rows:
        ax.scatter([o["intensity"] for o in old_rows.values()], [o["attained"] for o in old_rows.values()],
                   s=20, facecolors="none", edgecolors="#777777", zorder=2)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    ys = [r["attained"] for r in rows] + ([peak_compute] if peak_compute else [])
    if ys:
        ax.set_ylim(10 ** math.floor(math.log10(min(ys) / 4)), 10 ** math.ceil(math.log10(max(ys) * 2)))
    ax.set_xlabel("arithmetic intensity (FLOP/byte, compiler estimate)")
    ax.set_ylabel("attained FLOP/s (measured time)")
    ax.set_title(literal(f"roofline: {ceilings.device}"), fontsize=10)
    ax.legend(fontsize=6, loc="lower right")
    ax.grid(True, which="both", alpha=0.2)
    return {"points": points, "roofs": roofs, "ridges": ridges, "labels": labels, "arrows": arrows,
            "rows": rows, "axes": ax}
