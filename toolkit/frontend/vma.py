"""JAX's varying/invariant typing (``check_vma``) of the values a ``tk.shard_map``ped function
traces, for its derivatives.

Each value varies along some mesh axes: an argument along the axes its ``in_specs`` entry
names, ``axis_index(a)`` along ``a``; ``psum``/``pmean``/``pmax`` over ``A`` make a value
invariant along ``A``; ``all_gather``, ``psum_scatter``, ``all_to_all`` and ``ppermute`` make it
varying along theirs; any other op varies along the union of its operands' axes. Where an op
uses an invariant value together with varying ones, JAX inserts an implicit ``pvary`` (no
change to the value); its transpose is a ``psum``. So in reverse mode, the cotangent an op hands
to an operand that varies along fewer axes than the op's result is summed over the devices of
the missing axes, and ``psum``'s own transpose is the identity (``pbroadcast``). That is how
``tk.grad(local_loss)(w, x_block)`` with a replicated ``w`` gives the gradient of the whole
batch's loss, as JAX does.

The analysis walks a traced value's instructions back to the shard_map's arguments (memoised,
iteratively); a parameter of a nested trace (a ``grad``'s, a loop body's) is the value it
captured. A parameter whose origin is unknown is taken as varying along every axis: its
cotangents are then never summed (the behaviour without typing)."""
from __future__ import annotations

import itertools

from ..ir import dtypes as ir_dtypes
from ..ir.nodes import Instruction
from ..ir.ops import GroupOp
from .thread_slot import ThreadSlot
from .tracer import Trace, Tracer

class VaryingAxes:
    """The typing of one shard_map trace."""

    def __init__(self, mesh):
        self.mesh = mesh
        self.every = frozenset(mesh.axis_names)
        self._seeds: dict[int, frozenset] = {}
        self._memo: dict[int, frozenset] = {}
        self._keep: list = []  # the instructions the ids above name (alive while tracing)
        self._axes_of_groups: dict = {}
        names = mesh.axis_names
        for k in range(1, len(names) + 1):
            for axes in itertools.permutations(names, k):
                self._axes_of_groups.setdefault(mesh.groups(axes), frozenset(axes))

    def seed(self, tracer: Tracer, axes) -> None:
        self._seeds[id(tracer.inst)] = frozenset(axes)
        self._keep.append(tracer.inst)

    def collective_axes(self, inst: Instruction) -> frozenset:
        if inst.opcode == "collective-permute":
            moved = set()
            for s, t in inst.attrs["source_target_pairs"]:
                a, b = self.mesh.coordinates(s), self.mesh.coordinates(t)
                moved.update(n for n in self.mesh.axis_names if a[n] != b[n])
            return frozenset(moved)
        groups = inst.attrs.get("replica_groups")
        return self._axes_of_groups.get(tuple(map(tuple, groups or ())), self.every)

    def of(self, tracer: Tracer) -> frozenset:
        """The axes ``tracer`` varies along."""
        return self._walk(tracer.inst, tracer._trace)

    def _walk(self, root: Instruction, trace: Trace) -> frozenset:
        memo = self._memo
        if id(root) in memo:
            return memo[id(root)]
        stack = [(root, False)]
        while stack:
            inst, expanded = stack.pop()
            if id(inst) in memo:
                continue
            if not expanded:
                stack.append((inst, True))
                stack.extend((o, False) for o in inst.operands if id(o) not in memo)
                continue
            memo[id(inst)] = self._rule(inst, trace)
            self._keep.append(inst)
        return memo[id(root)]

    def _rule(self, inst: Instruction, trace: Trace) -> frozenset:
        seeded = self._seeds.get(id(inst))
        if seeded is not None:
            return seeded
        memo = self._memo
        if inst.opcode == "parameter":
            outer = _captured(trace, inst)
            return self.of(outer) if outer is not None else self.every
        operands = frozenset().union(*(memo[id(o)] for o in inst.operands))
        if inst.opcode not in GroupOp.COLLECTIVE:
            return operands
        if not inst.operands:  # partition-id, replica-id: this device's number
            return self.every
        if inst.opcode == "all-reduce":
            return operands - self.collective_axes(inst)
        return operands | self.collective_axes(inst)  # gathered, scattered, exchanged


def _captured(trace: Trace, param: Instruction) -> Tracer | None:
    """The enclosing trace's value a nested trace's parameter stands for, if it is a capture."""
    for outer, inner in trace.captures:
        if inner.inst is param:
            return outer
    return None


_TYPING = ThreadSlot()


def typing_context(typing: VaryingAxes | None):
    """While a shard_map traces its function: the typing of its values."""
    return _TYPING.bound(typing)


def current() -> VaryingAxes | None:
    return _TYPING.get()


def summed_over_missing_axes(typing: VaryingAxes, eqn, k: int, contribution):
    """The cotangent ``eqn`` hands its ``k``-th operand, summed over the devices of the axes
    its result varies along and the operand does not (the transpose of the implicit pvary)."""
    if not isinstance(contribution, Tracer) or not isinstance(eqn.out, Tracer) \
            or k >= len(eqn.args) or not isinstance(eqn.args[k], Tracer):
        return contribution
    missing = typing.of(eqn.out) - typing.of(eqn.args[k])
    if not missing:
        return contribution
    return psum_over(typing, contribution, missing)


def psum_over(typing: VaryingAxes, x: Tracer, axes) -> Tracer:
    """``tk.lax.psum(x, axes)``, emitted as it emits it (an all-reduce over the axes' groups)."""
    ordered = tuple(a for a in typing.mesh.axis_names if a in axes)
    reducer = x.trace.module.scalar_reducer("add", ir_dtypes.from_numpy(x.dtype))
    return x.trace.emit("all-reduce", (x,), {
        "replica_groups": typing.mesh.groups(ordered), "channel_id": 1,
        "use_global_device_ids": True, "to_apply": reducer}, weak=x.weak_type, name="psum")
