"""The static dashboard: one self-contained HTML document (tables and inline PNG plots, no
network references, every user string escaped) that survives nbconvert, nbviewer, GitHub and
VS Code without a kernel. The widget dashboard shows the same sections."""
from __future__ import annotations

import base64
import html
import io
from collections import Counter

from ..ir.ops import GroupOp
from ..profiler.report import (RecompileReport, graph_breaks_by_site, kernel_table,
                               profile_summary_text)
from ..roofline import Ceilings, bound_text

e = html.escape
STYLE = """<style>
.tk-report{font-family:system-ui,-apple-system,Segoe UI,sans-serif;font-size:13px;max-width:100%;
  box-sizing:border-box}
.tk-report table{border-collapse:collapse;margin:6px 0;max-width:100%}
.tk-report td,.tk-report th{border:1px solid #ddd;padding:3px 8px;text-align:right;
  overflow-wrap:anywhere}
.tk-report td:first-child,.tk-report th:first-child{text-align:left}
.tk-report pre{background:#f6f8fa;padding:8px;overflow:auto;font-size:11px;max-height:480px;
  white-space:pre-wrap;overflow-wrap:anywhere}
.tk-report pre.tk-code .tk-line{display:block;padding-left:6ch;text-indent:-6ch}
.tk-report img{max-width:100%;height:auto}
.tk-report h3{margin:14px 0 4px}.tk-report .tk-note{color:#666}
.tk-report .tk-side{display:flex;gap:8px}.tk-report .tk-side>div{flex:1;min-width:0}
</style>"""


def _table(header: list[str], rows: list[list]) -> str:
    head = "".join(f"<th>{e(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{e(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def figure_png(fig) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def summary_section(prof) -> str:
    compile_s = sum(c.duration for c in prof.compiles)
    kernels = prof.kernels
    run_s = sum(k.duration for k in kernels)
    moved = sum(k.bytes_accessed for k in kernels)
    fusions = len({k.name for k in kernels if k.kind in ("kLoop", "kInput", "kOutput", "kCustom")})
    rows = [
        [
            "compile time",
            (
                f"{compile_s * 1e3:.1f} ms ({len(prof.compiles)} compiles, {len(prof.recompiles)} "
                "recompiles)"
            ),
        ],
        [
            "kernel time",
            (
                f"{run_s * 1e3:.3f} ms ({len(kernels)} launches of "
                f"{len({k.name for k in kernels})} kernels, {fusions} fusions)"
            ),
        ],
        ["bytes moved by kernels", f"{moved / 1e6:.2f} MB (compiler estimate)"],
        [
            "host dispatch",
            (
                f"{sum(d.duration for d in prof.dispatches) * 1e3:.3f} ms ({len(prof.dispatches)} "
                f"call{'' if len(prof.dispatches) == 1 else 's'})"
            ),
        ],
        [
            "profiler overhead",
            (
                f"{prof.overhead_seconds * 1e3:.3f} ms ({prof.overhead_fraction:.1%} of the "
                "session, a lower bound)"
            ),
        ],
    ]
    phased = [k for k in kernels if k.phase]
    if phased:  # a differentiated program: the two passes
        for phase in ("forward", "backward"):
            group = [k for k in phased if k.phase == phase]
            rows.append(
                [
                    f"{phase} pass",
                    f"{sum(k.duration for k in group) * 1e3:.3f} ms ({len(group)} launches)",
                ]
            )
    top = kernel_table(kernels)[:5]
    top_rows = [
        [r["name"], r["kind"], f"{r['seconds'] * 1e3:.3f}", f"{r['share']:.0%}", r["source"]]
        for r in top
    ]
    notes = "".join(f"<p class='tk-note'>{e(n)}</p>" for n in getattr(prof, "notes", ()))
    return (
        notes
        + _table(["", ""], rows + _transfer_rows(prof.transfers))
        + "<h3>top kernels</h3>"
        + _table(["kernel", "kind", "ms", "share", "source"], top_rows)
        + promotion_section(prof)
        + graph_break_section(prof)
        + collective_section(prof)
        + transfer_section(prof.transfers)
    )


def collective_section(prof) -> str:
    """An SPMD run's communication: per device, kernel time against time waiting for peers and
    exchanging (the communication share); per collective op, bytes and bus bandwidth by
    nccl-tests' formulas; the straggler."""
    events = list(getattr(prof, "collectives", ()))
    if not events:
        return ""
    devices = sorted({c.device for c in events})
    exchanged = {c.name for c in events}  # (a collective's host step is a kernel event too)
    rows = []
    for d in devices:
        mine = [c for c in events if c.device == d]
        wait = sum(c.wait for c in mine)
        exchange = sum(c.duration for c in mine)
        compute = sum(k.duration for k in prof.kernels if k.name not in exchanged and (
            k.device == f"device {d}" or k.device.endswith(f"/device {d}")))
        total = compute + wait + exchange
        share = (wait + exchange) / total if total else 0.0
        rows.append([f"device {d}", f"{compute * 1e3:.3f}", f"{wait * 1e3:.3f}",
                     f"{exchange * 1e3:.3f}", f"{share:.0%}"])
    ops = []
    for op in sorted({c.op for c in events}):
        group = [c for c in events if c.op == op]
        busy = sum(c.duration for c in group)
        busbw = sum(c.busbw * c.duration for c in group) / busy if busy else 0.0
        ops.append([op, str(len(group)), f"{sum(c.bytes for c in group) / 1e6:.3g}",
                    f"{busbw / 1e9:.3g}"])
    from ..profiler.report import collective_lines

    straggler = [line.strip() for line in collective_lines(events) if "straggler" in line]
    return ("<h3>collectives</h3>"
            + _table(["device", "kernels ms", "waiting for peers ms", "exchanging ms",
                      "communication share"], rows)
            + _table(["collective", "device parts", "MB", "busbw GB/s"], ops)
            + "".join(f"<p class='tk-note'>{e(line)}</p>" for line in straggler))


def promotion_section(prof) -> str:
    """Lines where a NumPy scalar made a float32 program float64 (NEP 50), what that cost in
    dots and operations, and the fix."""
    promotions = getattr(prof, "promotions", ())
    if not promotions:
        return ""
    rows = [[p.function, p.location, p.what, f"{p.from_dtype} → {p.to_dtype}",
             f"{p.dots} of {p.total_dots}", str(p.operations),
             f"float(...) around the scalar keeps {p.from_dtype}"] for p in promotions]
    return ("<h3>float promotions by NumPy scalars</h3>"
            "<p class='tk-note'>Under NumPy 2 (NEP 50) a NumPy float64 scalar is not weak: it "
            "makes a float32 array float64, and everything computed from it after.</p>"
            + _table(["function", "line", "what", "types", "dots", "operations", "fix"], rows))


def graph_break_section(prof) -> str:
    """Where Python needed a traced value, so the program ran in segments: each break's line
    and reason, how often, the compiled time against the Python glue, and segments compiled."""
    events = getattr(prof, "graph_breaks", ())
    if not events:
        return ""
    rows = [[function, location or "(return)", reason, str(count), f"{seg * 1e3:.3f}",
             f"{glue * 1e3:.3f}", str(compiled)]
            for (function, reason, location), (count, seg, glue, compiled)
            in graph_breaks_by_site(events).items()]
    return ("<h3>Graph breaks</h3>"
            "<p class='tk-note'>Python needed a traced value here, so the program ran in "
            "segments: the segment up to the line, then Python, then the next segment. "
            "tk.explain(f, *args) lists each break with its fix.</p>"
            + _table(["function", "line", "reason", "segments run", "segment ms", "glue ms",
                      "compiled"], rows))


def _transfer_rows(transfers) -> list[list[str]]:
    if not transfers:
        return []
    by_direction = Counter(t.direction.replace("_", " ") for t in transfers)
    rows = [
        [
            "host/device copies",
            f"{len(transfers)} ({', '.join(f'{n} {d}' for d, n in by_direction.items())}), "
            f"{sum(t.bytes for t in transfers) / 1e6:.2f} MB, "
            f"{sum(t.duration for t in transfers) * 1e3:.3f} ms",
        ]
    ]
    avoidable = [t for t in transfers if t.avoidable]
    if avoidable:
        rows.append(["avoidable round trips", f"{len(avoidable)}: {avoidable[0].avoidable}"])
    return rows


def transfer_section(transfers, limit: int = 20) -> str:
    """The copies between host and device: what moved, where it was asked for, and why not to."""
    if not transfers:
        return ""
    rows = [
        [
            t.direction.replace("_", " "),
            f"{t.bytes / 1e6:.3f}",
            f"{t.duration * 1e6:.1f}",
            t.what,
            t.location,
            t.avoidable or "",
        ]
        for t in transfers[:limit]
    ]
    more = (
        f"<p class='tk-note'>… and {len(transfers) - limit} more</p>"
        if len(transfers) > limit
        else ""
    )
    return (
        "<h3>copies</h3>"
        + _table(["direction", "MB", "µs", "what", "line", "avoidable"], rows)
        + more
    )


def recompile_section(prof) -> str:
    return RecompileReport(prof.recompiles, prof.compiles, "recompilations")._repr_html_()


def fusion_section(prof, reason: str | None = None) -> str:
    """Every decision: the rejections first (the user's question is why something did not
    fuse), the fused edges folded below with the memory traffic each saves. A ``program``
    column says which compile made each decision: a function compiled at two shapes decides
    twice."""
    decisions = [d for d in prof.fusion_decisions if reason is None or d.reason == reason]
    counts = Counter(d.reason for d in prof.fusion_decisions)
    summary = ", ".join(f"{n}× {r}" for r, n in counts.most_common())
    programs = _program_names(prof)

    def rows(ds, saved: bool):
        return [[programs.get(d.compile_id) or _earlier_program(prof, d), d.producer, d.consumer,
                 d.reason, d.message, d.producer_location]
                + ([f"{d.bytes_saved:,}"] if saved else []) for d in ds]

    header = ["program", "producer", "consumer", "reason", "why", "source"]
    rejected = [d for d in decisions if not d.fused]
    fused = [d for d in decisions if d.fused]
    out = f"<p>{e(summary) or 'no fusion decisions recorded'}</p>"
    if rejected:
        out += f"<h3>not fused ({len(rejected)})</h3>" + _table(header, rows(rejected, False))
    if fused:
        total = sum(d.bytes_saved for d in fused)
        out += (f"<details><summary>fused ({len(fused)} edges, saving {total / 1e6:.2f} MB "
                f"of memory traffic per run, est.)</summary>"
                + _table(header + ["bytes saved (est.)"], rows(fused, True))
                + "<p class='tk-note'>bytes saved: the buffer a producer no longer writes and its "
                "consumers no longer read back, less its operands read again where it is copied "
                "into several fusions (XLA's fusion cost model)</p></details>")
    return out


def _program_names(prof) -> dict[int, str]:
    """compile id -> 'function(signature)', the program a decision was made for."""
    return {c.compile_id: f"{c.function}({c.signature})" for c in prof.compiles}


def _earlier_program(prof, decision) -> str:
    """A decision adopted from a compile before this profile (a cached program)."""
    return getattr(prof, "cached_program", "") or f"compile #{decision.compile_id}"


def fusions_of(compiled: dict) -> list[tuple[str, object]]:
    """(program name, fusion instruction) for every fusion of the optimised programs."""
    return [(name, inst) for name, c in (compiled or {}).items()
            for inst in c.optimized_hlo.entry.instructions if inst.opcode == "fusion"]


def fusion_detail(inst) -> str:
    """One fusion: its kind, the instructions it holds with their source lines, its computation."""
    comp = inst.attrs["calls"]
    members = [[m.name, m.opcode, str(m.shape), m.metadata.op_name if m.metadata else "",
                m.metadata.location if m.metadata else ""]
               for m in comp.instructions if m.opcode not in GroupOp.PLUMBING]
    from ..ir.printer import computation_to_text

    return (
        f"<p>{e(inst.name)}: {e(inst.attrs['kind'])}, {len(members)} instructions, reads "
        f"{len(inst.operands)} operand(s)</p>"
        + _table(["instruction", "op", "shape", "op_name", "source"], members)
        + code_block(computation_to_text(comp, metadata=False))
    )


def fusion_list_section(compiled: dict) -> str:
    items = fusions_of(compiled)
    return "".join(
        f"<details><summary>{e(prog)}: {e(inst.name)} ({e(inst.attrs['kind'])})</summary>"
        f"{fusion_detail(inst)}</details>"
        for prog, inst in items
    )


def kernel_section(prof, ceilings: Ceilings | None = None, sort: str = "seconds") -> str:
    rows = kernel_table(prof.kernels)
    rows.sort(
        key=lambda r: -r.get(sort, 0) if isinstance(r.get(sort, 0), (int, float)) else r.get(sort)
    )
    # a differentiated program: say which pass each kernel is in
    phased = any(r["phase"] for r in rows)
    out = []
    for r in rows:
        intensity = r["flops"] / r["bytes"] if r["bytes"] else 0.0
        attained = r["flops"] / r["seconds"] if r["seconds"] else 0.0
        bound = ceilings.attainable(intensity) if ceilings and intensity else float("nan")
        pct = bound_text(attained, bound)
        out.append([r["name"], r["kind"]] + ([r["phase"]] if phased else []) + [
            r["calls"], f"{r['seconds'] * 1e3:.3f}", f"{r['share']:.1%}",
            f"{r['gflops']:.2f}", f"{r['gbps']:.2f}", f"{intensity:.3f}", pct, r["source"]])
    return _table(["kernel", "kind"] + (["pass"] if phased else []) + [
        "calls", "ms", "% of time", "GFLOP/s", "GB/s", "FLOP/byte", "% of roofline", "source"], out)


def plot_section(prof, which: str, ceilings: Ceilings | None = None) -> str:
    from matplotlib.figure import Figure  # no pyplot: no GUI backend, no global figure state

    from .. import plots

    if which == "roofline" and not prof.kernels:
        return "<p class='tk-note'>no kernels recorded</p>"
    fig = Figure(figsize=(9, 3.6 if which == "timeline" else 5))
    ax = fig.subplots()
    if which == "timeline":
        plots.timeline(prof, ax=ax)
    else:
        plots.roofline(prof, ceilings, ax=ax)
    note = (
        "Intensity and FLOPs are compiler estimates; time is measured."
        if which == "roofline"
        else ""
    )
    return f"<img alt='{which}' src='{figure_png(fig)}'/><p class='tk-note'>{note}</p>"


def code_block(text: str) -> str:
    """Program text that wraps within its box instead of running off its right edge: one block
    per line, a wrapped line's continuation indented below its start."""
    lines = "".join(f"<span class='tk-line'>{e(line) or ' '}</span>" for line in text.splitlines())
    return f"<pre class='tk-code'>{lines}</pre>"


def ir_section(compiled: dict) -> str:
    """``compiled``: name -> Compiled. HLO before and after optimisation, side by side."""
    parts = []
    for name, c in compiled.items():
        before, after = code_block(c.as_text("hlo")), code_block(c.as_text("optimized_hlo"))
        parts.append(f"<h3>{e(name)}</h3><div class='tk-side'><div><b>hlo</b>{before}</div>"
                     f"<div><b>optimized_hlo</b>{after}</div></div>")
    return "".join(parts) or "<p class='tk-note'>no compiled programs</p>"


SECTIONS = ("Summary", "Recompilations", "Fusion", "Kernels", "Timeline", "Roofline", "IR")


def residuals_section(compiled: dict) -> str:
    """What each differentiated program's backward pass keeps from its forward pass."""
    parts = []
    for name, c in (compiled or {}).items():
        rows = c.saved_residuals() if hasattr(c, "saved_residuals") else []
        if not rows:
            continue
        kept = sum(r.bytes for r in rows if r.kind == "intermediate")
        table = _table(
            ["bytes", "shape", "produced by", "read by"],
            [[f"{r.bytes:,}", r.shape, r.produced_by, ", ".join(r.read_by)] for r in rows],
        )
        parts.append(
            f"<h3>saved residuals: {e(name)}</h3><p>{len(rows)} values, "
            f"{sum(r.bytes for r in rows):,} bytes "
            f"({kept:,} bytes of intermediates; tk.checkpoint recomputes a function's "
            f"instead)</p>{table}"
        )
    return "".join(parts)


def section_html(name: str, prof, ceilings=None, compiled=None) -> str:
    if name == "Summary":
        return summary_section(prof) + residuals_section(compiled)
    if name == "Recompilations":
        return recompile_section(prof)
    if name == "Fusion":
        listed = fusion_list_section(compiled or {})
        return fusion_section(prof) + (f"<h3>fusions</h3>{listed}" if listed else "")
    if name == "Kernels":
        return kernel_section(prof, ceilings)
    if name == "Timeline":
        return plot_section(prof, "timeline")
    if name == "Roofline":
        return plot_section(prof, "roofline", ceilings)
    return ir_section(compiled or {})


def report_html(prof, ceilings: Ceilings | None = None, compiled: dict | None = None,
                title: str = "toolkit profile", full_document: bool = False,
                sections=SECTIONS) -> str:
    body = "".join(f"<h2>{e(s)}</h2>{section_html(s, prof, ceilings, compiled)}" for s in sections)
    fragment = f"{STYLE}<div class='tk-report'><h1>{e(title)}</h1>{body}</div>"
    if not full_document:
        return fragment
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{e(title)}</title></head>"
            f"<body>{fragment}</body></html>")


def report_text(prof) -> str:
    return profile_summary_text(prof)
