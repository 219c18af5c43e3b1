"""The elemental emitter: LLVM IR for the value of one element of an instruction at a given
multi-dimensional index, recursively through the fused computation. Target-neutral: the CPU
backend wraps it in loop nests, the GPU backend in grid-stride loops. One entry per op in
``ELEMENTAL``; values memoised per (instruction, index) within a loop body.

This module holds the rules for the leaves, elementwise ops and data movement, and imports the
rest so that ``ELEMENTAL`` is complete: the machinery is in emitter, the real scalar
arithmetic in scalars, complex numbers in complex, gathers and dynamic slices in indexing."""
from __future__ import annotations

import hashlib

import numpy as np
from llvmlite import ir

from ...ir.ops import GroupOp
from . import complex as lcomplex
from . import indexing as _indexing  # noqa: F401 - gather, dynamic-slice, dynamic-update-slice
from .emitter import (ELEMENTAL, CodegenUnsupported, ElementalEmitter, delinearize, i64, linearize,
                      rule)
from .emitter import dtype_of as _dtype, intrinsic as _intrinsic
from .scalars import BINARY, UNARY, convert_real, widened
from .types import I1, constant, storage_type, value_type

__all__ = ["CodegenUnsupported", "ELEMENTAL", "ElementalEmitter", "delinearize", "emit_binary",
           "i64", "linearize"]  # where the backends have always found them


# ---- leaves ---------------------------------------------------------------------------------
@rule("parameter")
def _parameter(e, inst, index):
    ptr, shape = e.inputs[id(inst)]
    return e.load(ptr, shape, index)


# A constant array up to this many elements is written element by element in the IR (readable,
# and what the golden texts show); a longer one as its bytes, one ``c"..."`` string: llvmlite
# formats an element list at about 20 us an element (a 32,768-element complex twiddle table
# took 0.7 s per kernel to emit and as long again to print).
LITERAL_ELEMENTS = 64


@rule("constant")
def _constant(e, inst, index):
    lit: np.ndarray = inst.attrs["literal"]
    t = _dtype(inst)
    if lit.size == 1:
        return constant(t, lit.reshape(())[()])
    # named by content: the same text every run, one global for equal constants
    content = lit.dtype.str.encode() + str(lit.shape).encode() + lit.tobytes()
    name = f"const_{hashlib.sha1(content).hexdigest()[:16]}"
    g = e.module.globals.get(name)
    if g is None:
        g = _constant_global(e.module, name, t, lit)
    b = e.b
    st = storage_type(t)
    base = g if g.type.pointee.element == st else b.bitcast(
        g, ir.ArrayType(st, lit.size).as_pointer())  # a byte array read as its elements
    ptr = b.gep(base, [i64(0), linearize(b, index, inst.shape.dims)], inbounds=True)
    v = b.load(ptr)
    return b.icmp_unsigned("!=", v, ir.Constant(v.type, 0)) if t.is_bool else v


def _constant_global(module, name, t, lit):
    """An internal constant global holding ``lit``'s elements in storage layout (NumPy's: a
    complex element is (real, imag), a bool one byte, little-endian as both targets)."""
    st = storage_type(t)
    values = lit.reshape(-1).astype(np.uint8 if t.is_bool else lit.dtype)
    if values.size > LITERAL_ELEMENTS:
        raw = np.ascontiguousarray(values).astype(values.dtype.newbyteorder("<"), copy=False)
        arr = ir.ArrayType(ir.IntType(8), raw.nbytes)
        initializer = ir.Constant(arr, bytearray(raw.tobytes()))
    else:
        items = [
            constant(t, v) if t.is_complex else ir.Constant(st, float(v) if t.is_float else int(v))
            for v in values
        ]
        arr = ir.ArrayType(st, len(items))
        initializer = ir.Constant(arr, items)
    g = ir.GlobalVariable(module, arr, name)
    g.initializer = initializer
    g.global_constant = True
    g.linkage = "internal"
    g.align = 16  # at least the element's alignment, for a byte array too
    return g


@rule("iota")
def _iota(e, inst, index):
    i = index[inst.attrs["iota_dimension"]]
    t = _dtype(inst)
    if t.is_complex:
        raise CodegenUnsupported(f"iota of complex type {t.name} (%{inst.name})")
    ty = value_type(t)
    return e.b.sitofp(i, ty) if t.is_float else e.b.trunc(i, ty) if ty.width < 64 else i


# ---- elementwise --------------------------------------------------------------------------
def _complex_unary(e, opcode, z, t):
    if opcode == "abs":
        return lcomplex.modulus(e, z, t)
    rule = lcomplex.UNARY.get(opcode)
    if rule is None:
        raise CodegenUnsupported(f"{opcode} of complex numbers")
    return rule(e, z, t)


def _complex_binary(e, opcode, z, w, t):
    rule = lcomplex.BINARY.get(opcode)
    if rule is None:
        raise CodegenUnsupported(f"{opcode} of complex numbers")
    return rule(e, z, w, t)


_FCMP = {"EQ": ("oeq", True), "NE": ("une", False), "LT": ("olt", True), "LE": ("ole", True),
         "GT": ("ogt", True), "GE": ("oge", True)}
_ICMP = {"EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">="}


_REDUCING_MINMAX = {"maximum": "llvm.maximum", "minimum": "llvm.minimum"}


def emit_binary(e: ElementalEmitter, opcode: str, a, c, t):
    """A reduction's combiner. Float max/min use LLVM's maximum/minimum, which vectorise: which
    of a +0.0/-0.0 tie a reduction keeps depends on its visiting order, unspecified anyway."""
    if t.is_complex:
        return _complex_binary(e, opcode, a, c, t)
    if t.is_float and opcode in _REDUCING_MINMAX:
        return _intrinsic(e, _REDUCING_MINMAX[opcode], [a, c], value_type(t))
    return widened(e, BINARY[opcode], [a, c], t)


emit_elementwise_binary = lcomplex.elementwise_binary  # (a scan's fold: backends/llvm/scan)


def _unary_rule(op):
    def emit(e, inst, index):
        t = inst.operands[0].shape.dtype
        x = e.operand(inst, 0, index)
        return _complex_unary(e, op, x, t) if t.is_complex else widened(e, UNARY[op], [x], t)
    return emit


def _binary_rule(op):
    def emit(e, inst, index):
        t = inst.operands[0].shape.dtype
        a, c = e.operand(inst, 0, index), e.operand(inst, 1, index)
        return (
            _complex_binary(e, op, a, c, t) if t.is_complex else widened(e, BINARY[op], [a, c], t)
        )
    return emit


for _op in UNARY:
    ELEMENTAL[_op] = _unary_rule(_op)
for _op in BINARY:
    ELEMENTAL[_op] = _binary_rule(_op)


@rule("real")
def _real(e, inst, index):
    x = e.operand(inst, 0, index)
    return e.b.extract_value(x, 0) if inst.operands[0].shape.dtype.is_complex else x


@rule("imag")
def _imag(e, inst, index):
    t = inst.operands[0].shape.dtype
    x = e.operand(inst, 0, index)
    return e.b.extract_value(x, 1) if t.is_complex else ir.Constant(x.type, 0.0)


@rule("complex")
def _complex(e, inst, index):
    return lcomplex.make(e.b, _dtype(inst), e.operand(inst, 0, index), e.operand(inst, 1, index))


@rule("compare")
def _compare(e, inst, index):
    a, c = e.operand(inst, 0, index), e.operand(inst, 1, index)
    t = inst.operands[0].shape.dtype
    d = inst.attrs["direction"]
    if t.is_complex:
        return lcomplex.compare(e, a, c, d)
    if t.is_float:
        code, ordered = _FCMP[d]
        return (e.b.fcmp_ordered if ordered else e.b.fcmp_unordered)(
            {"oeq": "==", "une": "!=", "olt": "<", "ole": "<=", "ogt": ">", "oge": ">="}[code], a, c
        )
    if t.kind in "ub":
        return e.b.icmp_unsigned(_ICMP[d], a, c)
    return e.b.icmp_signed(_ICMP[d], a, c)


@rule("select")
def _select(e, inst, index):
    p_inst = inst.operands[0]
    p = e.value(p_inst, index if p_inst.shape.rank else [])
    return e.b.select(p, e.operand(inst, 1, index), e.operand(inst, 2, index))


@rule("clamp")
def _clamp(e, inst, index):
    lo_i, x_i, hi_i = inst.operands
    t = x_i.shape.dtype
    lo = e.value(lo_i, index if lo_i.shape.rank else [])
    hi = e.value(hi_i, index if hi_i.shape.rank else [])
    x = e.value(x_i, index)
    return BINARY["minimum"](e, BINARY["maximum"](e, x, lo, t), hi, t)


@rule("convert")
def _convert(e, inst, index):
    x = e.operand(inst, 0, index)
    src, dst = inst.operands[0].shape.dtype, _dtype(inst)
    if dst.is_complex:
        return lcomplex.convert(e, x, src, dst)
    if src.is_complex:
        raise CodegenUnsupported(f"convert {src.name} -> {dst.name} (take real() first)")
    return convert_real(e, x, src, dst)



@rule("bitcast-convert")
def _bitcast_convert(e, inst, index):
    return e.b.bitcast(e.operand(inst, 0, index), value_type(_dtype(inst)))


# ---- data movement: index mapping ------------------------------------------------------------
@rule("broadcast")
def _broadcast(e, inst, index):
    return e.operand(inst, 0, [index[d] for d in inst.attrs["dimensions"]])


@rule("reshape", "bitcast")
def _reshape(e, inst, index):
    src = inst.operands[0].shape.dims
    dst = inst.shape.dims
    if [d for d in src if d != 1] == [d for d in dst if d != 1]:  # only size-1 dims change
        kept = iter([i for i, d in zip(index, dst) if d != 1])
        return e.operand(inst, 0, [next(kept) if d != 1 else i64(0) for d in src])
    source = inst.operands[0]
    if source.opcode == "parameter" and id(source) in e.inputs:
        # row-major: element k of the result is element k of the buffer, read without the
        # divisions of a multi-index (LLVM then sees a contiguous copy, and vectorises it)
        ptr, shape = e.inputs[id(source)]
        return e.load_linear(ptr, shape, linearize(e.b, index, dst))
    return e.operand(inst, 0, delinearize(e.b, linearize(e.b, index, dst), src))


@rule("transpose")
def _transpose(e, inst, index):
    perm = inst.attrs["dimensions"]
    src = [None] * len(perm)
    for out_dim, in_dim in enumerate(perm):
        src[in_dim] = index[out_dim]
    return e.operand(inst, 0, src)


@rule("slice")
def _slice(e, inst, index):
    b = e.b
    src = [b.add(i64(s), b.mul(i, i64(st))) if (s, st) != (0, 1) else i
           for i, (s, _, st) in zip(index, inst.attrs["slice"])]
    return e.operand(inst, 0, src)


@rule("reverse")
def _reverse(e, inst, index):
    dims = inst.attrs["dimensions"]
    size = inst.shape.dims
    return e.operand(
        inst, 0, [e.b.sub(i64(size[d] - 1), i) if d in dims else i for d, i in enumerate(index)]
    )


@rule("copy")
def _copy(e, inst, index):
    return e.operand(inst, 0, index)


@rule("pad")
def _pad(e, inst, index):
    b = e.b
    x_inst = inst.operands[0]
    inside = ir.Constant(I1, 1)
    src = []
    for d, (i, (lo, _, interior)) in enumerate(zip(index, inst.attrs["padding"])):
        shifted = b.sub(i, i64(lo))
        stride = interior + 1
        q = b.sdiv(shifted, i64(stride)) if stride != 1 else shifted
        ok = b.icmp_signed(">=", shifted, i64(0))
        if stride != 1:
            ok = b.and_(ok, b.icmp_signed("==", b.srem(shifted, i64(stride)), i64(0)))
        ok = b.and_(ok, b.icmp_signed("<", q, i64(x_inst.shape.dims[d])))
        inside = b.and_(inside, ok)
        src.append(b.select(ok, q, i64(0)))
    return b.select(inside, e.value(x_inst, src), e.value(inst.operands[1], []))


@rule("concatenate")
def _concatenate(e, inst, index):
    """The element of the one operand whose range along the axis holds the index.

    Along the innermost dimension (the heads of an attention layer put side by side, a
    stencil's boundary and interior), or between more than ``SELECTED_OPERANDS`` operands: a
    branch per operand, as XLA's elemental emitter does, so an element computes (loads) one
    operand, not every operand with a select. Measured on a [128, 6x64] concatenation, 165
    against 267 us. The branches are a balanced binary search on the index, so an element
    makes log2(n) comparisons, not up to n (a concatenation of 128 arrays of 512 elements
    took 1.8 ms through a chain, NumPy 0.2). Along an outer dimension between a few operands,
    the operand is the same for a whole row, and the selects between rows' elements, each read
    in order, vectorise: 4096x1024 rows took 5.7 ms so, 7.1 ms with branches. Values an
    operand's branch computes stay in its branch (the memo is restored). A kernel whose result
    is a concatenation writes each operand by a loop of its own instead (the CPU's
    ``kernels._emit_concatenation``): no search at all."""
    b = e.b
    axis = inst.attrs["dimensions"][0]
    parts = concatenated_parts(inst)
    if axis != inst.shape.rank - 1 and len(parts) <= SELECTED_OPERANDS:
        return _concatenate_by_selects(e, inst, index)
    if not parts:  # every operand is empty along the axis: no element is ever read
        return constant(_dtype(inst), 0)
    if len(parts) == 1:
        op, start, _ = parts[0]
        return e.value(op, _local_index(b, index, axis, start))
    saved = e.memo
    done = b.append_basic_block("concat.done")
    incoming = []
    # (lo, hi, block): parts[lo:hi] are left to choose between, in ``block``; the tree is
    # log2(n) deep, walked with a stack rather than by recursion
    pending = [(0, len(parts), b.block)]
    while pending:
        lo, hi, block = pending.pop()
        b.position_at_end(block)
        if hi - lo == 1:
            op, start, _ = parts[lo]
            e.memo = dict(saved)
            incoming.append((e.value(op, _local_index(b, index, axis, start)), b.block))
            b.branch(done)
            continue
        mid = (lo + hi) // 2
        left = b.append_basic_block(f"concat.{lo}")
        right = b.append_basic_block(f"concat.{mid}")
        b.cbranch(b.icmp_signed("<", index[axis], i64(parts[mid][1])), left, right)
        pending += [(mid, hi, right), (lo, mid, left)]
    b.position_at_end(done)
    e.memo = saved
    phi = b.phi(incoming[0][0].type)
    for value, block in incoming:
        phi.add_incoming(value, block)
    return phi


# along an outer dimension, a concatenation of at most this many operands selects between them
SELECTED_OPERANDS = 4


def concatenated_parts(inst) -> list[tuple]:
    """(operand, its start along the axis, its length) for each operand not empty there."""
    axis = inst.attrs["dimensions"][0]
    parts, offset = [], 0
    for op in inst.operands:
        n = op.shape.dims[axis]
        if n:
            parts.append((op, offset, n))
        offset += n
    return parts


def _local_index(b, index, axis: int, start: int) -> list:
    at = list(index)
    at[axis] = b.sub(index[axis], i64(start)) if start else index[axis]
    return at


def _concatenate_by_selects(e, inst, index):
    """Every operand read at its clamped index, the one whose range holds the index selected."""
    b = e.b
    axis = inst.attrs["dimensions"][0]
    offset = 0
    result = None
    for op in inst.operands:
        n = op.shape.dims[axis]
        local = list(index)
        local[axis] = b.sub(index[axis], i64(offset))
        clamped = b.select(b.icmp_signed("<", local[axis], i64(0)), i64(0), local[axis])
        clamped = b.select(
            b.icmp_signed(">=", clamped, i64(max(n, 1))), i64(max(n - 1, 0)), clamped
        )
        local[axis] = clamped
        if n:
            v = e.value(op, local)
            result = (
                v
                if result is None
                else b.select(b.icmp_signed(">=", index[axis], i64(offset)), v, result)
            )
        offset += n
    if result is None:  # every operand is empty along the axis: no element is ever read
        return constant(_dtype(inst), 0)
    return result


def covered_ops() -> set[str]:
    return set(ELEMENTAL)



UNSUPPORTED_ELEMENTAL = set(GroupOp.PER_ELEMENT) - set(ELEMENTAL)
