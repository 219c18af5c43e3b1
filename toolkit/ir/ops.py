"""The closed op table. Every consumer (shape rules, interpreter, printer, cost model,
backends) keeps one entry per op here, and a test checks each table covers every op."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class OpDef:
    name: str  # the opcode as HLO text spells it
    category: str  # see CATEGORIES
    arity: int | None  # None: variadic
    attributes: tuple[str, ...] = ()
    transcendental: bool = False  # counted as 'transcendentals' by cost analysis


CATEGORIES = (
    "leaf",  # parameter, constant, iota
    "unary",  # elementwise, one operand
    "binary",  # elementwise, two operands
    "ternary",  # elementwise, three operands (select, clamp)
    "layout",  # data movement: broadcast, reshape, transpose, slice ...
    "reduce",
    "scatter",  # writes updates into a copy of its operand: its own kernel, never fused
    "library",  # custom-call: a named library routine (LAPACK through np.linalg)
    "sort",  # sorts its operands along a dimension by a comparator: a library call, never fused
    "dot",
    "tuple",  # tuple, get-tuple-element
    "call",
    "control",  # while, conditional: run called computations; never fused
)

_UNARY = [
    ("negate", False), ("abs", False), ("sign", False), ("not", False),
    ("floor", False), ("ceil", False), ("round-nearest-even", False),
    ("round-nearest-afz", False), ("is-finite", False),
    ("exponential", True), ("exponential-minus-one", True), ("log", True),
    ("log-plus-one", True), ("sqrt", True), ("rsqrt", True), ("cbrt", True),
    ("tanh", True), ("logistic", True), ("sine", True), ("cosine", True), ("tan", True),
    ("erf", True),
    ("popcnt", False), ("count-leading-zeros", False),
    ("real", False), ("imag", False),  # a complex number's parts (of a real number: itself, 0)
]
_BINARY = [
    ("add", False), ("subtract", False), ("multiply", False), ("divide", False),
    ("remainder", False), ("power", True), ("maximum", False), ("minimum", False),
    ("atan2", True), ("and", False), ("or", False), ("xor", False),
    ("shift-left", False), ("shift-right-arithmetic", False), ("shift-right-logical", False),
    ("complex", False),  # complex(real part, imaginary part)
]

OPS: dict[str, OpDef] = {}


def _define(op: OpDef) -> None:
    assert op.category in CATEGORIES and op.name not in OPS
    OPS[op.name] = op


for _name, _tr in _UNARY:
    _define(OpDef(_name, "unary", 1, transcendental=_tr))
for _name, _tr in _BINARY:
    _define(OpDef(_name, "binary", 2, transcendental=_tr))
_define(OpDef("compare", "binary", 2, ("direction", "type")))
_define(OpDef("convert", "unary", 1))
_define(OpDef("bitcast-convert", "unary", 1))  # the same bits read as another type of equal width
_define(OpDef("select", "ternary", 3))
_define(OpDef("clamp", "ternary", 3))

_define(OpDef("parameter", "leaf", 0, ("parameter_number",)))
_define(OpDef("constant", "leaf", 0, ("literal",)))
_define(OpDef("iota", "leaf", 0, ("iota_dimension",)))

_define(OpDef("broadcast", "layout", 1, ("dimensions",)))
_define(OpDef("reshape", "layout", 1))
_define(OpDef("bitcast", "layout", 1))
_define(OpDef("transpose", "layout", 1, ("dimensions",)))
_define(OpDef("slice", "layout", 1, ("slice",)))
_define(OpDef("concatenate", "layout", None, ("dimensions",)))
_define(OpDef("pad", "layout", 2, ("padding",)))
_define(OpDef("reverse", "layout", 1, ("dimensions",)))
_define(OpDef("copy", "layout", 1))
# Indexing: start indices are data. Out-of-range starts are clamped (gather, dynamic-slice,
# dynamic-update-slice) or the update is dropped (scatter), as XLA defines them.
_define(OpDef("gather", "layout", 2, (
    "offset_dims", "collapsed_slice_dims", "start_index_map", "index_vector_dim", "slice_sizes",
    "indices_are_sorted", "operand_batching_dims", "start_indices_batching_dims")))
_define(OpDef("dynamic-slice", "layout", None, ("dynamic_slice_sizes",)))
_define(OpDef("dynamic-update-slice", "layout", None))
_define(OpDef("custom-call", "library", None, ("custom_call_target", "backend_config")))
_define(OpDef("sort", "sort", None, ("dimensions", "is_stable", "to_apply")))
_define(OpDef("scatter", "scatter", 3, (
    "update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims", "index_vector_dim",
    "to_apply", "indices_are_sorted", "unique_indices", "input_batching_dims",
    "scatter_indices_batching_dims")))

_define(OpDef("reduce", "reduce", None, ("dimensions", "to_apply")))
_define(OpDef(
    "dot", "dot", 2,
    ("lhs_batch_dims", "lhs_contracting_dims", "rhs_batch_dims", "rhs_contracting_dims",
     "operand_precision"),
))
_define(OpDef("tuple", "tuple", None))
_define(OpDef("get-tuple-element", "tuple", 1, ("index",)))
_define(OpDef("call", "call", None, ("to_apply",)))
# XLA's optimization barrier: its tuple operand, unchanged; passes may not move computation across
# it (so a recomputation in the backward pass, tk.checkpoint's, is not merged with the forward's)
_define(OpDef("opt-barrier", "tuple", 1))
_define(OpDef("fusion", "call", None, ("kind", "calls")))
# XLA's structured control flow: one operand (the loop state), a condition and a body computation;
# a pred[] or s32[] selector, then one operand per branch (out of range: the last branch)
_define(OpDef("while", "control", 1, ("condition", "body")))
_define(OpDef("conditional", "control", None, ("true_computation", "false_computation", "branch_computations")))

FUSION_KINDS = ("kLoop", "kInput", "kOutput", "kCustom")

# Attributes XLA prints that toolkit does not model: the parser keeps them verbatim (``_raw``)
# and prints them back. Any other attribute an op does not list is a mistake, and an error.
KEPT_VERBATIM = frozenset({
    "sharding", "frontend_attributes", "backend_config", "control-predecessors",
    "statistics_viz", "origin", "result_accuracy", "algorithm", "parameter_replication",
    "output_to_operand_aliasing", "schedule", "channel_id", "api_version", "custom_call_has_side_effect",
    "operand_layout_constraints",
})
RAW_ATTRIBUTES = "_raw"  # the kept attributes of a parsed instruction: ((name, text), ...)

COMPARISON_DIRECTIONS = ("EQ", "NE", "LT", "LE", "GT", "GE")
ELEMENTWISE_CATEGORIES = ("unary", "binary", "ternary")


def opdef(opcode: str) -> OpDef:
    try:
        return OPS[opcode]
    except KeyError:
        raise KeyError(f"unknown opcode '{opcode}'") from None


def is_elementwise(opcode: str) -> bool:
    return OPS[opcode].category in ELEMENTWISE_CATEGORIES
