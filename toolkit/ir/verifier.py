"""Checks a module built by any means (builder, parser, a pass): every shape re-inferred,
operands defined before use, names unique, parameters numbered 0..n-1, callees present."""
from __future__ import annotations

from .nodes import Module
from .shape_inference import ShapeError, infer_shape


class VerificationError(ValueError):
    pass


def verify(module: Module) -> Module:
    """``module`` if it is well formed (else ``VerificationError``)."""
    verify_after(module, Answered())
    return module


def _shape_question(inst) -> tuple:
    """What shape inference answers for ``inst``: its opcode, declared shape, attributes and
    its operands' shapes, each the very (immutable) object, by identity: cheap to hash, and
    the caller holds the module whose answers it trusts, so its objects are alive and an equal
    identity is the same object."""
    return (inst.opcode, id(inst.shape), id(inst.attrs),
            tuple([id(o.shape) for o in inst.operands]))


class Answered:
    """What shape inference answered for a verified module: each instruction's question (so an
    instruction a pass kept, the very object, is not asked again, nor its question rebuilt),
    and the set of questions (so a rebuilt instruction asking what a verified one asked is
    trusted). Holds the instructions, which keeps the ids in the questions meaningful."""

    __slots__ = ("by_instruction", "questions")

    def __init__(self, by_instruction=None, questions=frozenset()):
        self.by_instruction: dict = by_instruction if by_instruction is not None else {}
        self.questions = questions


def built_questions(module: Module) -> Answered:
    """What the builder's instructions of ``module`` asked shape inference (it answered when it
    made them): ``verify_after``'s ``trusted`` for the module a pipeline starts from."""
    by_instruction = _builders_questions(module)
    return Answered(by_instruction, set(by_instruction.values()))


def _builders_questions(module: Module) -> dict:
    return {inst: _shape_question(inst) for comp in module.computations
            for inst in comp.instructions if inst.shape_inferred}


class _BuiltQuestions:
    """``built_questions(module).questions``, made once asking costs more than making it: a
    pipeline that rolls a 200k-instruction trace into 3k verifies 3k instructions, most made by
    a builder, and the few others (a fused computation's parameters) are cheaper to infer than
    the 200k questions are to make (0.2 s). Answering "not trusted" is always sound: the
    verifier then infers the shape itself."""

    __slots__ = ("module", "questions", "budget")

    # an inference costs about this many questions made
    INFERENCE_COST = 8

    def __init__(self, module: Module):
        self.module, self.questions = module, None
        self.budget = sum(len(c.instructions) for c in module.computations)

    def __contains__(self, question) -> bool:
        if self.questions is None:
            self.budget -= self.INFERENCE_COST
            if self.budget > 0:
                return False
            self.questions = set(_builders_questions(self.module).values())
        return question in self.questions


def built_questions_lazily(module: Module) -> Answered:
    """``built_questions(module)`` for one ``verify_after`` of a module made from it: the
    questions are made only if enough instructions no builder made ask one."""
    return Answered({}, _BuiltQuestions(module))


def verify_after(module: Module, trusted: Answered) -> Answered:
    """Verify ``module`` after a pass; ``trusted``: what this returned for the module before it,
    which the caller still holds. Shape inference is a function of an instruction's opcode,
    shape, attributes and operand shapes, so an instruction asking what a verified one asked
    (a pass rebuilt it around a new operand of the same shape, keeping its attributes) is not
    inferred again: a pass that changes a few instructions of a large program costs what it
    changed. An instruction the builder made (``shape_inferred``) had its shape inferred then.
    Returns what to trust after this module."""
    known_questions = trusted.by_instruction
    trusted_questions = trusted.questions
    by_instruction: dict = {}
    known = set()
    comp_names: set[str] = set()
    for comp in module.computations:
        if comp.name in comp_names:
            raise VerificationError(f"two computations are named %{comp.name}")
        comp_names.add(comp.name)
        seen: set = set()
        names: set[str] = set()
        for inst in comp.instructions:
            if inst.name in names:
                raise VerificationError(f"duplicate instruction name %{inst.name} in %{comp.name}")
            names.add(inst.name)
            for op in inst.operands:
                if op not in seen:
                    raise VerificationError(f"%{inst.name} in %{comp.name} uses %{op.name} "
                                            "before it is defined")
            for callee in inst.called_computations:
                if id(callee) not in known:
                    raise VerificationError(
                        f"%{inst.name} in %{comp.name} calls %{callee.name}, which is not an "
                        "earlier computation of the module"
                    )
            question = known_questions.get(inst)
            if question is None:
                question = _shape_question(inst)
                if not inst.shape_inferred and question not in trusted_questions:
                    try:
                        infer_shape(inst.opcode, [o.shape for o in inst.operands], inst.attrs,
                                    inst.shape)
                    except ShapeError as e:
                        raise VerificationError(f"%{inst.name} in %{comp.name}: {e}") from None
            by_instruction[inst] = question
            seen.add(inst)
        if comp.root not in seen:
            raise VerificationError(f"root of %{comp.name} is not one of its instructions")
        numbers = [p.attrs["parameter_number"] for p in comp.parameters]
        if numbers != list(range(len(numbers))):
            raise VerificationError(f"parameters of %{comp.name} are numbered {numbers}")
        known.add(id(comp))
    if module.entry is not module.computations[-1]:
        raise VerificationError("the entry computation must come last")
    return Answered(by_instruction, set(by_instruction.values()))
