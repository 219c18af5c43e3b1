"""BLAS products of sliced views (dot_views.py): the native program hands BLAS the sliced
buffer with its offset and leading dimension or increment, as NumPy's matmul passes a view,
so the results are NumPy's bit for bit (OpenBLAS sums in another order for another lda or
increment), compared with ==; and the slice kernels that copied the windows are gone."""
import numpy as np
import pytest

import toolkit as tk
import toolkit.passes.horizontal_batching as horizontal_batching
from toolkit.backends.cpu import executor
from toolkit.backends.cpu.native_loop import blas_gemm
from test_native_gemv import BLAS_TYPES, random_operand

pytestmark = pytest.mark.skipif(
    executor.native_run_steps is None or blas_gemm() is None
    or executor.native_op_codes < 8,
    reason="the C extension with view ops, or NumPy's BLAS (its bundled OpenBLAS), is not here",
)

# name: (product of views, operand shapes)
PRODUCTS = {
    "column @ right columns": (lambda d: [d[:, i] @ d[:, i:] for i in (0, 3, 77, 78, 79)],
                               [(500, 80)]),
    "row @ leading rows.T": (lambda a: [a[i] @ a[: i + 1].T for i in (0, 1, 5, 60, 119)],
                             [(120, 80)]),
    "window @ window": (lambda x, y: [x[2:, 1:] @ y[1:, :3], x[2:, 1:] @ y[1:, 2:]],
                        [(40, 30), (30, 20)]),
    "window.T @ window": (lambda x, y: [x[2:, 3:].T @ y[2:, 1:], x[:, 3:].T @ y[:, :-1]],
                          [(40, 30), (40, 20)]),
    "rows window @ column window": (lambda x, y: [x[3:, 5:] @ y[5:, 2], x[1:9, :] @ y[:, 0]],
                                    [(300, 200), (200, 6)]),
    "row window @ columns window": (lambda x, y: [x[4, 7:] @ y[7:, 1:], x[2, :] @ y[:, 3:]],
                                    [(9, 700), (700, 13)]),
    "row window @ row window": (lambda x: [x[3, 2:] @ x[5, 2:], x[:, 1] @ x[:, 4]],
                                [(600, 400)]),
}


def _run(fn, args):
    f = tk.jit(fn, backend="cpu")
    got = [np.asarray(g) for g in f(*args)]
    return got, f.compiled(*args)._executable


@pytest.mark.parametrize("dtype", BLAS_TYPES)
@pytest.mark.parametrize("name", sorted(PRODUCTS))
def test_products_of_sliced_views_are_numpys_bit_for_bit(name, dtype, monkeypatch):
    monkeypatch.setenv("TOOLKIT_NATIVE_PROGRAM", "1")
    fn, shapes = PRODUCTS[name]
    rng = np.random.default_rng(sorted(PRODUCTS).index(name))
    args = [random_operand(rng, s, dtype) for s in shapes]
    want = fn(*args)
    got, exe = _run(fn, args)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        bad = np.flatnonzero(g != w)
        assert bad.size == 0, (name, bad[:5], g.ravel()[bad[:5]], w.ravel()[bad[:5]])
    assert all(program is not None for program, *_ in exe.segments)


def _slice_kernels(steps) -> int:
    """The kernels copying windows: slice fusions (d[:, i:]), and slice-and-reshape fusions
    (d[:, i] as a (1, 500) row)."""
    return sum(1 for s in steps if s.kind == "kernel"
               and s.inst.name.startswith(("loop_slice_fusion", "loop_reshape_fusion")))


def test_covariance_by_columns_is_numpys_and_copies_no_windows(monkeypatch):
    """500 x 80: reading copies of d[:, i:] (lda = 80 - i, increment 1) NumPy's gemv and dot
    summed 9 elements in another order than NumPy's views (lda = 80, increment 80)."""
    from toolkit.workloads_loops import covariance_by_columns

    monkeypatch.setenv("TOOLKIT_NATIVE_PROGRAM", "1")
    data = np.random.default_rng(0).standard_normal((500, 80))
    fn = covariance_by_columns(np)
    f = tk.jit(fn, backend="cpu")
    got = np.asarray(f(data))
    want = fn(data)
    assert np.count_nonzero(got != want) == 0
    exe = f.compiled(data)._executable
    ((program, steps, *_),) = exe.segments
    assert program is not None
    # 159 kernels copied windows (80 columns, 79 column ranges; d[:, 79] is one slice
    # and a reshape of it): 158 are gone; the shared slice stays, and the dot reads its
    # reshape through it (a reshape is its source's elements in order)
    assert _slice_kernels(exe.steps) == 159 and _slice_kernels(steps) == 1
    assert len(steps) == len(exe.steps) - 158


@pytest.mark.parametrize("batched", [False, True])
def test_per_head_windows_of_windows_are_read_in_place(monkeypatch, batched):
    """Attention one head at a time: q, k, v are windows of the qkv product and each head a
    window of those. The simplifier makes each a single window of qkv (slice of a slice), which
    the dots read in place: no head is copied, and the products are NumPy's bit for bit. Batched
    (passes/horizontal_batching.py), the heads stacked are a strided view of qkv, which the
    batched product reads in place, one GEMM a head with NumPy's arguments."""
    monkeypatch.setenv("TOOLKIT_NATIVE_PROGRAM", "1")
    if not batched:
        monkeypatch.setattr(horizontal_batching, "MIN_LANES", 1 << 30)
    d, heads = 48, 3
    hd = d // heads

    def attention_scores(x, w):
        qkv = x @ w
        q, k, v = qkv[:, :d], qkv[:, d:2 * d], qkv[:, 2 * d:]
        return [q[:, i * hd:(i + 1) * hd] @ k[:, i * hd:(i + 1) * hd].T
                + v[:, i * hd:(i + 1) * hd] @ q[:, i * hd:(i + 1) * hd].T for i in range(heads)]

    rng = np.random.default_rng(7)
    x, w = rng.standard_normal((20, 32)), rng.standard_normal((32, 3 * d))
    got, exe = _run(attention_scores, (x, w))
    for g, want in zip(got, attention_scores(x, w), strict=True):
        assert np.count_nonzero(g != want) == 0
    ((program, steps, *_),) = exe.segments
    assert program is not None
    dots = [s for s in exe.steps if s.kind == "dot"]
    assert len(dots) == (3 if batched else 1 + 2 * heads)
    if batched:  # (the three stacked windows; the heads' sums are kernels of their own)
        copies = [s for s in exe.steps if s.inst.name.startswith("loop_slice_fusion")]
        assert len(copies) == 3 and not any(s in steps for s in copies)
    else:
        assert _slice_kernels(exe.steps) == 3 * heads and _slice_kernels(steps) == 0


def test_a_window_of_a_buffer_written_before_the_product_is_read_before_the_write(monkeypatch):
    """The window must show the values the slice saw, not the buffer's later contents."""
    monkeypatch.setenv("TOOLKIT_NATIVE_PROGRAM", "1")

    def fn(x, v):
        y = x * 1.0
        window = y[:, 2:]
        y[:, 3] = 7.0  # written after the slice, before the product
        return v @ window, y

    x, v = np.random.default_rng(3).standard_normal((50, 9)), np.arange(50.0)
    (got, got_y), exe = _run(fn, (x, v))
    want, want_y = fn(x, v)
    assert np.array_equal(got, want) and np.array_equal(got_y, want_y)


def test_a_window_also_read_by_a_kernel_keeps_its_slice(monkeypatch):
    monkeypatch.setenv("TOOLKIT_NATIVE_PROGRAM", "1")

    def fn(d):
        window = d[:, 1:]
        return d[:, 0] @ window, window * 2.0

    d = np.random.default_rng(4).standard_normal((300, 40))
    (got, got_twice), _ = _run(fn, (d,))
    want, want_twice = fn(d)
    assert np.array_equal(got, want) and np.array_equal(got_twice, want_twice)


def test_a_non_blasable_window_is_copied_as_numpy_copies_it(monkeypatch):
    """Every other column (stride 2): NumPy's matmul copies it into a buffer before gemm."""
    monkeypatch.setenv("TOOLKIT_NATIVE_PROGRAM", "1")

    def fn(x, y):
        return (x[:, ::2] @ y[1:, :],)

    rng = np.random.default_rng(5)
    x, y = rng.standard_normal((30, 40)), rng.standard_normal((21, 17))
    (got,), _ = _run(fn, (x, y))
    assert np.array_equal(got, fn(x, y)[0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_stack_of_rows_times_one_matrix_is_one_gemm_and_copies_nothing(dtype, monkeypatch):
    """``(a.reshape(r, q, 1, p) @ c).reshape(r, q, p)`` is one (r * q, p) @ (p, p) GEMM: BLAS
    reads ``a`` through the reshape and writes the result's buffer, as NumPy's matmul of
    ``a.reshape(-1, p)`` would; neither reshape copies."""
    monkeypatch.setenv("TOOLKIT_NATIVE_PROGRAM", "1")

    def stacked(a, c):
        r, q, p = a.shape
        return ((a.reshape(r, q, 1, p) @ c).reshape(r, q, p),)

    rng = np.random.default_rng(8)
    a, c = rng.standard_normal((6, 5, 16)).astype(dtype), rng.standard_normal((16, 16)).astype(
        dtype)
    (got,), exe = _run(stacked, (a, c))
    assert np.array_equal(got, (a.reshape(-1, 16) @ c).reshape(6, 5, 16))
    assert not np.shares_memory(got, a)
    ((program, steps, *_),) = exe.segments
    assert program is not None and program[0] == 1  # one native op: the GEMM
    assert [s.kind for s in exe.steps] == ["kernel", "dot", "kernel"]


def test_a_product_read_after_its_reshape_is_still_copied(monkeypatch):
    """The reshape's buffer holds the product only where nothing else reads the product."""
    monkeypatch.setenv("TOOLKIT_NATIVE_PROGRAM", "1")

    def both(a, c):
        product = a @ c
        return product.reshape(-1), product * 2.0

    rng = np.random.default_rng(9)
    a, c = rng.standard_normal((7, 5)), rng.standard_normal((5, 6))
    (flat, twice), _ = _run(both, (a, c))
    want_flat, want_twice = both(a, c)
    assert np.array_equal(flat, want_flat) and np.array_equal(twice, want_twice)


def test_a_reshaped_product_read_by_the_next_product(monkeypatch):
    """``(a @ b).reshape(12, 4) @ c``: the second dot reads the reshape through the first
    product's buffer; the first writes that buffer, not the reshape's."""
    monkeypatch.setenv("TOOLKIT_NATIVE_PROGRAM", "1")

    def chained(a, b, c):
        return ((a @ b).reshape(12, 4) @ c,)

    rng = np.random.default_rng(10)
    a, b, c = rng.standard_normal((6, 4)), rng.standard_normal((4, 8)), rng.standard_normal((4, 3))
    (got,), _ = _run(chained, (a, b, c))
    np.testing.assert_allclose(got, chained(a, b, c)[0], rtol=1e-13)


def triangular_solve(L, x, b):
    for i in range(x.shape[0]):
        x[i] = (b[i] - L[i, :i] @ x[:i]) / L[i, i]


def _unoptimised_slice_kernels(compiled) -> int:
    """Slice kernels compiled without optimisation: functions, and aliases of such functions
    (kernels alike in code share one: backends/llvm/shared_code)."""
    ir_text = compiled.as_text("llvm")
    plain = {line.split(" = ")[0].split("#")[1] for line in ir_text.splitlines()
             if line.startswith("attributes #") and "optnone" in line}
    defined = {line.split("@")[1].split("(")[0].strip('"') for line in ir_text.splitlines()
               if line.startswith("define") and ("_slice_" in line or "_reshape_" in line)
               and line.rstrip(" {").split("#")[-1] in plain}
    aliases = [line for line in ir_text.splitlines() if " = alias " in line
               and line.rsplit("@", 1)[1].strip('"') in defined]
    return len(defined) + len(aliases)


def test_slice_kernels_no_program_runs_are_compiled_unoptimised(monkeypatch):
    """A triangular loop's ``L[i, :i] @ x[:i]``: two slices a trip, each of its own size, so
    each a kernel of its own, which the dot reads in place of. O3 spent seconds on thousands of
    them (trisolv at N=2,000: 12 s of LLVM). They compile without optimisation where native
    programs run (they never do); without native programs they run, optimised as before (all
    but the tiny ones, of at most 16 elements)."""
    monkeypatch.setenv("TOOLKIT_CACHE_DIR", "off")
    n = 48
    rng = np.random.default_rng(6)
    L, b = np.tril(rng.random((n, n))) + n * np.eye(n), rng.random(n)
    want = np.zeros(n)
    triangular_solve(L, want, b)
    plain = {}
    for native in ("1", "0"):
        monkeypatch.setenv("TOOLKIT_NATIVE_PROGRAM", native)
        x = np.zeros(n)
        compiled = tk.jit(triangular_solve, backend="cpu").lower(L, x, b).compile()
        compiled(L, x, b)
        assert np.array_equal(x, want)
        plain[native] = _unoptimised_slice_kernels(compiled)
    beyond_tiny = 2 * (n - 17)  # (trips 17 .. n-1: two slices of more than 16 elements each)
    assert plain["1"] - plain["0"] >= beyond_tiny, plain
