"""Cost analysis with XLA's ``HloCostAnalysis`` keys and counting rules.

Per instruction: elementwise ops cost one flop per output element (the ops XLA calls
transcendental count as ``transcendentals`` instead); ``dot`` costs 2·out·K; ``reduce``
costs (in − out) × the reducer's cost; ``bytes accessed`` is output plus operands, except
zero-byte ops (parameter, constant, get-tuple-element, bitcast, layout-free transposes),
slices (2 × output), reduce (init values not counted in the total, as XLA) and fusions
(parameters and outputs only). All figures are compiler estimates, not measurements."""
from __future__ import annotations

import math
from collections import defaultdict
from typing import Callable

from ..ir.nodes import Computation, Instruction, Module
from ..ir.ops import OPS, is_elementwise
from ..ir.shapes import Shape, TupleShape

FLOPS, TRANSCENDENTALS, BYTES = "flops", "transcendentals", "bytes accessed"
_ZERO_COST = {"parameter", "constant", "get-tuple-element", "bitcast"}


def _bytes(shape) -> int:
    if isinstance(shape, TupleShape):
        return 8 * len(shape.elements)  # the tuple's index table
    return shape.nbytes


def _is_bitcast_transpose(inst: Instruction) -> bool:
    perm = inst.attrs["dimensions"]
    moved = [p for p in perm if inst.operands[0].shape.dims[p] != 1]
    return moved == sorted(moved)


def computation_flops(comp: Computation) -> tuple[float, float]:
    flops = trans = 0.0
    for inst in comp.instructions:
        c = instruction_cost(inst)
        flops += c[FLOPS]
        trans += c[TRANSCENDENTALS]
    return flops, trans


def instruction_cost(inst: Instruction) -> dict[str, float]:
    """The cost properties of one instruction, keyed as XLA keys them."""
    op = inst.opcode
    out: dict[str, float] = {FLOPS: 0.0, TRANSCENDENTALS: 0.0}
    if op in _ZERO_COST or (op == "transpose" and _is_bitcast_transpose(inst)):
        out[BYTES] = 0.0
        return out
    operand_bytes = [float(_bytes(o.shape)) for o in inst.operands]
    output_bytes = float(_bytes(inst.shape))
    total = output_bytes + sum(operand_bytes)
    if is_elementwise(op):
        count = float(inst.shape.size)
        out[TRANSCENDENTALS if OPS[op].transcendental else FLOPS] = count
    elif op == "dot":
        k = math.prod(inst.operands[0].shape.dims[d] for d in inst.attrs.get("lhs_contracting_dims", ()))
        out[FLOPS] = 2.0 * inst.shape.size * k
    elif op == "reduce":
        n = len(inst.operands) // 2
        inputs = inst.operands[0].shape.size
        outputs = inst.shape.size if isinstance(inst.shape, Shape) else inst.shape.elements[0].size
        f, t = computation_flops(inst.attrs["to_apply"])
        out[FLOPS] = (inputs - outputs) * f
        out[TRANSCENDENTALS] = (inputs - outputs) * t
        total = output_bytes + sum(operand_bytes[:n])
    elif op == "slice":
        operand_bytes = [output_bytes]
        total = 2 * output_bytes
    elif op in ("call", "fusion"):
        callee = inst.attrs["to_apply" if op == "call" else "calls"]
        f, t = computation_flops(callee)
        out[FLOPS], out[TRANSCENDENTALS] = f, t
    out[BYTES] = total
    for i, b in enumerate(operand_bytes):
        out[f"{BYTES}{i}{{}}"] = b
    out[f"{BYTES}out{{}}"] = output_bytes
    return out


def cost_analysis(module: Module, peak_flops: float | None = None,
                  peak_bandwidth: float | None = None,
                  peak_transcendentals: float | None = None) -> dict[str, float]:
    """Module totals (entry computation), with ``optimal_seconds`` when rates are given."""
    totals: dict[str, float] = defaultdict(float)
    for inst in module.entry.instructions:
        for key, value in instruction_cost(inst).items():
            totals[key] += value
    totals.setdefault(FLOPS, 0.0)
    totals.setdefault(TRANSCENDENTALS, 0.0)
    totals.setdefault(BYTES, 0.0)
    rates: list[tuple[str, float | None]] = [(FLOPS, peak_flops), (BYTES, peak_bandwidth),
                                             (TRANSCENDENTALS, peak_transcendentals)]
    totals["optimal_seconds"] = max([totals[k] / r for k, r in rates if r] or [0.0])
    return dict(totals)


COST_RULES: dict[str, Callable] = {name: instruction_cost for name in OPS}
