"""``vjp`` and ``jvp`` of a Python function in the current trace: the function is traced into
a nested computation (values of enclosing traces it uses are captured, and treated as
constants, as JAX treats closed-over values), then differentiated by the engine into the
current trace. The rule tables are complete once ``autodiff`` (which registers the rule
modules) is imported; rules that differentiate a function of their own (ad_windows: a scan's
log-step form) call these."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from . import lax
from .ad_engine import Body, jvp_body, vjp_body
from .ad_rules import zeros_like
from .control_flow import _trace_function
from .errors import UserTypeError
from .pytree import TreeDef, flatten, ordered_like, unflatten
from .tracer import Trace, Tracer, current_trace


def _aval_text(t: Tracer) -> str:
    return t.inst.shape.to_text(False)


class _Traced:
    """``fun`` traced on ``args`` in a trace nested in the current one, ready to differentiate."""

    def __init__(
        self, fun: Callable, args: tuple, kwargs: dict, what: str, user_fn: Callable | None = None
    ):
        self.trace: Trace = current_trace()
        leaves, self.in_tree, self.paths = flatten(tuple(args))
        self.inputs = [
            v if isinstance(v, Tracer) else lax.lift(self.trace, v, what=f"{what} argument{p}")
            for v, p in zip(leaves, self.paths)
        ]
        for t, p in zip(self.inputs, self.paths):
            if t.dtype.kind == "c":
                raise UserTypeError(
                    f"{what}: argument{p} is complex ({_aval_text(t)}); toolkit does not "
                    "differentiate complex numbers yet"
                )
        avals = [(t.shape, t.dtype, t.weak_type) for t in self.inputs]
        sub, outs, self.weak, self.out_tree = _trace_function(
            self.trace,
            lambda *a: fun(*a, **kwargs),
            avals,
            self.in_tree,
            what,
            wrap_args=lambda tree: tuple(tree),
            user_fn=user_fn or fun,
        )
        self.count = len(outs)
        self.checks = sub.checks
        self.body = Body(sub.builder._instructions, dict(sub.builder._parameters),
                         list(outs) + [flag.inst for flag, _, _ in sub.checks])
        self.primals = dict(enumerate(self.inputs))
        for outer, inner in sub.captures:
            self.primals[inner.inst.attrs["parameter_number"]] = outer

    def finish(self, results: list[Tracer]) -> list[Tracer]:
        """The user's outputs (weak types restored); the nested function's data checks join
        the current trace's."""
        outs, flags = results[:self.count], results[self.count:]
        for flag, (_, error, message) in zip(flags, self.checks):
            self.trace.checks.append((flag, error, message))
        return [
            Tracer(self.trace, o.inst, w) if w != o.weak_type else o
            for o, w in zip(outs, self.weak)
        ]


def _split_aux(out_tree: TreeDef, leaves: list, what: str):
    if out_tree.kind not in ("tuple", "list") or len(out_tree.children) != 2:
        raise UserTypeError(
            f"{what} with has_aux=True: the function must return a pair (output, aux), "
            f"got a value of structure {out_tree}"
        )
    main, aux = out_tree.children
    n = main.num_leaves
    return main, leaves[:n], aux, leaves[n:]


def vjp(fun: Callable, primals: Sequence, has_aux: bool = False, kwargs: dict | None = None,
        user_fn: Callable | None = None):
    """(outputs, pullback[, aux]) of ``fun`` at ``primals`` in the current trace; ``pullback``
    maps cotangents shaped like the outputs to a tuple of cotangents shaped like ``primals``
    (zeros for integer inputs, which have no derivative)."""
    traced = _Traced(fun, tuple(primals), kwargs or {}, "vjp", user_fn)
    wrt = {k for k, t in enumerate(traced.inputs) if t.dtype.kind == "f"}
    results, backward = vjp_body(traced.trace, traced.body, traced.primals, wrt)
    outs = traced.finish(results)
    out_tree, out_leaves = traced.out_tree, outs
    aux = None
    if has_aux:
        out_tree, out_leaves, aux_tree, aux_leaves = _split_aux(traced.out_tree, outs, "vjp")
        aux = unflatten(aux_tree, aux_leaves)

    def pullback(cotangents):
        cotangents = ordered_like(unflatten(out_tree, out_leaves), cotangents)
        ct_leaves, ct_tree, ct_paths = flatten(cotangents)
        if str(ct_tree) != str(out_tree):
            raise UserTypeError(
                f"vjp pullback: cotangents have structure {ct_tree}, the outputs {out_tree}"
            )
        cts = []
        for c, o, p in zip(ct_leaves, out_leaves, ct_paths):
            c = (
                c
                if isinstance(c, Tracer)
                else lax.lift(traced.trace, np.asarray(c), what=f"cotangent{p}")
            )
            if tuple(c.shape) != tuple(o.shape) or (o.dtype.kind == "f" and c.dtype != o.dtype):
                raise UserTypeError(
                    f"vjp pullback: cotangent{p} is {_aval_text(c)}, the output is {_aval_text(o)}"
                )
            cts.append(c if o.dtype.kind == "f" else None)
        grads = backward(cts + [None] * (len(results) - len(cts)))
        leaves = [
            grads.get(k) if grads.get(k) is not None else zeros_like(t)
            for k, t in enumerate(traced.inputs)
        ]
        return tuple(unflatten(traced.in_tree, leaves))

    out = unflatten(out_tree, out_leaves)
    return (out, pullback, aux) if has_aux else (out, pullback)


def jvp(fun: Callable, primals: Sequence, tangents: Sequence, kwargs: dict | None = None):
    """(outputs, output tangents) of ``fun`` at ``primals`` along ``tangents``."""
    primals, tangents = tuple(primals), tuple(tangents)
    traced = _Traced(fun, primals, kwargs or {}, "jvp")
    t_leaves, t_tree, t_paths = flatten(ordered_like(primals, tangents))
    if str(t_tree) != str(traced.in_tree):
        raise UserTypeError(f"jvp: tangents have structure {t_tree}, the primals {traced.in_tree}")
    tans = {}
    for k, (t, x, p) in enumerate(zip(t_leaves, traced.inputs, t_paths)):
        t = (
            t
            if isinstance(t, Tracer)
            else lax.lift(traced.trace, np.asarray(t, dtype=x.dtype), what=f"tangent{p}")
        )
        if tuple(t.shape) != tuple(x.shape) or t.dtype != x.dtype:
            raise UserTypeError(
                f"jvp: tangent{p} is {_aval_text(t)}, its primal is {_aval_text(x)} "
                "(a tangent has its primal's shape and dtype)"
            )
        if x.dtype.kind == "f":
            tans[k] = t
    results, t_results = jvp_body(traced.trace, traced.body, traced.primals, tans)
    outs = traced.finish(results)
    t_outs = [t if t is not None else zeros_like(o) for t, o in zip(t_results[:traced.count], outs)]
    return unflatten(traced.out_tree, outs), unflatten(traced.out_tree, t_outs)
