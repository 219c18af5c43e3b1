"""Where a timeline opens: on the execution (kernels, copies, calls served from the cache), not
on the whole session, where tens of milliseconds of compilation would squeeze microseconds of
runs into a sliver at the edge. The plot and the interactive timeline both open here."""
from __future__ import annotations

MARGIN = 0.04  # of the runs' span, on each side, so the first and last bars do not touch the edges


def origin_of(profile) -> float:
    """The time the timeline's axis counts from (seconds, the profiler's clock)."""
    if profile.start is not None:
        return profile.start
    return min((e.start for e in profile.events), default=0.0)


def execution_window(profile) -> tuple[float, float] | None:
    """(start, end) in ms from ``origin_of(profile)`` spanning every kernel, copy and cache-hit
    dispatch, with a small margin; None when the profile ran nothing. A dispatch that compiled
    is left out: its span holds the compile."""
    spans = [(k.start, k.start + k.duration) for k in profile.kernels]
    spans += [(t.start, t.start + t.duration) for t in profile.transfers]
    spans += [(d.start, d.start + d.duration) for d in profile.dispatches if d.cache_hit]
    spans += [(c.start, c.start + c.wait + c.duration) for c in getattr(profile, "collectives", ())]
    if not spans:
        return None
    origin = origin_of(profile)
    lo = (min(s for s, _ in spans) - origin) * 1e3
    hi = (max(e for _, e in spans) - origin) * 1e3
    pad = max(hi - lo, 1e-6) * MARGIN
    return max(lo - pad, 0.0), hi + pad


def compilation_before(profile, window_start_ms: float) -> float:
    """Milliseconds of compile phases that end before ``window_start_ms``: what the opening
    view leaves out on its left."""
    origin = origin_of(profile)
    return sum(p.duration for c in profile.compiles for p in c.phases
               if (p.start + p.duration - origin) * 1e3 <= window_start_ms) * 1e3
