"""LLVM's O3 pipeline and code emission, in this process or in a worker process: object code
for the host CPU, and PTX for NVIDIA GPUs (the GPU backend's kernels, with NVIDIA's libdevice
linked in where they call it).

Why a worker: llvmlite (0.50 and earlier) allocates a ``PassInstrumentationCallbacks`` for every
pass builder (``LLVMPY_CreatePassBuilder``) and never frees it; each optimisation run then fills
it with its pass-name table and instrumentation callbacks, about 95 KB per compile that no
``close()`` returns. A process that compiles new shapes for hours grows without bound. A worker
process that compiles a few hundred programs and is then replaced keeps this process flat: the
IR goes to it over a pipe and the object code comes back (byte-identical: the same code builds
the same target machine and pipeline on both sides).

This file runs as a script (``python llvm_worker.py``) without importing toolkit, so a worker
starts in the time llvmlite takes to load (~0.1 s). It imports only llvmlite and the stdlib."""
from __future__ import annotations

import struct
import sys
import time

import llvmlite.binding as llvm

_READY = b"R"
_OK, _ERROR = b"0", b"1"


def new_target_machine():
    """A target machine for the host CPU, at O3, for JIT use."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(
        cpu=llvm.get_host_cpu_name(),
        features=host_features(),
        opt=3,
        jit=True,
    )


# x86's vector gather and scatter instructions are slow on most Intel server CPUs since the
# Gather Data Sampling microcode (clang's -mno-gather/-mno-scatter exist for them): ``x[idx] *
# 2``, 100,000 indices into 1,000 float64, took 223 µs with vgatherqpd on this VM's Xeon, 81-120
# µs with scalar loads (NumPy 111); a million indices into 100,000: 1.5-2.1 ms, 1.45-1.7 without
X86_TUNING = ",+prefer-no-gather,+prefer-no-scatter"


def host_features() -> str:
    """The host CPU's features as LLVM compiles for them, with the tuning above on x86-64."""
    features = llvm.get_host_cpu_features().flatten()
    if llvm.get_process_triple().startswith("x86_64"):
        features += X86_TUNING
    return features


def optimize(module, tm, run=None, vectorize: bool = True) -> None:
    """O3 with the loop and SLP vectorisers (``vectorize``; a GPU's threads are its vectors).
    Every pass-manager object is disposed here: left to the garbage collector they hold their
    analyses (and LLVM memory) for a while after each compile. ``run(mpm, module, pb)`` runs
    the pipeline (default: llvmlite's, behind its global lock)."""
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    if vectorize:
        pto.loop_vectorization = True
        pto.slp_vectorization = True
        pto.loop_unrolling = True
    pb = llvm.create_pass_builder(tm, pto)
    mpm = pb.getModulePassManager()
    try:
        if run is None:
            mpm.run(module, pb)
        else:
            run(mpm, module, pb)
    finally:
        mpm.close()
        pb.close()
        pto.close()


def optimize_and_emit(ir_text: str, tm) -> tuple[str, bytes, float, float]:
    """(optimised IR, object code, seconds optimising, seconds emitting) of one module, parsed in
    an LLVM context of its own (in the global context, every new shape's constants and types
    would stay for the life of the process)."""
    t0 = time.perf_counter()
    context = llvm.create_context()
    module = llvm.parse_assembly(ir_text, context=context)
    try:
        module.verify()
        module.triple = llvm.get_process_triple()
        module.data_layout = str(tm.target_data)
        optimize(module, tm)
        text = str(module)
        t1 = time.perf_counter()
        code = tm.emit_object(module)
        return text, code, t1 - t0, time.perf_counter() - t1
    finally:
        module.close()
        context.close()


# ---- NVIDIA PTX ----------------------------------------------------------------------------------
NVPTX_TRIPLE = "nvptx64-nvidia-cuda"
HOST = "host"
_nvptx_machines: dict = {}
_libraries: dict = {}


def nvptx_target(arch: str, features: str, library: str = "") -> str:
    """The request naming PTX for ``arch`` (with ``library``, a bitcode file, linked in)."""
    return "\t".join(("nvptx", arch, features, library))


def _nvptx_machine(arch: str, features: str):
    key = (arch, features)
    if key not in _nvptx_machines:
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
        _nvptx_machines[key] = llvm.Target.from_triple(NVPTX_TRIPLE).create_target_machine(
            cpu=arch, features=features, opt=3)
    return _nvptx_machines[key]


def link_library(module, path: str, context=None) -> None:
    """Link the bitcode library at ``path`` (libdevice) into ``module`` (of LLVM ``context``)
    and make its functions internal, so that the optimiser inlines what the kernels call and
    drops the other ~500."""
    if path not in _libraries:
        with open(path, "rb") as f:
            _libraries[path] = f.read()
    library = llvm.parse_bitcode(_libraries[path], context=context)
    library.triple = module.triple
    library.data_layout = module.data_layout
    ours = {f.name for f in module.functions if not f.is_declaration}
    module.link_in(library)
    for f in module.functions:
        if not f.is_declaration and f.name not in ours:
            f.linkage = "internal"


def optimize_and_emit_ptx(
    ir_text: str, arch: str, features: str, library: str = ""
) -> tuple[str, bytes, float, float]:
    """(optimised IR, PTX, seconds optimising, seconds emitting) of one NVPTX module, in an LLVM
    context of its own."""
    t0 = time.perf_counter()
    context = llvm.create_context()
    module = llvm.parse_assembly(ir_text, context=context)
    try:
        module.verify()
        if library:
            link_library(module, library, context)
        tm = _nvptx_machine(arch, features)
        optimize(module, tm, vectorize=False)
        text = str(module)
        t1 = time.perf_counter()
        ptx = tm.emit_assembly(module).encode()
        return text, ptx, t1 - t0, time.perf_counter() - t1
    finally:
        module.close()
        context.close()


def compile_for(target: str, ir_text: str, host_machine) -> tuple[str, bytes, float, float]:
    """``optimize_and_emit`` for the host, or ``optimize_and_emit_ptx`` for an ``nvptx_target``."""
    if target == HOST:
        return optimize_and_emit(ir_text, host_machine)
    kind, arch, features, library = target.split("\t")
    if kind != "nvptx":
        raise ValueError(f"unknown LLVM target {kind!r}")
    return optimize_and_emit_ptx(ir_text, arch, features, library)


# ---- the pipe protocol: lengths are 8-byte little-endian --------------------------------------
def write_blob(stream, data: bytes) -> None:
    write_all(stream, struct.pack("<Q", len(data)))
    write_all(stream, data)


def write_all(stream, data: bytes) -> None:
    """All of ``data``: an unbuffered pipe may take only part of a write (64 KB at a time)."""
    view = memoryview(data)
    while view:
        written = stream.write(view)
        view = view[written if written is not None else len(view):]


def read_blob(stream) -> bytes:
    head = read_exactly(stream, 8)
    return read_exactly(stream, struct.unpack("<Q", head)[0])


def read_exactly(stream, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = stream.read(left)
        if not chunk:
            raise EOFError("the LLVM worker's pipe closed")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def serve(requests, replies) -> None:
    """Answer requests until the input closes: each request is a target (``host``, or an
    ``nvptx_target``) and LLVM IR text; each reply is ``0`` + the seconds optimising and
    emitting (two doubles) + optimised IR + object code (PTX for a GPU), or ``1`` + the error
    message."""
    tm = new_target_machine()
    replies.write(_READY)
    replies.flush()
    while True:
        try:
            target = read_blob(requests).decode()
            ir_text = read_blob(requests).decode()
        except EOFError:
            return
        try:
            text, code, optimizing, emitting = compile_for(target, ir_text, tm)
        except Exception as e:  # noqa: BLE001 - the message goes back to the caller, who raises it
            replies.write(_ERROR)
            write_blob(replies, f"{type(e).__name__}: {e}".encode())
        else:
            replies.write(_OK)
            replies.write(struct.pack("<dd", optimizing, emitting))
            write_blob(replies, text.encode())
            write_blob(replies, code)
        replies.flush()


if __name__ == "__main__":
    serve(sys.stdin.buffer, sys.stdout.buffer)
