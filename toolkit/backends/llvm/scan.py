"""Prefix scans (a ``reduce-window`` that is one, ir/windows.compiled_scan): each line along
the scanned axis is one running fold, ``out[i] = out[i - 1] ⊕ x[i]`` from ``out[0] = init ⊕
x[0]``, in NumPy's sequential order (np.add.accumulate's), so the bits are NumPy's. Shared by
the CPU emitter (a loop over lines around the axis's sequential loop, the innermost lines
contiguous, which vectorise) and the GPU emitter (a thread per line)."""
from __future__ import annotations

from llvmlite import ir

from ...ir.nodes import Instruction
from .elemental import emit_elementwise_binary
from .emitter import ElementalEmitter, i64
from .loops import for_range


def scan_element(e: ElementalEmitter, scan: Instruction, reducer: str, out_ptr, axis: int,
                 index: list) -> None:
    """Writes element ``index`` of the scan: its operand's element folded into the element
    before it along ``axis`` (written already), or into the init value at the first."""
    b = e.b
    t = scan.shape.dtype
    operand, init = scan.operands
    e.reset()
    x = e.value(operand, index)
    i = index[axis]
    first = b.icmp_signed("==", i, i64(0))
    before = list(index)
    before[axis] = b.select(first, i64(0), b.sub(i, i64(1)))  # (in bounds; unused at the first)
    earlier = e.load(out_ptr, scan.shape, before, invariant=False)
    running = b.select(first, e.value(init, []), earlier)
    e.store(out_ptr, scan.shape, index, emit_elementwise_binary(e, reducer, running, x, t))


def scan_line(e: ElementalEmitter, scan: Instruction, reducer: str, out_ptr, axis: int,
              outer: list, inner: list, running) -> None:
    """Writes one whole line, its running value carried in ``running`` (an alloca in the entry
    block, so it lives in a register): a GPU thread's line, with no reload of what it wrote."""
    b = e.b
    e.reset()
    b.store(e.value(scan.operands[1], []), running)

    def step(i):
        e.reset()
        index = line_index(outer, i, inner)
        value = emit_elementwise_binary(e, reducer, b.load(running),
                                        e.value(scan.operands[0], index), scan.shape.dtype)
        b.store(value, running)
        e.store(out_ptr, scan.shape, index, value)

    for_range(b, i64(0), i64(scan.shape.dims[axis]), step, "scan")


def scan_lines(dims, axis: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The dimensions before and after the scanned axis: a line is one index of each."""
    return tuple(dims[:axis]), tuple(dims[axis + 1:])


def line_index(outer: list, i: ir.Value, inner: list) -> list:
    return [*outer, i, *inner]
