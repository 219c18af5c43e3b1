"""complex64/complex128: HLO text, the interpreter, the CPU and the (emulated) GPU code
generators, and the frontend, against NumPy itself. Arithmetic and abs are bit for bit
NumPy's (its SIMD loops' formulas, special values included); exp/log/sqrt are toolkit's own
formulas for C99's functions, checked to a few ulp and on C99's special-value table."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import toolkit as tk
from toolkit.backends.gpu import compile_ptx
from toolkit.frontend.errors import UnsupportedNumpyError
from toolkit.ir.shape_inference import ShapeError

import helpers
from helpers import assert_same
from test_gpu_codegen import assemble, needs_ptxas
from test_gpu_emulated import DEVICE  # noqa: F401  (registers the gpu-emulated backend)

BACKENDS = ["interpreter", "cpu", "gpu-emulated"]
SPECIAL = [0.0, -0.0, 1.0, -1.0, 2.5, -3.0, 1e-300, 1e300, np.inf, -np.inf, np.nan]


def special_grid(dtype):
    """Every pairing of special parts: zeros of both signs, infinities, NaN, tiny and huge."""
    return helpers.special_grid(SPECIAL, dtype)


run = helpers.run_jitted
expect = helpers.expect


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_arithmetic_is_numpys_bit_for_bit_on_special_values(backend, dtype):
    z = special_grid(dtype)
    w = np.roll(z, 17)
    fn = lambda a, b: (  # noqa: E731
        a + b,
        a - b,
        a * b,
        a / b,
        -a,
        np.conj(a),
        np.abs(a),
        np.square(a),
        np.reciprocal(b),
        a == b,
        a != b,
        np.isnan(a),
        np.isinf(a),
        np.isfinite(a),
        # what the simplifier must leave alone: y * 0 is NaN for infinite y
        a * 1,
        a + 0,
        a - 0,
        a / 1,
        a * 0,
        a.sum(axis=0, keepdims=True)[:1] * 0 + a[:1],
    )
    for got, want in zip(run(fn, backend, z, w), expect(fn, z, w)):
        assert_same(got, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_integer_powers_multiply_as_numpys_scalar_loop(backend):
    z = np.random.default_rng(1).standard_normal(64) + 1j * np.random.default_rng(
        2
    ).standard_normal(64)
    fn = lambda a: (a ** 2, a ** 3, a ** 5, a ** -2, a ** 0, a ** 1, a ** 17)  # noqa: E731
    for got, want in zip(run(fn, backend, z), expect(fn, z)):
        assert_same(got, want)


def _finite(dtype, size=400, seed=0):
    rng = np.random.default_rng(seed)
    scale = np.exp(rng.uniform(-8, 8, size))  # magnitudes across many binades, near 1 included
    z = (rng.standard_normal(size) + 1j * rng.standard_normal(size)) * scale
    # |z| close to 1: log's real part is tiny
    z[:4] = [1 + 1e-10j, 1e-10 + 1j, -1 + 1e-12j, 0.5 + 0.5j]
    return z.astype(dtype)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_exp_log_sqrt_within_a_few_ulp(backend, dtype):
    z = _finite(dtype)
    rtol = 2e-6 if dtype == np.complex64 else 4e-15
    small = np.clip(z.real, -80, 80) + 1j * z.imag.clip(-1e3, 1e3)  # exp stays finite
    for fn, arg in ((np.exp, small.astype(dtype)), (np.log, z), (np.sqrt, z)):
        got, want = run(fn, backend, arg), expect(fn, arg)
        assert got.dtype == want.dtype
        # each part to rtol of the modulus (a part much smaller than |z| carries absolute error)
        np.testing.assert_allclose(got.real, want.real, rtol=rtol, atol=0, err_msg=fn.__name__) \
            if fn is np.log else None  # log's real part is small near |z| = 1: relative error
        err = np.abs(got - want) / np.maximum(np.abs(want), np.finfo(want.real.dtype).tiny)
        assert err.max() <= rtol * 8, (fn.__name__, err.max())


@pytest.mark.parametrize("backend", BACKENDS)
def test_sqrt_follows_c99s_special_values(backend):
    z = special_grid(np.complex128)
    got, want = run(np.sqrt, backend, z), expect(np.sqrt, z)
    finite = np.isfinite(z)
    # C99 Annex G: exact where a part is zero, infinite or NaN; finite values to an ulp
    assert_same(got[~finite], want[~finite])
    np.testing.assert_allclose(got[finite], want[finite], rtol=3e-16, atol=0)
    zeros = z == 0
    assert_same(got[zeros], want[zeros])  # sqrt(+-0 +- 0i) keeps the imaginary zero's sign


@pytest.mark.parametrize("backend", BACKENDS)
def test_exp_and_log_special_values(backend):
    z = special_grid(np.complex128)
    # exp: the documented exception is an infinite real part beside an infinite/NaN imaginary part
    documented = np.isinf(z.real) & ~np.isfinite(z.imag)
    got, want = run(np.exp, backend, z), expect(np.exp, z)
    keep = ~documented & (np.abs(z.real) < 700)
    np.testing.assert_allclose(got[keep], want[keep], rtol=1e-15, atol=0, equal_nan=True)
    got, want = run(np.log, backend, z), expect(np.log, z)
    np.testing.assert_allclose(got, want, rtol=1e-15, atol=0, equal_nan=True)
    assert_same(got[z == 0], want[z == 0])  # log(0) = -inf + (0 or pi)i


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_random_arithmetic_matches_numpy_exactly_on_the_cpu(data):
    dtype = data.draw(st.sampled_from([np.complex64, np.complex128]))
    shapes = data.draw(
        hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=5)
    )
    elements = st.complex_numbers(
        width=np.dtype(dtype).itemsize * 8, allow_nan=True, allow_infinity=True
    )
    a = data.draw(hnp.arrays(dtype, shapes.input_shapes[0], elements=elements))
    b = data.draw(hnp.arrays(dtype, shapes.input_shapes[1], elements=elements))
    fn = lambda x, y: (x + y, x - y, x * y, x / y, np.abs(x), x == y, np.conj(y) * 2.0)  # noqa: E731
    # NumPy's multiply rounds as its SIMD loop (with FMA) except where its iterator hands the
    # scalar loop a size-1 result broadcast from fewer dimensions ((1, 1) * (1,)), which rounds
    # twice; toolkit computes as the SIMD loop, so the reference is NumPy on contiguous operands
    # of the result's shape, which always takes that loop
    wants = list(expect(fn, a, b))
    a_full, b_full = (np.array(v, order="C") for v in np.broadcast_arrays(a, b))
    wants[2] = expect(lambda x, y: x * y, a_full, b_full)
    for got, want in zip(run(fn, "cpu", a, b), wants, strict=True):
        assert_same(got, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_parts_angle_and_promotion_with_python_complex(backend):
    rng = np.random.default_rng(3)
    z = rng.standard_normal(12) + 1j * rng.standard_normal(12)
    x = rng.standard_normal(12).astype(np.float32)
    fn = lambda a, r: (a.real, a.imag, np.real(a), np.imag(a), a.conj(), np.angle(a),  # noqa: E731
                       np.angle(a, deg=True), r * 1j, r + 2j, (r * 1j).dtype == np.complex64,
                       np.iscomplex(a), np.isreal(a + 0 * 1j), np.real(r), np.imag(r), np.angle(r))
    got, want = run(fn, backend, z, x), expect(fn, z, x)
    for g, w in zip(got, want):
        assert_same(g, w, approx=np.asarray(w).dtype.kind == "f")


@pytest.mark.parametrize("backend", BACKENDS)
def test_reductions_dots_and_data_movement(backend):
    rng = np.random.default_rng(4)
    a = (rng.standard_normal((6, 5)) + 1j * rng.standard_normal((6, 5)))
    b = (rng.standard_normal((5, 4)) + 1j * rng.standard_normal((5, 4))).astype(np.complex64)
    fn = lambda a, b: (  # noqa: E731
        a.sum(),
        a.sum(axis=0),
        a.mean(axis=1),
        np.prod(a[:3], axis=0),
        a @ b,
        np.dot(a[0], a[1]),
        np.vdot(a[0], a[1]),
        np.einsum("ij,jk->ik", a, b),
        np.concatenate([a, a[::-1]]),
        a.T.reshape(-1)[::3],
        np.where(a.real > 0, a, 1j),
        a.var(axis=0),
        np.std(b),
        np.all(a),
        np.any(a * 0, axis=1),
    )
    for g, w in zip(run(fn, backend, a, b), expect(fn, a, b)):
        assert_same(g, w, approx=True, rtol=1e-6 if np.asarray(w).dtype == np.complex64 else 1e-13)


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_sort_complex_orders_as_numpy_nans_included(backend):
    n = np.nan
    z = np.array(
        [
            3 + 1j,
            1 + 2j,
            complex(n, 1),
            1 + 1j,
            complex(1, n),
            complex(n, n),
            complex(2, n),
            complex(n, 0),
            -1 - 5j,
            1 + 1j,
            -0.0 + 0j,
            0 - 0j,
        ]
    ).reshape(2, 6)
    assert_same(run(np.sort_complex, backend, z), np.sort_complex(z))
    small = np.array([3, -1, 2], np.int16)
    assert_same(run(np.sort_complex, backend, small), np.sort_complex(small))


def test_writes_into_complex_arguments_reach_the_caller():
    def update(z, v):
        z[1:3] = v[:2]
        z *= 1j
        z[0] += 2

    z = np.arange(5) * (1 - 1j)
    v = np.array([7 + 7j, 8 - 8j])
    want = z.copy()
    update(want, v)
    tk.jit(update, backend="cpu")(z, v)
    assert_same(z, want)


@pytest.mark.parametrize("fn, name", [
    (lambda z: np.log10(z), "np.log10 of complex numbers"),
    (lambda z: np.maximum(z, z), "np.maximum of complex numbers"),
    (lambda z: z < z, "np.less of complex numbers"),
    (lambda z: np.expm1(z), "np.expm1 of complex numbers"),
    (lambda z: np.median(z), r"np.median of a complex array"),
    (lambda z: np.sort(z), r"np.sort of a complex array"),
    (lambda z: np.nancumsum(z), r"np.nancumsum of a complex array"),
])
def test_what_is_not_traced_on_complex_numbers_says_so(fn, name):
    """Where the graph may not break; where it may, NumPy runs it at a break."""
    z = np.array([1 + 2j, 3 - 1j])
    with pytest.raises(UnsupportedNumpyError, match=name):
        tk.jit(fn, fullgraph=True)(z)
    assert_same(tk.jit(fn)(z), fn(z))


def test_hlo_text_round_trips_complex_literals_and_ops():
    text = """HloModule m
ENTRY e {
  x = c128[2] parameter(0)
  k = c128[2] constant({(1, -0), (-inf, nan)})
  s = c64[] constant((0.5, 2))
  m = c128[2] multiply(x, k)
  r = f64[2] real(m)
  i = f64[2] imag(m)
  a = f64[2] abs(x)
  c = c128[2] complex(a, r)
  ROOT t = (c128[2], f64[2], c128[2], c64[]) tuple(m, i, c, s)
}"""
    module = tk.hlo.parse(text)
    printed = module.to_text(metadata=False)
    assert "constant({(1, -0), (-inf, nan)})" in printed
    assert "c64[] constant((0.5, 2))" in printed
    assert "f64[2]{0} real(%m)" in printed and "c128[2]{0} complex(%a, %r)" in printed
    assert tk.hlo.parse(printed).to_text(metadata=False) == printed
    x = np.array([1 + 2j, -3 + 0.5j])
    for backend in ("interpreter", "cpu"):
        m, i, c, s = tk.hlo.run(module, x, backend=backend)
        with np.errstate(all="ignore"):
            want = x * np.array([1 - 0j, complex(-np.inf, np.nan)])
        assert_same(m, want)
        assert_same(i, want.imag)
        assert s == np.complex64(0.5 + 2j)


@pytest.mark.parametrize(
    "text, message",
    [
        ("x = c64[2] parameter(0)\n  ROOT y = f32[2] convert(x)", "would drop the imaginary part"),
        (
            "x = c64[2] parameter(0)\n  ROOT y = c64[2] sine(x)",
            "sine on complex numbers is not supported",
        ),
        (
            "x = c64[2] parameter(0)\n  ROOT y = pred[2] compare(x, x), direction=LT",
            "needs direction=EQ|NE",
        ),
        (
            "x = s32[2] parameter(0)\n  ROOT y = c64[2] complex(x, x)",
            "complex needs f32 or f64 parts",
        ),
    ],
)
def test_the_ir_refuses_what_complex_numbers_do_not_have(text, message):
    with pytest.raises((ShapeError, tk.hlo.HloParseError, Exception), match=message):
        tk.hlo.parse(f"HloModule m\nENTRY e {{\n  {text}\n}}")


@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_complex_kernels_assemble_for_the_gpu(arch, tmp_path):
    z = (np.ones((32, 40)) * (1 + 2j)).astype(np.complex64)
    fn = lambda a: (  # noqa: E731
        a * a / (a + 1),
        np.abs(a),
        np.exp(a),
        np.sqrt(a),
        np.log(a),
        a.sum(axis=1),
        a.sum(),
    )
    program = compile_ptx(tk.jit(fn, backend="interpreter").compiled(z).optimized_hlo, arch)
    assert program.kernels and not program.unsupported, program.unsupported
    assemble(program.ptx, arch, tmp_path)
