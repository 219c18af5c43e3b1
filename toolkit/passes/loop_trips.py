"""Loop rolling's comparison of trips (``loop_rolling``): what every trip must agree on (an
instruction's token, its cheaper sketch), how long a run of alike trips is (``AlikeRuns``),
and what each operand of a trip is (``classify``: the same value every trip, a value of the
trip or of the trip before, a constant, an integer in arithmetic progression), checked trip by
trip (``trip_checks``, ``trip_agrees``). The thresholds that decide what rolls are
``loop_rolling``'s."""
from __future__ import annotations

import numpy as np

from ..ir.nodes import Instruction
from ..ir.queries import without_known_trip_count
from ..ir.shapes import Shape
from ..ir.structural import frozen_attribute
from .loop_bodies import counted, literal


class Tokens:
    """Each instruction's token as an int, computed when first asked for (the instructions of
    candidate runs only): what every trip must agree on (opcode, shape, attributes: a slice's
    extents, not its starts; which operands are constants, with their shapes). Attribute maps
    and shapes are shared objects (the builder's), so an instruction is first looked up by the
    identities of what it holds, and keyed by value only the first time they are seen."""

    def __init__(self, seq: list[Instruction]):
        self.seq = seq
        self.values = [-1] * len(seq)
        self.array = np.full(len(seq), -1, np.int64)  # (the same, for AlikeRuns' scans)
        self._keys: dict[int, tuple] = {}  # exact keys of called computations
        self._by_identity: dict[tuple, int] = {}
        self._codes: dict[tuple, int] = {}

    def at(self, k: int) -> int:
        code = self.values[k]
        if code < 0:
            code = self.values[k] = self._code(self.seq[k])
            self.array[k] = code
        return code

    def fill(self, lo: int, hi: int) -> None:
        """Compute the tokens of positions ``lo`` to ``hi`` not known yet."""
        for k in np.flatnonzero(self.array[lo:hi] < 0).tolist():
            self.at(lo + k)

    def _code(self, inst: Instruction) -> int:
        operands = inst.operands
        # (objects the instructions hold, alive while this runs: their ids stay theirs; one
        # or two operands, most instructions, without a generator)
        if len(operands) == 1:
            o = operands[0]
            held = (o.opcode == "constant", id(o.shape))
        elif len(operands) == 2:
            o, p = operands
            held = (o.opcode == "constant", id(o.shape), p.opcode == "constant", id(p.shape))
        else:
            held = tuple((o.opcode == "constant", id(o.shape)) for o in operands)
        identity = (inst.opcode, id(inst.shape), id(inst.attrs), held)
        code = self._by_identity.get(identity)
        if code is None:
            key = (inst.opcode, inst.shape, frozen_attributes(inst, self._keys),
                   tuple((o.opcode == "constant", o.shape) for o in operands))
            code = self._by_identity[identity] = self._codes.setdefault(key, len(self._codes))
        return code


def frozen_attributes(inst: Instruction, keys: dict[int, tuple]) -> tuple:
    attrs = []
    # (a loop rolled in an earlier round: the trips of its nest's next loop hold it, with a
    # trip count that may differ trip by trip; its count is loop state, as its bounds are)
    given = inst.attrs if inst.opcode != "while" else without_known_trip_count(inst.attrs)
    for k, v in given.items():
        if k == "slice" and inst.opcode == "slice":
            attrs.append((k, tuple((hi - lo, stride) for lo, hi, stride in v)))
        else:
            attrs.append((k, frozen_attribute(v, keys)))
    return tuple(attrs)


def is_value(literal: np.ndarray, value: int) -> bool:
    """Does ``literal`` hold exactly ``value`` (bit for bit, in its own type)?"""
    try:
        want = np.array(value, literal.dtype)
    except OverflowError:
        return False
    return int(want) == value and want.tobytes() == literal.tobytes()


def describe(index, base: int, inst: Instruction, k: int):
    """Operand ``k`` of ``inst`` (at ``base``) as trip 0 or 1 sees it."""
    o = inst.operands[k]
    if o.opcode == "constant":
        return ("constant", o)
    q = index.get(o)
    if q is None:
        return ("outer", o)
    return ("at", base - q, q)


def classify(seq, index, i: int, period: int):
    """Each operand's class from the first two trips, and the varying slice starts; None if
    they disagree in a way no class explains."""
    classes, slice_starts = [], {}
    for c in range(period):
        a, b = seq[i + c], seq[i + period + c]
        row = []
        for k in range(len(a.operands)):
            d0 = describe(index, i + c, a, k)
            d1 = describe(index, i + period + c, b, k)
            if d0[0] == "constant" and d1[0] == "constant":
                l0, l1 = literal(d0[1]), literal(d1[1])
                if l0.dtype == l1.dtype and l0.shape == l1.shape and \
                        l0.tobytes() == l1.tobytes():
                    row.append(("constant", d0[1]))
                elif counted(l0) and counted(l1) and l0.dtype == l1.dtype:
                    row.append(("progression", int(l0), int(l1) - int(l0), l0.dtype))
                else:
                    return None
            elif d0[0] == "outer" and d1[0] == "outer" and d0[1] is d1[1]:
                row.append(("invariant", d0[1]))
            elif d0[0] == "at" and d1[0] == "at" and d0[2] == d1[2] and d0[2] < i:
                row.append(("invariant", seq[d0[2]]))
            elif d0[0] == "at" and d1[0] == "at" and d0[1] == d1[1]:
                distance = d0[1]
                if distance <= c:
                    row.append(("local", c - distance))
                elif distance <= c + period and i + c - distance >= 0:
                    row.append(("carried", c - distance + period))
                else:
                    return None
            else:
                return None
        classes.append(row)
        if a.opcode == "slice":
            # every slice's starts, varying or not: the token leaves them out, so each trip's
            # are checked against the progression (a step of 0: the same start every trip)
            s0, s1 = a.attrs["slice"], b.attrs["slice"]
            if s0 != s1 and any(stride != 1 for _, _, stride in s0):
                return None
            slice_starts[c] = tuple((lo0, lo1 - lo0) for (lo0, _, _), (lo1, _, _)
                                    in zip(s0, s1))
    return classes, slice_starts


def varies(starts) -> bool:
    return any(step for _, step in starts)


def trip_checks(period: int, classes, slice_starts) -> list:
    """What every later trip must show at each place, from the first two trips' classes:
    (place, [(operand, check, wanted)], slice starts or None); checks: 0 the same invariant,
    1 the value made that many places from the trip's start (a carried one: from the trip
    before), 2 a constant of these bytes, 3 a progression's value."""
    checks = []
    for c in range(period):
        row = []
        for k, cls in enumerate(classes[c]):
            kind = cls[0]
            if kind == "invariant":
                row.append((k, 0, cls[1]))
            elif kind == "local":
                row.append((k, 1, cls[1]))
            elif kind == "carried":
                row.append((k, 1, cls[1] - period))
            elif kind == "constant":
                row.append((k, 2, literal(cls[1]).tobytes()))
            else:
                row.append((k, 3, cls))
        checks.append((c, row, slice_starts.get(c)))
    return checks


def trip_agrees(seq, index, base: int, t: int, checks) -> bool:
    """Does trip ``t``, from ``base``, show what ``trip_checks`` asks?"""
    for c, row, starts in checks:
        inst = seq[base + c]
        operands = inst.operands
        for k, check, wanted in row:
            o = operands[k]
            if check == 0:
                if o is not wanted:
                    return False
            elif check == 1:
                if index.get(o) != base + wanted:
                    return False
            elif check == 2:
                if o.opcode != "constant" or literal(o).tobytes() != wanted:
                    return False
            elif o.opcode != "constant" or not is_value(literal(o), wanted[1] + t * wanted[2]):
                return False
        if starts is not None and any(
                lo != first + t * step
                for (lo, _, _), (first, step) in zip(inst.attrs["slice"], starts)):
            return False
    return True


def sketch(inst: Instruction) -> tuple:
    """What a trip's instruction must share with the same one of every other trip, cheap to
    compute: its opcode, dimensions and operand count (``Tokens`` holds the rest)."""
    shape = inst.shape
    return (inst.opcode, shape.dims if isinstance(shape, Shape) else None, len(inst.operands))


class AlikeRuns:
    """How many consecutive trips of a period, from a start, have equal values position by
    position (``at(k)``, an int; ``array``, the same as far as ``fill(lo, hi)`` has made them
    known), remembered per period. A start that does not roll is followed by the next start in
    the same run: it reuses the run's scan instead of walking the run again (which made a long
    alike run quadratic: 65 s on a 40k-instruction convolution). The scan compares stretches
    at once (NumPy), each twice as long as the one before."""

    def __init__(self, at, array: np.ndarray, fill=None):
        self.at, self.array, self.fill = at, array, fill
        self.n = len(array)
        self.scanned: dict[int, tuple[int, int]] = {}  # period -> (from, first mismatch)

    def trips(self, i: int, period: int, limit: int) -> int:
        start = i + period
        lo, end = self.scanned.get(period, (-1, -1))
        if not lo <= start <= end:  # every position in [lo, end) equals the one a period back
            end = self._first_mismatch(start, period)
            self.scanned[period] = (start, end)
        return max(1, min(limit, 1 + (end - start) // period))

    def _first_mismatch(self, start: int, period: int) -> int:
        at, n = self.at, self.n
        if start >= n or at(start) != at(start - period):
            return start  # (most candidates end here: one comparison, no array)
        array, k, stretch = self.array, start, 64
        while k < n:
            stop = min(n, k + stretch)
            if self.fill is not None:
                self.fill(k - period, stop)
            differ = np.flatnonzero(array[k:stop] != array[k - period:stop - period])
            if differ.size:
                return k + int(differ[0])
            k, stretch = stop, 2 * stretch
        return n
