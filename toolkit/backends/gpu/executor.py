"""The GPU executable: a buffer plan run on a device, kernel by kernel, in stream order.

NumPy arguments are copied to the device once per call; device arrays are used in place.
Results come back as ``DeviceArray``s and stay on the device. Dots are cuBLAS calls. An
instruction the emitter cannot lower runs on the host through the interpreter, and the copies
that costs are recorded like any other. Without a profile session nothing is timed and
nothing waits; with one, CUDA events bracket every kernel and copy, and the run synchronises
once at the end to read them."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...ir.nodes import Instruction, Module
from ...profiler.events import AllocationEvent, TransferEvent
from ...profiler.recorder import RECORDER
from ..base import Executable, KernelInfo, ResultPlacement, RunContext
from ..buffer_plan import BufferPlan
from ..control import trips_text
from .arrays import DeviceArray, fetched_from
from .gemm import GemmSpec
from .graph_replay import GraphReplay, why_not_recorded
from .sass import sass


@dataclass
class GpuStep:
    # kernel | dot | library (sort, on the host) | host (an interpreter fallback between two copies)
    kind: str
    #          | control (a while or conditional: compiled GPU programs driven from the host)
    inst: Instruction
    inputs: list[int]
    outputs: list[int]
    symbol: str = ""
    function: object = None
    grid: tuple[int, int, int] = (1, 1, 1)
    block: tuple[int, int, int] = (1, 1, 1)
    count: int = 0
    run: object = None  # dot: run(ins, out); host: run(host_ins) -> host outs
    gemm: GemmSpec | None = None  # dot: one direct cuBLAS call, its layout fixed at compile time

    @property
    def launch_text(self) -> str:
        if self.kind == "kernel":
            return f"grid={self.grid} block={self.block}"
        if self.kind == "control":
            trips = getattr(self.run, "trips", None)
            if self.inst.opcode == "while" and trips is not None:
                return trips_text(trips, getattr(self.run, "seconds", 0.0),
                                  getattr(self.run, "driver", None))
            return "host control"
        if self.gemm is not None:
            g = self.gemm
            batch = f"{g.batch}x " if g.batch > 1 else ""
            return f"cuBLAS gemm {batch}{g.m}x{g.n}x{g.k}"
        return {"dot": "cuBLAS", "library": "host library call"}.get(self.kind, "host fallback")


class _Probe:
    """Device-side timings of one profiled run: CUDA events around each operation, read after
    one synchronisation at the end and placed on the profile's clock."""

    def __init__(self, device, clock, on_kernel, context: RunContext, note: str = ""):
        self.device, self.clock, self.on_kernel = device, clock, on_kernel
        self.note = note  # said of every kernel's time: how it was measured
        self.function = context.function
        self.location = context.location
        device.synchronize()
        self.anchor = device.timer()
        self.anchor_host = clock.now()
        self.pending: list = []

    def around(self, action, *record):
        start = self.device.timer()
        result = action()
        self.pending.append((start, self.device.timer(), record))
        return result

    def allocation(self, nbytes: int, what: str) -> None:
        RECORDER.record(AllocationEvent(self.clock.now(), nbytes, self.device.used_bytes(),
                                        self.device.label, what))

    def finish(self) -> None:
        d = self.device
        d.synchronize()
        for start, end, record in self.pending:
            at = self.anchor_host + d.elapsed(self.anchor, start)
            seconds = d.elapsed(start, end)
            if record[0] == "kernel":
                _, step = record
                self.on_kernel(step.inst, at, seconds, step.launch_text + self.note,
                               device=d.label, stream=0)
            else:
                _, direction, nbytes, what, avoidable = record
                RECORDER.record(TransferEvent(direction, nbytes, at, seconds, what=what,
                                              location=self.location, device=d.label,
                                              stream=d.copy_stream_id, function=self.function,
                                              avoidable=avoidable))


class GpuExecutable(Executable):
    result_placement = ResultPlacement.DEVICE

    def __init__(self, module: Module, plan: BufferPlan[GpuStep], program, device,
                 fallbacks: list[str], phases: list[tuple[str, float]]):
        self.module = module
        self.plan = plan
        self.steps = plan.steps
        self.program = program
        self.device = device
        self.fallbacks = fallbacks
        self.compile_phases = phases
        self._device_constants: dict[int, object] | None = None
        self._copy_out = [s in plan.constants for s in plan.out_slots]
        self.describe(module.name, [f"args[{i}]" for i in range(len(plan.arg_slots))])
        self.not_graphed = why_not_recorded(self.steps, device)
        self._graph = GraphReplay(self) if self.not_graphed is None else None

    @property
    def launch_mode(self) -> str:
        """How a call launches: one CUDA graph, or kernel by kernel and why."""
        if self._graph is not None and self._graph.disabled is None:
            g = self._graph
            return (f"one CUDA graph ({len(self.steps)} nodes, {g.replays} replays, "
                    f"{len(g.recordings)} recordings, {g.repoints} nodes re-pointed)")
        why = self._graph.disabled if self._graph is not None else self.not_graphed
        return f"kernel by kernel ({why})"

    def describe(self, function_name: str, arg_names: list[str]) -> None:
        """Names for events and results: the jitted function and its argument paths."""
        self.function_name = function_name
        self.arg_names = list(arg_names)
        n = len(self.plan.out_slots)
        self._origins = [f"{function_name} result" if n == 1 else f"{function_name} result[{i}]"
                         for i in range(n)]

    @property
    def ptx(self) -> str:
        return self.program.ptx

    @property
    def llvm_ir(self) -> str:
        return self.program.llvm_ir

    def stages(self):
        arch = self.program.arch
        ptx = lambda: self.program.ptx  # noqa: E731
        machine = lambda: sass(self.program.ptx, arch)  # noqa: E731
        return {"llvm": lambda: self.program.llvm_ir, "ptx": ptx, f"ptx:{arch}": ptx,
                "sass": machine, f"sass:{arch}": machine}

    def kernels(self) -> tuple[KernelInfo, ...]:
        return tuple(KernelInfo(step.inst.name, step.kind, step.inst) for step in self.steps)

    # ---- running ------------------------------------------------------------------------
    def run(self, args):
        if self._graph is not None:
            results = self._graph.run(args)
            if results is not None:
                return results
        return self._run(args, None)

    def run_profiled(self, args, clock, on_kernel, context: RunContext = RunContext()):
        graphed = self._graph is not None and self._graph.disabled is None
        probe = _Probe(self.device, clock, on_kernel, context,
                       " · timed launch by launch (unprofiled calls replay one CUDA graph)"
                       if graphed else "")
        try:
            return self._run(args, probe)
        finally:
            probe.finish()

    def _run(self, args, probe: _Probe | None):
        d = self.device
        plan = self.plan
        bufs: list = [None] * len(plan.slots)
        for i, (slot, arg) in enumerate(zip(plan.arg_slots, args)):
            bufs[slot] = self._argument(i, arg, probe)
        for slot, buffer in self._constants(probe).items():
            bufs[slot] = buffer
        for step in self.steps:
            ins = [bufs[s] for s in step.inputs]
            if step.kind in ("host", "library"):
                outs = self._host_fallback(step, ins, probe)
            elif step.kind == "control":
                outs = self._control(step, ins, probe)
            else:  # (an output planned into an input's buffer is written there, in place)
                outs = [
                    bufs[s] if s in step.inputs else
                    d.empty(plan.slots[s].dims, plan.slots[s].dtype.numpy) for s in step.outputs
                ]
                self._launch(step, ins, outs, probe)
            if probe is not None:
                for out in outs:
                    probe.allocation(out.nbytes, f"%{step.inst.name}")
            for slot, out in zip(step.outputs, outs):
                bufs[slot] = out
        results = self._results(bufs)
        if probe is not None:
            for slot in plan.temp_slots:
                nbytes = bufs[slot].nbytes
                # back to the pool: stream-ordered, so safe before the kernels end
                bufs[slot] = None
                probe.allocation(-nbytes, "temporary freed")
        return results

    def _results(self, bufs) -> tuple:
        d = self.device
        return tuple(DeviceArray(d.copy(bufs[slot]) if copy else bufs[slot], d, origin)
                     for slot, copy, origin in zip(self.plan.out_slots, self._copy_out,
                                                   self._origins))

    def _argument(self, i: int, arg, probe):
        d = self.device
        if isinstance(arg, DeviceArray):
            if arg._device is not d:
                raise ValueError(f"argument '{self.arg_names[i]}' lives on {arg.device}; this "
                                 f"program runs on {d.label}: copy it with np.asarray first")
            return arg._buffer
        if probe is None:
            return d.upload(arg)
        origin = fetched_from(arg)
        avoidable = (
            (
                f"'{self.arg_names[i]}' is the unchanged host copy of {origin}: pass the device "
                "array itself and nothing is copied"
            )
            if origin
            else ""
        )
        return probe.around(lambda: d.upload(arg), "transfer", "host_to_device", arg.nbytes,
                            self.arg_names[i], avoidable)

    def _constants(self, probe) -> dict:
        if self._device_constants is None:
            d = self.device
            uploaded = {}
            for slot, value in self.plan.constants.items():
                what = f"constant of {self.function_name} (once per compiled program)"
                uploaded[slot] = (
                    d.upload(value)
                    if probe is None
                    else probe.around(
                        lambda value=value: d.upload(value),
                        "transfer",
                        "host_to_device",
                        value.nbytes,
                        what,
                        "",
                    )
                )
            self._device_constants = uploaded
        return self._device_constants

    def _launch(self, step: GpuStep, ins, outs, probe) -> None:
        d = self.device
        if step.kind == "kernel":
            if step.count == 0:  # an empty output: nothing to launch
                return

            def launch():
                d.launch(step.function, step.grid, step.block, [*ins, *outs], step.count)
        elif step.gemm is not None:
            def launch():
                d.gemm(step.gemm, ins[0], ins[1], outs[0])
        else:
            def launch():
                d.matmul(step.run, ins, outs[0])
        if probe is None:
            launch()
        else:
            probe.around(launch, "kernel", step)

    def _control(self, step: GpuStep, ins, probe) -> list:
        """A loop or branch: its programs run unprofiled; the profile gets the whole loop as
        one event (with its trip count), timed on the host around a device synchronisation."""
        if probe is None:
            return step.run(ins)
        self.device.synchronize()
        start = probe.clock.now()
        outs = step.run(ins)
        self.device.synchronize()
        probe.on_kernel(
            step.inst,
            start,
            probe.clock.now() - start,
            step.launch_text,
            device=self.device.label,
            stream=0,
        )
        return outs

    def _host_fallback(self, step: GpuStep, ins, probe) -> list:
        """Inputs to the host, the interpreter, results back: correct, and every copy shown."""
        d = self.device
        what = f"{step.launch_text} %{step.inst.name}"
        if probe is None:
            return [d.upload(np.asarray(v)) for v in step.run([d.download(b) for b in ins])]
        host_ins = [
            probe.around(
                lambda b=b: d.download(b), "transfer", "device_to_host", b.nbytes, what, ""
            )
            for b in ins
        ]
        start = probe.clock.now()
        results = [np.asarray(v) for v in step.run(host_ins)]
        probe.on_kernel(
            step.inst, start, probe.clock.now() - start, step.launch_text, device="cpu:0", stream=0
        )
        return [
            probe.around(lambda v=v: d.upload(v), "transfer", "host_to_device", v.nbytes, what, "")
            for v in results
        ]
