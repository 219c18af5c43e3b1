"""LLVM IR -> optimised machine code for the host CPU (O3, loop and SLP vectorisers), JIT-loaded
with MCJIT. Keeps the optimised IR and the assembly for inspection."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import llvmlite.binding as llvm

from ...profiler.progress import phase as progress_phase

_lock = threading.Lock()
_target_machine = None


def new_target_machine():
    """A target machine for the host CPU. Each execution engine takes ownership of the
    machine it is given, so every engine gets a fresh one."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                        features=llvm.get_host_cpu_features().flatten(), opt=3, jit=True)


def target_machine():
    """The shared machine for optimisation and assembly printing (never given to an engine)."""
    global _target_machine
    with _lock:
        if _target_machine is None:
            _target_machine = new_target_machine()
        return _target_machine


def host_description() -> dict:
    tm = target_machine()
    return {"triple": llvm.get_process_triple(), "cpu": llvm.get_host_cpu_name(),
            "features": llvm.get_host_cpu_features().flatten(), "llvm": ".".join(map(str, llvm.llvm_version_info)),
            "target_data": str(tm.target_data)}


@dataclass
class MachineCode:
    """Loaded machine code: an MCJIT engine holding only the object file (the LLVM module is
    disposed once the object is emitted, so a compiled program costs tens of KB, not the ~700 KB
    an engine that keeps its module holds), the optimised IR as text, and the object's bytes.
    Machine code from the persistent cache keeps no text: ``regenerate`` re-emits the kernels'
    LLVM IR (the emitters are deterministic), optimised again when the IR or assembly is asked for."""
    engine: object
    _llvm_ir: str | None  # optimised
    phases: list[tuple[str, float]] = field(default_factory=list)
    _asm: str | None = None
    cache: str = "miss"  # or "persistent_hit"
    object_code: bytes | None = None
    regenerate: object = None  # () -> the emitters' LLVM IR, for a persistent hit

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
            self._llvm_ir = "; regenerated: this machine code was loaded from the persistent compilation cache\n" + text
        return self._llvm_ir

    @property
    def asm(self) -> str:
        """The assembly, printed on demand from the optimised IR (deterministic: the same code)."""
        if self._asm is None:
            text = self.llvm_ir
            if self._llvm_ir is None:
                return text
            tm = target_machine()
            with _lock:
                module = llvm.parse_assembly(text)
                try:
                    self._asm = tm.emit_assembly(module)
                finally:
                    module.close()
        return self._asm


def _optimize(module, tm) -> None:
    """O3 with the loop and SLP vectorisers. Every pass-manager object is disposed here: left to
    the garbage collector they hold their analyses (and LLVM memory) for a while after each compile."""
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pto.loop_unrolling = True
    pb = llvm.create_pass_builder(tm, pto)
    mpm = pb.getModulePassManager()
    try:
        mpm.run(module, pb)
    finally:
        mpm.close()
        pb.close()
        pto.close()


def compile_ir(ir_text: str) -> MachineCode:
    tm = target_machine()
    phases = []
    t0 = time.perf_counter()
    with _lock:
        mod = llvm.parse_assembly(ir_text)
        try:
            mod.verify()
            mod.triple = llvm.get_process_triple()
            mod.data_layout = str(tm.target_data)
            progress_phase("LLVM O3 optimisation")
            _optimize(mod, tm)
            t1 = time.perf_counter()
            phases.append(("llvm_optimize", t1 - t0))
            optimized = str(mod)
            progress_phase("LLVM machine code")
            object_code = tm.emit_object(mod)
        finally:
            mod.close()
    machine = _load(object_code)
    phases.append(("machine_code", time.perf_counter() - t1))
    return MachineCode(machine, optimized, phases, object_code=object_code)


def _load(object_code: bytes):
    with _lock:
        empty = llvm.parse_assembly("")
        engine = llvm.create_mcjit_compiler(empty, new_target_machine())
        engine.add_object_file(llvm.ObjectFileRef.from_data(object_code))
        engine.finalize_object()
    return engine


def load_object(object_code: bytes) -> MachineCode:
    """Machine code from the persistent cache: no parsing, optimisation or codegen."""
    t0 = time.perf_counter()
    engine = _load(object_code)
    return MachineCode(engine, None, [("cache_load", time.perf_counter() - t0)], cache="persistent_hit")
