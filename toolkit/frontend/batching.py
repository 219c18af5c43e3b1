"""Vectorisation (``vmap``): a traced computation re-emitted with a batch dimension, one rule
per opcode in ``BATCH_RULES`` (a test holds that every op has a rule or a stated reason).

A value is batched (its batch dimension is dimension 0) or unbatched (the same for every batch
element); unbatched operands meet batched ones by broadcasting, as autodidax's
``binop_batching_rule``. Indexing with batched indices becomes a gather or scatter with the
batch as one more index component; ``while`` with a predicate that differs per batch element
runs until every element is done, freezing the finished ones (``select``); ``conditional``
with a batched selector runs every branch and selects, as ``jax.vmap`` does. A library call
(``np.linalg``) runs once per batch element in a loop."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.nodes import Instruction
from ..ir.ops import OPS
from ..ir.shapes import Shape, TupleShape
from ..ir.windows import WindowDim
from . import control_flow, lax
from ..ir.queries import known_trip_count
# a tuple's elements, and a tuple of values, in the current trace
from .ad_control import _elements, _pack
from .ad_engine import Body, emit_primal
from .ad_partials import NotDifferentiable
from .errors import UnsupportedNumpyError
from .tracer import Trace, Tracer, current_trace


class NotBatchableError(UnsupportedNumpyError):
    """An operation toolkit cannot vectorise over a batch dimension."""


def _where(inst: Instruction) -> str:
    md = inst.metadata
    name = md.op_name.split("/", 1)[-1] if md is not None and md.op_name else inst.opcode
    return f"'{name}'" + (f" at {md.location}" if md is not None and md.location else "")


def any_batched(flag) -> bool:
    return any(flag) if isinstance(flag, list) else bool(flag)


def spread(x: Tracer, size: int) -> Tracer:
    """``x`` repeated along a new leading batch dimension."""
    return lax.broadcast_in_dim(x, (size,) + tuple(x.shape), tuple(range(1, x.ndim + 1)))


def _batched(x: Tracer, flag: bool, size: int) -> Tracer:
    return x if flag else spread(x, size)


def _shape(inst: Instruction, size: int) -> Shape:
    return Shape(inst.shape.dtype, (size,) + tuple(inst.shape.dims))


def _emit(inst: Instruction, ops, attrs, size: int, shape=None) -> Tracer:
    return current_trace().emit(
        inst.opcode, tuple(ops), attrs, shape if shape is not None else _shape(inst, size)
    )


def _shifted(dims, by: int = 1) -> tuple:
    return tuple(int(d) + by for d in dims)


# ---- elementwise and data movement ------------------------------------------------------------
def _elementwise(inst, args, flags, size):
    dims = tuple(inst.shape.dims)
    ops = []
    for a, b in zip(args, flags):
        if b:
            ops.append(
                a if a.ndim == len(dims) + 1 else lax.broadcast_in_dim(a, (size,) + dims, (0,))
            )
        else:
            scalar_kept = a.ndim == 0 and dims and OPS[inst.opcode].category == "ternary"
            ops.append(a if scalar_kept else spread(a, size))
    return _emit(inst, ops, dict(inst.attrs), size), True


def _broadcast(inst, args, flags, size):
    return _emit(inst, args, {"dimensions": (0,) + _shifted(inst.attrs["dimensions"])}, size), True


def _same_attrs(inst, args, flags, size):
    return _emit(inst, args, dict(inst.attrs), size), True


def _collective_dimension(inst, args, flags, size):
    if "dimensions" not in inst.attrs:
        raise NotBatchableError(f"vmap of {_where(inst)}: the tuple form of all-to-all")
    return _emit(inst, args, dict(inst.attrs, dimensions=_shifted(inst.attrs["dimensions"])),
                 size), True


def _transpose(inst, args, flags, size):
    return _emit(inst, args, {"dimensions": (0,) + _shifted(inst.attrs["dimensions"])}, size), True


def _slice(inst, args, flags, size):
    return _emit(inst, args, {"slice": ((0, size, 1),) + tuple(inst.attrs["slice"])}, size), True


def _reverse(inst, args, flags, size):
    return _emit(inst, args, {"dimensions": _shifted(inst.attrs["dimensions"])}, size), True


def _concatenate(inst, args, flags, size):
    ops = [_batched(a, b, size) for a, b in zip(args, flags)]
    return _emit(inst, ops, {"dimensions": _shifted(inst.attrs["dimensions"])}, size), True


def _pad(inst, args, flags, size):
    (x, value), (bx, bv) = args, flags
    spec = ((0, 0, 0),) + tuple(inst.attrs["padding"])
    x = _batched(x, bx, size)
    if not bv:
        return _emit(inst, [x, value], {"padding": spec}, size), True
    # a padding value per batch element: pad with zeros, then put each element's value where
    # the padding is (a padded mask says where)
    zero = lax.full(current_trace(), (), 0, x.dtype)
    padded = _emit(inst, [x, zero], {"padding": spec}, size)
    inside = lax.pad(
        lax.full(current_trace(), x.shape, True, np.bool_),
        lax.full(current_trace(), (), False, np.bool_),
        spec,
    )
    fill = lax.broadcast_in_dim(value, padded.shape, (0,))
    return lax.select(inside, padded, fill), True


def _reduce(inst, args, flags, size):
    k = len(args) // 2
    if any(flags[k:]):
        raise NotBatchableError(
            f"vmap of {_where(inst)}: a reduction whose initial value differs per batch element"
        )
    arrays = [_batched(a, b, size) for a, b in zip(args[:k], flags[:k])]
    attrs = dict(inst.attrs, dimensions=_shifted(inst.attrs["dimensions"]))
    if k == 1:
        return _emit(inst, arrays + list(args[k:]), attrs, size), True
    shape = TupleShape(tuple(Shape(e.dtype, (size,) + tuple(e.dims)) for e in inst.shape.elements))
    return _emit(inst, arrays + list(args[k:]), attrs, size, shape), [True] * k


def _reduce_window(inst, args, flags, size):
    (x, init), (bx, binit) = args, flags
    if binit:
        raise NotBatchableError(
            f"vmap of {_where(inst)}: a windowed reduction whose initial value differs per "
            "batch element")
    attrs = dict(inst.attrs, window=(WindowDim(1),) + tuple(inst.attrs["window"]))
    return _emit(inst, [_batched(x, bx, size), init], attrs, size), True


def _sort(inst, args, flags, size):
    ops = [_batched(a, b, size) for a, b in zip(args, flags)]
    attrs = dict(inst.attrs, dimensions=_shifted(inst.attrs["dimensions"]))
    if len(ops) == 1:
        return _emit(inst, ops, attrs, size), True
    shape = TupleShape(tuple(Shape(e.dtype, (size,) + tuple(e.dims)) for e in inst.shape.elements))
    return _emit(inst, ops, attrs, size, shape), [True] * len(ops)


def _dot(inst, args, flags, size):
    (x, y), (bx, by) = args, flags
    a = inst.attrs
    lb, rb = tuple(a["lhs_batch_dims"]), tuple(a["rhs_batch_dims"])
    lc, rc = tuple(a["lhs_contracting_dims"]), tuple(a["rhs_contracting_dims"])
    if bx and by:
        attrs = dict(a, lhs_batch_dims=(0,) + _shifted(lb), rhs_batch_dims=(0,) + _shifted(rb),
                     lhs_contracting_dims=_shifted(lc), rhs_contracting_dims=_shifted(rc))
        return _emit(inst, [x, y], attrs, size), True
    if bx:  # the batch dimension is the lhs's first free dimension in the result
        attrs = dict(a, lhs_batch_dims=_shifted(lb), lhs_contracting_dims=_shifted(lc))
        position = len(lb)
    else:
        attrs = dict(a, rhs_batch_dims=_shifted(rb), rhs_contracting_dims=_shifted(rc))
        position = len(lb) + (x.ndim - len(lb) - len(lc))
    dims = list(inst.shape.dims)
    out = current_trace().emit(
        "dot",
        (x, y),
        attrs,
        Shape(inst.shape.dtype, tuple(dims[:position] + [size] + dims[position:])),
    )
    perm = [position] + [d for d in range(len(dims) + 1) if d != position]
    return lax.transpose(out, perm), True


# ---- indexing ---------------------------------------------------------------------------------
def _with_batch_component(indices: Tracer, index_vector_dim: int) -> tuple[Tracer, int]:
    """Batched ``indices`` (batch at 0) with the batch element's number as a first index
    component: (new indices, their index vector dimension)."""
    vector_dim = index_vector_dim + 1  # the batch dimension came first
    if vector_dim == indices.ndim:  # implicit trailing index vector of one component
        indices = lax.reshape(indices, tuple(indices.shape) + (1,))
    counter_shape = list(indices.shape)
    counter_shape[vector_dim] = 1
    counter = lax.iota(current_trace(), indices.dtype, counter_shape, 0)
    return lax.concatenate([counter, indices], vector_dim), vector_dim


def _gather_attrs(attrs) -> dict:
    return {
        k: attrs[k]
        for k in (
            "offset_dims",
            "collapsed_slice_dims",
            "start_index_map",
            "index_vector_dim",
            "slice_sizes",
        )
        if k in attrs
    }


def _batched_gather(
    x: Tracer, bx: bool, indices: Tracer, bi: bool, attrs, out_dims, dtype, size: int
) -> Tracer:
    a = _gather_attrs(attrs)
    trace = current_trace()
    if a.get("operand_batching_dims"):
        raise NotBatchableError("vmap of a gather with batching dimensions")
    shape = Shape(dtype, (size,) + tuple(out_dims))
    if bx and not bi:
        new = dict(
            a,
            offset_dims=(0,) + _shifted(a["offset_dims"]),
            collapsed_slice_dims=_shifted(a["collapsed_slice_dims"]),
            start_index_map=_shifted(a["start_index_map"]),
            slice_sizes=(size,) + tuple(a["slice_sizes"]),
        )
        return trace.emit("gather", (x, indices), new, shape)
    if bi and not bx:
        new = dict(
            a, offset_dims=_shifted(a["offset_dims"]), index_vector_dim=a["index_vector_dim"] + 1
        )
        return trace.emit("gather", (x, indices), new, shape)
    indices, vector_dim = _with_batch_component(indices, a["index_vector_dim"])
    new = dict(
        a,
        offset_dims=_shifted(a["offset_dims"]),
        collapsed_slice_dims=(0,) + _shifted(a["collapsed_slice_dims"]),
        start_index_map=(0,) + _shifted(a["start_index_map"]),
        slice_sizes=(1,) + tuple(a["slice_sizes"]),
        index_vector_dim=vector_dim,
    )
    return trace.emit("gather", (x, indices), new, shape)


def _gather(inst, args, flags, size):
    (x, indices), (bx, bi) = args, flags
    return _batched_gather(
        x, bx, indices, bi, inst.attrs, inst.shape.dims, inst.shape.dtype, size
    ), True


def _scatter_all_batched(inst_attrs, x, indices, updates, size, dtype_shape) -> Tracer:
    a = dict(inst_attrs)
    indices, vector_dim = _with_batch_component(indices, a["index_vector_dim"])
    new = dict(a, update_window_dims=_shifted(a["update_window_dims"]),
               inserted_window_dims=(0,) + _shifted(a["inserted_window_dims"]),
               scatter_dims_to_operand_dims=(0,) + _shifted(a["scatter_dims_to_operand_dims"]),
               index_vector_dim=vector_dim)
    if a.get("input_batching_dims"):
        raise NotBatchableError("vmap of a scatter with batching dimensions")
    return current_trace().emit("scatter", (x, indices, updates), new, dtype_shape)


def _scatter(inst, args, flags, size):
    x, indices, updates = (_batched(a, b, size) for a, b in zip(args, flags))
    return _scatter_all_batched(inst.attrs, x, indices, updates, size, _shape(inst, size)), True


def _batched_starts(starts, flags, size) -> Tracer:
    """The start scalars as a (batch, k) index array."""
    dtype = np.result_type(*[s.dtype for s in starts])
    columns = [
        lax.reshape(_batched(lax.convert(s, dtype), b, size), (size, 1))
        for s, b in zip(starts, flags)
    ]
    return lax.concatenate(columns, 1)


def _dynamic_slice(inst, args, flags, size):
    x, *starts = args
    bx, *bs = flags
    sizes = tuple(inst.attrs["dynamic_slice_sizes"])
    if not any(bs):
        zero = lax.full(current_trace(), (), 0, starts[0].dtype if starts else np.int64)
        return _emit(inst, [x, zero, *starts], {"dynamic_slice_sizes": (size,) + sizes}, size), True
    indices = _batched_starts(starts, bs, size)  # (batch, k): a gather of one window per element
    # as an unbatched gather its index array would be (k,), vector dimension 0; batched: (batch, k)
    attrs = {
        "offset_dims": tuple(range(len(sizes))),
        "collapsed_slice_dims": (),
        "start_index_map": tuple(range(len(sizes))),
        "index_vector_dim": 0,
        "slice_sizes": sizes,
    }
    return _batched_gather(
        x, bx, indices, True, attrs, inst.shape.dims, inst.shape.dtype, size
    ), True


def _dynamic_update_slice(inst, args, flags, size):
    x, update, *starts = args
    bx, bu, *bs = flags
    x, update = _batched(x, bx, size), _batched(update, bu, size)
    if not any(bs):
        zero = lax.full(current_trace(), (), 0, starts[0].dtype if starts else np.int64)
        return _emit(inst, [x, update, zero, *starts], {}, size), True
    # dynamic-update-slice clamps each start so the window fits; a scatter would drop it instead
    limits = [d - u for d, u in zip(inst.shape.dims, update.shape[1:])]
    clamped = [
        lax.elementwise(
            "minimum", lax.elementwise("maximum", s, lax.full_like(s, 0)), lax.full_like(s, limit)
        )
        for s, limit in zip(starts, limits)
    ]
    indices = _batched_starts(clamped, bs, size)
    attrs = {"update_window_dims": tuple(range(len(limits))), "inserted_window_dims": (),
             "scatter_dims_to_operand_dims": tuple(range(len(limits))), "index_vector_dim": 0,
             "to_apply": current_trace().module.scalar_reducer("assign", inst.shape.dtype)}
    return _scatter_all_batched(attrs, x, indices, update, size, _shape(inst, size)), True


# ---- tuples, calls, control flow ------------------------------------------------------------
def _tuple(inst, args, flags, size):
    return current_trace().emit("tuple", tuple(args)), [any_batched(f) for f in flags]


def _gte(inst, args, flags, size):
    (t,), (f,) = args, flags
    flag = f[inst.attrs["index"]] if isinstance(f, list) else bool(f)
    return current_trace().emit("get-tuple-element", (t,), {"index": inst.attrs["index"]}), flag


def _barrier(inst, args, flags, size):
    return current_trace().emit("opt-barrier", tuple(args)), flags[0]


def _call(inst, args, flags, size):
    (out,), (flag,) = batch_body(
        current_trace(),
        Body.of(inst.attrs["to_apply"]),
        dict(enumerate(args)),
        dict(enumerate(flags)),
        size,
    )
    return out, flag


def _reach(body: Body, elements: set[int]) -> tuple[set[int], bool]:
    """Which result elements of ``body`` (one tuple parameter) depend on ``elements`` of it,
    and whether a non-tuple root does."""
    (param,) = body.parameters.values()
    marked: set[int] = set()
    for inst in body.instructions:
        if inst.opcode == "get-tuple-element" and inst.operands[0] is param:
            if inst.attrs["index"] in elements:
                marked.add(id(inst))
        elif inst.opcode != "parameter" and any(id(o) in marked for o in inst.operands):
            marked.add(id(inst))
    root = body.results[0]
    if root.opcode == "tuple":
        return {k for k, o in enumerate(root.operands) if id(o) in marked}, False
    return set(), id(root) in marked


def _while(inst, args, flags, size):
    (state,), (sflags,) = args, flags
    n = len(inst.shape.elements)
    batched = {k for k in range(n) if (sflags[k] if isinstance(sflags, list) else sflags)}
    body, cond = Body.of(inst.attrs["body"]), Body.of(inst.attrs["condition"])
    changed, _ = _reach(body, set(range(n)))  # elements a trip can change
    passthrough = set(range(n)) - changed
    while True:
        _, predicate_batched = _reach(cond, batched)
        grown = batched | _reach(body, batched)[0]
        # lanes finish at different trips: whatever a trip changes differs per lane
        if predicate_batched:
            grown |= changed
        if grown == batched:
            break
        batched = grown
    elements = _elements(state)
    came_batched = [bool(sflags[k] if isinstance(sflags, list) else sflags) for k in range(n)]
    init = [
        _batched(e, came_batched[k], size) if k in batched else e for k, e in enumerate(elements)
    ]
    flag_list = [k in batched for k in range(n)]

    def predicate(values):
        (p,), (pb,) = batch_body(current_trace(), cond, {0: _pack(values)}, {0: flag_list}, size)
        return p, pb

    def cond_fun(values):
        p, pb = predicate(values)
        return lax.reduce(p, "or", (0,)) if pb else p

    def body_fun(values):
        (out,), (of,) = batch_body(current_trace(), body, {0: _pack(values)}, {0: flag_list}, size)
        new = _elements(out)
        of = of if isinstance(of, list) else [bool(of)] * n
        new = [_batched(v, f, size) if k in batched else v for k, (v, f) in enumerate(zip(new, of))]
        if predicate_batched:
            p, _ = predicate(values)  # lanes already done keep their state
            new = [
                lax.select(lax.broadcast_in_dim(p, v.shape, (0,)), v, old)
                if k in batched and k not in passthrough
                else v
                for k, (v, old) in enumerate(zip(new, values))
            ]
        return new

    # the same trips for every batch element unless the predicate is batched: the trip count stays
    # known
    trips = None if predicate_batched else known_trip_count(inst)
    out = control_flow.while_loop(cond_fun, body_fun, init, _trip_count=trips)
    return _pack(list(out)), flag_list


def _branches_of(inst):
    if "branch_computations" in inst.attrs:
        return list(inst.attrs["branch_computations"])
    return [inst.attrs["true_computation"], inst.attrs["false_computation"]]


def _conditional(inst, args, flags, size):
    selector, *operands = args
    bsel, *bops = flags
    comps = _branches_of(inst)
    is_tuple = isinstance(inst.shape, TupleShape)
    count = len(inst.shape.elements) if is_tuple else 1
    if bsel:  # every branch runs; each batch element takes its own branch's result
        results = []
        for comp, op, f in zip(comps, operands, bops):
            (out,), (of,) = batch_body(current_trace(), Body.of(comp), {0: op}, {0: f}, size)
            outs = _elements(out) if is_tuple else [out]
            ofs = of if isinstance(of, list) else [bool(of)] * count
            results.append([_batched(v, b, size) for v, b in zip(outs, ofs)])
        if "branch_computations" in inst.attrs:
            last = lax.full_like(selector, len(comps) - 1)
            index = lax.select(
                lax.elementwise(
                    "or",
                    lax.compare(selector, lax.full_like(selector, 0), "LT"),
                    lax.compare(selector, last, "GT"),
                ),
                last,
                selector,
            )
            chosen = results[-1]
            for k in range(len(comps) - 2, -1, -1):
                pick = lax.compare(index, lax.full_like(index, k), "EQ")
                chosen = [
                    lax.select(lax.broadcast_in_dim(pick, v.shape, (0,)), v, rest)
                    for v, rest in zip(results[k], chosen)
                ]
        else:
            chosen = [
                lax.select(lax.broadcast_in_dim(selector, t.shape, (0,)), t, f)
                for t, f in zip(*results)
            ]
        return (_pack(chosen) if is_tuple else chosen[0]), ([True] * count if is_tuple else True)
    # one branch for the whole batch: batched branches, every output batched
    flat, where, fl = [], [], []
    for op, f in zip(operands, bops):
        items = _elements(op)
        where.append(list(range(len(flat), len(flat) + len(items))))
        flat.extend(items)
        fl.extend(f if isinstance(f, list) else [bool(f)] * len(items))
    flat = [_batched(v, b, size) for v, b in zip(flat, fl)]

    def branch_fn(comp, idx):
        def run(*values):
            (out,), (of,) = batch_body(
                current_trace(),
                Body.of(comp),
                {0: _pack([values[k] for k in idx])},
                {0: [True] * len(idx)},
                size,
            )
            outs = _elements(out) if is_tuple else [out]
            ofs = of if isinstance(of, list) else [bool(of)] * count
            return [_batched(v, b, size) for v, b in zip(outs, ofs)]
        return run

    trace = current_trace()
    built, tuples, _, _, _, _ = control_flow._branches(
        trace, [branch_fn(c, i) for c, i in zip(comps, where)], flat, "branch"
    )
    attrs = ({"branch_computations": tuple(built)} if "branch_computations" in inst.attrs
             else {"true_computation": built[0], "false_computation": built[1]})
    result = trace.emit("conditional", [selector] + tuples, attrs)
    return result, ([True] * count if is_tuple else True)


def _one_at_a_time(inst, args, flags, size):
    """An op with no batched form (a LAPACK library call): a loop over the batch elements, the
    op once per element (``jax.lax.map``'s way), results written into stacked outputs."""
    trace = current_trace()
    shapes = list(inst.shape.elements) if isinstance(inst.shape, TupleShape) else [inst.shape]
    stacked = [lax.full(trace, (size,) + tuple(s.dims), 0, s.dtype.numpy) for s in shapes]

    def element(a: Tracer, i: Tracer) -> Tracer:
        zeros = [lax.full_like(i, 0)] * (a.ndim - 1)
        return lax.reshape(
            lax.dynamic_slice(a, [i] + zeros, (1,) + tuple(a.shape[1:])), tuple(a.shape[1:])
        )

    def body(i, outs):
        ops = [element(a, i) if f else a for a, f in zip(args, flags)]
        result = current_trace().emit(inst.opcode, tuple(ops), dict(inst.attrs), inst.shape)
        leaves = _elements(result) if isinstance(inst.shape, TupleShape) else [result]
        return [
            lax.dynamic_update_slice(
                buf, lax.reshape(v, (1,) + tuple(v.shape)), [i] + [lax.full_like(i, 0)] * v.ndim
            )
            for buf, v in zip(outs, leaves)
        ]

    outs = control_flow.fori_loop(0, size, body, stacked)
    if isinstance(inst.shape, TupleShape):
        return _pack(list(outs)), [True] * len(shapes)
    return outs[0], True


def _not_batchable(reason: str):
    return NotDifferentiable(reason)  # the same "no rule, and why" marker as the derivative tables


BATCH_RULES: dict[str, Any] = {}


def _build():
    from ..ir.ops import OPS, GroupOp, is_elementwise
    for name in OPS:
        if is_elementwise(name):
            BATCH_RULES[name] = _elementwise
    leaf = _not_batchable("a leaf has no operands: it is the same for every batch element")
    BATCH_RULES.update(
        {
            "parameter": leaf,
            "constant": leaf,
            "iota": leaf,
            "broadcast": _broadcast,
            "reshape": _same_attrs,
            "bitcast": _same_attrs,
            "copy": _same_attrs,
            "transpose": _transpose,
            "slice": _slice,
            "reverse": _reverse,
            "concatenate": _concatenate,
            "pad": _pad,
            "reduce": _reduce,
            "reduce-window": _reduce_window,
            "sort": _sort,
            "dot": _dot,
            "gather": _gather,
            "scatter": _scatter,
            "dynamic-slice": _dynamic_slice,
            "dynamic-update-slice": _dynamic_update_slice,
            "tuple": _tuple,
            "get-tuple-element": _gte,
            "opt-barrier": _barrier,
            "call": _call,
            "while": _while,
            "conditional": _conditional,
            "custom-call": _one_at_a_time,
            "fusion": _not_batchable("fusions exist only after compilation passes"),
        }
    )
    # collectives: every device batches the same way, so the batch dimension rides along
    # (the combined dimension moves one up); the ids have no operands to batch
    device_id = _not_batchable("a device's id has no operands: it is the same for every "
                               "batch element")
    BATCH_RULES.update({name: device_id for name in GroupOp.COLLECTIVE})
    BATCH_RULES.update({"all-reduce": _same_attrs, "collective-permute": _same_attrs,
                        "all-gather": _collective_dimension,
                        "reduce-scatter": _collective_dimension,
                        "all-to-all": _collective_dimension})


_build()


def batch_body(
    trace: Trace, body: Body, values: dict[int, Tracer], flags: dict[int, Any], size: int
):
    """Emit ``body`` with a leading batch dimension of ``size`` on the parameters whose flag is
    set: the results and their flags (batched or not; a list for a tuple)."""
    env: dict[int, Tracer] = {}
    fl: dict[int, Any] = {}
    for inst in body.instructions:
        if inst.opcode == "parameter":
            number = inst.attrs["parameter_number"]
            env[id(inst)], fl[id(inst)] = values[number], flags.get(number, False)
            continue
        args = [env[id(o)] for o in inst.operands]
        op_flags = [fl[id(o)] for o in inst.operands]
        if not any(any_batched(f) for f in op_flags):
            env[id(inst)], fl[id(inst)] = emit_primal(trace, inst, args), False
            continue
        rule = BATCH_RULES[inst.opcode]
        if isinstance(rule, NotDifferentiable):
            raise NotBatchableError(f"vmap of {_where(inst)}: {rule.reason}")
        env[id(inst)], fl[id(inst)] = rule(inst, args, op_flags, size)
    return [env[id(r)] for r in body.results], [fl[id(r)] for r in body.results]


__all__ = ["BATCH_RULES", "batch_body", "spread", "NotBatchableError"]
