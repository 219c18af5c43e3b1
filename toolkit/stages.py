"""The stages of a jitted function: ``f.lower(*args)`` -> ``Lowered`` -> ``.compile()`` ->
``Compiled``, which runs the program and shows it at every stage (HLO before and after the
passes, LLVM IR, assembly, PTX)."""
from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np

from .backends.base import Backend, Executable, KernelInfo, ResultPlacement, RunContext
from .backends.reference.interpreter import EVALUATORS as _REFERENCE_EVALUATORS
from .collector import collector_paused, collector_relaxed
from .frontend.captured import CapturedChanged
from .frontend.errors import ArgumentTypeError, UserValueError, api_boundary
from .frontend.pytree import flatten, unflatten
from .frontend.signature import ArgSpec, abstractify
from .frontend.trace_function import TracedProgram, as_python_numbers
from .ir.collectives import device_lane
from .ir.nodes import Module
from .ir.ops import GroupOp
from .ir.shapes import Shape, TupleShape
from .ir.source_names import display_location
from .ir.structural import fingerprint
from .ir.user_code import user_line
from .passes.cost_analysis import cost_analysis as _cost_analysis, instruction_cost
from .passes.manager import PassDump
from .passes.memory_analysis import MemoryAnalysis, memory_analysis as _memory_analysis
from .passes.pipeline import make_pipeline
from .passes.residuals import Residual, is_backward, residuals_text, saved_residuals
from .profiler.progress import phase as progress_phase, watch_compile
from .profiler.events import KernelEvent, Phase
from .profiler.recorder import RECORDER

STAGES = ("hlo", "optimized_hlo", "llvm", "asm", "buffers", "ptx", "sass")
DEFAULT_PIPELINE = "default"


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
    parts = [display_location(f, ','.join(map(str, sorted(ls)[:4]))) for f, ls in by_file.items()]
    return "; ".join(parts)


def hlo_fingerprint(module: Module) -> str:
    """Equal for programs the same up to names and metadata (ir/structural.py)."""
    return fingerprint(module)


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
        size = sum(len(c.instructions) for c in self.hlo.computations)
        with watch_compile(f"jit({self.fn_name})", size), collector_paused():
            optimized = pipeline.run(self.hlo, clock, self.dump_passes, compile_id=compile_id)
            passes_end = clock.now()
            entry = optimized.module.entry.instructions
            progress_phase(
                f"{self._backend.name} code generation "
                f"({sum(i.opcode in GroupOp.COUNTED_AS_KERNELS for i in entry)} kernels)"
            )
            executable = self._backend.compile(optimized.module)
        end = clock.now()
        phases = [Phase("passes", start, passes_end - start)]
        backend_phases = executable.compile_phases
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

    _signature_text = ""  # set by jit: names this program when the cache evicts it

    def __init__(self, program: TracedProgram, optimized: Module, executable: Executable,
                 backend: Backend,
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
        self._keeps_device_arrays = executable.result_placement is ResultPlacement.DEVICE
        if self._keeps_device_arrays and program.view_outputs:  # (results stay on the device)
            program = self._program = dataclasses.replace(program, view_outputs=())
        # no argument checks and no extra outputs: NumPy arrays go to the executable as they are
        self._plain_leaves = (not program.int_limits and not program.has_extra_outputs
                              and program.captured is None)
        # the dispatch fast path (positional NumPy arrays of the compiled types): a program with
        # no argument checks, no extra outputs and one host result is its executable's first result
        tree = program.out_tree
        # (or a flat tuple or list of them: ``return x + A @ y, y + A.T @ x``)
        flat = tree.kind in ("tuple", "list") and all(c.kind == "leaf" for c in tree.children)
        plain = (not program.int_limits and not program.has_extra_outputs
                 and (self._single_output or flat)
                 and not self._keeps_device_arrays and not program.python_outputs)
        # data read from outside the arguments: arrays read where they live on every call (the
        # last parameters), numbers checked (frontend.captured)
        self._captured = program.captured
        # outputs that are Python numbers or NumPy scalars in NumPy's semantics, returned as
        # such (host results)
        self._python_outputs = () if self._keeps_device_arrays else program.python_outputs
        self._scalar_outputs = () if self._keeps_device_arrays else program.scalar_outputs
        single = executable.plain_run  # the CPU's one-kernel programs
        if not plain:
            self.plain_run = None
        elif self._single_output:
            self.plain_run = single or (lambda leaves, run=executable: run(leaves)[0])
            if self._scalar_outputs:  # (x.sum(): np.float64)
                self.plain_run = lambda leaves, run=self.plain_run: run(leaves)[()]
        elif self._scalar_outputs:  # (a tuple holding NumPy scalars)
            self.plain_run = (lambda leaves, run=executable,
                              make=tuple if tree.kind == "tuple" else list,
                              scalars=self._scalar_outputs:
                              make(as_python_numbers(run(leaves), (), scalars)))
        else:  # (the executable's results are the tuple: one per output)
            self.plain_run = (lambda leaves, run=executable: tuple(run(leaves))) \
                if tree.kind == "tuple" else (lambda leaves, run=executable: list(run(leaves)))
        if self.plain_run is not None and self._captured is not None:  # (and what it reads)
            self.plain_run = (lambda leaves, run=self.plain_run, more=self._with_captured:
                              run(more(leaves)))
        # names for what the executable reports and returns (a device's copies and results)
        executable.describe(fn_name, [spec.path for spec in program.in_specs])

    def as_text(self, stage: str = "optimized_hlo", metadata: bool = True) -> str:
        if stage == "hlo":
            return self.hlo.to_text(metadata=metadata)
        if stage == "optimized_hlo":
            return self.optimized_hlo.to_text(metadata=metadata)
        texts = self._executable.stages()
        text = texts.get(stage)
        if text is not None:
            return text()
        if stage == "buffers":  # a backend with no plan of its own: nothing written in place
            from .backends.buffer_plan import report

            return report(self.buffer_decisions)
        kind, _, arch = stage.partition(":")
        # PTX needs no GPU, SASS only the CUDA tools: any backend shows them
        if kind in ("ptx", "sass"):
            from .backends.gpu import compile_ptx
            from .backends.gpu.sass import sass

            program = compile_ptx(self.optimized_hlo, arch or "sm_80")
            return program.ptx if kind == "ptx" else sass(program.ptx, program.arch)
        if stage in ("llvm", "asm"):
            hint = ("the GPU's assembly is stage 'ptx', its machine code 'sass'" if "ptx" in texts
                    else "use backend='cpu'")
            raise ValueError(
                f"stage {stage!r} is not available on the {self.backend} backend ({hint})"
            )
        raise ValueError(f"unknown stage {stage!r}; available: {', '.join(STAGES)}")

    @property
    def executable(self) -> Executable:
        """What the backend compiled (``toolkit.backends.Executable``)."""
        return self._executable

    @property
    def cache_status(self) -> str:
        """How the backend came by the machine code: ``miss``, ``persistent_hit`` ..."""
        return self._executable.cache_status

    def kernels(self) -> tuple[KernelInfo, ...]:
        """The kernels (fusions, library calls, loops) one call runs, in order."""
        return self._executable.kernels()

    @property
    def arguments_written_in_place(self) -> tuple[str, ...]:
        """Arguments written in place whose new value the backend writes straight into the
        caller's array (the CPU backend, for kernels that read them only where they write);
        the others are computed into a new buffer and copied back after the call."""
        in_place = self._executable.in_place_outputs
        program = self._program
        first = self.optimized_hlo.entry.root.shape
        total = len(first.leaves()) if isinstance(first, TupleShape) else 1
        start = total - len(program.checks) - len(program.mutated)
        return tuple(
            program.in_specs[n].path for k, n in enumerate(program.mutated) if start + k in in_place
        )

    def saved_residuals(self) -> list[Residual]:
        """What the backward pass of a differentiated program (tk.grad, tk.vjp) keeps from its
        forward pass, after fusion: shape, bytes, the producing and the reading source lines."""
        return saved_residuals(self.optimized_hlo)

    def residuals_text(self) -> str:
        return residuals_text(self.saved_residuals())

    def cost_analysis(self, peak_flops: float | None = None,
                      peak_bandwidth: float | None = None) -> dict[str, float]:
        """XLA's cost properties of the optimised program (compiler estimates); with a device's
        peak FLOP/s and bytes/s, ``optimal_seconds`` is its roofline bound."""
        return _cost_analysis(self.optimized_hlo, peak_flops, peak_bandwidth)

    def memory_analysis(self) -> MemoryAnalysis:
        return _memory_analysis(self.optimized_hlo)

    @property
    def buffer_decisions(self) -> list:
        """Every update (dynamic-update-slice, scatter) and loop state the backend's buffer plan
        wrote in place, or copied first, and why (``as_text('buffers')`` prints them)."""
        return list(self._executable.buffer_decisions)

    @property
    def fusion_decisions(self) -> list:
        """Every producer-consumer edge the fusion pass considered, fused or not, and why."""
        return list(self._pipeline.decisions) if self._pipeline is not None else []

    @property
    def pass_events(self) -> list:
        return list(self._pipeline.passes) if self._pipeline is not None else []

    @property
    def pass_dumps(self) -> list[PassDump]:
        """The module after each pass matching ``dump_passes``, with a diff against the stage
        before."""
        return list(self._pipeline.dumps) if self._pipeline is not None else []

    @property
    def rewrites(self):
        return self._pipeline.rewrites if self._pipeline is not None else {}

    def _arrays(self, leaves: list) -> list:
        """Host arrays of the argument leaves; device arrays stay as they are on a device
        backend."""
        for leaf in leaves:  # (the common case, in a tenth of the time per leaf)
            if type(leaf) is not np.ndarray:
                break
        else:
            return leaves
        keep_device = self._keeps_device_arrays
        return [
            leaf
            if type(leaf) is np.ndarray
            or keep_device
            and getattr(type(leaf), "__toolkit_array__", False)
            else np.asarray(leaf, spec.dtype)
            for leaf, spec in zip(leaves, self._program.in_specs)
        ]

    def _result(self, results) -> Any:
        if self._python_outputs or self._scalar_outputs:
            results = as_python_numbers(results, self._python_outputs, self._scalar_outputs)
        return results[0] if self._single_output else unflatten(self._out_tree, results)

    def _with_captured(self, leaves: list) -> list:
        """The call's leaves and, after them, the lifted arrays as they are now; raises
        ``CapturedChanged`` (naming this program, which the jitted function then drops) where
        one no longer fits or a guarded number changed."""
        try:
            return list(leaves) + self._captured.values()
        except CapturedChanged as changed:
            changed.compiled = self
            raise

    def execute_flat(self, leaves: list) -> Any:
        if self._captured is not None:
            leaves = self._with_captured(leaves)
        program = self._program
        if program.int_limits:
            program.check_int_limits(leaves)
        if program.has_extra_outputs:
            program.check_mutable(leaves)
            return self._result(
                program.split_results(leaves, self._executable(self._arrays(leaves)))
            )
        return self._result(self._executable(self._arrays(leaves)))

    def execute_leaves(self, leaves: list) -> list:
        """As ``execute_flat``, the results as the flat list of output leaves (a graph break's
        segment: no tree to rebuild)."""
        if self._captured is not None:
            leaves = self._with_captured(leaves)
        if self._plain_leaves:
            for leaf in leaves:
                if type(leaf) is not np.ndarray:
                    break
            else:
                return self._executable(leaves)
        program = self._program
        if program.int_limits:
            program.check_int_limits(leaves)
        if program.has_extra_outputs:
            program.check_mutable(leaves)
            return program.split_results(leaves, self._executable(self._arrays(leaves)))
        return self._executable(self._arrays(leaves))

    def execute_profiled(self, leaves: list) -> Any:
        """As ``execute_flat``, recording a KernelEvent per kernel when the backend reports them."""
        if self._captured is not None:
            leaves = self._with_captured(leaves)
        if self._program.int_limits:
            self._program.check_int_limits(leaves)
        self._program.check_mutable(leaves)
        info = self._kernel_info if self._kernel_info is not None else self._build_kernel_info()
        events = []
        spent = [0.0]

        def on_kernel(inst, start, duration, launch="threads=1", device="cpu:0", stream=0):
            t0 = time.perf_counter()
            flops, trans, nbytes, kind, source, phase = info[inst.name]
            events.append(
                KernelEvent(
                    inst.name,
                    self.backend,
                    start,
                    duration,
                    device=device_lane(device),
                    stream=stream,
                    flops=flops,
                    transcendentals=trans,
                    bytes_accessed=nbytes,
                    launch=launch,
                    compile_id=self.compile_id,
                    function=self.fn_name,
                    kind=kind,
                    source=source,
                    phase=phase,
                )
            )
            spent[0] += time.perf_counter() - t0

        # the user's line, for the copies a device backend records (found only where it is used)
        context = RunContext(self.fn_name, user_line() if self._keeps_device_arrays else "")
        results = self._executable.run_profiled(self._arrays(leaves), RECORDER.clock, on_kernel,
                                                context)
        # charged: building the events, plus the two clock reads taken around each kernel
        RECORDER.charge(spent[0] + 2 * len(events) * RECORDER.clock_read_cost())
        for e in events:
            RECORDER.record(e)
        return self._result(self._program.split_results(leaves, results))

    def _build_kernel_info(self) -> dict:
        info = {}
        entry = self.optimized_hlo.entry.instructions
        differentiated = any(is_backward(i) for i in entry)
        # an update written in place reads and writes its window, not the whole buffer
        in_place = {
            d.instruction: d for d in self.buffer_decisions
            if d.in_place and d.bytes_written and d.computation == self.optimized_hlo.name
        }
        for inst in entry:
            c = instruction_cost(inst)
            kind = inst.attrs["kind"] if inst.opcode == "fusion" else inst.opcode
            phase = ("backward" if is_backward(inst) else "forward") if differentiated else ""
            nbytes = c["bytes accessed"]
            if inst.name in in_place and isinstance(inst.shape, Shape):
                nbytes += 2 * (in_place[inst.name].bytes_written - inst.shape.nbytes)
            info[inst.name] = (c["flops"], c["transcendentals"], nbytes, kind,
                               source_lines(inst), phase)
        self._kernel_info = info
        return info

    @api_boundary
    def __call__(self, *args, **kwargs):
        leaves, _, _ = flatten((args, kwargs))
        specs = self._program.in_specs[:self._program.argument_count]
        if len(leaves) != len(specs):
            raise ArgumentTypeError(f"compiled jit({self.fn_name}) takes {len(specs)} array "
                                    f"argument(s), got {len(leaves)}")
        for leaf, spec in zip(leaves, specs):
            shape, dtype, weak = abstractify(leaf, spec.path)
            if shape != spec.shape or dtype != spec.dtype:
                raise ArgumentTypeError(f"argument '{spec.path}' must be {spec.text} for this "
                                        f"compiled program, got {dtype}{list(shape)}")
        try:
            return self.execute_profiled(leaves) if RECORDER.active else self.execute_flat(leaves)
        except CapturedChanged as changed:  # (a jitted function would trace again; this cannot)
            raise UserValueError(f"compiled jit({self.fn_name}): {changed}, which it read from "
                                 "outside its arguments when traced: lower and compile it "
                                 "again, or call the jitted function") from None

    def __repr__(self) -> str:
        return f"<Compiled jit({self.fn_name}) on {self.backend}>"


def lower_positional(fn, name: str, args: tuple, backend: Backend,
                     pipeline: str = DEFAULT_PIPELINE) -> Lowered:
    """``fn`` traced on the abstract values of positional ``args`` (pytrees of arrays, no static
    arguments), unoptimised: what ``tk.shard_map`` and ``tk.jit(in_shardings=)`` compile,
    without a jit function's caches and graph breaks (an SPMD program is one program)."""
    import inspect

    from .frontend.trace_function import trace_program

    try:
        names = [p.name for p in inspect.signature(fn).parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        names = []
    specs, trees = [], []
    for k, arg in enumerate(args):
        leaves, tree, paths = flatten(arg, names[k] if k < len(names) else f"args[{k}]")
        trees.append(tree)
        for leaf, path in zip(leaves, paths):
            shape, dtype, weak = abstractify(leaf, path)
            specs.append(ArgSpec(path, shape, dtype, weak))

    def rebuild(params):
        it = iter(params)
        return tuple(unflatten(t, [next(it) for _ in range(t.num_leaves)]) for t in trees), {}
    with collector_relaxed():
        traced = trace_program(fn, name, specs, rebuild)
    return Lowered(traced, backend, name, pipeline)
