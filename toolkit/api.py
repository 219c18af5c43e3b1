"""``jit``: the cache of compiled programs in front of a Python function.

A cache hit is one key computation, one dict lookup and the executable call; when a profile
is open it also records a DispatchEvent and the kernels' KernelEvents. A miss goes down
through ``toolkit.jitting.miss`` (trace, passes, backend, one history record). The stages
live in ``toolkit.stages``; the options, the key and the nested-trace rule in
``toolkit.jitting``."""
from __future__ import annotations

import functools
import threading
import time
from collections import OrderedDict
from typing import Callable, Iterable

import numpy as np

from .frontend.captured import CapturedChanged
from .frontend.error_handling import QUIET, numpy_error_handling, numpy_error_state
from .frontend.errors import UnsupportedNumpyError, UserValueError, api_boundary, for_the_user
from .frontend.recompile import function_location
from .frontend.scalar_lists import ScalarListWarning
from .frontend.tracer import current_trace
from .frontend.segments import GraphBroken, RunAsNumpy, SpecializeAndRetrace
from .jitting import eager
from .jitting.break_report import GraphBreakReport, report as break_report
from .jitting.graph_breaks import GraphBreaks
from .jitting.inline import MAX_INLINE_DEPTH, Inliner
from .jitting.key import _INT64, _PY_DTYPES, FAST_DTYPES, JitKey, KeyMaker
from .jitting.miss import MissCompiler
from .jitting.options import DEFAULT_CACHE_SIZE, make_options, read_parameters
from .jitting.plain_index import PlainIndex, plain_call
from .jitting.segment_tiers import hot_runs
from .profiler.events import DispatchEvent, GraphBreakEvent
from .profiler.recorder import RECORDER
from .runtime import history as _history
from .stages import DEFAULT_PIPELINE, Compiled, Lowered

__all__ = ["jit", "explain", "explain_recompiles", "GraphBreakReport", "JitFunction", "Lowered",
           "Compiled", "ScalarListWarning",
           "JitKey", "MAX_INLINE_DEPTH"]

# Evicted signatures remembered per function, so a recompile they cause names the eviction.
_EVICTED_REMEMBERED = 1024
_MISS = object()  # what the C fast path returns for a call it does not serve


class JitFunction:
    """A function compiled once per abstract signature (a ``JitKey``) and cached."""

    def __init__(self, fn: Callable, static_argnums: int | Iterable[int] = (),
                 static_argnames: str | Iterable[str] = (), backend: str | None = None,
                 on_recompile: str = "warn", max_recompiles: int = _history.DEFAULT_MAX_RECOMPILES,
                 pipeline: str = DEFAULT_PIPELINE, dump_passes: str | None = None,
                 cache_size: int = DEFAULT_CACHE_SIZE, fullgraph: bool = False,
                 numpy_fallback: bool = True):
        if not callable(fn):
            raise TypeError(f"jit expects a callable, got {type(fn).__name__}")
        options = make_options(backend, pipeline, dump_passes, on_recompile, max_recompiles,
                               cache_size, fullgraph, numpy_fallback)
        # how this function was made, so tk.explain can make a fresh one that reports one call
        self._made_with = dict(static_argnums=static_argnums, static_argnames=static_argnames,
                               backend=backend, on_recompile=on_recompile,
                               max_recompiles=max_recompiles, pipeline=pipeline,
                               dump_passes=dump_passes, cache_size=cache_size)
        functools.update_wrapper(self, fn)
        for name in [n for n in vars(self) if hasattr(JitFunction, n)]:
            del self.__dict__[name]  # the wrapped function's attributes never hide our methods
        self.fn = fn
        self.fn_name = getattr(fn, "__name__", "fn").replace("<lambda>", "lambda")
        self.options = options
        self._backend_name = options.backend.name
        self._keys = KeyMaker(self.fn_name, read_parameters(fn, static_argnums, static_argnames),
                              self._backend_name)
        self.location = function_location(fn)
        self._history = _history.history_for(fn, self.fn_name, self.location)
        self._breaks = GraphBreaks(self.fn_name, options, self.location, self._history)
        self._miss = MissCompiler(fn, self.fn_name, self._keys, options, self.location,
                                  self._history, _history.function_serial(fn),
                                  _history.new_serial(), self._breaks)
        # signatures whose calls break the graph: each call runs the Python function, and its
        # segments come from ``_breaks``' cache (bounded as the program cache is)
        self._segmented: OrderedDict[JitKey, bool] = OrderedDict()
        # and the fast path's index of the plain ones (positional NumPy arrays) by their
        # abstract values: a call that breaks its graph reaches its replay without a key made
        self._plain_segmented: dict[tuple, JitKey] = {}
        # (and may run as plain NumPy where that measured faster: jitting.eager)
        self._numpy_fallback = options.numpy_fallback and self._backend_name in eager.HOST_BACKENDS
        # (and under NumPy's floating-point error handling, a host backend's call runs as NumPy)
        self._numpy_fallback_possible = self._backend_name in eager.HOST_BACKENDS
        self._inline = Inliner(fn, self.fn_name)
        self._cache: OrderedDict[JitKey, Compiled] = OrderedDict()
        # the fast path's index into ``_cache``: plain calls (positional NumPy arrays) by
        # their abstract values alone, which is all that varies between them
        self._plain = PlainIndex()
        # and of the plain signatures that run as plain NumPy (jitting.eager), their choices
        self._plain_numpy: dict[tuple, eager.EagerChoice] = {}
        self._evicted: OrderedDict[JitKey, str] = OrderedDict()  # key -> its signature text
        # key -> (path, what changed): programs dropped because data they read from outside
        # their arguments changed (frontend.captured), for the recompile report
        self._captured_changes: dict[JitKey, tuple[str, str]] = {}
        self._compile_lock = threading.Lock()
        self.call_site_hint = ""  # where calls come from when no user frame exists (%%xla)

    # the options, as attributes of the jitted function
    pipeline = property(lambda self: self.options.pipeline)
    dump_passes = property(lambda self: self.options.dump_passes)
    on_recompile = property(lambda self: self.options.on_recompile)
    max_recompiles = property(lambda self: self.options.max_recompiles)
    cache_size_limit = property(lambda self: self.options.cache_size)

    # ---- calls ----------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        """The cache-hit fast path (no decorator frame, no pytree walk): positional NumPy
        arrays of the supported dtypes, found by their abstract values in the index of plain
        calls; any other call, a miss or an open profile takes ``_call``. Errors reach the
        user as ``api_boundary`` shows them (the try costs nothing until something raises)."""
        __tracebackhide__ = True  # noqa: F841
        try:
            if numpy_error_state() is not QUIET.state and numpy_error_handling() is not None:
                return self._run_under_error_handling(args, kwargs)
            if not kwargs and not RECORDER.active:
                if plain_call is not None:  # (the same path in C: _plain_call.c)
                    result = plain_call(self._plain.by_signature, args,
                                        not self._keys.specialized, _MISS)
                    if result is not _MISS:
                        return result
                arrays, numbers = True, False
                for a in args:
                    t = type(a)
                    if t is float or t is int and -_INT64 <= a < _INT64 \
                            and not self._keys.specialized:  # (a Python number: weak)
                        arrays, numbers = False, True
                        continue
                    if ((t is not np.ndarray and not isinstance(a, np.generic))
                            or a.dtype not in FAST_DTYPES):
                        break
                    arrays = arrays and t is np.ndarray
                else:
                    avals = tuple([((), _PY_DTYPES[type(a)], True) if type(a) in _PY_DTYPES
                                   else (a.shape, a.dtype, False if type(a) is np.ndarray
                                         else None) for a in args] if numbers or not arrays
                                  else [(a.shape, a.dtype, False) for a in args])
                    compiled = self._plain.get(avals)
                    if compiled is not None:
                        run = compiled.plain_run
                        if run is not None:  # NumPy scalars as 0-d arrays of their dtype
                            return run(list(args) if arrays else
                                       [a if type(a) is np.ndarray else np.asarray(a)
                                        for a in args])
                        return compiled.execute_flat(list(args))
                    choice = self._plain_numpy.get(avals) if self._plain_numpy else None
                    if choice is not None:  # (a signature that runs as plain NumPy)
                        return self._run_numpy(choice, args, {})
                    key = self._plain_segmented.get(avals) if self._plain_segmented else None
                    if key is not None and current_trace() is None:  # (one that breaks)
                        return self._run_segmented(key, list(args), args, {}, args, {})
            return self._call(*args, **kwargs)
        except CapturedChanged as changed:  # data read from outside no longer fits its program
            self._forget(changed.compiled, changed)
            try:
                return self._call(*args, **kwargs)  # (traced again, as a new signature would be)
            except CapturedChanged as again:  # (changed by the trace itself: no fixed point)
                self._forget(again.compiled)
                raise UserValueError(
                    f"jit({self.fn_name}): {again} while it was traced again: the function "
                    "changes data it reads from outside its arguments in a way toolkit cannot "
                    "follow; pass it as an argument") from None
        except Exception as e:
            shown = for_the_user(e)
            if shown is None:
                raise
            raise shown from None

    def _call(self, *args, **kwargs):
        if current_trace() is not None:
            return self._inline(args, kwargs)
        key, leaves, cargs, ckwargs = self._keys.key(args, kwargs)
        compiled = self._cache.get(key)
        if compiled is None:
            if key in self._segmented:
                return self._run_segmented(key, leaves, cargs, ckwargs, args, kwargs)
            start = RECORDER.clock.now() if RECORDER.active else 0.0
            log = self._breaks.log
            began, breaks, segment_seconds = time.perf_counter(), log.breaks, log.segment_seconds
            try:
                compiled = self._compiled(key, cargs, ckwargs, leaves)
            except GraphBroken as broken:
                if broken.python_ints:  # later calls: those arguments static, one program
                    self._specialize(broken.python_ints)
                    return broken.result
                if self._numpy_fallback:
                    self._measured_first(key, time.perf_counter() - began, log.breaks - breaks,
                                         log.segment_seconds - segment_seconds, cargs, ckwargs)
                self._note_segmented(key)
                return broken.result
            except SpecializeAndRetrace as retrace:  # before anything ran: one program now
                self._specialize(retrace.python_ints)
                return self._call(*args, **kwargs)
            except RunAsNumpy as stopped:  # tracing cost far more than it ran: NumPy runs it
                with log._lock:
                    choice = self._choice(key)
                    choice.gave_up(stopped.seconds, stopped.run_seconds, stopped.breaks)
                self._named(choice, key, cargs, ckwargs)
                self._note_segmented(key)
                return self._run_numpy(choice, args, kwargs)
            if RECORDER.active:
                return self._dispatch_profiled(compiled, leaves, start, hit=False)
        elif RECORDER.active:
            return self._dispatch_profiled(compiled, leaves, RECORDER.clock.now(), hit=True)
        return compiled.execute_flat(leaves)

    def _note_segmented(self, key: JitKey) -> None:
        """``key``'s calls run in segments (or as plain NumPy, ``jitting.eager``) from now on."""
        self._segmented[key] = True
        if self._keys.is_plain(key):
            self._plain_segmented[key.avals] = key
        while len(self._segmented) > self.cache_size_limit:
            old, _ = self._segmented.popitem(last=False)
            if self._plain_segmented.get(old.avals) == old:
                del self._plain_segmented[old.avals]

    def _specialize(self, python_ints: dict) -> None:
        """Python int arguments that Python used as numbers (``range(steps)``, ``if flag:``)
        become static, as torch.compile specializes ints: each value compiles one whole
        program (its recompile report names the argument), instead of every call re-running
        the function's Python around compiled segments. Asked for before anything ran, the
        call itself traces again; asked for later, the calls after it are specialized."""
        for name, site in python_ints.items():
            self._keys.specialized.setdefault(name, site.location)
        self._breaks.log.specialized.update(
            (name, site) for name, site in python_ints.items()
            if name not in self._breaks.log.specialized)

    def _run_segmented(self, key: JitKey, leaves: list, args: tuple, kwargs: dict,
                       user_args: tuple = (), user_kwargs: dict | None = None):
        """A call of a signature that breaks the graph: Python runs again, and each segment it
        traces runs from the segment cache (or compiles, when a guard failed). Where such
        calls break many times and plain NumPy measured faster, the call runs as plain NumPy
        instead (``jitting.eager``)."""
        log = self._breaks.log
        choice = log.eager.get(key) if self._numpy_fallback else None
        if choice is not None and choice.runs_eagerly:
            result = self._run_numpy(choice, user_args, user_kwargs or {})
            if choice.decided == "numpy" and self._keys.is_plain(key):
                self._plain_numpy[key.avals] = choice  # (later calls: from the fast path)
                while len(self._plain_numpy) > self.cache_size_limit:
                    del self._plain_numpy[next(iter(self._plain_numpy))]
            return result
        breaks, start = log.breaks, time.perf_counter()
        paths, specs = self._keys.described(key, args, kwargs)
        broken = self._miss.trace(key, paths, args, kwargs, leaves, always_segmented=True,
                                  specs=specs)  # (a call in segments: its GraphBroken)
        if self._numpy_fallback:
            self._measured(key, time.perf_counter() - start, log.breaks - breaks, args, kwargs)
        return broken.result

    def _run_under_error_handling(self, args: tuple, kwargs: dict):
        """The call as plain NumPy while NumPy's floating-point error handling is on
        (``np.errstate(divide="raise")``, frontend.error_handling): compiled code would compute
        ``inf`` where NumPy raises. Inside another trace the call is traced as usual, and each
        NumPy operation runs in NumPy at a break there."""
        if current_trace() is not None:
            return self._call(*args, **kwargs)
        if not self._numpy_fallback_possible:  # (results stay on the device: no NumPy run)
            raise UnsupportedNumpyError(
                f"{self.fn_name}: NumPy's floating-point error handling is on "
                f"(np.errstate({numpy_error_handling()})), and the {self._backend_name!r} "
                "backend computes inf and nan where NumPy raises or calls back; call it "
                "outside the errstate (or np.seterr), or jit it with backend='cpu'")
        start, clock = time.perf_counter(), RECORDER.clock.now() if RECORDER.active else 0.0
        result = self.fn(*args, **kwargs)
        if RECORDER.active:
            seconds = time.perf_counter() - start
            RECORDER.record(GraphBreakEvent(
                function=self.fn_name, location=self.location,
                reason=f"NumPy's error handling is on (np.errstate({numpy_error_handling()})): "
                       "the call ran as NumPy",
                start=clock + seconds, duration=0.0, glue=seconds, instructions=0,
                compiled=False, thread=threading.get_ident()))
        return result

    def _run_numpy(self, choice: eager.EagerChoice, args: tuple, kwargs: dict):
        """The call as plain NumPy: the user's function on the user's arguments, timed."""
        start, clock = time.perf_counter(), RECORDER.clock.now() if RECORDER.active else 0.0
        result = self.fn(*args, **kwargs)
        seconds = time.perf_counter() - start
        with self._breaks.log._lock:
            choice.eager(seconds)
        if RECORDER.active:  # (the whole call is Python: glue, with no segment after it)
            RECORDER.record(GraphBreakEvent(
                function=self.fn_name, reason=eager.REASON, location=self.location,
                start=clock + seconds, duration=0.0, glue=seconds, instructions=0,
                compiled=False, thread=threading.get_ident()))
        return result

    def _choice(self, key: JitKey) -> eager.EagerChoice:
        """The signature's EagerChoice, made on its first measured call (under the log's lock)."""
        log = self._breaks.log
        choice = log.eager.get(key)
        if choice is None:
            choice = log.eager[key] = eager.EagerChoice(
                hot=hot_runs() if self._backend_name == "cpu" else 1)
            while len(log.eager) > self.cache_size_limit:
                log.eager.popitem(last=False)
        return choice

    def _named(self, choice: eager.EagerChoice, key: JitKey, args: tuple, kwargs: dict) -> None:
        if not choice.signature:
            choice.signature = ", ".join(
                s.text for s in self._keys.specs(key, self._keys.paths(args, kwargs)))

    def _measured_first(self, key: JitKey, seconds: float, breaks: int, segment_seconds: float,
                        args: tuple, kwargs: dict) -> None:
        """The first call of a signature that broke: what replaying it would cost
        (``EagerChoice.first_call``)."""
        with self._breaks.log._lock:
            choice = self._choice(key)
            choice.first_call(seconds, segment_seconds, breaks)
        self._named(choice, key, args, kwargs)

    def _measured(self, key: JitKey, seconds: float, breaks: int, args: tuple,
                  kwargs: dict) -> None:
        log = self._breaks.log
        choice = log.eager.get(key)
        if choice is not None and choice.decided is not None:
            return  # (decided to stay in segments: no more timing, no lock taken)
        with log._lock:
            choice = self._choice(key)
            choice.segmented(seconds, breaks)
        self._named(choice, key, args, kwargs)

    def _compiled(self, key: JitKey, args: tuple, kwargs: dict,
                  leaves: list | None = None) -> Compiled:
        """The cached program for ``key``, or compiled now (one thread compiles a key). With
        the call's ``leaves``, the trace may break the graph (``GraphBroken``)."""
        with self._compile_lock:
            found = self._cache.get(key)
            if found is not None:
                return found
            full = len(self._cache) >= self.cache_size_limit
            victim = next(iter(self._cache.values())) if full else None
            compiled = self._miss.compile(
                key, args, kwargs, call_site_hint=self.call_site_hint,
                evicted_before=self._evicted.get(key, ""),
                evicts=victim._signature_text if victim is not None else "", leaves=leaves,
                captured_change=self._captured_changes.pop(key, None))
            return self._insert(key, compiled)

    def _dispatch_profiled(self, compiled: Compiled, leaves, start: float, hit: bool):
        result = compiled.execute_profiled(leaves)
        end = RECORDER.clock.now()
        t0 = time.perf_counter()
        event = DispatchEvent(self.fn_name, start, end - start, hit, compiled.compile_id,
                              threading.get_ident())
        RECORDER.charge(time.perf_counter() - t0 + 2 * RECORDER.clock_read_cost())
        RECORDER.record(event)
        return result

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self, obj)

    # ---- the cache ------------------------------------------------------------------------
    def _insert(self, key: JitKey, compiled: Compiled) -> Compiled:
        """Cache ``compiled``; past ``cache_size`` the least recently compiled program goes.
        (Hits do not reorder: the hot path stays one dict lookup.)"""
        self._cache[key] = compiled
        if self._keys.is_plain(key):
            self._plain.add(key.avals, compiled)
        self._evicted.pop(key, None)
        while len(self._cache) > self.cache_size_limit:
            old_key, old = self._cache.popitem(last=False)
            self._plain.discard(old_key.avals, old)
            self._evicted[old_key] = old._signature_text
            if len(self._evicted) > _EVICTED_REMEMBERED:
                self._evicted.popitem(last=False)
        return compiled

    def _forget(self, compiled, changed=None) -> None:
        """Drop ``compiled`` from the caches: it read data from outside its arguments that is
        no longer what it was traced with (frontend.captured)."""
        for key in [k for k, c in self._cache.items() if c is compiled]:
            del self._cache[key]
            if changed is not None:  # (the recompile report says what changed)
                self._captured_changes[key] = (changed.path, str(changed))
                while len(self._captured_changes) > _EVICTED_REMEMBERED:
                    self._captured_changes.pop(next(iter(self._captured_changes)))
        self._plain.drop(compiled)

    def clear_cache(self) -> None:
        self._cache.clear()
        self._plain.clear()
        self._plain_numpy.clear()
        self._segmented.clear()
        self._plain_segmented.clear()
        self._breaks.cache.clear()

    @property
    def cache_size(self) -> int:
        return len(self._cache)

    # ---- stages and history ---------------------------------------------------------------
    @api_boundary
    def lower(self, *args, **kwargs) -> Lowered:
        key, _, args, kwargs = self._keys.key(args, kwargs)
        return self._miss.lowered(self._miss.trace(key, self._keys.paths(args, kwargs), args,
                                                   kwargs))

    @api_boundary
    def compiled(self, *args, **kwargs) -> Compiled:
        """The Compiled program for these arguments: the cached one, or compiled (and cached)
        now. A signature whose calls break the graph has no one program: an error says so."""
        key, _, cargs, ckwargs = self._keys.key(args, kwargs)
        if key in self._segmented:
            raise UnsupportedNumpyError(
                f"jit({self.fn_name}) breaks its graph for these arguments, so its calls run in "
                "segments rather than one compiled program; tk.explain(f, *args) or "
                "f.graph_breaks lists the breaks, and tk.jit(..., fullgraph=True) names the first")
        return self._cache.get(key) or self._compiled(key, cargs, ckwargs)

    def runs_in_segments(self, *args, **kwargs) -> bool:
        """Did calls with these arguments' signature break the graph (and so run in segments)?"""
        key = self._keys.key(args, kwargs)[0]
        return key in self._segmented

    @property
    def recompiles(self):
        """RecompileEvents of this function (and earlier function objects at the same source)."""
        return list(self._history.recompiles)

    @property
    def recompile_count(self) -> int:
        """Recompilations ever (``recompiles`` keeps the most recent 1000)."""
        return self._history.recompile_count

    @property
    def compiles(self):
        return list(self._history.compiles)

    def explain_recompiles(self):
        return self._history.report()

    @property
    def graph_breaks(self) -> GraphBreakReport:
        """Every graph break of this function's calls so far: reason, line, fix, guard
        failures, segments, and Python glue against compiled time."""
        return break_report(self.fn_name, self._breaks.log)

    def __repr__(self) -> str:
        return f"<jit({self.fn_name}) backend={self._backend_name}, {len(self._cache)} compiled>"


def jit(fn: Callable | None = None, *, static_argnums=(), static_argnames=(),
        backend: str | None = None, on_recompile: str = "warn",
        max_recompiles: int = _history.DEFAULT_MAX_RECOMPILES, pipeline: str = DEFAULT_PIPELINE,
        dump_passes: str | None = None, cache_size: int = DEFAULT_CACHE_SIZE,
        fullgraph: bool = False, numpy_fallback: bool = True, in_shardings=None,
        out_shardings=None):
    """Compile ``fn`` with toolkit. Usable as ``@jit`` or ``@jit(static_argnums=...)``.

    Where Python needs a traced value (``if x.sum() > 0:``, ``int(n)``, ``x[mask]``,
    ``np.asarray(y)``), the program traced so far runs, Python gets the value, and tracing goes
    on into a new segment: a *graph break*, as in torch.compile. Each segment compiles once and
    is cached under its guards; ``tk.explain(f, *args)`` lists every break with its reason.
    ``fullgraph=True`` makes the first break an error instead (one whole program or nothing).
    A signature whose calls break 32 times or more is timed once as plain NumPy and runs as
    plain NumPy from then on where that was at least twice as fast (``numpy_fallback=False``
    keeps it in segments; the report says which way each such signature runs and why).
    A Python int or bool argument that Python needs as a number (``range(steps)``) is
    specialized after its first break: static on later calls, one whole program per value.

    ``cache_size`` bounds the compiled programs kept for ``fn`` (default 256, least recently
    compiled evicted first; a recompile caused by an eviction says so, code ``EVICTED``).

    ``on_recompile`` decides what happens when the function recompiles more than
    ``max_recompiles`` times: ``"warn"`` once with a summary (default), ``"error"`` raises
    ``RecompileError`` (``max_recompiles=0`` forbids any recompilation), ``"ignore"``.
    ``pipeline`` names the optimisation pipeline (``"default"``, ``"simplify-only"``, ``"none"``);
    ``dump_passes`` is a regular expression: the module after each matching pass is kept, with
    a diff, in ``Compiled.pass_dumps`` (as XLA's ``--xla_dump_hlo_pass_re``).

    ``in_shardings``/``out_shardings`` (``tk.NamedSharding`` objects, as ``jax.jit``'s) run ``fn``
    over a mesh's devices: the program is partitioned XLA's way, with the collectives the
    shardings need (``toolkit/sharding.py``)."""
    if in_shardings is not None or out_shardings is not None:
        from .sharding import sharded_jit

        if static_argnums or static_argnames:
            raise NotImplementedError("tk.jit: in_shardings with static arguments is not "
                                      "supported yet; close over them instead")
        # options the partitioned path does not honour yet are errors, never ignored
        unsupported = [name for name, given, default in (
            ("on_recompile", on_recompile, "warn"),
            ("max_recompiles", max_recompiles, _history.DEFAULT_MAX_RECOMPILES),
            ("dump_passes", dump_passes, None)) if given != default]
        if unsupported:
            raise NotImplementedError(f"tk.jit: {', '.join(unsupported)} with in_shardings is "
                                      "not supported yet")
        if fn is None:
            return functools.partial(jit, backend=backend, pipeline=pipeline,
                                     cache_size=cache_size, fullgraph=fullgraph,
                                     in_shardings=in_shardings, out_shardings=out_shardings)
        # (a partitioned program is always one whole program: fullgraph either way)
        return sharded_jit(fn, in_shardings, out_shardings, backend=backend, pipeline=pipeline,
                           cache_size=cache_size)
    options = dict(static_argnums=static_argnums, static_argnames=static_argnames, backend=backend,
                   on_recompile=on_recompile, max_recompiles=max_recompiles, pipeline=pipeline,
                   dump_passes=dump_passes, cache_size=cache_size, fullgraph=fullgraph,
                   numpy_fallback=numpy_fallback)
    if fn is None:
        return functools.partial(jit, **options)
    return JitFunction(fn, **options)


def explain(fn: Callable, *args, **kwargs) -> GraphBreakReport:
    """Run ``fn(*args, **kwargs)`` once under a fresh ``jit`` and report its graph breaks, as
    ``torch._dynamo.explain`` does: each break's reason, line and fix, the segments and their
    sizes, and the time in Python glue against compiled segments. ``fn`` may be a function or
    a jitted one (its options are kept; ``fullgraph`` is ignored, the point being to see the
    breaks). The call's result is ``report.result``."""
    if isinstance(fn, JitFunction):
        fresh = JitFunction(fn.fn, **fn._made_with)
    elif callable(fn):
        fresh = JitFunction(fn)
    else:
        raise TypeError(f"explain expects a function, got {type(fn).__name__}")
    result = fresh(*args, **kwargs)
    return break_report(fresh.fn_name, fresh._breaks.log, result)


def explain_recompiles(fn=None):
    """Report of recompilations (text and HTML) for ``fn``, or for every jitted function."""
    if fn is not None:
        if not isinstance(fn, JitFunction):
            raise TypeError("explain_recompiles expects a function made by tk.jit")
        return fn.explain_recompiles()
    return _history.explain_recompiles(_history.all_histories(), "recompilations")
