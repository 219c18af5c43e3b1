"""GPU code generation: the shared elemental emitter wrapped for the ``nvptx64-nvidia-cuda``
triple, one kernel per fusion, emitted as PTX by LLVM's NVPTX back end through llvmlite.

Kernels take ``(ptr in0, ..., ptr out0, ..., i64 count)`` and use a grid-stride loop over
``count`` work items, so any launch size covers any problem. Loop fusions give one output
element per thread. Column and other reductions give one output element per thread and loop over the
reduced
dimensions inside the thread, writing extra (multi-output) results on the way; row reductions
of more than a few elements give a row to a warp or a block (``reductions.py``)."""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass

from llvmlite import ir

from ...ir.nodes import Module
from ...ir.ops import GroupOp
from ..llvm.elemental import CodegenUnsupported, ElementalEmitter, delinearize, emit_binary, i64
from ..llvm.indexing import emit_scatter, update_slice_element
from ..llvm.loops import for_range, nest
from ..llvm.reduction import fold_element, start_accumulators, store_accumulators
from ..llvm.scan import scan_line, scan_lines
from ..llvm.shared_code import SharedCode
from ..llvm.planning import (
    KernelSpec,
    emit_or_discard,
    kernel_key,
    plan_kernel,
    plan_update_in_place,
    update_in_place_operand,
)
from ..llvm.types import I32, I64, storage_type, value_type
from .libdevice import find_libdevice, needs_libdevice
from ..llvm import llvm_worker
from ..llvm.llvm_process import WORKER, WorkerUnavailable
from .primitives import ptx_name, sreg
from .reductions import BLOCK_WARPS, emit_cooperative_row, row_mode
from .thread_split import emit_thread_split, thread_pieces

TRIPLE = llvm_worker.NVPTX_TRIPLE
DATA_LAYOUT = "e-p6:32:32-i64:64-i128:128-v16:16-v32:32-n16:32:64"
ARCHES = {"sm_80": "+ptx75", "sm_90": "+ptx78"}
THREADS_PER_BLOCK = 256
# Top-level instructions that get no kernel of their own from the emitter (never one written
# in place either)
NOT_EMITTED = (GroupOp.BOOKKEEPING | GroupOp.LIBRARY | GroupOp.CONTROL | GroupOp.COLLECTIVE
               | {"dot"})


@dataclass
class GpuKernel:
    name: str  # the HLO instruction
    symbol: str  # the PTX entry (PTX names cannot contain '.' or '-')
    spec: KernelSpec
    work_items: int  # the count the grid-stride loop covers: elements, or rows of a reduction
    # a work item per thread, per warp, per block, per block-sized piece of a row (split), or
    # per thread-sized piece of an output's reduction (thread_split)
    mode: str = "thread"

    def launch(
        self, sm_count: int = 132, blocks_per_sm: int = 8
    ) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        """(grid, block): enough blocks to fill the device (8 blocks of 256 threads per SM is
        full occupancy on sm_80/sm_90), no more than the work needs."""
        per_block = {
            "thread": THREADS_PER_BLOCK,
            "thread_split": THREADS_PER_BLOCK,
            "warp": BLOCK_WARPS,
            "block": 1,
            "split": 1,
            "serial": THREADS_PER_BLOCK,
        }[self.mode]
        blocks = max(1, min(math.ceil(self.work_items / per_block), sm_count * blocks_per_sm))
        return (blocks, 1, 1), (THREADS_PER_BLOCK, 1, 1)


VECTOR_BYTES = 16  # one ld.global.v4.b32 / v2.b64: what 16-byte-aligned pointers allow


def vector_width(shape) -> int:
    """Elements a loop-kernel thread takes per item: 16 bytes' worth when whole vectors fit
    in the last dimension (so an item never crosses a row), else 1."""
    if not shape.rank or shape.size == 0:
        return 1
    width = max(1, VECTOR_BYTES // shape.dtype.numpy.itemsize)
    while width > 1 and shape.dims[-1] % width:
        width //= 2
    return width


def _grid_stride(b: ir.IRBuilder, count: ir.Value, body) -> None:
    """for (i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x)"""
    start = b.add(b.mul(sreg(b, "ctaid.x"), sreg(b, "ntid.x")), sreg(b, "tid.x"))
    stride = b.mul(sreg(b, "nctaid.x"), sreg(b, "ntid.x"))
    for_range(b, start, count, body, "item", step=stride)


def emit_gpu_kernel(module: ir.Module, spec: KernelSpec) -> GpuKernel:
    comp = spec.computation
    shapes = [p.shape for p in comp.parameters] + [o.shape for o in spec.outputs]
    symbol = ptx_name(spec.name)
    fn = ir.Function(
        module,
        ir.FunctionType(
            ir.VoidType(), [storage_type(s.dtype).as_pointer() for s in shapes] + [I64]
        ),
        symbol,
    )
    # In place, an input and the output are one buffer: the kernel reads that input through
    # the output's pointer and never touches its own argument, so every pointer it uses stays
    # noalias (as the CPU's kernels do)
    aliased = spec.aliased_parameter
    for arg in fn.args[:-1]:
        if not spec.in_place or aliased is not None:
            arg.add_attribute("noalias")
        # CuPy's pool hands out 256-byte-aligned buffers, and kernels only ever get whole ones
        arg.attributes.align = 16
    count = fn.args[-1]
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    inputs = {id(p): (fn.args[i], p.shape) for i, p in enumerate(comp.parameters)}
    outs = {id(o): (fn.args[len(comp.parameters) + i], o.shape) for i, o in enumerate(spec.outputs)}
    if aliased is not None:
        inputs[id(comp.parameters[aliased])] = (outs[id(spec.outputs[0])][0],
                                                comp.parameters[aliased].shape)
    e = ElementalEmitter(b, inputs, module, target="gpu", device_math=find_libdevice() is not None)
    e.unclamped = frozenset(id(comp.parameters[k]) for k in spec.starts_in_bounds)
    heroes = [o for o in spec.outputs if o.opcode == "reduce"]
    mode = "thread"
    # one thread, in order: the last of repeated indices wins, as in NumPy
    if spec.kind == "scatter":
        (out,) = spec.outputs
        _grid_stride(b, count, lambda i: emit_scatter(e, out, *outs[id(out)],
                                                      in_place=spec.in_place))
        return _finish(module, fn, b, spec, symbol, 1, "serial")
    if spec.kind == "update_slice":  # the window alone, a thread per element of the update
        (out,) = spec.outputs
        update = out.operands[1].shape

        def window_item(i):
            index = delinearize(b, i, update.dims) if update.rank else []
            update_slice_element(e, out, *outs[id(out)], index)

        _grid_stride(b, count, window_item)
        return _finish(module, fn, b, spec, symbol, update.size, "thread")
    if spec.kind == "scan":  # a thread per line, folding along the axis in order
        (scan,) = spec.outputs
        out_ptr, shape = outs[id(scan)]
        axis = spec.split_dim
        outer, inner = scan_lines(shape.dims, axis)
        lines = 0 if 0 in shape.dims else math.prod(outer) * math.prod(inner)
        running = b.alloca(value_type(scan.shape.dtype), name="running")

        def line(k):
            where = delinearize(b, k, outer + inner) if outer + inner else []
            scan_line(e, scan, spec.reducer, out_ptr, axis, where[:len(outer)],
                      where[len(outer):], running)

        _grid_stride(b, count, line)
        return _finish(module, fn, b, spec, symbol, lines, "thread")
    if not heroes:
        shape = spec.outputs[0].shape
        width = vector_width(shape)
        work = shape.size // width  # 0 for an empty output: the launch's threads all skip the loop

        def item(i):
            e.reset()
            first = (
                delinearize(b, b.mul(i, i64(width)) if width > 1 else i, shape.dims)
                if shape.rank
                else []
            )
            # neighbours in the last dimension: loads and stores LLVM can vectorise
            for k in range(width):
                index = first if k == 0 else first[:-1] + [b.add(first[-1], i64(k))]
                for o in spec.outputs:
                    ptr, s = outs[id(o)]
                    e.store(ptr, s, index, e.value(o, index))

        _grid_stride(b, count, item)
    else:
        in_shape = heroes[0].operands[0].shape
        reduced = sorted(heroes[0].attrs["dimensions"])
        kept = [d for d in range(in_shape.rank) if d not in reduced]
        kept_dims = [in_shape.dims[d] for d in kept]
        red_dims = [in_shape.dims[d] for d in reduced]
        work = math.prod(kept_dims)  # 1 for a full reduction, 0 when there is no output element
        extras = [o for o in spec.outputs if o.opcode != "reduce"]
        if spec.kind == "row":
            mode, pieces = row_mode(work, math.prod(red_dims))
        if mode != "thread":
            emit_cooperative_row(e, spec, heroes, extras, outs, count, mode, pieces)
            return _finish(module, fn, b, spec, symbol, work * pieces, mode)
        pieces = thread_pieces(work, math.prod(red_dims))
        if pieces > 1:
            emit_thread_split(e, spec, heroes, extras, outs, count, pieces, _grid_stride)
            return _finish(module, fn, b, spec, symbol, work * pieces, "thread_split")
        accs = [b.alloca(value_type(h.shape.dtype)) for h in heroes]

        def combine(h, acc, v):
            return emit_binary(e, spec.reducers[id(h)], acc, v, h.shape.dtype)

        def item(i):
            e.reset()
            kept_index = delinearize(b, i, kept_dims) if kept_dims else []
            start_accumulators(e, heroes, accs)

            def inner(red_index):
                full = [None] * in_shape.rank
                for d, v in zip(kept, kept_index):
                    full[d] = v
                for d, v in zip(reduced, red_index):
                    full[d] = v
                fold_element(e, heroes, accs, extras, outs, full, combine)

            if red_dims:
                nest(b, red_dims, inner, prefix="r")
            else:
                inner([])
            store_accumulators(e, heroes, accs, outs, kept_index)

        _grid_stride(b, count, item)
    return _finish(module, fn, b, spec, symbol, work, mode)


def _finish(module, fn, b, spec, symbol, work, mode) -> GpuKernel:
    b.ret_void()
    return GpuKernel(spec.name, symbol, spec, work, mode)


def _annotate(module: ir.Module, fn: ir.Function) -> None:
    """Make ``fn`` a kernel entry (once it is known to be kept: the annotations name it)."""
    md = module.add_metadata([fn, "kernel", ir.Constant(I32, 1)])
    module.add_named_metadata("nvvm.annotations", md)
    # every mode launches 256-thread blocks
    module.add_named_metadata(
        "nvvm.annotations",
        module.add_metadata([fn, "maxntidx", ir.Constant(I32, THREADS_PER_BLOCK)]),
    )


@dataclass
class PtxProgram:
    ptx: str
    arch: str
    kernels: list[GpuKernel]
    unsupported: list[str]  # kernels the emitter could not lower, with the reason
    llvm_ir: str = ""  # the NVPTX module after optimisation (libdevice linked in, if it was needed)
    source_ir: str = ""  # the emitters' module, before optimisation


def compile_ptx(module: Module, arch: str = "sm_80",
                in_place: Mapping[str, int | None] | None = None) -> PtxProgram:
    """PTX for every kernel of an optimised module (fusions and unfused instructions).
    ``in_place``: the instructions the buffer plan gave their operand's buffer, by name, with
    the parameter read through the output (or None): a dynamic-update-slice or scatter then
    writes its window or updates alone, an elementwise kernel over its input."""
    in_place = in_place or {}
    if arch not in ARCHES:
        raise ValueError(
            f"unsupported GPU architecture {arch!r}; toolkit emits {', '.join(ARCHES)}"
        )
    ir_module = ir.Module(name=module.name)
    ir_module.triple = TRIPLE
    ir_module.data_layout = DATA_LAYOUT
    kernels, unsupported = [], []
    # kernels alike up to names share one entry (an unrolled loop's trips), and so do kernels
    # whose code is alike (llvm/shared_code)
    first: dict[tuple, GpuKernel | str] = {}
    sharing = SharedCode()
    for inst in module.entry.instructions:
        # no kernel: bookkeeping; dots go to cuBLAS, sorts and custom-calls to library calls;
        # loops and branches are programs of their own, driven from the host
        if inst.opcode in NOT_EMITTED:
            continue
        try:
            spec = planned_kernel(inst, in_place)
            key = kernel_key(spec)
            earlier = first.get(key)
            if isinstance(earlier, str):  # the same kernel could not be lowered before
                raise CodegenUnsupported(earlier)
            if earlier is not None:
                kernels.append(dataclasses.replace(earlier, name=inst.name, spec=spec))
                continue
            try:
                kernel = emit_or_discard(ir_module, emit_gpu_kernel, spec)
            except CodegenUnsupported as err:
                first[key] = str(err)
                raise
            # code alike an earlier kernel's (launched alike): that kernel's entry
            same = sharing.share(ir_module, [kernel.symbol], (kernel.mode,))
            if same is None:
                _annotate(ir_module, ir_module.globals[kernel.symbol])
            else:
                kernel = dataclasses.replace(kernel, symbol=same)
            first[key] = kernel
            kernels.append(kernel)
        except CodegenUnsupported as err:
            unsupported.append(f"%{inst.name}: {err}")
    text = sharing.text(ir_module, aliases=False)
    optimized, ptx = _optimize_to_ptx(text, arch, find_libdevice() if needs_libdevice(text) else "")
    return PtxProgram(ptx, arch, kernels, unsupported, optimized, text)


def planned_kernel(inst, in_place: Mapping[str, int | None]) -> KernelSpec:
    """The kernel ``inst`` becomes: written in place (its window alone, or over the input
    ``in_place`` names) where the buffer plan said so."""
    if inst.name not in in_place:
        return plan_kernel(inst)
    spec = (plan_update_in_place(inst) if update_in_place_operand(inst) is not None
            else plan_kernel(inst))
    spec.in_place = True
    spec.aliased_parameter = in_place[inst.name]
    return spec


def _optimize_to_ptx(text: str, arch: str, library: str) -> tuple[str, str]:
    """(optimised IR, PTX) from the LLVM worker process, as the CPU's object code is (each
    in-process pass builder leaks ~95 KB in llvmlite), or in this process while none is ready."""
    if WORKER.enabled():
        try:
            optimized, ptx, _, _ = WORKER.compile(
                text, target=llvm_worker.nvptx_target(arch, ARCHES[arch], library)
            )
            return optimized, ptx.decode()
        except WorkerUnavailable:
            pass
    optimized, ptx, _, _ = llvm_worker.optimize_and_emit_ptx(text, arch, ARCHES[arch], library)
    return optimized, ptx.decode()
