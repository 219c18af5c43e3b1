"""Counted loops and loop nests in LLVM IR (phi-based), shared by the CPU and GPU emitters."""
from __future__ import annotations

from llvmlite import ir

from .elemental import i64
from .types import I64


def for_range(b: ir.IRBuilder, start, stop, body, name: str = "i", step=None):
    """``for i in range(start, stop, step): body(i)`` with a phi-based loop (skipped when
    empty); ``step`` (default 1) may be a runtime value, as in a GPU grid-stride loop."""
    fn = b.function
    pre = b.block
    head = fn.append_basic_block(f"{name}.body")
    done = fn.append_basic_block(f"{name}.done")
    b.cbranch(b.icmp_signed("<", start, stop), head, done)
    b.position_at_end(head)
    i = b.phi(I64, name=name)
    i.add_incoming(start, pre)
    body(i)
    nxt = b.add(i, i64(1) if step is None else step, name=f"{name}.next")
    i.add_incoming(nxt, b.block)
    b.cbranch(b.icmp_signed("<", nxt, stop), head, done)
    b.position_at_end(done)


def nest(b: ir.IRBuilder, dims, body, begin=None, end=None, prefix: str = "d", split: int = 0):
    """Nested loops over ``dims``; dimension ``split`` (the outermost unless told) over
    [begin, end) when given."""
    def level(k: int, index: list):
        if k == len(dims):
            body(index)
            return
        lo = begin if (k == split and begin is not None) else i64(0)
        hi = end if (k == split and end is not None) else i64(dims[k])
        for_range(b, lo, hi, lambda i: level(k + 1, index + [i]), f"{prefix}{k}")

    level(0, [])
