"""The graph-break report: every break with its reason, line and fix, the segments with their
sizes, Python glue against compiled time, and how often each guard failed
(``tk.explain(f, *args)``, ``f.graph_breaks``)."""
from __future__ import annotations

import html
from dataclasses import dataclass

from ..ir.source_names import display_location
from .break_log import RETURN, BreakLog
from .eager import EAGER_MIN_BREAKS


@dataclass(frozen=True)
class BreakInfo:
    reason: str
    location: str
    source: str
    count: int  # breaks here over the calls reported
    compiles: int  # segments ending here compiled
    guard_failures: int  # compiles after the first: Python traced a different segment here
    values: tuple  # the most recent values Python asked for here
    suggestion: str
    shapes: tuple = ()  # argument shapes of the segments compiled ending here (recent ones)

    @property
    def bucketing(self) -> str:
        """When the segment before this line compiled again for new shapes: pad to buckets."""
        distinct = list(dict.fromkeys(self.shapes))
        if self.compiles < 2 or len(distinct) < 2:
            return ""
        return (f"the segment before this line compiled {self.compiles} times for new argument "
                f"shapes (e.g. {distinct[0]}; then {distinct[-1]}): pad the growing array to a "
                "few bucket sizes (powers of two) and mask the padding, so it compiles once per "
                "bucket, or once for a fixed maximum length")

    @property
    def text(self) -> str:
        where = display_location(*self.location.rsplit(":", 1)) if ":" in self.location else "?"
        line = f"{where}: {self.reason}"
        if self.source:
            line += f"  `{self.source}`"
        line += f" — {self.count} break(s)"
        if self.guard_failures:
            seen = ", ".join(map(repr, self.values))
            line += (f"; the segment before it compiled {self.compiles} times (guard failed "
                     f"{self.guard_failures}x; recent values: {seen})")
        if self.suggestion:
            line += f"\n      fix: {self.suggestion}"
        if self.bucketing:
            line += f"\n      shapes: {self.bucketing}"
        return line


def _short(where: str) -> str:
    if where in ("entry", RETURN) or ":" not in where:
        return where
    return display_location(*where.rsplit(":", 1))


@dataclass(frozen=True)
class SegmentInfo:
    starts: str
    ends: str
    instructions: int
    parameters: int
    outputs: int
    compile_seconds: float
    runs: int
    run_seconds: float
    # runs on the reference interpreter before it compiled (segment_tiers); None: compiled at
    # its first run
    interpreted_runs: int | None = None
    compiled: bool = True  # (False: still interpreted, not yet run often enough)

    @property
    def text(self) -> str:
        if not self.compiled:
            how = (f"interpreted, not compiled ({self.compile_seconds * 1e3:.1f} ms to "
                   "prepare; it compiles if it runs again)")
        elif self.interpreted_runs:
            how = (f"interpreted {self.interpreted_runs}x, then compiled "
                   f"({self.compile_seconds * 1e3:.1f} ms in all)")
        else:
            how = f"compiled in {self.compile_seconds * 1e3:.1f} ms"
        return (f"{_short(self.starts)} -> {_short(self.ends)}: {self.instructions} instructions, "
                f"{self.parameters} in, {self.outputs} out; {how}; ran {self.runs}x, "
                f"{self.run_seconds * 1e6 / max(self.runs, 1):.1f} us each")


@dataclass(frozen=True)
class GraphBreakReport:
    """What ``torch._dynamo.explain`` tells, and the time and guard failures it does not."""

    function: str
    calls: int  # calls that ran in segments
    breaks: tuple[BreakInfo, ...]
    segments: tuple[SegmentInfo, ...]
    glue_seconds: float
    segment_seconds: float
    return_guard_failures: int
    result: object = None  # what the call returned (tk.explain)
    replayed_calls: int = 0  # calls that replayed every operation from the record
    replay_stops: tuple = ()  # ((reason, file:line, calls), ...): where other calls' replay ended
    # ((argument, file:line), ...): Python int arguments made static after a break asked for them
    specialized: tuple = ()
    # ((helper, file:line, calls merged, most paths, ((why not, calls), ...)), ...): pure helpers
    # whose data-dependent ifs were traced as selects, over the traced calls
    helpers: tuple = ()
    # ((file:line, selections, ((line that needed the length, selections), ...)), ...): x[mask]
    # kept dense until its length was needed, over the traced calls
    selections: tuple = ()
    # (text, ...): signatures whose calls were timed as plain NumPy (jitting.eager), and the
    # way they run now
    numpy_fallback: tuple = ()

    @property
    def break_count(self) -> int:
        return sum(b.count for b in self.breaks)

    @property
    def graph_count(self) -> int:
        """Segments run per call (breaks + 1), averaged over the calls."""
        return round((self.break_count + self.calls) / max(self.calls, 1))

    @property
    def break_reasons(self) -> list[str]:
        return [b.reason for b in self.breaks]

    @property
    def text(self) -> str:
        specialized = [f"  specialized: '{name}' is a Python int that Python needed as a number "
                       f"(at {_short(where)}), so it is a static argument: one whole program "
                       f"per value (a new value recompiles), no segments"
                       for name, where in self.specialized]
        helpers = []
        if self.helpers:
            helpers.append("pure helpers with data-dependent ifs (traced as selects where "
                           "exact; over the traced calls):")
        for name, where, merged, paths, whys in self.helpers:
            if merged:
                helpers.append(f"  {name} ({_short(where)}): {merged} call(s) merged from up "
                               f"to {paths} paths: no break there")
            helpers += [f"  {name} ({_short(where)}): not converted {calls}x: {why}; it ran "
                        "as written (a break)" for why, calls in whys]
        if self.selections:
            helpers.append("x[mask] with a traced mask, kept dense until its length is needed "
                           "(over the traced calls):")
        for where, taken, needed in self.selections:
            dense = taken - sum(count for _, count in needed)
            line = f"  {_short(where)}: {taken} selection(s), {dense} without a break"
            if needed:
                line += "; the length was needed at " + ", ".join(
                    f"{_short(at)} ({count}x)" for at, count in needed)
            helpers.append(line)
        if not self.breaks and not self.calls:
            return "\n".join([f"jit({self.function}): no graph breaks: one compiled program "
                              "per call"] + specialized + helpers)
        lines = [f"jit({self.function}): {self.break_count} graph break(s) over {self.calls} "
                 f"call(s), {self.graph_count} segment(s) per call",
                 f"time: Python glue (its code, its tracing or replay) "
                 f"{self.glue_seconds * 1e3:.2f} ms, "
                 f"segments {self.segment_seconds * 1e3:.2f} ms",
                 f"replay: {self.replayed_calls} of {self.calls} call(s) replayed every operation "
                 "from the record (no re-trace)"]
        lines += [f"  replay ended {count}x at {where or '?'}: {reason}"
                  for reason, where, count in self.replay_stops]
        if self.numpy_fallback:
            lines.append("signatures timed as plain NumPy against their calls in segments:")
            lines += ["  " + text for text in self.numpy_fallback]
        elif self.calls and self.break_count >= EAGER_MIN_BREAKS * self.calls:
            lines.append(f"  {self.break_count // self.calls} breaks a call: after two calls in "
                         "segments, a call is timed as plain NumPy, and the signature runs as "
                         "plain NumPy where that is twice as fast (tk.jit(..., "
                         "numpy_fallback=False) keeps segments)")
        lines += ["breaks:"]
        lines += ["  " + b.text for b in self.breaks]
        lines += specialized + helpers
        if self.return_guard_failures:
            lines.append(f"  the last segment (to the return) compiled again "
                         f"{self.return_guard_failures}x: Python traced a different one")
        lines.append("segments:")
        lines += ["  " + s.text for s in self.segments]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"<GraphBreakReport {self.function}: {self.break_count} breaks>"

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td>{html.escape(b.location)}</td><td>{html.escape(b.reason)}</td>"
            f"<td><code>{html.escape(b.source)}</code></td><td>{b.count}</td>"
            f"<td>{b.guard_failures}</td>"
            f"<td>{html.escape(' '.join(filter(None, (b.suggestion, b.bucketing))))}</td></tr>"
            for b in self.breaks)
        segs = "".join(f"<li>{html.escape(s.text)}</li>" for s in self.segments)
        helper_lines = [line.strip() for line in self.text.splitlines()
                        if any(line.startswith(f"  {h[0]} (") for h in self.helpers)]
        if helper_lines:
            segs += "".join(f"<li>helper {html.escape(line)}</li>" for line in helper_lines)
        segs += "".join(f"<li>signature {html.escape(text)}</li>" for text in self.numpy_fallback)
        summary = html.escape(self.text.splitlines()[0])
        return (f"<div class='tk-graph-breaks'><b>{summary}</b>"
                f"<p>Python glue {self.glue_seconds * 1e3:.2f} ms, segments "
                f"{self.segment_seconds * 1e3:.2f} ms</p>"
                "<table><tr><th>line</th><th>reason</th><th>source</th><th>breaks</th>"
                f"<th>guard failures</th><th>fix</th></tr>{rows}</table>"
                f"<ul>{segs}</ul></div>")


def report(function: str, log: BreakLog, result=None) -> GraphBreakReport:
    with log._lock:
        breaks = tuple(
            BreakInfo(s.site.reason, s.site.location, s.site.source, s.count, s.compiles,
                      s.guard_failures, tuple(s.values), s.site.suggestion(), tuple(s.shapes))
            for s in log.sites.values())
        segments = tuple(
            SegmentInfo(s.starts, s.ends, s.instructions, s.parameters, s.outputs,
                        s.compile_seconds, s.runs, s.run_seconds,
                        s.tiered.interpreted_runs if s.tiered is not None else None,
                        s.tiered is None or s.tiered.compiled is not None)
            for s in log.segments.values())
        return GraphBreakReport(function, log.calls, breaks, segments, log.glue_seconds,
                                log.segment_seconds, log.return_guard_failures, result,
                                replayed_calls=log.replayed_calls,
                                replay_stops=tuple((reason, where, count) for (reason, where), count
                                                   in log.replay_stops.items()),
                                specialized=tuple((name, site.location)
                                                  for name, site in log.specialized.items()),
                                helpers=tuple((name, where, merged, paths, tuple(whys.items()))
                                              for (name, where), (merged, paths, whys)
                                              in log.conversions.items()),
                                selections=tuple((where, taken, tuple(needed.items()))
                                                 for where, (taken, needed)
                                                 in log.selections.items()),
                                numpy_fallback=tuple(c.text for c in log.eager.values()
                                                     if c.decided is not None))
