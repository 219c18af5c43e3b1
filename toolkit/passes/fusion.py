"""Fusion with a reason for every decision, in XLA's spirit.

Producers are visited consumers-first. A producer fuses into all of its consumers or none
(priority-fusion style): into one fusion it simply joins; into several it is duplicated,
which is allowed only for cheap producers. An expensive producer read by a reduction fusion
and by others becomes an extra output of the reduction fusion (producer-consumer multi-output
fusion). Reductions stay fusion roots; dots stay library calls. Reduction fusions reading the
same input are then merged into one multi-output fusion when neither depends on the other.
Every producer-consumer edge considered leaves a FusionDecision with a stable reason code."""
from __future__ import annotations

import dataclasses
import itertools
from collections import Counter
from dataclasses import dataclass

from ..ir.builder import ComputationBuilder, NameUniquer
from ..ir.nodes import Computation, Instruction, Module
from ..ir.ops import GroupOp
from ..ir.shapes import Shape
from ..profiler.events import FusionDecision
from .fusion_groups import (MAX_EVALUATIONS, MAX_PATHS, ROOT_PATH, Group, Paths, PathTable,
                            capped, evaluations_allowed, is_compute, is_expensive,
                            is_free_to_duplicate, is_fusible)
from .fusion_in_place import InPlaceHazards
from .fusion_siblings import SiblingMerging
from .fusion_reasons import FUSED_REASONS, REASONS  # noqa: F401 - fusion's public names
from .rewriter import replace_entry, with_operands

@dataclass(frozen=True)
class FusionOptions:
    max_operands: int = 32
    # operands and outputs of one kernel, XLA:GPU's limit: every one is a kernel parameter, and
    # a GPU kernel's parameter space is small (4 KiB before sm_70's larger limit, and 1,928
    # parameters failed to load: CUDA_ERROR_INVALID_PTX on an H200)
    max_parameters: int = 96
    max_instructions: int = 256
    max_duplication: int = 8
    multi_output: bool = True


# compute operations a fusion recomputes behind a broadcast, at most: a scalar accumulated over a
# Python loop (``trace += np.tanh(a[i, i])``, 300 adds) then added to a 300x300 array would
# otherwise be recomputed for each of its 90,000 elements
_MAX_BROADCAST_CHAIN = 8


@dataclass
class FusionResult:
    module: Module
    decisions: list[FusionDecision]
    counts: Counter
    groups: list[Group]


def _bytes_saved(x: Instruction, reads: int, copies: int) -> int:
    """Memory traffic fusing ``x`` avoids, in XLA's reasoning (its fusion cost model): unfused,
    ``x`` writes its buffer once and each of its ``reads`` consumers reads it back; fused into
    ``copies`` fusions, nothing is written, but each copy reads ``x``'s operands, all but one
    of them more than the unfused program did. Scalar constants cost nothing either way."""
    if not isinstance(x.shape, Shape):
        return 0
    operands = sum(_bytes_read(o) for o in x.operands)
    return max(x.shape.nbytes * (1 + reads) - (copies - 1) * operands, 0)


def _bytes_read(operand: Instruction) -> int:
    """What a fusion reads for ``operand``: a broadcast or iota is computed inside the fusion
    from its (small) source, a scalar constant is an immediate."""
    if not isinstance(operand.shape, Shape) or operand.opcode == "iota":
        return 0
    if operand.opcode == "constant" and operand.shape.size <= 1:
        return 0
    if operand.opcode == "broadcast":
        return sum(_bytes_read(o) for o in operand.operands)
    return operand.shape.nbytes


def _loc(inst: Instruction) -> str:
    return inst.metadata.location if inst.metadata is not None else ""


class _Fuser(SiblingMerging, InPlaceHazards):
    def __init__(self, comp: Computation, options: FusionOptions):
        self.comp = comp
        self.options = options
        self.users = comp.users()
        self.order = {id(i): n for n, i in enumerate(comp.instructions)}
        self.homes: dict[int, list[Group]] = {}
        self.groups: list[Group] = []
        self.decisions: list[FusionDecision] = []
        self._ids = itertools.count()
        self.path_table = PathTable()
        self._cone_readers: dict[tuple[int, int], Instruction | None] = {}
        self._elsewhere: dict[int, bool] = {}  # id(dus) -> read_elsewhere_at_all

    # ---- bookkeeping ----------------------------------------------------------------------
    def decide(self, producer: Instruction, consumer: Instruction, fused: bool, code: str,
               detail: str = "", saved: int = 0) -> None:
        message = REASONS[code] + (f": {detail}" if detail else "")
        self.decisions.append(
            FusionDecision(
                producer=producer.name,
                consumer=consumer.name,
                fused=fused,
                reason=code,
                message=message,
                producer_location=_loc(producer),
                consumer_location=_loc(consumer),
                bytes_saved=int(saved),
            )
        )

    def new_group(self, inst: Instruction) -> Group:
        g = Group(next(self._ids))
        g.add(inst)
        self.groups.append(g)
        self.homes[id(inst)] = [g]
        return g

    def depends(self, a: Group, b: Group) -> bool:
        """Does some member of ``a`` need a value computed by ``b`` (through anything)?
        Members both hold (duplicated cheap producers) are computed by each, not shared.
        An iterative walk up from ``a``'s own members, pruned below ``b``'s first instruction in
        program order (nothing earlier can depend on it)."""
        own = b.ids - a.ids
        if not own:
            return False
        order = self.order
        floor = min(order[i] for i in own)
        stack = [o for m in a.members if id(m) not in b.ids for o in m.operands]
        seen: set[int] = set()
        while stack:
            inst = stack.pop()
            key = id(inst)
            if key in seen or order.get(key, -1) < floor:
                continue
            if key in own:
                return True
            seen.add(key)
            stack.extend(inst.operands)
        return False

    def paths_in(self, x: Instruction, g: Group) -> Paths:
        """The index paths by which ``g`` would read ``x`` if ``x`` joined it."""
        found: set = set()
        users = self.users[x]
        # (a constant that every time step reads has thousands of users: look from the group's side)
        readers = [u for u in users if id(u) in g.ids] if len(users) <= len(g.members) else \
            [m for m in g.members if any(o is x for o in m.operands)]
        for u in readers:
            found |= self.path_table.through(u, g.paths.get(id(u), Paths({ROOT_PATH})))
        return capped(found) if found else Paths({ROOT_PATH})

    # ---- the producer decisions -----------------------------------------------------------
    def visit(self, x: Instruction) -> None:
        if x.opcode in GroupOp.PLUMBING:
            return
        users = self.users[x]
        if x.opcode == "dot":
            for u in users:
                self.decide(
                    x,
                    u,
                    False,
                    "LIBRARY_CALL",
                    f"%{x.name} is a dot, run by BLAS; its consumers fuse separately",
                )
            return
        if x.opcode == "dynamic-update-slice" and users:  # as XLA: only ever a fusion root
            for u in users:
                self.decide(
                    x,
                    u,
                    False,
                    "IN_PLACE_UPDATE",
                    f"%{x.name} writes its window into its operand's buffer",
                )
            self.new_group(x)
            return
        if not is_fusible(x):  # a scatter: it updates its own buffer, in a kernel of its own
            for u in users:
                self.decide(
                    x,
                    u,
                    False,
                    "NOT_FUSIBLE",
                    f"%{x.name} ({x.opcode}) runs as a kernel of its own",
                )
            return
        blocked: dict[int, tuple[str, str]] = {}
        user_groups: list[Group] = []
        for u in users:
            homes = self.homes.get(id(u))
            if homes:
                user_groups.extend(g for g in homes if g not in user_groups)
            elif u.opcode == "tuple" and u is self.comp.root:
                blocked[id(u)] = ("ROOT", f"%{x.name} is an output of the computation")
            elif u.opcode == "dot":
                blocked[id(u)] = (
                    "LIBRARY_CALL",
                    f"%{u.name} is a dot, run by BLAS, which takes materialised operands",
                )
            else:
                blocked[id(u)] = ("NOT_FUSIBLE", f"%{u.name} ({u.opcode}) is not fusible")
        verdict = self.check(x, users, user_groups, blocked)
        if verdict is None:  # fuse into every user's fusion
            for g in user_groups:
                g.add(x, self.paths_in(x, g))
            self.homes[id(x)] = list(user_groups)
            saved = _bytes_saved(x, len(users), len(user_groups))
            share, rest = divmod(saved, len(users))
            for n, u in enumerate(users):  # spread over the edges, so that the rows add up
                self.decide(x, u, True, "FUSED", saved=share + (n < rest))
            return
        if verdict == "multi-output":
            return
        # (the first user that cannot fuse x, found once: a value read by thousands of
        # instructions asked it of every user again)
        blocker = next((v for v in users if id(v) in verdict), None)
        also = f"%{x.name} also feeds %{blocker.name}, which cannot fuse it" if blocker else ""
        for u in users:
            code, detail = verdict.get(id(u), ("NOT_ALL_CONSUMERS", ""))
            if code == "NOT_ALL_CONSUMERS" and not detail:
                detail = also
            self.decide(x, u, False, code, detail)
        if is_fusible(x) and x.opcode != "constant":
            self.new_group(x)

    def check(self, x, users, user_groups, blocked):
        """None to fuse; 'multi-output' when handled as such; else {user id: (code, detail)}."""
        if not users:
            if is_fusible(x) and x.opcode != "constant":
                self.new_group(x)
            return "multi-output"  # nothing to decide: x is the computation's single output
        if x.opcode == "reduce":
            out = {}
            for u in users:
                homes = self.homes.get(id(u)) or []
                reductions = [g for g in homes if g.heroes]
                if reductions:
                    out[id(u)] = (
                        "BOTH_REDUCTIONS",
                        f"%{x.name} and %{reductions[0].heroes[0].name} are both reductions",
                    )
                else:
                    out[id(u)] = blocked.get(
                        id(u),
                        (
                            "PRODUCER_IS_REDUCTION",
                            (
                                f"fusing %{x.name} into %{u.name} would recompute the reduction "
                                "per element"
                            ),
                        ),
                    )
            return out
        if blocked:
            return blocked
        found = self.reads_updated_buffer(x, user_groups)
        if found is not None:
            destination, reader = found
            how = "" if reader is x else f" (through %{reader.name})"
            return {
                id(u): (
                    "READS_UPDATED_BUFFER",
                    f"%{x.name} reads %{destination.name}{how} where the fusion writes its "
                    f"window: fused, the window could not be written in place (the fusion "
                    f"would copy all of %{destination.name}), so it is computed first, as a "
                    f"kernel of its own",
                )
                for u in users
            }
        if len(user_groups) > 1 and is_expensive(x):
            if self.try_multi_output(x, users, user_groups):
                return "multi-output"
            return {
                id(u): (
                    "EXPENSIVE_WOULD_DUPLICATE",
                    f"%{x.name} ({x.opcode}) feeds {len(user_groups)} fusions",
                )
                for u in users
            }
        for g in user_groups:
            paths = self.paths_in(x, g)
            # (the budget is asked only of a computed value read more than once: most are not)
            reused = is_compute(x) and len(paths) > 1
            allowed = evaluations_allowed(x, paths, len(user_groups), self.path_table) \
                if reused else 1
            if reused and len(paths) > allowed:
                many = (
                    "more than " + str(MAX_PATHS) if len(paths) > MAX_PATHS else str(len(paths))
                )
                why = ("an expensive operation is computed once" if is_expensive(x) else
                       f"a stencil's window is evaluated at most {MAX_EVALUATIONS} times per "
                       f"element, so that the recomputation stays bounded over repeated steps"
                       if allowed > 1 else
                       "only windows of a producer read by one fusion are recomputed")
                return {
                    id(u): (
                        "REUSES_ELEMENTS",
                        f"%{x.name} ({x.opcode}) is read through {many} "
                        f"different index maps per element of the fusion (e.g. the slices of a "
                        f"stencil); fused it would be recomputed for each ({why}), so it is "
                        f"computed once and stored",
                    )
                    for u in users
                }
            if (is_compute(x) and g.behind_broadcast >= _MAX_BROADCAST_CHAIN
                    and any(expands for _, _, expands in paths)):
                return {
                    id(u): (
                        "BROADCAST_CHAIN",
                        f"%{x.name} ({x.opcode}) reaches the fusion through a broadcast, behind "
                        f"{g.behind_broadcast} operations that already would be recomputed for "
                        f"every element they are broadcast to: it and what it reads are "
                        f"computed once",
                    )
                    for u in users
                }
            if is_expensive(x) and any(expands for _, _, expands in paths):
                return {
                    id(u): (
                        "EXPENSIVE_BROADCAST",
                        f"%{x.name} ({x.opcode}) reaches the fusion "
                        f"through a broadcast: fused it would be recomputed for every element "
                        f"it is broadcast to, so it is computed once",
                    )
                    for u in users
                }
        if len(user_groups) > self.options.max_duplication and not is_free_to_duplicate(x):
            return {id(u): ("CODE_DUPLICATION", f"%{x.name} feeds {len(user_groups)} fusions "
                            f"(at most {self.options.max_duplication} copies)") for u in users}
        for g in user_groups:
            n_ops = len(g.external_operands(x))
            if n_ops > self.options.max_operands:
                return {id(u): ("BUDGET_OPERANDS", f"the fusion would read {n_ops} operands "
                                f"(budget {self.options.max_operands})") for u in users}
            if len(g.members) + 1 > self.options.max_instructions:
                return {
                    id(u): (
                        "BUDGET_INSTRUCTIONS",
                        f"the fusion would hold {len(g.members) + 1} "
                        f"instructions (budget {self.options.max_instructions})",
                    )
                    for u in users
                }
        return None

    def try_multi_output(self, x, users, user_groups) -> bool:
        if not self.options.multi_output:
            return False
        reductions = [g for g in user_groups if g.heroes]
        if len(reductions) != 1:
            return False
        red = reductions[0]
        hero = red.heroes[0]
        if not isinstance(x.shape, Shape) or hero.operands[0].shape.dims != x.shape.dims:
            return False
        others = [g for g in user_groups if g is not red]
        trial = Group(-1, list(red.members) + [x], red.ids | {id(x)})
        parameters = len(trial.external_operands()) + len(trial.heroes) + 1
        if parameters > self.options.max_parameters:
            for u in users:
                self.decide(x, u, False, "BUDGET_PARAMETERS",
                            f"%{hero.name}'s fusion would take {parameters} operands and outputs "
                            f"(budget {self.options.max_parameters})")
            if is_fusible(x):
                self.new_group(x)
            return True
        if any(self.depends(trial, g) for g in others):
            for u in users:
                self.decide(x, u, False, "WOULD_CREATE_CYCLE",
                            f"%{hero.name}'s fusion would depend on a fusion that reads %{x.name}")
            if is_fusible(x):
                self.new_group(x)
            return True
        red.add(x, self.paths_in(x, red))
        self.homes[id(x)] = [red]
        for u in users:
            if id(u) in red.ids:
                self.decide(x, u, True, "MULTI_OUTPUT", f"%{x.name} is computed once in the "
                            f"fusion of %{hero.name} and also written out for its other consumers",
                            saved=x.shape.nbytes)
            else:
                self.decide(
                    x,
                    u,
                    False,
                    "EXPENSIVE_WOULD_DUPLICATE",
                    f"%{u.name} reads %{x.name} from the multi-output fusion of %{hero.name} "
                    "instead",
                )
        return True

    def run(self) -> None:
        for inst in reversed(self.comp.instructions):
            self.visit(inst)
        if self.options.multi_output:
            self.merge_siblings()
            self.merge_loop_siblings()


def _outputs(group: Group, fuser: _Fuser, root: Instruction) -> list[Instruction]:
    outs = []
    for m in group.members:
        if m is not root and is_free_to_duplicate(m):
            continue  # every fusion makes its own copy; an unfused reader makes one too
        if m is root or _read_elsewhere(m, group, fuser):
            outs.append(m)
    return outs


def _read_elsewhere(m: Instruction, group: Group, fuser: _Fuser) -> bool:
    """Does some reader of ``m`` need it from outside a fusion that computes it: a reader in
    no fusion, or one in a fusion without ``m``? (A cheap reader duplicated into this group and
    another reads it in both: the multi-output reduction's extra output, written out for the
    other. Asking only about readers outside this group left the other fusion's copy reading a
    value nobody wrote out, computed again unfused, op by op.)"""
    for u in fuser.users[m]:
        homes = fuser.homes.get(id(u))
        if not homes:
            if id(u) not in group.ids:
                return True
        elif any(id(m) not in g.ids for g in homes):
            return True
    return False


class _KernelCycle(Exception):
    """The groups' kernels would need each other's results (found while emitting them)."""


def fuse(module: Module, options: FusionOptions = FusionOptions()) -> FusionResult:
    """The module with its entry fused. Should multi-output fusion (a reduction's extra
    outputs, merged siblings) have made two kernels that need each other's results, which its
    checks exist to prevent, fusion runs again without it: fewer fused kernels, never a crash
    nor a wrong order (the counts say so)."""
    try:
        return _fuse(module, options)
    except _KernelCycle as cycle:
        if not options.multi_output:
            raise AssertionError(f"fusion made a cycle through %{cycle}") from None
        result = _fuse(module, dataclasses.replace(options, multi_output=False))
        result.counts[f"multi-output fusion undone: a cycle between kernels through %{cycle}"] += 1
        return result


def _fuse(module: Module, options: FusionOptions) -> FusionResult:
    comp = module.entry
    fuser = _Fuser(comp, options)
    fuser.run()
    order = fuser.order
    groups = [g for g in fuser.groups if any(m.opcode != "constant" for m in g.members)]
    for g in groups:
        g.members.sort(key=lambda m: order[id(m)])
    owner: dict[int, Group] = {}
    for g in groups:
        for out in _outputs(g, fuser, comp.root):
            owner[id(out)] = g

    entry_b = ComputationBuilder(
        comp.name, NameUniquer.from_names(i.name for i in comp.instructions)
    )
    comp_names = NameUniquer.from_names(c.name for c in module.computations)
    mapping: dict[int, Instruction] = {}
    emitted: set[int] = set()
    fused_comps: list[Computation] = []
    counts: Counter = Counter()

    def emit_group(g: Group, externals: list[Instruction]) -> None:
        outs = _outputs(g, fuser, comp.root)
        hero = g.heroes[0] if g.heroes else outs[0]
        prefix = "input" if g.kind == "kInput" else "loop"
        comp_name = _unused_name(comp_names, f"fused_{hero.opcode}")
        comp_names.reserve(comp_name)
        fb = ComputationBuilder(comp_name, NameUniquer.from_names(m.name for m in g.members))
        local: dict[int, Instruction] = {}
        for i, e in enumerate(externals):
            local[id(e)] = fb.parameter(
                i, e.shape, _unused_name(fb.uniquer, f"param_{i}"), exact_name=True
            )
        for m in g.members:
            local[id(m)] = fb.adopt(with_operands(m, [local[id(o)] for o in m.operands]))
        root = (
            local[id(outs[0])] if len(outs) == 1 else fb.add("tuple", [local[id(o)] for o in outs])
        )
        fused = fb.build(root)
        fused_comps.append(fused)
        fusion = entry_b.add(
            "fusion",
            [mapping[id(e)] for e in externals],
            {"kind": g.kind, "calls": fused},
            shape=fused.root.shape,
            metadata=hero.metadata,
            name=_unused_name(entry_b.uniquer, f"{prefix}_{hero.opcode}_fusion"),
        )
        counts[f"{g.kind} fusions"] += 1
        if len(outs) == 1:
            mapping[id(outs[0])] = fusion
        else:
            counts["multi-output fusions"] += 1
            for i, o in enumerate(outs):
                mapping[id(o)] = entry_b.add("get-tuple-element", (fusion,), {"index": i},
                                             metadata=o.metadata)

    externals_of: dict[int, list[Instruction]] = {}  # gid -> its externals (asked per member)

    def group_externals(g: Group) -> list[Instruction]:
        found = externals_of.get(g.gid)
        if found is not None:
            return found
        externals: list[Instruction] = []
        externals_of[g.gid] = externals
        seen: set[int] = set()
        for m in g.members:
            for o in m.operands:
                if id(o) not in g.ids and id(o) not in seen:
                    seen.add(id(o))
                    externals.append(o)
        return externals

    def resolve(start: Instruction) -> None:
        """Emit ``start`` after everything it needs: an iterative post-order over units (a fusion
        group, or an instruction that is not fused), so program depth meets no recursion limit."""
        stack: list[tuple[object, list[Instruction], int]] = []

        def unit_of(inst: Instruction):
            g = owner.get(id(inst))
            if g is None:
                return inst, list(inst.operands)
            return g, group_externals(g)

        def done(unit) -> bool:
            return unit.gid in emitted if isinstance(unit, Group) else id(unit) in mapping

        first = unit_of(start)
        if done(first[0]):
            return
        stack.append((first[0], first[1], 0))
        active = {id(first[0])}
        while stack:
            unit, needs, i = stack[-1]
            while i < len(needs):
                dep = unit_of(needs[i])
                i += 1
                if not done(dep[0]):
                    if id(dep[0]) in active:
                        raise _KernelCycle(needs[i - 1].name)
                    active.add(id(dep[0]))
                    stack[-1] = (unit, needs, i)
                    stack.append((dep[0], dep[1], 0))
                    break
            else:
                stack.pop()
                active.discard(id(unit))
                if done(unit):
                    continue
                if isinstance(unit, Group):
                    emitted.add(unit.gid)
                    emit_group(unit, needs)
                else:
                    mapping[id(unit)] = entry_b.adopt(
                        with_operands(unit, [mapping[id(o)] for o in unit.operands])
                    )

    for p in comp.parameters:
        resolve(p)
    # Units are emitted in the program's order of the values they compute (a fusion where its
    # output was), each after what it needs: a kernel that reads a buffer's old value then runs
    # before the kernel that writes it in place, as the program had them, instead of wherever a
    # walk from the root would put it (after the write: a copy to keep the old value).
    members = {id(m) for g in groups for m in g.members}
    for inst in _reachable(comp.root, comp.instructions):
        if id(inst) in owner or id(inst) not in members:
            resolve(inst)
    entry = entry_b.build(mapping[id(comp.root)])
    for d in fuser.decisions:
        counts[d.reason] += 1
    return FusionResult(
        replace_entry(module, entry, tuple(fused_comps)), fuser.decisions, counts, groups
    )


def _reachable(root: Instruction, instructions) -> list[Instruction]:
    """The instructions ``root`` needs (itself included), in program order (iterative)."""
    needed = {id(root)}
    stack = [root]
    while stack:
        for o in stack.pop().operands:
            if id(o) not in needed:
                needed.add(id(o))
                stack.append(o)
    return [i for i in instructions if id(i) in needed]


def _unused_name(uniquer: NameUniquer, base: str) -> str:
    """``base``, or ``base.N``: XLA-style names without an id when the plain one is free."""
    return uniquer.first_free(base)
