"""Checks a module built by any means (builder, parser, a pass): every shape re-inferred,
operands defined before use, names unique, parameters numbered 0..n-1, callees present."""
from __future__ import annotations

from .nodes import Module
from .shape_inference import ShapeError, infer_shape


class VerificationError(ValueError):
    pass


def verify(module: Module) -> Module:
    """``module`` if it is well formed (else ``VerificationError``)."""
    verify_after(module, frozenset())
    return module


def _shape_question(inst) -> tuple:
    """What shape inference answers for ``inst``: its opcode, declared shape, attributes and
    its operands' shapes, each the very (immutable) object, by identity: cheap to hash, and
    the caller holds the module whose answers it trusts, so its objects are alive and an equal
    identity is the same object."""
    return (inst.opcode, id(inst.shape), id(inst.attrs),
            tuple([id(o.shape) for o in inst.operands]))


def built_questions(module: Module) -> frozenset:
    """What the builder's instructions of ``module`` asked shape inference (it answered when it
    made them): ``verify_after``'s ``trusted`` for the module a pipeline starts from."""
    return frozenset(_shape_question(inst) for comp in module.computations
                     for inst in comp.instructions if inst.shape_inferred)


def verify_after(module: Module, trusted: frozenset) -> frozenset:
    """Verify ``module`` after a pass; ``trusted``: what this returned for the module before it,
    which the caller still holds. Shape inference is a function of an instruction's opcode,
    shape, attributes and operand shapes, so an instruction asking what a verified one asked
    (a pass rebuilt it around a new operand of the same shape, keeping its attributes) is not
    inferred again: a pass that changes a few instructions of a large program costs what it
    changed. An instruction the builder made (``shape_inferred``) had its shape inferred then.
    Returns what to trust after this module."""
    answered = set()
    known = set()
    comp_names: set[str] = set()
    for comp in module.computations:
        if comp.name in comp_names:
            raise VerificationError(f"two computations are named %{comp.name}")
        comp_names.add(comp.name)
        seen: set[int] = set()
        names: set[str] = set()
        for inst in comp.instructions:
            where = f"%{inst.name} in %{comp.name}"
            if inst.name in names:
                raise VerificationError(f"duplicate instruction name {where}")
            names.add(inst.name)
            for op in inst.operands:
                if id(op) not in seen:
                    raise VerificationError(f"{where} uses %{op.name} before it is defined")
            for callee in inst.called_computations:
                if id(callee) not in known:
                    raise VerificationError(
                        f"{where} calls %{callee.name}, which is not an earlier computation of the "
                        "module"
                    )
            question = _shape_question(inst)
            if not inst.shape_inferred and question not in trusted:
                try:
                    infer_shape(inst.opcode, [o.shape for o in inst.operands], inst.attrs,
                                inst.shape)
                except ShapeError as e:
                    raise VerificationError(f"{where}: {e}") from None
            answered.add(question)
            seen.add(id(inst))
        if id(comp.root) not in seen:
            raise VerificationError(f"root of %{comp.name} is not one of its instructions")
        numbers = [p.attrs["parameter_number"] for p in comp.parameters]
        if numbers != list(range(len(numbers))):
            raise VerificationError(f"parameters of %{comp.name} are numbered {numbers}")
        known.add(id(comp))
    if module.entry is not module.computations[-1]:
        raise VerificationError("the entry computation must come last")
    return frozenset(answered)
