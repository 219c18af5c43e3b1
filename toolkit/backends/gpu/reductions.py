"""Row reductions in which threads cooperate: a warp per row, or a block per row.

A row is the ``L`` contiguous input elements one output element reduces. With a warp per row
(rows of moderate length, or many rows) lane ``k`` folds elements k, k+32, ... (coalesced:
a warp reads 32 neighbours at a time), then five butterfly shuffles (``shfl.sync.bfly``)
combine the lanes and lane 0 writes. With a block per row (few, long rows) the block's
warps do the same, write one partial each to shared memory, and warp 0 combines those.

Lane 0 starts from the reduction's init value, every other lane from the reducer's
identity, so the result is init ⊕ all elements in some order, as XLA allows for reductions.
Extra outputs of a multi-output fusion are written by whichever lane visits their element."""
from __future__ import annotations

from llvmlite import ir

from ...ir.queries import IDENTITIES
from ..llvm.elemental import delinearize, emit_binary, i64
from ..llvm.reduction import fold_element
from ..llvm.types import I32, I64, constant, value_type

WARP = 32
BLOCK_WARPS = 8  # 256 threads per block in every mode
FULL_MASK = 0xFFFFFFFF


def row_mode(rows: int, row_length: int) -> str:
    """thread (a thread per row: short rows), warp (a warp per row) or block (a block per row)."""
    if row_length <= 8:
        return "thread"
    if row_length <= 4096 or rows >= 4096:
        return "warp"
    return "block"


def ptx_name(name: str) -> str:
    """PTX identifiers cannot contain '.' or '-'."""
    return name.replace(".", "_").replace("-", "_")


def _intrinsic(b: ir.IRBuilder, name: str, ret, args):
    fn = b.module.globals.get(name) or ir.Function(b.module, ir.FunctionType(ret, [a.type for a in args]), name)
    return b.call(fn, args)


def sreg(b: ir.IRBuilder, name: str) -> ir.Value:
    fn = b.module.globals.get(f"llvm.nvvm.read.ptx.sreg.{name}") or ir.Function(
        b.module, ir.FunctionType(I32, []), f"llvm.nvvm.read.ptx.sreg.{name}")
    return b.zext(b.call(fn, []), I64)


def barrier(b: ir.IRBuilder) -> None:
    fn = b.module.globals.get("llvm.nvvm.barrier0") or ir.Function(
        b.module, ir.FunctionType(ir.VoidType(), []), "llvm.nvvm.barrier0")
    b.call(fn, [])


def _shuffle_word(b: ir.IRBuilder, word: ir.Value, lane_mask: int) -> ir.Value:
    return _intrinsic(b, "llvm.nvvm.shfl.sync.bfly.i32", I32,
                      [ir.Constant(I32, FULL_MASK), word, ir.Constant(I32, lane_mask), ir.Constant(I32, WARP - 1)])


def shuffle_xor(b: ir.IRBuilder, value: ir.Value, lane_mask: int) -> ir.Value:
    """The ``value`` of lane ``lane ^ lane_mask``, for any scalar type (in 32-bit words)."""
    t = value.type
    width = t.width if isinstance(t, ir.IntType) else {"half": 16, "float": 32, "double": 64}[str(t)]
    bits = value if isinstance(t, ir.IntType) else b.bitcast(value, ir.IntType(width))
    if width <= 32:
        word = bits if width == 32 else b.zext(bits, I32)
        moved = _shuffle_word(b, word, lane_mask)
        moved = moved if width == 32 else b.trunc(moved, ir.IntType(width))
    else:
        lo = _shuffle_word(b, b.trunc(bits, I32), lane_mask)
        hi = _shuffle_word(b, b.trunc(b.lshr(bits, ir.Constant(I64, 32)), I32), lane_mask)
        moved = b.or_(b.zext(lo, I64), b.shl(b.zext(hi, I64), ir.Constant(I64, 32)))
    return moved if isinstance(t, ir.IntType) else b.bitcast(moved, t)


def warp_allreduce(e, reducer: str, value: ir.Value, dtype) -> ir.Value:
    """Every lane ends with the combination of all 32 lanes' values."""
    for lane_mask in (16, 8, 4, 2, 1):
        value = emit_binary(e, reducer, value, shuffle_xor(e.b, value, lane_mask), dtype)
    return value


def identity(h, reducer: str) -> ir.Constant:
    t = h.shape.dtype
    return constant(t, IDENTITIES[reducer](t.numpy))


def emit_cooperative_row(e, spec, heroes, extras, outs, count, mode: str) -> None:
    """The body of a row-reduction kernel over ``count`` rows, each warp (or block) taking
    every n-th row."""
    b = e.b
    in_shape = heroes[0].operands[0].shape
    reduced = sorted(heroes[0].attrs["dimensions"])
    kept_dims = [in_shape.dims[d] for d in range(in_shape.rank) if d not in reduced]
    red_dims = [in_shape.dims[d] for d in reduced]
    row_length = 1
    for d in red_dims:
        row_length *= d
    tid = sreg(b, "tid.x")
    lane = b.and_(tid, i64(WARP - 1))
    warp = b.lshr(tid, i64(5))
    types = [value_type(h.shape.dtype) for h in heroes]
    accs = [b.alloca(t) for t in types]
    if mode == "warp":
        start = b.add(b.mul(sreg(b, "ctaid.x"), i64(BLOCK_WARPS)), warp)
        stride = b.mul(sreg(b, "nctaid.x"), i64(BLOCK_WARPS))
        first, step = lane, i64(WARP)
    else:
        start, stride = sreg(b, "ctaid.x"), sreg(b, "nctaid.x")
        first, step = tid, i64(WARP * BLOCK_WARPS)
        partials = []
        for h, t in zip(heroes, types):
            arr = ir.ArrayType(t, BLOCK_WARPS)
            g = ir.GlobalVariable(b.module, arr, f"{ptx_name(spec.name)}_{ptx_name(h.name)}_partials", addrspace=3)
            g.linkage = "internal"
            g.initializer = ir.Constant(arr, None)
            partials.append(g)
    is_first_lane = b.icmp_unsigned("==", first, i64(0))

    def row(r):
        e.reset()
        kept_index = delinearize(b, r, kept_dims) if kept_dims else []
        for h, acc in zip(heroes, accs):
            b.store(b.select(is_first_lane, e.value(h.operands[1], []), identity(h, spec.reducers[id(h)])), acc)

        def element(j):
            full = [None] * in_shape.rank
            kept = iter(kept_index)
            red = iter(delinearize(b, j, red_dims))
            for d in range(in_shape.rank):
                full[d] = next(red) if d in reduced else next(kept)
            fold_element(e, heroes, accs, extras, outs, full,
                         lambda h, a, v: emit_binary(e, spec.reducers[id(h)], a, v, h.shape.dtype))

        strided_loop(b, first, i64(row_length), step, element, "lane")
        totals = [warp_allreduce(e, spec.reducers[id(h)], b.load(acc), h.shape.dtype) for h, acc in zip(heroes, accs)]
        if mode == "block":
            lane0 = b.icmp_unsigned("==", lane, i64(0))
            with b.if_then(lane0):
                for g, total in zip(partials, totals):
                    b.store(total, b.gep(g, [i64(0), warp], inbounds=True))
            barrier(b)
            in_range = b.icmp_unsigned("<", lane, i64(BLOCK_WARPS))
            slot = b.select(in_range, lane, i64(0))
            totals = [warp_allreduce(e, spec.reducers[id(h)],
                                     b.select(in_range, b.load(b.gep(g, [i64(0), slot], inbounds=True)), identity(h, spec.reducers[id(h)])),
                                     h.shape.dtype) for h, g in zip(heroes, partials)]
        writer = b.icmp_unsigned("==", tid if mode == "block" else lane, i64(0))
        with b.if_then(writer):
            for h, total in zip(heroes, totals):
                ptr, s = outs[id(h)]
                e.store(ptr, s, kept_index, total)
        if mode == "block":
            barrier(b)  # the partials are read before the next row overwrites them

    strided_loop(b, start, count, stride, row, "row")


def strided_loop(b: ir.IRBuilder, start, stop, step, body, name: str) -> None:
    """for (i = start; i < stop; i += step) body(i)"""
    fn = b.function
    pre = b.block
    loop = fn.append_basic_block(f"{name}.body")
    done = fn.append_basic_block(f"{name}.done")
    b.cbranch(b.icmp_signed("<", start, stop), loop, done)
    b.position_at_end(loop)
    i = b.phi(I64, name=name)
    i.add_incoming(start, pre)
    body(i)
    nxt = b.add(i, step)
    i.add_incoming(nxt, b.block)
    b.cbranch(b.icmp_signed("<", nxt, stop), loop, done)
    b.position_at_end(done)
