"""Text and HTML reports over events: profile summaries and recompilation explanations.
Every user string is HTML-escaped."""
from __future__ import annotations

import html
from collections import defaultdict
from dataclasses import dataclass

from .events import PLAIN_NUMPY, CompileEvent, RecompileEvent


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.0f} µs"


def recompile_text(e: RecompileEvent) -> str:
    lines = [f"RECOMPILE #{e.number} of {e.function} (defined {e.location or '?'}) at call site "
             f"{e.call_site or '?'}: cost {_ms(e.duration)}"]
    width = max((len(c.message) for c in e.causes), default=0)
    for c in e.causes:
        lines.append(f"  • {c.message.ljust(width)}  [{c.code}]")
    lines.append(f"  now:     {e.new_signature}")
    lines.append(f"  closest: {e.closest_signature}")
    for other in e.other_closest:
        lines.append(f"  (equally close: {other})")
    if e.avoidable:
        lines.append(f"  avoidable: {e.avoidable_reason}")
    for s in e.suggestions:
        lines.append(f"  fix: {s}")
    return "\n".join(lines)


@dataclass(frozen=True)
class CauseTotal:
    code: str
    path: str
    count: int
    seconds: float
    example: str


def ranked_causes(recompiles: list[RecompileEvent]) -> list[CauseTotal]:
    """Causes grouped by (code, argument path), ranked by the compile time they cost."""
    groups: dict[tuple[str, str], list] = defaultdict(list)
    for e in recompiles:
        seen = set()
        for c in e.causes:
            key = (c.code, c.path)
            if key not in seen:
                seen.add(key)
                groups[key].append((e.duration, c.message))
    totals = [CauseTotal(code, path, len(v), sum(d for d, _ in v), v[-1][1])
              for (code, path), v in groups.items()]
    return sorted(totals, key=lambda t: (-t.seconds, -t.count, t.code))


class RecompileReport:
    """The recompilations of one function or of every function: text and HTML."""

    def __init__(self, recompiles: list[RecompileEvent], compiles: list[CompileEvent], title: str):
        self.recompiles = list(recompiles)
        self.compiles = list(compiles)
        self.title = title

    @property
    def total_compile_seconds(self) -> float:
        return sum(c.duration for c in self.compiles)

    def causes(self) -> list[CauseTotal]:
        return ranked_causes(self.recompiles)

    def text(self) -> str:
        if not self.compiles:
            return f"{self.title}: nothing compiled yet"
        functions = sorted({c.function for c in self.compiles})
        wasted = sum(e.duration for e in self.recompiles)
        head = (
            f"{self.title}: {len(self.compiles)} compiles of {len(functions)} function(s), "
            f"{_ms(self.total_compile_seconds)} compiling; {len(self.recompiles)} recompiles cost "
            f"{_ms(wasted)}"
        )
        if not self.recompiles:
            return head + "\nno recompilations"
        out = [head, "", "causes, by compile time spent:"]
        for t in self.causes():
            out.append(
                f"  {_ms(t.seconds):>10}  {t.count:>3}×  {t.code:<18} {t.path or '-':<16} e.g. "
                f"{t.example}"
            )
        avoidable = [e for e in self.recompiles if e.avoidable]
        if avoidable:
            out.append(
                f"  {len(avoidable)} recompile(s) produced a program identical to an earlier one "
                "(avoidable)"
            )
        out.append("")
        out.extend(recompile_text(e) + "\n" for e in self.recompiles)
        return "\n".join(out).rstrip() + "\n"

    __str__ = text

    def __repr__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        e = html.escape
        if not self.recompiles:
            return f"<div class='toolkit-recompiles'><b>{e(self.title)}</b>: no recompilations " \
                   f"({len(self.compiles)} compiles)</div>"
        rows = "".join(
            f"<tr><td>{_ms(t.seconds)}</td><td>{t.count}</td><td><code>{e(t.code)}</code></td>"
            f"<td><code>{e(t.path)}</code></td><td>{e(t.example)}</td></tr>"
            for t in self.causes()
        )
        blocks = "".join(f"<pre>{e(recompile_text(ev))}</pre>" for ev in self.recompiles)
        return (f"<div class='toolkit-recompiles'><h4>{e(self.title)}</h4>"
                f"<p>{len(self.compiles)} compiles, {len(self.recompiles)} recompiles, "
                f"{_ms(self.total_compile_seconds)} compiling</p>"
                f"<table><tr><th>cost</th><th>count</th><th>cause</th><th>argument</th><th>example</th></tr>{rows}</table>"
                f"{blocks}</div>")


def kernel_label(k) -> str:
    """Kernel names repeat across programs (every softmax has an input_reduce_fusion): the
    function's name keeps them apart."""
    return f"{k.function}/{k.name}" if k.function else k.name


def kernel_table(kernels) -> list[dict]:
    by_name: dict[str, dict] = {}
    for k in kernels:
        label = kernel_label(k)
        row = by_name.setdefault(
            label,
            {
                "name": label,
                "calls": 0,
                "seconds": 0.0,
                "flops": 0.0,
                "bytes": 0.0,
                "kind": k.kind,
                "source": k.source,
                "phase": k.phase,
            },
        )
        row["calls"] += 1
        row["seconds"] += k.duration
        row["flops"] += k.flops + k.transcendentals
        row["bytes"] += k.bytes_accessed
    total = sum(r["seconds"] for r in by_name.values()) or 1.0
    rows = sorted(by_name.values(), key=lambda r: -r["seconds"])
    for r in rows:
        r["share"] = r["seconds"] / total
        r["gflops"] = r["flops"] / r["seconds"] / 1e9 if r["seconds"] > 0 else 0.0
        r["gbps"] = r["bytes"] / r["seconds"] / 1e9 if r["seconds"] > 0 else 0.0
    return rows


def profile_summary_text(prof, top: int = 10) -> str:
    compiles, recompiles, kernels = prof.compiles, prof.recompiles, prof.kernels
    lines = [
        f"toolkit profile{(' ' + prof.name) if prof.name else ''}: {_ms(prof.wall_seconds)} wall; "
        f"profiler overhead {_ms(prof.overhead_seconds)} ({prof.overhead_fraction:.1%})"
    ]
    lines.append(f"compiles: {len(compiles)} ({len(recompiles)} recompiles), "
                 f"{_ms(sum(c.duration for c in compiles))} compiling")
    lines.extend(f"note: {n}" for n in getattr(prof, "notes", ()))
    if getattr(prof, "cached_program", ""):
        lines.append(
            f"  cached: {prof.cached_program}; its passes and fusion decisions are from that "
            "compile"
        )
    for c in compiles:
        phases = ", ".join(f"{p.name} {_ms(p.duration)}" for p in c.phases)
        lines.append(
            f"  {c.function:<16} {c.signature:<40} {c.cache:<14} {_ms(c.duration):>9}  ({phases})"
        )
    if recompiles:
        lines.append("recompilations:")
        lines.extend("  " + line for e in recompiles for line in recompile_text(e).splitlines())
    dispatches = prof.dispatches
    if dispatches:
        hits = sum(d.cache_hit for d in dispatches)
        lines.append(f"calls: {len(dispatches)} ({hits} cache hits), host dispatch "
                     f"{_ms(sum(d.duration for d in dispatches))}")
    if kernels:
        lines.append(
            f"kernels: {len(kernels)} launches, {_ms(sum(k.duration for k in kernels))}; top by "
            "time:"
        )
        # a differentiated program: its forward and backward passes
        if any(k.phase for k in kernels):
            forward = [k for k in kernels if k.phase == "forward"]
            backward = [k for k in kernels if k.phase == "backward"]
            lines.insert(
                -1,
                f"differentiated program: forward {len(forward)} launches "
                f"{_ms(sum(k.duration for k in forward))}, "
                f"backward {len(backward)} launches {_ms(sum(k.duration for k in backward))}",
            )
        lines.append(
            f"  {'kernel':<28} {'calls':>5} {'time':>10} {'share':>6} {'GFLOP/s':>8} {'GB/s':>7}  "
            "source"
        )
        for r in kernel_table(kernels)[:top]:
            lines.append(
                f"  {r['name']:<28} {r['calls']:>5} {_ms(r['seconds']):>10} {r['share']:>6.1%} "
                f"{r['gflops']:>8.2f} {r['gbps']:>7.2f}  {r['source']}"
            )
    lines.extend(transfer_lines(prof.transfers))
    promotions = getattr(prof, "promotions", ())
    if promotions:
        lines.append(f"float promotions by NumPy scalars: {len(promotions)}")
        lines.extend(f"  {p.function}, {p.message}" for p in promotions)
    lines.extend(graph_break_lines(getattr(prof, "graph_breaks", ())))
    lines.extend(collective_lines(getattr(prof, "collectives", ())))
    return "\n".join(lines)


def graph_breaks_by_site(events) -> dict[tuple[str, str, str], tuple[int, float, float, int]]:
    """GraphBreakEvents by (function, reason, line): segments run, compiled seconds, Python
    glue seconds, and segments compiled (new, or a guard that failed)."""
    by_site: dict = {}
    for e in events:
        key = (e.function, e.reason, e.location)
        count, seconds, glue, compiled = by_site.get(key, (0, 0.0, 0.0, 0))
        by_site[key] = (count + 1, seconds + e.duration, glue + e.glue, compiled + e.compiled)
    return by_site


def graph_break_lines(events) -> list[str]:
    """Graph breaks by function and line: how many, compiled segment time against the Python
    glue between segments, and segments compiled (new, or a guard that failed)."""
    if not events:
        return []
    lines = [f"graph breaks: {sum(e.reason not in ('return', PLAIN_NUMPY) for e in events)}, "
             f"segments {_ms(sum(e.duration for e in events))}, "
             f"Python glue {_ms(sum(e.glue for e in events))}"]
    for (function, reason, location), (count, seconds, glue, compiled) in \
            graph_breaks_by_site(events).items():
        where = f" at {location}" if location else ""
        lines.append(f"  {function}: {reason}{where}: {count}x, {_ms(seconds + glue)} with glue"
                     + (f", {compiled} segment(s) compiled" if compiled else ""))
    return lines


def transfer_lines(transfers) -> list[str]:
    """Copies by direction (count, MB, device time, GB/s), then every avoidable round trip."""
    if not transfers:
        return []
    lines = [f"transfers: {len(transfers)}, {sum(t.bytes for t in transfers) / 1e6:.2f} MB"]
    for direction in ("host_to_device", "device_to_host", "device_to_device"):
        group = [t for t in transfers if t.direction == direction]
        if group:
            nbytes, seconds = sum(t.bytes for t in group), sum(t.duration for t in group)
            rate = f", {nbytes / seconds / 1e9:.1f} GB/s" if seconds > 0 else ""
            lines.append(
                f"  {direction:<16} {len(group):>5} copies {nbytes / 1e6:>10.2f} MB "
                f"{_ms(seconds):>10}{rate}"
            )
    avoidable = [t for t in transfers if t.avoidable]
    if avoidable:
        lines.append(f"  {len(avoidable)} avoidable round trip(s) through the host:")
        lines.extend(
            f"    {t.function or '?'} at {t.location or '?'}: {t.avoidable}" for t in avoidable[:10]
        )
    return lines


def profile_summary_html(prof) -> str:
    return f"<pre class='toolkit-profile'>{html.escape(profile_summary_text(prof))}</pre>"


def collective_lines(events) -> list[str]:
    """Per collective op: how many, time waiting for peers against time combining, bus
    bandwidth, and the straggler: the device whose arrival completed the most groups."""
    if not events:
        return []
    by_op: dict[str, list] = {}
    for e in events:
        by_op.setdefault(e.op, []).append(e)
    lines = [f"collectives: {len(events)} device parts in "
             f"{len({(e.name, e.start) for e in events if e.device == e.last})} meetings"]
    for op, group in sorted(by_op.items()):
        wait = sum(e.wait for e in group)
        busy = sum(e.duration for e in group)
        nbytes = sum(e.bytes for e in group)
        busbw = sum(e.busbw * e.duration for e in group) / busy if busy else 0.0
        lines.append(f"  {op:<20} {len(group):6d} parts  {_ms(wait)} waiting for peers, "
                     f"{_ms(busy)} combining, {nbytes / 1e6:.3g} MB, busbw {busbw / 1e9:.3g} GB/s")
    last: dict[int, int] = {}
    for e in events:
        if e.device == e.last:
            last[e.device] = last.get(e.device, 0) + 1
    if last:
        device, count = max(last.items(), key=lambda kv: (kv[1], -kv[0]))
        total = sum(last.values())
        lines.append(f"  straggler: device {device} arrived last at {count} of {total} meetings"
                     + (" (the others waited for it)" if count > total / 2 else ""))
    return lines

