"""LLVM IR -> optimised machine code for the host CPU (O3, loop and SLP vectorisers), JIT-loaded
with MCJIT. Keeps the optimised IR and the assembly for inspection."""
from __future__ import annotations

import struct
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from ctypes import string_at
from dataclasses import dataclass, field

import llvmlite.binding as llvm
from llvmlite.binding import ffi

from ...profiler.progress import phase as progress_phase
from ..llvm import llvm_worker
from ..llvm.llvm_process import WORKER, WorkerUnavailable
from .vector_library import description as vector_library_description

_lock = threading.Lock()
_target_machine = None


def new_target_machine():
    """A target machine for the host CPU. Each execution engine takes ownership of the
    machine it is given, so every engine gets a fresh one."""
    return llvm_worker.new_target_machine()


def target_machine():
    """The shared machine for optimisation and assembly printing (never given to an engine)."""
    global _target_machine
    with _lock:
        if _target_machine is None:
            _target_machine = new_target_machine()
        return _target_machine


def host_description() -> dict:
    tm = target_machine()
    return {
        "triple": llvm.get_process_triple(),
        "cpu": llvm.get_host_cpu_name(),
        "features": llvm_worker.host_features(),
        "llvm": ".".join(map(str, llvm.llvm_version_info)),
        "target_data": str(tm.target_data),
        "vector_math": vector_library_description(),
    }


@dataclass
class MachineCode:
    """Loaded machine code: an MCJIT engine holding only the object file (the LLVM module is
    disposed once the object is emitted, so a compiled program costs tens of KB, not the ~700 KB
    an engine that keeps its module holds), the optimised IR as text, and the object's bytes.
    Machine code from the persistent cache keeps no text: ``regenerate`` re-emits the kernels'
    LLVM IR (the emitters are deterministic), optimised again when the IR or assembly is asked
    for."""
    engine: object
    _llvm_ir: str | None  # optimised
    phases: list[tuple[str, float]] = field(default_factory=list)
    _asm: str | None = None
    cache: str = "miss"  # or "persistent_hit"
    object_code: bytes | None = None  # one object file, or several packed by ``pack_objects``
    regenerate: object = None  # () -> the emitters' LLVM IR, for a persistent hit
    parts: list[str] | None = None  # the optimised IR of each separately compiled part

    def address(self, name: str) -> int:
        return self.engine.get_function_address(name)

    @property
    def llvm_ir(self) -> str:
        if self._llvm_ir is None:
            if self.regenerate is None:
                return "; loaded from the persistent compilation cache (no IR kept)"
            tm = target_machine()
            with _lock:
                module = llvm.parse_assembly(self.regenerate())
                try:
                    module.triple = llvm.get_process_triple()
                    module.data_layout = str(tm.target_data)
                    _optimize(module, tm)
                    text = str(module)
                finally:
                    module.close()
            self._llvm_ir = (
                "; regenerated: this machine code was loaded from the persistent compilation "
                "cache\n"
                + text
            )
        return self._llvm_ir

    @property
    def asm(self) -> str:
        """The assembly, printed on demand from the optimised IR (deterministic: the same code)."""
        if self._asm is None:
            text = self.llvm_ir
            if self._llvm_ir is None:
                return text
            tm = target_machine()
            pieces = []
            with _lock:
                for part in self.parts or [text]:
                    module = llvm.parse_assembly(part)
                    try:
                        pieces.append(tm.emit_assembly(module))
                    finally:
                        module.close()
            self._asm = "\n".join(pieces)
        return self._asm


_optimize = llvm_worker.optimize  # (the worker's code, so that both sides emit the same bytes)


def compile_ir(ir_text: str) -> MachineCode:
    """One module, optimised and emitted by the LLVM worker process (``llvm_process``), or in
    this process while none is ready or where none can run. The phases are the same either way
    (the worker times its own); loading the object into this process counts as machine code."""
    progress_phase("LLVM O3 optimisation and machine code")
    result = None
    if WORKER.enabled():
        try:
            result = WORKER.compile(ir_text)
        except WorkerUnavailable:
            pass
    if result is None:
        tm = target_machine()
        with _lock:
            result = llvm_worker.optimize_and_emit(ir_text, tm)
    optimized, object_code, optimizing, emitting = result
    t0 = time.perf_counter()
    machine = _load(object_code)
    phases = [("llvm_optimize", optimizing), ("machine_code", emitting + time.perf_counter() - t0)]
    return MachineCode(machine, optimized, phases, object_code=object_code)


# ---- parallel code generation ----------------------------------------------------------------
# llvmlite serialises every call into LLVM behind one process-wide lock. LLVM itself optimises and
# emits modules of separate contexts concurrently (each thread here has its own context and
# target machine), so the two long calls, the O3 pipeline and object emission, go to LLVM's C
# functions directly; everything else keeps llvmlite's lock. On 2 cores a program of hundreds of
# kernels compiles in about half the time; the objects are byte-identical to a serial compile.
_RUN_O3 = ffi.lib.LLVMPY_RunNewModulePassManager._cfn
_EMIT = ffi.lib.LLVMPY_TargetMachineEmitToMemory._cfn
_PACKED = b"TKOBJS1\n"


def _compile_part(ir_text: str) -> tuple[str, bytes]:
    """(optimised IR, object code) of one module, in a context of its own."""
    context = llvm.create_context()
    tm = new_target_machine()
    module = llvm.parse_assembly(ir_text, context=context)
    try:
        module.verify()
        module.triple = llvm.get_process_triple()
        module.data_layout = str(tm.target_data)
        llvm_worker.optimize(module, tm, run=_RUN_O3)  # LLVM's C entry point: no llvmlite lock
        optimized = str(module)
        with ffi.OutputString() as error:
            buffer = _EMIT(tm, module, 1, error)
            if not buffer:
                raise RuntimeError(str(error))
        try:
            code = string_at(
                ffi.lib.LLVMPY_GetBufferStart(buffer), ffi.lib.LLVMPY_GetBufferSize(buffer)
            )
        finally:
            ffi.lib.LLVMPY_DisposeMemoryBuffer(buffer)
        return optimized, code
    finally:
        module.close()
        tm.close()
        context.close()


def pack_objects(objects: list[bytes]) -> bytes:
    return (
        _PACKED
        + struct.pack(f"<I{len(objects)}Q", len(objects), *map(len, objects))
        + b"".join(objects)
    )


def unpack_objects(data: bytes) -> list[bytes]:
    if not data.startswith(_PACKED):
        return [data]
    at = len(_PACKED)
    (count,) = struct.unpack_from("<I", data, at)
    sizes = struct.unpack_from(f"<{count}Q", data, at + 4)
    at += 4 + 8 * count
    objects = []
    for size in sizes:
        objects.append(data[at: at + size])
        at += size
    if at != len(data):
        raise ValueError("packed object code of the wrong length")
    return objects


def compile_ir_parts(ir_texts: list[str]) -> MachineCode:
    """Several modules (the kernels, split by the backend), compiled at once, one per worker
    process (or, while those start, one per thread here), and loaded into one engine, which
    links the calls between them."""
    if len(ir_texts) == 1:
        return compile_ir(ir_texts[0])
    t0 = time.perf_counter()
    progress_phase(f"LLVM O3 and machine code ({len(ir_texts)} parts in parallel)")
    results = None
    if WORKER.enabled():
        try:
            results = [
                (text, code) for text, code, _, _ in WORKER.compile_parts(ir_texts, len(ir_texts))
            ]
        except WorkerUnavailable:
            results = None
    if results is None:
        with ThreadPoolExecutor(len(ir_texts), thread_name_prefix="toolkit-llvm") as workers:
            results = list(workers.map(_compile_part, ir_texts))
    t1 = time.perf_counter()
    objects = [code for _, code in results]
    machine = _load(objects)
    texts = [text for text, _ in results]
    joined = "\n".join(f"; ---- part {k + 1} of {len(texts)} (compiled on its own thread)\n{text}"
                       for k, text in enumerate(texts))
    return MachineCode(machine, joined, [("llvm_optimize_and_machine_code", t1 - t0),
                                         ("load", time.perf_counter() - t1)],
                       object_code=pack_objects(objects), parts=texts)


def _load(object_code: bytes | list[bytes]):
    objects = object_code if isinstance(object_code, list) else unpack_objects(object_code)
    vector_library_description()  # libmvec loaded before any code that calls it links
    with _lock:
        empty = llvm.parse_assembly("")
        engine = llvm.create_mcjit_compiler(empty, new_target_machine())
        for code in objects:
            engine.add_object_file(llvm.ObjectFileRef.from_data(code))
        engine.finalize_object()
    return engine


def load_object(object_code: bytes) -> MachineCode:
    """Machine code from the persistent cache: no parsing, optimisation or codegen."""
    t0 = time.perf_counter()
    engine = _load(object_code)
    return MachineCode(
        engine, None, [("cache_load", time.perf_counter() - t0)], cache="persistent_hit"
    )
