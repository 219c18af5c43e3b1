"""Counted loops and loop nests in LLVM IR (phi-based), shared by the CPU and GPU emitters."""
from __future__ import annotations

import math

from llvmlite import ir

from .emitter import i64
from .types import I64


class LoopID(ir.values.MDValue):
    """A loop's ``distinct !{!self, option...}`` metadata node, which LLVM's loop passes read
    from the latch branch (llvmlite's ``add_metadata`` cannot build a node that names itself)."""

    def __init__(self, module: ir.Module, options):
        super().__init__(
            module, [module.add_metadata(list(o)) for o in options], name=str(len(module.metadata))
        )

    def descr(self, buf):
        buf += (
            "distinct !{"
            + ", ".join([self.get_reference()] + [o.get_reference() for o in self.operands])
            + "}",
            "\n",
        )

    __eq__ = object.__eq__  # identity: the operands name the node itself
    __ne__ = object.__ne__
    __hash__ = object.__hash__


# A loop body longer than this is vectorised with its tail folded into the vector loop (masked)
# instead of followed by a vector and a scalar copy of the body for the last elements: for a
# chain of ten tanh, LLVM's optimisation 36 -> 19 ms, code generation 29 -> 9 ms, machine code
# 9.0 -> 4.0 KB. Short bodies (memory-bound: x + 1) keep LLVM's own choice, which compiles fast.
FOLD_TAIL_INSTRUCTIONS = 96
FOLD_TAIL = ("llvm.loop.vectorize.predicate.enable", ir.IntType(1)(1))
# Over this many elements, a long body also keeps two vectors in flight per iteration. A long
# body is a long chain of dependent operations (a division, then a polynomial, ... per tanh):
# left to itself LLVM interleaves one vector, and out-of-order execution cannot reach across
# into the next iteration. Ten chained tanh on 4M floats: 19.5 -> 12.7 ms (four vectors:
# 8.7 ms), for about twice the compile time, which only a large array repays.
INTERLEAVE_ELEMENTS = 1 << 20
INTERLEAVE_TWO = ("llvm.loop.interleave.count", ir.IntType(32)(2))


def _instruction_count(fn: ir.Function) -> int:
    return sum(len(block.instructions) for block in fn.blocks)


def for_range(
    b: ir.IRBuilder,
    start,
    stop,
    body,
    name: str = "i",
    step=None,
    fold_tail_over: int | None = None,
    elements: int = 0,
):
    """``for i in range(start, stop, step): body(i)`` with a phi-based loop (skipped when
    empty); ``step`` (default 1) may be a runtime value, as in a GPU grid-stride loop. With
    ``fold_tail_over``, a body longer than that asks the vectoriser to fold the tail (and, for
    a kernel of ``elements`` over INTERLEAVE_ELEMENTS, to interleave two vectors)."""
    fn = b.function
    pre = b.block
    head = fn.append_basic_block(f"{name}.body")
    done = fn.append_basic_block(f"{name}.done")
    b.cbranch(b.icmp_signed("<", start, stop), head, done)
    b.position_at_end(head)
    i = b.phi(I64, name=name)
    i.add_incoming(start, pre)
    size = _instruction_count(fn) if fold_tail_over is not None else 0
    body(i)
    nxt = b.add(i, i64(1) if step is None else step, name=f"{name}.next")
    i.add_incoming(nxt, b.block)
    latch = b.cbranch(b.icmp_signed("<", nxt, stop), head, done)
    if fold_tail_over is not None and _instruction_count(fn) - size > fold_tail_over:
        options = [FOLD_TAIL, INTERLEAVE_TWO] if elements > INTERLEAVE_ELEMENTS else [FOLD_TAIL]
        latch.set_metadata("llvm.loop", LoopID(fn.module, options))
    b.position_at_end(done)


def nest(b: ir.IRBuilder, dims, body, begin=None, end=None, prefix: str = "d", split: int = 0,
         fold_tail_over: int | None = None):
    """Nested loops over ``dims``; dimension ``split`` (the outermost unless told) over
    [begin, end) when given; ``fold_tail_over`` applies to the innermost loop."""
    elements = math.prod(dims)

    # (``inner`` is the function itself, handed in: a function naming itself through its cell is
    # a cycle, which kept the kernel's emitter and its LLVM IR alive until the collector ran)
    def level(k: int, index: list, inner):
        if k == len(dims):
            body(index)
            return
        lo = begin if (k == split and begin is not None) else i64(0)
        hi = end if (k == split and end is not None) else i64(dims[k])
        fold = fold_tail_over if k == len(dims) - 1 else None
        for_range(
            b,
            lo,
            hi,
            lambda i: inner(k + 1, index + [i], inner),
            f"{prefix}{k}",
            fold_tail_over=fold,
            elements=elements,
        )

    level(0, [], level)
