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

EMULATED_MODES = ("thread", "thread_split", "serial")
_REGISTERS = ("tid.x", "ctaid.x", "ntid.x", "nctaid.x")


def _for_the_host(source: str) -> str:
    """What every host form of a GPU module needs: no NVVM declarations, libdevice's functions
    as libm's (same names), one address space, no target, no kernel annotations."""
    text = re.sub(r'declare [^\n]*@"llvm\.nvvm\.[^\n]*\n', "", source)
    text = re.sub(r'@"__nv_(\w+)"', r'@"\1"', text)
    text = text.replace(" addrspace(1)", "").replace(" addrspace(3)", "")
    text = re.sub(r'target (triple|datalayout) = "[^"]*"\n', "", text)
    # LLVM upgrades the "kernel" annotation to the PTX kernel calling convention, and a call
    # from the host driver across calling conventions is undefined: the optimiser deletes it
    return re.sub(r"!nvvm\.annotations = [^\n]*\n", "", text)


def _host_source(source: str) -> str:
    text = re.sub(
        r'@"llvm\.nvvm\.read\.ptx\.sreg\.([a-z.]+)"', r'@"sim.sreg.\1"', _for_the_host(source)
    )
    text = text.replace('@"llvm.nvvm.membar.gl"', '@"sim.membar"').replace(
        '@"llvm.nvvm.barrier0"', '@"sim.barrier"'
    )
    text = text.replace('@"llvm.nvvm.shfl.sync.bfly.i32"', '@"sim.shuffle"')
    runtime = [
        f'@"sim.{r}" = global i32 0\ndefine i32 @"sim.sreg.{r}"() {{\n'
        f'  %v = load i32, i32* @"sim.{r}"\n  ret i32 %v\n}}'
        for r in _REGISTERS
    ]
    runtime.append(
        'define void @"sim.membar"() {\n  ret void\n}\ndefine void @"sim.barrier"() {\n  ret void\n'
        '}'
    )
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
    fn = ir.Function(
        m,
        ir.FunctionType(ir.VoidType(), [ir.IntType(8).as_pointer().as_pointer(), I64, I64]),
        f"sim.run.{kernel.symbol}",
    )
    pointers, count, grid = fn.args
    b = ir.IRBuilder(fn.append_basic_block())
    b.store(b.trunc(grid, I32), registers["nctaid.x"])
    b.store(ir.Constant(I32, THREADS_PER_BLOCK), registers["ntid.x"])
    args = [
        b.bitcast(b.load(b.gep(pointers, [ir.Constant(I64, i)])), t) for i, t in enumerate(types)
    ]
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
        loop(
            ir.Constant(I64, THREADS_PER_BLOCK),
            lambda t: (
                b.store(b.trunc(t, I32), registers["tid.x"]),
                b.call(target, [*args, count]),
            ),
            "thread",
        )

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
            self._runners[symbol] = ctypes.CFUNCTYPE(
                None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64
            )(address)

    def run(self, symbol: str, buffers, count: int, grid: int) -> None:
        pointers = (ctypes.c_void_p * max(1, len(buffers)))(*[b.ctypes.data for b in buffers])
        self._runners[symbol](ctypes.addressof(pointers), count, grid)


# ---- cooperative kernels: every thread of a block an OS thread -----------------------------
# A kernel gets a hidden last argument, its thread's context; special registers, shuffles and
# barriers read it. Shuffles go through a per-warp exchange buffer between two waits on the
# warp's pthread barrier, __syncthreads is a wait on the block's. Shared memory is a global
# (blocks run one after another), global scratch and atomics are the host's own.
# tid, ctaid, ntid, nctaid, exchange, warp and block barriers
_CTX = "{i32, i32, i32, i32, i32*, i8*, i8*}"
_REGISTER_FIELD = {"tid.x": 0, "ctaid.x": 1, "ntid.x": 2, "nctaid.x": 3}
_COOPERATIVE_RUNTIME = f"""
declare i32 @pthread_barrier_wait(i8*)
define i32 @"sim.reg"(i8* %ctx, i32 %field) {{
  %c = bitcast i8* %ctx to {_CTX}*
  %p = getelementptr {_CTX}, {_CTX}* %c, i32 0, i32 0
  %base = bitcast i32* %p to i32*
  %q = getelementptr i32, i32* %base, i32 %field
  %v = load i32, i32* %q
  ret i32 %v
}}
define void @"sim.wait"(i8* %ctx, i32 %which) {{
  %c = bitcast i8* %ctx to {_CTX}*
  %warp = icmp eq i32 %which, 0
  %wp = getelementptr {_CTX}, {_CTX}* %c, i32 0, i32 5
  %bp = getelementptr {_CTX}, {_CTX}* %c, i32 0, i32 6
  %pp = select i1 %warp, i8** %wp, i8** %bp
  %barrier = load i8*, i8** %pp
  %r = call i32 @pthread_barrier_wait(i8* %barrier)
  fence seq_cst
  ret void
}}
define void @"sim.block_barrier"(i8* %ctx) {{
  call void @"sim.wait"(i8* %ctx, i32 1)
  ret void
}}
define i32 @"sim.shuffle"(i8* %ctx, i32 %mask, i32 %v, i32 %lanemask, i32 %clamp) {{
  %c = bitcast i8* %ctx to {_CTX}*
  %tp = getelementptr {_CTX}, {_CTX}* %c, i32 0, i32 0
  %tid = load i32, i32* %tp
  %lane = and i32 %tid, 31
  %xp = getelementptr {_CTX}, {_CTX}* %c, i32 0, i32 4
  %exchange = load i32*, i32** %xp
  %mine = getelementptr i32, i32* %exchange, i32 %lane
  store volatile i32 %v, i32* %mine
  call void @"sim.wait"(i8* %ctx, i32 0)
  %other = xor i32 %lane, %lanemask
  %theirs = getelementptr i32, i32* %exchange, i32 %other
  %r = load volatile i32, i32* %theirs
  call void @"sim.wait"(i8* %ctx, i32 0)
  ret i32 %r
}}
"""


def _cooperative_source(source: str) -> str:
    text = re.sub(r'(define void @"\w+"\([^)]*)\)', r'\1, i8* %"sim.ctx")', _for_the_host(source))
    text = re.sub(
        r'call i32 @"llvm\.nvvm\.read\.ptx\.sreg\.([a-z.]+)"\(\)',
        lambda m: f'call i32 @"sim.reg"(i8* %"sim.ctx", i32 {_REGISTER_FIELD[m.group(1)]})',
        text,
    )
    text = text.replace(
        'call i32 @"llvm.nvvm.shfl.sync.bfly.i32"(', 'call i32 @"sim.shuffle"(i8* %"sim.ctx", '
    )
    text = text.replace(
        'call void @"llvm.nvvm.barrier0"()', 'call void @"sim.block_barrier"(i8* %"sim.ctx")'
    )
    text = text.replace('call void @"llvm.nvvm.membar.gl"()', "fence seq_cst")
    # shared memory and scratch as ordinary globals the barrier calls may touch, so that the
    # optimiser keeps every load and store of them on its side of a barrier
    text = text.replace("= internal global", "= global")
    return text + _COOPERATIVE_RUNTIME


class _Context(ctypes.Structure):
    _fields_ = [
        ("tid", ctypes.c_int32),
        ("ctaid", ctypes.c_int32),
        ("ntid", ctypes.c_int32),
        ("nctaid", ctypes.c_int32),
        ("exchange", ctypes.c_void_p),
        ("warp_barrier", ctypes.c_void_p),
        ("block_barrier", ctypes.c_void_p),
    ]


_libc = ctypes.CDLL(None)
_BARRIER_BYTES = 64  # a pthread_barrier_t is 32 bytes on x86-64 glibc


class CooperativeKernels:
    """Kernels whose threads cooperate, each thread of a block an OS thread (small grids)."""

    def __init__(self, program, symbols):
        self.machine = compile_ir(_cooperative_source(program.source_ir))
        self.kernels = {s: k for s, k in ((k.symbol, k) for k in program.kernels) if s in symbols}
        self._functions = {}
        for symbol, kernel in self.kernels.items():
            n = len(kernel.spec.computation.parameters) + len(kernel.spec.outputs)
            proto = ctypes.CFUNCTYPE(
                None, *([ctypes.c_void_p] * n), ctypes.c_int64, ctypes.c_void_p
            )
            self._functions[symbol] = proto(self.machine.address(symbol))

    def run(self, symbol: str, buffers, count: int, grid: int, timeout: float = 60.0) -> None:
        import threading

        fn = self._functions[symbol]
        pointers = [b.ctypes.data for b in buffers]
        threads_per_block, warps = THREADS_PER_BLOCK, THREADS_PER_BLOCK // 32
        for block in range(grid):
            barriers = ctypes.create_string_buffer(_BARRIER_BYTES * (warps + 1))
            base = ctypes.addressof(barriers)
            for w in range(warps):
                assert (
                    _libc.pthread_barrier_init(ctypes.c_void_p(base + w * _BARRIER_BYTES), None, 32)
                    == 0
                )
            block_barrier = base + warps * _BARRIER_BYTES
            assert (
                _libc.pthread_barrier_init(ctypes.c_void_p(block_barrier), None, threads_per_block)
                == 0
            )
            exchange = (ctypes.c_int32 * threads_per_block)()
            contexts = [
                _Context(
                    t,
                    block,
                    threads_per_block,
                    grid,
                    ctypes.addressof(exchange) + (t // 32) * 32 * 4,
                    base + (t // 32) * _BARRIER_BYTES,
                    block_barrier,
                )
                for t in range(threads_per_block)
            ]
            workers = [
                threading.Thread(
                    target=fn, args=(*pointers, count, ctypes.addressof(c)), daemon=True
                )
                for c in contexts
            ]
            for w in workers:
                w.start()
            for w in workers:
                w.join(timeout)
                if w.is_alive():
                    raise TimeoutError(
                        f"{symbol}: block {block} did not finish (threads waiting at a barrier "
                        "or a shuffle that not all of them reached)"
                    )
            for w in range(warps + 1):
                _libc.pthread_barrier_destroy(ctypes.c_void_p(base + w * _BARRIER_BYTES))


class EmulatedDevice(SimulatedDevice):
    """The simulated device, but kernels whose threads never wait for each other run their
    own emitted code (host-compiled) instead of the interpreter."""

    name = "simulated CUDA device running emitted kernels on the host"
    sm_count, blocks_per_sm = 1, 2  # small grids: cooperative blocks are 256 OS threads each

    def __init__(self, cooperative: bool = True):
        super().__init__()
        self.cooperative = cooperative
        self.emulated: list[str] = []  # kernels that ran their own code
        self.interpreted: list[str] = []  # kernels left to the interpreter

    def load(self, program) -> dict:
        functions = super().load(program)
        host = HostKernels(program)
        together = {k.symbol for k in program.kernels if k.mode not in EMULATED_MODES}
        cooperative = (
            CooperativeKernels(program, together) if together and self.cooperative else None
        )
        for symbol, function in functions.items():
            function.host = (
                host if symbol in host.kernels else cooperative if symbol in together else None
            )
        return functions

    def launch(self, function, grid, block, buffers, count: int) -> None:
        if function.host is None:
            self.interpreted.append(function.kernel.symbol)
            return super().launch(function, grid, block, buffers, count)
        assert block == (THREADS_PER_BLOCK, 1, 1)
        assert count == function.launched(buffers, count).work_items
        function.host.run(
            function.kernel.symbol, [b.view(np.ndarray) for b in buffers], count, grid[0]
        )
        self.emulated.append(function.kernel.symbol)
        self.launches.append(function.kernel.symbol)
