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
from ...ir.ops import GroupOp, identity
from ..llvm.elemental import ElementalEmitter, concatenated_parts, emit_binary, i64
from ..llvm import complex as lcomplex
from ..llvm.indexing import clamp, emit_scatter, emit_update_slice
from ..llvm.loops import FOLD_TAIL_INSTRUCTIONS, for_range, nest
from ..llvm.math import convert_float
from ..llvm.reduction import (fold_element, hero_clusters, start_accumulators,
                              store_accumulators)
from ..llvm.planning import KernelSpec
from ..llvm.scan import line_index, scan_element, scan_lines
from ..llvm.types import F64, I64, constant, storage_type, value_type
from .vector_library import host_vector_math

FAST = ("reassoc", "contract")  # no nsz: 0.0 + -0.0 must stay +0.0, as in NumPy


# ---- kernel emission ----------------------------------------------------------------------
def emit_kernel(module: ir.Module, spec: KernelSpec) -> ir.Function:
    comp = spec.computation
    shapes = [p.shape for p in comp.parameters] + [o.shape for o in spec.outputs]
    ptr_types = [storage_type(s.dtype).as_pointer() for s in shapes]
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), ptr_types + [I64, I64]), spec.name)
    # In place, an input and the output are one buffer. The kernel then reads that input
    # through the output's pointer and never touches its own argument, so every pointer it
    # uses is still noalias: LLVM sees a read and a write of the same element (which vectorise)
    # instead of two pointers that might overlap (a runtime overlap check that fails, every
    # call, into the scalar loop: a tanh written over its input ran 7x slower).
    aliased = spec.aliased_parameter
    for arg in fn.args[:-2]:
        if not spec.in_place or aliased is not None:
            arg.add_attribute("noalias")
    begin, end = fn.args[-2], fn.args[-1]
    entry = fn.append_basic_block("entry")
    b = ir.IRBuilder(entry)
    inputs = {id(p): (fn.args[i], p.shape) for i, p in enumerate(comp.parameters)}
    out_ptrs = {
        id(o): (fn.args[len(comp.parameters) + i], o.shape) for i, o in enumerate(spec.outputs)
    }
    if aliased is not None:
        param = comp.parameters[aliased]
        inputs[id(param)] = (out_ptrs[id(spec.outputs[0])][0], param.shape)
    e = ElementalEmitter(b, inputs, module, vector_math=host_vector_math())
    e.unclamped = frozenset(id(comp.parameters[k]) for k in spec.starts_in_bounds)
    if spec.kind == "update_slice":
        (out,) = spec.outputs
        emit_update_slice(e, out, *out_ptrs[id(out)], begin, end, spec.split_dim)
    elif spec.kind == "scatter":
        (out,) = spec.outputs
        emit_scatter(e, out, *out_ptrs[id(out)], in_place=spec.in_place)
    elif spec.kind == "scan":
        _emit_scan(b, e, spec, out_ptrs, begin, end)
    elif spec.kind == "loop":
        _emit_loop(b, e, spec, out_ptrs, begin, end)
    elif spec.kind == "row":
        _emit_row(b, e, spec, out_ptrs, begin, end)
    else:
        _emit_general(b, e, spec, out_ptrs, begin, end)
    b.ret_void()
    if len(ptr_types) > PACKED_FROM:
        _emit_packed_entry(module, fn, spec.name, ptr_types)
    return fn


# kernels of more buffers than the native dispatcher calls directly get a packed entry too
PACKED_FROM = 16


def _emit_packed_entry(module: ir.Module, kernel: ir.Function, name: str, ptr_types) -> None:
    """``name__packed(i8** buffers, i64 start, i64 end)``: the kernel with its buffers in one
    array, which native code can call whatever their number (a fusion given dozens of offsets
    as operands)."""
    byte_ptr = ir.IntType(8).as_pointer()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [byte_ptr.as_pointer(), I64, I64]),
                     packed_symbol(name))
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    table, start, end = fn.args
    pointers = [b.bitcast(b.load(b.gep(table, [ir.Constant(I64, k)])), t)
                for k, t in enumerate(ptr_types)]
    b.call(kernel, [*pointers, start, end])
    b.ret_void()


def packed_symbol(name: str) -> str:
    return name + "__packed"


def _emit_loop(b, e, spec, out_ptrs, begin, end):
    shape: Shape = spec.outputs[0].shape
    if _written_by_operand(spec):
        _emit_concatenation(b, e, spec, out_ptrs, begin, end)
        return

    def body(index):
        e.reset()
        for o in spec.outputs:
            ptr, s = out_ptrs[id(o)]
            e.store(ptr, s, index, e.value(o, index))

    if shape.rank == 0:
        body([])
    else:
        fold = None if _moves_complex(spec) else FOLD_TAIL_INSTRUCTIONS
        nest(b, shape.dims, body, begin, end, split=spec.split_dim, fold_tail_over=fold)


def _written_by_operand(spec) -> bool:
    """Is the kernel's one result a concatenation (written operand by operand)?"""
    (out,) = spec.outputs if len(spec.outputs) == 1 else (None,)
    return out is not None and out.opcode == "concatenate" and not spec.in_place


def _emit_concatenation(b, e, spec, out_ptrs, begin, end):
    """A concatenation as XLA's CPU and GPU emitters write one: a loop nest per operand over
    its window of the result, so an element is computed and stored with no search for its
    operand, and each loop vectorises (a list of 128 arrays of 512 float64 took 1.8 ms through
    a per-element search, NumPy 0.2). The split dimension's [begin, end) is cut to each
    operand's rows where the concatenation runs along it."""
    (out,) = spec.outputs
    ptr, shape = out_ptrs[id(out)]
    axis = out.attrs["dimensions"][0]
    split = spec.split_dim
    fold = None if _moves_complex(spec) else FOLD_TAIL_INSTRUCTIONS
    for op, start, n in concatenated_parts(out):
        if axis == split:  # this operand's rows of [begin, end), perhaps none
            lo = clamp(b, b.sub(begin, i64(start)), 0, n)
            hi = clamp(b, b.sub(end, i64(start)), 0, n)
        else:
            lo, hi = begin, end

        def body(index, op=op, start=start):
            e.reset()
            at = list(index)
            at[axis] = b.add(index[axis], i64(start)) if start else index[axis]
            e.store(ptr, shape, at, e.value(op, index))

        nest(b, op.shape.dims, body, lo, hi, split=split, fold_tail_over=fold)


def _moves_complex(spec) -> bool:
    """Does the kernel load or store complex elements? Their real and imaginary parts are an
    interleaved pair, and LLVM's loop vectoriser cannot mask interleaved accesses: asked to fold
    the tail into the vector loop, it leaves the whole loop scalar (a Mandelbrot step of 8
    rounds of ``where(abs(z) < 2, z * z + c, z)``: 21 ns an element a round, 3.7 without)."""
    return any(inst.shape.dtype.name.startswith("c")
               for inst in (*spec.computation.parameters, *spec.outputs)
               if isinstance(inst.shape, Shape))


def _emit_scan(b, e, spec, out_ptrs, begin, end):
    """The lines before the axis (threads split the first), then the axis in order, then the
    lines after it: each step along the axis folds a contiguous row, which vectorises."""
    (scan,) = spec.outputs
    out_ptr, shape = out_ptrs[id(scan)]
    axis = spec.split_dim
    outer, inner = scan_lines(shape.dims, axis)

    def along(outer_index):
        def step(i):
            nest(b, inner, lambda inner_index: scan_element(
                e, scan, spec.reducer, out_ptr, axis, line_index(outer_index, i, inner_index)),
                prefix="line")
        for_range(b, i64(0), i64(shape.dims[axis]), step, "scan")

    if 0 in shape.dims:
        return
    nest(b, outer, along, begin, end)


def _reduce(e, spec, hero, acc, v, t, flags=FAST):
    op = spec.reducers[id(hero)]
    if t.is_complex and op == "add":
        return lcomplex.add(e, acc, v, t, flags=flags)
    if t.is_float and op in GroupOp.ARITHMETIC_REDUCERS:
        return (e.b.fadd if op == "add" else e.b.fmul)(acc, v, flags=flags)
    return emit_binary(e, op, acc, v, t)


# Float sums are accumulated in blocks: a block's elements in vector registers (reassociated,
# so LLVM vectorises them), each block's total into a float64 running sum. A float32 sum of 16M
# normal values is then within ~1e-7 (relative) of the exact sum, where one long vectorised
# accumulation was 3e-4 off (NumPy's pairwise sum: 4e-6).
SUM_BLOCK = 2048


def _blocked_sum(spec, h) -> bool:
    return h.shape.dtype.is_float and spec.reducers[id(h)] == "add"


# Row reductions run ROW_TILE rows side by side (the last kept dimension in steps of ROW_TILE):
# one thread then streams several rows from memory at once, which the prefetchers serve far
# better than one row after another (4096 rows of 4096 floats: 3.6 -> 2.4 ms on two cores).
# Every row goes through the same tiled loop, in whichever slot of a tile it lands (a range
# that ends inside a tile repeats its last row in the spare slots), so a row's result does not
# depend on how the rows were split among threads or row blocks.
ROW_TILE = 4
MIN_TILED_ROWS = 8


def _tiled_rows(kept_dims) -> bool:
    return bool(kept_dims) and kept_dims[-1] >= MIN_TILED_ROWS


def row_grain(spec) -> int:
    """Thread splits of a row kernel's [begin, end) fall on multiples of this, so no rows are
    computed twice in a tile's spare slots except at the very end."""
    heroes = [o for o in spec.outputs if o.opcode == "reduce"]
    in_shape = heroes[0].operands[0].shape
    n_kept = in_shape.rank - len(heroes[0].attrs["dimensions"])
    return ROW_TILE if n_kept == 1 and _tiled_rows(in_shape.dims[:1]) else 1


def _emit_row(b, e, spec, out_ptrs, begin, end):
    heroes = [o for o in spec.outputs if o.opcode == "reduce"]
    extras = [o for o in spec.outputs if o.opcode != "reduce"]
    in_shape: Shape = heroes[0].operands[0].shape
    dims = sorted(heroes[0].attrs["dimensions"])
    n_kept = in_shape.rank - len(dims)
    kept_dims, red_dims = in_shape.dims[:n_kept], in_shape.dims[n_kept:]
    tile = ROW_TILE if _tiled_rows(kept_dims) else 1
    blocked = [_blocked_sum(spec, h) for h in heroes]
    # the entry block is still empty here: the allocas come first, where mem2reg expects them
    accs = [
        [b.alloca(value_type(h.shape.dtype), name=f"acc{k}.{h.name}") for h in heroes]
        for k in range(tile)
    ]
    totals = [
        [
            b.alloca(F64, name=f"total{k}.{h.name}") if blk else None
            for h, blk in zip(heroes, blocked)
        ]
        for k in range(tile)
    ]

    def combine(h, acc, v):
        return _reduce(e, spec, h, acc, v, h.shape.dtype)

    def start_block(members):
        for row_accs in accs:
            for k in members:
                if blocked[k]:
                    h = heroes[k]
                    b.store(constant(h.shape.dtype, identity("add", h.shape.dtype.numpy)),
                            row_accs[k])

    def end_block(members):
        for row_accs, row_totals in zip(accs, totals):
            for k in members:
                if row_totals[k] is not None:
                    b.store(b.fadd(b.load(row_totals[k]), _to_f64(b, b.load(row_accs[k]))),
                            row_totals[k])

    clusters = hero_clusters(heroes, extras)

    def rows(kept_indices):
        """Reduce the rows at ``kept_indices`` (one per tile slot) side by side, one loop per
        cluster of heroes that share no computation (``hero_clusters``)."""
        e.reset()
        for row_accs, row_totals in zip(accs, totals):
            start_accumulators(e, heroes, row_accs)
            for acc, total in zip(row_accs, row_totals):
                if total is not None:  # the init value starts the running total
                    b.store(_to_f64(b, b.load(acc)), total)
        for members, cluster_extras in clusters:
            e.reset()  # (a value made in the loop before does not dominate this one)
            fold_heroes = [heroes[k] for k in members]

            def inner(red_index, members=members, fold_heroes=fold_heroes,
                      cluster_extras=cluster_extras):
                for kept_index, row_accs in zip(kept_indices, accs):
                    fold_element(e, fold_heroes, [row_accs[k] for k in members],
                                 cluster_extras, out_ptrs, kept_index + red_index, combine)

            if red_dims:
                first = (begin, end) if n_kept == 0 else (None, None)
                _blocked_nest(
                    b, red_dims, inner, first, lambda members=members: start_block(members),
                    (lambda members=members: end_block(members))
                    if any(blocked[k] for k in members) else None)
            else:
                inner([])
        for kept_index, row_accs, row_totals in zip(kept_indices, accs, totals):
            for acc, total in zip(row_accs, row_totals):
                if total is not None:
                    b.store(_from_f64(b, b.load(total), acc.type.pointee), acc)
            store_accumulators(e, heroes, row_accs, out_ptrs, kept_index)

    if not n_kept:
        rows([[]])
    elif tile == 1:
        nest(b, kept_dims, lambda index: rows([index]), begin, end, prefix="k")
    else:
        def tiles(prefix):
            lo, hi = (begin, end) if n_kept == 1 else (i64(0), i64(kept_dims[-1]))
            last = b.sub(hi, i64(1))

            def slots(first):
                picks = [first] + [b.add(first, i64(k)) for k in range(1, tile)]
                return [prefix + [b.select(b.icmp_signed("<", p, hi), p, last)] for p in picks]

            for_range(b, lo, hi, lambda r: rows(slots(r)), "tile", step=i64(tile))

        if n_kept == 1:
            tiles([])
        else:
            nest(b, kept_dims[:-1], tiles, begin, end, prefix="k")


def _to_f64(b, v):
    return v if v.type == F64 else b.fpext(v, F64)


def _from_f64(b, v, ty):
    return v if ty == F64 else convert_float(b, v, ty)


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
    parallel = spec.extent is not None  # threads divide input dimension spec.split_dim, a kept one

    def init(out_index):
        e.reset()
        for h in heroes:
            ptr, s = out_ptrs[id(h)]
            e.store(ptr, s, out_index, e.value(h.operands[1], []))

    out_dims = [in_shape.dims[d] for d in kept]
    if out_dims:
        nest(b, out_dims, init, begin if parallel else None, end if parallel else None, prefix="z",
             split=kept.index(spec.split_dim) if parallel else 0)
    else:
        init([])

    lo, hi = (begin, end) if parallel else (None, None)
    if kept and dims == set(range(len(dims))):  # reduced dimensions lead: a column reduction
        _column_passes(b, e, spec, heroes, extras, out_ptrs, in_shape, len(dims), lo, hi)
        return

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
            e.store(ptr, s, out_index, _reduce(e, spec, h, cur, v, h.shape.dtype, flags=()))

    nest(b, in_shape.dims, body, lo, hi, prefix="g", split=spec.split_dim)


# A column reduction adds this many input rows into the output row per pass over it: the
# partial sums stay in registers for the run, and the rows stream in side by side (as many
# prefetch streams) instead of one after the other through the output.
COLUMN_TILE = 8


def _column_passes(b, e, spec, heroes, extras, out_ptrs, in_shape, n_reduced, lo, hi):
    """``out[c] = (((out[c] + x[r, c]) + x[r+1, c]) + ...)``, COLUMN_TILE rows at a time: each
    output element folds in its inputs in the same order as one row at a time (NumPy's order
    for a reduction over leading axes), with no reassociation, so the results are identical."""
    reduced, kept_dims = in_shape.dims[:n_reduced], in_shape.dims[n_reduced:]
    rows = reduced[-1]
    tiles = rows // COLUMN_TILE

    def rows_pass(prefix, first_row, count):
        def columns(kept_index):
            e.reset()
            held = []  # index values stay referenced: the emitter's memo is keyed by their ids
            accs = [e.load(*out_ptrs[id(h)], kept_index) for h in heroes]
            for t in range(count):
                index = prefix + [first_row if t == 0 else b.add(first_row, i64(t))] + kept_index
                held.append(index)
                for o in extras:
                    ptr, s = out_ptrs[id(o)]
                    e.store(ptr, s, index, e.value(o, index))
                accs = [
                    _reduce(e, spec, h, acc, e.value(h.operands[0], index), h.shape.dtype, flags=())
                    for h, acc in zip(heroes, accs)
                ]
            for h, acc in zip(heroes, accs):
                e.store(*out_ptrs[id(h)], kept_index, acc)

        nest(b, kept_dims, columns, lo, hi, prefix="c")

    def outer(prefix):
        if tiles:
            for_range(
                b,
                i64(0),
                i64(tiles),
                lambda j: rows_pass(prefix, b.mul(j, i64(COLUMN_TILE)), COLUMN_TILE),
                "tile",
            )
        if rows % COLUMN_TILE:
            for_range(
                b, i64(tiles * COLUMN_TILE), i64(rows), lambda r: rows_pass(prefix, r, 1), "rest"
            )

    if n_reduced > 1:
        nest(b, reduced[:-1], outer, prefix="o")
    else:
        outer([])
