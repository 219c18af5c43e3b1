"""Placing text on a plot so that no label covers another: each label tries its candidate
positions in order and takes the first whose box (in display space, as drawn) stays inside the
axes and clear of the labels placed before it, and of the markers if it can."""
from __future__ import annotations

import math
from dataclasses import dataclass

from matplotlib.transforms import Bbox

_PAD = 1.0  # pixels kept between two labels


@dataclass(frozen=True)
class Spot:
    """A candidate position: the anchor (data coordinates), the offset from it in points and
    the text's alignment there."""

    x: float
    y: float
    dx: float
    dy: float
    ha: str = "left"
    va: str = "bottom"


def ring(x: float, y: float, radius_pt: float, rings: int = 6, step_pt: float = 7.0) -> list[Spot]:
    """Spots around a marker of ``radius_pt``: right, above, left, below and the diagonals,
    then the same farther out."""
    spots = []
    for k in range(rings):
        r = radius_pt + 1.5 + k * step_pt
        for angle in (0, 90, 180, 270, 45, 135, 225, 315):
            dx, dy = r * math.cos(math.radians(angle)), r * math.sin(math.radians(angle))
            ha = "left" if dx > 0.1 else "right" if dx < -0.1 else "center"
            va = "bottom" if dy > 0.1 else "top" if dy < -0.1 else "center"
            spots.append(Spot(x, y, dx, dy, ha, va))
    return spots


def _hits(box: Bbox, others: list[Bbox]) -> int:
    return sum(box.overlaps(o) for o in others)


def place(ax, text: str, spots: list[Spot], placed: list[Bbox], markers: list[Bbox] = (),
          **style):
    """The annotation of ``text`` at the first of ``spots`` that fits (see the module), else at
    the one covering fewest labels; its box is appended to ``placed``. Returns (annotation,
    index of the spot taken)."""
    first = spots[0]
    note = ax.annotate(text, (first.x, first.y), xytext=(first.dx, first.dy),
                       textcoords="offset points", ha=first.ha, va=first.va, **style)
    frame = ax.get_window_extent()
    best = None
    for strict in (True, False):
        for i, spot in enumerate(spots):
            box = _box(note, spot)
            inside = frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 \
                and box.y1 <= frame.y1
            if not inside:
                continue
            if not _hits(box, placed) and not (strict and _hits(box, list(markers))):
                placed.append(box)
                return note, i
            score = _hits(box, placed)
            if best is None or score < best[0]:
                best = (score, i, box)
    if best is None:  # nowhere inside the axes: the first spot, clipped
        box, index = _box(note, first), 0
    else:
        _, index, box = best
        _box(note, spots[index])
    placed.append(box)
    return note, index


def _box(note, spot: Spot) -> Bbox:
    note.xy = (spot.x, spot.y)
    note.xyann = (spot.dx, spot.dy)
    note.set_ha(spot.ha)
    note.set_va(spot.va)
    return note.get_window_extent().expanded(1.0, 1.0).padded(_PAD)


def marker_box(ax, x: float, y: float, size_pt2: float) -> Bbox:
    """The display box of a scatter marker of area ``size_pt2`` (points²) at (x, y)."""
    cx, cy = ax.transData.transform((x, y))
    r = math.sqrt(size_pt2) / 2 * ax.figure.dpi / 72
    return Bbox.from_extents(cx - r, cy - r, cx + r, cy + r)
