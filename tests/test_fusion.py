"""Fusion: golden optimised HLO for the anchor workloads, and a reason for every decision."""
import os
import pathlib
import re

import numpy as np
import pytest

import toolkit as tk
from toolkit import bench_compile
from toolkit.passes.fusion import FUSED_REASONS, REASONS, FusionOptions, fuse
from toolkit.passes.simplify import simplify

import programs

GOLDEN = pathlib.Path(__file__).parent / "golden"
UPDATE = os.environ.get("TOOLKIT_UPDATE_GOLDEN") == "1"


def compiled(fn, *args, **options):
    return tk.jit(fn, **options).lower(*args).compile()


def kernels(c):
    return [i for i in c.optimized_hlo.entry.instructions if i.opcode in ("fusion", "dot")]


def decisions(c, producer_op=None, consumer_op=None):
    ops = {i.name: i.opcode for comp in (c.hlo.computations) for i in comp.instructions}
    return [d for d in c.fusion_decisions
            if (producer_op is None or ops.get(d.producer) == producer_op)
            and (consumer_op is None or ops.get(d.consumer) == consumer_op)]


@pytest.mark.parametrize("name", ["add_one", "softmax", "layernorm", "mlp_layer", "gelu"])
def test_golden_optimized_hlo(name):
    fn, args = programs.make_cases(np.random.default_rng(0))[name]
    text = compiled(fn, *args).as_text(metadata=False)
    path = GOLDEN / f"{name}.optimized.hlo"
    if UPDATE or not path.exists():
        path.write_text(text)
    assert text == path.read_text()


def test_add_one_is_one_loop_fusion_with_the_constant_inside():
    c = compiled(programs.add_one, np.ones((10, 10), np.float32))
    (k,) = kernels(c)
    assert k.attrs["kind"] == "kLoop" and k.name == "loop_add_fusion"
    assert [i.opcode for i in k.attrs["calls"].instructions] == [
        "parameter",
        "constant",
        "broadcast",
        "add",
    ]
    assert c.optimized_hlo.entry.root is k


def test_gelu_is_one_fusion():
    c = compiled(programs.gelu, np.ones((4, 33), np.float32))
    assert len(kernels(c)) == 1 and kernels(c)[0].attrs["kind"] == "kLoop"


def test_softmax_is_at_most_three_kernels_with_exp_computed_once():
    c = compiled(programs.softmax, np.ones((8, 128), np.float32))
    ks = kernels(c)
    assert len(ks) == 3
    assert [k.attrs["kind"] for k in ks] == ["kInput", "kInput", "kLoop"]
    exp_kernels = [
        k for k in ks if any(i.opcode == "exponential" for i in k.attrs["calls"].instructions)
    ]
    assert len(exp_kernels) == 1  # exp is not duplicated: the sum's fusion also writes it out
    assert [d.reason for d in decisions(c, "exponential", "divide")] == [
        "EXPENSIVE_WOULD_DUPLICATE"
    ]
    assert [d.reason for d in decisions(c, "exponential", "reduce")] == ["MULTI_OUTPUT"]


def _gelu_summed_and_added(x):
    y = 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))
    return np.sqrt(np.abs(y.sum(axis=1, keepdims=True))) + y


def test_a_multi_output_value_read_by_a_duplicated_reader_is_written_out_once():
    """tanh feeds a cheap chain duplicated into two fusions: the row sum's (which computes
    tanh, a multi-output extra) and the final add's. The add's copy must read tanh from the
    sum's fusion: tanh was once written out by neither, so the whole chain ran again unfused,
    op by op (seven kernels and two materialised broadcasts, 2.6x slower)."""
    x = np.random.default_rng(0).standard_normal((16, 40)).astype(np.float32)
    c = compiled(_gelu_summed_and_added, x)
    ops = [i.opcode for i in c.optimized_hlo.entry.instructions]
    assert set(ops) <= {"parameter", "fusion", "get-tuple-element"}, ops
    (reduce_fusion,) = [k for k in kernels(c) if k.attrs["kind"] == "kInput"]
    assert reduce_fusion.shape.is_tuple  # tanh written out beside the sums
    tanh_kernels = [k for k in kernels(c)
                    if any(i.opcode == "tanh" for i in k.attrs["calls"].instructions)]
    assert tanh_kernels == [reduce_fusion]
    assert [d.reason for d in decisions(c, "tanh")] == ["MULTI_OUTPUT"]
    np.testing.assert_allclose(tk.jit(_gelu_summed_and_added)(x), _gelu_summed_and_added(x),
                               rtol=1e-5, atol=1e-5)


def test_layernorm_mean_and_variance_rejection_is_explained():
    fn, args = programs.make_cases(np.random.default_rng(0))["layernorm"]
    c = compiled(fn, *args)
    assert len(kernels(c)) == 4  # mean, variance, the per-row sqrt, the normalisation
    (sqrt,) = decisions(c, "sqrt")
    assert sqrt.reason == "EXPENSIVE_BROADCAST" and "broadcast" in sqrt.message
    (d,) = decisions(c, "reduce", "reduce")
    assert d.reason == "WOULD_CREATE_CYCLE" and not d.fused
    assert "needs the result of" in d.message
    assert d.producer_location and d.consumer_location


def test_independent_sibling_reductions_share_one_fusion():
    c = compiled(lambda x: (x.sum(axis=1), (x * x).sum(axis=1)), np.ones((8, 16), np.float32))
    (k,) = kernels(c)
    assert k.attrs["kind"] == "kInput" and k.shape.is_tuple
    assert [d.reason for d in decisions(c, "reduce", "reduce")] == ["SIBLING_MULTI_OUTPUT"]


def test_mlp_keeps_the_dot_a_library_call_with_the_epilogue_fused():
    fn, args = programs.make_cases(np.random.default_rng(0))["mlp_layer"]
    c = compiled(fn, *args)
    dot, epilogue = kernels(c)
    assert dot.opcode == "dot"
    assert epilogue.attrs["kind"] == "kLoop"
    assert {i.opcode for i in epilogue.attrs["calls"].instructions} >= {
        "add",
        "maximum",
        "broadcast",
    }
    assert [d.reason for d in decisions(c, "dot")] == ["LIBRARY_CALL"]


def test_shared_exp_with_two_consumers_is_not_duplicated():
    """Not copied into each consumer's fusion: computed once, in one kernel with both
    consumers, which read it at the element they compute (producer-consumer multi-output)."""
    c = compiled(lambda x: (np.exp(x) + 1, np.exp(x) * 2), np.ones(8, np.float32))
    got = {(d.reason, d.fused) for d in decisions(c, "exponential")}
    assert got == {("EXPENSIVE_WOULD_DUPLICATE", False), ("LOOP_PRODUCER_CONSUMER", True)}
    (k,) = kernels(c)
    assert k.shape.is_tuple and len(k.shape.elements) == 2  # exp itself is not written out
    assert sum(i.opcode == "exponential" for i in k.attrs["calls"].instructions) == 1


def test_an_unrolled_loop_of_elementwise_steps_is_one_kernel():
    """A binary search unrolled over its rounds (np.searchsorted's): each round reads the last
    round's bounds at its own element, and every bound has several readers. Producer fusions
    merge into their consumers (XLA's producer-consumer multi-output fusion): 14 kernels became
    2 (for the interpolation written with it here, as np.interp's was)."""
    xp = np.sort(np.random.default_rng(0).random(500))
    fp = np.random.default_rng(1).standard_normal(500)
    x = np.linspace(-0.1, 1.1, 1000)

    def interpolate(x, xp, fp):
        i = np.clip(np.searchsorted(xp, x, side="right") - 1, 0, xp.size - 2)
        return fp[i] + (fp[i + 1] - fp[i]) * (x - xp[i]) / (xp[i + 1] - xp[i])

    c = compiled(interpolate, x, xp, fp)
    loops = [k for k in kernels(c) if k.opcode == "fusion" and k.attrs["kind"] == "kLoop"]
    assert len(loops) == 2, [k.name for k in loops]
    assert "LOOP_PRODUCER_CONSUMER" in {d.reason for d in c.fusion_decisions}
    np.testing.assert_array_equal(tk.jit(interpolate)(x, xp, fp), interpolate(x, xp, fp))


def test_cheap_producer_is_duplicated_into_every_consumer():
    c = compiled(lambda x: (x * 2 + 1, x * 2 - 1), np.ones(8, np.float32))
    assert {d.reason for d in decisions(c, "multiply")} == {"FUSED"}
    # the two fusions then compute the same x * 2: one kernel writes both (sibling loops)
    (k,) = kernels(c)
    assert k.shape.is_tuple and len(k.shape.elements) == 2
    assert "LOOP_MULTI_OUTPUT" in {d.reason for d in c.fusion_decisions}


def _masked_grid():
    return np.linspace(-2, 0.5, 24)[None, :] + 1j * np.linspace(-1.2, 1.2, 20)[:, None]


def _iterate_masked(c):
    z = np.zeros_like(c)
    count = np.zeros(c.shape, np.int64)
    for n in range(12):
        inside = np.abs(z) < 2.0
        count = np.where(inside, n, count)
        z = np.where(inside, z * z + c, z)
    return z, count


@pytest.mark.parametrize("backend", ["cpu", "gpu-simulated", "interpreter"])
def test_a_multi_output_loop_fusion_runs_on_every_backend(backend):
    c = _masked_grid()
    z, count = tk.jit(_iterate_masked, backend=backend)(c)
    want_z, want_count = _iterate_masked(c)
    np.testing.assert_array_equal(np.asarray(count), want_count)
    np.testing.assert_allclose(np.asarray(z), want_z, rtol=1e-13, atol=1e-13)
    x = np.linspace(-1, 1, 1000, dtype=np.float32)
    pair = tk.jit(lambda v: (v * 2 + 1, np.tanh(v * 2) - 1), backend=backend)(x)
    np.testing.assert_allclose(np.asarray(pair[0]), x * 2 + 1, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(pair[1]), np.tanh(x * 2) - 1, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_a_multi_output_loop_fusion_assembles_for_the_gpu(arch, tmp_path):
    from toolkit.backends.gpu import compile_ptx
    from test_gpu_codegen import PTXAS, assemble

    if PTXAS is None:
        pytest.skip("ptxas (CUDA toolkit) is not on the PATH")
    c = _masked_grid()
    module = tk.jit(_iterate_masked, backend="interpreter").compiled(c).optimized_hlo
    assert any(i.opcode == "fusion" and i.shape.is_tuple and i.attrs["kind"] == "kLoop"
               for i in module.entry.instructions)
    program = compile_ptx(module, arch)
    assert program.kernels and not program.unsupported, program.unsupported
    assemble(program.ptx, arch, tmp_path)


def test_loop_fusions_computing_the_same_chain_share_one_kernel():
    """A masked iteration written as NumPy users write it (npbench's mandelbrot): the state
    and the iteration counter are both outputs of the same 12-step chain. Each fusion once
    held its own copy of the chain, so it ran twice (mandelbrot 60x60: 348 -> 187 us)."""
    c = _masked_grid()
    compiled_ = compiled(_iterate_masked, c)
    fusions = [k for k in kernels(compiled_) if k.opcode == "fusion"]
    chains = [k for k in fusions if any(i.opcode == "abs" for i in k.attrs["calls"].instructions)]
    assert len(chains) == 1 and chains[0].shape.is_tuple  # the chain in one kernel, two outputs
    assert "LOOP_MULTI_OUTPUT" in {d.reason for d in compiled_.fusion_decisions}
    got = tk.jit(_iterate_masked)(c)
    want = _iterate_masked(c)
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_allclose(got[0], want[0], rtol=1e-13, atol=1e-13)


def _through_a_third_kernel(x, y):
    t = y * 2.0
    s = x * 2.0
    rb = s * 3.0
    c1 = t + 1.0
    c2 = t * 5.0 + rb[::-1]  # (read reversed: not at the element computed, so the two pairs'
    ra = s + c1[::-1]  # kernels cannot become one kernel either)
    return ra, rb, c1, c2


def test_loop_merges_that_close_a_cycle_through_a_third_kernel_are_taken_back():
    """{ra, rb} share s * 2 and {c1, c2} share y * 2: each pair alone may merge, but both
    merged, the first kernel reads c1 from the second and the second rb from the first. Each
    pairwise check passed; the merge crashed compiling (a cycle between kernels). One check of
    the whole kernel graph now takes the second merge back."""
    x, y = np.linspace(0, 1, 8), np.linspace(1, 2, 8)
    c = compiled(_through_a_third_kernel, x, y)
    reasons = [d.reason for d in c.fusion_decisions]
    assert reasons.count("LOOP_MULTI_OUTPUT") == 1 and "WOULD_CREATE_CYCLE" in reasons
    for got, want in zip(tk.jit(_through_a_third_kernel)(x, y), _through_a_third_kernel(x, y)):
        np.testing.assert_array_equal(got, want)


def test_a_cycle_no_check_caught_reruns_fusion_without_multi_output(monkeypatch):
    """The safety net under every multi-output check: with the kernel-graph check switched
    off, the merges above close a cycle, which emitting the kernels finds; fusion then runs
    again without multi-output fusion, and the program is right."""
    from toolkit.passes.fusion_siblings import SiblingMerging

    monkeypatch.setattr(SiblingMerging, "_kernel_cycle", lambda self: False)
    x, y = np.linspace(0, 1, 8), np.linspace(1, 2, 8)
    c = compiled(_through_a_third_kernel, x, y)
    assert any(k.startswith("multi-output fusion undone: a cycle between kernels")
               for k in c.rewrites)
    assert not any(i.opcode == "fusion" and i.shape.is_tuple
                   for i in c.optimized_hlo.entry.instructions)
    for got, want in zip(tk.jit(_through_a_third_kernel)(x, y), _through_a_third_kernel(x, y)):
        np.testing.assert_array_equal(got, want)


def test_loop_fusions_that_need_each_others_result_stay_apart():
    def chained(x):
        m = x * 3.0  # cheap: copied into both fusions below
        a = np.exp(m)  # an output, and read reversed by the second fusion
        b = np.log(a[::-1]) + m  # needs all of a first: it cannot run in a's kernel
        return a, b

    x = np.linspace(0, 1, 64)
    c = compiled(chained, x)
    (d,) = [d for d in c.fusion_decisions if d.reason == "WOULD_CREATE_CYCLE"]
    assert not d.fused and "needs the result of" in d.message
    assert "LOOP_MULTI_OUTPUT" not in {d.reason for d in c.fusion_decisions}
    for g, w in zip(tk.jit(chained)(x), chained(x)):
        np.testing.assert_allclose(g, w, rtol=1e-13)


def test_reduction_feeding_a_reduction():
    c = compiled(lambda x: x.sum(axis=1).max(), np.ones((4, 8), np.float32))
    (d,) = decisions(c, "reduce", "reduce")
    assert d.reason == "BOTH_REDUCTIONS" and not d.fused
    assert len(kernels(c)) == 2


def test_fusion_budget_on_operands():
    def many(a, b, c, d, e):
        return a + b + c + d + e

    args = [np.ones(4, np.float32)] * 5
    module, _ = simplify(tk.jit(many).lower(*args).hlo)
    result = fuse(module, FusionOptions(max_operands=3))
    reasons = {d.reason for d in result.decisions}
    assert "BUDGET_OPERANDS" in reasons
    message = next(d.message for d in result.decisions if d.reason == "BUDGET_OPERANDS")
    assert "(budget 3)" in message
    np.testing.assert_array_equal(tk.hlo.run(result.module, *args)[0], np.full(4, 5, np.float32))


def test_outputs_and_library_call_consumers():
    c = compiled(
        lambda x, w: (x * 2, (x * x) @ w), np.ones((2, 3), np.float32), np.ones((3, 2), np.float32)
    )
    assert {d.reason for d in decisions(c, "multiply", "tuple")} == {"ROOT"}
    assert {d.reason for d in decisions(c, "multiply", "dot")} == {"LIBRARY_CALL"}


def test_every_decision_has_a_known_reason_and_locations():
    for name, (fn, args) in programs.make_cases(np.random.default_rng(0)).items():
        c = compiled(fn, *args)
        for d in c.fusion_decisions:
            assert d.reason in REASONS, d
            assert d.message.startswith(REASONS[d.reason])
            assert d.fused == (d.reason in FUSED_REASONS)
            assert d.bytes_saved >= 0


def test_fused_computations_map_back_to_source_lines():
    c = compiled(programs.softmax, np.ones((8, 128), np.float32))
    for k in kernels(c):
        members = [
            i for i in k.attrs["calls"].instructions if i.opcode not in ("parameter", "tuple")
        ]
        assert all(
            m.metadata.source_file.endswith("programs.py")
            for m in members
            if m.opcode != "constant"
        )
        assert re.fullmatch(r"(loop|input)_[a-z\-]+_fusion(\.\d+)?", k.name), k.name
        assert k.attrs["calls"].name.startswith("fused_")


def test_fusion_cost_counts_only_parameters_and_outputs():
    c = compiled(programs.add_one, np.ones((10, 10), np.float32))
    cost = c.cost_analysis()
    assert cost["flops"] == 100
    # read x, write the result: the constant stays inside
    assert cost["bytes accessed"] == 400 + 400
    # broadcast, add
    assert (
        compiled(programs.add_one, np.ones((10, 10), np.float32), pipeline="none").cost_analysis()[
            "bytes accessed"
        ]
        == (4 + 400) + 400 * 3
    )


def test_profile_records_fusion_decisions_and_pass_events():
    f = tk.jit(programs.softmax)
    with tk.profile() as prof:
        f(np.ones((4, 16), np.float32))
    assert {p.pass_name for p in prof.passes} == {
        "call-inliner",
        "loop-rolling",
        "while-loop-invariant-code-motion",
        "dot-canonicalization",
        "simplify",
        "constant-folding",
        "cse",
        "dce",
        "horizontal-batching",
        "all-reduce-combiner",
        "concatenate-splitting",
        "fusion",
        "offset-operands",
    }
    assert prof.fusion_decisions and all(
        d.compile_id == prof.compiles[0].compile_id for d in prof.fusion_decisions
    )


# ---- limits that keep fusion linear in program size -------------------------------------------
def _stencil(steps):
    def f(a):
        for _ in range(steps):
            a = 0.33333 * (a[:-2] + a[1:-1] + a[2:])
        return a
    return f


def test_stencil_steps_fuse_in_pairs_and_the_step_before_is_stored():
    """A step's windows of the step before are recomputed in its kernel (3 evaluations per
    element, within the budget of 4); the step before that would be evaluated 9 times, so it
    is stored: one kernel per two steps, not one kernel recomputing 3**6 paths."""
    x = np.linspace(0, 1, 64)
    c = compiled(_stencil(6), x)
    assert len(kernels(c)) == 3
    reuse = [d for d in c.fusion_decisions if d.reason == "REUSES_ELEMENTS"]
    assert len(reuse) == 2 * 3 and "more than 4 different index maps" in reuse[0].message
    assert "at most 4 times per element" in reuse[0].message
    np.testing.assert_array_equal(tk.jit(_stencil(6), backend="cpu")(x), _stencil(6)(x))


def test_a_window_of_a_cheap_producer_is_recomputed_and_any_other_reuse_is_stored():
    """hdiff's fluxes: ``flx = where(res * d > 0, 0, res)`` read as ``flx[1:] - flx[:-1]``
    fuses into its reader (a producer read through windows, once per window); the Laplacian
    the fluxes read, 8 evaluations per element once they are fused, stays a kernel. A value
    read through an index map other than a window (a gather's index, a transpose) and an
    expensive one (a division) are stored as before."""
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((66, 66)), rng.standard_normal((64, 64))

    def fluxes(a, b):
        lap = 4.0 * a[1:-1, 1:-1] - (a[2:, 1:-1] + a[:-2, 1:-1] + a[1:-1, 2:] + a[1:-1, :-2])
        res = lap[1:, 1:-1] - lap[:-1, 1:-1]
        flx = np.where(res * (a[2:-1, 2:-2] - a[1:-2, 2:-2]) > 0, 0, res)
        res = lap[1:-1, 1:] - lap[1:-1, :-1]
        fly = np.where(res * (a[2:-2, 2:-1] - a[2:-2, 1:-2]) > 0, 0, res)
        return b[:-2, :-2] - (flx[1:] - flx[:-1] + fly[:, 1:] - fly[:, :-1])

    c = compiled(fluxes, a, b)
    assert len(kernels(c)) == 2
    reuse = {d.producer for d in c.fusion_decisions if d.reason == "REUSES_ELEMENTS"}
    assert len(reuse) == 1 and reuse.pop().startswith("subtract")  # the Laplacian
    for backend in ("interpreter", "cpu"):
        np.testing.assert_array_equal(tk.jit(fluxes, backend=backend)(a, b), fluxes(a, b))
    for f in (lambda a: (1 / a)[1:] + (1 / a)[:-1], lambda a: (a * 2).T[1:] - (a * 2)[1:]):
        c = compiled(f, a)
        assert "REUSES_ELEMENTS" in {d.reason for d in c.fusion_decisions}
        np.testing.assert_array_equal(tk.jit(f, backend="cpu")(a), f(a))


def test_stencil_compile_work_grows_linearly_with_steps():
    sizes = {}
    for steps in (10, 20, 40):
        c = compiled(_stencil(steps), np.linspace(0, 1, 128))
        sizes[steps] = sum(len(comp.instructions) for comp in c.optimized_hlo.computations)
    assert sizes[40] - sizes[20] == 2 * (sizes[20] - sizes[10])


def test_a_masked_stencil_step_does_not_merge_with_the_step_that_reads_it_through_slices():
    """The mask (a pad of ones) that every step multiplies by feeds more fusions than fusion
    copies it into, so it is a kernel of its own, which each step reads at its own element.
    Merged as producer and consumer, the mask's kernel took in the last step, then each step
    before it, which the last reads through its slices: one kernel recomputed every step for
    each slice, 4**steps per element (the compile never finished at 10 steps)."""
    for steps in (10, 12):
        fn, (a,) = bench_compile.program("stencil-2d", steps)
        c = compiled(fn, a)
        assert "CODE_DUPLICATION" in {d.reason for d in c.fusion_decisions}  # (the mask's)
        assert len(kernels(c)) == steps + 1  # a kernel a step, and the mask's
        np.testing.assert_allclose(c(a), fn(a), rtol=1e-12)


def test_an_expensive_scalar_is_not_recomputed_per_broadcast_element():
    c = compiled(lambda a, d: a + np.tanh(np.tanh(d[0])), np.ones((64, 64)), np.ones(3))
    (d,) = [d for d in c.fusion_decisions if d.reason == "EXPENSIVE_BROADCAST"]
    assert not d.fused
    assert len(kernels(c)) == 2


def test_a_long_scalar_chain_is_not_recomputed_per_broadcast_element():
    """A scalar summed over a Python loop (cheap adds, each tanh its own kernel) then added to
    an array: past 8 operations behind the broadcast the chain is computed once."""
    def go_fast(a):
        trace = 0.0
        for i in range(a.shape[0]):
            trace += np.tanh(a[i, i])
        return a + trace

    c = compiled(go_fast, np.ones((40, 40)))
    chain = [d for d in c.fusion_decisions if d.reason == "BROADCAST_CHAIN"]
    assert chain and not any(d.fused for d in chain)
    assert "behind 8 operations" in chain[0].message
    (big,) = [k for k in kernels(c) if k.shape.dims == (40, 40)]
    assert len(big.attrs["calls"].instructions) < 40  # the add and a short chain, not 40 tanhs


def test_a_short_scalar_chain_still_fuses_into_its_broadcast_consumer():
    c = compiled(lambda a, s: a * (s * 2.0 + 1.0), np.ones((64, 64)), 0.5)
    assert len(kernels(c)) == 1


def test_a_cheap_producer_read_once_per_element_still_fuses():
    c = compiled(lambda x: np.exp(x * 2.0) + x[::-1], np.ones(32))
    assert len(kernels(c)) == 1
    assert not [
        d for d in c.fusion_decisions if d.reason in ("REUSES_ELEMENTS", "EXPENSIVE_BROADCAST")
    ]


def test_a_long_chain_of_dots_compiles_without_recursion_limits():
    def f(m, v):
        for _ in range(1500):
            v = m @ v
        return v

    m, v = np.eye(4) * 0.5, np.ones(4)
    out = tk.jit(f, backend="cpu").lower(m, v).compile()
    np.testing.assert_allclose(out(m, v), f(m, v))


def test_bytes_saved_is_the_buffer_not_written_and_not_read_back():
    """XLA's fusion cost model: fusing a producer saves writing its buffer and each consumer
    reading it back; copied into several fusions, each copy reads the producer's operands."""
    n = 1024
    one = compiled(lambda x: np.exp(x) + 1, np.ones(n, np.float32))
    (exp,) = [d for d in decisions(one, "exponential") if d.fused]
    assert exp.bytes_saved == 2 * 4 * n  # written once, read once
    two = compiled(lambda x: (x * 2 + 1, x * 2 - 1), np.ones(n, np.float32))
    copies = [d for d in decisions(two, "multiply") if d.fused]
    assert len(copies) == 2
    # unfused: write 4n, read it twice; fused twice: x (4n) read once more
    assert sum(d.bytes_saved for d in copies) == 3 * 4 * n - 4 * n
    assert all(d.bytes_saved == 0 for d in two.fusion_decisions if not d.fused)


def _many_siblings(x, cs):
    return [np.sum(x * c, axis=1) for c in cs]


def _sibling_args(n=150):
    # (each sibling reads the shared x and a weight of its own: a loop-written convolution)
    x = np.random.default_rng(0).standard_normal((8, 12)).astype(np.float32)
    return x, [np.float32(i) for i in range(n)]


def test_sibling_fusion_stays_within_the_kernel_parameter_budget():
    """150 reductions that share an input once became one kernel of 151 operands and 150
    outputs (a loop-written conv2d made 1,928, which a GPU refused to load). Each kernel now
    takes at most FusionOptions.max_parameters operands and outputs, and says why."""
    x, cs = _sibling_args()
    c = compiled(_many_siblings, x, cs)
    budget = FusionOptions().max_parameters
    fusions = [i for i in c.optimized_hlo.entry.instructions if i.opcode == "fusion"]
    for f in fusions:
        outputs = len(f.shape.shapes) if hasattr(f.shape, "shapes") else 1
        assert len(f.operands) + outputs <= budget, (f.name, len(f.operands), outputs)
    assert 2 <= len(fusions) <= 4  # still few kernels: siblings merge up to the budget
    reasons = {d.reason for d in decisions(c, "reduce", "reduce")}
    assert reasons == {"SIBLING_MULTI_OUTPUT", "BUDGET_PARAMETERS"}
    got = tk.jit(_many_siblings, backend="cpu")(x, cs)
    for g, w in zip(got, _many_siblings(x, cs)):
        np.testing.assert_allclose(g, w, rtol=1e-5)


def _attention_heads(mask, *scores):
    """Per-head softmax, as attention written head by head: every head reads one mask."""
    out = []
    for s in scores:
        e = np.exp(s - s.max(axis=-1, keepdims=True) + mask)
        out.append(e / e.sum(axis=-1, keepdims=True))
    return tuple(out)


def test_siblings_sharing_less_input_than_they_read_alone_stay_apart():
    rng = np.random.default_rng(1)
    mask = np.triu(np.full((16, 16), -1e10, np.float32), 1)
    scores = [rng.standard_normal((16, 16)).astype(np.float32) for _ in range(3)]
    c = compiled(_attention_heads, mask, *scores)
    kept = [d for d in decisions(c, "reduce", "reduce") if d.reason == "SMALL_SHARED_INPUT"]
    assert kept and all("share 1,024 bytes of input" in d.message for d in kept), kept
    assert not [d for d in c.fusion_decisions if d.reason == "SIBLING_MULTI_OUTPUT"]
    for got, want in zip(tk.jit(_attention_heads, backend="cpu")(mask, *scores),
                         _attention_heads(mask, *scores)):
        np.testing.assert_allclose(got, want, rtol=2e-6)


def _two_chains(x, a, b):
    # (siblings that share x, all they read but a scalar each, and compute apart from it)
    return np.exp(x * a).sum(axis=1), np.tanh(x * b).sum(axis=1)


def _one_chain(x):
    e = np.exp(x)
    return e.sum(axis=1), (e * e).sum(axis=1)


@pytest.mark.parametrize("fn, clusters", [(_two_chains, 2), (_one_chain, 1)])
def test_a_merged_reduction_folds_each_chain_of_its_own_in_a_loop_of_its_own(fn, clusters):
    """Chains that share nothing but their input are folded one loop each over the same rows
    (six exponentials side by side spilled registers); chains that share a value, one loop."""
    from toolkit.backends.llvm.reduction import hero_clusters

    rng = np.random.default_rng(2)
    x = rng.standard_normal((64, 48)).astype(np.float32)
    args = (x, np.float32(0.5), np.float32(1.5))[:fn.__code__.co_argcount]
    c = compiled(fn, *args)
    (fusion,) = [i for i in c.optimized_hlo.entry.instructions
                 if i.opcode == "fusion" and i.name.startswith("input_reduce")]
    root = fusion.attrs["calls"].root
    outputs = list(root.operands) if root.opcode == "tuple" else [root]
    heroes = [o for o in outputs if o.opcode == "reduce"]
    assert len(heroes) == 2
    assert len(hero_clusters(heroes, [o for o in outputs if o.opcode != "reduce"])) == clusters
    for backend in ("cpu", "interpreter"):
        for got, want in zip(tk.jit(fn, backend=backend)(*args), fn(*args)):
            # (float32 sums of 48 terms of about 1, in another order: within 48 ulp of 1)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=48 * 2.0 ** -23)
