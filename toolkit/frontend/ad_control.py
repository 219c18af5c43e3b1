"""Differentiation of structured control flow: ``while``, ``conditional`` and ``call``.

The rules build their derivative loops and branches with the same front end users call
(``control_flow.while_loop``, ``scan``, branch tracing), running the differentiation engine
on the loop body or branch inside the nested trace.

* ``while``, forward mode: one loop carrying (state, tangents). Which state elements have a
  nonzero tangent is a fixpoint over the body (a tangent entering one element can reach
  another on the next trip).
* ``while``, reverse mode: only with a known trip count (``fori_loop`` with static bounds,
  ``scan``: XLA's ``known_trip_count``). The forward loop stacks the state each trip starts
  from; the backward loop runs the trips in reverse, recomputing each trip's body from its
  stacked state and pulling the cotangent back through it. What a trip produced for the next
  one (the next trip's stacked start, or the final state) is read, not recomputed: a recurrent
  step's tanh output comes from the stack, so the dots computing its input are not repeated
  (2 forward and 3 backward dots a trip for an RNN cell, as backpropagation through time
  written by hand; 2 + 5 before). State that a trip passes through
  unchanged (captured arrays) is not stacked, nor is a buffer the body only writes one window
  of (``scan``'s stacked outputs). A loop whose trip count depends on the data raises, as JAX
  does.
* ``conditional``: the branch that ran is differentiated by a conditional of derivative
  branches, each recomputing its forward branch from the operands (the residuals are the
  operands)."""
from __future__ import annotations

import numpy as np

from ..ir.ops import GroupOp
from ..ir.queries import known_trip_count
from ..ir.shapes import TupleShape
from . import control_flow, lax
from .ad_engine import (
    CONTROL_JVP,
    FORWARD_RULES,
    Body,
    carries_tangent,
    emit_primal,
    inline_body,
    jvp_body,
    tuple_activity,
    vjp_body,
    while_active_elements,
)
from .ad_rules import JVP_RULES, VJP_RULES, NotDifferentiableHere, dense, instantiate
from .tracer import Tracer, current_trace

WHILE_REVERSE_MODE = (
    "reverse-mode differentiation (grad, vjp) of a while loop needs its trip count before it runs. "
    "tk.lax.while_loop and fori_loop with traced bounds do not have one; use tk.lax.scan, or "
    "fori_loop with Python-int bounds (as JAX requires too). Forward mode (tk.jvp) works on any "
    "loop."
)


def _elements(t: Tracer) -> list[Tracer]:
    """The elements of a tuple-shaped tracer."""
    count = len(t.inst.shape.elements)
    return [current_trace().emit("get-tuple-element", (t,), {"index": k}) for k in range(count)]


def _pack(items: list[Tracer]) -> Tracer:
    return current_trace().emit("tuple", tuple(items))


def _results_as_list(out: Tracer, shape) -> list[Tracer]:
    return _elements(out) if isinstance(shape, TupleShape) else [out]


# ---- while -------------------------------------------------------------------------------------
def _while_jvp(trace, inst, args, tangents):
    (state,) = args
    (t_state,) = tangents
    shapes = inst.shape.elements
    body, cond = Body.of(inst.attrs["body"]), Body.of(inst.attrs["condition"])
    nonzero = {k for k, t in enumerate(t_state) if t is not None and carries_tangent(shapes[k])}
    while True:  # the elements a tangent can reach, trip after trip
        grown = nonzero | (
            tuple_activity(body, nonzero) & {k for k, s in enumerate(shapes) if carries_tangent(s)}
        )
        if grown == nonzero:
            break
        nonzero = grown
    order = sorted(nonzero)
    primals = _elements(state)
    init_tangents = [instantiate(t_state[k], primals[k]) for k in order]

    def cond_fun(carry):
        prims, _ = carry
        return inline_body(current_trace(), cond, {0: _pack(prims)})[0]

    def body_fun(carry):
        prims, tans = carry
        t_list = [None] * len(shapes)
        for k, t in zip(order, tans):
            t_list[k] = t
        (out,), (t_out,) = jvp_body(current_trace(), body, {0: _pack(prims)}, {0: t_list})
        new = _elements(out)
        t_out = t_out or [None] * len(shapes)
        return new, [instantiate(t_out[k], new[k]) for k in order]

    prims, tans = control_flow.while_loop(cond_fun, body_fun, (primals, init_tangents),
                                          _trip_count=known_trip_count(inst))
    t_list = [None] * len(shapes)
    for k, t in zip(order, tans):
        t_list[k] = t
    return _pack(list(prims)), t_list


def _while_plan(inst):
    """(elements passed through unchanged, elements only written one window per trip)."""
    body = inst.attrs["body"]
    root = body.root
    (param,) = body.parameters
    reads: dict[int, list] = {}
    for i in body.instructions:
        for o in i.operands:
            reads.setdefault(id(o), []).append(i)
    through, write_only = set(), set()
    for k, o in enumerate(root.operands if root.opcode == "tuple" else ()):
        if o.opcode == "get-tuple-element" and o.operands[0] is param and o.attrs["index"] == k:
            through.add(k)
        elif o.opcode == "dynamic-update-slice":
            base = o.operands[0]
            if (
                base.opcode == "get-tuple-element"
                and base.operands[0] is param
                and base.attrs["index"] == k
                and [id(u) for u in reads.get(id(base), [])] == [id(o)]
                and sum(1 for x in o.operands if x is base) == 1
            ):
                write_only.add(k)
    return through, write_only


def _while_forward(trace, inst, args, active):
    trips = known_trip_count(inst)
    if trips is None:
        raise NotDifferentiableHere(WHILE_REVERSE_MODE)
    (state,) = args
    shapes = inst.shape.elements
    body = Body.of(inst.attrs["body"])
    through, write_only = _while_plan(inst)
    elements = _elements(state)
    carried = [k for k in range(len(shapes)) if k not in through]
    stacked_keys = [k for k in carried if k not in write_only]

    def full_state(values: dict[int, Tracer]) -> Tracer:
        return _pack([values[k] if k in values else elements[k] for k in range(len(shapes))])

    def step(carry, _):
        values = dict(zip(carried, carry))
        (out,) = inline_body(current_trace(), body, {0: full_state(values)})
        new = _elements(out)
        return [new[k] for k in carried], [values[k] for k in stacked_keys]

    final, stacked = control_flow.scan(step, [elements[k] for k in carried], length=trips)
    values = dict(zip(carried, final))
    out = _pack([values.get(k, elements[k]) for k in range(len(shapes))])
    # the state elements that carry a cotangent back: those depending on what is
    # differentiated (scan's xs, or a captured array not differentiated, carry none)
    initial = active[0] if isinstance(active[0], frozenset) else frozenset(range(len(shapes)))
    differentiated = while_active_elements(inst, initial)
    return out, (elements, values, stacked, stacked_keys, trips, differentiated)


def _while_vjp(eqn, ct):
    elements, final, stacked, stacked_keys, trips, differentiated = eqn.residual
    shapes = eqn.inst.shape.elements
    body = Body.of(eqn.inst.attrs["body"])
    floats = sorted(differentiated)

    # each trip's results for the stacked elements are the next trip's starting state (the last
    # trip's, the final state): the backward trip reads them instead of recomputing them
    root = eqn.inst.attrs["body"].root
    produced = {k: root.operands[k] for k in stacked_keys if root.opcode == "tuple"
                and root.operands[k].opcode not in GroupOp.PLUMBING} if trips > 0 else {}
    position = {k: j for j, k in enumerate(stacked_keys)}
    trip_numbers = [lax.iota(current_trace(), np.int64, (trips,), 0)] if produced else []

    def following_state(t: Tracer) -> dict[int, Tracer]:
        """Body instruction id -> its value on trip ``t``: stacked[t + 1], or the final state."""
        trace = current_trace()
        last = lax.lift(trace, trips - 1, np.int64, weak=False)
        zero = lax.lift(trace, 0, np.int64, weak=False)
        following = lax.elementwise(
            "minimum", lax.elementwise("add", t, lax.lift(trace, 1, np.int64, weak=False)), last
        )
        is_last = lax.compare(t, last, "EQ")
        known = {}
        for k, inst in produced.items():
            dims = shapes[k].dims
            piece = lax.dynamic_slice(
                stacked[position[k]], [following] + [zero] * len(dims), (1, *dims)
            )
            choose = lax.broadcast_in_dim(is_last, dims, ())
            known[id(inst)] = lax.select(choose, final[k], lax.reshape(piece, dims))
        return known

    def back_step(cts, scanned):
        stacked_k = scanned[:len(stacked_keys)]
        values = dict(zip(stacked_keys, stacked_k))
        state = [
            values[k] if k in values else final.get(k, elements[k]) for k in range(len(shapes))
        ]
        known = following_state(scanned[len(stacked_keys)]) if produced else None
        _, backward = vjp_body(
            current_trace(),
            body,
            {0: _pack(state)},
            {0},
            wrt_elements={0: differentiated},
            known=known,
        )
        ct_list = [None] * len(shapes)
        for k, c in zip(floats, cts):
            ct_list[k] = c
        grads = backward([ct_list]).get(0) or [None] * len(shapes)
        return [instantiate(grads[k], state[k]) for k in floats], None

    ct = ct if ct is not None else [None] * len(shapes)
    init = [instantiate(ct[k], elements[k]) for k in floats]
    result, _ = control_flow.scan(
        back_step, init, list(stacked) + trip_numbers, length=trips, reverse=True
    )
    out = [None] * len(shapes)
    for k, c in zip(floats, result):
        out[k] = c
    return [out]


# ---- conditional -------------------------------------------------------------------------------
def _branch_computations(inst):
    if "branch_computations" in inst.attrs:
        return list(inst.attrs["branch_computations"]), "branch_computations"
    return [inst.attrs["true_computation"], inst.attrs["false_computation"]], "true_false"


def _emit_conditional(
    trace, selector: Tracer, functions, operands: list[Tracer], form: str
) -> list[Tracer]:
    """A conditional over traced ``functions`` (each taking the flat ``operands`` and returning a
    flat list), chosen by ``selector`` with the original op's semantics; its flat results."""
    comps, tuples, _, _, count, _checks = control_flow._branches(
        trace, functions, operands, "branch"
    )
    attrs = ({"branch_computations": tuple(comps)} if form == "branch_computations"
             else {"true_computation": comps[0], "false_computation": comps[1]})
    result = trace.emit("conditional", [selector] + tuples, attrs)
    return [result] if count == 1 else _elements(result)


def _operand_slices(operands: list[Tracer]):
    """Per branch: its operand tuple's elements, and where they sit in the flat operand list."""
    flat, where = [], []
    for op in operands:
        items = _elements(op)
        where.append(list(range(len(flat), len(flat) + len(items))))
        flat.extend(items)
    return flat, where


def _conditional_jvp(trace, inst, args, tangents):
    selector, *operands = args
    comps, form = _branch_computations(inst)
    flat, where = _operand_slices(operands)
    t_flat = []
    for op, t in zip(operands, tangents[1:]):
        t_flat.extend(t if t is not None else [None] * len(op.inst.shape.elements))
    nonzero_in = [k for k, t in enumerate(t_flat) if t is not None]
    out_shapes = inst.shape.elements if isinstance(inst.shape, TupleShape) else [inst.shape]
    out_active = set()
    for comp, idx in zip(comps, where):
        local = {j for j, k in enumerate(idx) if t_flat[k] is not None}
        out_active |= tuple_activity(Body.of(comp), local)
    out_active = sorted(k for k in out_active if carries_tangent(out_shapes[k]))

    def branch_fn(comp, idx):
        def run(*values):
            prims, tans = list(values[:len(flat)]), list(values[len(flat):])
            t_of = dict(zip(nonzero_in, tans))
            t_local = [t_of.get(k) for k in idx]
            (out,), (t_out,) = jvp_body(
                current_trace(), Body.of(comp), {0: _pack([prims[k] for k in idx])}, {0: t_local}
            )
            outs = _results_as_list(out, comp.root.shape)
            t_out = t_out if isinstance(comp.root.shape, TupleShape) else [t_out]
            t_out = t_out or [None] * len(outs)
            return outs + [instantiate(t_out[k], outs[k]) for k in out_active]
        return run

    results = _emit_conditional(trace, selector, [branch_fn(c, i) for c, i in zip(comps, where)],
                                flat + [t_flat[k] for k in nonzero_in], form)
    outs, t_outs = results[:len(out_shapes)], results[len(out_shapes):]
    t_list = [None] * len(out_shapes)
    for k, t in zip(out_active, t_outs):
        t_list[k] = t
    if isinstance(inst.shape, TupleShape):
        return _pack(outs), t_list
    return outs[0], t_list[0]


def _conditional_forward(trace, inst, args, active):
    return emit_primal(trace, inst, args), None


def _conditional_vjp(eqn, ct):
    selector, *operands = eqn.args
    comps, form = _branch_computations(eqn.inst)
    flat, where = _operand_slices(operands)
    is_tuple = isinstance(eqn.inst.shape, TupleShape)
    out_shapes = eqn.inst.shape.elements if is_tuple else [eqn.inst.shape]
    cts = ct if is_tuple else [ct]
    out_float = [k for k, s in enumerate(out_shapes) if carries_tangent(s)]
    ct_values = [
        dense(cts[k]) if cts[k] is not None else _zero_like_shape(out_shapes[k]) for k in out_float
    ]
    float_in = [k for k, t in enumerate(flat) if t.dtype.kind == "f"]

    def branch_fn(comp, idx):
        def run(*values):
            prims, cots = list(values[:len(flat)]), list(values[len(flat):])
            _, backward = vjp_body(
                current_trace(), Body.of(comp), {0: _pack([prims[k] for k in idx])}, {0}
            )
            ct_list = [None] * len(out_shapes)
            for k, c in zip(out_float, cots):
                ct_list[k] = c
            grads = backward([ct_list if is_tuple else ct_list[0]]).get(0) or [None] * len(idx)
            mine = dict(zip(idx, grads))
            return [instantiate(dense(mine.get(k)), prims[k]) for k in float_in]
        return run

    results = _emit_conditional(
        eqn.out.trace,
        selector,
        [branch_fn(c, i) for c, i in zip(comps, where)],
        flat + ct_values,
        form,
    )
    by_flat = dict(zip(float_in, results))
    return [None] + [[by_flat.get(k) for k in idx] for idx in where]


def _zero_like_shape(shape):
    return lax.full(current_trace(), shape.dims, 0, shape.dtype.numpy)


# ---- call: the callee, differentiated in place ---------------------------------------------------
def _call_jvp(trace, inst, args, tangents):
    (out,), (t,) = jvp_body(
        trace, Body.of(inst.attrs["to_apply"]), dict(enumerate(args)), dict(enumerate(tangents))
    )
    return out, t


def _call_forward(trace, inst, args, active):
    wrt = {k for k, a in enumerate(active) if a}
    (out,), backward = vjp_body(trace, Body.of(inst.attrs["to_apply"]), dict(enumerate(args)), wrt)
    return out, backward


def _call_vjp(eqn, ct):
    grads = eqn.residual([ct])
    return [grads.get(k) for k in range(len(eqn.args))]


CONTROL_JVP.update({"while": _while_jvp, "conditional": _conditional_jvp, "call": _call_jvp})
FORWARD_RULES.update(
    {"while": _while_forward, "conditional": _conditional_forward, "call": _call_forward}
)
JVP_RULES.update({"while": _while_jvp, "conditional": _conditional_jvp, "call": _call_jvp})
VJP_RULES.update({"while": _while_vjp, "conditional": _conditional_vjp, "call": _call_vjp})
