"""Graph breaks, the replay half of a ``Breaker`` (``graph_breaks``): a call that asks what an
earlier call asked runs the segments that call recorded, with this call's values, instead of
tracing again (``frontend.replay`` walks the operations; these methods take the breaks).

A recorded break runs its compiled segment and moves the live tracers on to the next segment's
parameters (``_move_on``); a break inside an operation (``x[mask]``: the count) runs each of its
segments while the value received is one the recording saw; the return runs the last segment.
Any value the recording did not hold leaves the walk where it was, and the break is traced."""
from __future__ import annotations

import time
import weakref
from dataclasses import dataclass

import numpy as np

from ..frontend import replay
from ..frontend.tracer import Tracer
from .break_log import BreakSite, SiteStats


@dataclass(frozen=True, slots=True)
class SegmentRun:
    """What a replayed break (or return) needs of the segment it recorded: the compiled
    program, its parameters' instructions (bound to this call's values), which output holds
    each value asked for, and, at a break, each live value's instruction in the next segment
    with where its value comes from ((0, output) or (1, parameter)) and whether it stays a
    Python number."""

    compiled: object
    fingerprint: str
    parameters: tuple
    instruction_count: int
    asked: tuple  # output numbers of the values asked for (the break's one, the results)
    rebound: dict  # id(instruction before) -> instruction after (a break only)
    carried: tuple  # (new parameter, source kind, index, weak)
    site: object = None  # the break's BreakSite (a break inside an operation)


@dataclass(frozen=True, slots=True)
class HandedIn:
    """A break inside an operation on a value Python handed in (no segment runs): the
    parameter's instruction, whose value this call has bound, and the break's site."""

    inst: object
    site: object


class ReplayedBreaks:
    """The replay half of ``graph_breaks.Breaker`` (its state: ``bound``, ``trace``, ``tape``,
    ``owner``; ``_execute`` runs a compiled segment)."""

    def _replay_break(self, node: replay.Node, tracer: Tracer, site: BreakSite):
        """The recorded break ``node`` again: its segment runs with this call's values and the
        live tracers move on to the next segment's parameters; the walk steps onto ``node``.
        None, leaving the walk where it was, when this call holds a value the recording did
        not (the break is then traced)."""
        run: SegmentRun | None = node.run
        if run is None:  # a value Python handed in
            bound = self.bound.get(id(tracer.inst))
            if bound is None:
                return None
            self.tape.node = node
            self.broken = True
            return np.asarray(bound[1])
        moving = self._moving(run.rebound, tracer)
        arguments = self._arguments(run)
        if moving is None or arguments is None:
            return None
        self.tape.node = node
        results = self._execute(run.compiled, run.fingerprint, False, arguments, None, site,
                                None, run.instruction_count)
        self._move_on(run, results, arguments, moving, site)
        return np.asarray(results[run.asked[0]])

    def _moving(self, rebound: dict, asked: Tracer | None = None) -> tuple | None:
        """The live tracers (``live_tracers``, plus ``asked``), their weak references (the next
        segment's born) and the instruction each moves on to; None when one was not live in the
        recording (the break is then traced)."""
        trace = self.trace
        live, refs, moved, seen = [], [], [], set()
        for ref in trace.born:
            t = ref()
            if t is not None and t._trace is trace and id(t) not in seen:
                new = rebound.get(id(t.inst))
                if new is None:
                    return None
                seen.add(id(t))
                live.append(t)
                refs.append(ref)
                moved.append(new)
        if asked is not None and id(asked) not in seen:
            new = rebound.get(id(asked.inst))
            if new is None:
                return None
            live.append(asked)
            refs.append(weakref.ref(asked))
            moved.append(new)
        return live, refs, moved

    def _arguments(self, run: SegmentRun) -> list | None:
        """This call's values of a recorded segment's parameters (None: one is not bound)."""
        try:
            return [self.bound[id(inst)][1] for inst in run.parameters]
        except KeyError:
            return None

    def _move_on(self, run: SegmentRun, results, arguments: list, moving: tuple,
                 site: BreakSite) -> None:
        """After a replayed break's segment ran: the next segment's parameters are bound to
        their values, and the live tracers move on to them (as ``_resume`` does)."""
        live, refs, moved = moving
        bound = {}
        for new, kind, index, weak in run.carried:  # (``_carried``, inline: at every break)
            value = results[index] if kind == 0 else arguments[index]
            bound[id(new)] = (new, value.item() if weak and type(value) is np.ndarray
                              and value.ndim == 0 else value)
        for t, new in zip(live, moved):
            t.inst = new
        self.trace.born = refs
        self.bound = bound
        self._host_arrays = {}
        self.broken = True
        self.starts = site.location or site.reason

    def replay_inner_breaks(self, node: replay.Node) -> replay.Node | None:
        """An operation recorded with breaks inside it (``x[mask]``: the count; a slice with
        traced bounds: each bound): run each break's segment in turn, and while the value the
        operation received is one recorded, move on as the break did. The node of the rest of
        the operation, to replay; or None, with nothing changed, when a value differs (the
        operation is then traced: its segments run again, which is harmless, as they are pure)."""
        undo = []
        while node is not None and node.run is not None:
            node = self._replay_inner_break(node, undo)
        if node is None:
            for restore in reversed(undo):
                restore()
        return node

    def _replay_inner_break(self, node: replay.Node, undo: list) -> replay.Node | None:
        if isinstance(node.run, HandedIn):
            return self._replay_handed_in(node, undo)
        run: SegmentRun = node.run
        moving = self._moving(run.rebound)
        arguments = self._arguments(run)
        if moving is None or arguments is None:
            return None
        site = run.site
        results = self._execute(run.compiled, run.fingerprint, False, arguments, None, site,
                                None, run.instruction_count)
        value = np.asarray(results[run.asked[0]])
        after = node.children.get(value_key(value))
        if after is None:  # (the traced operation breaks again, and is counted then)
            return None
        stats = self._count(site, value)
        trace = self.trace
        saved = (self.bound, self._host_arrays, self.broken, self.starts, trace.born,
                 [(t, t.inst) for t in moving[0]])

        def restore():
            self.bound, self._host_arrays, self.broken, self.starts, trace.born, insts = saved
            for t, inst in insts:
                t.inst = inst
            self._uncount(stats)

        undo.append(restore)
        self._move_on(run, results, arguments, moving, site)
        return after

    def _replay_handed_in(self, node: replay.Node, undo: list) -> replay.Node | None:
        handed: HandedIn = node.run
        bound = self.bound.get(id(handed.inst))
        if bound is None:
            return None
        value = np.asarray(bound[1])
        after = node.children.get(value_key(value))
        if after is None:
            return None
        stats = self._count(handed.site, value)
        broken = self.broken
        self.broken = True

        def restore():
            self.broken = broken
            self._uncount(stats)

        undo.append(restore)
        return after

    def _count(self, site: BreakSite, value: np.ndarray) -> SiteStats:
        """A replayed break inside an operation, counted at its site with its value."""
        log = self.owner.log
        with log._lock:
            stats = log.site(site)
            stats.count += 1
            log.breaks += 1
            if value.size <= 8:
                stats.values.append(value.tolist())
        return stats

    def _uncount(self, stats: SiteStats) -> None:
        with self.owner.log._lock:
            stats.count -= 1
            self.owner.log.breaks -= 1

    def _replay_return(self, node: replay.Node, wanted: list[Tracer]) -> dict[int, object]:
        run: SegmentRun | None = node.run
        if run is None:
            self.owner.log.glue_seconds += time.perf_counter() - self.mark
            return {id(t.inst): self.bound[id(t.inst)][1] for t in wanted}
        arguments = [self.bound[id(inst)][1] for inst in run.parameters]
        results = self._execute(run.compiled, run.fingerprint, False, arguments, None, None,
                                None, run.instruction_count)
        self.bound = {}
        return {id(t.inst): results[n] for t, n in zip(wanted, run.asked)}


def value_key(value: np.ndarray) -> tuple:
    """A concrete value Python's operation received inside it, by its exact bytes."""
    return (value.dtype.str, value.shape, value.tobytes())
