"""Row reductions in which threads cooperate: a warp per row, a block per row, or a row split
into pieces over several blocks.

A row is the ``L`` contiguous input elements one output element reduces. With a warp per row
(rows of moderate length, or many rows) lane ``k`` folds elements k, k+32, ... (coalesced:
a warp reads 32 neighbours at a time), then five butterfly shuffles (``shfl.sync.bfly``)
combine the lanes and lane 0 writes. With a block per row (few, long rows) the block's
warps do the same, write one partial each to shared memory, and warp 0 combines those. With
few long rows (a full sum) each row is cut into pieces, a block each, and the last block to
finish a row combines its pieces' partial results (``_Split``).

Lane 0 starts from the reduction's init value, every other lane from the reducer's
identity, so the result is init ⊕ all elements in some order, as XLA allows for reductions.
Extra outputs of a multi-output fusion are written by whichever lane visits their element."""
from __future__ import annotations

import math

from llvmlite import ir

from ..llvm.elemental import delinearize, emit_binary, i64
from ..llvm.loops import for_range
from ..llvm.reduction import fold_element
from ..llvm.types import I32, value_type
from .primitives import (
    WARP,
    barrier,
    byte_size,
    fence,
    from_memory,
    global_array,
    identity,
    memory_type,
    ptx_name,
    shared_array,
    sreg,
    to_memory,
    warp_allreduce,
)

BLOCK_WARPS = 8  # 256 threads per block in every mode
TARGET_BLOCKS = 1024  # a split reduction aims at about this many blocks: ~8 per SM on an H100
MIN_PIECE = 4096  # elements: at least 16 per thread of a 256-thread block
MAX_PIECES = 1024


def row_mode(rows: int, row_length: int) -> tuple[str, int]:
    """(mode, pieces per row). thread: a thread per row (short rows); warp: a warp per row;
    block: a block per row; split: a row in several blocks' pieces, the last block to finish
    combining the pieces' partial results (few long rows: a full reduction, say)."""
    if row_length <= 8 or rows == 0:
        return "thread", 1
    if row_length <= 4096 or rows >= 4096:
        return "warp", 1
    pieces = min(-(-TARGET_BLOCKS // rows), -(-row_length // MIN_PIECE), MAX_PIECES)
    return ("split", pieces) if pieces > 1 else ("block", 1)


class _Block:
    """Combining one value per thread of a 256-thread block into thread 0's value."""

    def __init__(self, e, spec, heroes, types, lane, warp):
        self.e, self.spec, self.heroes, self.lane, self.warp = e, spec, heroes, lane, warp
        prefix = ptx_name(spec.name)
        self.partials = [
            shared_array(e.b, memory_type(t), BLOCK_WARPS, f"{prefix}_{ptx_name(h.name)}_warps")
            for h, t in zip(heroes, types)
        ]

    def allreduce(self, values: list) -> list:
        e, b = self.e, self.e.b
        values = [
            warp_allreduce(e, self.spec.reducers[id(h)], v, h.shape.dtype)
            for h, v in zip(self.heroes, values)
        ]
        with b.if_then(b.icmp_unsigned("==", self.lane, i64(0))):
            for g, v in zip(self.partials, values):
                b.store(to_memory(b, v, g), b.gep(g, [i64(0), self.warp], inbounds=True))
        barrier(b)
        in_range = b.icmp_unsigned("<", self.lane, i64(BLOCK_WARPS))
        slot = b.select(in_range, self.lane, i64(0))
        out = []
        for h, g, v in zip(self.heroes, self.partials, values):
            mine = from_memory(b, b.load(b.gep(g, [i64(0), slot], inbounds=True)), v.type)
            mine = b.select(in_range, mine, identity(h, self.spec.reducers[id(h)]))
            out.append(warp_allreduce(e, self.spec.reducers[id(h)], mine, h.shape.dtype))
        barrier(b)  # every warp has read the partials before they are written again
        return out


class _Split:
    """A row reduced by several blocks: each writes its piece's partial result to global
    scratch and counts itself in; the block that arrives last combines the row's partials,
    writes the result and resets the count for the next launch (the threadfence reduction of
    the CUDA samples). Launches of one kernel never overlap: toolkit runs one stream per
    device, so the module's scratch is the running launch's alone."""

    def __init__(self, b, spec, heroes, types, pieces: int, rows: int):
        prefix = ptx_name(spec.name)
        self.spec, self.heroes, self.pieces = spec, heroes, pieces
        self.types = types
        self.scratch = [
            global_array(b, memory_type(t), rows * pieces, f"{prefix}_{ptx_name(h.name)}_pieces")
            for h, t in zip(heroes, types)
        ]
        self.arrivals = global_array(b, I32, rows, f"{prefix}_arrivals")
        self.last_flag = shared_array(b, I32, 1, f"{prefix}_last")

    def finish(self, e, block: _Block, totals, tid, p, r, store) -> None:
        b = e.b
        first_thread = b.icmp_unsigned("==", tid, i64(0))
        flag = b.gep(self.last_flag, [i64(0), i64(0)], inbounds=True)
        with b.if_then(first_thread):
            for g, total in zip(self.scratch, totals):
                b.store(to_memory(b, total, g), b.gep(g, [i64(0), p], inbounds=True))
            fence(b)  # the partial is visible device-wide before the count says so
            counter = b.gep(self.arrivals, [i64(0), r], inbounds=True)
            before = b.atomic_rmw("add", counter, ir.Constant(I32, 1), "monotonic")
            b.store(
                b.zext(b.icmp_unsigned("==", before, ir.Constant(I32, self.pieces - 1)), I32), flag
            )
        barrier(b)
        last = b.icmp_unsigned("!=", b.load(flag), ir.Constant(I32, 0))
        with b.if_then(last):  # the same branch for every thread of the block
            fence(b)
            accs = [b.alloca(t) for t in self.types]
            for h, acc in zip(self.heroes, accs):
                b.store(identity(h, self.spec.reducers[id(h)]), acc)
            base = b.mul(r, i64(self.pieces))

            def gather(t):
                for h, g, acc, ty in zip(self.heroes, self.scratch, accs, self.types):
                    ptr = b.gep(g, [i64(0), b.add(base, t)], inbounds=True)
                    v = from_memory(
                        b, b.load_atomic(ptr, "monotonic", byte_size(memory_type(ty))), ty
                    )
                    b.store(
                        emit_binary(e, self.spec.reducers[id(h)], b.load(acc), v, h.shape.dtype),
                        acc,
                    )

            for_range(b, tid, i64(self.pieces), gather, "piece", step=i64(WARP * BLOCK_WARPS))
            store(block.allreduce([b.load(acc) for acc in accs]))
            with b.if_then(first_thread):
                b.store(ir.Constant(I32, 0), b.gep(self.arrivals, [i64(0), r], inbounds=True))


def emit_cooperative_row(e, spec, heroes, extras, outs, count, mode: str, pieces: int = 1) -> None:
    """The body of a row-reduction kernel over ``count`` work items: rows (warp, block) or
    pieces of rows (split), each warp or block taking every n-th item."""
    b = e.b
    in_shape = heroes[0].operands[0].shape
    reduced = sorted(heroes[0].attrs["dimensions"])
    kept_dims = [in_shape.dims[d] for d in range(in_shape.rank) if d not in reduced]
    red_dims = [in_shape.dims[d] for d in reduced]
    row_length = math.prod(red_dims)
    tid = sreg(b, "tid.x")
    lane = b.and_(tid, i64(WARP - 1))
    warp = b.lshr(tid, i64(5))
    types = [value_type(h.shape.dtype) for h in heroes]
    reducers = [spec.reducers[id(h)] for h in heroes]
    accs = [b.alloca(t) for t in types]
    if mode == "warp":
        start = b.add(b.mul(sreg(b, "ctaid.x"), i64(BLOCK_WARPS)), warp)
        stride = b.mul(sreg(b, "nctaid.x"), i64(BLOCK_WARPS))
        me, threads = lane, WARP
    else:
        start, stride = sreg(b, "ctaid.x"), sreg(b, "nctaid.x")
        me, threads = tid, WARP * BLOCK_WARPS
        block = _Block(e, spec, heroes, types, lane, warp)
    if mode == "split":
        chunk = -(-row_length // pieces)
        split = _Split(b, spec, heroes, types, pieces, max(1, math.prod(kept_dims)))

    def item(p):
        e.reset()
        if mode == "split":
            r, piece = b.udiv(p, i64(pieces)), b.urem(p, i64(pieces))
            lo = b.mul(piece, i64(chunk))
            hi = b.select(
                b.icmp_unsigned("<", b.add(lo, i64(chunk)), i64(row_length)),
                b.add(lo, i64(chunk)),
                i64(row_length),
            )
            starts_row = b.and_(
                b.icmp_unsigned("==", piece, i64(0)), b.icmp_unsigned("==", me, i64(0))
            )
        else:
            r, lo, hi = p, i64(0), i64(row_length)
            starts_row = b.icmp_unsigned("==", me, i64(0))
        kept_index = delinearize(b, r, kept_dims) if kept_dims else []
        for h, acc, op in zip(heroes, accs, reducers):
            b.store(b.select(starts_row, e.value(h.operands[1], []), identity(h, op)), acc)

        def element(j):
            full = [None] * in_shape.rank
            kept = iter(kept_index)
            red = iter(delinearize(b, j, red_dims))
            for d in range(in_shape.rank):
                full[d] = next(red) if d in reduced else next(kept)
            fold_element(e, heroes, accs, extras, outs, full,
                         lambda h, a, v: emit_binary(e, spec.reducers[id(h)], a, v, h.shape.dtype))

        for_range(b, b.add(lo, me), hi, element, "elem", step=i64(threads))
        values = [b.load(acc) for acc in accs]
        if mode == "warp":
            totals = [
                warp_allreduce(e, op, v, h.shape.dtype)
                for h, op, v in zip(heroes, reducers, values)
            ]
        else:
            totals = block.allreduce(values)
        def store(totals):
            with b.if_then(b.icmp_unsigned("==", me, i64(0))):
                for h, total in zip(heroes, totals):
                    ptr, s = outs[id(h)]
                    e.store(ptr, s, kept_index, total)

        if mode == "split":
            split.finish(e, block, totals, tid, p, r, store)
        else:
            store(totals)

    for_range(b, start, count, item, "item", step=stride)


