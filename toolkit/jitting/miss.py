"""A cache miss, top to bottom: trace the Python function (frontend), explain the recompile
and apply its policy (history), run the passes and the backend (``Lowered.compile``), and
record it once (``history.record_compile``, which emits the profiler events). Each step hands
its result to the next; none calls back into the one before."""
from __future__ import annotations

import warnings
from typing import Callable

from ..collector import collector_relaxed
from ..frontend.pytree import unflatten
from ..frontend.recompile import SignatureRecord, captured_values, short_repr
from ..frontend.scalar_lists import ScalarListWarning, scalar_list_error, scalar_list_warnings
from ..frontend.segments import GraphBroken, RunAsNumpy, SpecializeAndRetrace
from ..frontend.trace_function import TracedProgram, trace_program
from ..frontend.tracer import Tracer
from ..ir.user_code import user_location, user_stacklevel
from ..profiler.recorder import RECORDER
from ..runtime import history
from ..stages import Compiled, Lowered, hlo_fingerprint
from .graph_breaks import GraphBreaks
from .promotions import report_promotions
from .key import JitKey, KeyMaker
from .options import JitOptions


class MissCompiler:
    """Compiles one jitted function's misses."""

    def __init__(self, fn: Callable, fn_name: str, keys: KeyMaker, options: JitOptions,
                 location: str, function_history: history.FunctionHistory,
                 function_serial: int, jit_serial: int, breaks: GraphBreaks):
        self.fn = fn
        self.breaks = breaks
        self.fn_name = fn_name
        self.keys = keys
        self.options = options
        self.location = location
        self.history = function_history
        self.function_serial = function_serial
        self.jit_serial = jit_serial

    # ---- the steps ----------------------------------------------------------------------
    def trace(self, key: JitKey, paths: list[str], args: tuple, kwargs: dict,
              leaves: list | None = None, always_segmented: bool = False,
              specs: list | None = None) -> TracedProgram | GraphBroken:
        """The traced program; with the call's ``leaves`` and unless the function is
        ``fullgraph``, Python may break the graph (then ``GraphBroken`` carries the result:
        raised, or returned by an ``always_segmented`` call)."""
        trees, names = key.trees, key.arg_names
        static_pos = dict(key.statics)
        arg_name = self.keys.arg_name

        def rebuild(params: list[Tracer]):
            it = iter(params)
            rebuilt = {name: unflatten(td, [next(it) for _ in range(td.num_leaves)])
                       for name, td in zip(names, trees)}
            new_args = [static_pos[i] if i in static_pos else rebuilt[arg_name(i)]
                        for i in range(len(args))]
            new_kwargs = {k: static_pos[k] if k in static_pos else rebuilt[k] for k in kwargs}
            return tuple(new_args), new_kwargs

        specs = self.keys.specs(key, paths) if specs is None else specs
        breaker = None
        if leaves is not None and not self.options.fullgraph:
            breaker = self.breaks.breaker(leaves, specs, key)
            breaker.always = always_segmented
        try:
            if always_segmented:  # (a call that replays its record: a few objects, not a trace)
                program = trace_program(self.fn, self.fn_name, specs, rebuild, breaker)
            else:  # (data read from outside the arguments: lifted and guarded)
                with collector_relaxed():
                    program = trace_program(self.fn, self.fn_name, specs, rebuild, breaker,
                                            "lift")
        except (SpecializeAndRetrace, RunAsNumpy):
            raise  # (started again at once: what this trace noted, the next one notes)
        except TypeError as e:  # a list of Python numbers where an array was meant: say that
            self._note(breaker)
            better = scalar_list_error(e, self.fn_name, self.keys.split(args, kwargs)[1])
            if better is None:
                raise
            raise better.with_traceback(e.__traceback__) from None
        except BaseException:  # (GraphBroken too: the call ran in segments)
            self._note(breaker)
            raise
        self._note(breaker)
        return program

    def _note(self, breaker) -> None:
        """What a traced call converted and kept dense, for the graph-break report."""
        trace = breaker.trace if breaker is not None else None
        if trace is not None and trace.conversions:
            self.breaks.log.add_conversions(trace.conversions)
        if trace is not None and trace.selections:
            self.breaks.log.add_selections(trace.selections)

    def lowered(self, program: TracedProgram) -> Lowered:
        o = self.options
        return Lowered(program, o.backend, self.fn_name, o.pipeline, o.dump_passes)

    def record(self, key: JitKey, paths: list[str], fingerprint: str) -> SignatureRecord:
        arg_name = self.keys.arg_name
        static_names = [(k, arg_name(k) if isinstance(k, int) else k) for k, _ in key.statics]
        return SignatureRecord(
            function_id=self.function_serial, jit_id=self.jit_serial, location=self.location,
            arg_names=key.arg_names, trees=tuple(str(t) for t in key.trees),
            leaves=tuple(self.keys.specs(key, paths)),
            statics=tuple((name, short_repr(v), hash(v))
                          for (_, name), (_, v) in zip(static_names, key.statics)),
            backend=key.backend, options=self.options.keyed, captured=captured_values(self.fn),
            hlo_fingerprint=fingerprint,
            specialized=tuple((name, self.keys.specialized[name])
                              for k, name in static_names
                              if name in self.keys.specialized
                              and not self.keys.is_user_static(k)))

    # ---- the miss -----------------------------------------------------------------------
    def compile(self, key: JitKey, args: tuple, kwargs: dict, *, call_site_hint: str = "",
                evicted_before: str = "", evicts: str = "", leaves: list | None = None,
                captured_change: tuple[str, str] | None = None) -> Compiled:
        """The program for ``key``. ``evicted_before``: the signature was compiled before and
        evicted (its text); ``evicts``: the signature this compile pushes out of the cache."""
        clock = RECORDER.clock
        start = clock.now()
        loc = user_location(2)
        call_site = str(loc) if loc else call_site_hint
        paths = self.keys.paths(args, kwargs)
        self.warn_scalar_lists(args, kwargs, call_site)
        try:
            program = self.trace(key, paths, args, kwargs, leaves)
        except (GraphBroken, SpecializeAndRetrace, RunAsNumpy) as stopped:
            # the call ran in segments (each compiled and recorded on its own), or stopped to
            # trace again with a Python int static, or to run as plain NumPy: the signature
            # still enters the history, so a recompile report explains the next one
            broke = not isinstance(stopped, SpecializeAndRetrace)
            record = self.record(key, paths, "graph-breaks" if broke else "specialized")
            compile_id = history.next_compile_id()
            recompile = self.history.admit(record, call_site, compile_id, start,
                                           self.options.on_recompile, self.options.max_recompiles,
                                           (loc.file, loc.line) if loc else None, "")
            end = clock.now()
            self.history.record_compile(record, recompile, history.CompileFacts(
                compile_id=compile_id, call_site=call_site, start=start, traced=end, end=end,
                phases=(), cache="graph-breaks" if broke else "specialized"))
            raise
        report_promotions(program, self.fn_name)
        traced = clock.now()
        record = self.record(key, paths, hlo_fingerprint(program.module))
        compile_id = history.next_compile_id()
        note = (f"this signature was compiled before and evicted: jit keeps the "
                f"{self.options.cache_size} most recently compiled programs of a function "
                f"(tk.jit(..., cache_size=N) keeps more)") if evicted_before else ""
        recompile = self.history.admit(record, call_site, compile_id, start,
                                       self.options.on_recompile, self.options.max_recompiles,
                                       (loc.file, loc.line) if loc else None, note,
                                       captured_change)
        compiled = self.lowered(program).compile(compile_id)
        compiled._signature_text = record.text()
        facts = history.CompileFacts(
            compile_id=compile_id, call_site=call_site, start=start, traced=traced,
            end=clock.now(), phases=compiled.phases, cache=compiled.cache_status, evicted=evicts,
            mutated_arguments=tuple(program.in_specs[i].path for i in program.mutated),
            written_in_place=compiled.arguments_written_in_place)
        self.history.record_compile(record, recompile, facts)
        return compiled

    def warn_scalar_lists(self, args: tuple, kwargs: dict, call_site: str) -> None:
        """A list of Python numbers is a pytree of separate scalars (as in JAX), not an array:
        ``x * 2`` then repeats the list and ``x + y`` concatenates. Say so once per compile."""
        for message in scalar_list_warnings(self.fn_name, self.keys.split(args, kwargs)[1],
                                            call_site):
            warnings.warn(message, ScalarListWarning, stacklevel=user_stacklevel())
