"""Per-function compile history, shared by every function object defined at the same source
location, so a re-run notebook cell or a function re-created in a loop is recognised.
Recompilations are explained here and the storm policy applied. Only misses touch this."""
from __future__ import annotations

import dataclasses
import functools
import itertools
from collections import OrderedDict
import threading
import warnings
import weakref

from ..frontend.errors import ToolkitError
from ..frontend.recompile import SignatureRecord, closest, suggestions
from ..profiler.events import Cause, CompileEvent, Phase, RecompileEvent
from ..profiler.recorder import RECORDER
from ..profiler.report import RecompileReport, ranked_causes, recompile_text

DEFAULT_MAX_RECOMPILES = 5
# A miss is diffed against at most this many recent signatures (plus an exact-match index),
# so a function re-created in a loop thousands of times stays cheap to explain.
MAX_SIGNATURES_SCANNED = 256
# What a function's history keeps: its most recent compiles, signatures and recompilations
# (older ones are dropped; the count of compiles stays exact), and the most recently used
# function histories of the process.
MAX_HISTORY = 1000
MAX_FUNCTIONS = 4096
POLICIES = ("warn", "error", "ignore")
_compile_ids = itertools.count(1)


class RecompileError(ToolkitError, RuntimeError):
    """A function recompiled more often than its ``max_recompiles`` with
    ``on_recompile='error'``."""


class RecompileWarning(UserWarning):
    """A recompilation storm: a function recompiled more than ``max_recompiles`` times."""


_serials = itertools.count(1)
_function_serials: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def next_compile_id() -> int:
    return next(_compile_ids)


def new_serial() -> int:
    """A number never reused in this process (``id()`` values are reused after collection)."""
    return next(_serials)


def function_serial(fn) -> int:
    """A stable serial number for a function object while it lives, never reused after."""
    try:
        with _REGISTRY_LOCK:
            serial = _function_serials.get(fn)
            if serial is None:
                serial = _function_serials[fn] = next(_serials)
            return serial
    except TypeError:  # not weak-referenceable
        return id(fn)


MAX_OTHER_CLOSEST = 3  # equally close signatures named in a recompile event (the rest counted)


def _others(nearest) -> tuple[str, ...]:
    """The first few equally close earlier signatures, and how many more there were: every
    event is kept, so listing all of them would grow each event with the history (1000 shapes
    of one function kept 15 MB of signature text)."""
    named = tuple(o.text() for o, _ in nearest[:MAX_OTHER_CLOSEST])
    rest = len(nearest) - len(named)
    return named + ((f"... and {rest} more",) if rest > 0 else ())


@dataclasses.dataclass(frozen=True)
class CompileFacts:
    """What a miss's compile measured and decided, for its CompileEvent."""

    compile_id: int
    call_site: str
    start: float  # clock readings: the miss began, tracing ended, the backend finished
    traced: float
    end: float
    phases: tuple[Phase, ...]  # the passes' and the backend's, after tracing
    cache: str  # the backend's machine-code cache status
    evicted: str = ""  # the signature this compile pushes out of the function's cache
    mutated_arguments: tuple[str, ...] = ()
    written_in_place: tuple[str, ...] = ()


class FunctionHistory:
    def __init__(self, name: str, location: str):
        self.name = name
        self.location = location
        self.records: list[SignatureRecord] = []
        self.compiles: list[CompileEvent] = []
        self.recompiles: list[RecompileEvent] = []
        self.storm_warned = False
        self.count = 0  # every compile ever, also those dropped from the lists above
        self.recompile_count = 0
        self._by_signature: OrderedDict[tuple, SignatureRecord] = OrderedDict()
        self._fingerprints: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def total_compile_seconds(self) -> float:
        return sum(c.duration for c in self.compiles)

    def explain(self, record: SignatureRecord, call_site: str, compile_id: int,
                start: float) -> RecompileEvent | None:
        """The RecompileEvent for a miss with signature ``record`` (None for a first compile)."""
        with self._lock:
            count = self.count
            exact = self._by_signature.get(_signature_key(record))
            recent = self.records[-MAX_SIGNATURES_SCANNED:]
            same = (
                self._fingerprints.get(record.hlo_fingerprint) if record.hlo_fingerprint else None
            )
        if not count:
            return None
        # Same signature from another function object: nothing can be closer than that.
        nearest = closest(record, [exact] if exact is not None else recent)
        old, causes = nearest[0]
        avoidable_reason = ""
        if same is not None:
            changed = (
                ", ".join(dict.fromkeys(c.path or c.code for c in causes)) or "nothing visible"
            )
            avoidable_reason = (
                f"the traced program is identical to compile #{same}'s; the change in "
                f"{changed} did not alter it"
            )
            if any(c.code == "STATIC_VALUE" for c in causes):
                avoidable_reason += (
                    " (a static argument that does not affect the program need not be static)"
                )
        return RecompileEvent(
            function=self.name,
            location=self.location,
            call_site=call_site,
            compile_id=compile_id,
            number=count + 1,
            start=start,
            duration=0.0,
            causes=tuple(causes),
            new_signature=record.text(),
            closest_signature=old.text(),
            other_closest=_others(nearest[1:]),
            avoidable=same is not None,
            avoidable_reason=avoidable_reason,
            suggestions=tuple(suggestions(causes, recent, record)),
        )

    def admit(self, record: SignatureRecord, call_site: str, compile_id: int, start: float,
              on_recompile: str, max_recompiles: int, where: tuple[str, int] | None = None,
              evicted_note: str = "", captured_note: tuple[str, str] | None = None
              ) -> RecompileEvent | None:
        """Before a miss compiles: its RecompileEvent (None for a first compile), with the
        storm policy applied (a storm warning points at ``where``, the user's file and line).
        A refused recompilation is recorded, then raised. ``evicted_note``: why the signature
        is missing although it compiled before; ``captured_note``: (path, what changed) of data
        read from outside the arguments that no longer fit the program (frontend.captured)."""
        recompile = self.explain(record, call_site, compile_id, start)
        if recompile is None:
            return None
        try:
            self.apply_policy(recompile, on_recompile, max_recompiles, where)
        except RecompileError:
            self.add(record, None, recompile)
            raise
        if evicted_note:
            evicted = Cause("EVICTED", "", "", "", evicted_note)
            recompile = dataclasses.replace(recompile, causes=(evicted,) + recompile.causes)
        if captured_note is not None:
            path, message = captured_note
            changed = Cause("CAPTURED_VALUE", path, "", "", f"read from outside the arguments: "
                            f"{message}")
            fixes = suggestions([changed], [], record) + list(recompile.suggestions)
            recompile = dataclasses.replace(recompile, causes=(changed,) + recompile.causes,
                                            suggestions=tuple(dict.fromkeys(fixes)))
        return recompile

    def record_compile(self, record: SignatureRecord, recompile: RecompileEvent | None,
                       facts: CompileFacts) -> CompileEvent:
        """After a miss compiled: its CompileEvent, kept here and recorded in the open
        profile with the RecompileEvent ``admit`` made."""
        start, end = facts.start, facts.end
        event = CompileEvent(
            function=self.name, location=self.location, signature=record.text(),
            backend=record.backend, compile_id=facts.compile_id, start=start,
            duration=end - start,
            phases=(Phase("trace", start, facts.traced - start),) + facts.phases,
            hlo_fingerprint=record.hlo_fingerprint, call_site=facts.call_site,
            thread=threading.get_ident(), cache=facts.cache, evicted=facts.evicted,
            mutated_arguments=facts.mutated_arguments, written_in_place=facts.written_in_place)
        if recompile is not None:
            recompile = dataclasses.replace(recompile, duration=end - start)
        self.add(record, event, recompile)
        if RECORDER.active:
            RECORDER.record(event)
            if recompile is not None:
                RECORDER.record(recompile)
        return event

    def record_segment(self, *, signature: str, backend: str, compile_id: int, start: float,
                       end: float, phases: tuple[Phase, ...], fingerprint: str, ends_at: str,
                       cache: str) -> CompileEvent:
        """A segment of a function with graph breaks compiled (the program up to a break, or
        from one to the next): its CompileEvent, in the function's compiles and the profile.
        It is not a signature of the function, so it enters no recompile comparison."""
        event = CompileEvent(
            function=self.name, location=self.location, signature=signature, backend=backend,
            compile_id=compile_id, start=start, duration=end - start, phases=phases,
            hlo_fingerprint=fingerprint, call_site=ends_at, thread=threading.get_ident(),
            cache=cache)
        with self._lock:
            self.compiles.append(event)
            del self.compiles[:-MAX_HISTORY]
        if RECORDER.active:
            RECORDER.record(event)
        return event

    def add(self, record: SignatureRecord, compile_event: CompileEvent | None,
            recompile: RecompileEvent | None) -> None:
        with self._lock:
            if compile_event is not None:
                self.count += 1
                self.records.append(record)
                self.compiles.append(compile_event)
                self._by_signature[_signature_key(record)] = record
                self._by_signature.move_to_end(_signature_key(record))
                self._fingerprints.setdefault(record.hlo_fingerprint, self.count)
                for kept in (self.records, self.compiles):
                    del kept[:-MAX_HISTORY]
                for index in (self._by_signature, self._fingerprints):
                    while len(index) > MAX_HISTORY:
                        index.popitem(last=False)
            if recompile is not None:
                self.recompile_count += 1
                self.recompiles.append(recompile)
                del self.recompiles[:-MAX_HISTORY]

    def apply_policy(self, event: RecompileEvent, on_recompile: str, max_recompiles: int,
                     where: tuple[str, int] | None = None) -> None:
        """Raise or warn past ``max_recompiles``; a warning points at ``where`` (file, line)."""
        count = self.recompile_count + 1
        if count <= max_recompiles or on_recompile == "ignore":
            return
        if on_recompile == "error":
            raise RecompileError(
                f"jit({self.name}) refused recompilation #{count} (compile #{count + 1}): "
                f"max_recompiles={max_recompiles} with on_recompile='error'.\n"
                + recompile_text(event)
            )
        if not self.storm_warned:
            self.storm_warned = True
            file, line = where or ("<unknown>", 0)
            warnings.warn_explicit(
                RecompileWarning(self.storm_summary(event, count, max_recompiles)),
                RecompileWarning,
                file,
                line,
            )

    def storm_summary(self, event: RecompileEvent, count: int, max_recompiles: int) -> str:
        causes = ranked_causes(self.recompiles + [event])
        lines = [f"jit({self.name}) (defined {self.location}) has recompiled {count} times "
                 f"(max_recompiles={max_recompiles}); "
                 f"{self.total_compile_seconds * 1e3:.1f} ms spent compiling so far. Top causes:"]
        for t in causes[:3]:
            lines.append(f"  {t.count}× [{t.code}] {t.example}")
        lines.extend(f"  fix: {s}" for s in event.suggestions)
        lines.append("Details: tk.explain_recompiles(f) or f.recompiles. Silence with "
                     "tk.jit(..., on_recompile='ignore') or raise max_recompiles.")
        return "\n".join(lines)

    def report(self) -> RecompileReport:
        return RecompileReport(self.recompiles, self.compiles, f"recompilations of {self.name}")


def _signature_key(record: SignatureRecord) -> tuple:
    return (record.arg_names, record.trees, record.leaves, record.statics, record.backend,
            record.options)


_HISTORIES: OrderedDict[tuple, FunctionHistory] = OrderedDict()
_REGISTRY_LOCK = threading.Lock()


def history_key(fn) -> tuple:
    """Functions defined at one place share a history (a re-run cell, a function re-created in
    a loop). A partial is keyed by what it wraps; a callable object by its class's __call__;
    anything else by a serial number that, unlike ``id()``, no later object can inherit. A
    function may name its own key (``__toolkit_history_key__``): a transformed function's
    compiled form is keyed by the user's function and the transformation."""
    own = getattr(fn, "__toolkit_history_key__", None)
    if own is not None:
        return own
    while isinstance(fn, functools.partial):
        fn = fn.func
    code = getattr(fn, "__code__", None)
    if code is None:
        code = getattr(getattr(type(fn), "__call__", None), "__code__", None)
        if code is None:
            return ("object", function_serial(fn))
        return (code.co_filename, code.co_firstlineno, type(fn).__qualname__ + ".__call__")
    return (code.co_filename, code.co_firstlineno, getattr(fn, "__qualname__", code.co_name))


def history_for(fn, name: str, location: str) -> FunctionHistory:
    key = history_key(fn)
    with _REGISTRY_LOCK:
        history = _HISTORIES.get(key)
        if history is None:
            history = _HISTORIES[key] = FunctionHistory(name, location)
            while len(_HISTORIES) > MAX_FUNCTIONS:
                _HISTORIES.popitem(last=False)
        else:
            _HISTORIES.move_to_end(key)
        return history


def all_histories() -> list[FunctionHistory]:
    with _REGISTRY_LOCK:
        return list(_HISTORIES.values())


def clear_histories() -> None:
    with _REGISTRY_LOCK:
        _HISTORIES.clear()


def explain_recompiles(histories: list[FunctionHistory], title: str) -> RecompileReport:
    recompiles = sorted((e for h in histories for e in h.recompiles), key=lambda e: e.start)
    compiles = sorted((c for h in histories for c in h.compiles), key=lambda c: c.start)
    return RecompileReport(recompiles, compiles, title)


__all__ = ["RecompileError", "RecompileWarning", "FunctionHistory", "CompileFacts", "history_for",
           "all_histories", "clear_histories", "explain_recompiles", "next_compile_id"]
