"""``vmap`` inside a trace: the function is traced once on one batch element's shapes, then
re-emitted batched (``batching.batch_body``). ``in_axes``/``out_axes`` follow JAX: an int or
None for everything, or one entry per positional argument (an int, None, or a pytree of them
shaped like the argument)."""
from __future__ import annotations

import operator
from typing import Any, Callable

import numpy as np

from . import lax
from .ad_engine import Body
from .batching import batch_body, spread
from .control_flow import _trace_function
from .errors import UserValueError
from .pytree import flatten, unflatten
from .tracer import Tracer, current_trace


def _axes_like(spec, value, where: str) -> list:
    """One axis (int or None) per leaf of ``value``, from the prefix pytree ``spec``."""
    if spec is None or isinstance(spec, (int, np.integer)):
        return [None if spec is None else operator.index(spec)] * len(flatten(value)[0])
    if (
        isinstance(spec, (tuple, list))
        and isinstance(value, (tuple, list))
        and len(spec) == len(value)
    ):
        return [
            a
            for s, v, k in zip(spec, value, range(len(value)))
            for a in _axes_like(s, v, f"{where}[{k}]")
        ]
    if isinstance(spec, dict) and isinstance(value, dict) and set(spec) == set(value):
        keys = flatten({k: 0 for k in value})[1].meta
        return [a for k in keys for a in _axes_like(spec[k], value[k], f"{where}[{k!r}]")]
    raise UserValueError(f"vmap in_axes{where} = {spec!r} does not match the argument's structure")


def _normalize(axis: int, ndim: int, what: str) -> int:
    if not -ndim <= axis < ndim:
        raise UserValueError(f"vmap: {what} has axis {axis}, but only {ndim} dimensions")
    return axis % ndim


def vmap_call(fun: Callable, args: tuple, kwargs: dict, in_axes: Any = 0, out_axes: Any = 0,
              axis_size: int | None = None):
    trace = current_trace()
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    specs = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
    if len(specs) != len(args):
        raise UserValueError(
            f"vmap in_axes has {len(specs)} entries but the function got {len(args)} positional "
            "arguments"
        )
    leaves, tree, paths = flatten(tuple(args))
    axes = [a for s, v, k in zip(specs, args, range(len(args))) for a in _axes_like(s, v, f"[{k}]")]
    inputs = [
        v if isinstance(v, Tracer) else lax.lift(trace, v, what=f"vmap argument{p}")
        for v, p in zip(leaves, paths)
    ]
    sizes = set()
    moved = []
    for t, axis, p in zip(inputs, axes, paths):
        if axis is None:
            moved.append(t)
            continue
        axis = _normalize(axis, t.ndim, f"argument{p} ({t.inst.shape.to_text(False)})")
        sizes.add(t.shape[axis])
        moved.append(lax.transpose(t, [axis] + [d for d in range(t.ndim) if d != axis]))
    if axis_size is not None:
        sizes.add(operator.index(axis_size))
    if len(sizes) != 1:
        raise UserValueError(
            "vmap got inconsistent sizes for the mapped axes: "
            + ", ".join(
                f"argument{p} has size {t.shape[a % t.ndim]} along axis {a}"
                for t, a, p in zip(inputs, axes, paths)
                if a is not None
            )
            if sizes
            else "vmap needs at least one mapped argument (an in_axes entry that is not None) or "
                 "axis_size="
        )
    (size,) = sizes
    avals = [(tuple(t.shape[1:]) if a is not None else tuple(t.shape), t.dtype, t.weak_type)
             for t, a in zip(moved, axes)]
    sub, outs, weak, out_tree = _trace_function(
        trace,
        lambda *a: fun(*a, **kwargs),
        avals,
        tree,
        "vmap",
        wrap_args=lambda t: tuple(t),
        user_fn=fun,
    )
    values = dict(enumerate(moved))
    flags = {k: a is not None for k, a in enumerate(axes)}
    for outer, inner in sub.captures:
        number = inner.inst.attrs["parameter_number"]
        values[number], flags[number] = outer, False
    body = Body(sub.builder._instructions, dict(sub.builder._parameters),
                list(outs) + [flag.inst for flag, _, _ in sub.checks])
    results, out_flags = batch_body(trace, body, values, flags, size)
    # NumPy's data checks (an index out of range ...): an error if any batch element fails
    for flag, batched, (_, error, message) in zip(
        results[len(outs) :], out_flags[len(outs) :], sub.checks
    ):
        trace.checks.append((lax.reduce(flag, "or", (0,)) if batched else flag, error, message))
    results, out_flags = results[:len(outs)], out_flags[:len(outs)]
    out_specs = (
        _axes_like(out_axes, unflatten(out_tree, results), "")
        if not isinstance(out_axes, (int, type(None)))
        else [out_axes] * len(results)
    )
    final = []
    for r, b, axis, w in zip(results, out_flags, out_specs, weak):
        if axis is None:
            if b:
                raise UserValueError(
                    f"vmap out_axes=None for an output that differs per batch element: "
                    f"{r.describe()}"
                )
            final.append(Tracer(trace, r.inst, w))
            continue
        r = r if b else spread(r, size)
        axis = _normalize(axis, r.ndim, "an output")
        perm = list(range(1, r.ndim))
        perm.insert(axis, 0)
        final.append(Tracer(trace, lax.transpose(r, perm).inst, w))
    return unflatten(out_tree, final)


__all__ = ["vmap_call"]
