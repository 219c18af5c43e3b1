"""``jit``: the cache of compiled programs in front of a Python function (the stages live in
``toolkit.stages``).

A cache hit is one signature computation, one dict lookup and the executable call; when a
profile is open it also records a DispatchEvent and the kernels' KernelEvents. A miss traces,
compiles, explains itself if the function compiled before, and records a CompileEvent."""
from __future__ import annotations

import functools
import inspect
from collections import OrderedDict
import threading
import sys
import time
import warnings
from typing import Any, Callable, Iterable

import numpy as np

from . import backends
from .frontend.errors import UserTypeError, api_boundary, for_the_user, is_internal_file
from .frontend.promotion import SUPPORTED
from .frontend.pytree import LEAF, flatten, unflatten
from .frontend.recompile import (SignatureRecord, captured_values, function_location,
                                 short_repr)
from .frontend.scalar_lists import ScalarListWarning, scalar_list_error, scalar_list_warnings
from .frontend.signature import ArgSpec, abstractify, check_hashable_static
from .frontend.source_info import user_location
from .frontend.trace_function import TracedProgram, trace_program
from .frontend.tracer import Tracer, current_trace
from .passes.pipeline import PIPELINES
from .profiler.events import Cause, CompileEvent, DispatchEvent, Phase
from .profiler.recorder import RECORDER
from .runtime import history as _history
from .stages import DEFAULT_PIPELINE, Compiled, Lowered, hlo_fingerprint

__all__ = ["jit", "explain_recompiles", "JitFunction", "Lowered", "Compiled", "ScalarListWarning"]

_FAST_DTYPES = frozenset(SUPPORTED)
_PY_DTYPES = {float: np.dtype(np.float64), int: np.dtype(np.int64)}
_INT64 = 2 ** 63
MAX_INLINE_DEPTH = 64
# Compiled programs kept per jitted function (least recently used go first; each holds its
# machine code, ~0.2 MB on the CPU). An eviction is named as the cause of a later recompile.
DEFAULT_CACHE_SIZE = 256
_EVICTED_REMEMBERED = 1024


def _user_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning point at the user's line, past toolkit's frames."""
    frame, level = sys._getframe(1), 1
    while frame is not None and is_internal_file(frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1
    return level


def _normalize_statics(fn, static_argnums, static_argnames):
    nums = {static_argnums} if isinstance(static_argnums, int) else set(static_argnums or ())
    names = {static_argnames} if isinstance(static_argnames, str) else set(static_argnames or ())
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # builtins and some C callables have no signature
        return None, [], frozenset(nums), frozenset(names)
    params = list(sig.parameters.values())
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    var_positional = any(p.kind == p.VAR_POSITIONAL for p in params)
    var_keyword = any(p.kind == p.VAR_KEYWORD for p in params)
    name = getattr(fn, "__name__", "fn")
    bad_nums = sorted(n for n in nums if not -len(positional) <= n < len(positional))
    if bad_nums and not var_positional:
        raise ValueError(f"jit({name}) has static_argnums={tuple(sorted(nums))}, but {name} accepts "
                         f"only {len(positional)} positional argument(s): {', '.join(positional) or 'none'}")
    keyword_names = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    bad_names = sorted(names - keyword_names)
    if bad_names and not var_keyword:
        raise ValueError(f"jit({name}) has static_argnames {bad_names} that {name} does not take; "
                         f"its arguments are: {', '.join(sig.parameters) or 'none'}")
    for n in list(nums):
        if n < 0:
            nums.discard(n)
            nums.add(len(positional) + n)
    for i, name in enumerate(positional):
        if name in names:
            nums.add(i)
        if i in nums:
            names.add(name)
    return sig, positional, frozenset(nums), frozenset(names)


class JitFunction:
    """A function compiled once per abstract signature and cached."""

    def __init__(self, fn: Callable, static_argnums: int | Iterable[int] = (),
                 static_argnames: str | Iterable[str] = (), backend: str | None = None,
                 on_recompile: str = "warn", max_recompiles: int = _history.DEFAULT_MAX_RECOMPILES,
                 pipeline: str = DEFAULT_PIPELINE, dump_passes: str | None = None,
                 cache_size: int = DEFAULT_CACHE_SIZE):
        if not callable(fn):
            raise TypeError(f"jit expects a callable, got {type(fn).__name__}")
        if on_recompile not in _history.POLICIES:
            raise ValueError(f"on_recompile must be one of {_history.POLICIES}, got {on_recompile!r}")
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.fn_name = getattr(fn, "__name__", "fn").replace("<lambda>", "lambda")
        self._sig, self._positional, self._static_nums, self._static_names = _normalize_statics(
            fn, static_argnums, static_argnames)
        self._backend = backends.get_backend(backend)
        self._backend_name = self._backend.name
        if pipeline not in PIPELINES:
            raise ValueError(f"unknown pipeline {pipeline!r}; available: {', '.join(PIPELINES)}")
        self.pipeline = pipeline
        self.dump_passes = dump_passes
        self._options = (("pipeline", pipeline), ("dump_passes", str(dump_passes)))
        self.on_recompile = on_recompile
        self.max_recompiles = int(max_recompiles)
        self.location = function_location(fn)
        self._history = _history.history_for(fn, self.fn_name, self.location)
        self._serial = _history.new_serial()
        self._function_serial = _history.function_serial(fn)
        if int(cache_size) < 1:
            raise ValueError(f"cache_size must be at least 1, got {cache_size}")
        self.cache_size_limit = int(cache_size)
        self._cache: OrderedDict[Any, Compiled] = OrderedDict()
        self._evicted: OrderedDict[Any, str] = OrderedDict()  # key -> its signature text
        self._compile_lock = threading.Lock()
        self.call_site_hint = ""  # where calls come from when no user frame exists (%%xla)
        self._plain_keys: dict[int, tuple] = {}
        self._inline_depth = threading.local()

    # ---- argument handling --------------------------------------------------------------
    def _canonical(self, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        if kwargs and self._sig is not None:
            try:
                bound = self._sig.bind(*args, **kwargs)
            except TypeError as e:
                raise UserTypeError(f"jit({self.fn_name}): {e}") from None
            return bound.args, bound.kwargs
        return args, kwargs

    def _plain_key_parts(self, n: int) -> tuple[tuple, tuple]:
        parts = self._plain_keys.get(n)
        if parts is None:
            parts = self._plain_keys[n] = ((LEAF,) * n, tuple(self._arg_name(i) for i in range(n)))
        return parts

    def _arg_name(self, i: int) -> str:
        return self._positional[i] if i < len(self._positional) else f"args[{i}]"

    def _split(self, args: tuple, kwargs: dict):
        statics = []
        dynamic: list[tuple[str, Any]] = []
        for i, a in enumerate(args):
            if i in self._static_nums:
                check_hashable_static(a, self._arg_name(i))
                statics.append((i, a))
            else:
                dynamic.append((self._arg_name(i), a))
        for k, v in kwargs.items():
            if k in self._static_names:
                check_hashable_static(v, k)
                statics.append((k, v))
            else:
                dynamic.append((k, v))
        return tuple(statics), dynamic

    def _signature(self, args: tuple, kwargs: dict):
        """The cache key and the array leaves of a call. The hot path: plain ndarray arguments
        skip pytree flattening; leaf paths are only computed when a trace needs them."""
        args, kwargs = self._canonical(args, kwargs)
        statics, dynamic = self._split(args, kwargs)
        leaves: list = []
        trees: list = []
        avals: list = []
        for name, value in dynamic:
            t = type(value)
            if (t is np.ndarray or isinstance(value, np.generic)) and value.dtype in _FAST_DTYPES:
                leaves.append(value)
                trees.append(LEAF)
                avals.append((value.shape, value.dtype, False))
                continue
            if t is float or t is int and -_INT64 <= value < _INT64:
                leaves.append(value)
                trees.append(LEAF)
                avals.append(((), _PY_DTYPES[t], True))
                continue
            ls, td, ps = flatten(value, name)
            leaves.extend(ls)
            trees.append(td)
            avals.extend(abstractify(leaf, path) for leaf, path in zip(ls, ps))
        key = (tuple(trees), tuple(avals), statics, tuple(n for n, _ in dynamic), self._backend.name)
        return key, leaves, args, kwargs

    def _paths(self, args: tuple, kwargs: dict) -> list[str]:
        _, dynamic = self._split(args, kwargs)
        return [p for name, value in dynamic for p in flatten(value, name)[2]]

    def _specs(self, key, paths) -> list[ArgSpec]:
        return [ArgSpec(p, shape, dtype, weak) for p, (shape, dtype, weak) in zip(paths, key[1])]

    def _trace(self, key, paths, args, kwargs) -> TracedProgram:
        trees, _, statics, names, _ = key
        static_pos = {k: v for k, v in statics}

        def rebuild(params: list[Tracer]):
            it = iter(params)
            rebuilt = {name: unflatten(td, [next(it) for _ in range(td.num_leaves)])
                       for name, td in zip(names, trees)}
            new_args = [static_pos[i] if i in static_pos else rebuilt[self._arg_name(i)]
                        for i in range(len(args))]
            new_kwargs = {k: static_pos[k] if k in static_pos else rebuilt[k] for k in kwargs}
            return tuple(new_args), new_kwargs

        try:
            return trace_program(self.fn, self.fn_name, self._specs(key, paths), rebuild)
        except TypeError as e:  # a list of Python numbers where an array was meant: say that
            better = scalar_list_error(e, self.fn_name, self._split(args, kwargs)[1])
            if better is None:
                raise
            raise better.with_traceback(e.__traceback__) from None

    def _record(self, key, paths, fingerprint: str) -> SignatureRecord:
        trees, _, statics, names, backend = key
        return SignatureRecord(
            function_id=self._function_serial, jit_id=self._serial, location=self.location, arg_names=names,
            trees=tuple(str(t) for t in trees), leaves=tuple(self._specs(key, paths)),
            statics=tuple((self._arg_name(k) if isinstance(k, int) else k, short_repr(v), hash(v))
                          for k, v in statics),
            backend=backend, options=self._options, captured=captured_values(self.fn),
            hlo_fingerprint=fingerprint)

    # ---- compilation ----------------------------------------------------------------------
    def _compile_miss(self, key, cargs, ckwargs) -> Compiled:
        clock = RECORDER.clock
        start = clock.now()
        loc = user_location(3)
        call_site = str(loc) if loc else self.call_site_hint
        paths = self._paths(cargs, ckwargs)
        self._warn_scalar_lists(cargs, ckwargs, call_site)
        program = self._trace(key, paths, cargs, ckwargs)
        traced = clock.now()
        record = self._record(key, paths, hlo_fingerprint(program.module))
        compile_id = _history.next_compile_id()
        recompile = self._history.explain(record, call_site, compile_id, start)
        if recompile is not None:
            try:
                self._history.apply_policy(recompile, self.on_recompile, self.max_recompiles,
                                           (loc.file, loc.line) if loc else None)
            except _history.RecompileError:
                self._history.add(record, None, recompile)
                raise
        if key in self._evicted and recompile is not None:
            evicted = Cause("EVICTED", "", "", "", (
                f"this signature was compiled before and evicted: jit keeps the "
                f"{self.cache_size_limit} most recently compiled programs of a function "
                f"(tk.jit(..., cache_size=N) keeps more)"))
            recompile = _history.dataclasses.replace(recompile, causes=(evicted,) + recompile.causes)
        compiled = self._lowered(program).compile(compile_id)
        compiled._signature_text = record.text()
        victim = next(iter(self._cache.values())) if len(self._cache) >= self.cache_size_limit else None
        end = clock.now()
        event = CompileEvent(
            function=self.fn_name, location=self.location, signature=record.text(),
            backend=self._backend.name, compile_id=compile_id, start=start, duration=end - start,
            phases=(Phase("trace", start, traced - start),) + compiled.phases,
            hlo_fingerprint=record.hlo_fingerprint, call_site=call_site,
            thread=threading.get_ident(),
            cache=getattr(compiled._executable, "cache_status", "miss"),
            evicted=victim._signature_text if victim is not None else "",
            mutated_arguments=tuple(program.in_specs[i].path for i in program.mutated),
            written_in_place=compiled.arguments_written_in_place)
        if recompile is not None:
            recompile = _history.dataclasses.replace(recompile, duration=end - start)
        self._history.add(record, event, recompile)
        if RECORDER.active:
            RECORDER.record(event)
            if recompile is not None:
                RECORDER.record(recompile)
        return compiled

    def _warn_scalar_lists(self, args, kwargs, call_site: str) -> None:
        """A list of Python numbers is a pytree of separate scalars (as in JAX), not an array:
        ``x * 2`` then repeats the list and ``x + y`` concatenates. Say so once per compile."""
        for message in scalar_list_warnings(self.fn_name, self._split(args, kwargs)[1], call_site):
            warnings.warn(message, ScalarListWarning, stacklevel=_user_stacklevel())

    # ---- public -------------------------------------------------------------------------
    @api_boundary
    def lower(self, *args, **kwargs) -> Lowered:
        key, _, args, kwargs = self._signature(args, kwargs)
        return self._lowered(self._trace(key, self._paths(args, kwargs), args, kwargs))

    def _lowered(self, program: TracedProgram) -> Lowered:
        return Lowered(program, self._backend, self.fn_name, self.pipeline, self.dump_passes)

    def __call__(self, *args, **kwargs):
        """The cache-hit fast path (no decorator frame, no pytree walk): positional NumPy arrays
        of the supported dtypes; the key is the one ``_signature`` builds, so a new shape or
        dtype still misses and recompiles with its cause. Errors reach the user as
        ``api_boundary`` shows them (the try costs nothing until something is raised)."""
        __tracebackhide__ = True  # noqa: F841
        try:
            if not kwargs and not self._static_nums:
                arrays = True
                for a in args:
                    t = type(a)
                    if (t is not np.ndarray and not isinstance(a, np.generic)) or a.dtype not in _FAST_DTYPES:
                        break
                    arrays = arrays and t is np.ndarray
                else:
                    trees, names = self._plain_key_parts(len(args))
                    key = (trees, tuple([(a.shape, a.dtype, False) for a in args]), (), names, self._backend_name)
                    compiled = self._cache.get(key)
                    if compiled is not None and not RECORDER.active:
                        run = compiled.plain_run
                        if run is not None:  # NumPy scalars (np.float32(0.5)) as 0-d arrays of their dtype
                            return run(list(args) if arrays else
                                       [a if type(a) is np.ndarray else np.asarray(a) for a in args])
                        return compiled.execute_flat(list(args))
            return self._call(*args, **kwargs)
        except Exception as e:
            shown = for_the_user(e)
            if shown is None:
                raise
            raise shown from None

    def _call(self, *args, **kwargs):
        if current_trace() is not None:
            return self._inline(args, kwargs)
        key, leaves, cargs, ckwargs = self._signature(args, kwargs)
        compiled = self._cache.get(key)
        if compiled is None:
            start = RECORDER.clock.now() if RECORDER.active else 0.0
            with self._compile_lock:
                compiled = self._cache.get(key)
                if compiled is None:
                    compiled = self._insert(key, self._compile_miss(key, cargs, ckwargs))
            if RECORDER.active:
                return self._dispatch_profiled(compiled, leaves, start, hit=False)
        elif RECORDER.active:
            return self._dispatch_profiled(compiled, leaves, RECORDER.clock.now(), hit=True)
        return compiled.execute_flat(leaves)

    def _inline(self, args, kwargs):
        """Called while a function is being traced (nested jit, or this function calling itself):
        its Python body runs inside the enclosing trace, as JAX inlines nested jits. Running a
        compiled program on tracers is impossible, and compiling here would wait on the lock
        the enclosing compile holds."""
        depth = getattr(self._inline_depth, "value", 0)
        if depth >= MAX_INLINE_DEPTH:
            raise UserTypeError(
                f"jit({self.fn_name}) calls itself more than {MAX_INLINE_DEPTH} levels deep while "
                "being traced. Recursion is unrolled at trace time, so it must end on static "
                "facts (shapes, static arguments); for loops over data use a Python loop with a "
                "static bound.")
        self._inline_depth.value = depth + 1
        try:
            return self.fn(*args, **kwargs)
        finally:
            self._inline_depth.value = depth

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

    @api_boundary
    def compiled(self, *args, **kwargs) -> Compiled:
        """The Compiled program for these arguments: the cached one, or compiled (and cached) now."""
        key, leaves, cargs, ckwargs = self._signature(args, kwargs)
        found = self._cache.get(key)
        if found is None:
            with self._compile_lock:
                found = self._cache.get(key) or self._insert(key, self._compile_miss(key, cargs, ckwargs))
        return found

    def _insert(self, key, compiled: Compiled) -> Compiled:
        """Cache ``compiled``; past ``cache_size`` the least recently compiled program goes.
        (Hits do not reorder: the hot path stays one dict lookup.)"""
        self._cache[key] = compiled
        self._evicted.pop(key, None)
        while len(self._cache) > self.cache_size_limit:
            old_key, old = self._cache.popitem(last=False)
            self._evicted[old_key] = old._signature_text
            if len(self._evicted) > _EVICTED_REMEMBERED:
                self._evicted.popitem(last=False)
        return compiled

    @property
    def cache_size(self) -> int:
        return len(self._cache)

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

    def clear_cache(self) -> None:
        self._cache.clear()

    def __repr__(self) -> str:
        return f"<jit({self.fn_name}) backend={self._backend.name}, {len(self._cache)} compiled>"


def jit(fn: Callable | None = None, *, static_argnums=(), static_argnames=(),
        backend: str | None = None, on_recompile: str = "warn",
        max_recompiles: int = _history.DEFAULT_MAX_RECOMPILES, pipeline: str = DEFAULT_PIPELINE,
        dump_passes: str | None = None, cache_size: int = DEFAULT_CACHE_SIZE):
    """Compile ``fn`` with toolkit. Usable as ``@jit`` or ``@jit(static_argnums=...)``.

    ``cache_size`` bounds the compiled programs kept for ``fn`` (default 256, least recently
    compiled evicted first; a recompile caused by an eviction says so, code ``EVICTED``).

    ``on_recompile`` decides what happens when the function recompiles more than
    ``max_recompiles`` times: ``"warn"`` once with a summary (default), ``"error"`` raises
    ``RecompileError`` (``max_recompiles=0`` forbids any recompilation), ``"ignore"``.
    ``pipeline`` names the optimisation pipeline (``"default"``, ``"simplify-only"``, ``"none"``);
    ``dump_passes`` is a regular expression: the module after each matching pass is kept, with
    a diff, in ``Compiled.pass_dumps`` (as XLA's ``--xla_dump_hlo_pass_re``)."""
    options = dict(static_argnums=static_argnums, static_argnames=static_argnames, backend=backend,
                   on_recompile=on_recompile, max_recompiles=max_recompiles, pipeline=pipeline,
                   dump_passes=dump_passes, cache_size=cache_size)
    if fn is None:
        return functools.partial(jit, **options)
    return JitFunction(fn, **options)


def explain_recompiles(fn=None):
    """Report of recompilations (text and HTML) for ``fn``, or for every jitted function."""
    if fn is not None:
        if not isinstance(fn, JitFunction):
            raise TypeError("explain_recompiles expects a function made by tk.jit")
        return fn.explain_recompiles()
    return _history.explain_recompiles(_history.all_histories(), "recompilations")
