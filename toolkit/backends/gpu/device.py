"""The CUDA device as the GPU executor sees it, through CuPy: memory from CuPy's pool, one
stream, PTX modules loaded by the driver, cuBLAS through ``cupy.matmul``, CUDA events for
device-side timings. The only module of toolkit that imports CuPy.

The executor needs just these members, so a device is anything that has them::

    label, name, arch, sm_count, blocks_per_sm, copy_stream_id, stream_handle, xp
    empty(shape, dtype) / upload(host) / download(buffer) / copy(buffer) / used_bytes()
    memset(buffer, byte)
    load(program) -> {symbol: function};  launch(function, grid, block, buffers, count)
    gemm(spec, lhs, rhs, out): one direct cuBLAS call (``gemm.GemmSpec``)
    graph_unavailable() -> None or why not;  new_graph() -> builder with kernel(...), gemm(...),
        instantiate() -> replayable graph with set_kernel(...), set_gemm(...), launch()
    address(buffer) -> int
    timer() -> event;  elapsed(start_event, end_event) -> seconds;  synchronize()
"""
from __future__ import annotations

import functools

import numpy as np

from .codegen import ARCHES, PtxProgram


def cupy_or_reason():
    """(cupy, None) when a CUDA device can run kernels here, else (None, why not)."""
    try:
        import cupy
    except ImportError:
        return None, (
            "CuPy is not installed: pip install 'toolkit[gpu]' (CUDA 12 drivers) or "
            "'toolkit[gpu-cuda13]'; PTX can still be generated with Compiled.as_text('ptx')"
        )
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # noqa: BLE001 - CuPy raises its own CUDA errors: report them as text
        return None, f"CuPy cannot reach a CUDA device ({type(e).__name__}: {e})"
    if count == 0:
        return None, "CuPy found no CUDA device"
    major = cupy.cuda.Device(0).compute_capability[:-1]
    if int(major) < 8:
        return None, (f"the GPU has compute capability {cupy.cuda.Device(0).compute_capability}; "
                      f"toolkit emits PTX for {', '.join(ARCHES)} (Ampere and newer)")
    return cupy, None


def arch_for(compute_capability: str) -> str:
    """The newest PTX target toolkit emits that the device runs: '90' -> sm_90, '86' -> sm_80."""
    cc = int(compute_capability)
    usable = [a for a in ARCHES if int(a[3:]) <= cc]
    if not usable:
        raise ValueError(f"compute capability {compute_capability} is older than {min(ARCHES)}")
    return max(usable, key=lambda a: int(a[3:]))


class CudaDevice:
    """Device ``ordinal`` through CuPy. Kernels and copies run in order on one stream."""

    def __init__(self, ordinal: int = 0):
        import cupy

        self.cupy = self.xp = cupy
        self.ordinal = ordinal
        self._device = cupy.cuda.Device(ordinal)
        props = cupy.cuda.runtime.getDeviceProperties(ordinal)
        name = props["name"]
        self.name = name.decode() if isinstance(name, bytes) else str(name)
        self.label = f"cuda:{ordinal}"
        self.sm_count = int(props["multiProcessorCount"])
        # resident 256-thread blocks per SM at full occupancy: 8 on A100 and H100, 6 on sm_86/89
        self.blocks_per_sm = max(1, int(props.get("maxThreadsPerMultiProcessor", 2048)) // 256)
        self.arch = arch_for(self._device.compute_capability)
        with self._device:
            self.stream = cupy.cuda.Stream(non_blocking=True)
        self.copy_stream_id = 1  # copies share the stream (ordering), shown on the copy track
        self._pool = cupy.get_default_memory_pool()
        self._native_state = None
        self._graph_reason: str | None = None

    # ---- memory -------------------------------------------------------------------------
    def empty(self, shape, dtype):
        with self._device, self.stream:
            return self.cupy.empty(shape, dtype)

    def upload(self, host: np.ndarray):
        with self._device, self.stream:
            buffer = self.cupy.empty(host.shape, host.dtype)
            buffer.set(np.ascontiguousarray(host) if host.ndim else host, stream=self.stream)
            return buffer

    def download(self, buffer) -> np.ndarray:
        with self._device:
            return buffer.get(stream=self.stream)

    def copy(self, buffer):
        with self._device, self.stream:
            return buffer.copy()

    def copy_into(self, destination, source) -> None:
        """``source``'s bytes into ``destination`` (same size), in stream order."""
        if source.nbytes:
            self.cupy.cuda.runtime.memcpyAsync(destination.data.ptr, source.data.ptr,
                                               source.nbytes, 3, self.stream.ptr)  # 3: D2D

    def memset(self, buffer, byte: int) -> None:
        if buffer.nbytes:
            self.cupy.cuda.runtime.memsetAsync(buffer.data.ptr, byte, buffer.nbytes,
                                               self.stream.ptr)

    def used_bytes(self) -> int:
        return int(self._pool.used_bytes())

    @property
    def stream_handle(self) -> int:
        """The CUDA stream everything runs on, as __cuda_array_interface__ reports it."""
        return int(self.stream.ptr)

    # ---- kernels ------------------------------------------------------------------------
    def load(self, program: PtxProgram) -> dict:
        """Load the PTX (the driver compiles it for this device) and look up every kernel."""
        with self._device:
            module = self.cupy.cuda.function.Module()
            module.load(program.ptx.encode())
            functions = {k.symbol: module.get_function(k.symbol) for k in program.kernels}
        functions["__module__"] = module  # keeps the module loaded as long as its functions
        return functions

    def launch(self, function, grid, block, buffers, count: int) -> None:
        with self._device:
            function(grid, block, (*buffers, np.int64(count)), stream=self.stream)

    def matmul(self, run, ins, out) -> None:
        with self._device, self.stream:
            run(ins, out)

    # ---- direct cuBLAS and CUDA graphs (cuda_native: ctypes on the driver and cuBLAS) ------
    def _native(self):
        """(main-stream cuBLAS, capture stream, capture-stream cuBLAS), made on first use."""
        if self._native_state is None:
            from .cuda_native import Cublas

            with self._device:
                workspace = [self.cupy.empty(Cublas.WORKSPACE_BYTES, np.uint8) for _ in range(2)]
                capture_stream = self.cupy.cuda.Stream(non_blocking=True)
            self._native_state = (Cublas(self.stream.ptr, workspace[0].data.ptr), capture_stream,
                                  Cublas(capture_stream.ptr, workspace[1].data.ptr), workspace)
        return self._native_state

    def gemm(self, spec, lhs, rhs, out) -> None:
        with self._device:
            self._native()[0].gemm(spec, lhs.data.ptr, rhs.data.ptr, out.data.ptr)

    def graph_unavailable(self) -> str | None:
        if self._graph_reason is None:
            try:
                from .cuda_native import cublas_library, driver

                driver()
                cublas_library()
                self._native()
                self._graph_reason = ""
            except Exception as e:  # noqa: BLE001 - any reason is reported, and kernels launch
                self._graph_reason = f"{type(e).__name__}: {e}"
        return self._graph_reason or None

    def new_graph(self) -> _CudaGraph:
        return _CudaGraph(self)

    @staticmethod
    def address(buffer) -> int:
        return int(buffer.data.ptr)

    # ---- time ---------------------------------------------------------------------------
    def timer(self):
        event = self.cupy.cuda.Event()
        event.record(self.stream)
        return event

    def elapsed(self, start_event, end_event) -> float:
        end_event.synchronize()
        return self.cupy.cuda.get_elapsed_time(start_event, end_event) / 1e3

    def synchronize(self) -> None:
        self.stream.synchronize()

    def __repr__(self) -> str:
        return f"<CudaDevice {self.label} {self.name} ({self.arch}, {self.sm_count} SMs)>"


class _CudaGraph:
    """A CUDA graph of device buffers and loaded kernels (cuda_native works on raw handles)."""

    def __init__(self, device: CudaDevice):
        from .cuda_native import GraphBuilder

        self.device = device
        _, capture_stream, capture_cublas, _ = device._native()
        self.builder = GraphBuilder(capture_stream.ptr, capture_cublas)

    def kernel(self, function, grid, block, buffers, count):
        return self.builder.kernel(function.ptr, grid, block, [b.data.ptr for b in buffers], count)

    def gemm(self, spec, lhs, rhs, out):
        with self.device._device:
            return self.builder.gemm(spec, lhs.data.ptr, rhs.data.ptr, out.data.ptr)

    def instantiate(self) -> _CudaGraphExec:
        with self.device._device:
            return _CudaGraphExec(self.device, self.builder.instantiate())


class _CudaGraphExec:
    def __init__(self, device: CudaDevice, exe):
        self.device, self.exe = device, exe

    def set_kernel(self, node, function, grid, block, buffers, count) -> None:
        self.exe.set_kernel(node, function.ptr, grid, block, [b.data.ptr for b in buffers], count)

    def set_gemm(self, node, spec, lhs, rhs, out) -> None:
        with self.device._device:
            self.exe.set_gemm(node, spec, lhs.data.ptr, rhs.data.ptr, out.data.ptr)

    def launch(self) -> None:
        self.exe.launch(self.device.stream.ptr)


@functools.cache
def default_device() -> CudaDevice:
    return CudaDevice(0)
