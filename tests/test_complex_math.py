"""Complex power and the complex trigonometric/hyperbolic functions and their inverses, on the
interpreter, the CPU and the (emulated) GPU, against NumPy (which calls glibc's C99 functions).

Stated bounds: every part of every finite result within 5 ulp of NumPy's, relative to the part
itself (complex128; complex64: 3 ulp, computed in float64 and rounded once); special values
(signed zeros, infinities, NaN, the branch cuts) exactly NumPy's; integer powers bit for bit;
other powers within 8 eps (1 + |w log z|), the error of exp(w log z) that NumPy's has too."""

import numpy as np
import pytest

import toolkit as tk
from toolkit.backends.gpu import compile_ptx

import helpers
from helpers import assert_same
from test_gpu_codegen import assemble, needs_ptxas
from test_gpu_emulated import DEVICE  # noqa: F401  (registers the gpu-emulated backend)

BACKENDS = ["interpreter", "cpu", "gpu-emulated"]
FUNCTIONS = [np.sin, np.cos, np.tan, np.sinh, np.cosh, np.tanh, np.arcsin, np.arccos,
             np.arctan, np.arcsinh, np.arccosh, np.arctanh]
SPECIAL = [0.0, -0.0, 1.0, -1.0, 2.5, -3.0, 0.5, 1e-300, 1e300, np.inf, -np.inf, np.nan]
ULP = {np.complex128: 5, np.complex64: 3}


def special_grid(dtype=np.complex128):
    return helpers.special_grid(SPECIAL, dtype)


run = helpers.run_jitted
expect = helpers.expect


def part_ulps(got, want):
    """Each part's distance from NumPy's in ulp of that part (the worse part per element);
    NaN where NumPy's part is NaN and ours is not, or ours is and NumPy's is not."""
    eps, tiny = np.finfo(want.real.dtype).eps, np.finfo(want.real.dtype).tiny
    worst = np.zeros(want.shape)
    for g, w in ((got.real, want.real), (got.imag, want.imag)):
        with np.errstate(all="ignore"):
            err = np.abs(g.astype(np.float64) - w) / np.maximum(np.abs(w), tiny) / eps
        same = (g == w) | (np.isnan(g) & np.isnan(w))
        worst = np.maximum(worst, np.where(same, 0.0, err))
    return worst


def assert_special_values_match(got, want, z, name, finite=True):
    """NaN where NumPy has NaN, zeros signed as NumPy's, infinities as NumPy's; the finite
    rest within the dtype's bound (unless ``finite`` is False: checked by the caller)."""
    bound = ULP[want.dtype.type]
    for g, w in ((got.real, want.real), (got.imag, want.imag)):
        exact = ~np.isfinite(w) | (w == 0)
        bad = exact & ~((g == w) & (np.signbit(g) == np.signbit(w)) | np.isnan(g) & np.isnan(w))
        assert not bad.any(), (name, z[bad][:5], g[bad][:5], w[bad][:5])
    err = part_ulps(got, want) if finite else np.zeros(1)
    assert np.nanmax(err) <= bound, (name, z[np.nanargmax(err)], np.nanmax(err))


def assert_power_close(got, want, amplification, where):
    """``|got - want| <= 8 eps (1 + |w log z|) |want|`` where NumPy's result is finite and
    nonzero: exp(w log z) turns log's rounding into a relative error of |w log z| ulp."""
    eps = np.finfo(want.real.dtype).eps
    ok = np.isfinite(want) & (np.abs(want) > np.finfo(want.real.dtype).tiny)
    err = np.abs(got[ok] - want[ok]) / np.abs(want[ok]) / eps / amplification[ok]
    assert err.max() <= 8, (err.max(), where[ok][np.argmax(err)])


def random_values(dtype, seed=0, size=600):
    """Magnitudes from e^-20 to e^20 in every direction, the unit square, |z| near 1, and
    points near the branch points +-1 and +-i."""
    rng = np.random.default_rng(seed)
    z = np.exp(rng.uniform(-20, 20, size)) * np.exp(1j * rng.uniform(-np.pi, np.pi, size))
    z[:150] = rng.uniform(-3, 3, 150) + 1j * rng.uniform(-3, 3, 150)
    z[150:200] = (1 + 1e-9 * rng.standard_normal(50)) * np.exp(1j * rng.uniform(-4, 4, 50))
    z[200:220] = 1 + 1j * np.exp(rng.uniform(-30, 0, 20))
    z[220:240] = -1j + np.exp(rng.uniform(-30, 0, 20))
    return z.astype(dtype)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_functions_match_numpy_on_special_values_and_branch_cuts(backend, dtype):
    z = special_grid(dtype)
    # the branch cuts: the real axis beyond +-1 and the imaginary axis beyond +-i, zeros signed
    cut = np.array([2.0, -2.0, 1.5, -7.0, 1e5, 0.25])
    with np.errstate(all="ignore"):
        cuts = np.concatenate([cut + 0j, cut - 0j, 0j + 1j * cut, -0.0 + 1j * cut,
                               (cut - 0j) * 1j]).astype(dtype)
    cuts.real[-6:] = -0.0
    z = np.concatenate([z, cuts])
    got = run(lambda a: tuple(f(a) for f in FUNCTIONS), backend, z)
    for f, g in zip(FUNCTIONS, got):
        want = expect(f, z)
        assert g.dtype == want.dtype
        assert_special_values_match(g, want, z, f.__name__)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_functions_within_their_ulp_bound_over_many_magnitudes(backend, dtype):
    z = random_values(dtype)
    # sin/cos/sinh/cosh overflow beyond ~710: keep the growing part where results are finite
    grows = (z.real.clip(-700, 700) + 1j * z.imag.clip(-700, 700)).astype(dtype)
    got = run(lambda a, b: tuple(f(b if f.__name__ in ("sinh", "cosh", "tanh") else
                                   (b * 1j if f.__name__ in ("sin", "cos", "tan") else a))
                                 for f in FUNCTIONS), backend, z, grows)
    for f, g in zip(FUNCTIONS, got):
        arg = grows if f.__name__ in ("sinh", "cosh", "tanh") else (
            (grows * 1j).astype(dtype) if f.__name__ in ("sin", "cos", "tan") else z)
        want = expect(f, arg)
        err = part_ulps(g, want)
        assert np.nanmax(err) <= ULP[dtype], (f.__name__, arg[np.nanargmax(err)], np.nanmax(err))


@pytest.mark.parametrize("backend", BACKENDS)
def test_power_follows_npy_cpow_on_every_pair_of_special_values(backend):
    g = special_grid()
    z, w = np.repeat(g, len(g)), np.tile(g, len(g))
    got, want = run(np.power, backend, z, w), expect(np.power, z, w)
    # where the phase Im(w log z) is beyond 1e15 one ulp of it is more than a turn: the signs
    # of the result are noise (glibc's and ours differ with the last bit of log z), its size not
    exponent = expect(lambda a, b: b * np.log(a), z, w)
    phase = np.abs(exponent.imag)
    noise = np.isfinite(phase) & (phase > 1e15)
    amplification = np.where(np.isfinite(exponent), 1 + np.abs(exponent), np.inf)
    np.testing.assert_allclose(np.abs(got[noise]), np.abs(want[noise]), rtol=1e-13, atol=0,
                               equal_nan=True)
    keep = ~noise
    pairs = np.stack([z, w], 1)
    assert_special_values_match(got[keep], want[keep], pairs[keep], "power", finite=False)
    assert_power_close(got[keep], want[keep], amplification[keep], pairs[keep])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_integer_valued_exponents_multiply_bit_for_bit(backend, dtype):
    rng = np.random.default_rng(5)
    z = (rng.standard_normal(200) + 1j * rng.standard_normal(200)).astype(dtype)
    n = rng.integers(-99, 100, 200).astype(np.float64)
    n[:6] = [0, 1, 2, 3, -1, 99]
    w = n.astype(dtype)  # a traced exponent: the integer path is chosen per element
    fn = lambda a, b, r: (np.power(a, b), np.power(a, r), a ** 7, a ** -3, a ** 7.0)  # noqa: E731
    for got, want in zip(run(fn, backend, z, w, n), expect(fn, z, w, n)):
        assert_same(got, want)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_general_powers_within_the_error_of_exp_w_log_z(backend, dtype):
    z = random_values(dtype, seed=1, size=400)
    rng = np.random.default_rng(2)
    w = (rng.uniform(-3, 3, 400) + 1j * rng.uniform(-3, 3, 400)).astype(dtype)
    w[:50] = rng.uniform(-5, 5, 50)  # real, non-integer exponents
    w[50:60] = [100, -100, 150, 1e3, 0.5, -0.5, 2.5, 1 / 3, 99.5, -250]
    fn = lambda a, b: (np.power(a, b), a ** b, a ** 2.5, a ** 0.5, a ** -1, a ** 100,  # noqa: E731
                       np.power(a, 1j), np.power(np.abs(a), b))
    got, want = run(fn, backend, z, w), expect(fn, z, w)
    exponents = [w, w, 2.5, 0.5, -1, 100, 1j, w]
    bases = [z, z, z, z, z, z, z, np.abs(z)]
    for g, e, x, b in zip(got, want, exponents, bases):
        assert g.dtype == e.dtype
        amplification = 1 + np.abs(np.asarray(x) * np.log(b.astype(np.complex128)))
        assert_power_close(g, e, np.broadcast_to(amplification, e.shape), z)
    assert_same(got[3], run(np.sqrt, backend, z))  # ndarray.__pow__ sends 0.5 to np.sqrt
    assert_same(got[4], np.reciprocal(z))  # and the Python int -1 to np.reciprocal


def test_real_arrays_to_half_and_minus_one_take_numpys_fast_paths():
    x = np.array([-0.0, 4.0, -np.inf, 2.0])
    fn = lambda a: (a ** 0.5, a ** -1, a ** 0.5000001)  # noqa: E731
    for got, want in zip(run(fn, "cpu", x), expect(fn, x)):
        assert_same(got, want, approx=True)
    assert_same(run(lambda a: a ** 0.5, "interpreter", x), expect(np.sqrt, x))


@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_complex_math_kernels_assemble_for_the_gpu(arch, tmp_path):
    z = (np.ones((8, 16)) * (1 + 2j)).astype(np.complex64)
    fn = lambda a, b: tuple(f(a) for f in FUNCTIONS) + (a ** b, np.power(a, 2.5))  # noqa: E731
    program = compile_ptx(tk.jit(fn, backend="interpreter").compiled(z, z).optimized_hlo, arch)
    assert program.kernels and not program.unsupported, program.unsupported
    assemble(program.ptx, arch, tmp_path)
