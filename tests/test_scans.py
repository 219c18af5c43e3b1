"""Sum scans (np.cumsum and its forms) as XLA's ``reduce-window`` over a window of the whole
axis padded in front (ir/windows.py): compiled into a kernel of its own that folds each line
in NumPy's sequential order, so the bits are NumPy's (compared with ==, on sums whose order
shows); the op's text, parser, reference semantics, cost, derivative and GPU lowering."""
import numpy as np
import pytest

import toolkit as tk
from toolkit.backends import get_backend
from toolkit.ir.parser import parse_module
from toolkit.ir.windows import WindowDim, evaluate_reduce_window, in_bounds_counts
from toolkit.passes.cost_analysis import cost_analysis

from test_gpu_codegen import assemble, needs_ptxas
from test_gpu_emulated import DEVICE, emulated_during  # noqa: F401  (registers gpu-emulated)

rng = np.random.default_rng(11)


def _order_sensitive(shape, dtype):
    """Values whose running sums differ in the last bits with the order of the additions:
    large and small magnitudes mixed (a log-step scan of these is not NumPy's)."""
    values = rng.standard_normal(shape) * 10.0 ** rng.integers(-8, 9, shape)
    if np.issubdtype(dtype, np.complexfloating):
        values = values + 1j * rng.standard_normal(shape) * 10.0 ** rng.integers(-8, 9, shape)
    return values.astype(dtype)


def _same_bits(got, want):
    got = np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes(), np.flatnonzero(got != want)[:5]


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.complex64,
                                   np.complex128])
@pytest.mark.parametrize("shape, axis", [((1000,), 0), ((7, 300), 0), ((7, 300), 1),
                                         ((3, 50, 9), 1), ((3, 50, 9), 2), ((3, 50, 9), None)])
def test_float_cumsum_is_numpys_bit_for_bit(dtype, shape, axis):
    x = _order_sensitive(shape, dtype)
    _same_bits(tk.jit(lambda x: np.cumsum(x, axis=axis), backend="cpu")(x),
               np.cumsum(x, axis=axis))


def test_an_order_sensitive_sum_differs_from_a_log_step_scan():
    """The test above can fail: summing in another order (pairwise) gives other bits."""
    x = _order_sensitive((1000,), np.float32)
    sequential = np.cumsum(x)
    pairwise = np.array([np.sum(x[: i + 1]) for i in range(x.size)], dtype=np.float32)
    assert not np.array_equal(sequential, pairwise)


@pytest.mark.parametrize("make", [
    lambda: np.array([-0.0, -0.0, 0.0, -0.0]),
    lambda: np.array([np.nan, 1.0, np.inf, -np.inf, 2.0]),
    lambda: np.array([np.inf, -np.inf, 1.0]),
    lambda: np.array([3.0e38, 3.0e38, -3.0e38], dtype=np.float32),  # overflow to inf, as NumPy
    lambda: np.zeros((0, 4)),
    lambda: np.zeros((4, 0)),
    lambda: np.ones((1, 5)),
    lambda: np.array(2.5),
], ids=["negative zeros", "nan", "infinities", "overflow", "empty rows", "empty columns",
        "one row", "0-d"])
def test_cumsum_edge_cases_are_numpys(make):
    x = make()
    for axis in ([None] + list(range(x.ndim))):
        _same_bits(tk.jit(lambda x: np.cumsum(x, axis=axis), backend="cpu")(x),
                   np.cumsum(x, axis=axis))


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint8, np.int32, np.int64, np.uint64])
def test_integer_and_boolean_cumsum_widen_as_numpy(dtype):
    info = np.iinfo(dtype) if dtype is not np.bool_ else None
    x = (rng.integers(0, 2, (5, 40)).astype(bool) if info is None else
         rng.integers(info.min, info.max, (5, 40), dtype=dtype, endpoint=True))
    for axis in (0, 1):
        _same_bits(tk.jit(lambda x: np.cumsum(x, axis=axis), backend="cpu")(x),
                   np.cumsum(x, axis=axis))


@pytest.mark.parametrize("fn", [
    lambda x: np.nancumsum(np.where(x > 1, np.nan, x), axis=0),
    lambda x: np.add.accumulate(x, axis=1),
    lambda x: np.cumulative_sum(x, axis=1, include_initial=True),
    lambda x: x.cumsum(),
    lambda x: np.cumsum(x, axis=1, dtype=np.float32),
], ids=["nancumsum", "add.accumulate", "cumulative_sum", "method", "dtype="])
def test_every_form_of_the_sum_scan(fn):
    x = _order_sensitive((6, 70), np.float64)
    _same_bits(tk.jit(fn, backend="cpu")(x), fn(x))


def test_cumsum_is_one_scan_kernel_in_numpys_hlo_text():
    x = np.ones((2, 5), np.float32)
    lowered = tk.jit(lambda x: np.cumsum(x, axis=1), backend="cpu").lower(x)
    text = lowered.as_text(metadata=False)
    assert ("f32[2,5]{1,0} reduce-window(%x.2, %constant.3), window={size=1x5 pad=0_0x4_0}, "
            "to_apply=%region.4") in text
    assert "%constant.3 = f32[] constant(-0)" in text  # the exact identity: -0.0 + x is x
    steps = tk.jit(lambda x: np.cumsum(x, axis=1), backend="cpu").compiled(x)._executable.steps
    assert [(s.kind, s.extra["spec"].kind) for s in steps] == [("kernel", "scan")]


def test_threads_split_the_lines_and_keep_the_bits(monkeypatch):
    monkeypatch.setenv("TOOLKIT_NATIVE_SPLIT_WORK", "1000")
    x = _order_sensitive((64, 40000), np.float64)
    f = tk.jit(lambda x: np.cumsum(x, axis=1), backend="cpu")
    _same_bits(f(x), np.cumsum(x, axis=1))
    (step,) = f.compiled(x)._executable.steps
    assert step.extent == 64


_MODULE = """HloModule m

add {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] {op}(a, b)
}}

ENTRY e {{
  x = f32[{dims}] parameter(0)
  c = f32[] constant({init})
  ROOT r = f32[{out}] reduce-window(x, c), window={window}, to_apply=add
}}
"""


@pytest.mark.parametrize("dims, window, out, op, init", [
    ("10", "{size=3}", "8", "add", "0"),  # a moving sum
    ("10", "{size=3 stride=2 pad=1_1}", "5", "maximum", "-inf"),  # strided max pooling
    ("4,6", "{size=2x3 stride=2x3}", "2,2", "add", "0"),  # a 2-D pooling
    ("4,6", "{size=1x6 pad=0_0x5_0}", "4,6", "add", "1"),  # a scan from a non-identity init
    ("6", "{size=6 pad=0_5}", "6", "add", "0"),  # a suffix window: not a scan
])
def test_general_windows_follow_xlas_semantics_and_run_in_the_interpreter(
        dims, window, out, op, init):
    module = parse_module(_MODULE.format(dims=dims, window=window, out=out, op=op, init=init))
    text = module.to_text()
    assert f"window={window}" in text and parse_module(text).to_text() == text
    x = rng.standard_normal(tuple(int(d) for d in dims.split(","))).astype(np.float32)
    # XLA's definition, element by element: init, then the window in row-major order
    parsed = module.entry.root.attrs["window"]
    ufunc = np.add if op == "add" else np.maximum
    want = np.empty(tuple(int(d) for d in out.split(",")), np.float32)
    for o in np.ndindex(want.shape):
        acc = np.float32(init)
        for w in np.ndindex(tuple(d.size for d in parsed)):
            at = [oi * d.stride + wi - d.low for oi, wi, d in zip(o, w, parsed)]
            inside = all(0 <= a < n for a, n in zip(at, x.shape))
            acc = ufunc(acc, x[tuple(at)] if inside else np.float32(init))
        want[o] = acc
    _same_bits(evaluate_reduce_window(x, np.float32(init), parsed, ufunc), want)
    (got,) = tk.hlo.run(module, x, backend="cpu")
    _same_bits(np.asarray(got), want)
    # (compiled only as a prefix scan from an init that is its own fold: the others run in the
    # reference interpreter, and the executable says why)
    executable = get_backend("cpu").compile(module)
    assert any("is not a prefix scan" in f for f in executable.fallbacks)


def test_a_bad_window_is_named():
    with pytest.raises(Exception, match="lhs_dilate"):
        parse_module(_MODULE.format(dims="10", window="{size=3 lhs_dilate=2}", out="8", op="add",
                                    init="0"))
    with pytest.raises(Exception, match="window of 2 dimensions for an operand of 1"):
        parse_module(_MODULE.format(dims="10", window="{size=3x1}", out="8", op="add", init="0"))


def test_in_bounds_counts_match_the_windows():
    window = (WindowDim(3, 2, 1, 2), WindowDim(4, 1, 3, 0))
    dims = (7, 5)
    ones = np.ones(dims)
    want = evaluate_reduce_window(ones, np.float64(0), window, np.add)
    np.testing.assert_array_equal(in_bounds_counts(dims, window), want)


def test_a_scan_costs_one_fold_per_element():
    x = np.ones((4, 1000), np.float32)
    module = tk.jit(lambda x: np.cumsum(x, axis=1), backend="cpu").lower(x).compile().optimized_hlo
    assert cost_analysis(module)["flops"] == 4000


def test_the_gradient_of_a_cumsum_is_the_reversed_cumsum_and_is_a_scan():
    x = rng.standard_normal((3, 50))
    w = rng.standard_normal((3, 50))
    grad = tk.grad(lambda x: np.sum(w * np.cumsum(x, axis=1)))
    np.testing.assert_allclose(grad(x), np.cumsum(w[:, ::-1], axis=1)[:, ::-1], rtol=1e-13)
    text = tk.jit(grad).lower(x).as_text()
    assert text.count("reduce-window(") == 1 and "window={size=1x50 pad=0_0x49_0}" in text


def test_a_window_reducing_by_another_op_has_no_derivative_and_says_so():
    from toolkit.frontend import ad_windows  # noqa: F401
    from toolkit.frontend.ad_rules import PRECONDITIONS

    module = parse_module(_MODULE.format(dims="10", window="{size=3}", out="8", op="maximum",
                                         init="-inf"))
    assert "unless it is a prefix scan from its reducer's identity" in \
        PRECONDITIONS["reduce-window"](module.entry.root)


def test_vmap_of_a_cumsum_scans_each_batch_element():
    x = _order_sensitive((4, 30), np.float64)
    _same_bits(np.asarray(tk.jit(tk.vmap(np.cumsum))(x)), np.cumsum(x, axis=1))


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_the_gpu_kernel_scans_each_line_on_the_simulated_device(axis):
    x = _order_sensitive((3, 20, 6), np.float32)
    f = tk.jit(lambda x: np.cumsum(x, axis=axis), backend="gpu-emulated")
    interpreted = len(DEVICE.interpreted)
    ran = emulated_during(lambda: _same_bits(tk.device_get(f(x)), np.cumsum(x, axis=axis)))
    assert ran and DEVICE.interpreted[interpreted:] == []


@needs_ptxas
def test_the_gpu_scan_kernel_assembles(tmp_path):
    from toolkit.backends.gpu import compile_ptx

    x = np.ones((8, 100), np.float64)
    module = tk.jit(lambda x: np.cumsum(x, axis=1), backend="interpreter").compiled(x).optimized_hlo
    program = compile_ptx(module, "sm_80")
    assert [k.spec.kind for k in program.kernels] == ["scan"] and not program.unsupported
    assemble(program.ptx, "sm_80", tmp_path)


def test_argsort_orders_ties_as_numpys_default_sort_and_kind_stable_as_its_stable_one():
    """np.argsort's default sort is not stable: ties come out in the order NumPy's own default
    sort gives them (toolkit's library call is that sort), which differs from a stable order."""
    x = rng.integers(0, 4, 3000)
    default, stable = np.argsort(x), np.argsort(x, kind="stable")
    assert not np.array_equal(default, stable)  # (the test can fail)
    np.testing.assert_array_equal(tk.jit(np.argsort, backend="cpu")(x), default)
    np.testing.assert_array_equal(
        tk.jit(lambda x: np.argsort(x, kind="stable"), backend="cpu")(x), stable)
    np.testing.assert_array_equal(
        tk.jit(lambda x: np.argsort(x, stable=True), backend="cpu")(x), stable)
    zeros = np.tile([0.0, -0.0, -0.0], 700)  # equal values, different bits: the sort's order
    np.testing.assert_array_equal(np.signbit(tk.jit(np.sort, backend="cpu")(zeros)),
                                  np.signbit(np.sort(zeros)))
    grad = tk.grad(lambda v: np.sum(np.sort(v)[:10] * np.arange(10.0)))(zeros)
    np.testing.assert_array_equal(np.flatnonzero(grad), np.argsort(zeros)[1:10])


def test_kind_and_stable_together_is_numpys_error():
    with pytest.raises(ValueError, match="can't be provided at the same time"):
        tk.jit(lambda x: np.sort(x, kind="stable", stable=True))(np.ones(3))


@pytest.mark.parametrize("fn", [
    lambda x: np.cumprod(x, axis=1),
    lambda x: np.maximum.accumulate(x, axis=1),
    lambda x: np.minimum.accumulate(x, axis=0),
    lambda x: np.nancumprod(np.where(x > 1.5, np.nan, x), axis=0),
], ids=["cumprod", "maximum.accumulate", "minimum.accumulate", "nancumprod"])
def test_products_maxima_and_minima_scan_in_numpys_order(fn):
    x = (1.0 + 0.05 * rng.standard_normal((5, 300))).astype(np.float32)
    x[1, ::7] = -0.0
    x[2, ::5] = 0.0
    x[3, 11] = np.nan
    got = tk.jit(fn, backend="cpu")(x)
    _same_bits(got, fn(x))  # (the signs of tied zeros a maximum keeps included)
    steps = tk.jit(fn, backend="cpu").compiled(x)._executable.steps
    assert any(s.extra["spec"].kind == "scan" for s in steps if s.kind == "kernel")


def test_a_product_scan_differs_from_a_log_step_one():
    """The test above can fail: multiplying in log-step order gives other bits."""
    from toolkit.frontend.scans import log_step_scan

    x = (1.0 + 0.05 * rng.standard_normal(300)).astype(np.float32)
    log_step = tk.jit(lambda x: log_step_scan(tk.numpy.asarray(x), 0, "multiply"))(x)
    assert not np.array_equal(np.asarray(log_step), np.cumprod(x))


@pytest.mark.parametrize("fn, jax_fn", [
    (lambda x: np.sum(np.cumprod(x) * np.arange(5.0)), "cumprod"),
    (lambda x: np.sum(np.maximum.accumulate(x) * np.arange(5.0)), "cummax"),
    (lambda x: np.sum(np.minimum.accumulate(x) ** 2), "cummin"),
])
def test_the_derivatives_of_product_and_extremum_scans(fn, jax_fn):
    x = np.array([1.5, -2.0, 0.5, 3.0, 0.7])
    want = {  # the analytical derivatives at x
        "cumprod": np.array([-21.4, 16.05, -58.2, -8.7, -18.0]),
        "cummax": np.array([3.0, 0.0, 0.0, 7.0, 0.0]),
        "cummin": np.array([3.0, -16.0, 0.0, 0.0, 0.0]),
    }[jax_fn]
    np.testing.assert_allclose(tk.grad(fn)(x), want, rtol=1e-12)
    tangent = np.array([0.3, -1.0, 2.0, 0.5, 1.0])
    _, t_out = tk.jvp(fn, (x,), (tangent,))
    np.testing.assert_allclose(t_out, want @ tangent, rtol=1e-12)


@pytest.mark.parametrize("fn", [np.cumsum, lambda z: np.cumulative_sum(z, axis=1)],
                         ids=["cumsum", "cumulative_sum"])
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_scans_are_numpys_bit_for_bit(fn, dtype):
    z = (_order_sensitive((4, 60), dtype) * 1e-3 + 1).astype(dtype)
    _same_bits(tk.jit(fn, backend="cpu")(z), fn(z))
    got = tk.device_get(tk.jit(fn, backend="gpu-emulated")(z))
    _same_bits(got, fn(z))


def test_a_complex_outer_product_is_numpys_own_loop():
    """A (m, 1) @ (1, n) complex product is NumPy's own loop (0 + a * b), not gemm, whose
    zeros and last bits differ."""
    a = np.array([[-0.0], [1.0], [-2.0]], np.complex128)
    b = np.array([[1.0, -0.0, 3.0]], np.complex128)
    got = tk.jit(lambda a, b: (a @ b) * 2, backend="cpu")(a, b)
    _same_bits(np.asarray(got), (a @ b) * 2)
    r = rng.standard_normal((2, 3, 1)) + 1j * rng.standard_normal((2, 3, 1))
    _same_bits(np.asarray(tk.jit(lambda a, b: a @ b + 1, backend="cpu")(r[0], r[1].T)),
               r[0] @ r[1].T + 1)


def test_complex_products_and_extrema_accumulate_are_left_to_numpy():
    from toolkit.frontend.errors import UnsupportedNumpyError

    z = np.array([np.inf + 0j, 2 + 1j, 3 + 0j])
    for ufunc in (np.multiply, np.maximum):
        with pytest.raises(UnsupportedNumpyError, match="of complex numbers"):
            tk.jit(lambda z: ufunc.accumulate(z), fullgraph=True)(z)
        np.testing.assert_array_equal(tk.jit(lambda z: ufunc.accumulate(z))(z),
                                      ufunc.accumulate(z))


def test_an_xor_scan_from_a_nonzero_init_follows_xlas_definition():
    module = parse_module("""HloModule m

x {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT s = s32[] xor(a, b)
}

ENTRY e {
  p = s32[4] parameter(0)
  c = s32[] constant(1)
  ROOT r = s32[4] reduce-window(p, c), window={size=4 pad=3_0}, to_apply=x
}
""")
    x = np.zeros(4, np.int32)
    want = np.array([0, 1, 0, 1], np.int32)  # init folded 4 - i times, then x[0..i]
    for backend in ("interpreter", "cpu"):
        np.testing.assert_array_equal(np.asarray(tk.hlo.run(module, x, backend=backend)[0]),
                                      want)
