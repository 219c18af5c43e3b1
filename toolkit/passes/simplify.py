"""The algebraic simplifier: a table of named local rewrites (pattern -> replacement),
applied to a fixed point, each application counted.

Floating-point rules stay within what XLA's simplifier does by default: ``x + 0 -> x`` and
``x * 1 -> x`` hold up to the sign of zero; ``x * 0 -> 0`` is integer-only (NaN and inf);
division by a power of two becomes an exact multiplication."""
from __future__ import annotations

import math
from collections import Counter
from typing import Callable

import numpy as np

from ..ir.builder import ComputationBuilder
from ..ir.nodes import Instruction, Module
from ..ir.ops import GroupOp, is_elementwise
from ..ir.queries import reads_update_window
from ..ir.shapes import Shape
from .dot_canonical import RULE_TRANSPOSE, fold_transpose
from .patterns import (is_constant_value, is_identity_dims, same_array_type,
                       scalar_constant)
from .rewriter import replace_entry, rewrite_computation
from .simplify_reductions import REDUCTION_RULES

Rule = Callable[[Instruction, list[Instruction], ComputationBuilder], "Instruction | None"]
RULES: dict[str, tuple[str, Rule]] = {}  # name -> (opcode or '*', rule)


def rule(name: str, opcode: str = "*"):
    def deco(fn: Rule) -> Rule:
        RULES[name] = (opcode, fn)
        return fn
    return deco


def _other_if(ops, value, inst):
    a, b = ops
    if is_constant_value(b, value) and same_array_type(a, inst):
        return a
    if is_constant_value(a, value) and same_array_type(b, inst):
        return b
    return None


@rule("add(x, -0.0 or integer 0) -> x", "add")
def _add_zero(inst, ops, b):
    t = inst.shape.dtype
    return _other_if(ops, -0.0 if t.is_float else complex(-0.0, -0.0) if t.is_complex else 0, inst)


@rule("subtract(x, 0) -> x", "subtract")
def _sub_zero(inst, ops, b):
    return ops[0] if is_constant_value(ops[1], 0) else None


@rule("multiply(x, 1) -> x", "multiply")
def _mul_one(inst, ops, b):
    if inst.shape.dtype.is_complex:  # (x + yi) * (1 + 0i) computes y * 0: NaN for an infinite y
        return None
    return _other_if(ops, 1, inst)


@rule("divide(x, 1) -> x", "divide")
def _div_one(inst, ops, b):
    if inst.shape.dtype.is_complex:  # Smith's division computes y * 0 too
        return None
    return ops[0] if is_constant_value(ops[1], 1) else None


@rule("integer multiply(x, 0) -> 0", "multiply")
def _mul_zero(inst, ops, b):
    if not inst.shape.dtype.is_integer or not any(is_constant_value(o, 0) for o in ops):
        return None
    zero = b.constant(np.zeros((), inst.shape.dtype.numpy), inst.metadata)
    return b.add("broadcast", (zero,), {"dimensions": ()}, inst.shape, inst.metadata)


MAX_POWER_MULTIPLIES = 8  # square-and-multiply steps for power(x, n): |n| < 2^4 at most


@rule("power(x, integer n) -> multiplies (square and multiply; 1/x^n for n < 0)", "power")
def _integer_power(inst, ops, b):
    """As XLA's simplifier: a float power with a constant integer-valued exponent is a few
    multiplies instead of a pow per element. Signs of zero, inf and NaN come out as pow's; the
    value may differ from pow's in the last bit (two roundings for n = 3)."""
    c = scalar_constant(ops[1])
    if (
        not inst.shape.dtype.is_float
        or c is None
        or not np.isfinite(c)
        or float(c) != int(c)
        or c in (0, 1, 2)
    ):
        return None
    n = int(c)
    if abs(n) >= 16:
        return None
    x, md = ops[0], inst.metadata
    result, base, k, steps = None, x, abs(n), 0
    while k:
        if k & 1:
            result = (
                base
                if result is None
                else b.add("multiply", (result, base), shape=inst.shape, metadata=md)
            )
            steps += 1
        k >>= 1
        if k:
            base = b.add("multiply", (base, base), shape=inst.shape, metadata=md)
            steps += 1
    if steps > MAX_POWER_MULTIPLIES:
        return None
    if n < 0:
        one = b.constant(np.asarray(1.0, inst.shape.dtype.numpy), md)
        ones = b.add("broadcast", (one,), {"dimensions": ()}, inst.shape, md)
        result = b.add("divide", (ones, result), shape=inst.shape, metadata=md)
    return result


@rule("divide(x, 2^k) -> multiply(x, 2^-k)", "divide")
def _div_pow2(inst, ops, b):
    c = scalar_constant(ops[1])
    if not inst.shape.dtype.is_float or c is None or c == 0 or not np.isfinite(c):
        return None
    mantissa, _ = math.frexp(abs(float(c)))
    if mantissa != 0.5:
        return None
    recip = b.constant(np.asarray(1.0 / float(c), inst.shape.dtype.numpy), inst.metadata)
    bcast = b.add("broadcast", (recip,), {"dimensions": ()}, inst.shape, inst.metadata)
    return b.add("multiply", (ops[0], bcast), metadata=inst.metadata)


@rule("power(x, 1) -> x", "power")
def _pow_one(inst, ops, b):
    return ops[0] if is_constant_value(ops[1], 1) else None


@rule("power(x, 2) -> multiply(x, x)", "power")
def _pow_two(inst, ops, b):
    if not is_constant_value(ops[1], 2):
        return None
    return b.add("multiply", (ops[0], ops[0]), metadata=inst.metadata)


def _scaled_by_scalar(inst: Instruction):
    """(x, scalar) when ``inst`` is ``multiply(x, broadcast(scalar))`` (either order), else None."""
    if inst.opcode != "multiply":
        return None
    for k in (0, 1):
        s, x = inst.operands[k], inst.operands[1 - k]
        if (
            s.opcode == "broadcast"
            and s.operands[0].shape.rank == 0
            and not s.attrs.get("dimensions")
        ):
            return x, s.operands[0]
    return None


@rule("dot(s*A, x) -> s*dot(A, x) (when the dot's result is smaller)", "dot")
def _scalar_out_of_dot(inst, ops, b):
    """As XLA's simplifier: scaling the (smaller) product instead of a whole operand saves a
    pass over the operand (``alpha * A @ x``). The value may differ in the last bit (rounding
    order), as reassociation does."""
    if not inst.shape.dtype.is_float:
        return None
    for k in (0, 1):
        found = _scaled_by_scalar(ops[k])
        if (
            found is None
            or found[0].shape.size <= inst.shape.size
            or found[1].shape.dtype != inst.shape.dtype
        ):
            continue
        x, scalar = found
        operands = (x, ops[1]) if k == 0 else (ops[0], x)
        product = b.add("dot", operands, dict(inst.attrs), inst.shape, inst.metadata)
        scale = b.add("broadcast", (scalar,), {"dimensions": ()}, inst.shape, inst.metadata)
        return b.add("multiply", (product, scale), shape=inst.shape, metadata=inst.metadata)
    return None


@rule(RULE_TRANSPOSE, "dot")
def _fold_transpose_into_dot(inst, ops, b):
    """As XLA's TransposeFolding: a dot reads its operands through BLAS's transpose flags and
    strides, so a transpose feeding it need not be written out (``c.T @ c``: NumPy passes the
    transposed view to BLAS too). Valid when the operand's free dimensions keep their order (the
    dot lays them out in the output in operand order); made where the dot then reads the
    transpose's operand in place (dot_canonical.fold_transpose: the canonicaliser's rule, for
    transposes this pass exposes)."""
    a = inst.attrs
    for k, side in ((0, "lhs"), (1, "rhs")):
        if ops[k].opcode != "transpose":
            continue
        folded = fold_transpose(side, ops[k], a.get(f"{side}_batch_dims", ()),
                                a.get(f"{side}_contracting_dims", ()))
        if folded[0] is None:
            continue
        source, batch, contracting = folded
        attrs = dict(a)
        attrs[f"{side}_batch_dims"], attrs[f"{side}_contracting_dims"] = batch, contracting
        operands = (source, ops[1]) if k == 0 else (ops[0], source)
        return b.add("dot", operands, attrs, inst.shape, inst.metadata)
    return None


def _dot_operand_broadcast(x: Instruction, batch, contracting, out_positions, out_shape, md, b):
    """``x`` (a dot operand) laid out as its part of the dot's output: batch dims, then its free
    dims, the size-1 contracting dims dropped, broadcast along the other operand's free dims."""
    free = [d for d in range(x.shape.rank) if d not in batch and d not in contracting]
    perm = list(batch) + free + list(contracting)
    if perm != list(range(x.shape.rank)):
        x = b.add("transpose", (x,), {"dimensions": tuple(perm)}, metadata=md)
    kept = Shape(x.shape.dtype, tuple(x.shape.dims[k] for k in range(len(batch) + len(free))))
    if kept.dims != x.shape.dims:
        x = b.add("reshape", (x,), shape=kept, metadata=md)
    return b.add("broadcast", (x,), {"dimensions": tuple(out_positions)}, out_shape, md)


@rule("dot contracting only size-1 dimensions (an outer product) -> multiply", "dot")
def _outer_product_dot(inst, ops, b):
    """As XLA's simplifier: a dot whose contracting dimensions all have size 1 (``x[:, None] @
    y[None, :]``, or the per-example weight gradient ``outer(x, delta)`` of vmap(grad)) is an
    elementwise multiply, which fuses with its neighbours instead of calling BLAS for k = 1.
    The sum BLAS and NumPy compute starts from +0.0, so a product of -0.0 comes out +0.0: the
    rewrite adds +0.0 to keep that sign of zero."""
    a = inst.attrs
    lhs, rhs = ops
    t = inst.shape.dtype
    if not isinstance(inst.shape, Shape) or not (t.is_float or t.is_integer) or t.is_bool \
            or lhs.shape.dtype != t or rhs.shape.dtype != t:
        return None
    lb, lc = list(a.get("lhs_batch_dims", ())), list(a.get("lhs_contracting_dims", ()))
    rb, rc = list(a.get("rhs_batch_dims", ())), list(a.get("rhs_contracting_dims", ()))
    if any(lhs.shape.dims[d] != 1 for d in lc) or any(rhs.shape.dims[d] != 1 for d in rc):
        return None
    md = inst.metadata
    n_batch = len(lb)
    n_lhs_free = lhs.shape.rank - len(lb) - len(lc)
    n_rhs_free = rhs.shape.rank - len(rb) - len(rc)
    left = _dot_operand_broadcast(lhs, lb, lc, range(n_batch + n_lhs_free), inst.shape, md, b)
    right_positions = list(range(n_batch)) + list(
        range(n_batch + n_lhs_free, n_batch + n_lhs_free + n_rhs_free)
    )
    right = _dot_operand_broadcast(rhs, rb, rc, right_positions, inst.shape, md, b)
    product = b.add("multiply", (left, right), shape=inst.shape, metadata=md)
    if not t.is_float:
        return product
    zero = b.constant(np.zeros((), t.numpy), md)
    zeros = b.add("broadcast", (zero,), {"dimensions": ()}, inst.shape, md)
    return b.add("add", (product, zeros), shape=inst.shape, metadata=md)


@rule("dot contracting an empty dimension -> zeros", "dot")
def _empty_contraction(inst, ops, b):
    """As XLA's simplifier: a dot that contracts a dimension of size 0 (``A[i, :0] @ A[:0, j]``,
    the first trip of a triangular nest) adds no products; NumPy's result is zeros (+0.0, 0,
    False) of its type. A broadcast constant, not a BLAS call, and no step a native loop body
    has to refuse."""
    lhs = ops[0]
    if not isinstance(inst.shape, Shape) or not any(
            lhs.shape.dims[d] == 0 for d in inst.attrs.get("lhs_contracting_dims", ())):
        return None
    zero = b.constant(np.zeros((), inst.shape.dtype.numpy), inst.metadata)
    return b.add("broadcast", (zero,), {"dimensions": ()}, inst.shape, inst.metadata)


# or dynamic-slice
@rule("dynamic-update-slice(x, slice(x) at the same window) -> x", "dynamic-update-slice")
def _rewrite_own_window(inst, ops, b):
    """As XLA's simplifier (DUS(x, DS(x, i), i) -> x): writing a window of ``x`` back where it
    was read changes nothing (what a write through a view leaves behind: ``b = a[1:]; b += 1``)."""
    x, update = ops[0], ops[1]
    if not update.operands or update.operands[0] is not x or not same_array_type(x, inst):
        return None
    return x if reads_update_window(update, inst) else None  # (a slice or dynamic-slice only)


@rule("negate(negate(x)) -> x", "negate")
def _double_negate(inst, ops, b):
    return ops[0].operands[0] if ops[0].opcode == "negate" else None


@rule("not(not(x)) -> x", "not")
def _double_not(inst, ops, b):
    return ops[0].operands[0] if ops[0].opcode == "not" else None


@rule("no-op reshape -> x", "reshape")
def _noop_reshape(inst, ops, b):
    return ops[0] if same_array_type(ops[0], inst) else None


@rule("reshape(reshape(x)) -> reshape(x)", "reshape")
def _reshape_reshape(inst, ops, b):
    if ops[0].opcode not in GroupOp.RESHAPES:
        return None
    return b.add("reshape", (ops[0].operands[0],), shape=inst.shape, metadata=inst.metadata)


@rule("no-op transpose -> x", "transpose")
def _noop_transpose(inst, ops, b):
    return ops[0] if is_identity_dims(inst.attrs["dimensions"], inst.shape.rank) else None


@rule("transpose(transpose(x)) -> transpose(x)", "transpose")
def _transpose_transpose(inst, ops, b):
    if ops[0].opcode != "transpose":
        return None
    inner, outer = ops[0].attrs["dimensions"], inst.attrs["dimensions"]
    composed = tuple(inner[p] for p in outer)
    source = ops[0].operands[0]
    if is_identity_dims(composed, len(composed)):
        return source
    return b.add("transpose", (source,), {"dimensions": composed}, metadata=inst.metadata)


@rule("no-op convert -> x", "convert")
def _noop_convert(inst, ops, b):
    return ops[0] if same_array_type(ops[0], inst) else None


@rule("no-op slice -> x", "slice")
def _noop_slice(inst, ops, b):
    return ops[0] if same_array_type(ops[0], inst) else None


@rule("slice(slice(x)) -> slice(x)", "slice")
def _slice_slice(inst, ops, b):
    """As XLA's simplifier: a window of a window is one window of the source (``qkv[:, d:2*d]``
    then ``k[:, s]`` per head), so a dot can read it in place and no copy of the first window is
    made. Element j of the outer slice is element ``start + j*stride`` of the inner one, which is
    element ``a + (start + j*stride) * p`` of the source."""
    if ops[0].opcode != "slice":
        return None
    composed = []
    for (a, _, p), (start, _, stride), size in zip(ops[0].attrs["slice"], inst.attrs["slice"],
                                                  inst.shape.dims):
        if not size:  # (an empty window's start may lie past the source's end: any empty one)
            composed.append((0, 0, 1))
            continue
        first = a + start * p
        step = p * stride
        composed.append((first, first + (size - 1) * step + 1, step))
    return b.add("slice", (ops[0].operands[0],), {"slice": tuple(composed)}, inst.shape,
                 inst.metadata)


@rule("reverse(slice(x)) -> slice(reverse(x))", "reverse")
def _reverse_of_slice(inst, ops, b):
    """A reversed window is a window of the reversed source (``np.flip(r[:k])``): element t
    of the flipped window ``x[a + (m-1-t)p]`` is element ``n-1-a-(m-1)p + tp`` of
    ``reverse(x)``. A loop's flipped windows then all reverse the same whole array, and only
    the window's start varies from trip to trip, as it does for windows read forwards: the
    kernels take it as an operand (offset-operands) and share their code. Fused, the reverse
    reads the same elements as before."""
    window = ops[0]
    if window.opcode != "slice" or 0 in inst.shape.dims:
        return None
    flipped = set(inst.attrs["dimensions"])
    moved = []
    for d, ((a, limit, p), m, n) in enumerate(zip(window.attrs["slice"], inst.shape.dims,
                                                  window.operands[0].shape.dims)):
        if d in flipped:
            first = n - 1 - a - (m - 1) * p
            moved.append((first, first + (m - 1) * p + 1, p))
        else:
            moved.append((a, limit, p))
    source = window.operands[0]
    reversed_source = b.add("reverse", (source,), inst.attrs, source.shape, inst.metadata)
    return b.add("slice", (reversed_source,), {"slice": tuple(moved)}, inst.shape, inst.metadata)


@rule("slice(pad(x)) inside x -> slice(x)", "slice")
def _slice_of_padding(inst, ops, b):
    """A window of a padded array that reads none of the padding is a window of the array
    itself (np.convolve's 'valid' window of its zero-padded operand): the padded copy is
    never made."""
    pad = ops[0]
    if pad.opcode != "pad" or any(interior for _, _, interior in pad.attrs["padding"]):
        return None
    x = pad.operands[0]
    inner = []
    for (start, _, stride), size, (low, _, _), n in zip(
            inst.attrs["slice"], inst.shape.dims, pad.attrs["padding"], x.shape.dims):
        first = start - low
        last = first + (size - 1) * stride if size else first
        if (size and (first < 0 or last >= n)) or first > n:
            return None
        inner.append((first, last + 1 if size else first, stride))
    if any(first < 0 for first, _, _ in inner):
        return None
    return b.add("slice", (x,), {"slice": tuple(inner)}, inst.shape, inst.metadata)


@rule("no-op broadcast -> x", "broadcast")
def _noop_broadcast(inst, ops, b):
    if same_array_type(ops[0], inst) and is_identity_dims(
        inst.attrs["dimensions"], inst.shape.rank
    ):
        return ops[0]
    return None


@rule("broadcast(broadcast(x)) -> broadcast(x)", "broadcast")
def _broadcast_broadcast(inst, ops, b):
    if ops[0].opcode != "broadcast":
        return None
    outer = inst.attrs["dimensions"]
    composed = tuple(outer[d] for d in ops[0].attrs["dimensions"])
    return b.add(
        "broadcast", (ops[0].operands[0],), {"dimensions": composed}, inst.shape, inst.metadata
    )


@rule("no-op copy -> x", "copy")
def _noop_copy(inst, ops, b):
    return ops[0]


@rule("get-tuple-element(tuple(...)) -> element", "get-tuple-element")
def _gte_of_tuple(inst, ops, b):
    return ops[0].operands[inst.attrs["index"]] if ops[0].opcode == "tuple" else None


@rule("concatenate(x) -> x", "concatenate")
def _single_concat(inst, ops, b):
    return ops[0] if len(ops) == 1 else None


@rule("select(constant predicate) -> branch", "select")
def _const_select(inst, ops, b):
    p = scalar_constant(ops[0])
    if p is None:
        return None
    chosen = ops[1] if bool(p) else ops[2]
    return chosen if same_array_type(chosen, inst) else None


_FLIPPED = {"LT": "GT", "LE": "GE", "GT": "LT", "GE": "LE", "EQ": "EQ", "NE": "NE"}


def _decided(direction: str, lo, hi, c) -> bool | None:
    """``v <direction> c`` for every v in [lo, hi], when the bounds decide it, else None."""
    always = {"LT": hi < c, "LE": hi <= c, "GT": lo > c, "GE": lo >= c, "EQ": False,
              "NE": c < lo or c > hi}[direction]
    never = {"LT": lo >= c, "LE": lo > c, "GT": hi <= c, "GE": hi < c,
             "EQ": c < lo or c > hi, "NE": False}[direction]
    return True if always else False if never else None


@rule("integer compare(clamp(lo, x, hi), c) decided by the bounds -> constant", "compare")
def _compare_clamped(inst, ops, b):
    """An index clamped into range and then checked against the range (a bounds check after
    mode='clip', a binary search's probes) is known: the check folds away, and the kernels it
    split apart fuse."""
    direction = inst.attrs["direction"]
    clamped, other = ops
    if clamped.opcode != "clamp":
        clamped, other, direction = other, clamped, _FLIPPED[direction]
    if clamped.opcode != "clamp" or not clamped.shape.dtype.is_integer:
        return None
    lo, hi, c = (scalar_constant(x) for x in (clamped.operands[0], clamped.operands[2], other))
    if lo is None or hi is None or c is None or lo > hi:  # (XLA's clamp(5, x, 2) is 2)
        return None
    known = _decided(direction, int(lo), int(hi), int(c))
    if known is None:
        return None
    value = b.constant(np.array(known), inst.metadata)
    return b.add("broadcast", (value,), {"dimensions": ()}, inst.shape, inst.metadata)


def _sinkable(op: Instruction) -> tuple | None:
    if op.opcode == "reshape":
        return ("reshape", op.operands[0].shape.dims)
    if op.opcode == "transpose":
        return ("transpose", op.attrs["dimensions"])
    return None


@rule("elementwise(reshape(x), reshape(y)) -> reshape(elementwise(x, y))", "*")
def _sink_reshapes(inst, ops, b):
    """Move an equal reshape/transpose of every operand past an elementwise op, so fusible
    chains are not broken by data movement (XLA's ReshapeMover)."""
    if not is_elementwise(inst.opcode):
        return None
    movers = [op for op in ops if scalar_constant(op) is None]
    if len(movers) < 2:
        return None
    kinds = {_sinkable(op) for op in movers}
    if len(kinds) != 1 or None in kinds:
        return None
    kind, how = kinds.pop()
    source = movers[0].operands[0].shape
    new_ops = []
    for op in ops:
        if scalar_constant(op) is None:
            new_ops.append(op.operands[0])
        else:  # a scalar broadcast: rebroadcast it to the source shape
            value = op if op.opcode == "constant" else op.operands[0]
            new_ops.append(b.add("broadcast", (value,), {"dimensions": ()},
                                 Shape(op.shape.dtype, source.dims), op.metadata))
    inner_shape = Shape(inst.shape.dtype, source.dims)
    attrs = dict(inst.attrs)
    inner = b.add(inst.opcode, new_ops, attrs, inner_shape, inst.metadata)
    if kind == "reshape":
        return b.add("reshape", (inner,), shape=inst.shape, metadata=inst.metadata)
    return b.add("transpose", (inner,), {"dimensions": how}, metadata=inst.metadata)


def _rebroadcast_dims(op: Instruction, perm: tuple) -> tuple | None:
    """The dimensions of ``op`` (a broadcast into the transposed shape) as a broadcast into
    the untransposed one, if they stay in increasing order (else a transpose of its operand
    would be needed: no gain)."""
    dims = tuple(perm[d] for d in op.attrs["dimensions"])
    return dims if all(a < b for a, b in zip(dims, dims[1:])) else None


@rule("elementwise(transpose(x), broadcast(v)) -> transpose(elementwise(x, broadcast(v)))", "*")
def _sink_transpose_past_broadcasts(inst, ops, b):
    """XLA's ReshapeMover for a transposed array combined with broadcasts (``x.T - m[:, None]``,
    the centring in np.cov): a broadcast is rearranged for free (its dimensions permuted), so
    the elementwise op runs in x's own memory order and the transpose moves to its result,
    where a dot folds it into BLAS's transpose flag, a reduction reads through it, or a
    further elementwise op carries it on. Without this the op read x a column at a time."""
    if not is_elementwise(inst.opcode):
        return None
    perms = {op.attrs["dimensions"] for op in ops if op.opcode == "transpose"}
    if len(perms) != 1:
        return None
    perm = perms.pop()
    source = next(op for op in ops if op.opcode == "transpose").operands[0].shape
    new_ops = []
    for op in ops:
        if op.opcode == "transpose":
            new_ops.append(op.operands[0])
        elif op.opcode == "broadcast":
            dims = _rebroadcast_dims(op, perm)
            if dims is None:
                return None
            new_ops.append(b.add("broadcast", (op.operands[0],), {"dimensions": dims},
                                 Shape(op.shape.dtype, source.dims), op.metadata))
        else:  # (a scalar constant is a 0-d operand of a broadcast, never a direct one)
            return None
    inner = b.add(inst.opcode, new_ops, dict(inst.attrs), Shape(inst.shape.dtype, source.dims),
                  inst.metadata)
    return b.add("transpose", (inner,), {"dimensions": perm}, metadata=inst.metadata)


for _name, _fn in REDUCTION_RULES.items():  # (in their order: the first that applies wins)
    rule(_name, "reduce")(_fn)

_BY_OPCODE: dict[str, list[tuple[str, Rule]]] = {}
for _name, (_op, _fn) in RULES.items():
    _BY_OPCODE.setdefault(_op, []).append((_name, _fn))


def simplify(module: Module, max_rounds: int = 16) -> tuple[Module, Counter]:
    """Apply the rule table to the entry computation until nothing changes."""
    counts: Counter = Counter()
    entry = module.entry
    for _ in range(max_rounds):
        def visit(inst, ops, builder):
            for name, fn in _BY_OPCODE.get(inst.opcode, []) + _BY_OPCODE.get("*", []):
                new = fn(inst, ops, builder)
                if new is not None and new is not inst:
                    counts[name] += 1
                    return new
            return None

        entry, changed = rewrite_computation(entry, visit)
        if not changed:
            break
    if entry is module.entry:
        return module, counts
    return replace_entry(module, entry), counts
