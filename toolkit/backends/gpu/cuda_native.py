"""The CUDA driver's graph calls and cuBLAS's GEMMs, called directly (ctypes) on the handles
CuPy made: CuPy refuses cuBLAS during stream capture and does not expose graph nodes, and a
whole program replayed as one CUDA graph needs both. Loaded only on a machine with a GPU.

A graph is built node by node: toolkit's kernels as kernel nodes (their parameters known, so
that a later call can point them at new buffers with ``cuGraphExecKernelNodeSetParams``), each
GEMM as a child graph captured from one cuBLAS call on a private stream (replaced, when its
buffers change, with ``cuGraphExecChildGraphNodeSetParams``). Nodes run in program order."""
from __future__ import annotations

import ctypes
import functools

import numpy as np

from .gemm import GemmSpec

_void_p = ctypes.c_void_p


class CudaCallError(RuntimeError):
    pass


def _check(result: int, what: str) -> None:
    if result != 0:
        raise CudaCallError(f"{what} failed with CUDA error {result}")


class _KernelNodeParams(ctypes.Structure):
    # CUDA_KERNEL_NODE_PARAMS_v2 (CUDA 12+): the v1 fields, then a CUkernel and a CUcontext
    _fields_ = [("func", _void_p), ("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint),
                ("gridDimZ", ctypes.c_uint), ("blockDimX", ctypes.c_uint),
                ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("kernelParams", _void_p),
                ("extra", _void_p), ("kern", _void_p), ("ctx", _void_p)]


@functools.cache
def driver() -> ctypes.CDLL:
    lib = ctypes.CDLL("libcuda.so.1")
    for name in ("cuGraphAddKernelNode_v2", "cuGraphExecKernelNodeSetParams_v2"):
        getattr(lib, name)  # the v2 parameter layout: CUDA 12 drivers and newer
    return lib


@functools.cache
def cublas_library() -> ctypes.CDLL:
    """libcublas as CuPy loaded it (the same library, found by its soname), else by path."""
    import cupy_backends.cuda.libs.cublas  # noqa: F401 - loads libcublas into the process

    errors = []
    for name in ("libcublas.so.13", "libcublas.so.12", "libcublas.so"):
        try:
            return ctypes.CDLL(name)
        except OSError as e:
            errors.append(str(e))
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib

        return ctypes.CDLL(load_nvidia_dynamic_lib("cublas").abs_path)
    except Exception as e:  # noqa: BLE001 - report every way that was tried
        errors.append(str(e))
    raise OSError("libcublas not found: " + "; ".join(errors))


class KernelParams:
    """The argument block of one kernel launch: its buffer pointers and work count, laid out
    as the driver reads them (an array of pointers to each value). Kept alive while in use."""

    def __init__(self, pointers: list[int], count: int):
        self.values = [_void_p(p) for p in pointers] + [ctypes.c_int64(count)]
        self.array = (_void_p * len(self.values))(
            *[ctypes.cast(ctypes.pointer(v), _void_p) for v in self.values])

    def node_params(self, function: int, grid, block) -> _KernelNodeParams:
        p = _KernelNodeParams()
        p.func = function
        p.gridDimX, p.gridDimY, p.gridDimZ = grid
        p.blockDimX, p.blockDimY, p.blockDimZ = block
        p.sharedMemBytes = 0
        p.kernelParams = ctypes.cast(self.array, _void_p)
        return p


class Cublas:
    """One cuBLAS handle on one stream, with its own workspace (so that a captured call
    allocates nothing), in the default math mode: full float32 precision, no TF32."""

    WORKSPACE_BYTES = 32 << 20

    def __init__(self, stream_ptr: int, workspace_ptr: int):
        self.lib = lib = cublas_library()
        self.handle = _void_p()
        _check(lib.cublasCreate_v2(ctypes.byref(self.handle)), "cublasCreate")
        _check(lib.cublasSetStream_v2(self.handle, _void_p(stream_ptr)), "cublasSetStream")
        _check(lib.cublasSetWorkspace_v2(self.handle, _void_p(workspace_ptr),
                                         ctypes.c_size_t(self.WORKSPACE_BYTES)),
               "cublasSetWorkspace")
        self._one = {np.dtype(np.float32): ctypes.c_float(1.0),
                     np.dtype(np.float64): ctypes.c_double(1.0)}
        self._zero = {np.dtype(np.float32): ctypes.c_float(0.0),
                      np.dtype(np.float64): ctypes.c_double(0.0)}

    def gemm(self, spec: GemmSpec, lhs: int, rhs: int, out: int) -> None:
        """out = lhs @ rhs (row-major, per ``spec``) enqueued on the handle's stream."""
        g = spec.cublas_arguments()
        c_int = ctypes.c_int
        alpha, beta = ctypes.byref(self._one[spec.dtype]), ctypes.byref(self._zero[spec.dtype])
        f64 = spec.dtype == np.float64
        head = (self.handle, c_int(g["transa"]), c_int(g["transb"]), c_int(g["m"]), c_int(g["n"]),
                c_int(g["k"]), alpha, _void_p(rhs), c_int(g["lda"]))
        if spec.batch == 1:
            call = self.lib.cublasDgemm_v2 if f64 else self.lib.cublasSgemm_v2
            status = call(*head, _void_p(lhs), c_int(g["ldb"]), beta, _void_p(out),
                          c_int(g["ldc"]))
        else:
            call = self.lib.cublasDgemmStridedBatched if f64 else self.lib.cublasSgemmStridedBatched
            status = call(*head, ctypes.c_longlong(g["stride_a"]), _void_p(lhs), c_int(g["ldb"]),
                          ctypes.c_longlong(g["stride_b"]), beta, _void_p(out), c_int(g["ldc"]),
                          ctypes.c_longlong(g["stride_c"]), c_int(spec.batch))
        _check(status, "cuBLAS gemm")


class GraphBuilder:
    """A CUDA graph under construction: nodes appended in program order, each depending on
    the one before (the stream's order)."""

    def __init__(self, capture_stream: int, capture_cublas: Cublas):
        self.lib = driver()
        self.graph = _void_p()
        _check(self.lib.cuGraphCreate(ctypes.byref(self.graph), ctypes.c_uint(0)),
               "cuGraphCreate")
        self.last: _void_p | None = None
        self.capture_stream = capture_stream
        self.cublas = capture_cublas
        self.keep: list = []  # parameter blocks the driver reads until instantiation

    def _deps(self):
        return (ctypes.byref(self.last), ctypes.c_size_t(1)) if self.last is not None \
            else (None, ctypes.c_size_t(0))

    def kernel(self, function: int, grid, block, pointers: list[int], count: int):
        params = KernelParams(pointers, count)
        node = _void_p()
        _check(self.lib.cuGraphAddKernelNode_v2(
            ctypes.byref(node), self.graph, *self._deps(),
            ctypes.byref(params.node_params(function, grid, block))), "cuGraphAddKernelNode")
        self.keep.append(params)
        self.last = node
        return node

    def capture_gemm(self, spec: GemmSpec, lhs: int, rhs: int, out: int) -> _void_p:
        """One cuBLAS call recorded into a graph of its own."""
        lib, stream = self.lib, _void_p(self.capture_stream)
        _check(lib.cuStreamBeginCapture_v2(stream, ctypes.c_int(2)),  # RELAXED
               "cuStreamBeginCapture")
        try:
            self.cublas.gemm(spec, lhs, rhs, out)
        finally:
            graph = _void_p()
            _check(lib.cuStreamEndCapture(stream, ctypes.byref(graph)), "cuStreamEndCapture")
        return graph

    def gemm(self, spec: GemmSpec, lhs: int, rhs: int, out: int):
        child = self.capture_gemm(spec, lhs, rhs, out)
        node = _void_p()
        try:
            _check(self.lib.cuGraphAddChildGraphNode(ctypes.byref(node), self.graph,
                                                     *self._deps(), child),
                   "cuGraphAddChildGraphNode")
        finally:
            self.lib.cuGraphDestroy(child)  # the node holds its own copy
        self.last = node
        return node

    def instantiate(self) -> GraphExec:
        exe = _void_p()
        try:
            _check(self.lib.cuGraphInstantiateWithFlags(ctypes.byref(exe), self.graph,
                                                        ctypes.c_ulonglong(0)),
                   "cuGraphInstantiate")
        finally:
            self.keep.clear()
        # the graph lives as long as its executable: a node is re-pointed through its handle
        # in the graph it was instantiated from
        return GraphExec(exe, self)


class GraphExec:
    """An instantiated graph: replayed with one launch; its nodes re-pointed between calls."""

    def __init__(self, handle: _void_p, builder: GraphBuilder):
        self.handle = handle
        self.lib = builder.lib
        self.builder = builder

    def set_kernel(self, node, function: int, grid, block, pointers: list[int], count: int):
        params = KernelParams(pointers, count)
        _check(self.lib.cuGraphExecKernelNodeSetParams_v2(
            self.handle, node, ctypes.byref(params.node_params(function, grid, block))),
            "cuGraphExecKernelNodeSetParams")

    def set_gemm(self, node, spec: GemmSpec, lhs: int, rhs: int, out: int):
        child = self.builder.capture_gemm(spec, lhs, rhs, out)
        try:
            _check(self.lib.cuGraphExecChildGraphNodeSetParams(self.handle, node, child),
                   "cuGraphExecChildGraphNodeSetParams")
        finally:
            self.lib.cuGraphDestroy(child)

    def launch(self, stream: int) -> None:
        _check(self.lib.cuGraphLaunch(self.handle, _void_p(stream)), "cuGraphLaunch")

    def __del__(self):
        try:
            self.lib.cuGraphExecDestroy(self.handle)
            self.lib.cuGraphDestroy(self.builder.graph)
        except Exception:  # noqa: BLE001 - at interpreter exit the library may be gone
            pass
