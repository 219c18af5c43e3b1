"""Derivatives of ``reduce-window`` by ``add`` (the op NumPy's cumsum traces to): linear in
its operand and init together, so its JVP is the op on the tangents; its transpose spreads
each output's cotangent over its window (JAX's reduce_window_sum transpose). A prefix scan's
transpose is the reversed scan of the reversed cotangent (JAX's cumsum transpose), itself a
compiled scan. Windows reducing by other ops have no derivative here, and say so."""
from __future__ import annotations

import numpy as np

from ..ir import windows as ir_windows
from ..ir.nodes import Instruction
from ..ir.ops import identity
from ..ir.queries import reducer_opcode
from . import lax
from .ad_rules import (JVP_RULES, PRECONDITIONS, VJP_RULES, NotDifferentiableHere,
                       _linear_jvp)


def _check(inst: Instruction):
    reducer = reducer_opcode(inst)
    if reducer != "add":
        return (f"a reduce-window by '{reducer or 'a computation'}' has no derivative in "
                "toolkit; only sums (np.cumsum) do")
    return None


def _vjp(eqn, ct):
    x, init = eqn.args
    window = eqn.inst.attrs["window"]
    axis = ir_windows.scan_axis(window, x.shape)
    if axis is not None:
        ct_x = lax.rev(lax.prefix_scan(lax.rev(ct, (axis,)), axis, "add"), (axis,))
    else:
        if any(w.stride != 1 or w.low >= w.size or w.high >= w.size for w in window):
            raise NotDifferentiableHere(
                f"the derivative of reduce-window %{eqn.inst.name} (window {window}): strided "
                "windows, or padding as wide as the window, are not differentiated")
        zero = lax.lift(ct.trace, identity("add", ct.dtype), ct.dtype)
        spread = lax.pad(ct, zero, [(w.size - 1 - w.low, w.size - 1 - w.high, 0) for w in window])
        ct_x = lax.reduce_window(spread, "add", tuple(ir_windows.WindowDim(w.size) for w in window),
                                 zero)
    # the init is folded in once per window position off the operand, and once more
    folds = np.prod([w.size for w in window]) - ir_windows.in_bounds_counts(x.shape, window) + 1
    weights = lax.lift(ct.trace, folds.astype(ct.dtype), ct.dtype)
    ct_init = lax.reduce(lax.elementwise("multiply", ct, weights), "add", tuple(range(ct.ndim)))
    return [ct_x, ct_init]


JVP_RULES["reduce-window"] = _linear_jvp
VJP_RULES["reduce-window"] = _vjp
PRECONDITIONS["reduce-window"] = _check
