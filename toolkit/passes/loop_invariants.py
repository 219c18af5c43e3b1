"""Loop-invariant code motion for ``while`` loops (XLA's WhileLoopInvariantCodeMotion).

A loop body that computes something from values the loop never changes (state elements the
body passes through as they came in, and constants) computes it again on every trip. Such an
instruction moves in front of the loop: it is computed once from the loop's initial state and
enters the body as a new state element that the body passes through. Cheap values (constants,
broadcasts, reshapes, slices: what fusion makes inside any kernel for free) stay where they are.
It runs before fusion (the body's calls inlined first), so an invariant ``exp(b)`` that the
body multiplies in moves out before fusion would bury it in the loop's kernel.

One more rule makes a hidden transpose visible first: a matrix product that reads a loop-
invariant matrix transposed (``g @ w.T``, which reverse-mode differentiation of ``h @ w``
produces) becomes a product with ``transpose(w)``, which then moves out of the loop. BLAS
packs a transposed right-hand matrix far more slowly than a plain one when the product has few
rows (OpenBLAS, 32x128 @ (128x128).T: 28.8 us, with the transpose made once: 11.9 us); the
transpose is made once per call instead of once per trip. Products of at most 64**3
multiply-adds are left alone: there BLAS uses small-matrix kernels, whose rounding differs
between the two layouts, for no time to win."""
from __future__ import annotations

import dataclasses
import math
from collections import Counter
from types import MappingProxyType

from ..ir.builder import ComputationBuilder, NameUniquer
from ..ir.nodes import Computation, Instruction, Module
from ..ir.ops import GroupOp
from ..ir.shapes import Shape, TupleShape
from .called import callees_first
from .inline import inline_calls
from .rewriter import replace_entry, rewrite_computation
from .simplify import simplify

SMALL_PRODUCT = 64 ** 3


def hoist_loop_invariants(module: Module) -> tuple[Module, Counter]:
    counts: Counter = Counter()
    entry = module.entry
    users: dict[int, list[Instruction]] = {}
    for inst in entry.instructions:
        for o in inst.operands:
            users.setdefault(id(o), []).append(inst)

    def visit(inst: Instruction, ops: list[Instruction], b: ComputationBuilder):
        if inst.opcode != "while":
            return None
        moved = _hoist(inst, ops[0], b, counts)
        if moved is None:
            return None
        if inst is not entry.root and all(
            u.opcode == "get-tuple-element" for u in users.get(id(inst), [])
        ):
            return moved  # its users read elements by index, which stay where they were
        elements = inst.shape.elements
        return b.add("tuple", [b.add("get-tuple-element", [moved], {"index": i}, shape=s)
                               for i, s in enumerate(elements)])

    new_entry, changed = rewrite_computation(entry, visit)
    return (replace_entry(module, new_entry) if changed else module), counts


def _pass_through(body: Computation) -> set[int]:
    """The state indices the body returns as it read them: elements the loop never changes."""
    (state,) = body.parameters
    root = body.root
    if root.opcode != "tuple" or not isinstance(state.shape, TupleShape):
        return set()
    return {
        i
        for i, out in enumerate(root.operands)
        if out.opcode == "get-tuple-element"
        and out.operands[0] is state
        and out.attrs["index"] == i
    }


def _inlined(body: Computation) -> Computation:
    """``body`` with its calls inlined (a traced loop body calls the functions it traced) and
    simplified (reads of a tuple the body builds become the values themselves), so that the
    invariant work in it can be told apart."""
    module, _ = inline_calls(Module(body.name, tuple(callees_first(body)) + (body,), body))
    module, _ = simplify(module)
    return module.entry


def _folds_into(value: Instruction, user: Instruction) -> bool:
    """A transpose that a small product reads: the simplifier folds it into the product's
    dimensions (BLAS's transpose flag), where moving it out would change the BLAS layout."""
    return (
        value.opcode == "transpose"
        and user.opcode == "dot"
        and _product_size(user) <= SMALL_PRODUCT
    )


def _product_size(dot: Instruction) -> int:
    """Multiply-adds: every output element sums over the contracted dimensions."""
    lhs = dot.operands[0]
    return dot.shape.size * math.prod(
        lhs.shape.dims[d] for d in dot.attrs.get("lhs_contracting_dims", ())
    )


def _transposed_invariant_rhs(inst: Instruction, invariant: set[int]) -> bool:
    """A plain matrix product ``x @ w.T`` with ``w`` loop-invariant and enough work."""
    if inst.opcode != "dot" or id(inst.operands[1]) not in invariant:
        return False
    a = inst.attrs
    lhs, rhs = inst.operands
    if (
        lhs.shape.rank != 2
        or rhs.shape.rank != 2
        or a.get("lhs_batch_dims")
        or a.get("rhs_batch_dims")
    ):
        return False
    if (
        tuple(a.get("rhs_contracting_dims", ())) != (1,)
        or len(a.get("lhs_contracting_dims", ())) != 1
    ):
        return False
    return _product_size(inst) > SMALL_PRODUCT


def _hoist(
    loop: Instruction, init: Instruction, outer: ComputationBuilder, counts: Counter
) -> Instruction | None:
    """The loop with its invariant work moved in front of it (built into ``outer``), or None."""
    body = _inlined(loop.attrs["body"])  # (the body's own pipeline has not run yet)
    kept = _pass_through(body)
    if not kept:
        return None
    (state,) = body.parameters
    invariant: set[int] = set()
    for inst in body.instructions:
        if inst.opcode == "get-tuple-element" and inst.operands[0] is state:
            if inst.attrs["index"] in kept:  # any read of an element the loop never changes
                invariant.add(id(inst))
        elif inst.opcode == "constant" or (
            inst.opcode not in GroupOp.PINNED
            and inst.opcode != "parameter"
            and inst.operands
            and all(id(o) in invariant for o in inst.operands)
            and isinstance(inst.shape, Shape)
        ):
            invariant.add(id(inst))
    # what moves: invariant work that the loop's varying work reads, directly or through cheap
    # invariant values that stay (a broadcast of it); its own invariant operands move along
    hoisted: list[Instruction] = []
    transposed: list[Instruction] = []  # dots whose invariant right-hand side moves out transposed
    seen: set[int] = set()
    for inst in body.instructions:
        if id(inst) in invariant:
            continue
        reads = list(inst.operands)
        if _transposed_invariant_rhs(inst, invariant):
            transposed.append(inst)
            reads = reads[:1]  # the right-hand side is read transposed, from its own state element
        stack = [o for o in reads if id(o) in invariant and not _folds_into(o, inst)]
        while stack:
            o = stack.pop()
            if id(o) in seen:
                continue
            seen.add(id(o))
            if o.opcode in GroupOp.CHEAP:
                stack.extend(x for x in o.operands if id(x) in invariant)
            else:
                hoisted.append(o)
    if not hoisted and not transposed:
        return None

    # outside: each moved value computed from the loop's initial state
    outside: dict[int, Instruction] = {}

    def initial(i: int) -> Instruction:
        if init.opcode == "tuple":
            return init.operands[i]
        return outer.add("get-tuple-element", [init], {"index": i}, shape=state.shape.elements[i])

    def build_outside(value: Instruction) -> Instruction:
        stack = [value]
        while stack:  # iterative: operands first
            inst = stack[-1]
            if id(inst) in outside:
                stack.pop()
                continue
            if inst.opcode == "get-tuple-element" and inst.operands[0] is state:
                outside[id(inst)] = initial(inst.attrs["index"])
                stack.pop()
                continue
            missing = [o for o in inst.operands if id(o) not in outside]
            if missing:
                stack.extend(missing)
                continue
            stack.pop()
            outside[id(inst)] = outer.adopt(
                dataclasses.replace(
                    inst,
                    name=outer.uniquer.fresh(inst.name),
                    operands=tuple(outside[id(o)] for o in inst.operands),
                )
            )
        return outside[id(value)]

    n = len(state.shape.elements)
    extra: list[Instruction] = [build_outside(v) for v in hoisted]
    for v in hoisted:
        counts[f"hoisted {v.opcode}"] += 1
    transpose_of: dict[int, int] = {}  # invariant matrix -> its new state index
    for dot in transposed:
        w = dot.operands[1]
        if id(w) not in transpose_of:
            transpose_of[id(w)] = n + len(extra)
            extra.append(outer.add("transpose", [build_outside(w)], {"dimensions": (1, 0)},
                                   metadata=dot.metadata))
        counts["hoisted transpose of a dot's right-hand side"] += 1
    new_shape = TupleShape(tuple(state.shape.elements) + tuple(e.shape for e in extra))

    index_of = {id(v): n + k for k, v in enumerate(hoisted)}
    new_body = _rebuild_body(body, new_shape, index_of, transposed, transpose_of)
    new_cond = _with_state_shape(loop.attrs["condition"], new_shape)
    new_init = outer.add("tuple", [initial(i) for i in range(n)] + extra)
    attrs = dict(loop.attrs)
    attrs.update(body=new_body, condition=new_cond)
    return outer.adopt(dataclasses.replace(loop, shape=new_shape, operands=(new_init,),
                                           attrs=MappingProxyType(attrs)))


def _rebuild_body(
    body: Computation, shape: TupleShape, index_of: dict[int, int], transposed, transpose_of
) -> Computation:
    (state,) = body.parameters
    b = ComputationBuilder(
        body.name, NameUniquer.from_names(i.name for i in body.instructions if i is not state)
    )
    new_state = b.parameter(0, shape, state.name, metadata=state.metadata, exact_name=True)
    reads = {k: b.add("get-tuple-element", [new_state], {"index": k}, shape=shape.elements[k])
             for k in sorted(set(index_of.values()) | set(transpose_of.values()))}
    mapping: dict[int, Instruction] = {id(state): new_state}
    dots = {id(d) for d in transposed}
    for inst in body.instructions:
        if inst is state:
            continue
        if id(inst) in index_of:
            mapping[id(inst)] = reads[index_of[id(inst)]]
            continue
        ops = [mapping[id(o)] for o in inst.operands]
        if id(inst) in dots:
            ops[1] = reads[transpose_of[id(inst.operands[1])]]
            attrs = dict(inst.attrs)
            attrs["rhs_contracting_dims"] = (0,)
            mapping[id(inst)] = b.adopt(
                dataclasses.replace(inst, operands=tuple(ops), attrs=MappingProxyType(attrs))
            )
            continue
        mapping[id(inst)] = b.adopt(dataclasses.replace(inst, operands=tuple(ops)))
    root = mapping[id(body.root)]
    passed = [reads[k] for k in range(len(state.shape.elements), len(shape.elements))]
    root = b.add("tuple", list(root.operands) + passed, metadata=root.metadata)
    return b.build(root)


def _with_state_shape(cond: Computation, shape: TupleShape) -> Computation:
    (state,) = cond.parameters
    b = ComputationBuilder(
        cond.name, NameUniquer.from_names(i.name for i in cond.instructions if i is not state)
    )
    mapping = {
        id(state): b.parameter(0, shape, state.name, metadata=state.metadata, exact_name=True)
    }
    for inst in cond.instructions:
        if inst is not state:
            mapping[id(inst)] = b.adopt(
                dataclasses.replace(inst, operands=tuple(mapping[id(o)] for o in inst.operands))
            )
    return b.build(mapping[id(cond.root)])
