"""Dot canonicalisation (passes/dot_canonical.py): batch dimensions one operand only broadcasts
fold into the GEMM's M or N, adjacent dimensions merge, transposes fold where the dot reads
their operand in place. Every layout and dtype against NumPy, on the interpreter, the CPU and
the simulated GPU; the structure of the optimised HLO; every decision with its reason."""
import os
import pathlib

import numpy as np
import pytest

import toolkit as tk
from toolkit.passes.dot_canonical import REASONS, canonicalize_dots, reads_in_place
from toolkit.passes.fusion import FUSED_REASONS

GOLDEN = pathlib.Path(__file__).parent / "golden"
UPDATE = os.environ.get("TOOLKIT_UPDATE_GOLDEN") == "1"


def stacked_rows(a, c):
    """A stack of row vectors times one shared matrix (issue 27's example)."""
    r, q, p = a.shape
    return (a.reshape(r, q, 1, p) @ c).reshape(r, q, c.shape[1])


# name: (function, operand shapes)
LAYOUTS = {
    "stacked row vectors @ matrix": (stacked_rows, [(3, 4, 5), (5, 6)]),
    "stack @ matrix": (lambda a, b: a @ b, [(2, 3, 4), (4, 5)]),
    "stack of computed rows @ matrix, plus 1": (lambda a, b: (a * 2) @ b + 1,
                                                 [(2, 3, 4), (4, 5)]),
    "matrix @ stack": (lambda a, b: a @ b, [(3, 4), (2, 4, 5)]),
    "matrix @ stacked column vectors": (lambda a, b: a @ b, [(3, 4), (2, 4, 1)]),
    "vector @ stack": (lambda a, b: a @ b, [(4,), (2, 4, 5)]),
    "stack @ vector": (lambda a, b: a @ b, [(2, 3, 4), (4,)]),
    "both operands broadcast": (lambda a, b: a @ b, [(2, 1, 3, 4), (1, 5, 4, 6)]),
    "two batch dims, merged": (lambda a, b: np.einsum("ijmk,ijkn->ijmn", a * 2, b + 1) - 1,
                               [(2, 3, 5, 4), (2, 3, 4, 3)]),
    "two contracting dims, merged": (lambda a, b: np.tensordot(a * 2, b + 1, axes=([1, 2], [0, 1])),
                                     [(3, 4, 5), (4, 5, 6)]),
    "two free dims a side, merged": (lambda a, b: np.tensordot(a + 1, b * 2, axes=1).sum(-1),
                                     [(2, 3, 4), (4, 5, 6)]),
    "size-1 batch": (lambda a, b: np.matmul(a * 2, b + 1) * 2, [(1, 3, 4), (1, 4, 5)]),
    "x.T @ y": (lambda a, b: a.T @ b, [(5, 3), (5, 4)]),
    "x @ y.T": (lambda a, b: a @ b.T, [(3, 5), (4, 5)]),
    "batched, swapped matrices": (lambda a, b: np.swapaxes(a, 1, 2) @ b, [(2, 5, 3), (2, 5, 4)]),
    "batch dimension moved": (lambda a, b: np.transpose(a, (1, 0, 2)) @ b, [(3, 2, 5), (2, 5, 4)]),
    "transposed, contracting dims apart": (
        lambda a, b: np.tensordot(np.transpose(a, (1, 0, 2)), b, axes=([1, 2], [0, 1])),
        [(3, 4, 5), (3, 5, 6)]),
    "vector @ vector": (lambda a, b: a @ b, [(4,), (4,)]),
    "0-size stack @ matrix": (stacked_rows, [(0, 4, 5), (5, 6)]),
    "stack @ matrix, 0-size contraction": (lambda a, b: a @ b, [(2, 3, 0), (0, 5)]),
    "matrix @ 0-size stack": (lambda a, b: a @ b, [(3, 4), (0, 4, 1)]),
}
DTYPES = [np.float16, np.float32, np.float64, np.complex64, np.complex128, np.int32, np.int64]
TOLERANCE = {np.float16: 1e-2, np.float32: 1e-5, np.float64: 1e-12, np.complex64: 1e-5,
             np.complex128: 1e-12}  # of the largest result: sums cancel


def _operands(shapes, dtype, rng):
    out = []
    for s in shapes:
        x = rng.integers(-4, 5, s) if np.dtype(dtype).kind == "i" else rng.standard_normal(s)
        if np.dtype(dtype).kind == "c":
            x = x + 1j * rng.standard_normal(s)
        out.append(np.asarray(x).astype(dtype))
    return out


def _check(got, want) -> None:
    got = np.asarray(tk.device_get(got))
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape)
    if want.dtype.kind in "iu" or want.size == 0:
        np.testing.assert_array_equal(got, want)
        return
    tol = TOLERANCE[want.dtype.type]
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(np.abs(want).max(), 1))


@pytest.mark.parametrize("backend", ["interpreter", "cpu", "gpu-simulated"])
@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_every_layout_and_dtype_matches_numpy(name, backend):
    fn, shapes = LAYOUTS[name]
    rng = np.random.default_rng(sorted(LAYOUTS).index(name))
    for dtype in DTYPES:
        args = _operands(shapes, dtype, rng)
        _check(tk.jit(fn, backend=backend)(*args), fn(*args))


def _dots(fn, *args):
    compiled = tk.jit(fn).lower(*args).compile()
    return [i for i in compiled.optimized_hlo.entry.instructions if i.opcode == "dot"], compiled


@pytest.mark.parametrize("dtype", [np.float32, np.complex64, np.int64])
def test_stacked_row_vectors_are_one_matrix_product(dtype):
    """Issue 27: ``(A.reshape(R, Q, 1, P) @ C).reshape(R, Q, P)`` is one (R*Q, P) @ (P, P)
    GEMM, not R*Q products of one row each over a materialised broadcast of C."""
    a, c = _operands([(8, 6, 5), (5, 5)], dtype, np.random.default_rng(1))
    (dot,), compiled = _dots(stacked_rows, a, c)
    assert [o.shape.dims for o in dot.operands] == [(48, 5), (5, 5)]
    assert dot.shape.dims == (48, 5) and not dot.attrs.get("lhs_batch_dims")
    assert dot.operands[1].opcode == "parameter"  # C itself: no broadcast
    text = compiled.as_text()
    assert "broadcast" not in text and "transpose" not in text
    folded = [d for d in compiled.fusion_decisions if d.reason == "DOT_BROADCAST_FOLDED"]
    assert len(folded) == 1 and folded[0].fused and "M (rows)" in folded[0].message
    assert folded[0].bytes_saved == 2 * 8 * 6 * 5 * 5 * np.dtype(dtype).itemsize
    assert compiled.rewrites["dot over batch dimensions an operand only broadcasts -> one GEMM "
                              "(M or N grows)"] == 1


def test_the_gpu_runs_the_stacked_vector_product_as_one_direct_gemm():
    a, c = _operands([(8, 6, 5), (5, 5)], np.float32, np.random.default_rng(2))
    f = tk.jit(stacked_rows, backend="gpu-simulated")
    _check(f(a, c), stacked_rows(a, c))
    (dot,) = [s for s in f.compiled(a, c)._executable.steps if s.kind == "dot"]
    spec = dot.gemm
    assert (spec.batch, spec.m, spec.n, spec.k) == (1, 48, 5, 5), spec


def test_golden_optimized_hlo_of_the_stacked_vector_product():
    a, c = _operands([(8, 6, 5), (5, 5)], np.float32, np.random.default_rng(1))
    text = tk.jit(stacked_rows).lower(a, c).compile().as_text(metadata=False)
    path = GOLDEN / "stacked_rows.optimized.hlo"
    if UPDATE or not path.exists():
        path.write_text(text)
    assert text == path.read_text()


# name: (operand shapes of each dot in the optimised program), broadcasts or transposes left
CANONICAL = {
    "stack @ matrix": ([((2, 3, 4), (4, 5))], False),  # x is a parameter: kept, read as a view
    "stack of computed rows @ matrix, plus 1": ([((6, 4), (4, 5))], False),
    "matrix @ stacked column vectors": ([((2, 4, 1), (3, 4))], False),  # operands swapped
    "vector @ stack": ([((1, 4), (2, 4, 5))], False),
    "both operands broadcast": ([((6, 4), (5, 4, 6))], True),  # the product transposed
    "two batch dims, merged": ([((6, 5, 4), (6, 4, 3))], False),
    "two contracting dims, merged": ([((3, 20), (20, 6))], False),
    "two free dims a side, merged": ([((6, 4), (4, 30))], False),
    "size-1 batch": ([((3, 4), (4, 5))], False),
    "batch dimension moved": ([((3, 2, 5), (2, 5, 4))], False),
    "transposed, contracting dims apart": ([((4, 3, 5), (3, 5, 6))], True),
    "matrix @ stack": ([((2, 3, 4), (2, 4, 5))], True),  # the broadcast stays: see below
}


@pytest.mark.parametrize("name", sorted(CANONICAL))
def test_the_optimised_dots_take_the_canonical_shapes(name):
    fn, shapes = LAYOUTS[name]
    want, moves_data = CANONICAL[name]
    args = _operands(shapes, np.float32, np.random.default_rng(0))
    dots, compiled = _dots(fn, *args)
    assert [tuple(o.shape.dims for o in d.operands) for d in dots] == want
    moves = [i for comp in compiled.optimized_hlo.computations for i in comp.instructions
             if i.opcode == "transpose" or i.opcode == "broadcast" and i.operands[0].shape.rank]
    assert bool(moves) == moves_data, moves
    for d in compiled.fusion_decisions:
        assert d.reason in REASONS or not d.reason.startswith("DOT_")
        assert d.fused == (d.reason in FUSED_REASONS)


def test_every_decision_says_why():
    a, b = _operands([(3, 4), (2, 4, 5)], np.float32, np.random.default_rng(0))
    _, compiled = _dots(lambda a, b: a @ b, a, b)
    (kept,) = [d for d in compiled.fusion_decisions if d.reason == "DOT_BROADCAST_KEPT"]
    assert not kept.fused and "transposed" in kept.message and kept.message.startswith(
        REASONS["DOT_BROADCAST_KEPT"])
    a, b = _operands([(2, 3, 4), (4, 5)], np.float32, np.random.default_rng(0))
    _, compiled = _dots(lambda a, b: a @ b, a, b)
    (merge,) = [d for d in compiled.fusion_decisions if d.reason == "DOT_MERGE_WOULD_COPY"]
    assert "%a" in merge.message and "parameter" in merge.message
    a, b = _operands([(3, 4, 5), (3, 5, 6)], np.float32, np.random.default_rng(0))
    _, compiled = _dots(LAYOUTS["transposed, contracting dims apart"][0], a, b)
    (kept,) = [d for d in compiled.fusion_decisions if d.reason == "DOT_TRANSPOSE_KEPT"]
    assert "copy" in kept.message


def test_transposes_fold_into_the_gemm_flags():
    a, b = _operands([(5, 3), (4, 5)], np.float32, np.random.default_rng(0))
    (dot,), compiled = _dots(lambda a, b: a.T @ b.T, a, b)
    assert all(o.opcode == "parameter" for o in dot.operands)
    assert (dot.attrs["lhs_contracting_dims"], dot.attrs["rhs_contracting_dims"]) == ((0,), (1,))
    folded = [d for d in compiled.fusion_decisions if d.reason == "DOT_TRANSPOSE_FOLDED"]
    assert len(folded) == 2 and all(d.fused for d in folded)


@pytest.mark.parametrize("dims, groups, in_place", [
    ((4, 5), [[], [0], [1]], True),  # plain
    ((5, 4), [[], [1], [0]], True),  # transposed: BLAS's flag
    ((2, 3, 5), [[1], [0], [2]], True),  # a strided batch
    ((3, 4, 5), [[], [1], [0, 2]], False),  # contracting dims apart
    ((3, 4, 5), [[], [0, 1], [2]], True),  # free dims merge as a view
    ((4, 5, 2), [[2], [0], [1]], False),  # the batch dim innermost: no unit stride
    ((3, 1, 5), [[], [0, 2], [1]], True),  # size-1 dims are anywhere
    ((3, 0, 5), [[], [1], [0, 2]], True),  # nothing to read
])
def test_reads_in_place(dims, groups, in_place):
    assert reads_in_place(dims, groups) == in_place


def test_the_pass_is_iterative_and_linear_on_a_long_chain_of_dots():
    """2,000 stacked products in a chain (far past Python's recursion limit if any walk
    recursed), each canonicalised in constant time."""
    def chain(a, c):
        for _ in range(2000):
            a = stacked_rows(a, c)
        return a

    a, c = _operands([(2, 3, 4), (4, 4)], np.float32, np.random.default_rng(0))
    module = tk.jit(chain).lower(a, c).hlo
    new, counts, decisions = canonicalize_dots(module)
    dots = [i for i in new.entry.instructions if i.opcode == "dot"]
    assert len(dots) == 2000 and all(d.operands[0].shape.dims == (6, 4) for d in dots)
    assert sum(counts.values()) == 4000 and len(decisions) == 4000
    np.testing.assert_allclose(tk.hlo.run(new, a, c)[0], chain(a, c), rtol=1e-4)
