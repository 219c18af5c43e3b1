"""Derivatives of the collectives a ``tk.shard_map``ped function traces. Each device's result
is a linear function of every device's operand, so the forward rule is the collective on the
tangents, and the backward rule its transpose over the devices. With JAX's varying/invariant
typing (``frontend/vma.py``, shard_map's default ``check_vma=True``) a ``psum`` transposes to
the identity (``pbroadcast``), and cotangents reaching a value invariant along some axes are
summed over them; without it (``check_vma=False``, pmap's semantics):

- an all-reduce by ``add``: y_d = sum over d's group of x_g, so x_g's cotangent is the sum
  over g's group of the ct_d: an all-reduce of the cotangents;
- an all-gather: each device's block of the gathered cotangent, summed over the devices: a
  reduce-scatter (add); a reduce-scatter's: an all-gather;
- an all-to-all (array form): block d of device g went to device d at block g, and back:
  itself; a collective-permute: the permute with each pair reversed (a device no pair reached
  contributed nothing).

An all-reduce or reduce-scatter by another reducer (pmax, pmin) has no derivative here, and
says so."""
from __future__ import annotations

from ..ir import dtypes as ir_dtypes
from ..ir.nodes import Instruction
from ..ir.ops import OPS
from ..ir.queries import reducer_opcode
from .ad_rules import (JVP_RULES, PRECONDITIONS, VJP_RULES, Eqn, instantiate)
from .tracer import Tracer
from .vma import current as varying_axes, psum_over


def _emit(opcode: str, x: Tracer, inst: Instruction, **changes) -> Tracer:
    attrs = {k: v for k, v in inst.attrs.items() if k != "to_apply"}
    attrs.update(changes)
    if "to_apply" in OPS[opcode].attributes:  # all-reduce, reduce-scatter: they sum
        attrs["to_apply"] = x.trace.module.scalar_reducer("add", ir_dtypes.from_numpy(x.dtype))
    return x.trace.emit(opcode, (x,), attrs, name=opcode)


def _jvp(eqn: Eqn, tangents):
    (x,), (t,) = eqn.args, tangents
    if t is None:
        return None
    return _emit(eqn.inst.opcode, instantiate(t, x), eqn.inst)


def _all_reduce_vjp(eqn: Eqn, ct):
    typing = varying_axes()
    if typing is None:  # (check_vma=False: pmap's semantics, psum transposes to psum)
        return [_emit("all-reduce", ct, eqn.inst)]
    # psum's transpose is pbroadcast (the identity); over axes the operand was invariant along,
    # the implicit pvary before it transposes to a psum
    missing = typing.collective_axes(eqn.inst) - typing.of(eqn.args[0])
    return [psum_over(typing, ct, missing) if missing else ct]


def _all_gather_vjp(eqn: Eqn, ct):
    return [_emit("reduce-scatter", ct, eqn.inst)]


def _reduce_scatter_vjp(eqn: Eqn, ct):
    return [_emit("all-gather", ct, eqn.inst)]


def _all_to_all_vjp(eqn: Eqn, ct):
    return [_emit("all-to-all", ct, eqn.inst)]


def _permute_vjp(eqn: Eqn, ct):
    pairs = tuple((t, s) for s, t in eqn.inst.attrs["source_target_pairs"])
    return [_emit("collective-permute", ct, eqn.inst, source_target_pairs=pairs)]


def _summing(inst: Instruction) -> str | None:
    if "to_apply" in inst.attrs and reducer_opcode(inst) != "add":
        return (f"{inst.opcode} by '{reducer_opcode(inst) or 'a general computation'}' "
                "(tk.lax.pmax, pmin) has no derivative in toolkit yet; psum, pmean and "
                "psum_scatter do")
    if inst.opcode == "all-to-all" and "dimensions" not in inst.attrs:
        return "the tuple form of all-to-all (XLA's CPU compiler's) is not differentiated"
    return None


for _name, _vjp in (("all-reduce", _all_reduce_vjp), ("all-gather", _all_gather_vjp),
                    ("reduce-scatter", _reduce_scatter_vjp), ("all-to-all", _all_to_all_vjp),
                    ("collective-permute", _permute_vjp)):
    JVP_RULES[_name] = _jvp
    VJP_RULES[_name] = _vjp
    PRECONDITIONS[_name] = _summing
