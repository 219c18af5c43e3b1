"""Whole-program launch: a compiled GPU program recorded once as a CUDA graph and replayed
with one launch per call, as XLA's command buffers and tinygrad's CUDA graphs do.

- **What is recorded.** Every kernel as a kernel node and every dot as a cuBLAS GEMM node, in
  program order. A program with host steps (fallbacks, library calls on the host, loops and
  branches driven from the host) is not recorded: it launches kernel by kernel as before.
- **Buffers.** Temporaries come from a pool owned by the recording, allocated once and shared
  between values whose lifetimes do not overlap (the buffer plan's order: a value's buffer is
  free after its last reader). Results are fresh buffers every call, since the caller keeps
  them. Arguments are whatever the caller passes.
- **Between calls** only the nodes that read an argument or write a result whose address
  changed are re-pointed (``cuGraphExecKernelNodeSetParams``, or a re-recorded GEMM): a loop
  that passes the same weights every call re-points only what the new input and the new
  results touch. Two recordings are kept, bound to different addresses: a loop body whose
  state alternates between two sets of buffers replays with no re-pointing at all.
- **Checked twice.** The replay after recording, and the first after re-pointing, are compared
  bit for bit with a launch-by-launch run of the same call, every buffer the graph writes first
  filled with a byte pattern. A mismatch, or any failure of the driver's graph calls, turns
  the graph off for this program with a warning: a fault in recording never gives wrong
  numbers.
- **Profiles** time an ungraphed run (CUDA events around each kernel), and their kernel
  events say so."""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field

import numpy as np

from .arrays import DeviceArray

MIN_STEPS = 2  # one launch gains nothing from a graph


def graphs_disabled_by_user() -> bool:
    return os.environ.get("TOOLKIT_GPU_GRAPHS", "1") == "0"


def why_not_recorded(steps, device) -> str | None:
    """None when the program can be one graph, else why not (shown by ``describe``)."""
    if graphs_disabled_by_user():
        return "TOOLKIT_GPU_GRAPHS=0"
    active = [s for s in steps if not (s.kind == "kernel" and s.count == 0)]
    host = [s for s in active if s.kind not in ("kernel", "dot")]
    if host:
        return f"%{host[0].inst.name} runs on the host ({host[0].kind})"
    general = [s for s in active if s.kind == "dot" and s.gemm is None]
    if general:
        return f"%{general[0].inst.name} is not one direct cuBLAS GEMM"
    if len(active) < MIN_STEPS:
        return "a single launch"
    probe = getattr(device, "graph_unavailable", None)
    if probe is None:
        return "the device records no graphs"
    return probe()


@dataclass
class _Node:
    step: object
    handle: object
    slots: list[int]  # the plan slots it reads and writes, in launch-argument order
    bound: list[int] = field(default_factory=list)  # the addresses it was last pointed at


@dataclass
class _Recording:
    """One instantiated graph and the addresses its nodes point at."""
    graph: object
    nodes: list[_Node]
    key: tuple  # the addresses of the variable slots it is bound to


class GraphReplay:
    # Graphs kept per program. Two, so that a loop body whose state alternates between two sets
    # of buffers (a memory pool hands back the buffers of the trip before last) replays with no
    # re-pointing at all, one recording per set.
    RECORDINGS = 2

    def __init__(self, executable):
        self.exe = executable
        self.device = executable.device
        self.plan = executable.plan
        self.recordings: list[_Recording] = []  # most recently used first
        self.pool: dict[int, object] = {}  # temporary slot -> its pooled buffer
        self.variable: dict[int, list[int]] = {}  # argument / result slot -> node positions
        self.replays = 0
        self.repoints = 0
        self.repoint_checked = False
        self.disabled: str | None = None

    # ---- buffers ----------------------------------------------------------------------
    def _pool_buffers(self) -> dict[int, object]:
        """One buffer per temporary, reused once the value before it is dead."""
        plan, steps = self.plan, self.exe.steps
        keep = set(plan.out_slots) | set(plan.arg_slots) | set(plan.constants)
        last_read: dict[int, int] = {}
        for i, step in enumerate(steps):
            for s in step.inputs:
                last_read[s] = i
        free: dict[tuple, list] = {}
        pool: dict[int, object] = {}
        for i, step in enumerate(steps):
            for s in step.outputs:
                if s in keep or s in pool:  # (an update in place: its input's buffer)
                    continue
                slot = plan.slots[s]
                key = (tuple(slot.dims), slot.dtype.numpy.str)
                stack = free.get(key)
                pool[s] = stack.pop() if stack else self.device.empty(slot.dims,
                                                                      slot.dtype.numpy)
            for s in set(step.inputs):  # after the outputs: a kernel never writes what it reads
                if last_read.get(s) == i and s in pool:
                    slot = plan.slots[s]
                    free.setdefault((tuple(slot.dims), slot.dtype.numpy.str), []).append(pool[s])
        return pool

    def _buffers(self, arguments: list, results: list | None = None) -> list:
        """Every slot's buffer for this call: the arguments' device buffers, constants, pooled
        temporaries, and the results: ``results`` where given (a loop driver's own buffers),
        else fresh ones, since the caller keeps them."""
        exe, plan, d = self.exe, self.plan, self.device
        bufs: list = [None] * len(plan.slots)
        for slot, buffer in zip(plan.arg_slots, arguments):
            bufs[slot] = buffer
        for slot, buffer in exe._constants(None).items():
            bufs[slot] = buffer
        for slot, buffer in self.pool.items():
            bufs[slot] = buffer
        for slot, buffer in zip(plan.out_slots, results or ()):
            if bufs[slot] is None:
                bufs[slot] = buffer
        for step in exe.steps:
            for s in step.outputs:
                if bufs[s] is None:
                    bufs[s] = d.empty(plan.slots[s].dims, plan.slots[s].dtype.numpy)
        return bufs

    # ---- recording and replay -----------------------------------------------------------
    def _record(self, bufs) -> _Recording:
        d = self.device
        builder = d.new_graph()
        nodes = []
        for step in self.exe.steps:
            if step.kind == "kernel" and step.count == 0:
                continue
            slots = [*step.inputs, *step.outputs]
            buffers = [bufs[s] for s in slots]
            if step.kind == "kernel":
                handle = builder.kernel(step.function, step.grid, step.block, buffers, step.count)
            else:
                handle = builder.gemm(step.gemm, *buffers)
            nodes.append(_Node(step, handle, slots, [d.address(b) for b in buffers]))
        if not self.variable:
            fixed = set(self.pool) | set(self.plan.constants)
            for k, node in enumerate(nodes):
                for s in set(node.slots) - fixed:
                    self.variable.setdefault(s, []).append(k)
        return _Recording(builder.instantiate(), nodes, self._key(bufs))

    def _key(self, bufs) -> tuple:
        return tuple(self.device.address(bufs[s]) for s in self.variable)

    def _repoint(self, recording: _Recording, bufs) -> None:
        """Point every node whose argument or result moved at its new buffer."""
        d, graph, nodes = self.device, recording.graph, recording.nodes
        touched: dict[int, _Node] = {}
        for s, positions in self.variable.items():
            address = d.address(bufs[s])
            for k in positions:
                node = nodes[k]
                if address != node.bound[node.slots.index(s)]:
                    touched[k] = node
        for node in touched.values():
            buffers = [bufs[s] for s in node.slots]
            step = node.step
            if step.kind == "kernel":
                graph.set_kernel(node.handle, step.function, step.grid, step.block, buffers,
                                 step.count)
            else:
                graph.set_gemm(node.handle, step.gemm, *buffers)
            node.bound = [d.address(b) for b in buffers]
        recording.key = self._key(bufs)
        self.repoints += len(touched)

    def run(self, args):
        """The results of one call, or None when this program does not replay (the caller then
        launches kernel by kernel)."""
        if self.disabled is not None:
            return None
        try:
            if not self.recordings:
                self.pool = self._pool_buffers()
            bufs = self._buffers([self.exe._argument(i, arg, None) for i, arg in enumerate(args)])
            results, _ = self._replay(args, bufs)
        except Exception as e:  # noqa: BLE001 - any failure: kernel-by-kernel launches, said once
            self._disable(e)
            return None
        return results

    def run_bound(self, state: list, results: list):
        """One call whose arguments and results are the given device buffers (a loop driver's
        own state buffers): ``(result buffers, recording)``, the recording now bound to exactly
        these buffers, which the driver may launch again while its key stays the same; None
        when this program does not replay."""
        if self.disabled is not None:
            return None
        try:
            if not self.recordings:
                self.pool = self._pool_buffers()
            bufs = self._buffers(state, results)
            d = self.device
            args = [DeviceArray(b, d, "loop state") for b in state]
            out, recording = self._replay(args, bufs)
        except Exception as e:  # noqa: BLE001 - any failure: kernel-by-kernel launches, said once
            self._disable(e)
            return None
        return [r._buffer for r in out], recording

    def _replay(self, args, bufs) -> tuple[tuple, _Recording | None]:
        """(results, the recording replayed), recording, re-pointing and checking as needed; the
        recording is None when a check failed and the results came launch by launch."""
        key = self._key(bufs) if self.recordings else None
        hit = next((r for r in self.recordings if r.key == key), None)
        if hit is None and len(self.recordings) < self.RECORDINGS:
            recording = self._record(bufs)
            self.recordings.insert(0, recording)
            return self._checked(args, bufs, recording)
        if hit is None:  # the least recently used recording, re-pointed
            recording = self.recordings.pop()
            self.recordings.insert(0, recording)
            self._repoint(recording, bufs)
            if not self.repoint_checked:
                self.repoint_checked = True
                return self._checked(args, bufs, recording)
        else:
            self.recordings.remove(hit)
            self.recordings.insert(0, hit)
            recording = hit
        recording.graph.launch()
        self.replays += 1
        return self.exe._results(bufs), recording

    def _checked(self, args, bufs, recording: _Recording):
        """Replay once, checked bit for bit against a launch-by-launch run of the same call:
        after each recording, and after the first re-pointing."""
        # every buffer the graph writes starts as a pattern no result is: a node the replay
        # left out cannot pass the check by finding an earlier run's values in reused memory
        written = {s for step in self.exe.steps for s in step.outputs}
        for s in written - set(self.plan.arg_slots) - set(self.plan.constants):
            self.device.memset(bufs[s], 0xA5)
        # a loop body's donated state is written in place: the launch-by-launch run gets
        # copies of it as it was, so neither run sees the other's writes
        d = self.device
        before = [DeviceArray(d.copy(bufs[slot]), d, "check") if slot in written else arg
                  for slot, arg in zip(self.plan.arg_slots, args)]
        recording.graph.launch()
        got = self.exe._results(bufs)
        expected = self.exe._run(before, None)
        for a, b in zip(got, expected):
            x, y = d.download(a._buffer), d.download(b._buffer)
            if not np.array_equal(x, y, equal_nan=x.dtype.kind in "fc"):
                self._disable(RuntimeError("the replayed graph's results differ from launching "
                                           "its kernels one by one"))
                return expected, None
        self.replays += 1
        return got, recording

    def _disable(self, error: Exception) -> None:
        self.disabled = f"{type(error).__name__}: {error}"
        self.recordings, self.pool, self.variable = [], {}, {}
        warnings.warn(f"{self.exe.function_name}: the GPU program runs kernel by kernel, not as "
                      f"one CUDA graph: {self.disabled}", RuntimeWarning, stacklevel=4)
