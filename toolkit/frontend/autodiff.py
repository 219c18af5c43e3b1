"""``vjp``, ``jvp`` and ``value_and_grad`` inside a trace (JAX's names and conventions).

The function is traced into a nested computation (values of enclosing traces it uses are
captured, and treated as constants, as JAX treats closed-over values), then differentiated
by the engine into the current trace. Nested uses compose: the derivative is made of ordinary
instructions, so differentiating it again (``grad(grad(f))``) or compiling it (``jit``) works
like on any other program. The public wrappers, which also run these outside a trace, are in
``toolkit.transformations``."""
from __future__ import annotations

import operator
from typing import Callable, Sequence

import numpy as np

from . import ad_control  # noqa: F401  (registers the control-flow rules)
from . import checkpoint  # noqa: F401  (registers tk.checkpoint's rules)
from . import ad_linalg  # noqa: F401  (registers the np.linalg rules)
from . import ad_collectives  # noqa: F401  (registers the collectives' rules)
from . import ad_windows  # noqa: F401  (registers reduce-window's rules)
from . import lax
from .ad_engine import Body, jvp_body, vjp_body
from .ad_rules import zeros_like
from .control_flow import _trace_function
from .errors import UserTypeError
from .pytree import TreeDef, flatten, unflatten
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
    t_leaves, t_tree, t_paths = flatten(tangents)
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


def _normalize_argnums(argnums, nargs: int, what: str) -> tuple[int, ...]:
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    out = []
    for n in nums:
        n = operator.index(n)
        if not -nargs <= n < nargs:
            raise UserTypeError(
                f"{what}: argnums={argnums!r} but the function was called with {nargs} positional "
                "arguments"
            )
        out.append(n % nargs)
    return tuple(out)


def value_and_grad(fun: Callable, args: tuple, kwargs: dict, argnums: int | Sequence[int] = 0,
                   has_aux: bool = False, what: str = "grad"):
    """((value[, aux]), grads) of the scalar-valued ``fun`` at ``args``; ``grads`` has the
    structure of ``args[argnums]`` (a tuple of them when ``argnums`` is a tuple)."""
    nums = _normalize_argnums(argnums, len(args), what)
    for n in nums:
        leaves, _, paths = flatten(args[n])
        for v, p in zip(leaves, paths):
            dtype = (
                v.dtype if isinstance(v, (Tracer, np.ndarray, np.generic)) else np.asarray(v).dtype
            )
            if np.dtype(dtype).kind != "f":
                raise UserTypeError(
                    f"{what} requires floating-point inputs, but argument {n}{p} has dtype "
                    f"{np.dtype(dtype)}. "
                    "Integers and booleans have no derivative; pass them as another argument (not "
                    "in argnums), "
                    "or convert them with .astype(np.float64)."
                )

    def partial(*chosen):
        full = list(args)
        for n, value in zip(nums, chosen):
            full[n] = value
        return fun(*full, **kwargs)

    result = vjp(partial, tuple(args[n] for n in nums), has_aux=has_aux, user_fn=fun)
    out, pullback = result[0], result[1]
    leaves, tree, _ = flatten(out)
    if tree.kind != "leaf" or leaves[0].shape != () or leaves[0].dtype.kind != "f":
        shown = (
            leaves[0].describe()
            if tree.kind == "leaf" and isinstance(leaves[0], Tracer)
            else str(tree)
        )
        raise UserTypeError(
            f"{what} needs a function returning one real scalar; got {shown}. For several "
            "outputs use tk.vjp, or sum them first."
        )
    grads = pullback(lax.full_like(leaves[0], 1))
    grads = grads[0] if isinstance(argnums, int) else grads
    value = (out, result[2]) if has_aux else out
    return value, grads


__all__ = ["vjp", "jvp", "value_and_grad", "ad_control", "ad_linalg", "ad_collectives",
           "checkpoint"]
