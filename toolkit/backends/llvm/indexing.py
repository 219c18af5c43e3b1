"""LLVM IR for the indexing ops, shared by the CPU and GPU backends. ``gather``,
``dynamic-slice`` and ``dynamic-update-slice`` are elemental (an output element reads one
operand element at a computed, clamped index), so they fuse like slices. ``scatter`` writes:
``emit_scatter`` copies the operand into the output, then visits the update windows in the
order of their scatter indices (skipping a window that does not fit, as XLA does), so the
last of several writes to one element wins, as in NumPy and the reference interpreter."""
from __future__ import annotations

from llvmlite import ir

from ...ir.queries import scatter_combiner
from .complex import elementwise_binary
from .emitter import ElementalEmitter, i64, rule
from .scalars import BINARY
from .loops import nest
from .types import I1, I64

_INT64_MAX = 2 ** 63 - 1


def _integer_constant(v, signed: bool) -> int | None:
    """The value of an integer constant as its bits read (whichever way it was written), or
    None for any other value: a start that is a constant is folded when emitted, so the code
    names neither it nor the window's extent its clamp needs."""
    if not (isinstance(v, ir.Constant) and isinstance(v.constant, int)):
        return None
    width = v.type.width
    value = v.constant % (1 << width)
    return value - (1 << width) if signed and value >> (width - 1) else value


def as_i64(e: ElementalEmitter, v: ir.Value, dtype) -> ir.Value:
    """A start index as i64: sign-extended, zero-extended, or (u64) capped at 2^63 - 1."""
    b = e.b
    width = v.type.width
    value = _integer_constant(v, signed=dtype.kind != "u")
    if value is not None:
        return i64(min(value, _INT64_MAX))
    if dtype.kind == "u":
        if width == 64:
            return b.select(b.icmp_unsigned(">", v, i64(_INT64_MAX)), i64(_INT64_MAX), v)
        return b.zext(v, I64)
    return b.sext(v, I64) if width < 64 else v


def clamp(b: ir.IRBuilder, v, lo: int, hi: int):
    """``v`` clamped to [lo, hi] (a constant folded here)."""
    value = _integer_constant(v, signed=True)  # (as icmp_signed reads it)
    if value is not None:
        return i64(min(max(value, lo), hi))
    v = b.select(b.icmp_signed("<", v, i64(lo)), i64(lo), v)
    return b.select(b.icmp_signed(">", v, i64(hi)), i64(hi), v)


def _index_vector(e: ElementalEmitter, indices_inst, batch_index, ivd: int, length: int) -> list:
    """The start-index vector of one batch element: ``length`` values as i64."""
    t = indices_inst.shape.dtype
    out = []
    for k in range(length):
        where = list(batch_index)
        if ivd < indices_inst.shape.rank:
            where.insert(ivd, i64(k))
        out.append(as_i64(e, e.value(indices_inst, where), t))
    return out


def _clamped_starts(e: ElementalEmitter, operands, dims, sizes) -> list:
    """dynamic-slice/dynamic-update-slice start indices (one scalar per dimension, or one
    vector) as i64, each clamped into [0, dim - size] as the op clamps it; a scalar start the
    kernel's plan found in range (``e.unclamped``: planning.starts_in_bounds) as it is."""
    if len(operands) == 1 and operands[0].shape.rank == 1:
        v = operands[0]
        starts = [(None, as_i64(e, e.value(v, [i64(k)]), v.shape.dtype)) for k in range(len(dims))]
    else:
        starts = [(o, as_i64(e, e.value(o, []), o.shape.dtype)) for o in operands]
    return [s if o is not None and id(o) in e.unclamped else clamp(e.b, s, 0, dim - n)
            for (o, s), dim, n in zip(starts, dims, sizes)]


@rule("gather")
def _gather(e, inst, index):
    b = e.b
    operand, indices = inst.operands
    a = inst.attrs
    offset = list(a["offset_dims"])
    sizes = a["slice_sizes"]
    collapsed = set(a.get("collapsed_slice_dims", ()))
    batch_index = [i for d, i in enumerate(index) if d not in offset]
    starts = [i64(0)] * operand.shape.rank
    vector = _index_vector(
        e, indices, batch_index, a["index_vector_dim"], len(a["start_index_map"])
    )
    for d, v in zip(a["start_index_map"], vector):
        starts[d] = clamp(b, v, 0, operand.shape.dims[d] - sizes[d])
    offsets = iter(index[d] for d in offset)
    src = [
        starts[d] if d in collapsed else b.add(starts[d], next(offsets))
        for d in range(operand.shape.rank)
    ]
    return e.value(operand, src)


@rule("dynamic-slice")
def _dynamic_slice(e, inst, index):
    b = e.b
    operand = inst.operands[0]
    sizes = inst.attrs["dynamic_slice_sizes"]
    starts = _clamped_starts(e, inst.operands[1:], operand.shape.dims, sizes)
    src = [b.add(s, i) for s, i in zip(starts, index)]
    return e.value(operand, src)


@rule("dynamic-update-slice")
def _dynamic_update_slice(e, inst, index):
    b = e.b
    operand, update = inst.operands[:2]
    starts = _clamped_starts(e, inst.operands[2:], operand.shape.dims, update.shape.dims)
    inside = ir.Constant(I1, 1)
    local = []
    for s, n, i in zip(starts, update.shape.dims, index):
        rel = b.sub(i, s)
        ok = b.and_(b.icmp_signed(">=", rel, i64(0)), b.icmp_signed("<", rel, i64(n)))
        inside = b.and_(inside, ok)
        local.append(b.select(ok, rel, i64(0)))
    if update.shape.size == 0:
        return e.value(operand, index)
    return b.select(inside, e.value(update, local), e.value(operand, index))


def emit_combiner(
    e: ElementalEmitter, comp, current: ir.Value, update: ir.Value, dtype
) -> ir.Value:
    """The scatter combiner applied to two scalar values: a known op directly; any other
    computation through the elemental emitter, its parameters bound to the two values."""
    kind = scatter_combiner(comp)
    if kind == "assign":
        return update
    if kind in BINARY:  # (as the elementwise op computes it: complex pairs, float16 widened)
        return elementwise_binary(e, kind, current, update, dtype)
    p0, p1 = sorted(comp.parameters, key=lambda p: p.attrs["parameter_number"])
    e.memo[(id(p0), ())] = current
    e.memo[(id(p1), ())] = update
    return e.value(comp.root, [])


def emit_scatter(e: ElementalEmitter, inst, out_ptr, out_shape, begin=None, end=None,
                 in_place: bool = False) -> None:
    """Copy the operand into ``out_ptr``, then apply every update window in order. The copy
    loop's outermost dimension runs over [begin, end) when given; the update loop is serial.
    ``in_place``: ``out_ptr`` already holds the operand (its buffer), so there is no copy."""
    b = e.b
    operand, indices, updates = inst.operands
    a = inst.attrs
    window = list(a["update_window_dims"])
    inserted = set(a["inserted_window_dims"])
    to_operand = list(a["scatter_dims_to_operand_dims"])
    rank = operand.shape.rank

    def copy(index):
        e.reset()
        e.store(out_ptr, out_shape, index, e.value(operand, index))

    if in_place:
        pass
    elif rank:
        nest(b, out_shape.dims, copy, begin, end, prefix="c")
    else:
        copy([])
    scatter_axes = [d for d in range(updates.shape.rank) if d not in window]
    window_sizes = [updates.shape.dims[d] for d in window]
    full_sizes, it = [], iter(window_sizes)
    for d in range(rank):
        full_sizes.append(1 if d in inserted else next(it))
    order = scatter_axes + window  # batch outer, window inner: the interpreter's order

    def update(loop_index):
        e.reset()
        upd_index = [None] * updates.shape.rank
        for axis, v in zip(order, loop_index):
            upd_index[axis] = v
        batch_index = [upd_index[d] for d in scatter_axes]
        vector = _index_vector(e, indices, batch_index, a["index_vector_dim"], len(to_operand))
        starts = [i64(0)] * rank
        for d, v in zip(to_operand, vector):
            starts[d] = v
        fits = ir.Constant(I1, 1)
        for d in to_operand:
            fits = b.and_(fits, b.icmp_signed(">=", starts[d], i64(0)))
            fits = b.and_(
                fits, b.icmp_signed("<=", starts[d], i64(operand.shape.dims[d] - full_sizes[d]))
            )
        window_index = iter(upd_index[d] for d in window)
        target = [
            starts[d] if d in inserted else b.add(starts[d], next(window_index))
            for d in range(rank)
        ]
        with b.if_then(fits):
            # written by earlier updates
            current = e.load(out_ptr, out_shape, target, invariant=False)
            value = e.value(updates, upd_index)
            e.store(
                out_ptr,
                out_shape,
                target,
                emit_combiner(e, a["to_apply"], current, value, out_shape.dtype),
            )

    loop_dims = [updates.shape.dims[d] for d in order]
    if any(d == 0 for d in loop_dims):
        return
    if loop_dims:
        nest(b, loop_dims, update, prefix="u")
    else:
        update([])


def update_slice_element(e: ElementalEmitter, dus, out_ptr, out_shape, index) -> None:
    """Element ``index`` of the update of ``dus`` (a dynamic-update-slice) stored at its place
    in the window, in ``out_ptr``, which holds the operand already: the per-element work of a
    kernel that writes the window alone (a CPU loop nest, a GPU thread per element)."""
    b = e.b
    operand, update = dus.operands[:2]
    e.reset()
    starts = _clamped_starts(e, dus.operands[2:], operand.shape.dims, update.shape.dims)
    target = [b.add(s, i) for s, i in zip(starts, index)]
    e.store(out_ptr, out_shape, target, e.value(update, index))


def emit_update_slice(e: ElementalEmitter, dus, out_ptr, out_shape, begin=None, end=None,
                      split: int = 0) -> None:
    """Write only the window of ``dus`` (a dynamic-update-slice) into ``out_ptr``, which holds
    its operand already: the loop runs over the update, dimension ``split`` over [begin,
    end)."""
    update = dus.operands[1]
    if update.shape.size == 0:
        return

    def body(index):
        update_slice_element(e, dus, out_ptr, out_shape, index)

    if update.shape.rank:
        nest(e.b, update.shape.dims, body, begin, end, prefix="w", split=split)
    else:
        body([])
