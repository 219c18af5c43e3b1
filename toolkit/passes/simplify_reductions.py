"""The simplifier's rules for reductions (``simplify.RULES`` registers them, in this order):
a reduction over size-1 dimensions is a reshape; one through a transpose reads the transpose's
source in memory order; a float16 sum or product accumulates along contiguous lines in
float32, as NumPy's half loops do."""
from __future__ import annotations

from ..ir.builder import ComputationBuilder
from ..ir.dtypes import F16, F32
from ..ir.ops import GroupOp
from ..ir.queries import reducer_opcode
from ..ir.shapes import Shape
from .patterns import is_identity_init, scalar_constant


def _trivial_reduce(inst, ops, b):
    if not isinstance(inst.shape, Shape) or not is_identity_init(inst):
        return None
    x = ops[0]
    if any(x.shape.dims[d] != 1 for d in inst.attrs["dimensions"]):
        return None
    return b.add("reshape", (x,), shape=inst.shape, metadata=inst.metadata)


def _reduce_of_transpose(inst, ops, b):
    """A reduction reads a transposed operand as its source lies in memory (XLA's algebraic
    simplifier permutes a reduce's dimensions through a transpose): ``x.T.mean(axis=1)``
    becomes the column sums of ``x``, read row by row, rather than a row reduction reading
    ``x`` a column at a time (6x slower on a 600x500 float64 matrix). The sums are then
    NumPy's too, which reduces a transposed view in memory order. The kept dimensions come out
    in the source's order; a transpose of the (smaller) result puts them back."""
    if len(ops) != 2 or ops[0].opcode != "transpose" or not isinstance(inst.shape, Shape):
        return None
    x, init = ops[0].operands[0], ops[1]
    perm = ops[0].attrs["dimensions"]
    reduced = inst.attrs["dimensions"]
    kept = [perm[d] for d in range(len(perm)) if d not in reduced]  # source dims, result order
    in_order = sorted(kept)
    attrs = dict(inst.attrs)
    attrs["dimensions"] = tuple(sorted(perm[d] for d in reduced))
    total = b.add("reduce", (x, init), attrs,
                  Shape(inst.shape.dtype, tuple(x.shape.dims[d] for d in in_order)),
                  inst.metadata)
    if kept == in_order:
        return total
    return b.add("transpose", (total,), {"dimensions": tuple(in_order.index(d) for d in kept)},
                 metadata=inst.metadata)


def _float16_accumulation(inst, ops, b):
    """NumPy's half loops reduce a contiguous line in float32 and round once at its end (the
    reference interpreter runs NumPy's reduce); across lines (the reduced dimensions before the
    last kept one) they add one line's result at a time, rounding every step to float16, as a
    float16 reduce does. The reduced trailing dimensions become a float32 reduce, the others
    stay a float16 reduce of its rounded results."""
    opcode = reducer_opcode(inst)
    if (len(ops) != 2 or not isinstance(inst.shape, Shape) or inst.shape.dtype != F16
            or opcode not in GroupOp.ARITHMETIC_REDUCERS
            or scalar_constant(ops[1]) != (0 if opcode == "add" else 1)):  # (folded in once)
        return None
    x, init = ops
    rank, dims = x.shape.rank, set(inst.attrs["dimensions"])
    line = rank
    while line > 0 and line - 1 in dims:
        line -= 1
    if line == rank:  # (no trailing dimension reduced: every step rounds)
        return None
    scalar = Shape(F32, ())

    def region(suffix: str, rounded: bool):
        r = ComputationBuilder(b.uniquer.fresh(f"{inst.name}.{suffix}"), b.uniquer)
        out = r.add(opcode, (r.parameter(0, scalar, "Arg_0"), r.parameter(1, scalar, "Arg_1")))
        if rounded:
            out = r.add("convert", (r.add("convert", (out,), shape=Shape(F16, ())),),
                        shape=scalar)
        return r.build(out)

    wide = [b.add("convert", (op,), shape=op.shape.with_dtype(F32), metadata=inst.metadata)
            for op in (x, init)]
    total = b.add("reduce", wide, {"dimensions": tuple(range(line, rank)),
                                   "to_apply": region("f32", False)},
                  Shape(F32, x.shape.dims[:line]), inst.metadata)
    rest = tuple(sorted(d for d in dims if d < line))
    if rest:  # a float32 total of float16 values: each line's sum added, rounded to float16
        total = b.add("reduce", (total, wide[1]),
                      {"dimensions": rest, "to_apply": region("f16_steps", True)},
                      inst.shape.with_dtype(F32), inst.metadata)
    return b.add("convert", (total,), shape=inst.shape, metadata=inst.metadata)


REDUCTION_RULES = {
    "reduce over size-1 dimensions -> reshape": _trivial_reduce,
    "reduce(transpose(x)) -> transpose(reduce(x))": _reduce_of_transpose,
    "float16 add/multiply reduce -> float32 accumulation along lines": _float16_accumulation,
}
