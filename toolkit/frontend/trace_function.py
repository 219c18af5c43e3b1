"""Tracing a Python function with abstract arguments into an HLO module."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ..ir.nodes import Module
from . import dispatch  # noqa: F401  (attaches NumPy protocols to Tracer)
from . import lax
from .errors import LeakedTracerError, UserTypeError
from .pytree import TreeDef, flatten
from .signature import ArgSpec
from .tracer import Trace, Tracer

@dataclass(frozen=True)
class TracedProgram:
    module: Module
    in_specs: tuple[ArgSpec, ...]
    out_tree: TreeDef
    out_paths: tuple[str, ...]


def trace_program(fn: Callable, name: str, specs: Sequence[ArgSpec],
                  rebuild: Callable[[list[Tracer]], tuple[tuple, dict]]) -> TracedProgram:
    """Trace ``fn`` on parameters described by ``specs``; ``rebuild`` turns the parameter
    tracers back into the call's (args, kwargs), static values included."""
    trace = Trace(name)
    with trace.activate():
        params = [trace.parameter(i, s.dtype, s.shape, s.weak_type, s.path)
                  for i, s in enumerate(specs)]
        args, kwargs = rebuild(params)
        result = fn(*args, **kwargs)
        leaves, out_tree, out_paths = flatten(result)
        outs = [_as_output(trace, leaf, path) for leaf, path in zip(leaves, out_paths)]
        if len(outs) == 1 and out_tree.kind == "leaf":
            root = outs[0].inst
        else:
            root = trace.builder.add("tuple", [o.inst for o in outs])
        module = trace.module.build(trace.builder.build(root))
    return TracedProgram(module, tuple(specs), out_tree, tuple(out_paths))


def _as_output(trace: Trace, leaf: Any, path: str) -> Tracer:
    if isinstance(leaf, Tracer):
        if leaf.trace is not trace:
            raise LeakedTracerError(f"output{path} is a traced value from another trace: {leaf.describe()}")
        return leaf
    if isinstance(leaf, (bool, int, float, np.ndarray, np.generic)):
        return lax.lift(trace, leaf, what=f"output{path}")
    raise UserTypeError(f"jitted function returned output{path} of type {type(leaf).__name__}; "
                    "return arrays, scalars, or tuples/lists/dicts of them")
