"""Contraction padding: the dots of a triangular loop nest computed over one length, so that
loop rolling can roll its trips.

``for j in range(i): A[i, j] -= A[i, :j] @ A[:j, j]`` unrolls into trips that differ in the
length of the vectors they contract (``j``). No two trips are alike, so loop rolling
(``loop_rolling.py``) left them unrolled: PolyBench's cholesky, lu, ludcmp and trisolv traced
into 20k-86k instructions whose compile took 9-23 s. In a program that large, loop rolling
first computes each such dot over the whole row or column its two vectors are windows of,
with the products outside the window masked out:

    dot(X[lo:hi], Y[lo:hi])  ->  reduce(select(lo <= iota < hi, X[0:N] * Y[0:N], 0), 0, add)

A window read backwards (``np.dot(np.flip(r[:k]), y[:k])``, Levinson-Durbin's recursion) is
padded as its reversed row shifted to line up with the window (``whole_row``).

Every trip then has the same shapes, and differs only in where it slices and the mask's bounds,
integers in arithmetic progression: the inner loops roll, and, all alike, share one body. A
padded dot that ends up in no rolled loop goes back to the dot it was.

Exact where it matters: a product outside the window is never added (a select, not a multiply
by a 0/1 mask, which would turn an inf there into NaN); the sum starts from the dot's +0.0 and
adding +0.0 changes no partial sum (one that starts from +0.0 is never -0.0); an empty window
gives the empty dot's +0.0; integer sums wrap as the dot's do. The order in which the products
are added is the reduction's, not the BLAS call's, so a float result may differ from NumPy's in
its last bits, as any compiled sum may (README; the rolled loop's decision says so). float16
dots, which NumPy adds in float32, are left alone. Only rows of at most ``MAX_PADDED`` elements
are padded, so a trip computes at most that many products more than it did; a window of one
element is left alone (a dot of length 1 is a multiply to the simplifier), and so is a window
that is the whole row already."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..ir.builder import ComputationBuilder, NameUniquer, PlannedAdds, binary_region
from ..ir.dtypes import from_numpy
from ..ir.nodes import Instruction, Module
from ..ir.shapes import Shape
from .rewriter import replace_entry, with_operands

MAX_PADDED = 4096  # elements of a padded row (what one trip may compute more than before)
_S64 = from_numpy(np.dtype(np.int64))


class RowWindow(NamedTuple):
    """A window ``[lo:hi]`` along dimension ``d`` of ``source`` (sliced by ``slice``, every
    other dimension one element), read in reverse order where ``flipped``."""
    source: Instruction
    slice: Instruction
    d: int
    lo: int
    hi: int
    flipped: bool


def row_window(x: Instruction) -> RowWindow | None:
    """The window ``x`` is (stride 1, two or more elements, rank 1): ``A[i, :j]``, ``A[:j,
    j]``, ``x[:i]`` (a slice, squeezed by a reshape where rank > 1), or such a window reversed
    (``np.flip(x[:k])``, ``x[:k][::-1]``); else None."""
    flipped = x.opcode == "reverse"
    if flipped:
        if x.shape.rank != 1:
            return None
        x = x.operands[0]
    s = x.operands[0] if x.opcode == "reshape" else x
    if s.opcode != "slice" or s is x and x.shape.rank != 1:
        return None
    spec = s.attrs["slice"]
    long = [d for d, (lo, hi, stride) in enumerate(spec) if hi - lo != 1]
    if len(long) != 1 or x.shape.dims != (spec[long[0]][1] - spec[long[0]][0],):
        return None
    d = long[0]
    lo, hi, stride = spec[d]
    n = s.operands[0].shape.dims[d]
    if stride != 1 or hi - lo < 2 or n > MAX_PADDED or hi - lo == n:  # (whole: nothing to pad)
        return None
    return RowWindow(s.operands[0], s, d, lo, hi, flipped)


def _padded_pair(dot: Instruction):
    """The two windows of a vector dot that can be padded together (the same bounds in rows
    of the same length), or None."""
    a = dot.attrs
    if a.get("lhs_batch_dims") or a.get("rhs_batch_dims") or dot.shape.rank != 0:
        return None
    lhs, rhs = dot.operands
    t = dot.shape.dtype
    # (float16 is left alone: NumPy's half dot adds in float32, which a half reduce would not)
    if lhs.shape.dtype != t or rhs.shape.dtype != t or not (
            t.is_integer or t.numpy in (np.float32, np.float64)):
        return None
    left, right = row_window(lhs), row_window(rhs)
    if left is None or right is None or (left.lo, left.hi) != (right.lo, right.hi):
        return None
    if left.source.shape.dims[left.d] != right.source.shape.dims[right.d]:
        return None
    return left, right


def whole_row(b: ComputationBuilder | PlannedAdds, window: RowWindow, md) -> Instruction:
    """The window's values where they lie in its whole row (rank 1): inside ``[lo:hi]``,
    element ``m`` is the window's element ``m - lo``; outside, whatever the row holds (a
    flipped window: zeros or the row reversed). Its row sliced from its source; for a flipped
    window, that row reversed and shifted, ``row[lo + hi - 1 - m]`` (a dynamic-slice at ``2n -
    lo - hi`` of the reversed row padded by ``n`` zeros each side: never clamped, and the
    start is an integer loop rolling lifts into the loop state, as a slice's start is)."""
    source, s, d, lo, hi, flipped = window
    n = source.shape.dims[d]
    spec = tuple((0, n, 1) if k == d else triple for k, triple in enumerate(s.attrs["slice"]))
    row = b.add("slice", (source,), {"slice": spec}, metadata=md)
    if row.shape.rank != 1:
        row = b.add("reshape", (row,), shape=Shape(row.shape.dtype, (n,)), metadata=md)
    if not flipped:
        return row
    t = row.shape.dtype
    backwards = b.add("reverse", (row,), {"dimensions": (0,)}, row.shape, md)
    zero = b.constant(np.zeros((), t.numpy), md)
    padded = b.add("pad", (backwards, zero), {"padding": ((n, n, 0),)}, Shape(t, (3 * n,)), md)
    start = b.constant(np.array(2 * n - lo - hi, np.int64), md)
    return b.add("dynamic-slice", (padded, start), {"dynamic_slice_sizes": (n,)}, row.shape, md)


def window_mask(b: ComputationBuilder | PlannedAdds, n: int, lo: int, hi: int,
                md) -> Instruction:
    """``lo <= iota < hi`` over a row of ``n``: the mask of a window padded to its row (its
    bounds are broadcast integers loop rolling lifts into the loop state: ``_mask_bounds``)."""
    index = b.add("iota", (), {"iota_dimension": 0}, Shape(_S64, (n,)), md)

    def bound(value: int, direction: str) -> Instruction:
        scalar = b.constant(np.array(value, np.int64), md)
        edge = b.add("broadcast", (scalar,), {"dimensions": ()}, Shape(_S64, (n,)), md)
        return b.add("compare", (index, edge), {"direction": direction}, metadata=md)

    return b.add("and", (bound(lo, "GE"), bound(hi, "LT")), metadata=md)


def paddable(entry, opcode: str, form) -> dict:
    """``{id(instruction): what form(instruction) found}`` for the entry's instructions of
    ``opcode`` that have the form a padding takes (``form`` returns None where not)."""
    found = {}
    for inst in entry.instructions:
        if inst.opcode == opcode:
            shape = form(inst)
            if shape is not None:
                found[id(inst)] = shape
    return found


def pad_contractions(module: Module, min_dots: int):
    """``(the module with its vector dots padded, {id(padded sum): PaddedDot})``, or None
    where fewer than ``min_dots`` can be. The dots loop rolling then leaves unrolled go back
    to what they were (``PaddedDot.rebuild``), so padding only ever serves a rolled loop."""
    entry = module.entry
    pairs = paddable(entry, "dot", _padded_pair)
    if len(pairs) < min_dots:
        return None
    names = NameUniquer.from_names(c.name for c in module.computations)
    adders: dict = {}
    b = ComputationBuilder(entry.name, NameUniquer.from_names(i.name for i in entry.instructions))
    adopt, planned = b.adopt, PlannedAdds(b)  # (thousands of dots, each padded alike)
    mapping: dict[int, Instruction] = {}
    originals: dict[int, PaddedDot] = {}
    for inst in entry.instructions:
        pair = pairs.get(id(inst))
        if pair is None:
            mapping[id(inst)] = adopt(with_operands(inst, [mapping[id(o)]
                                                           for o in inst.operands]))
            continue
        md = inst.metadata
        t = inst.shape.dtype
        left, right = [w._replace(source=mapping[id(w.source)]) for w in pair]
        n = left.source.shape.dims[left.d]
        product = planned.add("multiply", (whole_row(planned, left, md),
                                           whole_row(planned, right, md)), metadata=md)
        inside = window_mask(planned, n, left.lo, left.hi, md)
        zero = planned.constant(np.zeros((), t.numpy), md)
        zeros = planned.add("broadcast", (zero,), {"dimensions": ()}, product.shape, md)
        kept = planned.add("select", (inside, product, zeros), metadata=md)
        adder = adders.get(t)
        if adder is None:
            adder = adders[t] = binary_region(
                ComputationBuilder(names.fresh("padded_sum"), NameUniquer()), "add", t)
        total = planned.add("reduce", (kept, zero), {"dimensions": (0,), "to_apply": adder},
                            metadata=md)
        mapping[id(inst)] = total
        originals[id(total)] = PaddedDot(inst, tuple(zip((left, right), inst.operands)))
    new_entry = b.build(mapping[id(entry.root)])
    return replace_entry(module, new_entry, tuple(adders.values())), originals


class PaddedDot:
    """What a padded sum was: the dot and its two windows (``row_window``'s) with the operand
    each was, to build it again where no rolled loop holds it."""

    __slots__ = ("dot", "windows")

    def __init__(self, dot: Instruction, windows: tuple):
        self.dot, self.windows = dot, windows

    def moved(self, mapping: dict) -> PaddedDot | None:
        """The same dot, its windows' sources looked up in ``mapping`` (a later rewrite's,
        by id); None where one is gone."""
        windows = []
        for window, operand in self.windows:
            source = mapping.get(id(window.source))
            if source is None:
                return None
            windows.append((window._replace(source=source), operand))
        return PaddedDot(self.dot, tuple(windows))

    def rebuild(self, b: ComputationBuilder, mapping: dict) -> Instruction:
        """The dot, built again in ``b`` from its windows' sources (``mapping``: the padded
        module's instructions there)."""
        operands = []
        for window, operand in self.windows:
            operands.append(_rebuilt_window(b, mapping, window, operand))
        return b.adopt(with_operands(self.dot, operands))


def _rebuilt_window(b: ComputationBuilder, mapping: dict, window: RowWindow,
                   operand: Instruction) -> Instruction:
    """``operand`` (the window: its slice, the reshape and reverse above it) built again in
    ``b`` from the padded module's instruction for its source (``mapping``)."""
    chain = [operand]
    while chain[-1] is not window.slice:
        chain.append(chain[-1].operands[0])
    x = mapping[id(window.source)]
    for inst in reversed(chain):
        x = b.add(inst.opcode, (x,), dict(inst.attrs), inst.shape, inst.metadata)
    return x


def padded_text(rolled: int, row: int) -> str:
    """What a rolled loop's decision adds when its trips hold padded dots."""
    return (f"; its {rolled} dot(s) of varying length are computed over whole rows of {row} "
            "with the products outside masked (contraction padding: added in order, as a "
            "reduction adds, so the last bits may differ from BLAS's)")
