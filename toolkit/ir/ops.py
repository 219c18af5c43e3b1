"""The closed op table: every fact about an op lives on its ``OpDef`` here, and every other
module derives what it needs (the named groups in ``GroupOp``, ``identity``,
``initial_value``). Consumers that keep one entry per op (shape rules, evaluators, the
printer, the emitters, cost handlers) are checked complete by tests/test_op_tables.py, and
tests/test_op_facts.py fails on an opcode set written anywhere outside ``toolkit/ir``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np


@dataclass(frozen=True, slots=True)
class OpDef:
    name: str  # the opcode as HLO text spells it
    category: str  # see CATEGORIES
    arity: int | None  # None: variadic
    attributes: tuple[str, ...] = ()
    # XLA's HloInstruction::IsTranscendental: counted as 'transcendentals' by cost analysis
    transcendental: bool = False
    # the real element types it takes (OPERAND_TYPES); complex operands are ``on_complex``'s
    operand_types: str = "any"
    on_complex: bool = False  # toolkit computes it on complex numbers (XLA defines more)
    commutative: bool = False  # op(a, b) == op(b, a): a scatter combiner may take either order
    # associative as a reduction treats it (float add reassociates, as XLA's and NumPy's
    # pairwise sums do): reducers, scans and partial-result combining rely on it
    associative: bool = False
    reducer: str | None = None  # REDUCER_KINDS: its family as the ``to_apply`` of a reduce
    # the exact neutral element per NumPy dtype: op(identity, x) == x bit for bit (see identity)
    identity_of: Callable[[np.dtype], object] | None = None
    ufunc: np.ufunc | None = None  # the NumPy ufunc that computes it (reduce, scatter .at)
    fusion: str = "none"  # FUSION_CLASSES: how the fusion pass may take it
    expensive: bool = False  # not duplicated into several fusions (transcendentals too)
    cost: str = "elementwise"  # COST_FAMILIES: the cost-analysis handler that counts it
    # loop invariants: every kernel makes it for free, so it is not worth hoisting by itself
    cheap: bool = False
    bookkeeping: bool = False  # names or forwards values, computes nothing: never a kernel
    aliases_operand: bool = False  # its result shares its operand's buffer (memory analysis)
    foldable: bool = True  # constant folding may replace it by its value
    # may do something besides computing its result. No op toolkit models does: XLA's
    # rng, infeed, outfeed, send and recv are refused by the parser.
    side_effects: bool = False
    # the operand where its scalar start indices begin (the rest are starts, one per dimension)
    scalar_starts_from: int | None = None

    @property
    def calls_computations(self) -> bool:
        """Runs computations named by its attributes (to_apply, calls, condition, body ...)."""
        return any(a in CALLEE_ATTRIBUTE_NAMES for a in self.attributes)


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
    "collective",  # exchanges values between the devices of an SPMD program (all-reduce ...)
)
OPERAND_TYPES = (
    "any",
    "float",  # floating point only (and complex where on_complex)
    "integer",  # signed or unsigned integers only
    "integer_or_pred",  # bitwise ops: integers or pred, never floats
    "numeric",  # not pred (maximum and minimum take pred: they are its or/and)
)
REDUCER_KINDS = (
    "arithmetic",  # add, multiply: NumPy computes np.sum/np.prod of small ints in a wider int
    "selecting",  # maximum, minimum: the result is one of the operands; NumPy's have no identity
    "bitwise",  # and, or, xor: on pred these are the logical ops
)
FUSION_CLASSES = (
    "elementwise",  # one element from the same element of each operand
    "loop",  # remaps indices or makes values (broadcast, slice, iota ...): joins loop fusions
    "reduction",  # the root of an input fusion, never a producer fused into another
    "none",  # its own kernel, a library call, host control or plumbing
)
CALLEE_ATTRIBUTE_NAMES = ("to_apply", "calls", "condition", "body", "true_computation",
                          "false_computation", "branch_computations")


def _add_identity(dt):
    # -0.0, not +0.0: -0.0 + x == x for every x, while +0.0 + -0.0 is +0.0, so folding a +0.0
    # into a sum of -0.0s would change its sign. NumPy's sums start from +0.0 instead: that is
    # initial_value, a different fact (np.sum([-0.0]) is +0.0).
    return -0.0 if dt.kind == "f" else complex(-0.0, -0.0) if dt.kind == "c" else 0


_IDENTITIES: dict[str, Callable[[np.dtype], object]] = {
    "add": _add_identity,
    "multiply": lambda dt: 1,
    "or": lambda dt: 0,
    "xor": lambda dt: 0,
    "and": lambda dt: (True if dt.kind == "b" else -1),
    "maximum": lambda dt: (-np.inf if dt.kind == "f"
                           else (False if dt.kind == "b" else np.iinfo(dt).min)),
    "minimum": lambda dt: (np.inf if dt.kind == "f"
                           else (True if dt.kind == "b" else np.iinfo(dt).max)),
}

# (name, transcendental, operand types, computed on complex numbers)
_UNARY = [
    ("negate", False, "numeric", True), ("abs", False, "numeric", True),
    ("sign", False, "numeric", False), ("not", False, "integer_or_pred", False),
    ("floor", False, "float", False), ("ceil", False, "float", False),
    ("round-nearest-even", False, "float", False), ("round-nearest-afz", False, "float", False),
    ("is-finite", False, "float", False),
    ("exponential", True, "float", True), ("exponential-minus-one", True, "float", False),
    ("log", True, "float", True), ("log-plus-one", True, "float", False),
    ("sqrt", True, "float", True), ("rsqrt", True, "float", False), ("cbrt", True, "float", False),
    ("tanh", True, "float", False), ("logistic", True, "float", False),
    ("sine", True, "float", False), ("cosine", True, "float", False), ("tan", True, "float", False),
    ("erf", True, "float", False),
    ("popcnt", False, "integer", False), ("count-leading-zeros", False, "integer", False),
    # a complex number's parts (of a real number: itself, 0)
    ("real", False, "float", True), ("imag", False, "float", True),
]
_BINARY = [
    ("add", False, "numeric", True), ("subtract", False, "numeric", True),
    ("multiply", False, "numeric", True), ("divide", False, "numeric", True),
    ("remainder", False, "numeric", False), ("power", True, "numeric", False),
    ("maximum", False, "numeric", False), ("minimum", False, "numeric", False),
    ("atan2", True, "float", False), ("and", False, "integer_or_pred", False),
    ("or", False, "integer_or_pred", False), ("xor", False, "integer_or_pred", False),
    ("shift-left", False, "integer", False), ("shift-right-arithmetic", False, "integer", False),
    ("shift-right-logical", False, "integer", False),
    ("complex", False, "any", False),  # complex(real part, imaginary part)
]
# The reducers: commutative, associative, with an identity and a NumPy ufunc
_REDUCERS = {
    "add": ("arithmetic", np.add), "multiply": ("arithmetic", np.multiply),
    "maximum": ("selecting", np.maximum), "minimum": ("selecting", np.minimum),
    "and": ("bitwise", np.bitwise_and), "or": ("bitwise", np.bitwise_or),
    "xor": ("bitwise", np.bitwise_xor),
}
# The NumPy ufunc each other elementwise op is, where it is one as it stands
_UFUNCS = {
    "negate": np.negative, "abs": np.abs, "floor": np.floor, "ceil": np.ceil,
    "round-nearest-even": np.rint, "is-finite": np.isfinite, "exponential": np.exp,
    "exponential-minus-one": np.expm1, "log": np.log, "log-plus-one": np.log1p, "sqrt": np.sqrt,
    "cbrt": np.cbrt, "tanh": np.tanh, "sine": np.sin, "cosine": np.cos, "tan": np.tan,
    "popcnt": np.bitwise_count, "subtract": np.subtract, "atan2": np.arctan2,
}
# Costly enough per element that fusion does not duplicate them (transcendentals also are)
_EXPENSIVE = ("divide", "remainder", "power")

OPS: dict[str, OpDef] = {}


def _define(op: OpDef) -> None:
    assert op.category in CATEGORIES and op.name not in OPS
    assert op.operand_types in OPERAND_TYPES and op.fusion in FUSION_CLASSES
    assert op.reducer is None or op.reducer in REDUCER_KINDS
    OPS[op.name] = op


def _elementwise(name, category, arity, transcendental=False, operand_types="any",
                 on_complex=False, attributes=()):
    kind, ufunc = _REDUCERS.get(name, (None, _UFUNCS.get(name)))
    _define(OpDef(
        name, category, arity, attributes, transcendental, operand_types, on_complex,
        commutative=kind is not None, associative=kind is not None, reducer=kind,
        identity_of=_IDENTITIES.get(name), ufunc=ufunc, fusion="elementwise",
        expensive=transcendental or name in _EXPENSIVE, cost="elementwise"))


for _name, _tr, _types, _complex in _UNARY:
    _elementwise(_name, "unary", 1, _tr, _types, _complex)
for _name, _tr, _types, _complex in _BINARY:
    _elementwise(_name, "binary", 2, _tr, _types, _complex)
_elementwise("compare", "binary", 2, on_complex=True, attributes=("direction", "type"))
_elementwise("convert", "unary", 1)
_elementwise("bitcast-convert", "unary", 1)  # the same bits read as another type of equal width
_elementwise("select", "ternary", 3)
_elementwise("clamp", "ternary", 3)

# Leaves. Constant folding leaves them be: parameters have no value yet, constants are folded
# already, and an iota is cheaper made than stored.
_define(OpDef("parameter", "leaf", 0, ("parameter_number",), cost="zero", cheap=True,
              bookkeeping=True, foldable=False))
_define(OpDef("constant", "leaf", 0, ("literal",), fusion="loop", cost="zero", cheap=True,
              bookkeeping=True, foldable=False))
_define(OpDef("iota", "leaf", 0, ("iota_dimension",), fusion="loop", cost="data", cheap=True,
              foldable=False))

# Layout: no arithmetic, only data movement (a broadcast folds to a bigger constant: left be)
_define(OpDef("broadcast", "layout", 1, ("dimensions",), fusion="loop", cost="data", cheap=True,
              foldable=False))
_define(OpDef("reshape", "layout", 1, fusion="loop", cost="data", cheap=True,
              aliases_operand=True))  # row-major: the same bytes
_define(OpDef("bitcast", "layout", 1, fusion="loop", cost="zero", cheap=True,
              aliases_operand=True))
_define(OpDef("transpose", "layout", 1, ("dimensions",), fusion="loop", cost="transpose"))
_define(OpDef("slice", "layout", 1, ("slice",), fusion="loop", cost="slice", cheap=True))
_define(OpDef("concatenate", "layout", None, ("dimensions",), fusion="loop", cost="data"))
_define(OpDef("pad", "layout", 2, ("padding",), fusion="loop", cost="data"))
_define(OpDef("reverse", "layout", 1, ("dimensions",), fusion="loop", cost="data"))
_define(OpDef("copy", "layout", 1, fusion="loop", cost="data"))
# Indexing: start indices are data. Out-of-range starts are clamped (gather, dynamic-slice,
# dynamic-update-slice) or the update is dropped (scatter), as XLA defines them.
_define(OpDef("gather", "layout", 2, (
    "offset_dims", "collapsed_slice_dims", "start_index_map", "index_vector_dim", "slice_sizes",
    "indices_are_sorted", "operand_batching_dims", "start_indices_batching_dims"),
    fusion="loop", cost="slice"))
_define(OpDef("dynamic-slice", "layout", None, ("dynamic_slice_sizes",), fusion="loop",
              cost="slice", scalar_starts_from=1))
_define(OpDef("dynamic-update-slice", "layout", None, fusion="loop", cost="data",
              scalar_starts_from=2))
_define(OpDef("custom-call", "library", None, ("custom_call_target", "backend_config"),
              cost="custom-call"))
_define(OpDef("sort", "sort", None, ("dimensions", "is_stable", "to_apply"), cost="sort"))
_define(OpDef("scatter", "scatter", 3, (
    "update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims",
    "index_vector_dim", "to_apply", "indices_are_sorted", "unique_indices", "input_batching_dims",
    "scatter_indices_batching_dims"), cost="scatter"))

_define(OpDef("reduce", "reduce", None, ("dimensions", "to_apply"), fusion="reduction",
              expensive=True, cost="reduce"))
# XLA's windowed reduction (ir/windows.py): NumPy's cumsum is its prefix scan, which a kernel of
# its own runs in one pass in NumPy's order
_define(OpDef("reduce-window", "reduce", 2, ("window", "to_apply"), expensive=True,
              cost="reduce-window"))
_define(OpDef(
    "dot", "dot", 2,
    ("lhs_batch_dims", "lhs_contracting_dims", "rhs_batch_dims", "rhs_contracting_dims",
     "operand_precision"), expensive=True, cost="dot",
))
# Tuples only name their elements: no kernel, no work, and nothing to fold
_define(OpDef("tuple", "tuple", None, cost="tuple", cheap=True, bookkeeping=True,
              aliases_operand=True, foldable=False))
_define(OpDef("get-tuple-element", "tuple", 1, ("index",), cost="zero", cheap=True,
              bookkeeping=True, aliases_operand=True, foldable=False))
_define(OpDef("call", "call", None, ("to_apply",), cost="call", foldable=False))
# XLA's optimization barrier: its tuple operand, unchanged; passes may not move computation across
# it (so a recomputation in the backward pass, tk.checkpoint's, is not merged with the forward's)
_define(OpDef("opt-barrier", "tuple", 1, cost="zero", bookkeeping=True, aliases_operand=True,
              foldable=False))
_define(OpDef("fusion", "call", None, ("kind", "calls"), cost="fusion", foldable=False))
# XLA's structured control flow: one operand (the loop state), a condition and a body computation;
# a pred[] or s32[] selector, then one operand per branch (out of range: the last branch)
_define(OpDef("while", "control", 1, ("condition", "body"), cost="while"))
_define(OpDef("conditional", "control", None,
              ("true_computation", "false_computation", "branch_computations"),
              cost="conditional"))

# Collectives (XLA's syntax and semantics; ir/collectives.py): each device of an SPMD program
# runs the same program, and a collective combines the operands of the devices in each of its
# replica groups. Never fused or folded: its value depends on the other devices. The ids are
# u32[] leaves whose value is the device's.
_GROUPED = ("replica_groups", "channel_id", "use_global_device_ids")
_define(OpDef("all-reduce", "collective", 1, _GROUPED + ("to_apply",), cost="collective",
              foldable=False))
_define(OpDef("all-gather", "collective", 1, _GROUPED + ("dimensions",), cost="collective",
              foldable=False))
_define(OpDef("reduce-scatter", "collective", 1, _GROUPED + ("dimensions", "to_apply"),
              cost="collective", foldable=False))
# (array form: one operand split along ``dimensions``; tuple form: one operand per device of a
# group, no dimensions, a tuple result: what XLA's CPU compiler leaves)
_define(OpDef("all-to-all", "collective", None, _GROUPED + ("dimensions",), cost="collective",
              foldable=False))
_define(OpDef("collective-permute", "collective", 1, ("source_target_pairs", "channel_id"),
              cost="collective", foldable=False))
_define(OpDef("replica-id", "collective", 0, cost="collective", foldable=False))
_define(OpDef("partition-id", "collective", 0, cost="collective", foldable=False))

FUSION_KINDS = ("kLoop", "kInput", "kOutput", "kCustom")

# Attributes XLA prints that toolkit does not model: the parser keeps them verbatim (``_raw``)
# and prints them back. Any other attribute an op does not list is a mistake, and an error.
KEPT_VERBATIM = frozenset(
    {
        "sharding",
        "frontend_attributes",
        "backend_config",
        "control-predecessors",
        "statistics_viz",
        "origin",
        "result_accuracy",
        "algorithm",
        "parameter_replication",
        "output_to_operand_aliasing",
        "schedule",
        "channel_id",
        "api_version",
        "custom_call_has_side_effect",
        "operand_layout_constraints",
        "constrain_layout",
    }
)
RAW_ATTRIBUTES = "_raw"  # the kept attributes of a parsed instruction: ((name, text), ...)

COMPARISON_DIRECTIONS = ("EQ", "NE", "LT", "LE", "GT", "GE")
ELEMENTWISE_CATEGORIES = ("unary", "binary", "ternary")
# The cost-analysis handler families (passes/cost_analysis.py has one handler for each), after
# XLA's HloCostAnalysis handlers
COST_FAMILIES = ("zero", "elementwise", "data", "transpose", "slice", "tuple", "dot", "reduce",
                 "reduce-window", "scatter", "sort", "custom-call", "fusion", "call", "while",
                 "conditional", "collective")


def opdef(opcode: str) -> OpDef:
    try:
        return OPS[opcode]
    except KeyError:
        raise KeyError(f"unknown opcode '{opcode}'") from None


def is_elementwise(opcode: str) -> bool:
    return OPS[opcode].category in ELEMENTWISE_CATEGORIES


def _ops(test: Callable[[OpDef], bool]) -> frozenset[str]:
    return frozenset(name for name, op in OPS.items() if test(op))


class GroupOp:
    """Named sets of opcodes, each derived from the facts on ``OpDef`` (tinygrad's GroupOp)."""
    LEAVES = _ops(lambda op: op.category == "leaf")
    ELEMENTWISE = _ops(lambda op: op.category in ELEMENTWISE_CATEGORIES)
    LAYOUT = _ops(lambda op: op.category == "layout")
    # an element of the result is computed from operand elements: the elemental emitters' ops
    PER_ELEMENT = LEAVES | ELEMENTWISE | LAYOUT
    CONTROL = _ops(lambda op: op.category == "control")  # run called computations from the host
    # exchange values between the devices of an SPMD program: host steps between kernels, where
    # the device's thread meets its group (ir/collectives.py)
    COLLECTIVE = _ops(lambda op: op.category == "collective")
    # every device of the group gets the same value: made once, copied for the others
    SAME_RESULT_IN_GROUP = frozenset({"all-reduce", "all-gather"})
    # horizontal batching's ops (passes/horizontal_batching.py): each computes alike lanes as
    # one instruction with a leading batch dimension; of these, a dot or a reduce batched is
    # worth it alone (one library call or one row-wise kernel for all the lanes)
    LANE_BATCHABLE = ELEMENTWISE | frozenset({"broadcast", "transpose", "reshape", "copy", "slice",
                                              "reduce", "dot"})
    BATCHED_ALONE = frozenset({"dot", "reduce"})
    # library calls on the host, between kernels (NumPy's sort, LAPACK)
    LIBRARY = _ops(lambda op: op.category in ("sort", "library"))
    TRANSCENDENTAL = _ops(lambda op: op.transcendental)
    COMMUTATIVE = _ops(lambda op: op.commutative)
    ASSOCIATIVE = _ops(lambda op: op.associative)
    # the elementwise ops a reduce's ``to_apply`` may be, each with an identity and a ufunc
    REDUCERS = _ops(lambda op: op.reducer is not None)
    ARITHMETIC_REDUCERS = _ops(lambda op: op.reducer == "arithmetic")
    SELECTING_REDUCERS = _ops(lambda op: op.reducer == "selecting")
    BITWISE_REDUCERS = _ops(lambda op: op.reducer == "bitwise")
    LOOP_FUSIBLE = _ops(lambda op: op.fusion == "loop")
    EXPENSIVE = _ops(lambda op: op.expensive)
    CHEAP = _ops(lambda op: op.cheap)
    BOOKKEEPING = _ops(lambda op: op.bookkeeping)  # never a kernel: reported and planned as none
    ALIASING = _ops(lambda op: op.aliases_operand)
    NOT_FOLDABLE = _ops(lambda op: not op.foldable)
    CALLS_COMPUTATIONS = _ops(lambda op: op.calls_computations)
    # stay where they are in a loop body: host control, host library calls, side effects
    PINNED = CONTROL | LIBRARY | _ops(lambda op: op.side_effects)
    ON_COMPLEX = _ops(lambda op: op.on_complex)
    FLOAT_OPERANDS = _ops(lambda op: op.operand_types == "float")
    INTEGER_OPERANDS = _ops(lambda op: op.operand_types == "integer")
    INTEGER_OR_PRED_OPERANDS = _ops(lambda op: op.operand_types == "integer_or_pred")
    NUMERIC_OPERANDS = _ops(lambda op: op.operand_types == "numeric")
    # reshape, bitcast: the same elements in the same row-major order, under another shape
    RESHAPES = ALIASING & LAYOUT
    # their elements are their operand's, repeated or regrouped: of a scalar, still one value
    SAME_ELEMENTS = RESHAPES | frozenset({"broadcast"})
    # name or regroup values made elsewhere (constants, though bookkeeping, are values of their own)
    PLUMBING = BOOKKEEPING - frozenset({"constant"})
    GIVEN = LEAVES & BOOKKEEPING  # parameters and constants: values the program does not compute
    # name values made elsewhere: the buffer plan gives them their operands' buffers
    BUFFER_ALIASES = PLUMBING - frozenset({"parameter"})
    # their result is their first operand with a window or some elements written: a kernel may
    # write those into the operand's buffer, where nothing needs the old value afterwards
    WRITE_INTO_OPERAND = frozenset({"dynamic-update-slice", "scatter"})
    KNOWN_VALUES = LEAVES - PLUMBING  # constant, iota: known when the program is compiled
    # what a compile summary counts as kernels: fusions and library matrix products
    COUNTED_AS_KERNELS = frozenset({"fusion", "dot"})
    # cost arithmetic or a choice per element, not only an index: concatenate and pad choose
    # between their operands for every element
    CHOOSES_PER_ELEMENT = ELEMENTWISE | frozenset({"concatenate", "pad"})


def identity(opcode: str, dtype) -> object:
    """The exact neutral element of the reducer ``opcode`` for a NumPy ``dtype``: folding it
    in changes nothing, bit for bit (float add's is -0.0, so that a sum of -0.0s stays -0.0).
    What the simplifier drops and what kernels start accumulators and pad scans with."""
    fn = OPS[opcode].identity_of
    if fn is None:
        raise KeyError(f"'{opcode}' is not a reducer: it has no identity")
    return fn(np.dtype(dtype))


def initial_value(opcode: str, dtype) -> object:
    """The value a NumPy reduction by ``opcode`` starts from: the ufunc's own ``identity``
    where NumPy has one (+0.0 for add: np.sum of an empty array, or of -0.0s, is +0.0), else
    the exact identity (maximum, minimum: -inf and inf, or the type's extremes)."""
    dt = np.dtype(dtype)
    start = OPS[opcode].ufunc.identity if OPS[opcode].reducer is not None else None
    if start is None:
        return identity(opcode, dt)
    return bool(start) if dt.kind == "b" else start


def reducer_ufunc(opcode: str) -> np.ufunc:
    """The NumPy ufunc that reduces by the reducer ``opcode`` (and combines partial results)."""
    if opcode not in GroupOp.REDUCERS:
        raise KeyError(f"'{opcode}' is not a reducer")
    return OPS[opcode].ufunc
