"""Cost analysis with XLA's ``HloCostAnalysis`` keys and counting rules.

Per instruction: elementwise ops cost one flop per output element (the ops XLA calls
transcendental count as ``transcendentals`` instead); ``dot`` costs 2·out·K; ``reduce``
costs (in − out) × the reducer's cost; ``bytes accessed`` is output plus operands, except
zero-byte ops (parameter, constant, get-tuple-element, bitcast, layout-free transposes),
tuples (their index table), slices (2 × output), calls (the callee's cost) and fusions
(parameters and outputs only). Checked against XLA's own HloCostAnalysis on the programs
in tests/data/jax. All figures are compiler estimates, not measurements."""
from __future__ import annotations

import math
from collections import defaultdict
from typing import Callable

from ..ir.nodes import Computation, Instruction, Module
from ..ir.ops import OPS, is_elementwise
from ..ir.queries import known_trip_count
from ..ir.shapes import Shape, TupleShape

FLOPS, TRANSCENDENTALS, BYTES = "flops", "transcendentals", "bytes accessed"
_ZERO_COST = {"parameter", "constant", "get-tuple-element", "bitcast", "opt-barrier"}


def _bytes(shape) -> int:
    if isinstance(shape, TupleShape):
        return 8 * len(shape.elements)  # the tuple's index table
    return shape.nbytes


def _leaves(shape) -> list[Shape]:
    return shape.leaves() if isinstance(shape, TupleShape) else [shape]


def _is_bitcast_transpose(inst: Instruction) -> bool:
    """True when the transpose keeps the physical element order (XLA's TransposeIsBitcast)."""
    operand: Shape = inst.operands[0].shape
    perm = inst.attrs["dimensions"]
    physical_out = [perm[d] for d in inst.shape.minor_to_major if inst.shape.dims[d] != 1]
    physical_in = [d for d in operand.minor_to_major if operand.dims[d] != 1]
    return physical_out == physical_in


def computation_cost(comp: Computation) -> dict[str, float]:
    """Summed properties of every instruction of ``comp`` (callees included through call)."""
    totals: dict[str, float] = defaultdict(float)
    for inst in comp.instructions:
        for key, value in instruction_cost(inst).items():
            totals[key] += value
    for key in (FLOPS, TRANSCENDENTALS, BYTES):
        totals.setdefault(key, 0.0)
    return totals


def instruction_cost(inst: Instruction) -> dict[str, float]:
    """The cost properties of one instruction, keyed as XLA keys them."""
    op = inst.opcode
    if op == "call":
        return dict(computation_cost(inst.attrs["to_apply"]))
    if op in ("while", "conditional"):  # XLA's count: one trip through the condition and body, or
        totals: dict[str, float] = {}   # the costliest branch (the trip count is not known here)
        parts = [computation_cost(c) for c in inst.called_computations]
        if op == "while":
            for part in parts:
                for k, v in part.items():
                    totals[k] = totals.get(k, 0.0) + v
            return totals
        return dict(max(parts, key=lambda p: p.get(FLOPS, 0.0) + p.get(BYTES, 0.0)))
    out: dict[str, float] = {FLOPS: 0.0, TRANSCENDENTALS: 0.0}
    if op in _ZERO_COST or (op == "transpose" and _is_bitcast_transpose(inst)):
        out[BYTES] = 0.0
        return out
    operand_bytes = [float(_bytes(o.shape)) for o in inst.operands]
    output_bytes = float(_bytes(inst.shape))
    if op == "tuple":
        operand_bytes = []
    elif is_elementwise(op):
        count = float(inst.shape.size)
        out[TRANSCENDENTALS if OPS[op].transcendental else FLOPS] = count
    elif op == "dot":
        k = math.prod(inst.operands[0].shape.dims[d] for d in inst.attrs.get("lhs_contracting_dims", ()))
        out[FLOPS] = 2.0 * inst.shape.size * k
    elif op == "reduce":
        inputs = inst.operands[0].shape.size
        outputs = inst.shape.size if isinstance(inst.shape, Shape) else inst.shape.elements[0].size
        reducer = computation_cost(inst.attrs["to_apply"])
        output_bytes = float(sum(s.nbytes for s in _leaves(inst.shape)))
        out[FLOPS] = (inputs - outputs) * reducer[FLOPS]
        out[TRANSCENDENTALS] = (inputs - outputs) * reducer[TRANSCENDENTALS]
    elif op in ("slice", "dynamic-slice", "gather"):  # only the elements taken are read
        operand_bytes = [output_bytes] + operand_bytes[1:]
    elif op == "custom-call":
        from ..ir.custom_calls import TARGETS
        known = TARGETS.get(inst.attrs["custom_call_target"])
        out[FLOPS] = known.flops([o.shape for o in inst.operands]) if known is not None else 0.0
        output_bytes = float(sum(s.nbytes for s in _leaves(inst.shape)))
    elif op == "sort":  # n log2 n comparisons per sorted row
        n = inst.operands[0].shape.dims[inst.attrs["dimensions"][0]]
        rows = inst.operands[0].shape.size // max(n, 1)
        compares = rows * n * max(math.log2(n), 1.0) if n > 1 else 0.0
        out[FLOPS] = compares * max(computation_cost(inst.attrs["to_apply"])[FLOPS], 1.0)
        output_bytes = float(sum(s.nbytes for s in _leaves(inst.shape)))
    elif op == "scatter":  # the combiner runs once per update element
        combiner = computation_cost(inst.attrs["to_apply"])
        updates = inst.operands[2].shape.size
        out[FLOPS], out[TRANSCENDENTALS] = updates * combiner[FLOPS], updates * combiner[TRANSCENDENTALS]
    elif op == "fusion":  # only the fusion's parameters and outputs touch memory
        inner = computation_cost(inst.attrs["calls"])
        out[FLOPS], out[TRANSCENDENTALS] = inner[FLOPS], inner[TRANSCENDENTALS]
        output_bytes = float(sum(s.nbytes for s in _leaves(inst.shape)))
    out[BYTES] = output_bytes + sum(operand_bytes)
    for i, b in enumerate(operand_bytes):
        out[f"{BYTES}{i}{{}}"] = b
    out[f"{BYTES}out{{}}"] = output_bytes
    return out


def cost_analysis(module: Module, peak_flops: float | None = None,
                  peak_bandwidth: float | None = None,
                  peak_transcendentals: float | None = None) -> dict[str, float]:
    """Module totals (entry computation), with ``optimal_seconds`` when rates are given. A
    ``while`` counts one trip, as XLA counts it; when loops carry XLA's ``known_trip_count``
    (scan, fori_loop with Python-int bounds), the totals with every trip counted are added
    under their own keys, ``"flops (known trip counts)"`` ..., so both numbers are labelled."""
    totals = computation_cost(module.entry)
    extra: dict[str, float] = {}
    for inst in module.entry.instructions:
        trips = known_trip_count(inst) if inst.opcode == "while" else None
        if trips is not None:
            for k, v in instruction_cost(inst).items():
                extra[k] = extra.get(k, 0.0) + (trips - 1) * v
    if extra:
        for k in (FLOPS, TRANSCENDENTALS, BYTES):
            totals[f"{k} (known trip counts)"] = totals.get(k, 0.0) + extra.get(k, 0.0)
    rates: list[tuple[str, float | None]] = [(FLOPS, peak_flops), (BYTES, peak_bandwidth),
                                             (TRANSCENDENTALS, peak_transcendentals)]
    totals["optimal_seconds"] = max([totals[k] / r for k, r in rates if r] or [0.0])
    return dict(totals)


COST_RULES: dict[str, Callable] = {name: instruction_cost for name in OPS}
