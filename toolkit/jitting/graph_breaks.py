"""Graph breaks, the jit half: run the program traced so far when Python needs a value, cache
every segment under its guards, and keep the record the report shows.

A jitted function that allows breaks (``tk.jit(f)``; ``fullgraph=True`` forbids them) is
traced with a ``Breaker`` bound to the call's argument values. At the first point where
Python needs a concrete value, the breaker cuts the segment traced so far
(``frontend.segments.cut``), compiles it (or finds it compiled), runs it, hands Python the
value and lets tracing go on into the next segment. Once a signature broke, every later call
with it runs the Python function again, as NumPy would (its glue, its side effects), and the
segments it traces are found in the cache.

The guards are the segments themselves: a segment's key is the digest of its HLO, which holds
everything Python decided while tracing it (shapes, the branch it took, Python numbers it
computed). A branch taken the other way, or an ``int()`` with a new value, traces a different
segment: that segment alone compiles, and the report counts a guard failure at its break.

A later call does not trace again what it asks the same as before: from a signature's second
call on, the call's operations and breaks are recorded in a trie (``frontend.replay``), each
break's node holding the compiled segment it ran (``SegmentRun``). A call that asks the same
replays: operations hand back the recorded tracers, breaks run their segments, and the first
operation asked differently traces on from there. The report counts the calls that replayed."""
from __future__ import annotations

import threading
import time
from collections import OrderedDict

import numpy as np

from ..frontend.pytree import flatten, unflatten
from ..frontend import replay
from ..frontend.inplace import check_mutation_targets, write_back
from ..frontend.segments import (RunAsNumpy, Segment, SpecializeAndRetrace, cut, live_tracers,
                                 resume)
from ..frontend.signature import ArgSpec
from ..frontend.trace_function import (TracedProgram, argument_views, as_python_numbers,
                                       check_contiguous, numpy_scalars, python_numbers,
                                       replace_views)
from ..frontend.tracer import Trace, Tracer
from ..ir.structural import exact_key
from ..profiler.events import GraphBreakEvent
from ..profiler.recorder import RECORDER
from ..runtime import history
from ..backends.base import get_backend
from ..stages import Lowered, hlo_fingerprint
from .break_log import ENTRY, RETURN, BreakLog, BreakSite, SegmentStats, SiteStats, break_site
from .break_replay import HandedIn, ReplayedBreaks, SegmentRun, value_key
from . import eager
from .eager import HOST_BACKENDS  # (a device backend's results stay on the device)
from .segment_tiers import TieredSegment, hot_runs
from .promotions import report_promotions
from .host_values import HostValues
from .segment_cache import HashedKey, SegmentCache


_INT_CONE = 64  # instructions looked at to find the Python ints a value is computed from


class GraphBreaks:
    """One jitted function's segments, their cache and the log."""

    def __init__(self, fn_name: str, options, location: str,
                 function_history: history.FunctionHistory):
        self.fn_name = fn_name
        self.history = function_history
        self.options = options
        self.location = location
        self.cache = SegmentCache(options.cache_size)
        self.log = BreakLog()
        # signature -> the trie of its calls' operations and breaks (frontend.replay)
        self.tries: OrderedDict = OrderedDict()
        # signatures whose calls leave traced values in Python's state (Breaker.stores_state)
        self.stateful: OrderedDict = OrderedDict()

    def breaker(self, leaves: list, specs, key=None) -> "Breaker":
        return Breaker(self, leaves, specs, key)

    def keep(self, key, root: replay.Root) -> None:
        if key is None or self.tries.get(key) is root:
            return
        self.tries[key] = root
        while len(self.tries) > self.options.cache_size:
            self.tries.popitem(last=False)

    def compiled(self, segment: Segment, specs: tuple[ArgSpec, ...], starts: str, ends: str):
        """The compiled segment, from the cache or compiled now; its HLO fingerprint; and
        whether it compiled. The cache's key is the segment's exact structure (no printing:
        this runs at every break of every call)."""
        key = HashedKey(exact_key(segment.module.entry))
        found = self.cache.get(key)
        if found is not None:
            return found[0], found[1], False
        fingerprint = hlo_fingerprint(segment.module)
        limits = tuple((n, lo, hi, dtype, where)
                       for n, (lo, hi, dtype, where) in sorted(segment.int_limits.items()))
        count = len(segment.outputs)
        _, out_tree, out_paths = flatten(tuple(range(count)))
        promotions = tuple((loc, what, narrow, wide, t.inst)
                           for loc, what, narrow, wide, t in segment.promotions)
        program = TracedProgram(segment.module, specs, out_tree, tuple(out_paths), limits, (),
                                tuple(segment.checks), promotions)
        report_promotions(program, self.fn_name)
        o = self.options
        stats = SegmentStats(fingerprint, starts, ends, segment.instruction_count,
                             len(segment.parameters), count)
        log = self.log
        log.segments[fingerprint] = stats
        while len(log.segments) > self.options.cache_size:
            log.segments.popitem(last=False)
        signature = f"segment {starts} -> {ends}: " + ", ".join(s.text for s in specs)

        def compile_with(backend, pipeline: str):
            compile_id = history.next_compile_id()
            clock = RECORDER.clock
            start = clock.now()
            compiled = Lowered(program, backend, self.fn_name, pipeline,
                               o.dump_passes).compile(compile_id)
            end = clock.now()
            compiled._signature_text = f"segment {starts} -> {ends}"
            stats.compile_seconds += end - start
            self.history.record_segment(
                signature=signature, backend=backend.name, compile_id=compile_id, start=start,
                end=end, phases=compiled.phases, fingerprint=fingerprint, ends_at=ends,
                cache=compiled.cache_status if backend is o.backend else "interpreted")
            return compiled

        hot = hot_runs() if o.backend.name == "cpu" else 1
        if hot > 1:  # (segment_tiers: interpreted until it runs again and again)
            entry = TieredSegment(compile_with(get_backend("interpreter"), "none"),
                                  lambda: compile_with(o.backend, o.pipeline), hot)
            stats.tiered = entry
        else:
            entry = compile_with(o.backend, o.pipeline)
        self.cache.put(key, (entry, fingerprint))
        return entry, fingerprint, True


class Breaker(ReplayedBreaks):
    """One call's graph breaks: the values bound to the current segment's parameters, and the
    segments run so far. The call's operations and breaks are recorded in the signature's trie
    (``frontend.replay``); a later call replays them while it asks the same."""

    def __init__(self, owner: GraphBreaks, leaves: list, specs, key=None):
        self.owner = owner
        self.leaves = leaves
        self.specs = specs
        self.key = key
        self.broken = False
        self.always = False  # finish in segments even without a break (a signature that broke)
        self.trace: Trace | None = None
        self.arguments: list[Tracer] = []
        # id(parameter instruction) -> (instruction, value): what each parameter stands for
        self.bound: dict[int, tuple] = {}
        self.starts = ENTRY
        self.mark = time.perf_counter()
        # (id(source), dtype, shape) -> (source, its copy, the parameter): this segment's
        self._host_arrays: dict[tuple, tuple] = {}
        self._host_values = HostValues()  # values Python asked for, computed without a cut
        self._host_checked: tuple = (None, 0)  # (the trace's checks, how many passed on the host)
        self.tape: replay.Tape | None = None
        self.root: replay.Root | None = None
        # Python int arguments Python asked for as numbers: name -> the first break site
        self.python_ints: dict[str, BreakSite] = {}
        self.ran = False  # has a segment of this call run (Python then saw its values)?
        # a first call may stop at a break and run as plain NumPy (eager.GIVE_UP_*): what it
        # measures for that, and whether Python did what it cannot undo (a print, a draw)
        options = owner.options
        self.may_give_up = (key is not None and options.numpy_fallback
                            and options.backend.name in HOST_BACKENDS)
        self.began = self.mark
        self.call_breaks = 0
        self.run_seconds = 0.0  # this call's segments' runs, compiles not included
        self.irreversible = False

    def stores_state(self) -> bool:
        """Did a call of this signature leave traced values in Python's state (``log.append(
        loss)``)? Then every call watches that state, to put their values there."""
        return self.key is not None and self.key in self.owner.stateful

    def note_stores_state(self) -> None:
        if self.key is not None:
            stateful = self.owner.stateful
            stateful[self.key] = True
            while len(stateful) > self.owner.options.cache_size:
                stateful.popitem(last=False)

    def replays(self) -> bool:
        """Will the call replay its signature's record (``parameters``)?"""
        return self.key is not None and self.always and self.key in self.owner.tries

    def parameters(self, trace: Trace, specs) -> list[Tracer]:
        """The call's parameters: tracers of the recorded instructions when the signature's
        trie replays, else made now (and, for a signature known to break, a trie starts)."""
        if self.key is None or not self.always:  # (a first call records nothing: most
            # functions never break, and the recording would be for nothing)
            return [trace.parameter(n, s.dtype, s.shape, s.weak_type, s.path)
                    for n, s in enumerate(specs)]
        root = self.owner.tries.get(self.key)
        params, self.root = replay.start(
            trace, self, root,
            lambda: [trace.parameter(n, s.dtype, s.shape, s.weak_type, s.path)
                     for n, s in enumerate(specs)])
        self.tape = trace.tape
        return params

    def lift(self, tracer: Tracer, value: np.ndarray, spec: ArgSpec) -> None:
        """An array read from outside the arguments, lifted into a parameter
        (frontend.captured): bound to its value, and written back into it as an argument
        written in place would be."""
        self.bound[id(tracer.inst)] = (tracer.inst, value)
        self.arguments.append(tracer)
        self.leaves = list(self.leaves) + [value]
        self.specs = list(self.specs) + [spec]

    def start(self, trace: Trace, parameters: list[Tracer]) -> None:
        self.trace = trace
        self.arguments = list(parameters)
        for tracer, leaf in zip(parameters, self.leaves):
            self.bound[id(tracer.inst)] = (tracer.inst, leaf)

    @property
    def segmented(self) -> bool:
        """Does this call run in segments (it broke, or its signature always does)?"""
        return self.broken or self.always

    def parameter(self, array: np.ndarray, weak: bool = False, source=None) -> Tracer:
        """A parameter of the current segment bound to ``array`` (a NumPy array Python made,
        ``source`` as Python handed it over). The same array read again in this segment, with
        the very same bytes, is the same parameter: a loop that reads it every trip makes one
        parameter, not one a trip. Written in between, it is read anew, as NumPy would."""
        from ..ir.dtypes import from_numpy
        from ..ir.nodes import Metadata
        from ..ir.shapes import Shape

        key = (id(source), array.dtype.str, array.shape) if source is not None else None
        found = self._host_arrays.get(key) if key is not None else None
        if found is not None and found[0] is source and \
                found[1].tobytes() == np.ascontiguousarray(array).tobytes():
            return Tracer(self.trace, found[2], weak)
        array = np.array(array, copy=True)
        array.flags.writeable = False
        builder = self.trace.builder
        number = len(builder._parameters)
        inst = builder.parameter(number, Shape(from_numpy(array.dtype), array.shape),
                                 f"host_{number}", Metadata("a NumPy array made by Python"))
        self.bound[id(inst)] = (inst, array)
        tape = self.trace._tape_in_op
        if tape is not None:  # a replay of the operation binds the same bytes again
            tape.bindings.append((inst, array))
        if key is not None:  # (holding ``source`` keeps its id from being reused meanwhile)
            self._host_arrays[key] = (source, array, inst)
        return Tracer(self.trace, inst, weak)

    # ---- a break ----------------------------------------------------------------------
    def concrete(self, tracer: Tracer, what: str):
        """``tracer``'s value now (host NumPy): run the segment traced so far, then go on."""
        site = break_site(what)
        trace = self.trace
        tape = trace.tape
        if tape is not None and tape.replaying and tracer._slot >= 0:  # (a cache hit: first)
            node = tape.node.children.get(("break", tracer._slot, site.key))
            value = self._replay_break(node, tracer, site) if node is not None else None
            if value is not None:
                self._count(site, value)
                return value
        if not self.ran and not self.always and not self.broken and trace.tape is None \
                and trace._tape_in_op is None:
            names = self._python_int_names(tracer)
            # nothing has run: trace the call again with them static (once: were it traced
            # again though specialized, the call goes on in segments rather than loop), unless
            # Python did what it cannot undo (a print, a draw: ``broken``); the state the call
            # reaches is put back first (frontend.python_effects)
            if names and any(name not in self.owner.log.specialized for name in names):
                raise SpecializeAndRetrace({**self.python_ints,
                                            **{name: site for name in names}})
        log = self.owner.log
        with log._lock:
            stats = log.site(site)
            stats.count += 1
            log.breaks += 1
        self.call_breaks += 1
        if tape is None and self.may_give_up:
            self._maybe_give_up()
        key = None
        if tape is not None:
            key = ("break", tracer._slot, site.key) if tracer._slot >= 0 else None
            if tape.replaying:  # (what the fast path above did not replay is traced)
                node = tape.node.children.get(key) if key is not None else None
                tape.diverge("a value is alive at this break that was not when recorded"
                             if node is not None else tape.node.end or
                             "a break not recorded here (on another value)")  # (from the
                # state before this break: it is traced as usual)
        inner = trace._tape_in_op  # a break inside an operation being recorded (x[mask])
        bound = self.bound.get(id(tracer.inst))
        if bound is not None and bound[0] is tracer.inst:  # a value Python handed in: no run
            self.broken = True  # (what Python does with it decides what is traced next)
            value = np.asarray(bound[1])
            self._note_python_int(tracer, site)
            if inner is not None and trace._tape_in_op is inner:
                inner.inner.append((HandedIn(tracer.inst, site), value_key(value),
                                    tracer.inst))
            if value.size <= 8:
                stats.values.append(value.tolist())
            if tape is not None and trace.tape is tape:
                tape.record(key, replay.Node(tape.state()))
            return value
        self._note_python_int(tracer, site)  # (computed from Python ints: static later)
        if tape is None and inner is None:  # (a call that records no replay: its first)
            value = self._host_values.value(tracer.inst, self.bound)
            if value is not None and self._host_checks_pass(trace):  # (no cut)
                self.broken = True  # (Python decided on data: the call runs in segments)
                value = np.array(value)  # (a copy: no view of a value the call writes back)
                if value.size <= 8:
                    stats.values.append(value.tolist())
                return value
        live = live_tracers(trace)
        if not any(t is tracer for t in live):
            live.append(tracer)
        segment = cut(trace, [tracer], live)
        asked = (0,)  # the value asked for is the segment's first output
        values, run = self._run(segment, site, stats, asked)
        value = np.asarray(values[id(tracer.inst)])
        outputs = [t.inst for t in segment.outputs]  # (before the live tracers move on)
        before = tuple(t.inst for t in live)
        carried = []
        rebound = self._resume(live, values, carried)
        self.broken = True
        if value.size <= 8:
            stats.values.append(value.tolist())
        self.starts = site.location or what
        recording = tape if tape is not None and trace.tape is tape else (
            inner if inner is not None and trace._tape_in_op is inner else None)
        if recording is not None:
            place = {id(inst): (1, k) for k, inst in enumerate(run.parameters)}
            place.update({id(inst): (0, n) for n, inst in enumerate(outputs)})
            run = _with_rebinding(run, rebound, tuple(
                (new, *place[id(old)], weak) for new, old, weak in carried), site=site)
            if recording is inner:  # the operation's node records it when the operation ends
                inner.inner.append((run, value_key(value), before))
            else:
                node = replay.Node(tape.state(), run=run)
                node.keep = before  # (their ids are rebound's keys)
                tape.record(key, node)
        return value

    def _maybe_give_up(self) -> None:
        """Stop this first call here and run it as plain NumPy (``RunAsNumpy``) where its
        Python has cost far more than its segments ran (``eager.GIVE_UP_*``)."""
        if self.call_breaks < eager.GIVE_UP_BREAKS or self.irreversible:
            return
        seconds = time.perf_counter() - self.began
        python = seconds - self.run_seconds
        if python >= eager.GIVE_UP_SECONDS and python >= eager.GIVE_UP_RATIO * self.run_seconds:
            raise RunAsNumpy(self.call_breaks, seconds, self.run_seconds)

    def _host_checks_pass(self, trace: Trace) -> bool:
        """Does no check traced since the last cut fail, of those the host can compute (a
        Python int's overflow, an index out of bounds)? A break raises a failed check's error
        where it happens, so a value computed on the host must not go on past one: where one
        fails, the break cuts and runs the segment, which raises it. Each check is asked once."""
        checks = trace.checks
        held, done = self._host_checked
        start = done if held is checks else 0
        for flag, _, _ in checks[start:]:
            failed = self._host_values.value(flag.inst, self.bound)
            if failed is not None and np.asarray(failed).any():
                return False
        self._host_checked = (checks, len(checks))
        return True

    def runs_python_every_call(self, why: str) -> None:
        """Python reads state of its own here (NumPy's random generator): the call's Python
        must run on every call, so the call finishes in segments (as after a break) and its
        signature's later calls run their Python, replaying what they can."""
        site = break_site(why)
        log = self.owner.log
        with log._lock:
            log.site(site).count += 1
            log.breaks += 1
        self.broken = True
        self.irreversible = True  # (a print, a draw: the call must not start again)

    def _note_python_int(self, tracer: Tracer, site: BreakSite) -> None:
        """A Python int (or bool) argument that Python needs as a number (``range(steps)``,
        ``if flag:``) is specialized on later calls, as torch.compile specializes ints: the
        argument becomes static (its value is part of the signature), so the call compiles as
        one program instead of re-running its Python around segments."""
        for name in self._python_int_names(tracer):
            self.python_ints.setdefault(name, site)

    def _python_int_names(self, tracer: Tracer) -> list[str]:
        """The top-level Python int (or bool) arguments ``tracer`` is computed from, where it
        is computed from nothing else (``range(steps - 1)``, ``if n % 2:``): scalar arithmetic
        on them and constants, at most ``_INT_CONE`` instructions. Else none (a value read
        from an array, an argument inside a pytree, or a NumPy scalar is never specialized)."""
        python_ints = {}
        for spec, argument in zip(self.specs, self.arguments):
            if spec.weak_type and spec.dtype.kind in "biu" and spec.path.isidentifier():
                python_ints[id(argument.inst)] = spec.path
        if not python_ints:
            return []
        names, seen, stack = [], set(), [tracer.inst]
        while stack:
            inst = stack.pop()
            if id(inst) in seen:
                continue
            seen.add(id(inst))
            if len(seen) > _INT_CONE or inst.shape.rank != 0:
                return []
            if inst.opcode == "parameter":
                name = python_ints.get(id(inst))
                if name is None:
                    return []
                names.append(name)
            elif inst.opcode != "constant":
                stack.extend(inst.operands)
        return names

    def _resume(self, live: list[Tracer], values: dict, carried: list) -> dict:
        def bind(new, t, old):
            self.bound[id(new)] = (new, _carried(values[id(old)], t.weak_type))
            carried.append((new, old, t.weak_type))

        self.bound = {}
        self._host_arrays = {}  # (a new segment: its own parameters)
        self._host_values.clear()
        return resume(self.trace, live, bind)

    def _run(self, segment: Segment, site: BreakSite | None, stats: SiteStats | None,
             asked: tuple) -> tuple[dict[int, object], SegmentRun]:
        """Run ``segment``, which ends at ``site`` (None: at the return); the value of each of
        its outputs and parameters, by instruction, and the record a replay runs it from."""
        ends = site.location or site.reason if site is not None else RETURN
        self.ran = True
        specs, arguments = [], []
        for k, inst in enumerate(segment.parameters):
            _, value = self.bound[id(inst)]
            arguments.append(value)
            specs.append(self.specs[k] if self.starts == ENTRY and k < len(self.specs) else
                         ArgSpec(inst.name, inst.shape.dims, inst.shape.dtype.numpy,
                                 isinstance(value, (bool, int, float, complex))))
        owner = self.owner
        compiled, fingerprint, fresh = owner.compiled(segment, tuple(specs), self.starts, ends)
        results = self._execute(compiled, fingerprint, fresh, arguments, specs, site, stats,
                                segment.instruction_count)
        values = {}
        for t, value in zip(segment.outputs, results):
            values[id(t.inst)] = value
        for inst in segment.parameters:
            values.setdefault(id(inst), self.bound[id(inst)][1])
        run = SegmentRun(compiled, fingerprint, tuple(segment.parameters),
                         segment.instruction_count, asked, {}, ())
        return values, run

    def _execute(self, compiled, fingerprint: str, fresh: bool, arguments: list, specs,
                 site: BreakSite | None, stats: SiteStats | None, instructions: int) -> list:
        """Run a compiled segment and account for it (glue before it, its time, a compile)."""
        owner = self.owner
        recording = RECORDER.active
        now = time.perf_counter()
        start_clock = RECORDER.clock.now() if recording else 0.0
        results = compiled.execute_leaves(arguments)
        done = time.perf_counter()
        self.run_seconds += done - now
        if type(compiled) is TieredSegment:  # (compiled in this run, its hot-th: Python's)
            self.run_seconds -= compiled.take_compile_seconds()
        glue = now - self.mark
        log = owner.log
        segment_stats = log.segments.get(fingerprint)
        with log._lock:
            if segment_stats is not None:
                segment_stats.runs += 1
                segment_stats.run_seconds += done - now
            log.glue_seconds += glue
            log.segment_seconds += done - now
            if fresh:
                ends = site.location or site.reason if site is not None else RETURN
                span = log.spans.setdefault((self.starts, ends), set())
                if stats is not None:
                    stats.compiles += 1
                    stats.guard_failures += bool(span)
                    stats.shapes.append(", ".join(s.text for s in specs))
                else:
                    log.return_compiles += 1
                    log.return_guard_failures += bool(span)
                span.add(fingerprint)
                while len(span) > owner.options.cache_size:
                    span.pop()
        if recording:
            RECORDER.record(GraphBreakEvent(
                function=owner.fn_name, reason=site.reason if site is not None else RETURN,
                location=site.location if site is not None else "", start=start_clock,
                duration=done - now, glue=glue, instructions=instructions, compiled=fresh,
                thread=threading.get_ident()))
            self.mark = time.perf_counter()
        else:
            self.mark = done
        return results

    # ---- the end of the call ------------------------------------------------------------
    def finish(self, outs: list[Tracer], out_tree, python_outputs: tuple[int, ...] = (),
               scalar_outputs: tuple[int, ...] = (), stored: list[Tracer] = ()):
        """Run the last segment: the function's results, and the new values of arguments it
        wrote in place (copied into the caller's arrays, as NumPy would have written them).
        ``stored``: traced values the call left in Python's state, whose values it computes
        too (``stored_values``, as NumPy hands them back: Python numbers, NumPy scalars)."""
        mutated = []
        for number, t in enumerate(self.arguments):
            if t.weak_type:
                continue
            bound = self.bound.get(id(t.inst))
            if bound is None or bound[1] is not self.leaves[number]:
                mutated.append((number, t))
        # (an argument array stored is the caller's own array, written in place below if the
        # call wrote it, as NumPy stores the very object)
        argument = {id(t): n for n, t in enumerate(self.arguments)
                    if not t.weak_type} if stored else {}
        computed = [t for t in stored if id(t) not in argument]
        wanted = list(outs) + [t for _, t in mutated] + computed
        values = self._final_values(wanted)
        self.stored_values = [self.leaves[argument[id(t)]] if id(t) in argument else
                              values[id(t.inst)] for t in stored]
        if stored and self.owner.options.backend.name in HOST_BACKENDS:
            self.stored_values = as_python_numbers(
                self.stored_values, python_numbers(stored), numpy_scalars(stored))
        results = []
        for t in outs:
            value = values[id(t.inst)]
            if any(value is leaf for leaf in self.leaves):  # never hand back the caller's array
                value = np.array(value, copy=True)
            results.append(value)
        if (python_outputs or scalar_outputs) and \
                self.owner.options.backend.name in HOST_BACKENDS:  # (as NumPy returns them)
            results = as_python_numbers(results, python_outputs, scalar_outputs)
        if mutated:
            numbers = [n for n, _ in mutated]
            check_mutation_targets(self.leaves, numbers, [s.path for s in self.specs])
            assumed = self.trace.contiguous or {}
            check_contiguous(self.leaves, [(n, assumed[n]) for n in numbers if n in assumed],
                             self.specs)
            write_back(self.leaves, numbers, [values[id(t.inst)] for _, t in mutated])
        if self.owner.options.backend.name in HOST_BACKENDS:  # (a device's stay on it)
            # (an argument handed back, or a view of it, is the caller's array as NumPy's is)
            results = replace_views(results, self.leaves, argument_views(outs, self.arguments))
        log = self.owner.log
        log.calls += 1
        if self.tape is not None:
            if self.tape.replaying:
                log.replayed_calls += 1
            elif self.tape.why is not None:
                log.replay_stopped(self.tape.why)
        if self.root is not None and (self.broken or self.always):
            self.owner.keep(self.key, self.root)
        return unflatten(out_tree, results)

    def _final_values(self, wanted: list[Tracer]) -> dict[int, object]:
        trace = self.trace
        tape = trace.tape
        key = ("return", tuple(id(t.inst) for t in wanted)) if tape is not None else None
        if tape is not None and tape.replaying:
            node = tape.follow(key)
            if node is not None:
                return self._replay_return(node, wanted)
        if not trace.checks and all(t.inst.opcode == "parameter" for t in wanted):
            # nothing left to compute: the values crossed the last break already
            now = time.perf_counter()
            self.owner.log.glue_seconds += now - self.mark
            if tape is not None and trace.tape is tape:
                node = replay.Node(None)
                node.keep = tuple(t.inst for t in wanted)  # (their ids are in the key)
                tape.record(key, node)
            return {id(t.inst): self.bound[id(t.inst)][1] for t in wanted}
        segment = cut(trace, wanted, [])
        values, run = self._run(segment, None, None, ())
        if tape is not None and trace.tape is tape:
            place = {id(t.inst): n for n, t in enumerate(segment.outputs)}
            node = replay.Node(None, run=_with_rebinding(
                run, {}, (), tuple(place[id(t.inst)] for t in wanted)))
            node.keep = tuple(t.inst for t in wanted)  # (their ids are in the key)
            tape.record(key, node)
        self.bound = {}
        self._host_values.clear()
        return values

def _carried(value, weak: bool):
    """A value crossing a break: a Python number stays one (its int limits are checked)."""
    if weak and isinstance(value, np.ndarray) and value.ndim == 0:
        return value.item()
    return value


def _with_rebinding(run: SegmentRun, rebound: dict, carried: tuple,
                    asked: tuple | None = None, site=None) -> SegmentRun:
    return SegmentRun(run.compiled, run.fingerprint, run.parameters, run.instruction_count,
                      run.asked if asked is None else asked, rebound, carried, site)
