"""The programs of tests/corpus.py, written as plain NumPy with no knowledge of toolkit, traced
unmodified under tk.jit: results, and the caller's arrays after calls that write them, equal
NumPy's. The GPT-2 forward pass also compiles for the CPU and its PTX assembles."""
import copy
import functools

import numpy as np
import pytest

import toolkit as tk

import corpus

rng = np.random.default_rng(0)


def _same_as_numpy(fn, *args, backend="interpreter", rtol=1e-12, static_argnums=()):
    ours = copy.deepcopy(args)
    theirs = copy.deepcopy(args)
    got = tk.jit(fn, backend=backend, static_argnums=static_argnums)(*ours)
    want = fn(*theirs)
    for o, t in zip(ours, theirs):
        if isinstance(o, np.ndarray):
            # the arguments, as NumPy left them
            np.testing.assert_allclose(o, t, rtol=rtol, atol=rtol)
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want):
        if w is None:
            continue
        assert np.asarray(g).dtype == np.asarray(w).dtype and np.shape(g) == np.shape(w)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol)


CASES = {
    "jacobi_2d": (corpus.jacobi_2d, (rng.random((12, 12)), rng.random((12, 12)), 4), (2,)),
    "heat_3d": (corpus.heat_3d, (rng.random((6, 7, 8)), 3), (1,)),
    "gram_schmidt": (corpus.gram_schmidt, (rng.random((7, 5)),), ()),
    "lu": (corpus.lu, (rng.random((6, 6)) + 6 * np.eye(6),), ()),
    "cholesky": (corpus.cholesky, ((lambda m: m @ m.T + 5 * np.eye(5))(rng.random((5, 5))),), ()),
    "covariance": (corpus.covariance, (rng.random((9, 6)),), ()),
    "histogram": (corpus.histogram_counts, (rng.random(40), 7), (1,)),
    "conv2d_im2col": (
        corpus.conv2d_im2col,
        (rng.random((3, 8, 9)), rng.random((4, 3, 3, 3)), rng.random(4)),
        (),
    ),
    "floyd_warshall": (corpus.floyd_warshall, (rng.random((6, 6)) * 10,), ()),
    "nbody_step": (
        corpus.nbody_step,
        (rng.random((5, 3)), rng.random((5, 3)), rng.random(5), 0.01),
        (),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_kernel_traces_unmodified_and_matches_numpy(name):
    fn, args, static = CASES[name]
    _same_as_numpy(fn, *args, static_argnums=static)


@pytest.mark.parametrize(
    "name", ["jacobi_2d", "lu", "covariance", "histogram", "conv2d_im2col", "floyd_warshall"]
)
def test_kernel_on_the_cpu_backend(name):
    fn, args, static = CASES[name]
    _same_as_numpy(fn, *args, backend="cpu", static_argnums=static, rtol=1e-10)


def _gpt2():
    params = corpus.gpt2_params(np.random.default_rng(1))
    inputs = np.array([3, 14, 15, 9, 26, 5, 35, 8], np.int64)
    return functools.partial(corpus.gpt2, n_head=4), inputs, params


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_gpt2_forward_pass_traces_unmodified_and_matches_numpy(backend):
    fn, inputs, params = _gpt2()
    got = tk.jit(fn, backend=backend)(inputs, **params)
    want = fn(inputs, **params)
    assert got.shape == (8, 50) and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


def test_gpt2_hlo_reads_like_xla_and_its_ptx_assembles(tmp_path):
    from toolkit.backends.gpu.codegen import compile_ptx

    from test_gpu_codegen import PTXAS, assemble

    fn, inputs, params = _gpt2()
    text = tk.jit(fn).lower(inputs, **params).as_text(metadata=False)
    assert " gather(" in text  # the embedding lookups (wte[inputs], wpe[range(n)])
    program = compile_ptx(tk.jit(fn).compiled(inputs, **params).optimized_hlo, "sm_80")
    assert len(program.kernels) >= 10 and not program.unsupported, program.unsupported
    if PTXAS is None:
        pytest.skip("ptxas (CUDA toolkit) is not on the PATH")
    assemble(program.ptx, "sm_80", tmp_path)


@pytest.mark.parametrize("name", sorted(CASES))
def test_kernel_ptx_assembles(name, tmp_path):
    from toolkit.backends.gpu.codegen import compile_ptx

    from test_gpu_codegen import PTXAS, assemble

    fn, args, static = CASES[name]
    compiled = tk.jit(fn, static_argnums=static).compiled(*copy.deepcopy(args))
    program = compile_ptx(compiled.optimized_hlo, "sm_80")
    assert not [u for u in program.unsupported if "library call" not in u], program.unsupported
    if PTXAS is None:
        pytest.skip("ptxas (CUDA toolkit) is not on the PATH")
    assemble(program.ptx, "sm_80", tmp_path)


def test_stencil_updates_write_their_window_in_place_on_the_cpu():
    """A dynamic-update-slice whose operand is a dead temporary reuses its buffer and writes only
    the window: no full-array copy per time step. The first steps write into the arguments
    themselves (donated), so the chain of updates ends in the caller's arrays: no copy back."""
    A, B = rng.random((64, 64)), rng.random((64, 64))
    f = tk.jit(corpus.jacobi_2d, static_argnums=(2,), backend="cpu")
    compiled = f.compiled(A.copy(), B.copy(), 6)
    kinds = [s.extra["spec"].kind for s in compiled._executable.steps if "spec" in s.extra]
    assert kinds.count("update_slice") == 12 and kinds.count("loop") == 0, kinds
    assert compiled._executable.in_place_outputs == {0, 1}
    expected_a, expected_b, got_a, got_b = A.copy(), B.copy(), A.copy(), B.copy()
    corpus.jacobi_2d(expected_a, expected_b, 6)
    f(got_a, got_b, 6)
    np.testing.assert_array_equal(got_a, expected_a)
    np.testing.assert_array_equal(got_b, expected_b)
    assert any(d.reason == "IN_PLACE_UPDATE" for d in compiled.fusion_decisions)

    def self_referencing(a):  # the update reads the array it is written into: never in place
        for _ in range(3):
            a[1:-1] = 0.5 * (a[:-2] + a[2:])
        return a * 1

    _same_as_numpy(self_referencing, rng.random(50), backend="cpu")


def test_gpt2_language_model_loss_differentiates():
    """tk.grad through the unmodified GPT-2 forward pass (embedding gathers, attention with a
    causal mask, layer norms, GELU, a cross-entropy read by fancy indexing): NumPy's finite
    differences agree on entries of every kind of parameter."""
    fn, inputs, params = _gpt2()
    targets = np.roll(inputs, -1)

    def loss(params):
        logits = fn(inputs, **params)
        top = logits.max(-1, keepdims=True)
        logp = logits - top - np.log(np.sum(np.exp(logits - top), -1, keepdims=True))
        return -np.mean(logp[np.arange(len(targets)), targets])

    grads = tk.grad(loss)(params)
    assert set(grads) == set(params) and grads["wte"].shape == params["wte"].shape
    checks = [
        (("wte",), (3, 0)),
        (("wpe",), (2, 7)),
        (("blocks", 0, "attn", "c_attn", "w"), (1, 5)),
        (("blocks", 1, "mlp", "c_fc", "b"), (4,)),
        (("ln_f", "g"), (9,)),
    ]
    for path, index in checks:
        def get(tree):
            for key in path:
                tree = tree[key]
            return tree
        def shifted(delta):
            p = copy.deepcopy(params)
            get(p)[index] += delta
            return loss(p)
        numeric = (shifted(1e-6) - shifted(-1e-6)) / 2e-6
        np.testing.assert_allclose(
            get(grads)[index], numeric, rtol=1e-5, atol=1e-8, err_msg=str(path)
        )
