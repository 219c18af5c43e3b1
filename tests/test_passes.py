"""Passes: each rewrite rule, folding, CSE, DCE, the manager, memory analysis; and every pass
leaves the interpreter's results unchanged on random programs."""
from collections import Counter

import numpy as np
import pytest
from hypothesis import given

import toolkit as tk
import toolkit.numpy as tnp
from toolkit.backends.reference.interpreter import EVALUATORS
from toolkit.ir.verifier import verify
from toolkit.passes.constant_folding import constant_folding
from toolkit.passes.cse import cse, dce
from toolkit.passes.fusion import fuse
from toolkit.passes.manager import PassError, Pipeline
from toolkit.passes.pipeline import make_pipeline
from toolkit.passes.simplify import RULES, simplify

from test_random_programs import inputs_strategy, run_program, steps_strategy

f32 = np.float32
x34 = np.arange(12, dtype=f32).reshape(3, 4) - 5


# (the tracer no longer emits this: ``y[1:] += 1`` stores its view back untraced; JAX's
# ``y.at[1:].set(y[1:])`` and XLA's own passes leave it)
_OWN_WINDOW = """  one = s64[] constant(1)
  zero = s64[] constant(0)
  rows = f32[2,4] slice(p), slice={[1:3], [0:4]}
  d = f32[3,4] dynamic-update-slice(p, rows, one, zero)
  ROOT r = f32[3,4] add(d, d)"""


RULE_CASES = {
    "dynamic-update-slice(x, slice(x) at the same window) -> x": (_OWN_WINDOW, x34),
    "add(x, -0.0 or integer 0) -> x": (lambda x: x + -0.0, x34),
    "subtract(x, 0) -> x": (lambda x: x - 0, x34),
    # (-x: a product of -0.0 would be -0.0; the empty sum is +0.0, as NumPy's)
    "dot contracting an empty dimension -> zeros": (lambda x: (-x)[:, :0] @ x[:0, :], x34),
    "multiply(x, 1) -> x": (lambda x: 1 * x, x34),
    "divide(x, 1) -> x": (lambda x: x / 1, x34),
    "integer multiply(x, 0) -> 0": (lambda x: x * 0, x34.astype(np.int32)),
    "slice(pad(x)) inside x -> slice(x)": (
        lambda x: np.pad(x, ((1, 2), (3, 0)))[1:4, 4:7:2], x34),
    # (a clamped index compared with bounds the clamp already keeps it in: always false)
    "integer compare(clamp(lo, x, hi), c) decided by the bounds -> constant": (
        "  c = s32[3,4] convert(p)\n  lo = s32[] constant(0)\n  hi = s32[] constant(3)\n"
        "  k = s32[3,4] clamp(lo, c, hi)\n  four = s32[] constant(4)\n"
        "  b = s32[3,4] broadcast(four), dimensions={}\n"
        "  ROOT r = pred[3,4] compare(k, b), direction=GE", x34),
    "divide(x, 2^k) -> multiply(x, 2^-k)": (lambda x: x / 8.0, x34),
    "power(x, 1) -> x": (lambda x: x**1, x34),
    # (an exponent array of 2s: np.power with a single exponent 2 is traced as x * x already)
    "power(x, 2) -> multiply(x, x)": (lambda x: np.power(x, np.full(x.shape, 2.0)), x34),
    # exact here (small integers), and the signs of -0.0 ** 3 and -0.0 ** -3 are pow's
    "power(x, integer n) -> multiplies (square and multiply; 1/x^n for n < 0)": (
        lambda x: x**3 + x**-3.0 + x**7,
        x34,
    ),
    "negate(negate(x)) -> x": (lambda x: -(-x), x34),
    "dot(s*A, x) -> s*dot(A, x) (when the dot's result is smaller)": (
        lambda x: (2.0 * x) @ x[0],
        x34,
    ),
    "not(not(x)) -> x": (lambda x: ~~x, x34.astype(np.int32)),
    "dot(transpose(x), y) -> dot(x, y), the dimension numbers renumbered (transpose folding)": (
        lambda x: x.T @ x + (x @ x.T)[0, 0],
        x34,
    ),
    # batched, with the contracting dimension first on the left (a transpose): (3, 4, 1) @ (3, 1, 4)
    "dot contracting only size-1 dimensions (an outer product) -> multiply": (
        lambda x: np.matmul(x[:, None, :].transpose(0, 2, 1), x[:, None, :]) + np.outer(x[0], x[1]),
        x34,
    ),
    "no-op reshape -> x": ("  ROOT r = f32[3,4] reshape(p)", x34),
    "reshape(reshape(x)) -> reshape(x)": (lambda x: x.reshape(12).reshape(2, 6), x34),
    "no-op transpose -> x": ("  ROOT r = f32[3,4] transpose(p), dimensions={0,1}", x34),
    "transpose(transpose(x)) -> transpose(x)": (lambda x: x.T.T + x.T[None].T[..., 0], x34),
    "no-op convert -> x": ("  ROOT r = f32[3,4] convert(p)", x34),
    "no-op slice -> x": ("  ROOT r = f32[3,4] slice(p), slice={[0:3], [0:4]}", x34),
    # strided and offset windows of windows, and an empty one
    "slice(slice(x)) -> slice(x)": (
        lambda x: x[1:, ::2][:, 1:].sum() * x[::2, 1:][1:, ::2]
        + x[:, 1:][:, 3:].size + x[::-1][1:, 1:3][::2, ::-1][0, 0]
        + x[:, 1::2][:, 2:].sum(),  # (empty, its start past the end: 1 + 2 * 2 > 4)
        x34,
    ),
    # a strided window reversed along one of its dimensions, then along both
    "reverse(slice(x)) -> slice(reverse(x))": (
        "  s = f32[2,2] slice(p), slice={[0:3:2], [1:4:2]}\n"
        "  r1 = f32[2,2] reverse(s), dimensions={1}\n"
        "  t = f32[2,3] slice(p), slice={[1:3], [0:3]}\n"
        "  r2 = f32[2,3] reverse(t), dimensions={0,1}\n"
        "  ROOT o = (f32[2,2], f32[2,3]) tuple(r1, r2)", x34),
    "no-op broadcast -> x": ("  ROOT r = f32[3,4] broadcast(p), dimensions={0,1}", x34),
    "broadcast(broadcast(x)) -> broadcast(x)": (
        "  s = f32[1,4] slice(p), slice={[0:1], [0:4]}\n"
        "  r = f32[4] reshape(s)\n"
        "  b1 = f32[3,4] broadcast(r), dimensions={1}\n"
        "  ROOT b2 = f32[2,3,4] broadcast(b1), dimensions={1,2}",
        x34,
    ),
    "no-op copy -> x": (lambda x: np.copy(x), x34),
    "concatenate(x) -> x": ("  ROOT r = f32[3,4] concatenate(p), dimensions={0}", x34),
    "get-tuple-element(tuple(...)) -> element": (
        "  t = (f32[3,4], f32[3,4]) tuple(p, p)\n  ROOT r = f32[3,4] get-tuple-element(t), index=1",
        x34,
    ),
    "select(constant predicate) -> branch": (
        lambda x: tnp.where(tnp.full((3, 4), True), x, -x),
        x34,
    ),
    # a row sum (one float32 line each) and a sum across lines (rounded to float16 every step)
    "float16 add/multiply reduce -> float32 accumulation along lines": (
        lambda x: (x * 1000).astype(np.float16).reshape(3, 2, 2).sum(axis=(0, 2))
        + x.astype(np.float16).prod(1)[0],
        x34,
    ),
    "reduce over size-1 dimensions -> reshape": (lambda x: x.reshape(3, 1, 4).max(axis=1), x34),
    # kept dimensions in the source's order, and out of it (a transpose of the result)
    "reduce(transpose(x)) -> transpose(reduce(x))": (
        lambda x: (x.T.sum(axis=1), x.reshape(3, 2, 2).transpose(2, 0, 1).max(axis=1)),
        x34,
    ),
    "elementwise(reshape(x), reshape(y)) -> reshape(elementwise(x, y))": (
        lambda x: x.reshape(12) * x.reshape(12),
        x34,
    ),
    "elementwise(transpose(x), broadcast(v)) -> transpose(elementwise(x, broadcast(v)))": (
        lambda x: np.maximum(x.T - x[0][:, None], 0.5) * 2,
        x34,
    ),
}


def test_every_rule_has_a_case():
    assert set(RULE_CASES) == set(RULES)


@pytest.mark.parametrize("rule", sorted(RULE_CASES))
def test_rule_fires_and_preserves_results(rule):
    fn, x = RULE_CASES[rule]
    if isinstance(fn, str):  # HLO text: shapes JAX prints and the tracer never emits
        module = tk.hlo.parse(f"HloModule m\nENTRY e {{\n  p = f32[3,4] parameter(0)\n{fn}\n}}\n")
    else:
        module = tk.jit(fn).lower(x).hlo
    simplified, counts = simplify(module)
    assert counts[rule] >= 1, counts
    verify(simplified)
    if x.dtype.kind == "f":  # a rewrite must keep the sign of zero too
        x = np.where(x == 0, np.float32(-0.0), x)
    expected = tk.hlo.run(module, x)
    got = tk.hlo.run(simplified, x)
    for e, g in zip(expected, got):
        np.testing.assert_array_equal(e, g)
        np.testing.assert_array_equal(np.signbit(e), np.signbit(g))


def test_a_reduction_of_a_transposed_matrix_is_numpys_to_the_bit():
    """NumPy reduces a transposed view in memory order: ``x.T.mean(axis=1)`` adds x's rows
    one after another, as the column sums of ``x`` do. Through the simplifier the CPU backend
    runs it as those column sums (bit for bit NumPy's, and 6x faster than reading x a column
    at a time as a row reduction, which summed in another order); every permutation and
    reducer of a 3-D array agrees with NumPy."""
    import itertools

    rng = np.random.default_rng(7)
    x = rng.standard_normal((600, 500))
    for f in (lambda x: x.T.mean(axis=1), lambda x: x.T.sum(axis=1, keepdims=True),
              lambda x: np.mean(x.T, axis=1) - x.T.min(axis=1)):
        np.testing.assert_array_equal(np.asarray(tk.jit(f)(x)), f(x))
    y = rng.standard_normal((5, 6, 7))
    for perm in itertools.permutations(range(3)):
        for axes in (0, 1, 2, (0, 1), (1, 2), (0, 2), None):
            for reducer in (np.sum, np.max, np.argmax):
                if reducer is np.argmax and isinstance(axes, tuple):
                    continue

                def f(y, perm=perm, axes=axes, reducer=reducer):
                    return reducer(np.transpose(y, perm), axis=axes)

                got, want = np.asarray(tk.jit(f)(y)), f(y)
                assert got.shape == want.shape and got.dtype == want.dtype
                np.testing.assert_allclose(got, want, rtol=1e-13)


def test_a_transposed_array_minus_a_broadcast_runs_in_its_memory_order():
    """np.cov(data.T) centres ``data.T - mean[:, None]`` and multiplies the result by its
    transpose. The subtraction runs over data in its own memory order (its transpose moved to
    the result, where the dot takes it as BLAS's transpose flag, as NumPy's BLAS call does):
    no fusion of the optimised program reads a transpose, and the CPU backend's covariance is
    NumPy's bit for bit. Broadcasts whose dimensions would fall out of order under the
    permutation keep the transpose in place."""
    rng = np.random.default_rng(3)
    data = rng.standard_normal((60, 50))
    f = lambda d: np.cov(np.transpose(d))  # noqa: E731
    np.testing.assert_array_equal(np.asarray(tk.jit(f, backend="cpu")(data)), f(data))
    optimised = tk.jit(f, backend="cpu").lower(data).compile().as_text()
    assert " transpose(" not in optimised, optimised
    y = rng.standard_normal((4, 5, 6))
    z = rng.standard_normal((6, 4))
    for g in (lambda y, z: np.transpose(y, (2, 0, 1)) * z[:, :, None],  # dims (0, 1) -> (2, 0)
              lambda y, z: np.transpose(y, (2, 0, 1)) - z[:, 0, None, None] + 1.0,
              lambda y, z: np.abs(np.transpose(y, (1, 2, 0))).sum(axis=0)):
        for backend in ("interpreter", "cpu"):
            np.testing.assert_array_equal(np.asarray(tk.jit(g, backend=backend)(y, z)), g(y, z))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_an_outer_product_dot_matches_numpy_to_the_sign_of_zero(dtype, backend):
    """NumPy's matmul sums from +0.0, so (-0.0) * 1.0 through a k = 1 matmul is +0.0 while
    np.outer gives -0.0: the multiply the dot becomes keeps each one's sign."""
    a = (
        np.array([-0.0, 1.0, -2.0, 3.0], dtype)
        if dtype != np.int32
        else np.arange(-2, 2, dtype=dtype)
    )
    b = np.array([1.0, -0.0, 0.0], dtype) if dtype != np.int32 else np.array([7, -1, 0], dtype)
    for fn in (
        lambda a, b: a[:, None] @ b[None, :],
        np.outer,
        lambda a, b: np.einsum("i,j->ij", a, b),
    ):
        got, want = tk.jit(fn, backend=backend)(a, b), fn(a, b)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    assert (
        "dot(" not in tk.jit(lambda a, b: a[:, None] @ b[None, :]).lower(a, b).compile().as_text()
    )


TRANSPOSED_DOTS = {  # name: (function, operand shapes, whether every transpose folds)
    "x.T @ y": (lambda x, y: x.T @ y, [(5, 3), (5, 4)], True),
    "x @ y.T": (lambda x, y: x @ y.T, [(3, 5), (4, 5)], True),
    "x.T @ x (one buffer: BLAS's syrk in NumPy)": (lambda x: x.T @ x, [(6, 4)], True),
    "batched, swapped matrices": (
        lambda x, y: np.swapaxes(x, 1, 2) @ y,
        [(2, 5, 3), (2, 5, 4)],
        True,
    ),
    "batch dimension moved": (
        lambda x, y: np.transpose(x, (1, 0, 2)) @ y,
        [(3, 2, 5), (2, 5, 4)],
        True,
    ),
    # the left operand's free dimensions (3, 2) would come out in x's order (2, 3): not folded
    "free dimensions reordered": (
        lambda x, y: np.tensordot(np.transpose(x, (1, 0, 2)), y, axes=([2], [0])),
        [(2, 3, 5), (5, 4)],
        False,
    ),
}


@pytest.mark.parametrize("name", sorted(TRANSPOSED_DOTS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_transposes_fold_into_dots_and_match_numpy(name, dtype):
    fn, shapes, folds = TRANSPOSED_DOTS[name]
    rng = np.random.default_rng(0)
    args = [(rng.standard_normal(s) * 4).astype(dtype) for s in shapes]
    if dtype != np.int64:
        args[0].flat[0] = -0.0
    compiled = tk.jit(fn).lower(*args).compile()
    _, counts = simplify(tk.jit(fn).lower(*args).hlo)
    rule = "dot(transpose(x), y) -> dot(x, y), the dimension numbers renumbered (transpose folding)"
    assert (counts[rule] >= 1) == folds, counts
    assert ("transpose" not in compiled.as_text()) == folds
    want = fn(*args)
    got = tk.jit(fn)(*args)
    assert got.dtype == want.dtype and got.shape == want.shape
    tolerance = 1e-6 if dtype == np.float32 else 1e-13  # of the largest result: sums cancel
    np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance * np.abs(want).max())


def test_a_window_written_elsewhere_is_not_a_no_op():
    text = (
        "  s = f32[2,4] slice(p), slice={[0:2], [0:4]}\n  one = s64[] constant(1)\n"
        "  zero = s64[] constant(0)\n"
        "  ROOT r = f32[3,4] dynamic-update-slice(p, s, one, zero)"
    )
    module = tk.hlo.parse(f"HloModule m\nENTRY e {{\n  p = f32[3,4] parameter(0)\n{text}\n}}\n")
    simplified, counts = simplify(module)
    assert counts["dynamic-update-slice(x, slice(x) at the same window) -> x"] == 0
    np.testing.assert_array_equal(tk.hlo.run(simplified, x34)[0], tk.hlo.run(module, x34)[0])


@pytest.mark.parametrize("fn", [lambda x: x + 0.0, lambda x: 0.0 + x, lambda x: x - -0.0,
                                lambda x: x.reshape(2, 1).sum(axis=1)],
                         ids=["x+0.0", "0.0+x", "x-(-0.0)", "sum over size-1 axis"])
@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_adding_positive_zero_is_not_simplified_away(fn, backend):
    x = np.array([-0.0, 1.5], f32)  # NumPy: -0.0 + 0.0 is +0.0, so x + 0.0 is not x
    got = tk.jit(fn, backend=backend)(x)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(fn(x)))
    assert not np.signbit(got[0])


def test_float_multiply_by_zero_is_kept():
    module = tk.jit(lambda x: x * 0.0).lower(np.array([np.nan, np.inf, 1.0])).hlo
    simplified, counts = simplify(module)
    assert not counts
    got = tk.hlo.run(simplified, np.array([np.nan, np.inf, 1.0]))[0]
    assert np.isnan(got[0]) and np.isnan(got[1]) and got[2] == 0


def test_division_by_non_power_of_two_is_kept():
    _, counts = simplify(tk.jit(lambda x: x / 3.0).lower(x34).hlo)
    assert not counts


def test_constant_folding_and_broadcast_scalars():
    module = tk.jit(lambda x: x + (tnp.full((3, 4), 2.0, np.float32) * 3 + 1)).lower(x34).hlo
    folded, counts = constant_folding(module, EVALUATORS)
    assert counts["fold elementwise op of broadcast scalars"] == 2
    assert "constant(7)" in folded.to_text()
    np.testing.assert_array_equal(tk.hlo.run(folded, x34)[0], x34 + 7)


def test_cse_and_dce():
    module = tk.jit(lambda x: np.exp(x) + np.exp(x)).lower(x34).hlo
    deduped, counts = cse(module)
    assert counts == Counter({"duplicate exponential": 1})
    assert deduped.to_text().count("exponential(") == 1
    text = """HloModule m
    ENTRY e {
      p = f32[2] parameter(0)
      dead = f32[2] negate(p)
      ROOT r = f32[2] abs(p)
    }"""
    from toolkit.ir.parser import parse_module

    parsed = parse_module(text)
    cleaned, counts = dce(parsed)
    assert counts["dead instruction"] == 1 and "negate" not in cleaned.to_text()


def test_manager_times_verifies_and_dumps():
    f = tk.jit(lambda x: np.exp(x - 0) * 2, dump_passes="simplify|fusion")
    c = f.lower(x34).compile()
    names = [p.pass_name for p in c.pass_events]
    assert names[:7] == [
        "call-inliner",
        "loop-rolling",
        "while-loop-invariant-code-motion",
        "dot-canonicalization",
        "simplify",
        "constant-folding",
        "cse",
    ]
    assert names[-6:] == ["dce", "horizontal-batching", "all-reduce-combiner",
                          "concatenate-splitting", "fusion", "offset-operands"]
    assert all(p.duration >= 0 for p in c.pass_events)
    assert dict(c.pass_events[4].rewrites) == {"subtract(x, 0) -> x": 1}
    dumps = c.pass_dumps
    assert [d.pass_name for d in dumps] == ["simplify", "simplify", "fusion"]
    assert "-  %subtract" in dumps[0].diff and "+  ROOT %loop_multiply_fusion" in dumps[-1].diff
    assert dumps[-1].text == c.as_text()
    assert c.rewrites["subtract(x, 0) -> x"] == 1


def test_a_broken_pass_is_named():
    def breaks(module):
        entry = module.entry
        bad = type(entry)(entry.name, entry.parameters, entry.instructions[::-1], entry.root)
        return (
            type(module)(module.name, module.computations[:-1] + (bad,), bad),
            Counter({"x": 1}),
            [],
        )

    module = tk.jit(lambda x: np.exp(x) * 2).lower(x34).hlo
    with pytest.raises(PassError, match="pass 'breaker' produced an invalid module"):
        Pipeline("test", (("breaker", breaks),)).run(module)


@pytest.mark.parametrize("setting", ["end", None])
def test_verified_once_at_the_end_a_broken_pass_is_still_named(setting, monkeypatch):
    """Outside the test suite (TOOLKIT_VERIFY_PASSES=end, the default) the module is verified
    once, after the last pass; an invalid one is optimised again, verified after each pass,
    so the error still names the pass that broke it, and the passes after it never hide it."""
    from toolkit.passes.simplify import simplify

    if setting is None:
        monkeypatch.delenv("TOOLKIT_VERIFY_PASSES", raising=False)
    else:
        monkeypatch.setenv("TOOLKIT_VERIFY_PASSES", setting)
    calls = []

    def breaks(module):
        calls.append(1)
        entry = module.entry
        bad = type(entry)(entry.name, entry.parameters, entry.instructions[::-1], entry.root)
        return type(module)(module.name, module.computations[:-1] + (bad,), bad), Counter(), []

    def simplify_pass(module):
        new, rewrites = simplify(module)
        return new, rewrites, []

    module = tk.jit(lambda x: np.exp(x) * 2).lower(x34).hlo
    with pytest.raises(PassError, match="pass 'breaker' produced an invalid module") as info:
        Pipeline("test", (("breaker", breaks), ("later", lambda m: (m, Counter(), [])))).run(
            module)
    assert len(calls) == 2  # once, found invalid at the end; once more, verified pass by pass
    assert "uses %" in str(info.value) and "before it is defined" in str(info.value)
    ok = Pipeline("test", (("simplify", simplify_pass),)).run(module, verify_each=False)
    assert ok.module is not None


def test_an_unknown_verification_setting_warns_and_verifies_at_the_end(monkeypatch):
    from toolkit.config import ConfigWarning
    from toolkit.passes.manager import verify_passes

    monkeypatch.setenv("TOOLKIT_VERIFY_PASSES", "sometimes")
    with pytest.warns(ConfigWarning, match="TOOLKIT_VERIFY_PASSES"):
        assert verify_passes() == "end"


def _rebuilding(change):
    """A pass that rebuilds the entry's root with ``change(root)`` (and every other
    instruction as it was)."""
    def rebuild(module):
        entry = module.entry
        root = change(entry.root)
        bad = type(entry)(entry.name, entry.parameters, entry.instructions[:-1] + (root,), root)
        return type(module)(module.name, module.computations[:-1] + (bad,), bad), Counter(), []
    return rebuild


@pytest.mark.parametrize("each", [True, False])
def test_the_verifier_after_a_pass_infers_what_the_pass_changed(each):
    """After a pass, the verifier skips shape inference only for what it already answered
    (the same opcode, shape, attributes and operand shapes) or what the builder inferred; a
    pass that keeps an instruction's attributes but gives it the wrong shape, or edits one
    with dataclasses.replace (which never copies the builder's mark), is still caught, after a
    first pass that changed the module. Verified once at the end (``each`` False, outside the
    test suite) the same holds: what the builder answered is trusted, nothing else."""
    import dataclasses

    from toolkit.ir.shapes import Shape

    module = tk.jit(lambda x: np.exp(x) * 2).lower(x34).hlo
    root = module.entry.root
    assert root.shape_inferred  # made by the builder
    renamed = _rebuilding(lambda r: dataclasses.replace(r, name=r.name + "_renamed"))
    wrong = Shape(root.shape.dtype, (4, 3))
    for change in (lambda r: dataclasses.replace(r, shape=wrong),
                   lambda r: type(r)(r.name, r.opcode, wrong, r.operands, r.attrs, r.metadata)):
        assert not change(root).shape_inferred
        with pytest.raises(PassError, match="pass 'breaker' produced an invalid module"):
            Pipeline("test", (("rename", renamed), ("breaker", _rebuilding(change)))).run(
                module, verify_each=each)
    # the same edits with the right shape pass
    Pipeline("test", (("rename", renamed),
                      ("same", _rebuilding(lambda r: dataclasses.replace(r, shape=root.shape))))
             ).run(module, verify_each=each)


def test_a_rebuilt_instruction_keeps_the_builders_mark_only_around_the_same_shapes():
    """``with_operands`` around operands of the very shapes the builder inferred from keeps
    its mark (inference would answer the same); around another shape object, even an equal
    one, it does not, and the verifier at the end of a pipeline infers it."""
    from toolkit.ir.shapes import Shape
    from toolkit.passes.rewriter import with_operands

    module = tk.jit(lambda x: np.exp(x) * 2).lower(x34).hlo
    root = module.entry.root
    assert root.shape_inferred
    exp, two = root.operands
    assert exp.shape is two.shape and with_operands(root, [two, exp]).shape_inferred
    other = type(exp)(exp.name, exp.opcode, Shape(exp.shape.dtype, (3, 4)), exp.operands,
                      exp.attrs, exp.metadata)
    assert not with_operands(root, [exp, other]).shape_inferred


@pytest.mark.parametrize("asked", [1, 10_000])
def test_the_questions_of_the_given_module_are_made_only_when_asking_costs_more(asked):
    """Verified once at the end, a pipeline trusts what the builder answered for the module it
    was given; the set of those questions (0.2 s for a 200k-instruction trace) is made only
    once enough instructions no builder made ask. Either way the answers are the same: an
    instruction not trusted is inferred."""
    from toolkit.ir.verifier import _shape_question, built_questions_lazily

    def steps(x):
        for _ in range(30):
            x = np.exp(x) * 2
        return x

    module = tk.jit(steps).lower(x34).hlo
    lazy = built_questions_lazily(module).questions
    made = [_shape_question(i) for i in module.entry.instructions if i.shape_inferred]
    answers = [made[k % len(made)] in lazy for k in range(asked)]
    if asked == 1:
        assert answers == [False] and lazy.questions is None  # (inferred instead)
    else:
        assert lazy.questions == set(made) and answers[-1]


def test_unknown_pipeline():
    with pytest.raises(ValueError, match="unknown pipeline"):
        tk.jit(lambda x: x, pipeline="O9")
    assert (
        tk.jit(lambda x: x + 0, pipeline="none").lower(x34).compile().as_text().count("add(") == 1
    )


def test_memory_analysis():
    # broadcast(2) -> x*2 -> exp; log(x); exp*log: at most two f32[1000] temporaries are live
    # at once (x*2 with exp, then exp with log), and the output joins exp and log at the end
    c = (
        tk.jit(lambda x: np.exp(x * 2) * np.log(x), pipeline="none")
        .lower(np.ones(1000, f32))
        .compile()
    )
    m = c.memory_analysis()
    assert m.argument_size_in_bytes == 4000 and m.output_size_in_bytes == 4000
    assert m.temp_size_in_bytes == 2 * 4000
    assert m.peak_memory_in_bytes == 4000 + 2 * 4000 + 4000
    fused = tk.jit(lambda x: np.exp(x * 2) * np.log(x)).lower(np.ones(1000, f32)).compile()
    assert fused.memory_analysis().temp_size_in_bytes == 0  # one fusion: no temporaries


@given(steps=steps_strategy, data=inputs_strategy(np.float64))
def test_every_pass_and_the_pipeline_preserve_results(steps, data):
    x, y = data
    module = tk.jit(lambda a, b: run_program(steps, a, b)).lower(x, y).hlo
    expected = tk.hlo.run(module, x, y)
    candidates = [simplify(module)[0], constant_folding(module, EVALUATORS)[0], cse(module)[0],
                  dce(module)[0], fuse(simplify(module)[0]).module,
                  make_pipeline("default", EVALUATORS).run(module).module]
    for candidate in candidates:
        verify(candidate)
        got = tk.hlo.run(candidate, x, y)
        for e, g in zip(expected, got):
            np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12, equal_nan=True)
        again = tk.hlo.parse(candidate.to_text())
        assert again.to_text() == candidate.to_text()


def test_decisions_are_stamped_with_their_compile_when_first_read():
    """The pipeline keeps the passes' decisions as made and stamps them with the compile's id
    and the pass's start when they are first read (an unprofiled compile never reads them):
    every decision read, through loop bodies too, carries them."""
    from toolkit.passes.pipeline import make_pipeline
    from toolkit.stages import _REFERENCE_EVALUATORS

    def f(x):
        y = np.exp(x) * 2 + 1
        return tk.lax.fori_loop(0, 3, lambda i, v: np.tanh(v) * 0.5 + v, y)

    module = tk.jit(f).lower(x34).hlo
    result = make_pipeline("default", _REFERENCE_EVALUATORS).run(module, compile_id=7)
    assert result._unstamped and not result._stamped  # nothing stamped until read
    decisions = result.decisions
    assert decisions and all(d.compile_id == 7 and d.start > 0 for d in decisions)
    assert any(d.fused for d in decisions)
    assert result.decisions is decisions and not result._unstamped  # stamped once


@pytest.mark.parametrize("direction, c, want", [
    ("LT", 0, False), ("LT", 4, True), ("LT", 2, None), ("LE", 3, True), ("LE", -1, False),
    ("GT", -1, True), ("GT", 3, False), ("GE", 0, True), ("GE", 4, False), ("GE", 2, None),
    ("EQ", 7, False), ("EQ", 1, None), ("NE", -5, True), ("NE", 0, None)])
def test_a_clamped_compare_is_decided_only_where_the_bounds_decide_it(direction, c, want):
    from toolkit.passes.simplify import _decided

    assert _decided(direction, 0, 3, c) is want
    values = np.arange(0, 4)  # every value the clamp can give
    op = {"LT": np.less, "LE": np.less_equal, "GT": np.greater, "GE": np.greater_equal,
          "EQ": np.equal, "NE": np.not_equal}[direction](values, c)
    assert (want is None) == (op.any() and not op.all()) and (want is None or op.all() == want)


def test_a_clamp_whose_bounds_cross_is_not_decided_by_them():
    """XLA's clamp(5, x, 2) is 2 for every x: [5, 2] is no range, and nothing is folded."""
    module = tk.hlo.parse("""HloModule m
ENTRY e {
  p = s32[4] parameter(0)
  lo = s32[] constant(5)
  hi = s32[] constant(2)
  k = s32[4] clamp(lo, p, hi)
  three = s32[] constant(3)
  b = s32[4] broadcast(three), dimensions={}
  ROOT r = pred[4] compare(k, b), direction=GT
}
""")
    simplified, counts = simplify(module)
    assert not any("clamp" in rule for rule in counts)
    x = np.array([0, 3, 7, -9], np.int32)
    for backend in ("interpreter", "cpu"):
        np.testing.assert_array_equal(np.asarray(tk.hlo.run(module, x, backend=backend)[0]),
                                      np.zeros(4, bool))
