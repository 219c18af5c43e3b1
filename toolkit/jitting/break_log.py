"""Graph breaks, the record the report is made from: where and why each break happened (its
site, with the fix to suggest), and per site and per segment how often it broke, compiled and
ran, bounded."""
from __future__ import annotations

import linecache
import threading
from collections import OrderedDict, deque
from dataclasses import dataclass, field

from ..ir.user_code import user_frame

ENTRY = "entry"
RETURN = "return"
_SITES_KEPT = 256
_VALUES_KEPT = 4


@dataclass(frozen=True, slots=True)
class BreakSite:
    """Where and why Python needed a value: the reason in words and the user's line."""

    reason: str
    location: str  # file:line
    source: str  # the line's text, stripped
    key: tuple[str, str] = field(init=False, repr=False, compare=False)  # (reason, location)

    def __post_init__(self) -> None:  # (asked at every break: made once)
        object.__setattr__(self, "key", (self.reason, self.location))

    def suggestion(self) -> str:
        return suggest(self.reason, self.source)


def suggest(reason: str, source: str) -> str:
    """The structured form that keeps the program whole, where one exists."""
    code = source.lstrip()
    if reason.startswith(("str()", "repr()", "format()")):
        return ("printing or formatting a traced value runs the program so far to show it: "
                "return the value and print it outside the jitted function (or only now and "
                "then), and the function stays one program")
    if "draws new numbers every call" in reason:
        return ("NumPy's random generator runs in Python, so the call runs its Python every call "
                "(in segments) to draw anew: draw the numbers outside and pass them in as an "
                "argument, and the function compiles to one program")
    if reason.startswith("print() runs every call"):
        return ("print() runs in Python, so the call runs its Python every call to print: "
                "return the values and print them after the call, and the function compiles to "
                "one program")
    if reason.startswith("Python state changed"):
        return ("a compiled program cannot write Python's state (a counter, a list, an "
                "attribute), so the call runs its Python every call to write it: return the new "
                "values and update the state after the call, and the function compiles to one "
                "program")
    if reason.endswith("checked inside try"):
        return ("inside a try block the error NumPy would raise here is checked here, so that "
                "the except sees it: a break per call; test the condition with arrays instead "
                "(np.where, np.clip of the index) and the function stays one program")
    if " ran in NumPy" in reason:
        return ("toolkit does not compile this function, so NumPy runs it between two segments: "
                "written with the functions toolkit compiles (toolkit.numpy.supported_functions()"
                " lists them) it stays in one program")
    if reason.startswith("bool()") and code.startswith("while "):
        return (f"`{code.rstrip(':')}`: tk.lax.while_loop(cond_fun, body_fun, state) keeps the "
                "loop in one program")
    if reason.startswith("bool()") and code.startswith(("if ", "elif ")):
        return (f"`{code.rstrip(':')}`: compute both sides and pick with np.where(cond, a, b), or "
                "run one with tk.lax.cond(pred, true_fun, false_fun, *operands)")
    if reason.startswith("bool()"):
        return "a Python `and`/`or`/`not` or assert on an array: use np.logical_and/or/not"
    if reason.startswith(("int()", "use as an index")):
        return ("a Python int computed from an array: if it is really a constant of the call, pass "
                "it as a static argument (static_argnums=); a fixed-size window "
                "(tk.lax.dynamic_slice) keeps a moving offset traced")
    if reason.startswith(("x[mask]", "np.nonzero", "np.unique", "np.where", "np.argwhere",
                          "np.flatnonzero", "np.compress", "np.extract", "a slice")):
        return ("the result's size depends on the data: np.where(mask, x, 0) keeps the shape; "
                "toolkit.numpy's nonzero/unique take size=N (padded), as in JAX")
    if reason.startswith(("np.asarray", "tolist", "item", "float()", "complex()")):
        return ("the value leaves the compiled program here: keep computing with arrays, or "
                "return it from the jitted function")
    return ""


_SITES: dict[tuple, BreakSite] = {}  # (reason, code, line) -> its site: every break asks
_SITES_REMEMBERED = 4096


def break_site(reason: str) -> BreakSite:
    frame = user_frame(2)
    if frame is None:
        return BreakSite(reason, "", "")
    code, line = frame.f_code, frame.f_lineno
    key = (reason, code, line)
    site = _SITES.get(key)
    if site is None:
        file = code.co_filename
        site = BreakSite(reason, f"{file}:{line}", linecache.getline(file, line).strip())
        if len(_SITES) >= _SITES_REMEMBERED:
            _SITES.clear()
        _SITES[key] = site
    return site


@dataclass
class SiteStats:
    site: BreakSite
    count: int = 0  # breaks here, over all calls
    compiles: int = 0  # segments ending here that had to compile
    guard_failures: int = 0  # of those, ones where a segment had compiled here before
    values: deque = field(default_factory=lambda: deque(maxlen=_VALUES_KEPT))  # recent values
    # the argument shapes of the segments compiled ending here (a few; for the bucketing advice)
    shapes: deque = field(default_factory=lambda: deque(maxlen=_VALUES_KEPT * 2))


@dataclass
class SegmentStats:
    fingerprint: str
    starts: str  # the break site's location it starts after, or "entry"
    ends: str  # the location it ends at, or "return"
    instructions: int
    parameters: int
    outputs: int
    compile_seconds: float = 0.0
    runs: int = 0
    run_seconds: float = 0.0
    tiered: object = None  # its TieredSegment, where it ran interpreted first (segment_tiers)


class BreakLog:
    """Every break, segment and guard failure of one jitted function (bounded)."""

    def __init__(self) -> None:
        self.sites: OrderedDict[tuple, SiteStats] = OrderedDict()
        self.segments: OrderedDict[str, SegmentStats] = OrderedDict()
        self.spans: dict[tuple[str, str], set] = {}  # (starts, ends) -> fingerprints compiled
        self.calls = 0  # calls that broke
        self.replayed_calls = 0  # of those, calls replayed from the record to the end
        # (reason, file:line) -> calls whose replay ended there (the first end of each call)
        self.replay_stops: OrderedDict[tuple[str, str], int] = OrderedDict()
        self.return_compiles = 0  # last segments (ending at the return) compiled
        self.return_guard_failures = 0
        # Python int arguments specialized after a break asked for them: name -> BreakSite
        self.specialized: dict[str, BreakSite] = {}
        # pure helpers whose data-dependent ifs were traced as selects (frontend.if_conversion),
        # over the traced calls: (name, where defined) -> [calls merged, most paths,
        # {why not converted: calls}]
        self.conversions: OrderedDict[tuple[str, str], list] = OrderedDict()
        # x[mask] kept dense (frontend.masked), over the traced calls: its line ->
        # [selections, {line that needed the length: selections materialized there}]
        self.selections: OrderedDict[str, list] = OrderedDict()
        self.breaks = 0  # every break counted at its site, over all calls
        # signature key -> jitting.eager.EagerChoice: calls in segments against plain NumPy
        self.eager: OrderedDict = OrderedDict()
        self.glue_seconds = 0.0  # Python between segments (its own code, its tracing or replay)
        self.segment_seconds = 0.0
        self._lock = threading.Lock()

    def site(self, site: BreakSite) -> SiteStats:
        stats = self.sites.get(site.key)
        if stats is None:
            stats = self.sites[site.key] = SiteStats(site)
            while len(self.sites) > _SITES_KEPT:
                self.sites.popitem(last=False)
        return stats

    def add_conversions(self, notes: dict) -> None:
        """A traced call's ``Trace.conversions``, added up per helper."""
        with self._lock:
            for key, (merged, paths, whys) in notes.items():
                entry = self.conversions.get(key)
                if entry is None:
                    entry = self.conversions[key] = [0, 0, {}]
                    while len(self.conversions) > _SITES_KEPT:
                        self.conversions.popitem(last=False)
                entry[0] += merged
                entry[1] = max(entry[1], paths)
                for why, calls in whys.items():
                    entry[2][why] = entry[2].get(why, 0) + calls

    def add_selections(self, notes: dict) -> None:
        """A traced call's ``Trace.selections``, added up per line."""
        with self._lock:
            for line, (taken, needed) in notes.items():
                entry = self.selections.get(line)
                if entry is None:
                    entry = self.selections[line] = [0, {}]
                    while len(self.selections) > _SITES_KEPT:
                        self.selections.popitem(last=False)
                entry[0] += taken
                for where, count in needed.items():
                    entry[1][where] = entry[1].get(where, 0) + count

    def replay_stopped(self, why: tuple[str, str]) -> None:
        with self._lock:
            self.replay_stops[why] = self.replay_stops.get(why, 0) + 1
            while len(self.replay_stops) > _SITES_KEPT:
                self.replay_stops.popitem(last=False)

    @property
    def break_count(self) -> int:
        return sum(s.count for s in self.sites.values())
