"""What a differentiated program keeps from its forward pass for its backward pass: the
residuals, read off the optimized module (after fusion has decided what to recompute), as
JAX's ``print_saved_residuals`` lists them (jax-ml/jax#12792 asks for this view).

Differentiation names backward instructions ``transpose(jvp(<forward op>))``; a residual is
a value made outside the backward pass (an argument, or a forward instruction) that a
backward instruction reads. ``tk.checkpoint`` shrinks the list: it recomputes its function's
intermediates in the backward pass instead of keeping them."""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.nodes import Instruction, Module
from ..ir.ops import GroupOp


# a backward op; a forward op recomputed by the backward pass
BACKWARD_MARKS = ("transpose(", "remat(")


def _marked(md) -> bool:
    return md is not None and any(mark in md.op_name for mark in BACKWARD_MARKS)


def is_backward(inst: Instruction) -> bool:
    """Does ``inst`` (or a member of its fusion) compute part of a backward pass?"""
    if _marked(inst.metadata):
        return True
    members = inst.attrs["calls"].instructions if inst.opcode == "fusion" else ()
    return any(_marked(m.metadata) for m in members)


def _label(inst: Instruction) -> str:
    md = inst.metadata
    if inst.opcode == "parameter":
        return (
            f"argument '{md.op_name}'"
            if md is not None and md.op_name
            else f"argument {inst.attrs['parameter_number']}"
        )
    name = md.op_name.split("/", 1)[-1] if md is not None and md.op_name else inst.opcode
    return name + (f" at {md.location}" if md is not None and md.location else "")


@dataclass(frozen=True)
class Residual:
    value: str  # the instruction's name in the optimized module
    shape: str
    bytes: int
    produced_by: str  # "tanh at model.py:12", or "argument 'x'"
    read_by: tuple[str, ...]  # the backward instructions that read it
    kind: str  # "argument" or "intermediate"


def saved_residuals(module: Module) -> list[Residual]:
    """The residuals of ``module``'s entry, in program order; empty for a program that is not
    differentiated."""
    entry = module.entry
    if not any(is_backward(i) for i in entry.instructions):
        return []
    users = entry.users()
    out = []
    for inst in entry.instructions:
        if is_backward(inst) or inst.opcode in GroupOp.KNOWN_VALUES or inst.shape.is_tuple:
            continue
        readers = [u for u in users[inst] if is_backward(u)]
        if not readers:
            continue
        out.append(Residual(inst.name, inst.shape.to_text(False), inst.shape.nbytes, _label(inst),
                            tuple(dict.fromkeys(_label(r) for r in readers)),
                            "argument" if inst.opcode == "parameter" else "intermediate"))
    return out


def _size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} B"


def residuals_text(residuals: list[Residual]) -> str:
    if not residuals:
        return (
            "no saved residuals (the program is not differentiated, or its backward pass reads "
            "nothing)"
        )
    kept = [r for r in residuals if r.kind == "intermediate"]
    lines = [
        f"saved residuals: {len(residuals)} values, {_size(sum(r.bytes for r in residuals))} "
        f"({len(kept)} intermediates, {_size(sum(r.bytes for r in kept))}; the rest are arguments)",
        f"  {'bytes':>10}  {'shape':<18} {'produced by':<40} read by",
    ]
    for r in residuals:
        lines.append(
            f"  {_size(r.bytes):>10}  {r.shape:<18} {r.produced_by:<40} {', '.join(r.read_by[:2])}"
            + (f" (+{len(r.read_by) - 2})" if len(r.read_by) > 2 else "")
        )
    return "\n".join(lines)


__all__ = ["Residual", "saved_residuals", "residuals_text", "is_backward"]
