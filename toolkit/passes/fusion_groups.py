"""Fusion's model of a kernel being formed: a group of instructions, the index paths by which
the group reads each member, and the facts about single instructions its decisions ask (is it
expensive, free to duplicate, fusible, does it compute per element)."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..ir.nodes import Instruction
from ..ir.ops import OPS, GroupOp


# Index paths: how a fusion reads a member. A path is the chain of index-changing instructions
# (slices, transposes, broadcasts ...) between the fusion's output and the member; elementwise
# users keep their user's paths, since the emitter computes a value once per (instruction,
# index). A member reached by two different paths is computed twice per output element (a
# stencil's three slices of one array: three times), and fusing that compounds over time steps
# (3^T). As XLA bounds it (FusionNodeIndexingEvaluation's allowed code duplication, and
# ReusesOperandElements for expensive producers), a cheap producer fuses while it is evaluated
# at most MAX_EVALUATIONS times per element (a stencil step, and the step before it), an
# expensive one only once; beyond that it is stored. Sets are capped: more than MAX_PATHS paths
# is all the decision needs. A path is interned (a trie of chains): (its number, its length,
# whether any step on it expands by a broadcast), so extending and comparing paths costs O(1)
# however long the chain grows (a stencil fused over many steps).
MAX_EVALUATIONS = 4
MAX_PATHS = MAX_EVALUATIONS
Paths = frozenset  # of paths: (number, length, expands) triples
ROOT_PATH = (0, 0, False)  # the fusion's output itself


class PathTable:
    """Interned index paths for one fusion run: a path's number names its whole chain."""

    def __init__(self) -> None:
        self._numbers: dict[tuple[int, int, bool], int] = {}
        # numbers of the paths with a step other than a slice (a window of the same array)
        self._not_windows: set[int] = set()

    def through(self, user: Instruction, paths: Paths) -> Paths:
        """The paths of an operand of ``user``, given ``user``'s own."""
        if user.opcode in GroupOp.ELEMENTWISE:
            return paths
        expands = user.opcode == "broadcast" and user.shape.size > user.operands[0].shape.size
        out = set()
        for number, length, expanded in paths:
            key = (number, id(user), expands)
            n = self._numbers.get(key)
            if n is None:
                n = self._numbers[key] = len(self._numbers) + 1
                if user.opcode != "slice" or number in self._not_windows:
                    self._not_windows.add(n)
            out.add((n, length + 1, expanded or expands))
        return capped(out)

    def only_windows(self, paths: Paths) -> bool:
        """Does every path reach its member through slices alone (a stencil's windows)?"""
        return not any(number in self._not_windows for number, _, _ in paths)


def evaluations_allowed(x: Instruction, paths: Paths, fusions: int, table: PathTable) -> int:
    """How many times per element a fusion may evaluate ``x``, which ``fusions`` fusions would
    take. A cheap producer that one fusion reads only through windows (``lap[1:] - lap[:-1]``:
    a stencil's shifted slices) is recomputed for each, as XLA fuses stencils within its
    code-duplication budget: the windows overlap, so storing the producer and reading it back
    costs its whole buffer's traffic for little saved arithmetic. Anything else (a value reached
    through other index maps, or copied into several fusions) is evaluated once."""
    if is_expensive(x) or fusions != 1 or not table.only_windows(paths):
        return 1
    return MAX_EVALUATIONS


def is_expensive(inst: Instruction) -> bool:
    return inst.opcode in GroupOp.EXPENSIVE


def is_free_to_duplicate(inst: Instruction) -> bool:
    """A value every fusion can make from nothing: a constant, an iota, or a broadcast or reshape
    of a scalar constant (XLA duplicates these into every consumer)."""
    while inst.opcode in GroupOp.SAME_ELEMENTS:
        inst = inst.operands[0]
    return inst.opcode == "iota" or inst.opcode == "constant" and inst.shape.size <= 1


def is_fusible(inst: Instruction) -> bool:
    return OPS[inst.opcode].fusion != "none"


@dataclass(eq=False)
class Group:
    gid: int
    members: list[Instruction] = field(default_factory=list)
    ids: set[int] = field(default_factory=set)
    paths: dict[int, Paths] = field(default_factory=dict)  # member id -> its index paths
    # ids of the operands from outside the group, kept as members join (``members`` and ``ids``
    # only grow): asked at every candidate, recomputing them made fusion quadratic in a group's
    # size
    _external: set[int] | None = field(default=None, repr=False)
    # members that compute (not only move indices) and are read through a broadcast: each is
    # recomputed for every element it is broadcast to
    behind_broadcast: int = 0

    def add(self, inst: Instruction, paths: Paths = Paths({ROOT_PATH})) -> None:
        if id(inst) not in self.ids:
            self.ids.add(id(inst))
            self.members.append(inst)
            if is_compute(inst) and any(expands for _, _, expands in paths):
                self.behind_broadcast += 1
            external = self._external
            if external is not None:
                external.discard(id(inst))
                external.update(self._outside(inst))
        self.paths[id(inst)] = capped(self.paths.get(id(inst), Paths()) | paths)

    @property
    def heroes(self) -> list[Instruction]:
        return [m for m in self.members if m.opcode == "reduce"]

    @property
    def kind(self) -> str:
        return "kInput" if self.heroes else "kLoop"

    def _outside(self, inst: Instruction):
        """``inst``'s operands that are not members (a scalar constant is an immediate)."""
        ids = self.ids
        return [id(o) for o in inst.operands
                if id(o) not in ids and not (o.opcode == "constant" and o.shape.size <= 1)]

    def external_operands(self, extra: Instruction | None = None) -> set[int]:
        """Ids of the operands the group reads from outside it (with ``extra`` a member)."""
        if self._external is None:
            self._external = {i for m in self.members for i in self._outside(m)}
        out = set(self._external)
        if extra is not None and id(extra) not in self.ids:
            out.discard(id(extra))
            out.update(i for i in self._outside(extra) if i != id(extra))
        return out


def capped(paths) -> Paths:
    return (
        Paths(paths)
        if len(paths) <= MAX_PATHS
        else Paths(sorted(paths, key=lambda p: (p[1], p[0]))[: MAX_PATHS + 1])
    )


def is_compute(inst: Instruction) -> bool:
    """Does evaluating ``inst`` cost arithmetic or a choice per element (rather than only moving
    an index)? Concatenate and pad choose between their operands for every element."""
    return inst.opcode in GroupOp.CHOOSES_PER_ELEMENT
