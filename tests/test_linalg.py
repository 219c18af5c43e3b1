"""np.linalg under jit: the factorizations and solves as custom-calls to NumPy's LAPACK-backed
routines (library calls on the CPU), norms and powers composed; each against NumPy."""
import numpy as np
import pytest

import toolkit as tk
import toolkit.numpy as tnp

rng = np.random.default_rng(0)
A = rng.standard_normal((4, 4))
SPD = A @ A.T + 4 * np.eye(4)
B = rng.standard_normal((4, 2))
R = rng.standard_normal((5, 3))
BATCH = rng.standard_normal((2, 3, 3))
ARGS = (A, SPD, B, R, BATCH)

CASES = {
    "inv": lambda a, spd, b, r, batch: (np.linalg.inv(a), np.linalg.inv(batch)),
    "solve": lambda a, spd, b, r, batch: (np.linalg.solve(a, b), np.linalg.solve(a, b[:, 0])),
    "cholesky": lambda a, spd, b, r, batch: (
        np.linalg.cholesky(spd),
        np.linalg.cholesky(spd, upper=True),
    ),
    "det": lambda a, spd, b, r, batch: (np.linalg.det(a), np.linalg.det(batch)),
    "slogdet": lambda a, spd, b, r, batch: tuple(np.linalg.slogdet(a)),
    "qr": lambda a, spd, b, r, batch: (
        *np.linalg.qr(r),
        *np.linalg.qr(r, mode="complete"),
        np.linalg.qr(r, mode="r"),
    ),
    "eigh": lambda a, spd, b, r, batch: (*np.linalg.eigh(spd), np.linalg.eigvalsh(spd, UPLO="U")),
    "svd": lambda a, spd, b, r, batch: (
        *np.linalg.svd(r),
        *np.linalg.svd(r, full_matrices=False),
        np.linalg.svd(r, compute_uv=False),
        np.linalg.svdvals(batch),
    ),
    "pinv": lambda a, spd, b, r, batch: np.linalg.pinv(r),
    "matrix_rank": lambda a, spd, b, r, batch: np.linalg.matrix_rank(r),
    "cond": lambda a, spd, b, r, batch: (np.linalg.cond(a), np.linalg.cond(a, 1)),
    "matrix_power": lambda a, spd, b, r, batch: (
        np.linalg.matrix_power(a, 5),
        np.linalg.matrix_power(a, -2),
    ),
    "multi_dot": lambda a, spd, b, r, batch: np.linalg.multi_dot([a, b, b.T]),
    "norm": lambda a, spd, b, r, batch: (
        np.linalg.norm(a),
        np.linalg.norm(a, 2),
        np.linalg.norm(a, "nuc"),
        np.linalg.norm(a, 1),
        np.linalg.norm(a, -np.inf, keepdims=True),
        np.linalg.norm(a, axis=1),
        np.linalg.norm(a, 3, axis=0),
        np.linalg.norm(a, 0, axis=0),
        np.linalg.norm(batch, axis=(1, 2)),
    ),
    "vector_norm": lambda a, spd, b, r, batch: np.linalg.vector_norm(a, ord=np.inf),
    "matrix_norm": lambda a, spd, b, r, batch: np.linalg.matrix_norm(batch, ord=2),
    "trace": lambda a, spd, b, r, batch: np.linalg.trace(batch),
    "diagonal": lambda a, spd, b, r, batch: np.linalg.diagonal(batch, offset=1),
}


def _check(fn, backend):
    want = fn(*ARGS)
    got = tk.jit(fn, backend=backend)(*ARGS)
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("name", sorted(CASES))
def test_linalg_matches_numpy(name):
    _check(CASES[name], "interpreter")


@pytest.mark.parametrize("name", ["inv", "solve", "eigh", "svd", "norm", "qr"])
def test_linalg_on_the_cpu_and_gpu_executors(name):
    _check(CASES[name], "cpu")
    _check(CASES[name], "gpu-simulated")


def test_every_traced_linalg_function_has_a_case():
    assert set(vars(tnp.linalg)) - {
        "LinAlgError",
        "matmul",
        "outer",
        "cross",
        "tensordot",
        "vecdot",
        "matrix_transpose",
        "eigvalsh",
        "svdvals",
    } <= set(CASES)


def test_hlo_names_the_library_routine_and_errors_are_numpys():
    text = tk.jit(np.linalg.inv).lower(A).as_text(metadata=False)
    assert 'custom-call(%a.2), custom_call_target="numpy.linalg.inv"' in text
    assert tk.hlo.parse(text).to_text(metadata=False) == text
    with pytest.raises(np.linalg.LinAlgError, match="Singular matrix"):
        tk.jit(np.linalg.inv, backend="cpu")(np.zeros((3, 3)))
    with pytest.raises(np.linalg.LinAlgError, match="square"):
        tk.jit(np.linalg.inv)(R)


def test_cost_analysis_counts_the_factorization():
    from toolkit.passes.cost_analysis import cost_analysis

    costs = cost_analysis(
        tk.jit(np.linalg.inv).lower(A).hlo
        if hasattr(tk.jit(np.linalg.inv).lower(A), "hlo")
        else tk.jit(np.linalg.inv).compiled(A).optimized_hlo
    )
    assert costs["flops"] >= 2 * 4 ** 3
