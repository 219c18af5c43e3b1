"""CPU kernels: the elemental emitter wrapped in loop nests.

Every kernel is ``void name(ptr noalias in0, ..., ptr noalias out0, ..., i64 begin, i64 end)``
and computes the slice [begin, end) of its outermost parallel dimension, so the executor can
split it across threads. Kinds: ``loop`` (one output element per iteration), ``row`` (a
reduction over trailing dimensions: register accumulators, reassociation allowed so LLVM
vectorises it) and ``general`` (any other reduction: accumulates into the output in input
order, so the inner loop stays contiguous)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from llvmlite import ir

from ...ir.builder import ComputationBuilder, NameUniquer
from ...ir.nodes import Computation, Instruction
from ...ir.queries import reducer_opcode
from ...ir.shapes import Shape
from ..llvm.elemental import CodegenUnsupported, ElementalEmitter, emit_binary, i64
from ..llvm.types import I64, storage_type, value_type

FAST = ("reassoc", "nsz", "contract")
SIMPLE_REDUCERS = {"add", "multiply", "maximum", "minimum", "and", "or", "xor"}


@dataclass
class KernelSpec:
    name: str
    computation: Computation  # parameters are the kernel's inputs
    outputs: list[Instruction]  # instructions of the computation written to memory
    kind: str  # loop | row | general
    extent: int | None  # size of the dimension [begin, end) ranges over; None: ignores them
    work: int  # elements touched: decides whether threads pay off
    reducer: str | None = None  # for reductions: the first hero's reducer opcode
    reducers: dict[int, str] | None = None  # hero id -> its reducer opcode


def as_computation(inst: Instruction) -> Computation:
    """A single unfused instruction as a computation of its own (pipeline 'none')."""
    if inst.opcode == "fusion":
        return inst.attrs["calls"]
    b = ComputationBuilder(f"kernel_{inst.name}", NameUniquer())
    params = [b.parameter(i, o.shape, f"param_{i}", exact_name=True) for i, o in enumerate(inst.operands)]
    return b.build(b.adopt(dataclasses.replace(inst, operands=tuple(params))))


def plan_kernel(inst: Instruction) -> KernelSpec:
    comp = as_computation(inst)
    root = comp.root
    outputs = list(root.operands) if root.opcode == "tuple" else [root]
    heroes = [o for o in outputs if o.opcode == "reduce"]
    if not heroes:
        shape = outputs[0].shape
        if any(o.shape.dims != shape.dims for o in outputs):
            raise CodegenUnsupported("loop fusion outputs of different shapes")
        return KernelSpec(inst.name, comp, outputs, "loop", shape.dims[0] if shape.rank else None,
                          max(shape.size, 1))
    hero = heroes[0]
    reducers = {}
    for h in heroes:
        reducers[id(h)] = reducer_opcode(h)
        if reducers[id(h)] not in SIMPLE_REDUCERS or len(h.operands) != 2:
            raise CodegenUnsupported(f"reducer of %{h.name} is not a single elementwise op")
    in_shape = hero.operands[0].shape
    dims = tuple(sorted(hero.attrs["dimensions"]))
    for h in heroes:
        if h.operands[0].shape.dims != in_shape.dims or tuple(sorted(h.attrs["dimensions"])) != dims:
            raise CodegenUnsupported("sibling reductions over different shapes")
    for o in outputs:
        if o.opcode != "reduce" and o.shape.dims != in_shape.dims:
            raise CodegenUnsupported(f"extra output %{o.name} does not have the reduction's input shape")
    rank = in_shape.rank
    row = dims == tuple(range(rank - len(dims), rank))
    if row:
        kind = "row"
        extent = in_shape.dims[0] if rank else None
    else:
        kind = "general"
        extent = in_shape.dims[0] if 0 not in dims else None
    return KernelSpec(inst.name, comp, outputs, kind, extent, max(in_shape.size, 1),
                      reducers[id(hero)], reducers)


# ---- loop nests -------------------------------------------------------------------------
def for_range(b: ir.IRBuilder, start, stop, body, name: str = "i"):
    """``for i in range(start, stop): body(i)`` with a phi-based loop (skipped when empty)."""
    fn = b.function
    pre = b.block
    head = fn.append_basic_block(f"{name}.body")
    done = fn.append_basic_block(f"{name}.done")
    b.cbranch(b.icmp_signed("<", start, stop), head, done)
    b.position_at_end(head)
    i = b.phi(I64, name=name)
    i.add_incoming(start, pre)
    body(i)
    nxt = b.add(i, i64(1), name=f"{name}.next")
    i.add_incoming(nxt, b.block)
    b.cbranch(b.icmp_signed("<", nxt, stop), head, done)
    b.position_at_end(done)


def nest(b: ir.IRBuilder, dims, body, begin=None, end=None, prefix: str = "d"):
    """Nested loops over ``dims``; the outermost over [begin, end) when given."""
    def level(k: int, index: list):
        if k == len(dims):
            body(index)
            return
        lo = begin if (k == 0 and begin is not None) else i64(0)
        hi = end if (k == 0 and end is not None) else i64(dims[k])
        for_range(b, lo, hi, lambda i: level(k + 1, index + [i]), f"{prefix}{k}")

    level(0, [])


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

    def outer(kept_index):
        e.reset()
        for h, acc in zip(heroes, accs):
            b.store(e.value(h.operands[1], []), acc)

        def inner(red_index):
            full = kept_index + red_index
            e.memo = {k: v for k, v in e.memo.items() if k[1] == ()}  # keep scalars across iterations
            for o in extras:
                ptr, s = out_ptrs[id(o)]
                e.store(ptr, s, full, e.value(o, full))
            for h, acc in zip(heroes, accs):
                v = e.value(h.operands[0], full)
                b.store(_reduce(e, spec, h, b.load(acc), v, h.shape.dtype), acc)

        if n_kept == 0 and red_dims:
            nest(b, red_dims, inner, begin, end, prefix="r")
        elif red_dims:
            nest(b, red_dims, inner, prefix="r")
        else:
            inner([])
        for h, acc in zip(heroes, accs):
            ptr, s = out_ptrs[id(h)]
            e.store(ptr, s, kept_index, b.load(acc))

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
