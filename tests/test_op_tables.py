"""Every table keyed by opcode covers exactly the closed op table."""
import pytest

from toolkit.backends.reference.interpreter import EVALUATORS
from toolkit.ir.ops import CATEGORIES, OPS
from toolkit.ir.printer import check_printer_covers_ops
from toolkit.ir.shape_inference import SHAPE_RULES
from toolkit.frontend.ad_partials import PARTIALS, ZERO_DERIVATIVE, NotDifferentiable
from toolkit.frontend.ad_rules import JVP_RULES, VJP_RULES
from toolkit.frontend import autodiff  # noqa: F401  (registers the control-flow rules)
from toolkit.frontend.batching import BATCH_RULES
from toolkit.passes.cost_analysis import COST_RULES


@pytest.mark.parametrize(
    "table,name",
    [
        (SHAPE_RULES, "shape rules"),
        (EVALUATORS, "interpreter"),
        (COST_RULES, "cost model"),
        (JVP_RULES, "forward-mode rules"),
        (VJP_RULES, "reverse-mode rules"),
        (BATCH_RULES, "vmap rules"),
    ],
)
def test_table_covers_every_op(table, name):
    assert set(table) == set(OPS), (
        f"{name}: missing {set(OPS) - set(table)}, extra {set(table) - set(OPS)}"
    )


def test_every_elementwise_op_has_its_derivative_or_a_reason():
    from toolkit.ir.ops import is_elementwise
    elementwise = {
        n for n in OPS if is_elementwise(n) and n not in ("convert", "bitcast-convert", "clamp")
    }
    assert set(PARTIALS) == elementwise
    for name in OPS:  # a rule, the zero derivative, or a stated reason: never a silent gap
        for table in (JVP_RULES, VJP_RULES, BATCH_RULES):
            rule = table[name]
            assert callable(rule) or isinstance(rule, NotDifferentiable) and rule.reason, name
    assert all(
        callable(p) or p == ZERO_DERIVATIVE or isinstance(p, NotDifferentiable)
        for p in PARTIALS.values()
    )


def test_printer_knows_every_attribute():
    check_printer_covers_ops()


def test_op_definitions_are_consistent():
    for name, op in OPS.items():
        assert op.name == name
        assert op.category in CATEGORIES
        if op.category == "unary":
            assert op.arity == 1
        if op.category == "binary":
            assert op.arity == 2


def test_ufunc_table_only_emits_known_ops():
    import inspect

    from toolkit.frontend import ufuncs

    source = inspect.getsource(ufuncs)
    import re

    for opcode in re.findall(r'elementwise\("([a-z\-]+)"', source) + re.findall(
        r'_op\("([a-z\-]+)"\)', source
    ):
        assert opcode in OPS, opcode


def test_llvm_elemental_table_covers_every_op_a_kernel_computes():
    from toolkit.backends.llvm.elemental import ELEMENTAL
    from toolkit.ir.ops import GroupOp

    # the rest are kernels of their own, BLAS, plumbing, library calls and host control
    assert set(ELEMENTAL) == GroupOp.PER_ELEMENT


def test_cost_analysis_has_one_handler_per_op_family():
    """XLA's HloCostAnalysis has a handler per opcode family; toolkit's op table names each
    op's family, and each family has its own handler (none is a catch-all)."""
    from toolkit.ir.ops import COST_FAMILIES, GroupOp
    from toolkit.passes.cost_analysis import COST_HANDLERS

    assert set(COST_HANDLERS) == set(COST_FAMILIES)
    assert len(set(COST_HANDLERS.values())) == len(COST_FAMILIES)
    assert {op.cost for op in OPS.values()} == set(COST_FAMILIES)  # every family counts an op
    for name, op in OPS.items():
        assert COST_RULES[name] is COST_HANDLERS[op.cost], name
    assert {n for n, op in OPS.items() if op.cost == "elementwise"} == GroupOp.ELEMENTWISE
