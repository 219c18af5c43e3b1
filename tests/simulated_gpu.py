"""A stand-in CUDA device for testing the GPU runtime on machines without one.

It implements the device interface of ``toolkit.backends.gpu.device`` with NumPy memory and
the reference interpreter: a "launch" evaluates the kernel's own fusion computation into the
output buffers. What it checks is the executor's side of the contract: only device buffers
reach kernels (host arrays never do), every launch gets the pointers and work count its PTX
entry takes, and every copy is counted by direction and bytes. It cannot check the PTX itself:
ptxas does that (test_gpu_codegen.py), and a real device runs it (the ``gpu``-marked tests)."""
from __future__ import annotations

import itertools
import weakref

import numpy as np

from toolkit.backends.reference.interpreter import evaluate_computation, flatten_value


class DeviceBuffer(np.ndarray):
    """Memory of the simulated device: a distinct type, so host arrays are told apart."""

    @property
    def __cuda_array_interface__(self):  # what CuPy exports, without a device behind it
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ctypes.data, False),
                "version": 2, "strides": None}


class SimulatedKernel:
    """A loaded entry: the kernels that launch it (kernels alike in code share one entry,
    each launched with its own buffers and count, as on a device)."""

    def __init__(self, kernel):
        self.kernels = [kernel]

    @property
    def kernel(self):
        return self.kernels[0]

    def launched(self, buffers, count: int):
        """The kernel this launch runs: the one whose buffers and count it was given."""
        for kernel in self.kernels:
            shapes = [*kernel.spec.computation.parameters, *kernel.spec.outputs]
            if count == kernel.work_items and len(buffers) == len(shapes) and all(
                    b.shape == i.shape.dims and b.dtype == i.shape.dtype.numpy
                    for b, i in zip(buffers, shapes)):
                return kernel
        return self.kernel  # (launch's checks then say what does not match)


class SimulatedDevice:
    name = "simulated CUDA device"
    arch = "sm_90"
    sm_count = 4
    blocks_per_sm = 8
    copy_stream_id = 1
    stream_handle = 1  # a nonzero handle, as a created CUDA stream has
    xp = np
    _ordinals = itertools.count()

    def __init__(self):
        self.label = f"sim:{next(self._ordinals)}"
        self.uploads: list[int] = []  # bytes of each host-to-device copy
        self.downloads: list[int] = []
        self.launches: list[str] = []  # kernel symbols and "dot", in launch order
        self.loaded_programs = 0
        self.graphs: list = []  # every instantiated graph
        self.graph_launches = 0
        self._live = 0
        self._free_blocks: dict[int, list] = {}
        self._by_address: dict[int, weakref.ref] = {}
        self._time = 0.0

    # ---- memory -------------------------------------------------------------------------
    def _new(self, shape, dtype) -> DeviceBuffer:
        """Memory from a pool, as CuPy's: a freed block goes back to a free list by size and
        the next request of that size gets it again (last freed, first reused), so addresses
        repeat as they do on a device."""
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        stack = self._free_blocks.get(nbytes) if nbytes else None
        block = stack.pop() if stack else np.empty(max(nbytes, 1), np.uint8)
        buffer = block[:nbytes].view(dtype).reshape(shape).view(DeviceBuffer)
        self._live += nbytes
        address = self.address(buffer)
        self._by_address[address] = weakref.ref(buffer)
        weakref.finalize(buffer, self._free, block, nbytes, address)
        return buffer

    def _free(self, block, nbytes: int, address: int) -> None:
        self._live -= nbytes
        self._by_address.pop(address, None)
        if nbytes:
            self._free_blocks.setdefault(nbytes, []).append(block)

    def resolve(self, address: int, shape, dtype) -> DeviceBuffer:
        """The live buffer at ``address``: what a recorded graph node reads or writes when it is
        replayed. A node left pointing at freed memory is the executor's bug, caught here."""
        ref = self._by_address.get(address)
        buffer = ref() if ref is not None else None
        assert buffer is not None, f"a graph node points at freed device memory ({address:#x})"
        assert buffer.shape == tuple(shape) and buffer.dtype == dtype, (
            f"a graph node points at {buffer.dtype}{buffer.shape}, recorded as {dtype}{shape}"
        )
        return buffer

    def empty(self, shape, dtype):
        return self._new(shape, dtype)

    def upload(self, host):
        assert type(host) is np.ndarray, f"upload of {type(host).__name__}, not a host array"
        buffer = self._new(host.shape, host.dtype)
        buffer[...] = host
        self.uploads.append(host.nbytes)
        return buffer

    def download(self, buffer) -> np.ndarray:
        assert isinstance(buffer, DeviceBuffer), "download of memory that is not the device's"
        self.downloads.append(buffer.nbytes)
        return np.array(buffer.view(np.ndarray))

    def copy(self, buffer):
        out = self._new(buffer.shape, buffer.dtype)
        out[...] = buffer
        return out

    def copy_into(self, destination, source) -> None:
        assert isinstance(destination, DeviceBuffer) and isinstance(source, DeviceBuffer)
        assert destination.nbytes == source.nbytes
        destination[...] = source

    def memset(self, buffer, byte: int) -> None:
        buffer.reshape(-1).view(np.uint8)[...] = byte

    def used_bytes(self) -> int:
        return self._live

    # ---- kernels ------------------------------------------------------------------------
    def load(self, program) -> dict:
        self.loaded_programs += 1
        functions: dict[str, SimulatedKernel] = {}
        for k in program.kernels:
            if k.symbol in functions:
                functions[k.symbol].kernels.append(k)
            else:
                functions[k.symbol] = SimulatedKernel(k)
        return functions

    def launch(self, function: SimulatedKernel, grid, block, buffers, count: int) -> None:
        kernel = function.launched(buffers, count)
        comp = kernel.spec.computation
        params, outputs = comp.parameters, kernel.spec.outputs
        assert len(buffers) == len(params) + len(outputs), (
            f"{kernel.symbol}: wrong number of pointers"
        )
        assert all(isinstance(b, DeviceBuffer) for b in buffers), (
            f"{kernel.symbol}: a host array reached a kernel"
        )
        for buffer, inst in zip(buffers, [*params, *outputs]):
            assert buffer.shape == inst.shape.dims and buffer.dtype == inst.shape.dtype.numpy, (
                f"{kernel.symbol}: buffer {buffer.dtype}{buffer.shape} for %{inst.name} "
                f"{inst.shape}"
            )
        assert count == kernel.work_items and grid[0] >= 1 and block[0] >= 32
        results = flatten_value(
            evaluate_computation(comp, [b.view(np.ndarray) for b in buffers[: len(params)]])
        )
        for out, value in zip(buffers[len(params):], results):
            out[...] = value
        self.launches.append(kernel.symbol)
        self._time += 1e-6

    def matmul(self, run, ins, out) -> None:
        assert all(isinstance(b, DeviceBuffer) for b in (*ins, out)), "a host array reached cuBLAS"
        run([b.view(np.ndarray) for b in ins], out.view(np.ndarray))
        self.launches.append("dot")
        self._time += 1e-6

    def gemm(self, spec, lhs, rhs, out) -> None:
        assert all(isinstance(b, DeviceBuffer) for b in (lhs, rhs, out)), (
            "a host array reached cuBLAS"
        )
        assert lhs.size == spec.batch * spec.m * spec.k and rhs.size == spec.batch * spec.k * spec.n
        assert out.size == spec.batch * spec.m * spec.n and lhs.dtype == rhs.dtype == spec.dtype
        spec.host(lhs.view(np.ndarray), rhs.view(np.ndarray), out.view(np.ndarray))
        self.launches.append("dot")
        self._time += 1e-6

    # ---- CUDA graphs: recorded launches replayed with the buffers they were last given ------
    def graph_unavailable(self):
        return None

    def new_graph(self):
        return SimulatedGraph(self)

    @staticmethod
    def address(buffer) -> int:
        return buffer.__array_interface__["data"][0] if buffer.size else id(buffer)

    # ---- time ---------------------------------------------------------------------------
    def timer(self) -> float:
        self._time += 1e-7
        return self._time

    def elapsed(self, start: float, end: float) -> float:
        return end - start

    def synchronize(self) -> None:
        pass


def _refs(buffers) -> list[tuple]:
    return [(SimulatedDevice.address(b), b.shape, b.dtype) for b in buffers]


class SimulatedGraph:
    """A recording of launches: each node is a kernel or GEMM with the addresses it was given
    (as a CUDA graph holds raw pointers, not the buffers: they may be freed between calls).
    Instantiated, it replays them in order; set_kernel/set_gemm re-point one node, as
    cuGraphExecKernelNodeSetParams does, and only a node the executor re-pointed sees new
    buffers (a node left stale replays into its old buffers, which the tests would catch)."""

    def __init__(self, device: SimulatedDevice):
        self.device = device
        self.nodes: list[list] = []
        self.launches = 0
        self.repoints = 0
        self.repointed: list[int] = []  # the nodes re-pointed, in order

    def kernel(self, function, grid, block, buffers, count):
        self.nodes.append(["kernel", function, grid, block, _refs(buffers), count])
        return len(self.nodes) - 1

    def gemm(self, spec, lhs, rhs, out):
        self.nodes.append(["gemm", spec, _refs((lhs, rhs, out))])
        return len(self.nodes) - 1

    def instantiate(self):
        self.device.graphs.append(self)
        return self

    def set_kernel(self, node, function, grid, block, buffers, count) -> None:
        assert self.nodes[node][0] == "kernel" and self.nodes[node][1] is function
        self.nodes[node] = ["kernel", function, grid, block, _refs(buffers), count]
        self.repoints += 1
        self.repointed.append(node)

    def set_gemm(self, node, spec, lhs, rhs, out) -> None:
        assert self.nodes[node][0] == "gemm" and self.nodes[node][1] == spec
        self.nodes[node] = ["gemm", spec, _refs((lhs, rhs, out))]
        self.repoints += 1
        self.repointed.append(node)

    def launch(self) -> None:
        self.launches += 1
        self.device.graph_launches += 1
        d = self.device
        for node in self.nodes:
            if node[0] == "kernel":
                _, function, grid, block, refs, count = node
                d.launch(function, grid, block, [d.resolve(*r) for r in refs], count)
            else:
                _, spec, refs = node
                d.gemm(spec, *[d.resolve(*r) for r in refs])
