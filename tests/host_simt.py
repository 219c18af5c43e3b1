"""GPU kernels run on the host CPU, one simulated thread after another.

The GPU emitters' LLVM module (before NVPTX code generation) is rewritten for the host: the
special registers (threadIdx, blockIdx, ...) become loads of globals, fences become no-ops,
libdevice's functions become libm's, and the address spaces become the host's one. A driver
per kernel walks the grid, setting the registers and calling the kernel for each thread in
turn. That is exact for kernels whose threads never wait for each other: loop kernels, a
thread per output, and thread-split reductions (each thread's partial, its arrival count and
the last arriver's combination happen one thread at a time, which is one of the orders a GPU
may produce). Kernels whose threads cooperate (warp shuffles, block barriers) cannot run
one thread at a time; they are left to the interpreter, and the device says which ran how.

What this checks that the simulated device cannot: the emitted kernels themselves (grid-stride
indexing, bounds, layouts, scratch and arrival counts) on real data. What it cannot check is
LLVM's NVPTX back end, which ptxas and a real GPU do."""
from __future__ import annotations

import ctypes
import re

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir

from toolkit.backends.cpu.compiler import compile_ir
from toolkit.backends.gpu.codegen import THREADS_PER_BLOCK
from toolkit.backends.llvm.types import I32, I64, storage_type

from simulated_gpu import SimulatedDevice

EMULATED_MODES = ("thread", "thread_split")
_REGISTERS = ("tid.x", "ctaid.x", "ntid.x", "nctaid.x")


def _host_source(source: str) -> str:
    text = re.sub(r'declare [^\n]*@"llvm\.nvvm\.[^\n]*\n', "", source)
    text = re.sub(r'@"llvm\.nvvm\.read\.ptx\.sreg\.([a-z.]+)"', r'@"sim.sreg.\1"', text)
    text = text.replace('@"llvm.nvvm.membar.gl"', '@"sim.membar"').replace('@"llvm.nvvm.barrier0"', '@"sim.barrier"')
    text = text.replace('@"llvm.nvvm.shfl.sync.bfly.i32"', '@"sim.shuffle"')
    text = re.sub(r'@"__nv_(\w+)"', r'@"\1"', text)  # libdevice's functions are libm's, by name
    text = text.replace(" addrspace(1)", "").replace(" addrspace(3)", "")
    text = re.sub(r'target (triple|datalayout) = "[^"]*"\n', "", text)
    # LLVM upgrades the "kernel" annotation to the PTX kernel calling convention, and a call
    # from the host driver across calling conventions is undefined: the optimiser deletes it
    text = re.sub(r"!nvvm\.annotations = [^\n]*\n", "", text)
    runtime = [f'@"sim.{r}" = global i32 0\ndefine i32 @"sim.sreg.{r}"() {{\n  %v = load i32, i32* @"sim.{r}"\n  ret i32 %v\n}}'
               for r in _REGISTERS]
    runtime.append('define void @"sim.membar"() {\n  ret void\n}\ndefine void @"sim.barrier"() {\n  ret void\n}')
    runtime.append('define i32 @"sim.shuffle"(i32 %m, i32 %v, i32 %l, i32 %c) {\n  ret i32 %v\n}')
    return text + "\n" + "\n".join(runtime) + "\n"


def _driver(kernel) -> str:
    """``void sim.run.<kernel>(i8** pointers, i64 count, i64 grid)``: every thread of the grid."""
    m = ir.Module()
    comp, outputs = kernel.spec.computation, kernel.spec.outputs
    types = [storage_type(p.shape.dtype).as_pointer() for p in comp.parameters] + \
            [storage_type(o.shape.dtype).as_pointer() for o in outputs]
    target = ir.Function(m, ir.FunctionType(ir.VoidType(), [*types, I64]), kernel.symbol)
    registers = {r: ir.GlobalVariable(m, I32, f"sim.{r}") for r in _REGISTERS}
    fn = ir.Function(m, ir.FunctionType(ir.VoidType(), [ir.IntType(8).as_pointer().as_pointer(), I64, I64]),
                     f"sim.run.{kernel.symbol}")
    pointers, count, grid = fn.args
    b = ir.IRBuilder(fn.append_basic_block())
    b.store(b.trunc(grid, I32), registers["nctaid.x"])
    b.store(ir.Constant(I32, THREADS_PER_BLOCK), registers["ntid.x"])
    args = [b.bitcast(b.load(b.gep(pointers, [ir.Constant(I64, i)])), t) for i, t in enumerate(types)]
    with b.goto_block(b.block):
        pass

    def loop(n, body, name):
        pre = b.block
        head = fn.append_basic_block(f"{name}.body")
        done = fn.append_basic_block(f"{name}.done")
        b.cbranch(b.icmp_signed("<", ir.Constant(I64, 0), n), head, done)
        b.position_at_end(head)
        i = b.phi(I64)
        i.add_incoming(ir.Constant(I64, 0), pre)
        body(i)
        nxt = b.add(i, ir.Constant(I64, 1))
        i.add_incoming(nxt, b.block)
        b.cbranch(b.icmp_signed("<", nxt, n), head, done)
        b.position_at_end(done)

    def block(block_index):
        b.store(b.trunc(block_index, I32), registers["ctaid.x"])
        loop(ir.Constant(I64, THREADS_PER_BLOCK),
             lambda t: (b.store(b.trunc(t, I32), registers["tid.x"]), b.call(target, [*args, count])), "thread")

    loop(grid, block, "block")
    b.ret_void()
    return str(m)


class HostKernels:
    """The emulable kernels of one GPU program, compiled for the host."""

    def __init__(self, program):
        self.kernels = {k.symbol: k for k in program.kernels if k.mode in EMULATED_MODES}
        module = llvm.parse_assembly(_host_source(program.source_ir))
        for kernel in self.kernels.values():
            module.link_in(llvm.parse_assembly(_driver(kernel)))
        self.machine = compile_ir(str(module))
        self._runners = {}
        for symbol in self.kernels:
            address = self.machine.address(f"sim.run.{symbol}")
            self._runners[symbol] = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)(address)

    def run(self, symbol: str, buffers, count: int, grid: int) -> None:
        pointers = (ctypes.c_void_p * max(1, len(buffers)))(*[b.ctypes.data for b in buffers])
        self._runners[symbol](ctypes.addressof(pointers), count, grid)


class EmulatedDevice(SimulatedDevice):
    """The simulated device, but kernels whose threads never wait for each other run their
    own emitted code (host-compiled) instead of the interpreter."""

    name = "simulated CUDA device running emitted kernels on the host"

    def __init__(self):
        super().__init__()
        self.emulated: list[str] = []  # kernels that ran their own code
        self.interpreted: list[str] = []  # kernels left to the interpreter (cooperative modes)

    def load(self, program) -> dict:
        functions = super().load(program)
        host = HostKernels(program)
        for symbol, function in functions.items():
            function.host = host if symbol in host.kernels else None
        return functions

    def launch(self, function, grid, block, buffers, count: int) -> None:
        if function.host is None:
            self.interpreted.append(function.kernel.symbol)
            return super().launch(function, grid, block, buffers, count)
        assert block == (THREADS_PER_BLOCK, 1, 1)
        function.host.run(function.kernel.symbol, [b.view(np.ndarray) for b in buffers], count, grid[0])
        self.emulated.append(function.kernel.symbol)
        self.launches.append(function.kernel.symbol)
