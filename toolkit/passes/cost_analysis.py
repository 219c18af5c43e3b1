"""Cost analysis with XLA's ``HloCostAnalysis`` keys and counting rules.

Per instruction: elementwise ops cost one flop per output element (the ops XLA calls
transcendental count as ``transcendentals`` instead); ``dot`` costs 2·out·K; ``reduce``
costs (in − out) × the reducer's cost; ``bytes accessed`` is output plus operands, except
zero-byte ops (parameter, constant, get-tuple-element, bitcast, layout-free transposes),
tuples (their index table), slices (2 × output), calls (the callee's cost) and fusions
(parameters and outputs only). Checked against XLA's own HloCostAnalysis on the programs
in tests/data/jax. All figures are compiler estimates, not measurements.

As XLA's HloCostAnalysis has a handler per opcode family, each op's family (``OpDef.cost``
in the op table) picks one handler in ``COST_HANDLERS``. Elementwise ops count as XLA's CPU
analysis counts them, one per element; XLA's GPU analysis weighs them per opcode and dtype by
measured clock cycles per device, which a GPU variant would add as a handler of its own."""
from __future__ import annotations

import math
from collections import defaultdict
from typing import Callable

from ..ir.nodes import Computation, Instruction, Module
from ..ir.ops import OPS
from ..ir.queries import known_trip_count
from ..ir.shapes import Shape, TupleShape
from ..ir.windows import scan_axis

FLOPS, TRANSCENDENTALS, BYTES = "flops", "transcendentals", "bytes accessed"


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
    """The cost properties of one instruction, keyed as XLA keys them: the handler of its op's
    cost family (``OpDef.cost``) counts it."""
    return COST_HANDLERS[OPS[inst.opcode].cost](inst)


# ---- one handler per op family, as XLA's HloCostAnalysis has (HandleElementwiseOp,
# HandleDot, HandleReduce, HandleFusion ...). Each returns the instruction's properties.

def _properties(flops: float, transcendentals: float, operand_bytes: list[float],
                output_bytes: float) -> dict[str, float]:
    out = {FLOPS: flops, TRANSCENDENTALS: transcendentals,
           BYTES: output_bytes + sum(operand_bytes)}
    for i, b in enumerate(operand_bytes):
        out[f"{BYTES}{i}{{}}"] = b
    out[f"{BYTES}out{{}}"] = output_bytes
    return out


def _default_bytes(inst: Instruction) -> tuple[list[float], float]:
    """XLA's Preprocess: every operand read whole and the output written whole."""
    return [float(_bytes(o.shape)) for o in inst.operands], float(_bytes(inst.shape))


def _leaf_bytes(shape) -> float:
    return float(sum(s.nbytes for s in _leaves(shape)))


def _handle_zero(inst: Instruction) -> dict[str, float]:
    """parameter, constant, get-tuple-element, bitcast, opt-barrier: no work, no memory."""
    return {FLOPS: 0.0, TRANSCENDENTALS: 0.0, BYTES: 0.0}


def _handle_elementwise(inst: Instruction) -> dict[str, float]:
    """One flop per output element, or one transcendental for the ops XLA calls transcendental
    (XLA's CPU count: the GPU analysis's per-dtype weights are not applied here)."""
    count = float(inst.shape.size)
    if OPS[inst.opcode].transcendental:
        return _properties(0.0, count, *_default_bytes(inst))
    return _properties(count, 0.0, *_default_bytes(inst))


def _handle_data(inst: Instruction) -> dict[str, float]:
    """Data movement (broadcast, reshape, concatenate, pad, copy, iota ...): no flops."""
    return _properties(0.0, 0.0, *_default_bytes(inst))


def _handle_transpose(inst: Instruction) -> dict[str, float]:
    """A transpose that keeps the physical element order is a bitcast, and free."""
    return _handle_zero(inst) if _is_bitcast_transpose(inst) else _handle_data(inst)


def _handle_slice(inst: Instruction) -> dict[str, float]:
    """slice, dynamic-slice, gather: only the elements taken are read."""
    operand_bytes, output_bytes = _default_bytes(inst)
    return _properties(0.0, 0.0, [output_bytes] + operand_bytes[1:], output_bytes)


def _handle_tuple(inst: Instruction) -> dict[str, float]:
    """A tuple writes only its index table."""
    return _properties(0.0, 0.0, [], float(_bytes(inst.shape)))


def _handle_dot(inst: Instruction) -> dict[str, float]:
    """2 flops (a fused multiply-add) per output element and contracted element."""
    k = math.prod(inst.operands[0].shape.dims[d]
                  for d in inst.attrs.get("lhs_contracting_dims", ()))
    return _properties(2.0 * inst.shape.size * k, 0.0, *_default_bytes(inst))


def _handle_reduce(inst: Instruction) -> dict[str, float]:
    """The reducer's cost once per element folded in: (inputs - outputs) times."""
    inputs = inst.operands[0].shape.size
    outputs = inst.shape.size if isinstance(inst.shape, Shape) else inst.shape.elements[0].size
    reducer = computation_cost(inst.attrs["to_apply"])
    operand_bytes, _ = _default_bytes(inst)
    return _properties((inputs - outputs) * reducer[FLOPS],
                       (inputs - outputs) * reducer[TRANSCENDENTALS],
                       operand_bytes, _leaf_bytes(inst.shape))


def _handle_reduce_window(inst: Instruction) -> dict[str, float]:
    """XLA's HandleReduceWindow: the reducer (window elements - 1) times per output element; a
    prefix scan (NumPy's cumsum) counts the one fold per output its kernel makes, as XLA's
    count of n - 1 per output would put a linear scan at quadratic work."""
    outputs = inst.shape.size
    window = inst.attrs["window"]
    folds = outputs * (math.prod(w.size for w in window) - 1)
    if scan_axis(window, inst.operands[0].shape.dims) is not None:
        folds = outputs
    reducer = computation_cost(inst.attrs["to_apply"])
    return _properties(folds * reducer[FLOPS], folds * reducer[TRANSCENDENTALS],
                       *_default_bytes(inst))


def _handle_scatter(inst: Instruction) -> dict[str, float]:
    """The combiner runs once per update element."""
    combiner = computation_cost(inst.attrs["to_apply"])
    updates = inst.operands[2].shape.size
    return _properties(updates * combiner[FLOPS], updates * combiner[TRANSCENDENTALS],
                       *_default_bytes(inst))


def _handle_sort(inst: Instruction) -> dict[str, float]:
    """n log2 n comparisons per sorted row, each the comparator's cost (at least one flop)."""
    n = inst.operands[0].shape.dims[inst.attrs["dimensions"][0]]
    rows = inst.operands[0].shape.size // max(n, 1)
    compares = rows * n * max(math.log2(n), 1.0) if n > 1 else 0.0
    flops = compares * max(computation_cost(inst.attrs["to_apply"])[FLOPS], 1.0)
    operand_bytes, _ = _default_bytes(inst)
    return _properties(flops, 0.0, operand_bytes, _leaf_bytes(inst.shape))


def _handle_custom_call(inst: Instruction) -> dict[str, float]:
    """A known library routine's own flop count; an unknown one counts none."""
    from ..ir.custom_calls import TARGETS
    known = TARGETS.get(inst.attrs["custom_call_target"])
    flops = known.flops([o.shape for o in inst.operands]) if known is not None else 0.0
    operand_bytes, _ = _default_bytes(inst)
    return _properties(flops, 0.0, operand_bytes, _leaf_bytes(inst.shape))


def _handle_fusion(inst: Instruction) -> dict[str, float]:
    """The fused computation's flops; only the fusion's parameters and outputs touch memory."""
    inner = computation_cost(inst.attrs["calls"])
    operand_bytes, _ = _default_bytes(inst)
    return _properties(inner[FLOPS], inner[TRANSCENDENTALS], operand_bytes,
                       _leaf_bytes(inst.shape))


def _handle_call(inst: Instruction) -> dict[str, float]:
    """The callee's cost."""
    return dict(computation_cost(inst.attrs["to_apply"]))


def _handle_while(inst: Instruction) -> dict[str, float]:
    """XLA's count: one trip through the condition and the body (the trip count is not known
    here; cost_analysis adds the known trip counts under their own keys)."""
    totals: dict[str, float] = {}
    for part in (computation_cost(c) for c in inst.called_computations):
        for k, v in part.items():
            totals[k] = totals.get(k, 0.0) + v
    return totals


def _handle_conditional(inst: Instruction) -> dict[str, float]:
    """XLA's count: the costliest branch."""
    parts = [computation_cost(c) for c in inst.called_computations]
    return dict(max(parts, key=lambda p: p.get(FLOPS, 0.0) + p.get(BYTES, 0.0)))


def _handle_collective(inst: Instruction) -> dict[str, float]:
    """XLA's handlers: every operand read and the result written (the ids: their u32[]). An
    all-reduce counts one flop per result element, as XLA's HandleAllReduce does ("we assume
    2 replicas"), and a reduce-scatter the same; the others move data and count none."""
    operand_bytes, output_bytes = _default_bytes(inst)
    flops = 0.0
    if "to_apply" in inst.attrs:  # all-reduce, reduce-scatter: they combine values
        flops = float(sum(s.size for s in _leaves(inst.shape)))
    return _properties(flops, 0.0, operand_bytes, output_bytes)


COST_HANDLERS: dict[str, Callable[[Instruction], dict[str, float]]] = {
    "zero": _handle_zero, "elementwise": _handle_elementwise, "data": _handle_data,
    "transpose": _handle_transpose, "slice": _handle_slice, "tuple": _handle_tuple,
    "dot": _handle_dot, "reduce": _handle_reduce, "reduce-window": _handle_reduce_window,
    "scatter": _handle_scatter,
    "sort": _handle_sort, "custom-call": _handle_custom_call, "fusion": _handle_fusion,
    "call": _handle_call, "while": _handle_while, "conditional": _handle_conditional,
    "collective": _handle_collective,
}


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


# The handler that counts each op, chosen by the op table's cost family
COST_RULES: dict[str, Callable[[Instruction], dict[str, float]]] = {
    name: COST_HANDLERS[op.cost] for name, op in OPS.items()}
