"""Checks a module built by any means (builder, parser, a pass): every shape re-inferred,
operands defined before use, names unique, parameters numbered 0..n-1, callees present."""
from __future__ import annotations

from .nodes import Module
from .shape_inference import ShapeError, infer_shape


class VerificationError(ValueError):
    pass


def verify(module: Module) -> Module:
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
            try:
                infer_shape(inst.opcode, [o.shape for o in inst.operands], inst.attrs, inst.shape)
            except ShapeError as e:
                raise VerificationError(f"{where}: {e}") from None
            seen.add(id(inst))
        if id(comp.root) not in seen:
            raise VerificationError(f"root of %{comp.name} is not one of its instructions")
        numbers = [p.attrs["parameter_number"] for p in comp.parameters]
        if numbers != list(range(len(numbers))):
            raise VerificationError(f"parameters of %{comp.name} are numbered {numbers}")
        known.add(id(comp))
    if module.entry is not module.computations[-1]:
        raise VerificationError("the entry computation must come last")
    return module
