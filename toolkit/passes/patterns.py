"""Small predicates the rewrite rules share."""
from __future__ import annotations

import numpy as np

from ..ir.nodes import Instruction
from ..ir.ops import GroupOp, identity
from ..ir.queries import reducer_opcode
from ..ir.shapes import Shape


def scalar_constant(inst: Instruction):
    """The value of a scalar constant, or of a broadcast of one; None otherwise."""
    if inst.opcode == "broadcast":
        inst = inst.operands[0]
    if (
        inst.opcode == "constant"
        and isinstance(inst.shape, Shape)
        and inst.attrs["literal"].size == 1
    ):
        return inst.attrs["literal"].reshape(())[()]
    return None


def same_value(v, value) -> bool:
    """``v == value``, except that zeros of different sign differ: ``x + 0.0`` is not ``x``
    when ``x`` is -0.0 (it is +0.0), while ``x + -0.0`` always is."""
    if v is None or not v == value:  # NaN equals nothing
        return False
    kind = np.asarray(v).dtype.kind
    if kind == "c":  # each part's zero keeps its sign
        v, value = complex(v), complex(value)
        return all(not (p == 0 and np.signbit(p) != np.signbit(q))
                   for p, q in ((v.real, value.real), (v.imag, value.imag)))
    return not (v == 0 and kind == "f" and np.signbit(v) != np.signbit(value))


def is_constant_value(inst: Instruction, value) -> bool:
    return same_value(scalar_constant(inst), value)


def is_identity_dims(dims, rank: int) -> bool:
    return tuple(dims) == tuple(range(rank))


def same_array_type(a: Instruction, b: Instruction) -> bool:
    return isinstance(a.shape, Shape) and a.shape.same_type(b.shape)




def is_identity_init(reduce: Instruction) -> bool:
    op = reducer_opcode(reduce)
    if op not in GroupOp.REDUCERS or len(reduce.operands) != 2:
        return False
    return same_value(scalar_constant(reduce.operands[1]), identity(op, reduce.shape.dtype.numpy))
