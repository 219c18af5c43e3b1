"""NVPTX building blocks for kernels whose threads cooperate: special registers, barriers,
warp shuffles of any scalar type, shared and global scratch, memory fences."""
from __future__ import annotations

from llvmlite import ir

from ...ir.ops import identity as _identity
from ..llvm.elemental import emit_binary
from ..llvm.types import I8, I32, I64, constant

WARP = 32
FULL_MASK = 0xFFFFFFFF


def ptx_name(name: str) -> str:
    """PTX identifiers cannot contain '.' or '-'."""
    return name.replace(".", "_").replace("-", "_")


def _intrinsic(b: ir.IRBuilder, name: str, ret, args):
    fn = b.module.globals.get(name) or ir.Function(
        b.module, ir.FunctionType(ret, [a.type for a in args]), name
    )
    return b.call(fn, args)


def sreg(b: ir.IRBuilder, name: str) -> ir.Value:
    fn = b.module.globals.get(f"llvm.nvvm.read.ptx.sreg.{name}") or ir.Function(
        b.module, ir.FunctionType(I32, []), f"llvm.nvvm.read.ptx.sreg.{name}")
    return b.zext(b.call(fn, []), I64)


def barrier(b: ir.IRBuilder) -> None:
    fn = b.module.globals.get("llvm.nvvm.barrier0") or ir.Function(
        b.module, ir.FunctionType(ir.VoidType(), []), "llvm.nvvm.barrier0")
    b.call(fn, [])


def _shuffle_word(b: ir.IRBuilder, word: ir.Value, lane_mask: int) -> ir.Value:
    return _intrinsic(
        b,
        "llvm.nvvm.shfl.sync.bfly.i32",
        I32,
        [
            ir.Constant(I32, FULL_MASK),
            word,
            ir.Constant(I32, lane_mask),
            ir.Constant(I32, WARP - 1),
        ],
    )


def shuffle_xor(b: ir.IRBuilder, value: ir.Value, lane_mask: int) -> ir.Value:
    """The ``value`` of lane ``lane ^ lane_mask``, for any scalar type (in 32-bit words) and
    complex numbers (a struct of two: each part moved on its own)."""
    t = value.type
    if isinstance(t, ir.LiteralStructType):
        moved = ir.Constant(t, ir.Undefined)
        for k in range(len(t.elements)):
            moved = b.insert_value(moved, shuffle_xor(b, b.extract_value(value, k), lane_mask), k)
        return moved
    width = (
        t.width if isinstance(t, ir.IntType) else {"half": 16, "float": 32, "double": 64}[str(t)]
    )
    bits = value if isinstance(t, ir.IntType) else b.bitcast(value, ir.IntType(width))
    if width <= 32:
        word = bits if width == 32 else b.zext(bits, I32)
        moved = _shuffle_word(b, word, lane_mask)
        moved = moved if width == 32 else b.trunc(moved, ir.IntType(width))
    else:
        lo = _shuffle_word(b, b.trunc(bits, I32), lane_mask)
        hi = _shuffle_word(b, b.trunc(b.lshr(bits, ir.Constant(I64, 32)), I32), lane_mask)
        moved = b.or_(b.zext(lo, I64), b.shl(b.zext(hi, I64), ir.Constant(I64, 32)))
    return moved if isinstance(t, ir.IntType) else b.bitcast(moved, t)


def warp_allreduce(e, reducer: str, value: ir.Value, dtype) -> ir.Value:
    """Every lane ends with the combination of all 32 lanes' values."""
    for lane_mask in (16, 8, 4, 2, 1):
        value = emit_binary(e, reducer, value, shuffle_xor(e.b, value, lane_mask), dtype)
    return value


def identity(h, reducer: str) -> ir.Constant:
    t = h.shape.dtype
    return constant(t, _identity(reducer, t.numpy))


def shared_array(b: ir.IRBuilder, t: ir.Type, n: int, name: str) -> ir.GlobalVariable:
    g = ir.GlobalVariable(b.module, ir.ArrayType(t, n), name, addrspace=3)
    g.linkage = "internal"
    g.initializer = ir.Constant(ir.ArrayType(t, n), None)
    return g


def global_array(b: ir.IRBuilder, t: ir.Type, n: int, name: str) -> ir.GlobalVariable:
    g = ir.GlobalVariable(b.module, ir.ArrayType(t, n), name, addrspace=1)
    g.linkage = "internal"
    g.initializer = ir.Constant(ir.ArrayType(t, n), None)  # zero at module load
    return g


def memory_type(t: ir.Type) -> ir.Type:
    return I8 if t == ir.IntType(1) else t  # predicates live in memory as bytes


def byte_size(t: ir.Type) -> int:
    if isinstance(t, ir.LiteralStructType):
        return sum(byte_size(p) for p in t.elements)
    return (
        t.width // 8 if isinstance(t, ir.IntType) else {"half": 2, "float": 4, "double": 8}[str(t)]
    )


def to_memory(b, v, g):
    return b.zext(v, I8) if v.type == ir.IntType(1) else v


def from_memory(b, v, t):
    return b.icmp_unsigned("!=", v, ir.Constant(I8, 0)) if t == ir.IntType(1) else v


def fence(b: ir.IRBuilder) -> None:
    fn = b.module.globals.get("llvm.nvvm.membar.gl") or ir.Function(
        b.module, ir.FunctionType(ir.VoidType(), []), "llvm.nvvm.membar.gl")
    b.call(fn, [])
