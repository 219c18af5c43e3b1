"""Loop-invariant code motion: work a loop body computes from values the loop never changes
moves in front of the loop, on every backend, with the loop's results unchanged (zero trips
included), and a product with a loop-invariant matrix read transposed reads a transpose made
once before the loop."""
import re

import numpy as np
import pytest

import toolkit as tk
from toolkit.passes.loop_invariants import hoist_loop_invariants
from toolkit.passes.pipeline import make_pipeline
from toolkit.backends.reference.interpreter import EVALUATORS

from test_gpu_emulated import DEVICE  # noqa: F401  (registers the gpu-emulated backend)

BACKENDS = ["interpreter", "cpu", "gpu-emulated"]


def run(fn, backend, *args):
    out = tk.jit(fn, backend=backend, on_recompile="ignore")(*args)
    return tk.device_get(out) if backend == "gpu-emulated" else out


def entry_and_bodies(compiled) -> tuple[str, str]:
    """The entry computation's text, and the loop body's (with the computations it calls)."""
    text = compiled.as_text(metadata=False)
    entry = text[text.index("ENTRY"):]
    body = re.search(r"body=%([\w.-]+)", entry).group(1)
    blocks = {
        m.group(1): m.group(0) for m in re.finditer(r"^%([\w.-]+) \(.*?^}$", text, re.S | re.M)
    }
    called = [blocks[body]] + [blocks[c] for c in re.findall(r"calls=%([\w.-]+)", blocks[body])]
    return entry, "\n".join(called)


def rnn(h, w, n):
    return tk.lax.fori_loop(0, n, lambda i, acc: np.tanh(acc @ w.T), h)


def rnn_python(h, w, n):
    for _ in range(n):
        h = np.tanh(h @ w.T)
    return h


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n", [0, 1, 7])
def test_a_transposed_invariant_matrix_is_transposed_once_before_the_loop(backend, n):
    rng = np.random.default_rng(0)
    h = rng.standard_normal((32, 128)).astype(np.float32)
    w = (rng.standard_normal((128, 128)) * 0.1).astype(np.float32)
    np.testing.assert_allclose(
        run(rnn, backend, h, w, n), rnn_python(h, w, n), rtol=2e-5, atol=2e-6
    )
    entry, bodies = entry_and_bodies(
        tk.jit(rnn, backend=backend, on_recompile="ignore").lower(h, w, n).compile()
    )
    assert "transpose" in entry.split(" while(")[0]  # made in front of the loop
    (dot,) = [line for line in bodies.splitlines() if " dot(" in line]
    assert "rhs_contracting_dims={0}" in dot  # a plain product inside


def test_small_products_keep_their_layout():
    """At most 64**3 multiply-adds, BLAS's small-matrix kernels round the two layouts
    differently, and there is no time to win: the loop stays as written."""
    h = np.ones((8, 64), np.float32)
    w = np.ones((64, 64), np.float32)
    entry, bodies = entry_and_bodies(tk.jit(rnn, backend="cpu").lower(h, w, 3).compile())
    assert "transpose(" not in entry
    assert (
        "rhs_contracting_dims={1}" in [line for line in bodies.splitlines() if " dot(" in line][0]
    )


def scaled_decay(x, b, n):
    return tk.lax.fori_loop(0, n, lambda i, acc: acc * np.exp(b) + x, np.zeros_like(x))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n", [0, 1, 5])
def test_an_invariant_kernel_runs_once_before_the_loop(backend, n):
    x = np.linspace(-1, 1, 300)
    b = np.linspace(-2, 0, 300)
    want = run(scaled_decay, "interpreter", x, b, n)  # NumPy's exp, in the loop as written
    acc = np.zeros_like(x)
    for _ in range(n):
        acc = acc * np.exp(b) + x
    np.testing.assert_array_equal(want, acc)
    np.testing.assert_allclose(run(scaled_decay, backend, x, b, n), want, rtol=1e-14, atol=0)
    entry, bodies = entry_and_bodies(
        tk.jit(scaled_decay, backend=backend, on_recompile="ignore").lower(x, b, n).compile()
    )
    assert "exponential" not in bodies  # no exp left in the loop body ...
    assert "exponential" in entry.split(" while(")[0]  # ... it runs before


WHOLE_STATE = """
HloModule whole_state

%body (s: (s32[], f32[4], f32[4])) -> (s32[], f32[4], f32[4]) {
  %s = (s32[], f32[4], f32[4]) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %one = s32[] constant(1)
  %next = s32[] add(%i, %one)
  %acc = f32[4] get-tuple-element(%s), index=1
  %b = f32[4] get-tuple-element(%s), index=2
  %scale = f32[4] exponential(%b)
  %grown = f32[4] multiply(%acc, %scale)
  ROOT %out = (s32[], f32[4], f32[4]) tuple(%next, %grown, %b)
}

%cond (c: (s32[], f32[4], f32[4])) -> pred[] {
  %c = (s32[], f32[4], f32[4]) parameter(0)
  %k = s32[] get-tuple-element(%c), index=0
  %three = s32[] constant(3)
  ROOT %lt = pred[] compare(%k, %three), direction=LT
}

ENTRY %main (start: s32[], a: f32[4], b: f32[4]) -> (s32[], f32[4], f32[4]) {
  %start = s32[] parameter(0)
  %a = f32[4] parameter(1)
  %b = f32[4] parameter(2)
  %init = (s32[], f32[4], f32[4]) tuple(%start, %a, %b)
  ROOT %loop = (s32[], f32[4], f32[4]) while(%init), condition=%cond, body=%body
}
"""


@pytest.mark.parametrize("start", [0, 2, 9])
def test_a_loop_whose_whole_state_is_the_result_keeps_its_type(start):
    module = tk.hlo.parse(WHOLE_STATE)
    moved, counts = hoist_loop_invariants(module)
    assert counts == {"hoisted exponential": 1}
    assert moved.entry.root.shape == module.entry.root.shape  # the old elements, not the new one
    a = np.array([1.0, -2.0, 0.5, 3.0], np.float32)
    b = np.array([0.0, 0.5, -1.0, 0.25], np.float32)
    for backend in ("interpreter", "cpu"):
        got = tk.hlo.run(module, np.int32(start), a, b, backend=backend)
        want = tk.hlo.run(module, np.int32(start), a, b, backend="interpreter", pipeline="none")
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-6)


def test_the_pass_is_reported_with_what_it_moved():
    h = np.ones((32, 128), np.float32)
    w = np.ones((128, 128), np.float32)
    module = tk.jit(rnn, backend="cpu").lower(h, w, 3).compile().hlo
    result = make_pipeline("default", EVALUATORS).run(module)
    (event,) = [
        p for p in result.passes if p.pass_name == "while-loop-invariant-code-motion" and p.changed
    ]
    assert dict(event.rewrites) == {"hoisted transpose of a dot's right-hand side": 1}


def test_a_transposed_right_hand_side_made_inside_the_loop_moves_out_once():
    """``g @ np.exp(w).T`` with ``w`` invariant: the exp is made and transposed once, in front
    of the loop, and only its transpose enters the loop."""
    def fn(h, w, n):
        return tk.lax.fori_loop(0, n, lambda i, acc: np.tanh(acc @ np.exp(w).T), h)

    rng = np.random.default_rng(1)
    h = rng.standard_normal((32, 128)).astype(np.float32)
    w = (rng.standard_normal((128, 128)) * 0.05).astype(np.float32)
    module = tk.jit(fn, backend="cpu").lower(h, w, 3).compile().hlo
    moved, counts = hoist_loop_invariants(module)
    (before,) = [i for i in module.entry.instructions if i.opcode == "while"]
    (after,) = [i for i in moved.entry.instructions if i.opcode == "while"]
    # the transpose, not exp(w) as well
    assert len(after.shape.elements) == len(before.shape.elements) + 1
    assert counts == {"hoisted transpose of a dot's right-hand side": 1}
    want = h
    for _ in range(3):
        want = np.tanh(want @ np.exp(w).T)
    np.testing.assert_allclose(tk.jit(fn, backend="cpu")(h, w, 3), want, rtol=2e-5, atol=2e-6)
