"""The differentiation engine: it walks a traced computation once, in order, and re-emits it into
the current trace together with its derivative (initial style: computation in, instructions
out, as autodidax's ``jvp_jaxpr`` and ``vjp`` do, with symbolic zeros).

* ``jvp_body``: forward mode. Each instruction with a nonzero tangent on some operand gets its
  tangent from ``JVP_RULES``; the rest are copied as they are.
* ``vjp_body``: reverse mode. The forward walk copies the computation and records the
  instructions that depend on the differentiated parameters (the tape); ``backward`` walks the
  tape in reverse, accumulating cotangents with ``VJP_RULES``. The forward values the backward
  rules read are the residuals; the compiler's fusion decides which are kept in memory.

Derivative instructions carry the forward instruction's source line; their op names say what
they are, as JAX's do: ``jvp(multiply)`` for forward mode, ``transpose(jvp(multiply))`` for the
backward pass. Every walk is a loop over the instruction list: no recursion over program depth."""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..ir.nodes import Computation, Instruction
from ..ir.shapes import TupleShape
from .ad_partials import NotDifferentiable, is_differentiable_dtype
from .ad_rules import (
    JVP_RULES,
    PRECONDITIONS,
    VJP_RULES,
    Eqn,
    NotDifferentiableHere,
    add_tangents,
    dense,
)
from .errors import UnsupportedNumpyError
from .source_info import SourceLocation
from .tracer import Trace, Tracer
from .vma import current as varying_axes, summed_over_missing_axes

# ops whose rules build new computations (loops, branches, calls): their forward-mode rule
# emits the primal too, and reverse mode runs FORWARD_RULES[op] to emit the primal and keep
# what the backward rule needs
CONTROL_JVP: dict[str, Callable] = {}
FORWARD_RULES: dict[str, Callable] = {}


class NotDifferentiableError(UnsupportedNumpyError):
    """An operation on the path from a differentiated input to the output has no derivative."""


@dataclass
class Body:
    """A computation to differentiate: instructions in a topological order, its parameters by
    number, and the instructions it returns."""
    instructions: Sequence[Instruction]
    parameters: dict[int, Instruction]
    results: list[Instruction] = field(default_factory=list)

    @classmethod
    def of(cls, comp: Computation) -> "Body":
        return cls(
            comp.instructions,
            {p.attrs["parameter_number"]: p for p in comp.parameters},
            [comp.root],
        )


def carries_tangent(shape) -> bool:
    if isinstance(shape, TupleShape):
        return any(carries_tangent(e) for e in shape.elements)
    return is_differentiable_dtype(shape.dtype.numpy)


def _where(inst: Instruction) -> str:
    md = inst.metadata
    name = md.op_name.split("/", 1)[-1] if md is not None and md.op_name else inst.opcode
    at = f" at {md.location}" if md is not None and md.location else ""
    return f"'{name}'{at}"


def _refuse(inst: Instruction, reason: str):
    raise NotDifferentiableError(
        f"cannot differentiate {_where(inst)} ({inst.shape.to_text(False)}): {reason}"
    )


def check_differentiable(inst: Instruction, table: dict) -> None:
    rule = table[inst.opcode]
    if isinstance(rule, NotDifferentiable):
        _refuse(inst, rule.reason)
    shapes = inst.shape.leaves() if isinstance(inst.shape, TupleShape) else [inst.shape]
    if any(s.dtype.is_complex for s in shapes):
        _refuse(inst, "complex numbers are not differentiated yet")
    check = PRECONDITIONS.get(inst.opcode)
    reason = check(inst) if check else None
    if reason:
        _refuse(inst, reason)


@contextlib.contextmanager
def attributed(trace: Trace, inst: Instruction, role: str):
    """Name the instructions emitted inside ``role(<forward op>)`` and give them the forward
    instruction's source line (the user's line that the derivative belongs to)."""
    md = inst.metadata
    name = md.op_name.split("/", 1)[-1] if md is not None and md.op_name else inst.opcode
    location = (
        SourceLocation(md.source_file, md.source_line, "")
        if md is not None and md.source_file
        else None
    )
    saved = trace._op_name, trace._location
    trace._op_name, trace._location = role.replace("*", name), location
    try:
        yield
    except NotDifferentiableHere as e:
        _refuse(inst, str(e))
    finally:
        trace._op_name, trace._location = saved


def emit_primal(
    trace: Trace, inst: Instruction, args: Sequence[Tracer], role: str | None = None
) -> Tracer:
    """``inst`` copied into ``trace`` on ``args``: its metadata kept, or with ``role`` its op
    name becomes ``role(<op>)`` (``remat(tanh)``: a forward op recomputed in the backward pass)."""
    if inst.opcode == "constant":
        literal = inst.attrs["literal"]
        return trace.constant(literal, literal.dtype)
    metadata = inst.metadata
    if role is not None:
        with attributed(trace, inst, role):
            metadata = trace.metadata(inst.opcode)
    new = trace.builder.add(
        inst.opcode, [trace.local(a) for a in args], inst.attrs, inst.shape, metadata
    )
    return Tracer(trace, new)


def jvp_body(trace: Trace, body: Body, primals: dict[int, Tracer], tangents: dict[int, Any]):
    """Emit ``body`` on ``primals`` and its tangent for ``tangents`` (None: zero): the results'
    (primal, tangent) lists."""
    env: dict[int, Tracer] = {}
    tan: dict[int, Any] = {}
    for inst in body.instructions:
        if inst.opcode == "parameter":
            number = inst.attrs["parameter_number"]
            env[id(inst)] = primals[number]
            if tangents.get(number) is not None:
                tan[id(inst)] = tangents[number]
            continue
        args = [env[id(o)] for o in inst.operands]
        ts = [tan.get(id(o)) for o in inst.operands]
        if all(t is None for t in ts) or not carries_tangent(inst.shape):
            env[id(inst)] = emit_primal(trace, inst, args)
            continue
        check_differentiable(inst, JVP_RULES)
        if inst.opcode in CONTROL_JVP:
            with attributed(trace, inst, "jvp(*)"):
                out, t = CONTROL_JVP[inst.opcode](trace, inst, args, ts)
        else:
            out = emit_primal(trace, inst, args)
            with attributed(trace, inst, "jvp(*)"):
                t = JVP_RULES[inst.opcode](Eqn(inst, args, out), ts)
        env[id(inst)] = out
        if t is not None:
            tan[id(inst)] = t
    return [env[id(r)] for r in body.results], [tan.get(id(r)) for r in body.results]


def _depends_on_active(
    inst: Instruction, active: set[int], elements: dict[int, frozenset[int]]
) -> bool:
    if inst.opcode == "get-tuple-element":
        (t,) = inst.operands
        return id(t) in active and inst.attrs["index"] in elements.get(
            id(t), (inst.attrs["index"],)
        )
    return any(id(o) in active for o in inst.operands)


def _active_elements(
    inst: Instruction, active: set[int], elements: dict[int, frozenset[int]]
) -> frozenset[int]:
    """The elements of an active tuple-shaped ``inst`` that carry a nonzero tangent."""
    shapes = inst.shape.elements
    if inst.opcode == "tuple":
        return frozenset(
            k for k, o in enumerate(inst.operands) if id(o) in active and carries_tangent(shapes[k])
        )
    if inst.opcode == "while":
        (state,) = inst.operands
        return while_active_elements(inst, elements.get(id(state), frozenset(range(len(shapes)))))
    return frozenset(k for k, e in enumerate(shapes) if carries_tangent(e))


def tuple_activity(body: Body, active_elements: set[int] | frozenset[int]) -> set[int]:
    """Which result elements of ``body`` (one tuple parameter) depend on the parameter's
    ``active_elements``: a walk over the body without emitting anything."""
    (param,) = body.parameters.values()
    active: set[int] = set()
    for inst in body.instructions:
        if inst.opcode == "get-tuple-element" and inst.operands[0] is param:
            if inst.attrs["index"] in active_elements and carries_tangent(inst.shape):
                active.add(id(inst))
        elif (
            inst.opcode != "parameter"
            and carries_tangent(inst.shape)
            and any(id(o) in active for o in inst.operands)
        ):
            active.add(id(inst))
    root = body.results[0]
    if root.opcode == "tuple":
        return {k for k, o in enumerate(root.operands) if id(o) in active}
    return {0} if id(root) in active else set()


def while_active_elements(inst: Instruction, initial: frozenset[int]) -> frozenset[int]:
    """The state elements of a ``while`` with a nonzero tangent: those ``initial`` has, and
    those the body makes depend on them, trip after trip (a fixpoint)."""
    body = Body.of(inst.attrs["body"])
    shapes = inst.shape.elements
    current = frozenset(k for k in initial if carries_tangent(shapes[k]))
    while True:
        grown = current | frozenset(tuple_activity(body, current))
        if grown == current:
            return current
        current = grown


def inline_body(trace: Trace, body: Body, primals: dict[int, Tracer]) -> list[Tracer]:
    """``body`` emitted into ``trace`` on ``primals``: its results."""
    return jvp_body(trace, body, primals, {})[0]


def vjp_body(
    trace: Trace,
    body: Body,
    primals: dict[int, Tracer],
    wrt: set[int],
    role: str | None = None,
    wrt_elements: dict[int, frozenset[int]] | None = None,
    known: dict[int, Tracer] | None = None,
):
    """Emit ``body`` on ``primals``: (its results, ``backward``). ``backward(cotangents)``, one
    per result (None: zero), emits the backward pass and returns {parameter number in wrt:
    cotangent or None}. ``role``: how to name the forward instructions (``remat(*)`` when they
    are a recomputation inside a backward pass). ``wrt_elements``: for a tuple parameter in
    ``wrt``, the elements differentiated (default: all that carry tangents).

    Activity is tracked per element of tuple values (a loop state, a branch's operands): an
    element that does not depend on what is differentiated gets no cotangent, so a loop state
    element such as ``scan``'s ``xs``, not differentiated, costs no backward work.

    ``known``: body instructions (by id) whose values the caller already has (a loop's backward
    trip knows the state the forward trip produced). They are taken, not recomputed, so work
    only they needed (the dots feeding a recurrent step's tanh) is left dead."""
    env: dict[int, Tracer] = {}
    active: set[int] = set()
    elements: dict[int, frozenset[int]] = {}  # tuple-shaped active value -> its active elements
    tape: list[Eqn] = []
    for inst in body.instructions:
        if inst.opcode == "parameter":
            number = inst.attrs["parameter_number"]
            env[id(inst)] = primals[number]
            if number in wrt and carries_tangent(inst.shape):
                active.add(id(inst))
                if isinstance(inst.shape, TupleShape):
                    chosen = (wrt_elements or {}).get(number)
                    elements[id(inst)] = frozenset(
                        k
                        for k, e in enumerate(inst.shape.elements)
                        if carries_tangent(e) and (chosen is None or k in chosen)
                    )
            continue
        args = [env[id(o)] for o in inst.operands]
        if not (carries_tangent(inst.shape) and _depends_on_active(inst, active, elements)):
            env[id(inst)] = (
                known[id(inst)]
                if known and id(inst) in known
                else emit_primal(trace, inst, args, role)
            )
            continue
        if (
            known
            and id(inst) in known
            and inst.opcode not in FORWARD_RULES
            and not isinstance(inst.shape, TupleShape)
        ):
            check_differentiable(inst, VJP_RULES)
            out = env[id(inst)] = known[id(inst)]
            active.add(id(inst))
            tape.append(Eqn(inst, args, out, None))
            continue
        check_differentiable(inst, VJP_RULES)
        residual = None
        if inst.opcode in FORWARD_RULES:
            with attributed(trace, inst, "*"):
                out, residual = FORWARD_RULES[inst.opcode](
                    trace,
                    inst,
                    args,
                    [
                        elements.get(id(o), True) if id(o) in active else False
                        for o in inst.operands
                    ],
                )
        else:
            out = emit_primal(trace, inst, args, role)
        env[id(inst)] = out
        active.add(id(inst))
        if isinstance(inst.shape, TupleShape):
            elements[id(inst)] = _active_elements(inst, active, elements)
        tape.append(Eqn(inst, args, out, residual))
    results = [env[id(r)] for r in body.results]

    typing = varying_axes()  # inside a shard_map: JAX's varying/invariant typing

    def backward(cotangents: Sequence[Any]) -> dict[int, Any]:
        ct: dict[int, Any] = {}
        for r, c in zip(body.results, cotangents):
            if c is not None and id(r) in active:
                ct[id(r)] = add_tangents(ct.get(id(r)), c)
        for eqn in reversed(tape):
            c = ct.pop(id(eqn.inst), None)
            if c is None:
                continue
            # the sums too: they are backward work
            with attributed(trace, eqn.inst, "transpose(jvp(*))"):
                contributions = VJP_RULES[eqn.inst.opcode](eqn, dense(c))
                for k, (operand, contribution) in enumerate(zip(eqn.inst.operands,
                                                                contributions)):
                    if contribution is not None and id(operand) in active:
                        if typing is not None:
                            contribution = summed_over_missing_axes(typing, eqn, k, contribution)
                        ct[id(operand)] = add_tangents(ct.get(id(operand)), contribution)
        grads = {}
        for n, p in body.parameters.items():
            if n in wrt:
                with attributed(trace, p, "transpose(jvp(*))"):
                    grads[n] = dense(ct.get(id(p)))
        return grads

    return results, backward
