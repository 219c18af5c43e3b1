"""Differentiation rules, one table per mode, keyed by opcode: ``JVP_RULES`` (forward mode:
the tangent of an instruction's result from its operands' tangents) and ``VJP_RULES`` (reverse
mode: each operand's cotangent contribution from the result's cotangent, the transposes of the
forward rules). Every op of ``ir.ops.OPS`` has an entry in both, a rule or ``NotDifferentiable``
with the reason (a test holds this). Elementwise ops share their derivatives (``ad_partials``).

A tangent or cotangent is ``None`` for a symbolic zero, a ``Tracer``, a list for a tuple-shaped
value, or (cotangents only) a ``Window``: a dense update of one window of an otherwise zero
array, which is what reading a window (dynamic-slice) sends back. Adding a window into a dense
cotangent writes only the window, so a loop reading one row per trip does O(row) work per trip
in reverse, not O(array)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ..ir.nodes import Instruction
from ..ir.ops import GroupOp
from ..ir.queries import reducer_opcode
from ..ir.shapes import TupleShape
from . import lax
from .ad_partials import PARTIALS, ZERO_DERIVATIVE, NotDifferentiable
from .tracer import Tracer


@dataclass
class Eqn:
    """One instruction being differentiated: its primal operands and result in the trace the
    derivative is emitted into, and what its forward rule kept for the backward pass."""
    inst: Instruction
    args: list  # Tracer per operand
    out: Any  # Tracer
    residual: Any = None


@dataclass
class Window:
    """A cotangent that is zero outside one window: ``update`` at ``starts`` of ``like``'s shape."""
    like: Tracer
    update: Tracer
    starts: list


# ---- tangent arithmetic ----------------------------------------------------------------------
def zeros_like(x: Tracer) -> Tracer:
    return lax.full_like(x, 0)


def instantiate(t, like: Tracer) -> Tracer:
    return zeros_like(like) if t is None else dense(t)


def dense(t):
    if isinstance(t, Window):
        return lax.dynamic_update_slice(zeros_like(t.like), t.update, t.starts)
    if isinstance(t, list):
        return [None if e is None else dense(e) for e in t]
    return t


def add_tangents(a, b):
    """The sum of two (co)tangents, either of which may be a symbolic zero, a list or a window."""
    if a is None:
        return b
    if b is None:
        return a
    if isinstance(a, list):
        return [add_tangents(x, y) for x, y in zip(a, b)]
    if isinstance(a, Window) and isinstance(b, Window):
        a = dense(a)
    if isinstance(a, Window):
        a, b = b, a
    if isinstance(b, Window):  # add into the window only
        size = tuple(b.update.shape)
        current = lax.dynamic_slice(a, b.starts, size)
        return lax.dynamic_update_slice(a, lax.elementwise("add", current, b.update), b.starts)
    return lax.elementwise("add", a, b)


def _sum_to(x: Tracer, shape: tuple) -> Tracer:
    """``x`` summed down to a scalar operand's shape (select predicates and clamp bounds may be
    scalars beside array operands)."""
    if tuple(x.shape) == tuple(shape):
        return x
    return lax.reduce(x, "add", tuple(range(x.ndim)))


def _spread(t: Tracer, like: Tracer) -> Tracer:
    return t if tuple(t.shape) == tuple(like.shape) else lax.broadcast_in_dim(t, like.shape, ())


def emit_like(inst: Instruction, operands: Sequence[Tracer]) -> Tracer:
    """``inst`` again, on other operands of the same shapes, in the current trace."""
    trace = operands[0].trace if operands else None
    return trace.emit(inst.opcode, tuple(operands), dict(inst.attrs), inst.shape)


# ---- elementwise: from the shared partial derivatives ---------------------------------------
def _elementwise_jvp(eqn: Eqn, tangents):
    maps = PARTIALS[eqn.inst.opcode](eqn.args, eqn.out)
    total = None
    for linear, t in zip(maps, tangents):
        if linear is not None and t is not None:
            total = add_tangents(total, linear(t))
    return total


def _elementwise_vjp(eqn: Eqn, ct):
    maps = PARTIALS[eqn.inst.opcode](eqn.args, eqn.out)
    return [None if linear is None else linear(ct) for linear in maps]


def _zero_jvp(eqn, tangents):
    return None


def _zero_vjp(eqn, ct):
    return [None] * len(eqn.args)


def _clamp_masks(eqn):
    lo, x, hi = eqn.args
    lo_b, hi_b = _spread(lo, x), _spread(hi, x)
    inside = lax.elementwise("and", lax.compare(x, lo_b, "GT"), lax.compare(x, hi_b, "LT"))
    at_lo = lax.elementwise("and", lax.compare(lo_b, x, "GT"), lax.compare(lo_b, hi_b, "LT"))
    at_hi = lax.compare(hi_b, x, "LT")
    return at_lo, inside, at_hi


def _clamp_jvp(eqn, tangents):
    masks = _clamp_masks(eqn)
    x = eqn.args[1]
    total = None
    for mask, t in zip(masks, tangents):
        if t is not None:
            total = add_tangents(total, lax.select(mask, _spread(t, x), zeros_like(x)))
    return total


def _clamp_vjp(eqn, ct):
    masks = _clamp_masks(eqn)
    return [
        _sum_to(lax.select(mask, ct, zeros_like(ct)), arg.shape)
        for mask, arg in zip(masks, eqn.args)
    ]


def _convert_jvp(eqn, tangents):
    return lax.convert(tangents[0], eqn.out.dtype) if eqn.out.dtype.kind == "f" else None


def _convert_vjp(eqn, ct):
    (x,) = eqn.args
    return [lax.convert(ct, x.dtype) if x.dtype.kind == "f" else None]


# ---- data movement: linear, so the forward rule is the op itself --------------------------------
def _linear_jvp(eqn, tangents):
    """Ops linear in all their (non-index) operands: the op on the tangents, zeros filled in."""
    ops = [instantiate(t, a) if a.dtype.kind == "f" else a for t, a in zip(tangents, eqn.args)]
    return emit_like(eqn.inst, ops)


def _broadcast_vjp(eqn, ct):
    dims = list(eqn.inst.attrs["dimensions"])
    summed = lax.reduce(ct, "add", [d for d in range(ct.ndim) if d not in dims])
    order = sorted(dims)
    moved = lax.transpose(summed, [order.index(d) for d in dims])
    return [lax.reshape(moved, eqn.args[0].shape)]


def _reshape_vjp(eqn, ct):
    return [lax.reshape(ct, eqn.args[0].shape)]


def _transpose_vjp(eqn, ct):
    perm = eqn.inst.attrs["dimensions"]
    return [lax.transpose(ct, list(np.argsort(perm)))]


def _slice_vjp(eqn, ct):
    (x,) = eqn.args
    if ct.size == 0:
        return [zeros_like(x)]
    spec = []
    for (start, _, stride), n, dim in zip(eqn.inst.attrs["slice"], ct.shape, x.shape):
        last = start + (n - 1) * stride
        spec.append((start, dim - last - 1, stride - 1))
    return [lax.pad(ct, lax.full(ct.trace, (), 0, ct.dtype), spec)]


def _reverse_vjp(eqn, ct):
    return [lax.rev(ct, eqn.inst.attrs["dimensions"])]


def _copy_vjp(eqn, ct):
    return [ct]


def _concatenate_vjp(eqn, ct):
    axis = eqn.inst.attrs["dimensions"][0]
    out, offset = [], 0
    for a in eqn.args:
        spec = [(0, d, 1) for d in ct.shape]
        spec[axis] = (offset, offset + a.shape[axis], 1)
        out.append(lax.slice_(ct, spec))
        offset += a.shape[axis]
    return out


def _pad_vjp(eqn, ct):
    x, value = eqn.args
    spec = eqn.inst.attrs["padding"]
    unpadded = lax.pad(
        ct, lax.full(ct.trace, (), 0, ct.dtype), [(-lo, -hi, 0) for lo, hi, _ in spec]
    )
    ct_x = lax.slice_(
        unpadded, [(0, d, interior + 1) for d, (_, _, interior) in zip(unpadded.shape, spec)]
    )
    total = lax.reduce(ct, "add", tuple(range(ct.ndim)))
    ct_value = lax.elementwise("subtract", total, lax.reduce(ct_x, "add", tuple(range(ct_x.ndim))))
    return [ct_x, ct_value]


# ---- indexing ----------------------------------------------------------------------------------
def _index_bounds(
    indices: Tracer, index_vector_dim: int, dims_map, limits
) -> tuple[Tracer, Tracer]:
    """(lowest, highest) start per index component, as arrays like ``indices``: component k
    addresses operand dimension ``dims_map[k]`` and may start at most at ``limits[k]``."""
    trace = indices.trace
    highest = np.asarray(limits, dtype=indices.dtype)
    if index_vector_dim == indices.ndim:
        hi = lax.full(trace, indices.shape, highest[0], indices.dtype)
    else:
        hi = lax.broadcast_in_dim(
            lax.lift(trace, highest, indices.dtype, weak=False), indices.shape, (index_vector_dim,)
        )
    return zeros_like(indices), hi


def _clamped_indices(indices, index_vector_dim, dims_map, operand_shape, window):
    limits = [max(operand_shape[d] - window[d], 0) for d in dims_map]
    lo, hi = _index_bounds(indices, index_vector_dim, dims_map, limits)
    return lax.elementwise("minimum", lax.elementwise("maximum", indices, lo), hi)


def _in_range(indices, index_vector_dim, dims_map, operand_shape, window):
    """Per index vector: is its whole window inside the operand (scatter drops it if not)?"""
    limits = [operand_shape[d] - window[d] for d in dims_map]
    lo, hi = _index_bounds(indices, index_vector_dim, dims_map, limits)
    ok = lax.elementwise("and", lax.compare(indices, lo, "GE"), lax.compare(indices, hi, "LE"))
    if index_vector_dim == indices.ndim:
        return ok
    return lax.reduce(ok, "and", (index_vector_dim,))


def _gather_vjp(eqn, ct):
    x, indices = eqn.args
    a = eqn.inst.attrs
    if a.get("operand_batching_dims"):
        # toolkit's frontend never emits them
        raise NotImplementedError("gather with batching dims")
    clamped = _clamped_indices(
        indices, a["index_vector_dim"], a["start_index_map"], x.shape, a["slice_sizes"]
    )
    ct_x = lax.scatter(
        zeros_like(x),
        clamped,
        ct,
        "add",
        update_window_dims=a["offset_dims"],
        inserted_window_dims=a["collapsed_slice_dims"],
        scatter_dims_to_operand_dims=a["start_index_map"],
        index_vector_dim=a["index_vector_dim"],
    )
    return [ct_x, None]


def _gather_jvp(eqn, tangents):
    return emit_like(eqn.inst, [tangents[0], eqn.args[1]])


def _dynamic_slice_vjp(eqn, ct):
    x, *starts = eqn.args
    return [Window(x, ct, list(starts))] + [None] * len(starts)


def _dynamic_slice_jvp(eqn, tangents):
    return emit_like(eqn.inst, [tangents[0], *eqn.args[1:]])


def _dus_vjp(eqn, ct):
    x, update, *starts = eqn.args
    ct_x = lax.dynamic_update_slice(ct, zeros_like(update), starts)
    ct_update = lax.dynamic_slice(ct, starts, tuple(update.shape))
    return [ct_x, ct_update] + [None] * len(starts)


def _dus_jvp(eqn, tangents):
    x, update, *starts = eqn.args
    return emit_like(
        eqn.inst, [instantiate(tangents[0], x), instantiate(tangents[1], update), *starts]
    )


def scatter_combiner(inst: Instruction) -> str | None:
    comp = inst.attrs["to_apply"]
    if comp.root is comp.parameters[1]:
        return "assign"
    return reducer_opcode(inst)


def _scatter_window(inst: Instruction, x_shape, updates_shape) -> list[int]:
    a = inst.attrs
    window, k = [], 0
    for d in range(len(x_shape)):
        if d in a["inserted_window_dims"] or d in (a.get("input_batching_dims") or ()):
            window.append(1)
        else:
            window.append(updates_shape[a["update_window_dims"][k]])
            k += 1
    return window


def _gather_updates(inst, source: Tracer, indices: Tracer, updates: Tracer) -> Tracer:
    """The elements of ``source`` that scatter ``inst`` would write ``updates`` to (clamped)."""
    a = inst.attrs
    return lax.gather(source, indices, offset_dims=a["update_window_dims"],
                      collapsed_slice_dims=a["inserted_window_dims"],
                      start_index_map=a["scatter_dims_to_operand_dims"],
                      slice_sizes=_scatter_window(inst, source.shape, updates.shape),
                      index_vector_dim=a["index_vector_dim"])


def _scatter_update_dims(inst, updates: Tracer) -> list[int]:
    return [d for d in range(updates.ndim) if d not in inst.attrs["update_window_dims"]]


def _scatter_vjp(eqn, ct):
    x, indices, updates = eqn.args
    inst = eqn.inst
    a = inst.attrs
    combiner = scatter_combiner(inst)
    window = _scatter_window(inst, x.shape, updates.shape)
    if combiner == "add":
        ok = _in_range(
            indices, a["index_vector_dim"], a["scatter_dims_to_operand_dims"], x.shape, window
        )
        ok = lax.broadcast_in_dim(ok, updates.shape, _scatter_update_dims(inst, updates))
        ct_updates = lax.select(
            ok, _gather_updates(inst, ct, indices, updates), zeros_like(updates)
        )
        return [ct, None, ct_updates]
    # assign: an element keeps the last update written to it (out-of-range windows are dropped);
    # scattering each update's number shows which one that is, as JAX's scatter rule does
    scatter_dims = _scatter_update_dims(inst, updates)
    count = int(np.prod([updates.shape[d] for d in scatter_dims], dtype=np.int64))
    ids = lax.reshape(
        lax.iota(ct.trace, np.int64, (count,), 0), [updates.shape[d] for d in scatter_dims]
    )
    ids = lax.broadcast_in_dim(ids, updates.shape, scatter_dims)
    owner = lax.scatter(
        lax.full(ct.trace, x.shape, -1, np.int64),
        indices,
        ids,
        "assign",
        update_window_dims=a["update_window_dims"],
        inserted_window_dims=a["inserted_window_dims"],
        scatter_dims_to_operand_dims=a["scatter_dims_to_operand_dims"],
        index_vector_dim=a["index_vector_dim"],
    )
    untouched = lax.compare(owner, lax.full_like(owner, -1), "EQ")
    ct_x = lax.select(untouched, ct, zeros_like(ct))
    won = lax.compare(_gather_updates(inst, owner, indices, updates), ids, "EQ")
    ct_updates = lax.select(won, _gather_updates(inst, ct, indices, updates), zeros_like(updates))
    return [ct_x, None, ct_updates]


def _scatter_jvp(eqn, tangents):
    x, indices, updates = eqn.args
    return emit_like(
        eqn.inst, [instantiate(tangents[0], x), indices, instantiate(tangents[2], updates)]
    )


def _scatter_check(inst: Instruction):
    combiner = scatter_combiner(inst)
    if combiner not in ("assign", "add"):
        return (
            f"a scatter combining with '{combiner}' (np.{combiner}.at ...) has no derivative in "
            "toolkit; "
            "only assignment (x[i] = v) and addition (np.add.at) do"
        )
    return None


# ---- reductions ----------------------------------------------------------------------------------
class _NotDifferentiableHere(Exception):
    """Raised by a rule for an instruction it cannot differentiate; the engine names the line."""


def _reduce_kind(eqn) -> str:
    if len(eqn.args) != 2:
        raise _NotDifferentiableHere(
            "a reduction over several arrays at once (argmax's) has no derivative; "
            "its index result is an integer"
        )
    kind = reducer_opcode(eqn.inst)
    if kind not in GroupOp.ARITHMETIC_REDUCERS | GroupOp.SELECTING_REDUCERS:
        raise _NotDifferentiableHere(f"a reduction by '{kind}' has no derivative in toolkit")
    return kind


def _kept(eqn) -> list[int]:
    dims = eqn.inst.attrs["dimensions"]
    return [d for d in range(eqn.args[0].ndim) if d not in dims]


def _reduce_partial(eqn, kind: str) -> Callable[[Tracer], Tracer]:
    """The linear map t -> d(out) for ``t`` over the reduced operand's shape."""
    x = eqn.args[0]
    dims = tuple(eqn.inst.attrs["dimensions"])
    out_b = lax.broadcast_in_dim(eqn.out, x.shape, _kept(eqn))
    if kind in GroupOp.SELECTING_REDUCERS:  # spread evenly over the elements equal to the result
        at = lax.convert(lax.compare(x, out_b, "EQ"), x.dtype)
        count = lax.broadcast_in_dim(lax.reduce(at, "add", dims), x.shape, _kept(eqn))
        return lambda t: lax.elementwise("multiply", t, lax.elementwise("divide", at, count))
    # multiply: the product of the other elements; zeros are counted, not divided by
    zero = lax.compare(x, zeros_like(x), "EQ")
    nonzero_product = lax.reduce(lax.select(zero, lax.full_like(x, 1), x), "multiply", dims)
    zeros = lax.reduce(lax.convert(zero, np.int64), "add", dims)
    p_b = lax.broadcast_in_dim(nonzero_product, x.shape, _kept(eqn))
    z_b = lax.broadcast_in_dim(zeros, x.shape, _kept(eqn))
    no_zero = lax.compare(z_b, lax.full_like(z_b, 0), "EQ")
    one_zero = lax.compare(z_b, lax.full_like(z_b, 1), "EQ")
    others = lax.select(no_zero, lax.elementwise("divide", p_b, x),
                        lax.select(lax.elementwise("and", one_zero, zero), p_b, zeros_like(x)))
    return lambda t: lax.elementwise("multiply", t, others)


def _reduce_jvp(eqn, tangents):
    kind = _reduce_kind(eqn)
    dims = tuple(eqn.inst.attrs["dimensions"])
    t_x, t_init = tangents
    total = None
    if t_x is not None:
        t = t_x if kind == "add" else _reduce_partial(eqn, kind)(t_x)
        total = lax.reduce(t, "add", dims)
    if t_init is not None:
        if kind != "add":
            raise _NotDifferentiableHere(
                f"the initial value of a '{kind}' reduction is not differentiated"
            )
        total = add_tangents(total, lax.broadcast_in_dim(t_init, eqn.out.shape, ()))
    return total


def _reduce_vjp(eqn, ct):
    kind = _reduce_kind(eqn)
    x = eqn.args[0]
    spread = lax.broadcast_in_dim(ct, x.shape, _kept(eqn))
    ct_x = spread if kind == "add" else _reduce_partial(eqn, kind)(spread)
    ct_init = lax.reduce(ct, "add", tuple(range(ct.ndim))) if kind == "add" else None
    return [ct_x, ct_init]


# ---- dot: JAX's dot_general transpose ------------------------------------------------------------
def _ranges_like(*lists):
    start = 0
    for x in lists:
        yield list(range(start, start + len(x)))
        start += len(x)


def _remaining(n, *removed):
    gone = {d for r in removed for d in r}
    return [d for d in range(n) if d not in gone]


def _dot_transpose_lhs(ct, x_ndim, y, x_contract, y_contract, x_batch, y_batch, swap_ans=False):
    x_kept = _remaining(x_ndim, x_contract, x_batch)
    y_kept = _remaining(y.ndim, y_contract, y_batch)
    if swap_ans:
        ans_batch, ans_y, _ = _ranges_like(x_batch, y_kept, x_kept)
    else:
        ans_batch, _, ans_y = _ranges_like(x_batch, x_kept, y_kept)
    x_contract_sorted_by_y = [x_contract[i] for i in np.argsort(y_contract)]
    # x's dimension for each of dot(ct, y)'s
    order = list(x_batch) + x_kept + x_contract_sorted_by_y
    swapped = list(x_batch) + x_contract_sorted_by_y + x_kept  # ... and of dot(y, ct)'s
    if order != sorted(order) and swapped == sorted(swapped):
        # dot(y, ct) is already in x's order: no transpose to materialise (x^T @ ct, not (ct^T @
        # x)^T)
        return lax.dot_general(y, ct, (y_kept, ans_y), (y_batch, ans_batch))
    product = lax.dot_general(ct, y, (ans_y, y_kept), (ans_batch, y_batch))
    return lax.transpose(product, [int(a) for a in np.argsort(order)])


def _dot_vjp(eqn, ct):
    x, y = eqn.args
    a = eqn.inst.attrs
    xc, yc = list(a["lhs_contracting_dims"]), list(a["rhs_contracting_dims"])
    xb, yb = list(a["lhs_batch_dims"]), list(a["rhs_batch_dims"])
    ct_x = _dot_transpose_lhs(ct, x.ndim, y, xc, yc, xb, yb)
    ct_y = _dot_transpose_lhs(ct, y.ndim, x, yc, xc, yb, xb, swap_ans=True)
    return [ct_x, ct_y]


def _dot_jvp(eqn, tangents):
    x, y = eqn.args
    t_x, t_y = tangents
    total = None
    if t_x is not None:
        total = emit_like(eqn.inst, [t_x, y])
    if t_y is not None:
        total = add_tangents(total, emit_like(eqn.inst, [x, t_y]))
    return total


# ---- sort: the permutation it applies ------------------------------------------------------------
def _sort_keys(inst: Instruction) -> int:
    comparator = inst.attrs["to_apply"]
    used = {id(o) for i in comparator.instructions for o in i.operands}
    numbers = [p.attrs["parameter_number"] for p in comparator.parameters if id(p) in used]
    return max(numbers) // 2 + 1 if numbers else 1


def _sort_jvp(eqn, tangents):
    dim = eqn.inst.attrs["dimensions"][0]
    keys = _sort_keys(eqn.inst)
    riders = [instantiate(t, a) for t, a in zip(tangents, eqn.args) if a.dtype.kind == "f"]
    # (the primal's stability: an unstable sort orders ties as NumPy's default sort, which the
    # same keys make again)
    stable = bool(eqn.inst.attrs.get("is_stable"))
    moved = lax.sort(list(eqn.args) + riders, dim, keys, stable)[len(eqn.args):]
    it = iter(moved)
    out = [next(it) if a.dtype.kind == "f" else None for a in eqn.args]
    return out[0] if len(eqn.args) == 1 else out


def _along_axis(x: Tracer, positions: Tracer, dim: int) -> Tracer:
    """``x`` reordered along ``dim``: element i comes from ``positions[i]`` (take_along_axis)."""
    trace = x.trace
    columns = []
    for d in range(x.ndim):
        source = positions if d == dim else lax.iota(trace, positions.dtype, x.shape, d)
        columns.append(lax.reshape(source, tuple(x.shape) + (1,)))
    indices = lax.concatenate(columns, x.ndim)
    return lax.gather(
        x,
        indices,
        offset_dims=(),
        collapsed_slice_dims=tuple(range(x.ndim)),
        start_index_map=tuple(range(x.ndim)),
        slice_sizes=(1,) * x.ndim,
        index_vector_dim=x.ndim,
    )


def _sort_vjp(eqn, ct):
    dim = eqn.inst.attrs["dimensions"][0]
    keys = _sort_keys(eqn.inst)
    trace = eqn.args[0].trace
    position = lax.iota(trace, np.int64, eqn.args[0].shape, dim)
    stable = bool(eqn.inst.attrs.get("is_stable"))
    order = lax.sort(list(eqn.args[:keys]) + [position], dim, keys, stable)[-1]  # slot -> source
    inverse = lax.sort([order, position], dim, 1)[1]  # source -> sorted slot
    cts = [ct] if len(eqn.args) == 1 else ct
    return [None if c is None else _along_axis(dense(c), inverse, dim) for c in cts]


# ---- tuples --------------------------------------------------------------------------------------
def _tuple_jvp(eqn, tangents):
    return list(tangents)


def _tuple_vjp(eqn, ct):
    return list(ct)


def _gte_jvp(eqn, tangents):
    (t,) = tangents
    return None if t is None else t[eqn.inst.attrs["index"]]


def _gte_vjp(eqn, ct):
    shape = eqn.inst.operands[0].shape
    assert isinstance(shape, TupleShape)
    out = [None] * len(shape.elements)
    out[eqn.inst.attrs["index"]] = ct
    return [out]


def _barrier_jvp(eqn, tangents):
    return tangents[0]


def _barrier_vjp(eqn, ct):
    return [ct]


# ---- the tables ----------------------------------------------------------------------------------
def _build_tables():
    jvp: dict[str, object] = {}
    vjp: dict[str, object] = {}
    for name, partial in PARTIALS.items():
        if isinstance(partial, NotDifferentiable):
            jvp[name] = vjp[name] = partial
        elif partial == ZERO_DERIVATIVE:
            jvp[name], vjp[name] = _zero_jvp, _zero_vjp
        else:
            jvp[name], vjp[name] = _elementwise_jvp, _elementwise_vjp
    leaf = NotDifferentiable("a leaf has no operands (its value is where differentiation starts)")
    for name in GroupOp.LEAVES:
        jvp[name] = vjp[name] = leaf
    jvp.update(
        {
            "clamp": _clamp_jvp,
            "convert": _convert_jvp,
            "broadcast": _linear_jvp,
            "reshape": _linear_jvp,
            "bitcast": _linear_jvp,
            "transpose": _linear_jvp,
            "slice": _linear_jvp,
            "concatenate": _linear_jvp,
            "pad": _linear_jvp,
            "reverse": _linear_jvp,
            "copy": _linear_jvp,
            "gather": _gather_jvp,
            "dynamic-slice": _dynamic_slice_jvp,
            "dynamic-update-slice": _dus_jvp,
            "scatter": _scatter_jvp,
            "reduce": _reduce_jvp,
            "dot": _dot_jvp,
            "sort": _sort_jvp,
            "tuple": _tuple_jvp,
            "get-tuple-element": _gte_jvp,
            "opt-barrier": _barrier_jvp,
        }
    )
    vjp.update(
        {
            "clamp": _clamp_vjp,
            "convert": _convert_vjp,
            "broadcast": _broadcast_vjp,
            "reshape": _reshape_vjp,
            "bitcast": _reshape_vjp,
            "transpose": _transpose_vjp,
            "slice": _slice_vjp,
            "concatenate": _concatenate_vjp,
            "pad": _pad_vjp,
            "reverse": _reverse_vjp,
            "copy": _copy_vjp,
            "gather": _gather_vjp,
            "dynamic-slice": _dynamic_slice_vjp,
            "dynamic-update-slice": _dus_vjp,
            "scatter": _scatter_vjp,
            "reduce": _reduce_vjp,
            "dot": _dot_vjp,
            "sort": _sort_vjp,
            "tuple": _tuple_vjp,
            "get-tuple-element": _gte_vjp,
            "opt-barrier": _barrier_vjp,
        }
    )
    no = {
        "bitcast-convert": "reinterpreting a float's bits (np.frexp, view) has no derivative",
        "fusion": "fusions exist only after compilation passes; differentiation runs on the traced "
                  "program",
    }
    for name, reason in no.items():
        jvp[name] = vjp[name] = NotDifferentiable(reason)
    # (the data-moving collectives' rules are ad_collectives.py's; these are integer ids)
    device_id = NotDifferentiable("a device's id is an integer: it has no derivative")
    for name in GroupOp.COLLECTIVE:
        jvp[name] = vjp[name] = device_id
    return jvp, vjp


JVP_RULES, VJP_RULES = _build_tables()
# checked before a rule runs (the op's derivative depends on its attributes): a reason, or None
PRECONDITIONS: dict[str, Callable[[Instruction], str | None]] = {"scatter": _scatter_check}
NotDifferentiableHere = _NotDifferentiableHere

__all__ = [
    "Eqn",
    "Window",
    "JVP_RULES",
    "VJP_RULES",
    "PRECONDITIONS",
    "NotDifferentiable",
    "NotDifferentiableHere",
    "add_tangents",
    "dense",
    "instantiate",
    "emit_like",
    "zeros_like",
    "scatter_combiner",
]
