"""CPU kernels: the elemental emitter wrapped in loop nests.

Every kernel is ``void name(ptr noalias in0, ..., ptr noalias out0, ..., i64 begin, i64 end)``
and computes the slice [begin, end) of its outermost parallel dimension, so the executor can
split it across threads. Kinds: ``loop`` (one output element per iteration), ``row`` (a
reduction over trailing dimensions: register accumulators, reassociation allowed so LLVM
vectorises it) and ``general`` (any other reduction: accumulates into the output in input
order, so the inner loop stays contiguous)."""
from __future__ import annotations

from llvmlite import ir

from ...ir.shapes import Shape
from ...ir.queries import IDENTITIES
from ..llvm.elemental import ElementalEmitter, emit_binary, i64
from ..llvm import complex as lcomplex
from ..llvm.indexing import emit_scatter, emit_update_slice
from ..llvm.loops import for_range, nest
from ..llvm.reduction import fold_element, start_accumulators, store_accumulators
from ..llvm.planning import KernelSpec
from ..llvm.types import F64, I64, constant, storage_type, value_type
from .vector_library import host_vector_math

FAST = ("reassoc", "contract")  # no nsz: 0.0 + -0.0 must stay +0.0, as in NumPy


# ---- kernel emission ----------------------------------------------------------------------
def emit_kernel(module: ir.Module, spec: KernelSpec) -> ir.Function:
    comp = spec.computation
    shapes = [p.shape for p in comp.parameters] + [o.shape for o in spec.outputs]
    ptr_types = [storage_type(s.dtype).as_pointer() for s in shapes]
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), ptr_types + [I64, I64]), spec.name)
    for arg in fn.args[:-2]:
        if not spec.in_place:  # in place, an input and the output are one buffer
            arg.add_attribute("noalias")
    begin, end = fn.args[-2], fn.args[-1]
    entry = fn.append_basic_block("entry")
    b = ir.IRBuilder(entry)
    inputs = {id(p): (fn.args[i], p.shape) for i, p in enumerate(comp.parameters)}
    out_ptrs = {id(o): (fn.args[len(comp.parameters) + i], o.shape) for i, o in enumerate(spec.outputs)}
    e = ElementalEmitter(b, inputs, module, vector_math=host_vector_math())
    if spec.kind == "update_slice":
        (out,) = spec.outputs
        emit_update_slice(e, out, *out_ptrs[id(out)], begin, end)
    elif spec.kind == "scatter":
        (out,) = spec.outputs
        emit_scatter(e, out, *out_ptrs[id(out)])
    elif spec.kind == "loop":
        _emit_loop(b, e, spec, out_ptrs, begin, end)
    elif spec.kind == "row":
        _emit_row(b, e, spec, out_ptrs, begin, end)
    else:
        _emit_general(b, e, spec, out_ptrs, begin, end)
    b.ret_void()
    return fn


def _emit_loop(b, e, spec, out_ptrs, begin, end):
    shape: Shape = spec.outputs[0].shape

    def body(index):
        e.reset()
        for o in spec.outputs:
            ptr, s = out_ptrs[id(o)]
            e.store(ptr, s, index, e.value(o, index))

    if shape.rank == 0:
        body([])
    else:
        nest(b, shape.dims, body, begin, end)


def _reduce(e, spec, hero, acc, v, t):
    op = spec.reducers[id(hero)]
    if t.is_complex and op == "add":
        return lcomplex.add(e, acc, v, t, flags=FAST)
    if t.is_float and op in ("add", "multiply"):
        return (e.b.fadd if op == "add" else e.b.fmul)(acc, v, flags=FAST)
    return emit_binary(e, op, acc, v, t)


# Float sums are accumulated in blocks: a block's elements in vector registers (reassociated,
# so LLVM vectorises them), each block's total into a float64 running sum. A float32 sum of 16M
# normal values is then within ~1e-7 (relative) of the exact sum, where one long vectorised
# accumulation was 3e-4 off (NumPy's pairwise sum: 4e-6).
SUM_BLOCK = 2048


def _blocked_sum(spec, h) -> bool:
    return h.shape.dtype.is_float and spec.reducers[id(h)] == "add"


def _emit_row(b, e, spec, out_ptrs, begin, end):
    heroes = [o for o in spec.outputs if o.opcode == "reduce"]
    extras = [o for o in spec.outputs if o.opcode != "reduce"]
    in_shape: Shape = heroes[0].operands[0].shape
    dims = sorted(heroes[0].attrs["dimensions"])
    n_kept = in_shape.rank - len(dims)
    kept_dims, red_dims = in_shape.dims[:n_kept], in_shape.dims[n_kept:]
    # the entry block is still empty here: the allocas come first, where mem2reg expects them
    accs = [b.alloca(value_type(h.shape.dtype), name=f"acc.{h.name}") for h in heroes]
    blocked = [_blocked_sum(spec, h) for h in heroes]
    totals = [b.alloca(F64, name=f"total.{h.name}") if blk else None for h, blk in zip(heroes, blocked)]

    def combine(h, acc, v):
        return _reduce(e, spec, h, acc, v, h.shape.dtype)

    def start_block():
        for h, acc, blk in zip(heroes, accs, blocked):
            if blk:
                b.store(constant(h.shape.dtype, IDENTITIES["add"](h.shape.dtype.numpy)), acc)

    def end_block():
        for h, acc, total in zip(heroes, accs, totals):
            if total is not None:
                b.store(b.fadd(b.load(total), _to_f64(b, b.load(acc))), total)

    def outer(kept_index):
        e.reset()
        start_accumulators(e, heroes, accs)
        for h, acc, total in zip(heroes, accs, totals):
            if total is not None:  # the init value starts the running total
                b.store(_to_f64(b, b.load(acc)), total)

        def inner(red_index):
            fold_element(e, heroes, accs, extras, out_ptrs, kept_index + red_index, combine)

        if red_dims:
            first = (begin, end) if n_kept == 0 else (None, None)
            _blocked_nest(b, red_dims, inner, first, start_block, end_block if any(blocked) else None)
        else:
            inner([])
        for h, acc, total in zip(heroes, accs, totals):
            if total is not None:
                b.store(_from_f64(b, b.load(total), acc.type.pointee), acc)
        store_accumulators(e, heroes, accs, out_ptrs, kept_index)

    if n_kept:
        nest(b, kept_dims, outer, begin, end, prefix="k")
    else:
        outer([])


def _to_f64(b, v):
    return v if v.type == F64 else b.fpext(v, F64)


def _from_f64(b, v, ty):
    return v if ty == F64 else b.fptrunc(v, ty)


def _blocked_nest(b, dims, body, first, start_block, end_block) -> None:
    """Nested loops over ``dims`` (the outermost over ``first`` = (begin, end) when given);
    with ``end_block``, the innermost loop runs in blocks of SUM_BLOCK, ``start_block()``
    before each and ``end_block()`` after."""
    lo, hi = first

    def level(k: int, index: list):
        last = k == len(dims) - 1
        start = lo if (k == 0 and lo is not None) else i64(0)
        stop = hi if (k == 0 and hi is not None) else i64(dims[k])
        if not last:
            for_range(b, start, stop, lambda i: level(k + 1, index + [i]), f"r{k}")
        elif end_block is None:
            for_range(b, start, stop, lambda i: body(index + [i]), f"r{k}")
        else:
            count = b.sub(stop, start)
            blocks = b.udiv(b.add(count, i64(SUM_BLOCK - 1)), i64(SUM_BLOCK))

            def block(j):
                first_item = b.add(start, b.mul(j, i64(SUM_BLOCK)))
                limit = b.add(first_item, i64(SUM_BLOCK))
                last_item = b.select(b.icmp_signed("<", limit, stop), limit, stop)
                start_block()
                for_range(b, first_item, last_item, lambda i: body(index + [i]), f"r{k}")
                end_block()

            for_range(b, i64(0), blocks, block, f"blk{k}")

    level(0, [])


def _emit_general(b, e, spec, out_ptrs, begin, end):
    heroes = [o for o in spec.outputs if o.opcode == "reduce"]
    extras = [o for o in spec.outputs if o.opcode != "reduce"]
    in_shape: Shape = heroes[0].operands[0].shape
    dims = set(heroes[0].attrs["dimensions"])
    kept = [d for d in range(in_shape.rank) if d not in dims]
    parallel = 0 not in dims and in_shape.rank > 0

    def init(out_index):
        e.reset()
        for h in heroes:
            ptr, s = out_ptrs[id(h)]
            e.store(ptr, s, out_index, e.value(h.operands[1], []))

    out_dims = [in_shape.dims[d] for d in kept]
    if out_dims:
        nest(b, out_dims, init, begin if parallel else None, end if parallel else None, prefix="z")
    else:
        init([])

    def body(index):
        e.reset()
        out_index = [index[d] for d in kept]
        for o in extras:
            ptr, s = out_ptrs[id(o)]
            e.store(ptr, s, index, e.value(o, index))
        for h in heroes:
            ptr, s = out_ptrs[id(h)]
            v = e.value(h.operands[0], index)
            cur = e.load(ptr, s, out_index)
            e.store(ptr, s, out_index, _reduce(e, spec, h, cur, v, h.shape.dtype))

    nest(b, in_shape.dims, body, begin if parallel else None, end if parallel else None, prefix="g")
