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
from ..llvm.elemental import ElementalEmitter, emit_binary
from ..llvm.loops import nest
from ..llvm.reduction import fold_element, start_accumulators, store_accumulators
from ..llvm.planning import KernelSpec
from ..llvm.types import I64, storage_type, value_type

FAST = ("reassoc", "contract")  # no nsz: 0.0 + -0.0 must stay +0.0, as in NumPy


# ---- kernel emission ----------------------------------------------------------------------
def emit_kernel(module: ir.Module, spec: KernelSpec) -> ir.Function:
    comp = spec.computation
    shapes = [p.shape for p in comp.parameters] + [o.shape for o in spec.outputs]
    ptr_types = [storage_type(s.dtype).as_pointer() for s in shapes]
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), ptr_types + [I64, I64]), spec.name)
    for arg in fn.args[:-2]:
        arg.add_attribute("noalias")
    begin, end = fn.args[-2], fn.args[-1]
    entry = fn.append_basic_block("entry")
    b = ir.IRBuilder(entry)
    inputs = {id(p): (fn.args[i], p.shape) for i, p in enumerate(comp.parameters)}
    out_ptrs = {id(o): (fn.args[len(comp.parameters) + i], o.shape) for i, o in enumerate(spec.outputs)}
    e = ElementalEmitter(b, inputs, module)
    if spec.kind == "loop":
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
    if t.is_float and op in ("add", "multiply"):
        return (e.b.fadd if op == "add" else e.b.fmul)(acc, v, flags=FAST)
    return emit_binary(e, op, acc, v, t)


def _emit_row(b, e, spec, out_ptrs, begin, end):
    heroes = [o for o in spec.outputs if o.opcode == "reduce"]
    extras = [o for o in spec.outputs if o.opcode != "reduce"]
    in_shape: Shape = heroes[0].operands[0].shape
    dims = sorted(heroes[0].attrs["dimensions"])
    n_kept = in_shape.rank - len(dims)
    kept_dims, red_dims = in_shape.dims[:n_kept], in_shape.dims[n_kept:]
    # the entry block is still empty here: the allocas come first, where mem2reg expects them
    accs = [b.alloca(value_type(h.shape.dtype), name=f"acc.{h.name}") for h in heroes]

    def combine(h, acc, v):
        return _reduce(e, spec, h, acc, v, h.shape.dtype)

    def outer(kept_index):
        e.reset()
        start_accumulators(e, heroes, accs)

        def inner(red_index):
            fold_element(e, heroes, accs, extras, out_ptrs, kept_index + red_index, combine)

        if n_kept == 0 and red_dims:
            nest(b, red_dims, inner, begin, end, prefix="r")
        elif red_dims:
            nest(b, red_dims, inner, prefix="r")
        else:
            inner([])
        store_accumulators(e, heroes, accs, out_ptrs, kept_index)

    if n_kept:
        nest(b, kept_dims, outer, begin, end, prefix="k")
    else:
        outer([])


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
