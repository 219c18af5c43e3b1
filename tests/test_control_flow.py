"""XLA's structured control flow in the IR: ``while`` and ``conditional`` parse and print in
XLA's syntax (XLA's own parser accepts the text), have shape rules, and run on the interpreter,
the CPU backend (each called computation a compiled program of its own, driven by a host loop)
and the GPU backend (on the host for now)."""
import numpy as np
import pytest

import toolkit as tk
from toolkit.passes.cost_analysis import cost_analysis

from test_gpu_emulated import DEVICE  # noqa: F401  (registers the gpu-emulated backend)

BACKENDS = ["interpreter", "cpu", "gpu-emulated"]

LOOPS = """HloModule loops

%body (state: (s32[], f32[8])) -> (s32[], f32[8]) {
  %state = (s32[], f32[8]) parameter(0)
  %idx = s32[] get-tuple-element(%state), index=0
  %data = f32[8] get-tuple-element(%state), index=1
  %one = s32[] constant(1)
  %next = s32[] add(%idx, %one)
  %update = f32[2] constant({10, 20})
  %new = f32[8] dynamic-update-slice(%data, %update, %idx)
  %twice = f32[8] add(%new, %new)
  ROOT %out = (s32[], f32[8]) tuple(%next, %twice)
}

%cond (state.1: (s32[], f32[8])) -> pred[] {
  %state.1 = (s32[], f32[8]) parameter(0)
  %i = s32[] get-tuple-element(%state.1), index=0
  %limit = s32[] constant(3)
  ROOT %lt = pred[] compare(%i, %limit), direction=LT
}

%neg (x: f32[8]) -> f32[8] {
  %x = f32[8] parameter(0)
  ROOT %n = f32[8] negate(%x)
}

%ident (y: f32[8]) -> f32[8] {
  ROOT %y = f32[8] parameter(0)
}

%twice (z: f32[8]) -> f32[8] {
  %z = f32[8] parameter(0)
  ROOT %t = f32[8] add(%z, %z)
}

ENTRY %main (start: s32[], data: f32[8], k: s32[]) -> (f32[8], f32[8], f32[8]) {
  %start = s32[] parameter(0)
  %data = f32[8] parameter(1)
  %k = s32[] parameter(2)
  %init = (s32[], f32[8]) tuple(%start, %data)
  %loop = (s32[], f32[8]) while(%init), condition=%cond, body=%body
  %result = f32[8] get-tuple-element(%loop), index=1
  %zero = s32[] constant(0)
  %p = pred[] compare(%k, %zero), direction=GT
  %c1 = f32[8] conditional(%p, %result, %data), true_computation=%neg, false_computation=%ident
  %c2 = f32[8] conditional(%k, %result, %data, %result), branch_computations={%neg, %ident, %twice}
  ROOT %all = (f32[8], f32[8], f32[8]) tuple(%result, %c1, %c2)
}
"""


def expected(start, data, k):
    idx, x = int(start), data.copy()
    while idx < 3:
        lo = min(max(idx, 0), 6)  # dynamic-update-slice clamps the start
        x[lo:lo + 2] = [10, 20]
        x = x + x
        idx += 1
    c1 = -x if k > 0 else data
    branch = k if 0 <= k < 3 else 2  # an index out of range takes the last branch
    c2 = [-x, data, x + x][branch]
    return x, c1, c2


def test_while_and_conditional_print_as_xla_and_parse_back():
    module = tk.hlo.parse(LOOPS)
    text = module.to_text(metadata=False)
    assert "while(%init), condition=%cond, body=%body" in text
    assert (
        "conditional(%p, %result, %data), true_computation=%neg, false_computation=%ident" in text
    )
    assert "branch_computations={%neg, %ident, %twice}" in text
    assert tk.hlo.parse(text).to_text(metadata=False) == text


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("start, k", [(0, -1), (0, 0), (1, 1), (-2, 2), (5, 7)])
def test_loops_and_branches_run_as_xla_defines_them(backend, start, k):
    module = tk.hlo.parse(LOOPS)
    data = np.arange(8, dtype=np.float32)
    got = tk.hlo.run(module, np.int32(start), data, np.int32(k), backend=backend)
    got = [tk.device_get(g) for g in got]
    for g, w in zip(got, expected(start, data, k)):
        np.testing.assert_array_equal(g, w)


def test_the_cpu_backend_compiles_each_called_computation():
    module = tk.hlo.parse(LOOPS)
    from toolkit.backends import get_backend
    from toolkit.backends.reference.interpreter import EVALUATORS
    from toolkit.passes.pipeline import make_pipeline

    executable = get_backend("cpu").compile(make_pipeline("default", EVALUATORS).run(module).module)
    kinds = {s.inst.opcode: s.kind for s in executable.steps}
    assert kinds["while"] == "control" and kinds["conditional"] == "control"
    assert not executable.fallbacks


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_a_long_loop_and_a_nested_one(backend):
    text = """HloModule nested

%inner_body (s: (s32[], f32[])) -> (s32[], f32[]) {
  %s = (s32[], f32[]) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %x = f32[] get-tuple-element(%s), index=1
  %one = s32[] constant(1)
  %half = f32[] constant(0.5)
  %i1 = s32[] add(%i, %one)
  %x1 = f32[] add(%x, %half)
  ROOT %t = (s32[], f32[]) tuple(%i1, %x1)
}

%inner_cond (s.1: (s32[], f32[])) -> pred[] {
  %s.1 = (s32[], f32[]) parameter(0)
  %i.1 = s32[] get-tuple-element(%s.1), index=0
  %four = s32[] constant(4)
  ROOT %lt = pred[] compare(%i.1, %four), direction=LT
}

%outer_body (o: (s32[], f32[])) -> (s32[], f32[]) {
  %o = (s32[], f32[]) parameter(0)
  %n = s32[] get-tuple-element(%o), index=0
  %acc = f32[] get-tuple-element(%o), index=1
  %zero = s32[] constant(0)
  %start = (s32[], f32[]) tuple(%zero, %acc)
  %w = (s32[], f32[]) while(%start), condition=%inner_cond, body=%inner_body
  %acc1 = f32[] get-tuple-element(%w), index=1
  %one.1 = s32[] constant(1)
  %n1 = s32[] add(%n, %one.1)
  ROOT %r = (s32[], f32[]) tuple(%n1, %acc1)
}

%outer_cond (o.1: (s32[], f32[])) -> pred[] {
  %o.1 = (s32[], f32[]) parameter(0)
  %n.1 = s32[] get-tuple-element(%o.1), index=0
  %limit = s32[] parameter(0)
  ROOT %lt.1 = pred[] compare(%n.1, %n.1), direction=NE
}

ENTRY %main (trips: s32[]) -> f32[] {
  %trips = s32[] parameter(0)
  %f = f32[] constant(0)
  %init = (s32[], f32[]) tuple(%trips, %f)
  %loop = (s32[], f32[]) while(%init), condition=%outer_cond2, body=%outer_body
  ROOT %out = f32[] get-tuple-element(%loop), index=1
}
"""
    # a count-down outer loop: trips iterations of the inner 4 (each adds 0.5)
    text = text.replace("%outer_cond (o.1", "%outer_cond2 (o.1").replace(
        "  %limit = s32[] parameter(0)\n  ROOT %lt.1 = pred[] compare(%n.1, %n.1), direction=NE",
        "  %big = s32[] constant(2500)\n  ROOT %lt.1 = pred[] compare(%n.1, %big), direction=LT")
    module = tk.hlo.parse(text)
    (out,) = tk.hlo.run(module, np.int32(0), backend=backend)
    assert out == np.float32(2500 * 4 * 0.5)


@pytest.mark.parametrize("body_root, message", [
    ("ROOT %out = s32[] get-tuple-element(%state), index=0", "must return the loop state's shape"),
])
def test_a_body_of_the_wrong_shape_is_refused(body_root, message):
    text = LOOPS.replace("ROOT %out = (s32[], f32[8]) tuple(%next, %twice)", body_root).replace(
        "%body (state: (s32[], f32[8])) -> (s32[], f32[8])",
        "%body (state: (s32[], f32[8])) -> s32[]",
    )
    with pytest.raises(Exception, match=message):
        tk.hlo.parse(text)


@pytest.mark.parametrize(
    "old, new, message",
    [
        (
            "ROOT %lt = pred[] compare(%i, %limit), direction=LT",
            "ROOT %lt = s32[] add(%i, %limit)",
            "must return pred",
        ),
        (
            "conditional(%k, %result, %data, %result), branch_computations",
            "conditional(%p, %result, %data, %result), branch_computations",
            "needs an s32",
        ),
        (
            "conditional(%p, %result, %data), true",
            "conditional(%p, %result), true",
            "2 branches but 1",
        ),
    ],
)
def test_the_ir_refuses_malformed_control_flow(old, new, message):
    text = LOOPS.replace(old, new).replace(
        "%cond (state.1: (s32[], f32[8])) -> pred[]",
        "%cond (state.1: (s32[], f32[8])) -> s32[]"
        if "add(%i" in new
        else "%cond (state.1: (s32[], f32[8])) -> pred[]",
    )
    with pytest.raises(Exception, match=message):
        tk.hlo.parse(text)


def test_cost_analysis_counts_one_trip_as_xla_does():
    from toolkit.passes.cost_analysis import computation_cost, instruction_cost

    module = tk.hlo.parse(LOOPS)
    loop = next(i for i in module.entry.instructions if i.opcode == "while")
    body, cond = (
        computation_cost(module.computation("body")),
        computation_cost(module.computation("cond")),
    )
    assert instruction_cost(loop)["flops"] == body["flops"] + cond["flops"] == 1 + 8 + 1
    branches = next(i for i in module.entry.instructions if i.attrs.get("branch_computations"))
    assert instruction_cost(branches)["flops"] == 8  # the costliest branch (twice: an add)
    assert cost_analysis(module)["flops"] >= 10


def test_xla_parses_and_runs_the_loops_as_printed():
    pytest.importorskip("jax", reason="JAX not installed")
    from test_xla_acceptance import xla_run

    module = tk.hlo.parse(LOOPS)
    data = np.arange(8, dtype=np.float32)
    for k in (0, 1, 2, 7):
        theirs = xla_run(module.to_text(), [np.int32(0), data, np.int32(k)])
        for t, w in zip(theirs, expected(0, data, k)):
            np.testing.assert_array_equal(t, w)
