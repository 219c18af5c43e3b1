"""The GPU backend: PTX from the shared LLVM lowering (NVPTX), run through CuPy.

Compiling and checking PTX needs no GPU (``compile_ptx``, ``Compiled.as_text('ptx')``);
running it needs CuPy and an NVIDIA device of compute capability 8.0 or newer."""
from __future__ import annotations

import dataclasses
import functools
import time

import numpy as np

from ...ir.nodes import Module
from ...ir.ops import GroupOp
from ...ir.queries import known_trip_count
from ..base import Backend, register_backend
from ..buffer_plan import plan_buffers
from ..library_dot import make_dot
from ..llvm.planning import (
    as_computation,
    elementwise_in_place_operands,
    memoized,
    update_in_place_operand,
)
from ..reference.interpreter import evaluate_computation, flatten_value
from .arrays import DeviceArray, device_get
from .codegen import ARCHES, NOT_EMITTED, compile_ptx
from ...ir.shapes import TupleShape
from ..control import flat_module, make_control_runner
from .device import cupy_or_reason, default_device
from . import program_cache
from .device_loop import DeviceLoop
from .executor import GpuExecutable, GpuStep
from .gemm import GemmSpec
from .program_cache import program_key


def _host_run(inst):
    comp = inst.attrs["to_apply"] if inst.opcode == "call" else as_computation(inst)
    if any(isinstance(o.shape, TupleShape) for o in inst.operands):  # the plan passes tuple leaves
        comp = flat_module(comp, f"{inst.name}.host").entry
    return lambda host_ins: flatten_value(evaluate_computation(comp, host_ins))


def _device_control(inst, device):
    """A while or conditional on ``device``: its computations are compiled GPU programs, and
    the loop state stays on the device between them. A while whose body is one CUDA graph
    runs trip after trip as replays of it (``device_loop.py``); otherwise the host decides
    each trip (a predicate or branch index is downloaded, one scalar per trip)."""
    def on_device(m: Module):
        # the runner owns the loop state it hands the body, so the body writes it in place
        executable = compile_module(m, device, owns_donated=True)

        def run(buffers):
            results = executable([DeviceArray(b, device, f"{inst.name} state") for b in buffers])
            return [r._buffer for r in results]
        run.executable = executable
        return run

    def on_graphs(cond, body):
        return DeviceLoop.for_parts(inst, cond.executable, body.executable,
                                    known_trip_count(inst))

    runner = make_control_runner(inst, on_device, own=device.copy, to_host=device.download,
                                 native_while=on_graphs)

    def run(buffers):
        start = time.perf_counter()
        out = runner(buffers)
        run.trips = getattr(runner, "trips", 0)
        run.seconds = time.perf_counter() - start
        return out

    run.trips = 0
    run.driver = getattr(runner, "driver", None)
    run.loop = getattr(runner, "native", None)  # the DeviceLoop, where the body is one graph
    return run


def compile_module(module: Module, device=None, owns_donated: bool = False) -> GpuExecutable:
    """An executable for ``module`` on ``device`` (the default CUDA device when None).

    Buffers are planned first, as the CPU's are, so that a dynamic-update-slice or scatter
    whose destination is dead afterwards writes its window alone into that buffer, and the
    kernels are then emitted for the plan. ``owns_donated``: the caller owns the buffers of the
    module's donated (``must-alias``) parameters, so they may be written in place: a loop body
    whose state the loop driver owns. A top-level program's donated arguments are the user's
    device arrays, which other arrays may share, so there the new value gets a buffer of its
    own."""
    device = device if device is not None else default_device()
    planned = module if owns_donated else dataclasses.replace(
        module, attributes=tuple(a for a in module.attributes if a[0] != "input_output_alias"))
    plan = plan_buffers(planned, lambda inst, inputs, outs: (inst, inputs, outs),
                        memoized(update_in_place_operand),
                        memoized(elementwise_in_place_operands))
    in_place = {}
    for inst, inputs, outs in plan.steps:
        if len(outs) == 1 and outs[0] in inputs and inst.opcode not in NOT_EMITTED:
            parameters = as_computation(inst).parameters
            in_place[inst.name] = (inputs.index(outs[0]) if inputs.count(outs[0]) == 1
                                   and len(inputs) == len(parameters) else None)
    t0 = time.perf_counter()
    key = program_key(module, device.arch, in_place)
    program, found = program_cache.load(key, module, in_place) if key else (None, "disabled")
    if program is None:
        program = compile_ptx(module, device.arch, in_place)
        if key is not None and program.kernels:
            program_cache.store(key, program)
    t1 = time.perf_counter()
    functions = device.load(program) if program.kernels else {}
    t2 = time.perf_counter()
    kernels = {k.name: k for k in program.kernels}
    fallbacks = list(program.unsupported)

    def make_step(inst, inputs, outs) -> GpuStep:
        if inst.opcode in GroupOp.CONTROL:  # each called computation a GPU program of its own
            return GpuStep("control", inst, inputs, outs, run=_device_control(inst, device))
        if inst.opcode == "dot":
            return GpuStep("dot", inst, inputs, outs, run=make_dot(inst, device.xp),
                           gemm=GemmSpec.from_dot(inst))
        # a library call: NumPy's stable sort on the host, between two copies; a collective
        # the same way, meeting the other devices there (NCCL, on the device, is not built yet)
        if inst.opcode in GroupOp.LIBRARY or inst.opcode in GroupOp.COLLECTIVE:
            return GpuStep("library", inst, inputs, outs, run=_host_run(inst))
        kernel = kernels.get(inst.name)
        if kernel is None:  # the emitter could not lower it: compile_ptx listed why
            if inst.opcode == "call":
                fallbacks.append(f"%{inst.name}: call (the call-inliner pass removes these)")
            return GpuStep("host", inst, inputs, outs, run=_host_run(inst))
        grid, block = kernel.launch(device.sm_count, device.blocks_per_sm)
        return GpuStep(
            "kernel",
            inst,
            inputs,
            outs,
            symbol=kernel.symbol,
            function=functions[kernel.symbol],
            grid=grid,
            block=block,
            count=kernel.work_items,
        )

    plan = dataclasses.replace(plan, steps=[make_step(*record) for record in plan.steps])
    executable = GpuExecutable(module, plan, program, device, fallbacks,
                               [("ptx_from_cache" if found == "hit" else "llvm_ir_and_ptx",
                                 t1 - t0), ("driver_load", t2 - t1)])
    executable.keep_alive = functions  # the loaded module lives as long as the executable
    executable.cache_status = "persistent_hit" if found == "hit" else (
        f"miss ({found} cache entry rebuilt)"
        if found in ("corrupt", "foreign", "unsafe", "unauthenticated") else "miss")
    return executable




def device_put(x, device=None) -> DeviceArray:
    """``x`` copied to the GPU (the default CUDA device when None): an argument that jitted GPU
    functions then use without copying. A device array is returned as is."""
    if isinstance(x, DeviceArray):
        return x
    reason = None if device is not None else _available()
    if reason is not None:
        raise RuntimeError(f"device_put needs a GPU: {reason}")
    device = device if device is not None else default_device()
    host = np.asarray(x)
    return DeviceArray(device.upload(host), device, "device_put")


@functools.cache
def why_unavailable() -> str | None:
    """None when GPU programs can run here, else what is missing (CuPy, a device, ...)."""
    return cupy_or_reason()[1]


_available = why_unavailable


def _compile(module: Module) -> GpuExecutable:
    return compile_module(module)


# Below the CPU's priority: results on the GPU are device arrays, so the GPU is asked for by name
register_backend(Backend("gpu", "NVIDIA GPUs through PTX and CuPy", 5, _compile, _available),
                 aliases=("cuda",))

__all__ = [
    "ARCHES",
    "DeviceArray",
    "GpuExecutable",
    "compile_module",
    "compile_ptx",
    "device_get",
    "device_put",
    "why_unavailable",
]
