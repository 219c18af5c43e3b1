"""Reductions with a thread per output element and few outputs (column sums of a tall
array, say), split further: a thread per (output, piece of its reduced elements)."""
from __future__ import annotations

import math

from llvmlite import ir

from ..llvm.elemental import delinearize, emit_binary, i64
from ..llvm.loops import for_range
from ..llvm.reduction import fold_element
from ..llvm.types import I32, value_type
from .primitives import (
    byte_size,
    fence,
    from_memory,
    global_array,
    identity,
    memory_type,
    ptx_name,
    to_memory,
)

TARGET_THREADS = 1 << 18  # a split thread-per-output reduction aims at this many threads
# one thread combines an output's pieces, one load each: this bounds that serial tail
MAX_THREAD_PIECES = 512


def thread_pieces(outputs: int, reduced: int) -> int:
    """Pieces per output element for a reduction with a thread per output: few outputs over
    long reductions leave the device idle, so each output's reduction is cut into pieces,
    one thread each, ~256K threads in all."""
    if reduced < 2048 or outputs == 0 or outputs >= TARGET_THREADS // 4:
        return 1
    return min(-(-TARGET_THREADS // outputs), -(-reduced // 256), MAX_THREAD_PIECES)


def emit_thread_split(e, spec, heroes, extras, outs, count, pieces: int, grid_stride) -> None:
    """A reduction with a thread per (output element, piece of its reduced elements), in
    the order that keeps a warp's loads together: item i is output i % K, piece i // K. Each
    thread writes its piece's partial and counts itself in; the last of an output's pieces to
    arrive combines them (the per-block scheme of ``_Split``, one thread at a time)."""
    b = e.b
    in_shape = heroes[0].operands[0].shape
    reduced = sorted(heroes[0].attrs["dimensions"])
    kept = [d for d in range(in_shape.rank) if d not in reduced]
    kept_dims = [in_shape.dims[d] for d in kept]
    red_dims = [in_shape.dims[d] for d in reduced]
    outputs, length = max(1, math.prod(kept_dims)), math.prod(red_dims)
    chunk = -(-length // pieces)
    prefix = ptx_name(spec.name)
    types = [value_type(h.shape.dtype) for h in heroes]
    reducers = [spec.reducers[id(h)] for h in heroes]
    scratch = [
        global_array(b, memory_type(t), outputs * pieces, f"{prefix}_{ptx_name(h.name)}_pieces")
        for h, t in zip(heroes, types)
    ]
    arrivals = global_array(b, I32, outputs, f"{prefix}_arrivals")
    accs = [b.alloca(t) for t in types]

    def item(i):
        e.reset()
        out, piece = b.urem(i, i64(outputs)), b.udiv(i, i64(outputs))
        kept_index = delinearize(b, out, kept_dims) if kept_dims else []
        first = b.icmp_unsigned("==", piece, i64(0))
        for h, acc, op in zip(heroes, accs, reducers):
            b.store(b.select(first, e.value(h.operands[1], []), identity(h, op)), acc)
        lo = b.mul(piece, i64(chunk))
        hi = b.select(
            b.icmp_unsigned("<", b.add(lo, i64(chunk)), i64(length)),
            b.add(lo, i64(chunk)),
            i64(length),
        )

        def element(j):
            full = [None] * in_shape.rank
            for d, v in zip(kept, kept_index):
                full[d] = v
            for d, v in zip(reduced, delinearize(b, j, red_dims)):
                full[d] = v
            fold_element(e, heroes, accs, extras, outs, full,
                         lambda h, a, v: emit_binary(e, spec.reducers[id(h)], a, v, h.shape.dtype))

        for_range(b, lo, hi, element, "elem")
        slot = b.add(b.mul(out, i64(pieces)), piece)
        for g, acc in zip(scratch, accs):
            b.store(to_memory(b, b.load(acc), g), b.gep(g, [i64(0), slot], inbounds=True))
        fence(b)
        counter = b.gep(arrivals, [i64(0), out], inbounds=True)
        before = b.atomic_rmw("add", counter, ir.Constant(I32, 1), "monotonic")
        with b.if_then(b.icmp_unsigned("==", before, ir.Constant(I32, pieces - 1))):
            fence(b)
            for h, acc, op in zip(heroes, accs, reducers):
                b.store(identity(h, op), acc)
            base = b.mul(out, i64(pieces))

            def gather(t):
                for h, g, acc, ty, op in zip(heroes, scratch, accs, types, reducers):
                    ptr = b.gep(g, [i64(0), b.add(base, t)], inbounds=True)
                    v = from_memory(
                        b, b.load_atomic(ptr, "monotonic", byte_size(memory_type(ty))), ty
                    )
                    b.store(emit_binary(e, op, b.load(acc), v, h.shape.dtype), acc)

            for_range(b, i64(0), i64(pieces), gather, "piece")
            for h, acc in zip(heroes, accs):
                ptr, s = outs[id(h)]
                e.store(ptr, s, kept_index, b.load(acc))
            b.store(ir.Constant(I32, 0), counter)

    grid_stride(b, count, item)
