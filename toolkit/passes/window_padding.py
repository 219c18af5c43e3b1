"""Window padding: the elementwise writes of a triangular loop nest computed over one length,
so that loop rolling can roll their trips (contraction padding's twin for writes).

``for i in range(n): C[i, :i + 1] += alpha * A[i, k] * A[:i + 1, k]`` writes windows whose
length grows with ``i``: the rows' trips differ in shape, so the loops of the nest cannot
share a body (PolyBench's syrk compiled 50 bodies, one a row). In a program that large, loop
rolling computes each such write over the whole row its window lies in, and keeps the row's
own values outside the window:

    T' = dynamic-update-slice(T, f(X[lo:hi], Y[lo:hi], s), .., lo, ..)
    ->   T' = dynamic-update-slice(T, select(lo <= iota < hi, f(X[0:N], Y[0:N], s),
                                             T[.., 0:N, ..]), .., 0, ..)

``f`` is elementwise, its windows are ``[lo:hi]`` of rows of one length ``N`` (the written
one's), read forwards or backwards (``y[:k] += alpha * np.flip(y[:k])``: ``whole_row``), and
nothing else reads its values. Every trip then has the same shapes and differs in
where it slices and the mask's bounds, integers loop rolling lifts into the loop state.

Exact: each element inside the window is what the unpadded write computed, from the same
operands by the same operations in the same order; each outside is the row's own value (a
select, never arithmetic with a mask). The lanes outside are computed and dropped; floating
point raises nothing (NumPy's error checks are not elementwise values of ``f``: a write whose
values reach anything but the write is left alone), so only float32 and float64 writes are
padded (an integer division of a lane outside could divide by zero). Rows of at most
``MAX_PADDED`` elements only, as for dots. A padded write that ends up in no rolled loop goes
back to the write it was."""
from __future__ import annotations

from collections import Counter
from typing import NamedTuple

import numpy as np

from ..ir.builder import ComputationBuilder, NameUniquer, PlannedAdds
from ..ir.nodes import Instruction, Module
from ..ir.ops import is_elementwise
from ..ir.shapes import Shape
from .contraction_padding import MAX_PADDED, paddable, row_window, whole_row, window_mask
from .rewriter import replace_entry, with_operands

MAX_CONE = 64  # instructions of one write's elementwise computation


class PaddedWrite:
    """What a padded write was: the write and the instructions only it used (in order), and
    the padded module's instructions for their other operands, to build it again."""

    __slots__ = ("write", "dropped", "outside")

    def __init__(self, write: Instruction, dropped: list, outside: dict):
        self.write, self.dropped, self.outside = write, dropped, outside

    def rebuild(self, b: ComputationBuilder, mapping: dict) -> Instruction | None:
        """The write as it was, in ``b`` (``mapping``: the padded module's instructions there);
        None where a value it read is computed inside a rolled loop and not kept after it
        (a loop whose trips end with the next write's elementwise computation: the padded
        write, exact, stays)."""
        if any(id(value) not in mapping for value in self.outside.values()):
            return None
        rebuilt: dict[int, Instruction] = {}

        def operand(o: Instruction) -> Instruction:
            found = rebuilt.get(id(o))
            return found if found is not None else mapping[id(self.outside[id(o)])]

        for inst in self.dropped:
            rebuilt[id(inst)] = b.adopt(with_operands(inst, [operand(o) for o in inst.operands]))
        return b.adopt(with_operands(self.write, [operand(o) for o in self.write.operands]))


def _written_row(write: Instruction):
    """``(value, its reshape or None, d, lo, hi)`` where ``write`` is a dynamic-update-slice at
    constant starts of a float32/float64 row window ``[lo:hi]`` (two or more elements, not the
    whole row) along dimension ``d``, every other dimension one element; else None."""
    target, update = write.operands[0], write.operands[1]
    starts = write.operands[2:]
    t = target.shape.dtype
    if t.numpy not in (np.float32, np.float64) or not all(s.opcode == "constant" for s in starts):
        return None
    long = [d for d, n in enumerate(update.shape.dims) if n != 1]
    if len(long) != 1:
        return None
    d = long[0]
    length, n = update.shape.dims[d], target.shape.dims[d]
    if length < 2 or length == n or n > MAX_PADDED:
        return None
    reshape = None
    value = update
    if update.shape.rank != 1:
        if update.opcode != "reshape" or update.operands[0].shape.rank != 1:
            return None
        reshape, value = update, update.operands[0]
    at = [int(s.attrs["literal"]) for s in starts]
    if any(not 0 <= a <= t_n - u_n
           for a, t_n, u_n in zip(at, target.shape.dims, update.shape.dims)):
        return None  # (a start the dynamic-update-slice would clamp: not where the mask says)
    return value, reshape, d, at[d], at[d] + length


def _cone(value: Instruction, lo: int, hi: int, n: int):
    """``(elementwise instructions, leaves)`` computing ``value`` from windows ``[lo:hi]`` of
    rows of length ``n`` and broadcast scalars; None where it reads anything else."""
    inner: dict[int, Instruction] = {}
    leaves: dict[int, tuple] = {}
    stack = [value]
    while stack:
        x = stack.pop()
        if id(x) in inner or id(x) in leaves:
            continue
        if x.shape != value.shape:
            return None
        window = row_window(x)
        if window is not None:
            if (window.lo, window.hi) != (lo, hi) or window.source.shape.dims[window.d] != n:
                return None
            leaves[id(x)] = (x, window)
        elif x.opcode == "broadcast" and x.operands[0].shape.rank == 0:
            leaves[id(x)] = (x, None)
        elif is_elementwise(x.opcode) and x.operands and len(inner) < MAX_CONE:
            inner[id(x)] = x
            stack.extend(x.operands)
        else:
            return None
    return inner, leaves


class _WritePlan(NamedTuple):
    value: Instruction  # the rank-1 window value written
    reshape: Instruction | None  # its reshape to the target's rank (None: rank 1)
    d: int  # the target's dimension the window runs along
    lo: int
    hi: int
    inner: dict  # id -> the elementwise instructions computing ``value``
    leaves: dict  # id -> (instruction, its row_window or None for a broadcast scalar)
    dropped: dict  # id -> the instructions only the write uses (padding drops them)


def _candidate(write: Instruction):
    """The write's row window and the computation of its value, where it has the form
    padding takes (``_plan`` then checks who else reads them), or None."""
    row = _written_row(write)
    if row is None:
        return None
    value, reshape, d, lo, hi = row
    cone = _cone(value, lo, hi, write.operands[0].shape.dims[d])
    return None if cone is None else (row, cone)


def _plan(candidate, uses: Counter) -> _WritePlan | None:
    """The padding of a write (``_candidate``'s), or None."""
    (value, reshape, d, lo, hi), (inner, leaves) = candidate
    if uses[id(value)] != 1 or reshape is not None and uses[id(reshape)] != 1:
        return None
    within: Counter = Counter(id(o) for x in inner.values() for o in x.operands)
    within[id(value)] += 1  # (the write's own read of it)
    if any(uses[k] != within[k] for k in inner):
        return None  # (a value of the write's computation read elsewhere too)
    dropped = dict(inner)
    if reshape is not None:
        dropped[id(reshape)] = reshape
    for k, (x, window) in leaves.items():
        if uses[k] == within[k]:  # (read by the write's computation alone)
            dropped[k] = x
            while window is not None and x is not window.slice:
                x = x.operands[0]  # (its reshape and slice, each read by the one above alone)
                if uses[id(x)] != 1:
                    break
                dropped[id(x)] = x
    return _WritePlan(value, reshape, d, lo, hi, inner, leaves, dropped)


def pad_window_writes(module: Module, min_writes: int, padded_dots: dict | None = None):
    """``(the module with its row-window writes padded, {id(padded write): PaddedWrite, ...})``,
    or None where fewer than ``min_writes`` can be. ``padded_dots``: contraction padding's
    ``{id(padded sum): PaddedDot}`` for ``module``, carried into the result (keyed and pointing
    at the new module's instructions: a rewritten instruction is a new object, and an id of one
    no longer held may be reused by another)."""
    entry = module.entry
    candidates = paddable(entry, "dynamic-update-slice", _candidate)
    if len(candidates) < min_writes:
        return None  # (before counting every value's readers: most programs stop here)
    uses: Counter = Counter(id(o) for inst in entry.instructions for o in inst.operands)
    uses[id(entry.root)] += 1
    plans = {}
    for k, candidate in candidates.items():
        plan = _plan(candidate, uses)
        if plan is not None:
            plans[k] = plan
    if len(plans) < min_writes:
        return None
    dropped_ids = set().union(*(plan.dropped for plan in plans.values()))
    b = ComputationBuilder(entry.name, NameUniquer.from_names(i.name for i in entry.instructions))
    planned = PlannedAdds(b)  # (hundreds of writes, each padded alike)
    mapping: dict[int, Instruction] = {}
    originals: dict[int, PaddedWrite] = {}
    order = {id(inst): k for k, inst in enumerate(entry.instructions)}
    for inst in entry.instructions:
        if id(inst) in dropped_ids:
            continue
        plan = plans.get(id(inst))
        if plan is None:
            operands = [mapping[id(o)] for o in inst.operands]
            mapping[id(inst)] = b.adopt(with_operands(inst, operands))
            continue
        mapping[id(inst)] = _padded(planned, inst, plan, mapping, order)
        gone = sorted(plan.dropped.values(), key=lambda x: order[id(x)])
        outside = {id(o): mapping[id(o)] for x in gone + [inst] for o in x.operands
                   if id(o) not in plan.dropped}
        originals[id(mapping[id(inst)])] = PaddedWrite(inst, gone, outside)
    for k, dot in (padded_dots or {}).items():
        total, moved = mapping.get(k), dot.moved(mapping)
        if total is not None and moved is not None:  # (else it stays padded: still exact)
            originals[id(total)] = moved
    return replace_entry(module, b.build(mapping[id(entry.root)])), originals


def _padded(b: PlannedAdds, write: Instruction, plan: _WritePlan, mapping: dict,
            order: dict):
    """The padded write in ``b``: the elementwise computation over the whole row inside
    ``[lo:hi]``, the row's own values outside it."""
    value, reshape, d, lo, hi, inner, leaves, _ = plan
    md = write.metadata  # (every instruction of the padded write is the write's)
    target, starts = mapping[id(write.operands[0])], write.operands[2:]
    n = target.shape.dims[d]
    t = target.shape.dtype
    row_shape = Shape(t, (n,))
    padded: dict[int, Instruction] = {}
    for k, (leaf, window) in leaves.items():
        if window is None:
            padded[k] = b.add("broadcast", (mapping[id(leaf.operands[0])],), {"dimensions": ()},
                              row_shape, md)
        else:
            padded[k] = whole_row(b, window._replace(source=mapping[id(window.source)]), md)
    for x in sorted(inner.values(), key=lambda x: order[id(x)]):
        padded[id(x)] = b.add(x.opcode, [padded[id(o)] for o in x.operands], dict(x.attrs),
                              metadata=md)
    at = [int(s.attrs["literal"]) for s in starts]
    spec = tuple((0, n, 1) if k == d else (at[k], at[k] + 1, 1) for k in range(len(at)))
    own = b.add("slice", (target,), {"slice": spec}, metadata=md)
    if own.shape.rank != 1:
        own = b.add("reshape", (own,), shape=row_shape, metadata=md)
    inside = window_mask(b, n, lo, hi, md)
    row = b.add("select", (inside, padded[id(value)], own), metadata=md)
    if reshape is not None:
        dims = tuple(n if k == d else 1 for k in range(len(at)))
        row = b.add("reshape", (row,), shape=Shape(t, dims), metadata=md)
    new_starts = [mapping[id(s)] for s in starts]
    new_starts[d] = b.constant(np.zeros((), starts[d].attrs["literal"].dtype), md)
    return b.add("dynamic-update-slice", (target, row, *new_starts), metadata=md)


def padded_writes_text(rolled: int, write: Instruction) -> str:
    """What a rolled loop's decision adds when its trips hold padded writes."""
    row = max(write.operands[1].shape.dims)
    return (f"; its {rolled} write(s) of varying length are computed over whole rows of {row} "
            "and selected into the row's own values outside the window (window padding)")
