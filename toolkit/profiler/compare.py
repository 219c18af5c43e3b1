"""Comparing two profiles: kernels added and removed, time deltas per kernel and in total,
and fusion decisions that changed."""
from __future__ import annotations

import html
from dataclasses import dataclass

from .report import kernel_table


@dataclass(frozen=True)
class KernelDelta:
    name: str
    before: float  # seconds per call (0: absent)
    after: float
    calls_before: int
    calls_after: int

    @property
    def delta(self) -> float:
        return self.after - self.before


class ProfileComparison:
    def __init__(self, before, after):
        self.before, self.after = before, after
        a = {r["name"]: r for r in kernel_table(before.kernels)}
        b = {r["name"]: r for r in kernel_table(after.kernels)}
        self.added = sorted(set(b) - set(a))
        self.removed = sorted(set(a) - set(b))
        self.kernels = [KernelDelta(n, a[n]["seconds"] / a[n]["calls"] if n in a else 0.0,
                                    b[n]["seconds"] / b[n]["calls"] if n in b else 0.0,
                                    a.get(n, {}).get("calls", 0), b.get(n, {}).get("calls", 0))
                        for n in sorted(set(a) | set(b))]
        self.total_before = sum(k.duration for k in before.kernels)
        self.total_after = sum(k.duration for k in after.kernels)
        old = {(d.producer, d.consumer): d for d in before.fusion_decisions}
        new = {(d.producer, d.consumer): d for d in after.fusion_decisions}
        self.fusion_changes = [
            (key, old.get(key), new.get(key))
            for key in sorted(set(old) | set(new))
            if (old.get(key) and old[key].reason) != (new.get(key) and new[key].reason)
        ]

    def text(self) -> str:
        lines = [
            f"kernel time: {self.total_before * 1e3:.3f} ms -> {self.total_after * 1e3:.3f} ms "
            f"({(self.total_after - self.total_before) * 1e3:+.3f} ms)"
        ]
        if self.added:
            lines.append("added kernels: " + ", ".join(self.added))
        if self.removed:
            lines.append("removed kernels: " + ", ".join(self.removed))
        lines.append(f"  {'kernel':<28} {'before ms':>10} {'after ms':>10} {'delta ms':>10}")
        for k in sorted(self.kernels, key=lambda k: -abs(k.delta)):
            lines.append(
                f"  {k.name:<28} {k.before * 1e3:>10.4f} {k.after * 1e3:>10.4f} "
                f"{k.delta * 1e3:>+10.4f}"
            )
        for (producer, consumer), old, new in self.fusion_changes:
            was = f"{old.reason}" if old else "not considered"
            now = f"{new.reason}" if new else "not considered"
            lines.append(f"fusion %{producer} -> %{consumer}: {was} -> {now}")
        return "\n".join(lines)

    __str__ = text

    def __repr__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        e = html.escape
        rows = "".join(
            f"<tr><td>{e(k.name)}</td><td>{k.before * 1e3:.4f}</td><td>{k.after * 1e3:.4f}</td>"
            f"<td>{k.delta * 1e3:+.4f}</td></tr>"
            for k in sorted(self.kernels, key=lambda k: -abs(k.delta))
        )
        changes = "".join(
            f"<li>%{e(p)} → %{e(c)}: {e(o.reason if o else 'not considered')} → "
            f"{e(n.reason if n else 'not considered')}</li>"
            for (p, c), o, n in self.fusion_changes
        )
        return (f"<div class='toolkit-compare'><p>kernel time {self.total_before * 1e3:.3f} ms → "
                f"{self.total_after * 1e3:.3f} ms</p><table><tr><th>kernel</th><th>before ms</th>"
                f"<th>after ms</th><th>delta ms</th></tr>{rows}</table>"
                + (f"<ul>{changes}</ul>" if changes else "") + "</div>")


def compare(before, after) -> ProfileComparison:
    return ProfileComparison(before, after)
