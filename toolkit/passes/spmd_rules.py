"""One partitioning rule per op (``RULES``, checked complete by a test): how an instruction
runs on each device's blocks given its operands' shardings, which collectives that takes, and
its result's sharding. ``passes/spmd_partitioner.py`` walks a program and calls them; ``p`` is
that walk (its ``local``, ``_reshard``, ``_replicate``, ``all_reduce``, ``decide``)."""
from __future__ import annotations

import math
from types import MappingProxyType
from typing import Any, Callable

import numpy as np

from ..ir.nodes import Instruction
from ..ir.ops import OPS, GroupOp
from ..ir.shapes import Shape
from ..profiler.units import binary_bytes
from .shardings import (MeshShape, PartitionDecision, PartitionError, Spec, TupleSpec, Value,
                        axes_text, local_shape, replicated)


def _split_count(p: Any, spec: Spec) -> int:
    return math.prod(p.mesh.size(axes) for axes in spec)



Rule = Callable[[Any, Instruction, list], Value]


def _replicated_rule(p: Any, inst: Instruction, operands: list[Value]) -> Value:
    """The op runs on whole arrays: every operand replicated, the result too."""
    gathered = []
    for k, (value, op) in enumerate(zip(operands, inst.operands)):
        before = len(p.decisions)
        gathered.append(p._replicate(value, op.shape, f"operand {k} of {inst.opcode}"))
        for j in range(before, len(p.decisions)):  # say why: the op needs whole arrays
            d = p.decisions[j]
            p.decisions[j] = PartitionDecision(
                d.instruction, d.opcode, d.location, d.collective, d.axes,
                d.message + f"; {inst.opcode} is not partitioned: it runs on whole arrays")
    spec = _replicated_spec(inst.shape)
    return p.local(inst, [g[0] for g in gathered], spec)


def _replicated_spec(shape):
    if isinstance(shape, Shape):
        return replicated(shape.rank)
    return TupleSpec(tuple(_replicated_spec(s) for s in shape.elements))


def _leaf(p: Any, inst: Instruction, operands: list[Value]) -> Value:
    """Constants and iotas: made whole on every device (cheap; a consumer slices them)."""
    return p.local(inst, [], replicated(inst.shape.rank))


def _elementwise(p: Any, inst: Instruction, operands: list[Value]) -> Value:
    arrays = [v for v, o in zip(operands, inst.operands) if o.shape.rank]
    if not arrays:
        return p.local(inst, [v[0] for v in operands], ())
    target = max((v[1] for v in arrays), key=lambda s: _split_count(p, s))
    wanted = p.hints.get(id(inst))
    if wanted is not None and not any(target) and _divides(p, wanted, inst.shape):
        target = wanted  # whole operands, a split result wanted: slice them, compute blocks
    moved = [v if not o.shape.rank else
             p._reshard(v, target, o.shape, f"operand {k} of {inst.opcode}")
             for k, (v, o) in enumerate(zip(operands, inst.operands))]
    return p.local(inst, [m[0] for m in moved], target)


def _broadcast(p: Any, inst: Instruction, operands: list[Value]) -> Value:
    (operand, spec), = operands
    dims = inst.attrs["dimensions"]
    wanted = p.hints.get(id(inst))
    if wanted is not None and not any(spec) and _divides(p, wanted, inst.shape):
        # made at the block's size: the operand sliced where its dimensions are split
        operand, spec = p._reshard((operand, spec), tuple(wanted[d] for d in dims),
                                   inst.operands[0].shape, "operand of broadcast")
        return p.local(inst, [operand], tuple(wanted))
    out = [()] * inst.shape.rank
    for i, d in enumerate(dims):
        out[d] = spec[i]  # (XLA's broadcast keeps each operand dimension's size)
    return p.local(inst, [operand], tuple(out))


def _divides(p: Any, spec: Spec, shape) -> bool:
    return isinstance(shape, Shape) and len(spec) == shape.rank and all(
        n % p.mesh.size(axes) == 0 for n, axes in zip(shape.dims, spec))


def _bitcast_convert(p: Any, inst: Instruction, operands: list[Value]) -> Value:
    """Same-width types: elementwise; another width adds or drops a minor dimension."""
    if inst.shape.rank == inst.operands[0].shape.rank:
        return _elementwise(p, inst, operands)
    return _replicated_rule(p, inst, operands)


def _transpose(p: Any, inst: Instruction, operands: list[Value]) -> Value:
    (operand, spec), = operands
    perm = inst.attrs["dimensions"]
    wanted = p.hints.get(id(inst))
    if wanted is not None and not any(spec) and _divides(p, wanted, inst.shape):
        source = [()] * len(perm)
        for i, d in enumerate(perm):
            source[d] = wanted[i]
        operand, spec = p._reshard((operand, spec), tuple(source), inst.operands[0].shape,
                                   "operand of transpose")
    return p.local(inst, [operand], tuple(spec[d] for d in perm))


def _reshape(p: Any, inst: Instruction, operands: list[Value]) -> Value:
    """A split survives a reshape where it is on the major dimension of a group of dimensions
    that merge or split (the blocks are then contiguous runs on both sides) and the group's
    major result dimension splits as evenly; other splits are gathered first."""
    (operand, spec), = operands
    source, result = inst.operands[0].shape.dims, inst.shape.dims
    out: list[tuple[str, ...]] = [()] * len(result)
    keep = list(spec)
    for ins, outs in _reshape_groups(source, result):
        for position, d in enumerate(ins):
            if not spec[d]:
                continue
            if position == 0 and outs and result[outs[0]] % p.mesh.size(spec[d]) == 0:
                out[outs[0]] = spec[d]
            else:
                keep[d] = ()
    if tuple(keep) != spec:
        operand, spec = p._reshard((operand, spec), tuple(keep), inst.operands[0].shape,
                                   "operand of reshape")
    return p.local(inst, [operand], tuple(out))


def _reshape_groups(source, result) -> list[tuple[list[int], list[int]]]:
    """The dimensions of a reshape in groups of equal element counts (size-1 dimensions are
    groups of their own on one side)."""
    groups = []
    i = j = 0
    while i < len(source) or j < len(result):
        if i < len(source) and source[i] == 1:
            groups.append(([i], []))
            i += 1
            continue
        if j < len(result) and result[j] == 1:
            groups.append(([], [j]))
            j += 1
            continue
        ins, outs = [i], [j]
        a, b = source[i], result[j]
        i, j = i + 1, j + 1
        while a != b:
            if a < b:
                a *= source[i]
                ins.append(i)
                i += 1
            else:
                b *= result[j]
                outs.append(j)
                j += 1
        groups.append((ins, outs))
    return groups


def _reduce(p: Any, inst: Instruction, operands: list[Value]) -> Value:
    if len(inst.operands) != 2 or not isinstance(inst.shape, Shape):
        return _replicated_rule(p, inst, operands)  # (variadic: argmax and friends)
    (operand, spec), (init, _) = operands
    reduced = set(inst.attrs["dimensions"])
    axes = tuple(a for d in sorted(reduced) for a in spec[d])
    kept = tuple(spec[d] for d in range(len(spec)) if d not in reduced)
    if axes and not _partials_combine(inst):
        spec2 = tuple(() if d in reduced else s for d, s in enumerate(spec))
        operand, spec = p._reshard((operand, spec), spec2, inst.operands[0].shape,
                                   f"operand of reduce ({_combiner(inst) or 'its computation'} "
                                   "cannot combine partial results)")
        axes = ()
    partial, _ = p.local(inst, [operand, init], kept)
    if not axes:
        return (partial, kept)
    combined = p.all_reduce(partial, axes, inst.attrs["to_apply"])
    p.decide("all-reduce", axes,
             f"reduce over dimension(s) {sorted(d for d in reduced if spec[d])} split over "
             f"{axes_text(axes)}: each device reduces its block, then the partial results are "
             f"combined by {_combiner(inst)} ({binary_bytes(partial.shape.nbytes)} per device)")
    return (combined, kept)


def _combiner(inst: Instruction) -> str | None:
    """The reducer a reduce's computation applies to its two parameters, if it is one."""
    comp = inst.attrs["to_apply"]
    root = comp.root
    if (root.opcode in GroupOp.REDUCERS and len(root.operands) == 2
            and set(map(id, root.operands)) == set(map(id, comp.parameters))):
        return root.opcode
    return None


def _partials_combine(inst: Instruction) -> bool:
    """Each device folds the init value in once: combining their partial results folds it in
    once per device, which is the same when the init value combined with itself is itself
    (0 for sums, any value for max/min). Integer and float sums are fine; a constant init is
    needed to know."""
    op = _combiner(inst)
    init = inst.operands[1]
    if op is None or init.opcode != "constant":
        return False
    ufunc = OPS[op].ufunc
    if ufunc is None:
        return False
    value = np.asarray(init.attrs["literal"], init.shape.dtype.numpy)
    with np.errstate(all="ignore"):
        twice = np.asarray(ufunc(value, value)).astype(value.dtype)
    return bool(np.array_equal(twice, value, equal_nan=True)
                and np.array_equal(np.signbit(twice), np.signbit(value))
                if value.dtype.kind in "fc" else np.array_equal(twice, value))


def _dot(p: Any, inst: Instruction, operands: list[Value]) -> Value:
    (lhs, ls), (rhs, rs) = operands
    a = inst.attrs
    lb, rb = tuple(a.get("lhs_batch_dims", ())), tuple(a.get("rhs_batch_dims", ()))
    lc, rc = tuple(a.get("lhs_contracting_dims", ())), tuple(a.get("rhs_contracting_dims", ()))
    lhs_shape, rhs_shape = inst.operands[0].shape, inst.operands[1].shape
    lfree = [d for d in range(lhs_shape.rank) if d not in lb and d not in lc]
    rfree = [d for d in range(rhs_shape.rank) if d not in rb and d not in rc]
    lt: list[tuple[str, ...]] = [()] * lhs_shape.rank
    rt: list[tuple[str, ...]] = [()] * rhs_shape.rank
    used: set[str] = set()
    # matched dimensions (batch, then contracting) take the split of the side that has one
    contract_ok = inst.shape.dtype.name != "pred"
    for pairs, ok in ((zip(lb, rb), True), (zip(lc, rc), contract_ok)):
        for dl, dr in pairs:
            axes = ls[dl] or rs[dr]
            if ok and axes and not (set(axes) & used):
                lt[dl] = rt[dr] = axes
                used.update(axes)
    for free, spec, target in ((lfree, ls, lt), (rfree, rs, rt)):
        for d in free:
            if spec[d] and not (set(spec[d]) & used):
                target[d] = spec[d]
                used.update(spec[d])
    lhs, _ = p._reshard((lhs, ls), tuple(lt), lhs_shape, "lhs of dot")
    rhs, _ = p._reshard((rhs, rs), tuple(rt), rhs_shape, "rhs of dot")
    out = tuple([lt[d] for d in lb] + [lt[d] for d in lfree] + [rt[d] for d in rfree])
    product, _ = p.local(inst, [lhs, rhs], out)
    partial = tuple(x for d in lc for x in lt[d])
    if not partial:
        return (product, out)
    summed = p.all_reduce(product, partial, p.reducer("add", inst.shape.dtype))
    p.decide("all-reduce", partial,
             f"contracting dimension(s) {[d for d in lc if lt[d]]} of the lhs split over "
             f"{axes_text(partial)} on both operands: each device multiplies its blocks, then "
             f"the partial sums are added ({binary_bytes(product.shape.nbytes)} per device)")
    return (summed, out)


def _untouched(touched: Callable[[Instruction], set[int]]) -> Rule:
    """Ops that keep the split of every dimension they do not touch (slice, pad, ...): their
    operands are resharded to one spec with the touched dimensions whole, and the op's
    attributes are given the blocks' sizes."""
    def rule(p: Any, inst: Instruction, operands: list[Value]) -> Value:
        if not isinstance(inst.shape, Shape):
            return _replicated_rule(p, inst, operands)
        dims = touched(inst)
        rank = inst.shape.rank
        arrays = [(k, v) for k, (v, o) in enumerate(zip(operands, inst.operands))
                  if isinstance(o.shape, Shape) and o.shape.rank == rank]
        base = max((v[1] for _, v in arrays), key=lambda s: _split_count(p, s))
        target = tuple(() if d in dims else axes for d, axes in enumerate(base))
        moved = list(operands)
        for k, v in arrays:
            moved[k] = p._reshard(v, target, inst.operands[k].shape,
                                  f"operand {k} of {inst.opcode}")
        for k, (v, o) in enumerate(zip(operands, inst.operands)):  # scalars: indices, values
            if (k, v) not in arrays and isinstance(o.shape, Shape) and o.shape.rank:
                moved[k] = p._replicate(v, o.shape, f"operand {k} of {inst.opcode}")
        attrs = _local_attrs(inst, target, p.mesh)
        return p.local(inst, [m[0] for m in moved], target, attrs)
    return rule


def _local_attrs(inst: Instruction, spec: Spec, mesh: MeshShape):
    """The op's attributes for blocks: sizes of split dimensions divided."""
    attrs = dict(inst.attrs)
    if inst.opcode == "slice":
        attrs["slice"] = tuple((start, limit if not spec[d] else limit // mesh.size(spec[d]), step)
                               for d, (start, limit, step) in enumerate(attrs["slice"]))
    elif inst.opcode == "dynamic-slice":
        attrs["dynamic_slice_sizes"] = local_shape(inst.shape, spec, mesh).dims
    return MappingProxyType(attrs)


def _slice_touched(inst):
    return {d for d, bounds in enumerate(inst.attrs["slice"])
            if tuple(bounds) != (0, inst.operands[0].shape.dims[d], 1)}


def _pad_touched(inst):
    return {d for d, padding in enumerate(inst.attrs["padding"]) if any(padding)}


def _dynamic_slice_touched(inst):
    return {d for d, n in enumerate(inst.attrs["dynamic_slice_sizes"])
            if n != inst.operands[0].shape.dims[d]}


def _update_touched(inst):
    return {d for d, n in enumerate(inst.operands[1].shape.dims)
            if n != inst.operands[0].shape.dims[d]}


def _window_touched(inst):
    """A reduce-window's dimensions whose window is more than the element itself (a scan's
    axis): those are whole on every device, the others keep their split."""
    return {d for d, w in enumerate(inst.attrs["window"]) if (w.size, w.stride, w.low, w.high)
            != (1, 1, 0, 0)}


def _named_dimensions(inst):
    return set(inst.attrs["dimensions"])


def _tuple(p: Any, inst: Instruction, operands: list[Value]) -> Value:
    return (p.emit("tuple", [v[0] for v in operands]), TupleSpec(tuple(v[1] for v in operands)))


def _get_tuple_element(p: Any, inst: Instruction, operands: list[Value]) -> Value:
    (value, spec), = operands
    if not isinstance(spec, TupleSpec):
        return _replicated_rule(p, inst, operands)
    return p._element((value, spec), inst.attrs["index"], inst.shape)


def _refused(p: Any, inst: Instruction, operands: list[Value]) -> Value:
    raise PartitionError(f"%{inst.name} is a {inst.opcode}: a partitioned program is written "
                         "for whole arrays")


# one rule per op (tests/test_spmd_partitioner.py checks that every op has one)
RULES: dict[str, Rule] = {op: _elementwise for op in GroupOp.ELEMENTWISE}
RULES.update({op: _refused for op in GroupOp.COLLECTIVE})
RULES.update({
    "bitcast-convert": _bitcast_convert,
    "parameter": _refused,  # (parameters are given their specs before the walk)
    "constant": _leaf,
    "iota": _leaf,
    "broadcast": _broadcast,
    "transpose": _transpose,
    "reshape": _reshape,
    "bitcast": _reshape,
    "copy": _elementwise,
    "slice": _untouched(_slice_touched),
    "pad": _untouched(_pad_touched),
    "reverse": _untouched(_named_dimensions),
    "concatenate": _untouched(_named_dimensions),
    "dynamic-slice": _untouched(_dynamic_slice_touched),
    "dynamic-update-slice": _untouched(_update_touched),
    "sort": _untouched(_named_dimensions),
    "reduce": _reduce,
    "reduce-window": _untouched(_window_touched),
    "dot": _dot,
    "tuple": _tuple,
    "get-tuple-element": _get_tuple_element,
    # on whole arrays: indices are data (gather, scatter), loops and calls run their
    # computations on whole arrays, library calls (LAPACK, FFT) want whole matrices
    "gather": _replicated_rule,
    "scatter": _replicated_rule,
    "while": _replicated_rule,
    "conditional": _replicated_rule,
    "call": _replicated_rule,
    "fusion": _replicated_rule,
    "custom-call": _replicated_rule,
    "opt-barrier": _replicated_rule,
})
