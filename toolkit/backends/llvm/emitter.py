"""The elemental emitter's machinery: ``ElementalEmitter`` computes the LLVM IR value of one
element of an instruction at a multi-dimensional index, memoised per (instruction, index)
within a loop body, by the op's entry in ``ELEMENTAL``. The entries are registered with
``@rule`` by elemental and indexing; this module imports neither (they build on it)."""
from __future__ import annotations

from typing import Callable

from llvmlite import ir

from ...ir.nodes import Instruction
from ...ir.shapes import Shape
from . import math as lmath
from .types import I64, storage_type, value_type
from .vector_math import VectorMath, declare_vectorizable


class CodegenUnsupported(NotImplementedError):
    """An instruction this emitter cannot lower (the backend falls back or reports it)."""


def i64(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


def linearize(b: ir.IRBuilder, index, dims) -> ir.Value:
    """Row-major. The outermost extent never enters the code (nor do dimensions of one
    element, whose index is 0), so kernels that differ only in it (an unrolled loop's trips
    over shorter and shorter rows) emit the same IR (backends/llvm/shared_code)."""
    kept = [(i, d) for i, d in zip(index, dims) if d != 1]
    if not kept:
        return i64(0)
    linear = kept[0][0]
    for i, d in kept[1:]:
        linear = b.add(b.mul(linear, i64(d)), i)
    return linear


def delinearize(b: ir.IRBuilder, linear, dims) -> list:
    """The index of element ``linear`` (< the product of ``dims``) in row-major order; as in
    ``linearize``, the outermost extent is not needed."""
    outermost = next((k for k, d in enumerate(dims) if d != 1), len(dims))
    out = []
    for k in range(len(dims) - 1, -1, -1):
        d = dims[k]
        if d == 1:
            out.append(i64(0))
        elif k == outermost:
            out.append(linear)
        else:
            out.append(b.urem(linear, i64(d)))
            linear = b.udiv(linear, i64(d))
    return out[::-1]


class ElementalEmitter:
    def __init__(self, builder: ir.IRBuilder, inputs: dict[int, tuple[ir.Value, Shape]],
                 module: ir.Module, target: str = "cpu", device_math: bool = False,
                 vector_math: VectorMath | None = None):
        self.b = builder
        self.inputs = inputs  # id(parameter instruction) -> (pointer, shape)
        self.module = module
        self._invariant = None  # the empty metadata node !{} that marks invariant loads
        self.memo: dict[tuple, ir.Value] = {}
        self.target = target  # "cpu" calls libm; "gpu" (NVPTX) calls libdevice's __nv_* when linked
        self.device_math = device_math  # libdevice will be linked into the GPU module
        self.vector_math = vector_math  # the CPU's vector math library (libmvec), if any
        # id(parameter) of starts this call's clamps would not change (planning's
        # starts_in_bounds): read as they are
        self.unclamped: frozenset[int] = frozenset()

    def libm(self, what: str) -> None:
        if self.target != "cpu" and not self.device_math:
            raise CodegenUnsupported(
                f"{what} needs a math library call: the GPU's is libdevice "
                "(the CUDA toolkit's nvvm/libdevice/libdevice.10.bc), not found here; "
                "set CUDA_HOME (float32 has toolkit's own)"
            )

    def math_call(self, stem: str, args, t) -> ir.Value:
        """``stem`` (exp, log1p, pow, ...) from the target's math library, for type ``t``:
        libm's exp/expf on the CPU, libdevice's __nv_exp/__nv_expf on the GPU."""
        ty = value_type(t)
        f32 = t.name == "f32"
        name = (
            f"__nv_{stem}{'f' if f32 else ''}"
            if self.target == "gpu"
            else stem + ("f" if f32 else "")
        )
        fn = self.module.globals.get(name)
        if fn is None:
            fn_type = ir.FunctionType(ty, [ty] * len(args))
            fn = (
                declare_vectorizable(self.module, self.vector_math, name, fn_type)
                if self.vector_math is not None
                else ir.Function(self.module, fn_type, name)
            )
        return self.b.call(fn, args)

    def vectorizable(self, stem: str, t, arguments: int = 1) -> bool:
        """A libm call beats LLVM's intrinsic where the vector library has ``stem`` for ``t``."""
        return self.vector_math is not None and self.vector_math.covers(
            stem, t.name == "f32", arguments
        )

    def reset(self) -> None:
        self.memo.clear()

    def load(self, ptr, shape: Shape, index, invariant: bool = True) -> ir.Value:
        """An element of ``ptr``. ``invariant``: the buffer does not change during the kernel (an
        input); a read of what the kernel itself writes (a scatter's read-modify-write) is not."""
        return self.load_linear(ptr, shape, linearize(self.b, index, shape.dims), invariant)

    def load_linear(self, ptr, shape: Shape, linear, invariant: bool = True) -> ir.Value:
        """Element ``linear`` (row-major) of ``ptr``, as ``load`` reads it."""
        b = self.b
        addr = b.gep(ptr, [linear], inbounds=True)
        v = b.load(addr)
        # inputs never change during a kernel: the read-only cache (ld.global.nc) may serve them
        if self.target == "gpu" and invariant:
            if self._invariant is None:
                self._invariant = self.module.add_metadata([])
            v.set_metadata("invariant.load", self._invariant)
        return b.icmp_unsigned("!=", v, ir.Constant(v.type, 0)) if shape.dtype.is_bool else v

    def store(self, ptr, shape: Shape, index, value) -> None:
        b = self.b
        if shape.dtype.is_bool:
            value = b.zext(value, storage_type(shape.dtype))
        b.store(value, b.gep(ptr, [linearize(b, index, shape.dims)], inbounds=True))

    def value(self, inst: Instruction, index) -> ir.Value:
        key = (id(inst), tuple(id(i) for i in index))
        v = self.memo.get(key)
        if v is None:
            rule = ELEMENTAL.get(inst.opcode)
            if rule is None:
                raise CodegenUnsupported(f"no elemental lowering for {inst.opcode} (%{inst.name})")
            v = self.memo[key] = rule(self, inst, list(index))
        return v

    def operand(self, inst: Instruction, i: int, index) -> ir.Value:
        return self.value(inst.operands[i], index)


Rule = Callable[[ElementalEmitter, Instruction, list], ir.Value]
ELEMENTAL: dict[str, Rule] = {}


def rule(*opcodes):
    def deco(fn):
        for op in opcodes:
            ELEMENTAL[op] = fn
        return fn
    return deco


def dtype_of(inst):
    return inst.shape.dtype


def intrinsic(e: ElementalEmitter, name: str, args, ty):
    return e.b.call(lmath.declare(e.module, name, [ty], ty, [a.type for a in args]), args)
