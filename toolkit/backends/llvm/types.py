"""HLO element types as LLVM IR types. Predicates compute as i1 and are stored as i8."""
from __future__ import annotations

from llvmlite import ir

from ...ir.dtypes import ElementType

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
F16, F32, F64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()
_VALUE = {"pred": I1, "s8": I8, "s16": ir.IntType(16), "s32": I32, "s64": I64, "u8": I8,
          "u16": ir.IntType(16), "u32": I32, "u64": I64, "f16": F16, "f32": F32, "f64": F64,
          "c64": ir.LiteralStructType([F32, F32]), "c128": ir.LiteralStructType([F64, F64])}


def value_type(t: ElementType) -> ir.Type:
    """The type values of ``t`` have in registers."""
    return _VALUE[t.name]


def storage_type(t: ElementType) -> ir.Type:
    """The type elements of ``t`` have in memory (NumPy's bool is one byte)."""
    return I8 if t.name == "pred" else _VALUE[t.name]


def constant(t: ElementType, value) -> ir.Constant:
    ty = value_type(t)
    if t.is_complex:  # (real, imag), NumPy's layout
        v = complex(value)
        part = value_type(t.component)
        return ir.Constant(ty, [ir.Constant(part, v.real), ir.Constant(part, v.imag)])
    if t.is_float:
        return ir.Constant(ty, float(value))
    if t.is_bool:
        return ir.Constant(ty, int(bool(value)))
    bits = ty.width
    return ir.Constant(ty, int(value) & ((1 << bits) - 1))
