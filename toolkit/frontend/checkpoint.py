"""``tk.checkpoint`` (JAX's ``jax.checkpoint``/``remat``): the function's intermediates are not
kept for the backward pass; the backward pass recomputes them from the function's inputs.

Traced, the function becomes an HLO ``call`` marked ``frontend_attributes={_remat="true"}``.
Run forward it is an ordinary call (the call inliner inlines it). Differentiated in reverse,
the call's derivative recomputes the callee from its operands, passed through an
``opt-barrier`` together with the incoming cotangent: the recomputation cannot start before the
backward pass reaches it, and common-subexpression elimination cannot merge it back into the
forward pass. ``Compiled.saved_residuals()`` shows the difference."""
from __future__ import annotations

from typing import Callable

from . import lax
from .ad_engine import FORWARD_RULES, Body, emit_primal, vjp_body
from .ad_rules import VJP_RULES
from .control_flow import _trace_function
from .errors import UnsupportedNumpyError
from .pytree import flatten, unflatten
from .tracer import Tracer, current_trace

REMAT = ("frontend_attributes", '{_remat="true"}')


def is_remat(inst) -> bool:
    return REMAT in tuple(inst.attrs.get("_raw", ()))


def checkpoint_call(fun: Callable, args: tuple, kwargs: dict):
    trace = current_trace()
    leaves, tree, paths = flatten(tuple(args))
    inputs = [v if isinstance(v, Tracer) else lax.lift(trace, v, what=f"checkpoint argument{p}")
              for v, p in zip(leaves, paths)]
    avals = [(t.shape, t.dtype, t.weak_type) for t in inputs]
    sub, outs, weak, out_tree = _trace_function(
        trace,
        lambda *a: fun(*a, **kwargs),
        avals,
        tree,
        "checkpoint",
        wrap_args=lambda t: tuple(t),
        user_fn=fun,
    )
    if sub.checks:
        raise UnsupportedNumpyError(
            "tk.checkpoint of a function with NumPy's data checks (an index out of range ...) "
            "is not supported yet"
        )
    root = outs[0] if len(outs) == 1 else sub.builder.add("tuple", list(outs))
    comp = trace.module.add_computation(sub.builder.build(root))
    operands = inputs + [outer for outer, _ in sub.captures]
    with trace.op_scope("checkpoint"):
        call = trace.emit("call", operands, {"to_apply": comp, "_raw": (REMAT,)}, comp.root.shape)
    if len(outs) == 1:
        results = [Tracer(trace, call.inst, weak[0])]
    else:
        results = [Tracer(trace, trace.emit("get-tuple-element", (call,), {"index": k}).inst, w)
                   for k, w in enumerate(weak)]
    return unflatten(out_tree, results)


# ---- reverse mode: recompute instead of keeping -------------------------------------------------
_plain_forward = FORWARD_RULES["call"]
_plain_vjp = VJP_RULES["call"]


def _forward(trace, inst, args, active):
    if not is_remat(inst):
        return _plain_forward(trace, inst, args, active)
    return emit_primal(trace, inst, args), [k for k, a in enumerate(active) if a]


def _vjp(eqn, ct):
    if not is_remat(eqn.inst):
        return _plain_vjp(eqn, ct)
    trace = current_trace()
    cts = [c for c in (ct if isinstance(ct, list) else [ct]) if c is not None]
    fence = trace.emit("opt-barrier", (trace.emit("tuple", tuple(eqn.args) + tuple(cts)),))
    fenced = [trace.emit("get-tuple-element", (fence,), {"index": k}) for k in range(len(eqn.args))]
    _, backward = vjp_body(
        trace,
        Body.of(eqn.inst.attrs["to_apply"]),
        dict(enumerate(fenced)),
        set(eqn.residual),
        role="remat(*)",
    )
    grads = backward([ct])
    return [grads.get(k) for k in range(len(eqn.args))]


FORWARD_RULES["call"] = _forward
VJP_RULES["call"] = _vjp

__all__ = ["checkpoint_call", "is_remat"]
