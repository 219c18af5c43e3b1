"""Matrix-vector products in native programs and loops (native_loop._gemv_op): the BLAS gemv
call NumPy's matmul makes for the same operands (order, lda and increments included: OpenBLAS's
gemv kernels sum in another order for each), so the results are NumPy's bit for bit, compared
with ==; and programs made of such products now run natively instead of falling back."""
import importlib

import numpy as np
import pytest

import toolkit as tk
from toolkit.backends.cpu import executor
from toolkit.backends.cpu.native_loop import blas_gemm

pytestmark = pytest.mark.skipif(
    executor.native_run_steps is None or blas_gemm() is None,
    reason="the C extension or NumPy's BLAS (the OpenBLAS its wheels bundle) is not here",
)

# name: (product, operand shapes from (m, k)): every side and transposition of the matrix
PRODUCTS = {
    "A @ x": (lambda a, x: a @ x, lambda m, k: [(m, k), (k,)]),
    "A.T @ x": (lambda a, x: a.T @ x, lambda m, k: [(k, m), (k,)]),
    "x @ A": (lambda x, a: x @ a, lambda m, k: [(k,), (k, m)]),
    "x @ A.T": (lambda x, a: x @ a.T, lambda m, k: [(k,), (m, k)]),
    "A @ column": (lambda a, x: a @ x, lambda m, k: [(m, k), (k, 1)]),
    "row @ A": (lambda x, a: x @ a, lambda m, k: [(1, k), (k, m)]),
    "A.T @ row.T": (lambda a, x: a.T @ x.T, lambda m, k: [(k, m), (1, k)]),
    "column.T @ A.T": (lambda x, a: x.T @ a.T, lambda m, k: [(k, 1), (m, k)]),
}
# (m, k): a length of 1 (a dot or a multiply), the gemv kernels' row tails (m % 4 = 1, 2, 3),
# odd sizes, and k = 1000 where the order of the sum shows in the last bits
SIZES = [(1, 7), (2, 1), (2, 5), (3, 9), (5, 3), (6, 13), (7, 31), (33, 17), (2, 1000),
         (3, 1000), (129, 1000), (1000, 129), (1000, 3)]


BLAS_TYPES = [np.float32, np.float64, np.complex64, np.complex128]


def random_operand(rng, shape, dtype):
    """Standard normal values of ``dtype``, with an imaginary part for the complex types."""
    values = rng.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        values = values + 1j * rng.standard_normal(shape)
    return values.astype(dtype)


def _native_program(fn, args, monkeypatch, native: bool):
    """fn's product and a second step (a native program needs two), run natively or not."""
    monkeypatch.setenv("TOOLKIT_NATIVE_PROGRAM", "1" if native else "0")
    f = tk.jit(lambda a, b: (fn(a, b), b * 2.0), backend="cpu")
    product, _ = f(*args)
    return np.asarray(product), f.compiled(*args)._executable


@pytest.mark.parametrize("dtype", BLAS_TYPES)
@pytest.mark.parametrize("name", sorted(PRODUCTS))
def test_matrix_vector_products_are_numpys_bit_for_bit(name, dtype, monkeypatch):
    fn, shapes = PRODUCTS[name]
    rng = np.random.default_rng(sorted(PRODUCTS).index(name))
    for m, k in SIZES:
        args = [random_operand(rng, s, dtype) for s in shapes(m, k)]
        want = fn(*args)
        got, exe = _native_program(fn, args, monkeypatch, True)
        assert got.dtype == want.dtype and got.shape == want.shape
        bad = np.flatnonzero(got != want)
        assert bad.size == 0, (name, m, k, bad[:5], got.ravel()[bad[:5]], want.ravel()[bad[:5]])
        ((program, steps, *_),) = exe.segments  # one native program: the product ran in it
        # (k = 1: the simplifier made a real product a multiply; a complex one stays NumPy's
        # own loop, 0 + a * b, which no BLAS call makes)
        if k > 1 or not np.issubdtype(dtype, np.complexfloating):
            assert program is not None and any(s.kind == "dot" for s in steps) == (k > 1), (m, k)
        stepwise, _ = _native_program(fn, args, monkeypatch, False)
        assert np.array_equal(stepwise, want)


def test_vectors_whose_order_of_sum_differs_between_blas_calls():
    """The test above can fail: gemv's two orders sum these in other orders than NumPy."""
    rng = np.random.default_rng(5)
    a, x = rng.standard_normal((3, 1000)), rng.standard_normal(1000)
    as_numpy = a @ x
    other_order = np.asfortranarray(a) @ x  # the same product, gemv row-major
    assert not np.array_equal(as_numpy, other_order)


def test_a_product_that_reads_garbage_in_its_output_buffer_is_unaffected(monkeypatch):
    """The output buffer of one call is reused by the next: a NaN left in it stays out."""
    monkeypatch.setenv("TOOLKIT_NATIVE_PROGRAM", "1")
    f = tk.jit(lambda a, x: (a @ x) * 2.0, backend="cpu")
    a = np.ones((4, 3))
    f(a, np.full(3, np.nan))
    np.testing.assert_array_equal(f(a, np.ones(3)), np.full(4, 6.0))


@pytest.mark.parametrize("workload, shapes", [
    ("covariance_by_columns", [(60, 9)]),
    ("syrk_by_rows", [(12, 12), (12, 8)]),
])
def test_the_benchmarks_matrix_vector_programs_run_natively(workload, shapes, monkeypatch):
    from toolkit import workloads_loops

    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s) for s in shapes] + ([1.5, 1.2] if len(shapes) == 2 else [])
    fn = getattr(workloads_loops, workload)(np)
    monkeypatch.setenv("TOOLKIT_NATIVE_PROGRAM", "1")
    f = tk.jit(fn, backend="cpu")
    got = f(*args)
    exe = f.compiled(*args)._executable
    assert [program is not None for program, *_ in exe.segments] == [True]
    # NumPy's own numbers (its products read the slices as views: dot_views.py)
    np.testing.assert_array_equal(got, fn(*args))


def test_a_loop_of_matrix_vector_products_runs_natively(monkeypatch):
    def power_steps(a, v):  # h = tanh(A h) a trip: a gemv and a kernel
        return tk.lax.fori_loop(0, 5, lambda i, h: np.tanh(a @ h) + 0.5, v)

    rng = np.random.default_rng(1)
    a, v = rng.standard_normal((37, 37)) * 0.2, rng.standard_normal(37)
    compiled = tk.jit(power_steps, backend="cpu").lower(a, v).compile()
    drivers = [s.extra["run"].driver for s in compiled._executable.steps if s.kind == "control"]
    assert drivers == ["native"]
    native = tk.jit(power_steps, backend="cpu")(a, v)
    monkeypatch.setenv("TOOLKIT_NATIVE_LOOP", "0")
    np.testing.assert_array_equal(native, tk.jit(power_steps, backend="cpu")(a, v))


def test_a_c_extension_built_before_gemv_leaves_the_product_to_numpy(monkeypatch):
    """An older build would read op 4 as a copy: without OP_CODES > 4 no gemv op is made."""
    native_loop = importlib.import_module("toolkit.backends.cpu.native_loop")
    a, x = np.ones((5, 4)), np.ones(4)
    f = tk.jit(lambda a, x: (a @ x, x * 2.0), backend="cpu")
    f(a, x)
    exe = f.compiled(a, x)._executable
    (dot,) = [s for s in exe.steps if s.kind == "dot"]
    assert native_loop.step_op(exe, dot, lambda s: s, blas_gemm())[0] == native_loop.GEMV
    monkeypatch.setattr(native_loop, "native_op_codes", 4)
    with pytest.raises(native_loop._Unsupported, match="without it"):
        native_loop.step_op(exe, dot, lambda s: s, blas_gemm())


def test_complex_products_run_natively_and_a_build_before_complex_blas_leaves_them_to_numpy(
        monkeypatch):
    """NumPy's four BLAS types run as native BLAS calls; an older build read the op's type as
    "float64 or not", so without BLAS_TYPES = 4 no complex op is made."""
    native_loop = importlib.import_module("toolkit.backends.cpu.native_loop")
    rng = np.random.default_rng(3)
    a, b = (random_operand(rng, (3, 3), np.complex128) for _ in range(2))
    f = tk.jit(lambda a, b: (a @ b, b * 2.0), backend="cpu")
    np.testing.assert_array_equal(f(a, b)[0], a @ b)
    exe = f.compiled(a, b)._executable
    (dot,) = [s for s in exe.steps if s.kind == "dot"]
    op = native_loop.step_op(exe, dot, lambda s: s, blas_gemm())
    assert op[0] == native_loop.GEMM and op[3] == native_loop.BLAS_TYPE["complex128"] == 3
    monkeypatch.setattr(native_loop, "native_blas_types", 2)
    with pytest.raises(native_loop._Unsupported, match="no native BLAS call for complex128"):
        native_loop.step_op(exe, dot, lambda s: s, blas_gemm())
