"""Derivatives of ``reduce-window``. By ``add`` (NumPy's cumsum) it is linear in its operand
and init together, so its JVP is the op on the tangents; its transpose spreads each output's
cotangent over its window (JAX's reduce_window_sum transpose), and a prefix scan's is the
reversed scan of the reversed cotangent (JAX's cumsum transpose), itself a compiled scan.
A prefix scan by a product, a maximum or a minimum (cumprod, np.maximum.accumulate) from its
reducer's identity is differentiated as its log-step form (frontend/scans.log_step_scan), the
same function up to rounding, as JAX differentiates cumprod through its associative scan.
Other windows have no derivative here, and say so."""
from __future__ import annotations

import numpy as np

from ..ir import windows as ir_windows
from ..ir.nodes import Instruction
from ..ir.ops import identity
from ..ir.queries import reducer_opcode
from . import lax
from .ad_functions import jvp, vjp
from .ad_rules import (JVP_RULES, PRECONDITIONS, VJP_RULES, NotDifferentiableHere,
                       _linear_jvp, instantiate)


def _check(inst: Instruction):
    reducer = reducer_opcode(inst)
    if reducer == "add":
        return None
    if ir_windows.compiled_scan(inst) and ir_windows.starts_from_identity(inst):
        return None
    return (f"a reduce-window by '{reducer or 'a computation'}' has no derivative in toolkit "
            "unless it is a prefix scan from its reducer's identity (np.cumprod, "
            "np.maximum.accumulate); sums (np.cumsum) always have one")


def _log_step(axis: int, reducer: str):
    from .scans import log_step_scan

    return lambda x: log_step_scan(x, axis, reducer)


def _jvp(eqn, tangents):
    reducer = reducer_opcode(eqn.inst)
    if reducer == "add":
        return _linear_jvp(eqn, tangents)
    x = eqn.args[0]
    axis = ir_windows.scan_axis(eqn.inst.attrs["window"], x.shape)
    _, t_out = jvp(_log_step(axis, reducer), [x], [instantiate(tangents[0], x)])
    return t_out


def _scan_vjp(eqn, ct, reducer: str):
    x = eqn.args[0]
    axis = ir_windows.scan_axis(eqn.inst.attrs["window"], x.shape)
    _, pullback = vjp(_log_step(axis, reducer), [x])
    (ct_x,) = pullback(ct)
    return [ct_x, None]


def _vjp(eqn, ct):
    reducer = reducer_opcode(eqn.inst)
    if reducer != "add":
        return _scan_vjp(eqn, ct, reducer)
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


JVP_RULES["reduce-window"] = _jvp
VJP_RULES["reduce-window"] = _vjp
PRECONDITIONS["reduce-window"] = _check
