"""``jit`` and its stages: ``f.lower(*args)`` -> ``Lowered`` -> ``.compile()`` -> ``Compiled``.

A cache hit is one signature computation, one dict lookup and the executable call; when a
profile is open it also records a DispatchEvent and the kernels' KernelEvents. A miss traces,
compiles, explains itself if the function compiled before, and records a CompileEvent."""
from __future__ import annotations

import functools
import hashlib
import inspect
import threading
import time
from typing import Any, Callable, Iterable

import numpy as np

from . import backends
from .backends.base import Backend
from .frontend.errors import ArgumentTypeError, UserTypeError, api_boundary
from .frontend.promotion import SUPPORTED
from .frontend.pytree import LEAF, flatten, unflatten
from .frontend.recompile import (SignatureRecord, captured_values, function_location, pretty_filename,
                                 short_repr)
from .frontend.signature import ArgSpec, abstractify, check_hashable_static
from .frontend.source_info import user_location
from .frontend.trace_function import TracedProgram, trace_program
from .frontend.tracer import Tracer
from .ir.nodes import Module
from .backends.reference.interpreter import EVALUATORS as _REFERENCE_EVALUATORS
from .passes.cost_analysis import cost_analysis as _cost_analysis, instruction_cost
from .passes.manager import PassDump
from .passes.memory_analysis import MemoryAnalysis, memory_analysis as _memory_analysis
from .passes.pipeline import PIPELINES, make_pipeline
from .profiler.events import CompileEvent, DispatchEvent, KernelEvent, Phase
from .profiler.recorder import RECORDER
from .runtime import history as _history

STAGES = ("hlo", "optimized_hlo", "llvm", "asm", "ptx")
DEFAULT_PIPELINE = "default"
_FAST_DTYPES = frozenset(SUPPORTED)
_PY_DTYPES = {float: np.dtype(np.float64), int: np.dtype(np.int64)}
_INT64 = 2 ** 63


def source_lines(inst) -> str:
    """The user's lines an instruction (or every instruction of a fusion) came from:
    ``file.py:12,14`` (at most four lines, in order)."""
    members = inst.attrs["calls"].instructions if inst.opcode == "fusion" else (inst,)
    by_file: dict[str, list[int]] = {}
    for m in members:
        md = m.metadata
        if md is not None and md.source_file and md.source_line:
            lines = by_file.setdefault(md.source_file, [])
            if md.source_line not in lines:
                lines.append(md.source_line)
    parts = [f"{f}:{','.join(map(str, sorted(ls)[:4]))}" for f, ls in by_file.items()]
    return "; ".join(parts)


def hlo_fingerprint(module: Module) -> str:
    return hashlib.sha1(module.to_text(metadata=False).encode()).hexdigest()[:16]


class _TracedStage:
    """What every stage knows: the traced program it came from."""

    _program: TracedProgram

    @property
    def hlo(self) -> Module:
        return self._program.module

    @property
    def in_specs(self) -> tuple[ArgSpec, ...]:
        return self._program.in_specs


class Lowered(_TracedStage):
    """A traced program for one abstract signature, before optimisation."""

    def __init__(self, program: TracedProgram, backend: Backend, fn_name: str,
                 pipeline: str = DEFAULT_PIPELINE, dump_passes: str | None = None):
        self._program = program
        self._backend = backend
        self.fn_name = fn_name
        self.pipeline = pipeline
        self.dump_passes = dump_passes

    def as_text(self, dialect: str = "hlo", metadata: bool = True) -> str:
        if dialect != "hlo":
            raise ValueError(f"unknown dialect {dialect!r}; toolkit prints 'hlo'")
        return self.hlo.to_text(metadata=metadata)

    def cost_analysis(self) -> dict[str, float]:
        return _cost_analysis(self.hlo)

    def compile(self, compile_id: int = 0) -> Compiled:
        clock = RECORDER.clock
        start = clock.now()
        pipeline = make_pipeline(self.pipeline, _REFERENCE_EVALUATORS)
        optimized = pipeline.run(self.hlo, clock, self.dump_passes, compile_id=compile_id)
        passes_end = clock.now()
        executable = self._backend.compile(optimized.module)
        end = clock.now()
        phases = [Phase("passes", start, passes_end - start)]
        backend_phases = getattr(executable, "compile_phases", None) or []
        t = passes_end
        for name, seconds in backend_phases:  # codegen, optimisation, machine code
            phases.append(Phase(name, t, seconds))
            t += seconds
        if not backend_phases:
            phases.append(Phase("backend_compile", passes_end, end - passes_end))
        phases = tuple(phases)
        if RECORDER.active:
            for event in optimized.passes + optimized.decisions:
                RECORDER.record(event)
        return Compiled(self._program, optimized.module, executable, self._backend, self.fn_name,
                        compile_id, phases, optimized)

    def __repr__(self) -> str:
        return f"<Lowered jit({self.fn_name}) {', '.join(s.text for s in self.in_specs)}>"


class Compiled(_TracedStage):
    """An executable for one abstract signature, with its IR at every stage."""

    def __init__(self, program: TracedProgram, optimized: Module, executable, backend: Backend,
                 fn_name: str, compile_id: int = 0, phases: tuple[Phase, ...] = (),
                 pipeline_result=None):
        self._program = program
        self._pipeline = pipeline_result
        self.optimized_hlo = optimized
        self._executable = executable
        self.backend = backend.name
        self.fn_name = fn_name
        self.compile_id = compile_id
        self.phases = phases
        self._out_tree = program.out_tree
        self._single_output = program.out_tree.kind == "leaf"
        self._kernel_info: dict | None = None

    def as_text(self, stage: str = "optimized_hlo", metadata: bool = True) -> str:
        if stage == "hlo":
            return self.hlo.to_text(metadata=metadata)
        if stage == "optimized_hlo":
            return self.optimized_hlo.to_text(metadata=metadata)
        if stage == "ptx" or stage.startswith("ptx:"):  # PTX needs no GPU: any backend can show it
            from .backends.gpu import compile_ptx

            return compile_ptx(self.optimized_hlo, stage.split(":", 1)[1] if ":" in stage else "sm_80").ptx
        if stage in ("llvm", "asm"):
            text = getattr(self._executable, "llvm_ir" if stage == "llvm" else "asm", None)
            if text is None:
                raise ValueError(f"stage {stage!r} is not available on the {self.backend} backend "
                                 "(use backend='cpu')")
            return text
        raise ValueError(f"unknown stage {stage!r}; available: {', '.join(STAGES)}")

    def cost_analysis(self, peak_flops: float | None = None,
                      peak_bandwidth: float | None = None) -> dict[str, float]:
        """XLA's cost properties of the optimised program (compiler estimates); with a device's
        peak FLOP/s and bytes/s, ``optimal_seconds`` is its roofline bound."""
        return _cost_analysis(self.optimized_hlo, peak_flops, peak_bandwidth)

    def memory_analysis(self) -> MemoryAnalysis:
        return _memory_analysis(self.optimized_hlo)

    @property
    def fusion_decisions(self) -> list:
        """Every producer-consumer edge the fusion pass considered, fused or not, and why."""
        return list(self._pipeline.decisions) if self._pipeline is not None else []

    @property
    def pass_events(self) -> list:
        return list(self._pipeline.passes) if self._pipeline is not None else []

    @property
    def pass_dumps(self) -> list[PassDump]:
        """The module after each pass matching ``dump_passes``, with a diff against the stage before."""
        return list(self._pipeline.dumps) if self._pipeline is not None else []

    @property
    def rewrites(self):
        return self._pipeline.rewrites if self._pipeline is not None else {}

    def _arrays(self, leaves: list) -> list:
        return [leaf if type(leaf) is np.ndarray else np.asarray(leaf, spec.dtype)
                for leaf, spec in zip(leaves, self._program.in_specs)]

    def _result(self, results) -> Any:
        return results[0] if self._single_output else unflatten(self._out_tree, results)

    def execute_flat(self, leaves: list) -> Any:
        return self._result(self._executable(self._arrays(leaves)))

    def execute_profiled(self, leaves: list) -> Any:
        """As ``execute_flat``, recording a KernelEvent per kernel when the backend reports them."""
        run_profiled = getattr(self._executable, "run_profiled", None)
        if run_profiled is None:
            return self.execute_flat(leaves)
        info = self._kernel_info if self._kernel_info is not None else self._build_kernel_info()
        events = []
        spent = [0.0]

        def on_kernel(inst, start, duration, launch="threads=1"):
            t0 = time.perf_counter()
            flops, trans, nbytes, kind, source = info[inst.name]
            events.append(KernelEvent(inst.name, self.backend, start, duration, flops=flops,
                                      transcendentals=trans, bytes_accessed=nbytes,
                                      launch=launch, compile_id=self.compile_id,
                                      function=self.fn_name, kind=kind, source=source))
            spent[0] += time.perf_counter() - t0

        results = run_profiled(self._arrays(leaves), RECORDER.clock, on_kernel)
        # charged: building the events, plus the two clock reads taken around each kernel
        RECORDER.charge(spent[0] + 2 * len(events) * RECORDER.clock_read_cost())
        for e in events:
            RECORDER.record(e)
        return self._result(results)

    def _build_kernel_info(self) -> dict:
        info = {}
        for inst in self.optimized_hlo.entry.instructions:
            c = instruction_cost(inst)
            kind = inst.attrs["kind"] if inst.opcode == "fusion" else inst.opcode
            info[inst.name] = (c["flops"], c["transcendentals"], c["bytes accessed"], kind,
                               source_lines(inst))
        self._kernel_info = info
        return info

    @api_boundary
    def __call__(self, *args, **kwargs):
        leaves, _, _ = flatten((args, kwargs))
        specs = self._program.in_specs
        if len(leaves) != len(specs):
            raise ArgumentTypeError(f"compiled jit({self.fn_name}) takes {len(specs)} array "
                                    f"argument(s), got {len(leaves)}")
        for leaf, spec in zip(leaves, specs):
            shape, dtype, weak = abstractify(leaf, spec.path)
            if shape != spec.shape or dtype != spec.dtype:
                raise ArgumentTypeError(f"argument '{spec.path}' must be {spec.text} for this "
                                        f"compiled program, got {dtype}{list(shape)}")
        return self.execute_profiled(leaves) if RECORDER.active else self.execute_flat(leaves)

    def __repr__(self) -> str:
        return f"<Compiled jit({self.fn_name}) on {self.backend}>"


def _normalize_statics(fn, static_argnums, static_argnames):
    nums = {static_argnums} if isinstance(static_argnums, int) else set(static_argnums or ())
    names = {static_argnames} if isinstance(static_argnames, str) else set(static_argnames or ())
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # builtins and some C callables have no signature
        return None, [], frozenset(nums), frozenset(names)
    params = list(sig.parameters.values())
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
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
                 pipeline: str = DEFAULT_PIPELINE, dump_passes: str | None = None):
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
        self._cache: dict[Any, Compiled] = {}
        self._compile_lock = threading.Lock()
        self.call_site_hint = ""  # where calls come from when no user frame exists (%%xla)
        self._plain_keys: dict[int, tuple] = {}

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

        return trace_program(self.fn, self.fn_name, self._specs(key, paths), rebuild)

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
        call_site = f"{pretty_filename(loc.file)}:{loc.line}" if loc else self.call_site_hint
        paths = self._paths(cargs, ckwargs)
        program = self._trace(key, paths, cargs, ckwargs)
        traced = clock.now()
        record = self._record(key, paths, hlo_fingerprint(program.module))
        compile_id = _history.next_compile_id()
        recompile = self._history.explain(record, call_site, compile_id, start)
        if recompile is not None:
            try:
                self._history.apply_policy(recompile, self.on_recompile, self.max_recompiles)
            except _history.RecompileError:
                self._history.add(record, None, recompile)
                raise
        compiled = self._lowered(program).compile(compile_id)
        end = clock.now()
        event = CompileEvent(
            function=self.fn_name, location=self.location, signature=record.text(),
            backend=self._backend.name, compile_id=compile_id, start=start, duration=end - start,
            phases=(Phase("trace", start, traced - start),) + compiled.phases,
            hlo_fingerprint=record.hlo_fingerprint, call_site=call_site,
            thread=threading.get_ident(),
            cache=getattr(compiled._executable, "cache_status", "miss"))
        if recompile is not None:
            recompile = _history.dataclasses.replace(recompile, duration=end - start)
        self._history.add(record, event, recompile)
        if RECORDER.active:
            RECORDER.record(event)
            if recompile is not None:
                RECORDER.record(recompile)
        return compiled

    # ---- public -------------------------------------------------------------------------
    @api_boundary
    def lower(self, *args, **kwargs) -> Lowered:
        key, _, args, kwargs = self._signature(args, kwargs)
        return self._lowered(self._trace(key, self._paths(args, kwargs), args, kwargs))

    def _lowered(self, program: TracedProgram) -> Lowered:
        return Lowered(program, self._backend, self.fn_name, self.pipeline, self.dump_passes)

    @api_boundary
    def __call__(self, *args, **kwargs):
        if not kwargs and not self._static_nums and all(
                (type(a) is np.ndarray or isinstance(a, np.generic)) and a.dtype in _FAST_DTYPES for a in args):
            # the commonest call: positional NumPy arrays; the same key _signature would build
            trees, names = self._plain_key_parts(len(args))
            key = (trees, tuple((a.shape, a.dtype, False) for a in args), (), names, self._backend.name)
            compiled = self._cache.get(key)
            if compiled is not None and not RECORDER.active:
                return compiled.execute_flat(list(args))
        key, leaves, cargs, ckwargs = self._signature(args, kwargs)
        compiled = self._cache.get(key)
        if compiled is None:
            if any(isinstance(leaf, Tracer) for leaf in leaves):
                return self.fn(*args, **kwargs)  # nested jit: inline into the enclosing trace
            start = RECORDER.clock.now() if RECORDER.active else 0.0
            with self._compile_lock:
                compiled = self._cache.get(key)
                if compiled is None:
                    compiled = self._cache[key] = self._compile_miss(key, cargs, ckwargs)
            if RECORDER.active:
                return self._dispatch_profiled(compiled, leaves, start, hit=False)
        elif RECORDER.active:
            return self._dispatch_profiled(compiled, leaves, RECORDER.clock.now(), hit=True)
        return compiled.execute_flat(leaves)

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
                found = self._cache.get(key) or self._cache.setdefault(key, self._compile_miss(key, cargs, ckwargs))
        return found

    @property
    def cache_size(self) -> int:
        return len(self._cache)

    @property
    def recompiles(self):
        """RecompileEvents of this function (and earlier function objects at the same source)."""
        return list(self._history.recompiles)

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
        dump_passes: str | None = None):
    """Compile ``fn`` with toolkit. Usable as ``@jit`` or ``@jit(static_argnums=...)``.

    ``on_recompile`` decides what happens when the function recompiles more than
    ``max_recompiles`` times: ``"warn"`` once with a summary (default), ``"error"`` raises
    ``RecompileError`` (``max_recompiles=0`` forbids any recompilation), ``"ignore"``.
    ``pipeline`` names the optimisation pipeline (``"default"``, ``"simplify-only"``, ``"none"``);
    ``dump_passes`` is a regular expression: the module after each matching pass is kept, with
    a diff, in ``Compiled.pass_dumps`` (as XLA's ``--xla_dump_hlo_pass_re``)."""
    options = dict(static_argnums=static_argnums, static_argnames=static_argnames, backend=backend,
                   on_recompile=on_recompile, max_recompiles=max_recompiles, pipeline=pipeline,
                   dump_passes=dump_passes)
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
