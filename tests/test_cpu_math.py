"""toolkit's own float32 vector math (CPU backend): measured error tables and special values."""
import math
import os
import zlib

import numpy as np
import pytest

from toolkit.backends.cpu import compile_module
import toolkit as tk

N = 100_000


# another draw of every sample: TOOLKIT_TEST_SEED=1 python -m pytest tests/test_cpu_math.py (the
# bounds below hold for seeds 0-29)
SEED = int(os.environ.get("TOOLKIT_TEST_SEED", "0"))


def seeded(name: str) -> np.random.Generator:
    """A generator of its own for each test and each table of samples, seeded by its name: what
    one draws never depends on which tests ran before it in the process (xdist's order)."""
    return np.random.default_rng([zlib.crc32(name.encode()), SEED])

_erf = np.vectorize(math.erf, otypes=[np.float64])


def run_op(opcode: str, x: np.ndarray) -> np.ndarray:
    module = tk.hlo.parse(f"HloModule m\nENTRY e {{\n  p = f32[{x.size}] parameter(0)\n"
                          f"  ROOT r = f32[{x.size}] {opcode}(p)\n}}\n")
    return compile_module(module)([x.astype(np.float32)])[0]


def max_ulp(got: np.ndarray, ref64: np.ndarray) -> float:
    ref32 = ref64.astype(np.float32)
    ok = np.isfinite(ref32) & np.isfinite(got)
    spacing = np.maximum(np.spacing(np.abs(ref32[ok])).astype(np.float64),
                         float(np.finfo(np.float32).smallest_subnormal))
    return float(np.max(np.abs(got[ok].astype(np.float64) - ref64[ok]) / spacing))


def log_uniform(rng, lo, hi, n):
    return np.exp(rng.uniform(np.log(lo), np.log(hi), n))


rng = seeded("CASES")
CASES = {  # opcode: (reference, samples, documented bound in ulp)
    "exponential": (np.exp, rng.uniform(-104, 89, N), 1.2),
    "log": (np.log, log_uniform(rng, 1e-45, 3e38, N), 2.85),  # every float32 > 0: 2.845
    "log-plus-one": (
        np.log1p,
        np.concatenate([rng.uniform(-0.999, 1, N), log_uniform(rng, 1e-30, 1e30, N)]),
        3.5,
    ),
    "exponential-minus-one": (
        np.expm1,
        np.concatenate([rng.uniform(-20, 88, N), rng.uniform(-1e-3, 1e-3, N)]),
        4.0,
    ),
    # every float32 in [-10, 10]: 6.88 ulp (at 5.828, where tanh is 0.99998)
    "tanh": (np.tanh, np.concatenate([rng.uniform(-10, 10, N), rng.uniform(-1e-3, 1e-3, N)]), 6.9),
    "logistic": (lambda x: 1 / (1 + np.exp(-x)), rng.uniform(-80, 80, N), 2.5),
    "erf": (_erf, rng.uniform(-5, 5, N), 6.0),
    "sine": (np.sin, rng.uniform(-np.pi, np.pi, N), 3.0),
    "cosine": (np.cos, rng.uniform(-np.pi, np.pi, N), 3.0),
}


@pytest.mark.parametrize("opcode", sorted(CASES))
def test_max_ulp_error_within_documented_bound(opcode):
    ref, x, bound = CASES[opcode]
    x = x.astype(np.float32)
    got = run_op(opcode, x)
    assert max_ulp(got, ref(x.astype(np.float64))) <= bound


# Over every float32 of [-8192, 8192]: the three-part reduction by pi/2 leaves at most 8.69e-8
# absolute error, which near the functions' zeros (tiny results) is up to 478 ulp (sine, at
# 505.796, next to 161 pi) and 975 ulp (cosine, at 6715.15).
LARGE_ARGUMENT_BOUNDS = {"sine": (np.sin, 8.7e-8, 478), "cosine": (np.cos, 8.7e-8, 975)}


@pytest.mark.parametrize("opcode", sorted(LARGE_ARGUMENT_BOUNDS))
def test_sin_cos_large_arguments(opcode):
    ref, absolute, ulp = LARGE_ARGUMENT_BOUNDS[opcode]
    rng = seeded(f"test_sin_cos_large_arguments[{opcode}]")
    x = rng.uniform(-8192, 8192, N).astype(np.float32)
    got, want = run_op(opcode, x), ref(x.astype(np.float64))
    assert np.max(np.abs(got - want)) <= absolute
    assert max_ulp(got, want) <= ulp


SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 1.17549435e-38,
                    88.72, 88.73, -87.33, -103.9, -104.5, 1.0, -1.0, 3.4e38, -3.4e38], np.float32)


@pytest.mark.parametrize("opcode,ref", [
    ("exponential", np.exp), ("log", np.log), ("log-plus-one", np.log1p),
    ("exponential-minus-one", np.expm1), ("tanh", np.tanh), ("sine", np.sin), ("cosine", np.cos),
    ("erf", _erf), ("logistic", lambda x: 1 / (1 + np.exp(-x))),
])
def test_special_values(opcode, ref):
    with np.errstate(all="ignore"):
        expected = np.asarray(ref(SPECIAL.astype(np.float64))).astype(np.float32)
    got = run_op(opcode, SPECIAL)
    if opcode in ("sine", "cosine"):  # accurate for |x| < 8192 only; bounded beyond
        huge = np.abs(SPECIAL) > 8192
        assert np.all(np.abs(got[huge & np.isfinite(SPECIAL)]) <= 1)
        got, expected = (
            np.where(huge & np.isfinite(SPECIAL), 0, got),
            np.where(huge & np.isfinite(SPECIAL), 0, expected),
        )
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected), err_msg=opcode)
    finite = np.isfinite(expected) & ~np.isnan(expected)
    np.testing.assert_array_equal(np.isinf(got) & ~finite, np.isinf(expected), err_msg=opcode)
    np.testing.assert_allclose(got[finite], expected[finite], rtol=2e-6, atol=2e-38, err_msg=opcode)
    if opcode in ("exponential-minus-one", "log-plus-one", "tanh", "sine", "erf"):
        zeros = SPECIAL == 0
        np.testing.assert_array_equal(
            np.signbit(got[zeros]), np.signbit(SPECIAL[zeros]), err_msg=opcode
        )


# ---- float64: toolkit's own vectorised exp and log (documented bounds, against NumPy's results)
# ----
def run_op64(opcode: str, x: np.ndarray) -> np.ndarray:
    module = tk.hlo.parse(f"HloModule m\nENTRY e {{\n  p = f64[{x.size}] parameter(0)\n"
                          f"  ROOT r = f64[{x.size}] {opcode}(p)\n}}\n")
    return compile_module(module)([x.astype(np.float64)])[0]


rng = seeded("CASES64")
CASES64 = {  # opcode: (reference, samples, bound in ulp of NumPy's float64 result)
    "exponential": (
        np.exp,
        np.concatenate([rng.uniform(-745, 709.7, N), rng.uniform(-1, 1, N)]),
        1.0,
    ),
    "log": (
        np.log,
        np.concatenate(
            [np.exp(rng.uniform(np.log(5e-324), np.log(1.7e308), N)), rng.uniform(0.5, 2.0, N)]
        ),
        3.0,
    ),
    "exponential-minus-one": (
        np.expm1,
        np.concatenate(
            [rng.uniform(-50, 709.7, N), rng.uniform(-1, 1, N), rng.uniform(-1e-8, 1e-8, N)]
        ),
        2.0,
    ),
    "tanh": (
        np.tanh,
        np.concatenate(
            [rng.uniform(-30, 30, N), rng.uniform(-1, 1, N), rng.uniform(-1e-6, 1e-6, N)]
        ),
        3.0,
    ),
    "log-plus-one": (
        np.log1p,
        np.concatenate(
            [
                rng.uniform(-0.999999, 1, N),
                rng.uniform(-1e-10, 1e-10, N),
                np.exp(rng.uniform(np.log(1e-300), np.log(1e300), N)),
            ]
        ),
        3.0,
    ),
}


@pytest.mark.parametrize("opcode", sorted(CASES64))
def test_float64_max_ulp_error_within_documented_bound(opcode):
    ref, x, bound = CASES64[opcode]
    got, want = run_op64(opcode, x), ref(x)
    ok = np.isfinite(want) & (want != 0)
    assert np.max(np.abs(got[ok] - want[ok]) / np.spacing(np.abs(want[ok]))) <= bound
    # overflow to inf, underflow to 0 exactly where NumPy's do
    assert np.array_equal(got[~ok], want[~ok])


SPECIAL64 = np.array(
    [
        np.nan,
        np.inf,
        -np.inf,
        0.0,
        -0.0,
        5e-324,
        -5e-324,
        2.2250738585072014e-308,
        709.78,
        709.79,
        -708.4,
        -745.13,
        -745.2,
        1.0,
        -1.0,
        1.7e308,
        -1.7e308,
        22.0,
        -22.0,
        40.0,
        -41.0,
    ]
)


@pytest.mark.parametrize(
    "opcode,ref",
    [
        ("exponential", np.exp),
        ("log", np.log),
        ("exponential-minus-one", np.expm1),
        ("tanh", np.tanh),
        ("log-plus-one", np.log1p),
    ],
)
def test_float64_special_values(opcode, ref):
    with np.errstate(all="ignore"):
        want = ref(SPECIAL64)
    got = run_op64(opcode, SPECIAL64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(
        np.isinf(got) & (np.sign(got) > 0), np.isinf(want) & (np.sign(want) > 0)
    )
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=7e-16, atol=0)
    np.testing.assert_array_equal(np.signbit(got[want == 0]), np.signbit(want[want == 0]))


def test_float64_exp_and_log_are_vectorised():
    for fn in (np.exp, np.log, np.expm1, np.tanh, np.log1p):
        text = tk.jit(fn, backend="cpu").compiled(np.ones(1024)).as_text("llvm")
        assert (
            "x double>" in text
            and "@exp" not in text
            and "@log(" not in text
            and "@tanh" not in text
        )


def special_grid(f, reference, values, rtol):
    """``f`` against ``reference`` on every pair of ``values``: NaN where NumPy's is, the rest
    within ``rtol``, signs (of zeros too) equal. Returns the two operand arrays."""
    a, b = (v.ravel() for v in np.meshgrid(values, values))
    with np.errstate(all="ignore"):
        got, want = f(a, b), reference(a, b)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=rtol, atol=0)
    np.testing.assert_array_equal(np.signbit(got[ok]), np.signbit(want[ok]))
    return a, b


def test_float64_atan2_within_two_ulp_and_c99_special_values():
    rng = seeded("test_float64_atan2_within_two_ulp_and_c99_special_values")
    f = tk.jit(np.arctan2, backend="cpu")
    samples = [(rng.uniform(-10, 10, N), rng.uniform(-10, 10, N)),
               (np.exp(rng.uniform(-300, 300, N)) * rng.choice([-1, 1], N),
                np.exp(rng.uniform(-300, 300, N)) * rng.choice([-1, 1], N)),
               (rng.uniform(-1e-3, 1e-3, N), rng.uniform(0.5, 2, N))]
    for y, x in samples:
        got, want = f(y, x), np.arctan2(y, x)
        nonzero = want != 0
        assert np.max(np.abs(got[nonzero] - want[nonzero]) / np.spacing(np.abs(want[nonzero]))) <= 2
        np.testing.assert_array_equal(got[~nonzero], want[~nonzero])
    y, x = special_grid(
        f, np.arctan2, [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 5e-324, 1e308], 2.3e-16
    )
    text = f.compiled(y, x).as_text("llvm")
    assert "x double>" in text and "@atan2" not in text
    g = tk.jit(np.arctan, backend="cpu")
    xs = rng.uniform(-100, 100, N)
    assert np.max(np.abs(g(xs) - np.arctan(xs)) / np.spacing(np.abs(np.arctan(xs)))) <= 2


# (x, y): the ranges where pow's error could grow (|y ln x| near the overflow bound)
rng = seeded("POWER_SAMPLES")
POWER_SAMPLES = {
    "moderate": (rng.uniform(0.1, 3, N), rng.uniform(-10, 10, N)),
    "x over the whole range": (np.exp(rng.uniform(-700, 700, N)), rng.uniform(-1, 1, N)),
    "large y": (rng.uniform(0.5, 2, N), rng.uniform(-1000, 1000, N)),
    "x near 1, huge y": (1 + rng.uniform(-1e-3, 1e-3, N), rng.uniform(-5e5, 5e5, N)),
    "negative x, integer y": (
        -rng.uniform(0.1, 10, N),
        rng.integers(-30, 30, N).astype(np.float64),
    ),
    "results near overflow and in the subnormals": (
        rng.uniform(0.1, 2.5, N),
        rng.uniform(700, 1100, N),
    ),
    "x near sqrt(2), y near 2000": (rng.uniform(1.40, 1.4142, N), rng.uniform(1500, 2000, N)),
    "subnormal x": (rng.uniform(1e-320, 1e-308, N), rng.uniform(-1, 1, N)),
}


@pytest.mark.parametrize("case", sorted(POWER_SAMPLES))
def test_float64_power_within_two_ulp_of_numpy(case):
    """exp(y ln x) with ln x and y ln x each carried in two doubles: at most 2 ulp from NumPy's
    (correctly rounded in nearly all cases) pow, overflow and underflow exactly where NumPy's."""
    x, y = POWER_SAMPLES[case]
    with np.errstate(all="ignore"):
        got, want = tk.jit(np.power, backend="cpu")(x, y), np.power(x, y)
    ok = np.isfinite(want) & (want != 0)
    assert np.max(np.abs(got[ok] - want[ok]) / np.spacing(np.abs(want[ok]))) <= 2
    np.testing.assert_array_equal(got[~ok], want[~ok])
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_float64_power_c99_special_values_and_vectorised():
    special = [
        np.nan,
        np.inf,
        -np.inf,
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        -0.5,
        2.0,
        -2.0,
        3.0,
        -3.0,
        1e308,
        -1e308,
        5e-324,
        -5e-324,
        2.5,
        -2.5,
        1e17,
        9007199254740993.0,
        -9007199254740993.0,
    ]
    f = tk.jit(np.power, backend="cpu")
    x, y = special_grid(f, np.power, special, 4.5e-16)
    text = f.compiled(x, y).as_text("llvm")
    assert "x double>" in text and "@pow" not in text and "llvm.pow" not in text


@pytest.mark.parametrize("fn", [np.sinh, np.cosh], ids=["sinh", "cosh"])
def test_float64_sinh_cosh_within_three_ulp_up_to_the_overflow_edge(fn):
    """Above |x| = 22, e^|x| / 2 is (h/2) h with h = e^(|x|/2): exact halving, where the old
    e^(|x| - ln 2) rounded |x| - ln 2 and was up to 495 ulp off near |x| = 709."""
    rng = seeded(f"test_float64_sinh_cosh_within_three_ulp[{fn.__name__}]")
    x = np.concatenate(
        [rng.uniform(-710.47, 710.47, N), rng.uniform(-30, 30, N), rng.uniform(-1e-5, 1e-5, N)]
    )
    with np.errstate(all="ignore"):
        got, want = tk.jit(fn, backend="cpu")(x), fn(x)
    ok = np.isfinite(want) & (want != 0)
    assert np.max(np.abs(got[ok] - want[ok]) / np.spacing(np.abs(want[ok]))) <= 3
    np.testing.assert_array_equal(got[~ok], want[~ok])
    special = np.array(
        [0.0, -0.0, np.inf, -np.inf, np.nan, 710.4758, -710.4758, 710.48, 22.0, -22.0, 5e-324]
    )
    with np.errstate(all="ignore"):
        got, want = tk.jit(fn, backend="cpu")(special), fn(special)
    finite = np.isfinite(want)
    np.testing.assert_array_equal(got[~finite], want[~finite])
    assert np.all(np.abs(got[finite] - want[finite]) <= 3 * np.spacing(np.abs(want[finite])))
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


from toolkit.backends.cpu.vector_library import host_vector_math  # noqa: E402

needs_libmvec = pytest.mark.skipif(
    host_vector_math() is None, reason="no vector math library (glibc's libmvec)"
)

# NumPy function: (float64 samples, bound in ulp of NumPy's result); glibc documents <= 4
rng = seeded("LIBMVEC_CASES")
LIBMVEC_CASES = {
    np.sin: (
        np.concatenate(
            [
                rng.uniform(-10, 10, N),
                rng.uniform(-1e5, 1e5, N),
                rng.uniform(-1e-8, 1e-8, N),
                rng.uniform(-1e300, 1e300, 1000),
            ]
        ),
        4,
    ),
    np.cos: (
        np.concatenate(
            [rng.uniform(-10, 10, N), rng.uniform(-1e5, 1e5, N), rng.uniform(-1e300, 1e300, 1000)]
        ),
        4,
    ),
    np.tan: (np.concatenate([rng.uniform(-10, 10, N), rng.uniform(-1e-8, 1e-8, N)]), 4),
    np.cbrt: (np.concatenate([rng.uniform(-1e5, 1e5, N), np.exp(rng.uniform(-700, 700, N))]), 4),
}
del rng  # the tables are drawn: every test below draws from its own generator


@needs_libmvec
@pytest.mark.parametrize("fn", list(LIBMVEC_CASES), ids=lambda f: f.__name__)
def test_libm_calls_use_the_vector_library_within_its_bound(fn):
    """float64 sin, cos, tan, cbrt call libmvec's vector variants (8 lanes a call with AVX-512),
    not libm once per element: within 4 ulp of NumPy's results, special values as NumPy's."""
    x, bound = LIBMVEC_CASES[fn]
    got, want = tk.jit(fn, backend="cpu")(x), fn(x)
    ok = np.isfinite(want) & (want != 0)
    assert np.max(np.abs(got[ok] - want[ok]) / np.spacing(np.abs(want[ok]))) <= bound
    with np.errstate(all="ignore"):
        special, expected = tk.jit(fn, backend="cpu")(SPECIAL64), fn(SPECIAL64)
    np.testing.assert_array_equal(np.isnan(special), np.isnan(expected))
    finite = np.isfinite(expected)
    np.testing.assert_allclose(special[finite], expected[finite], rtol=bound * 2.3e-16)
    np.testing.assert_array_equal(
        np.signbit(special[expected == 0]), np.signbit(expected[expected == 0])
    )
    text = tk.jit(fn, backend="cpu").compiled(x).as_text("llvm")
    assert "@_ZGV" in text and "x double>" in text


# name: (function, whether it is a function of x alone, bound in ulp). A function of x alone is
# measured against its float64 value at the same float32 input, exact to float32's precision, so
# the bound is toolkit's own error: measured against NumPy's float32 result instead, tan's two
# errors added up (libmvec's tanf up to 3.65 ulp, NumPy's up to 1.4) and reached 5 ulp on one
# draw. tan is within 3.65 ulp of the exact value for every float32 of [-1e4, 1e4] (all of them
# measured). The others compute float32 intermediates (|x|, 0.5 x + 1), as NumPy's float32 code
# does: they are measured against NumPy's. Maxima over 100 seeds x 200,000 samples of these
# ranges: cbrt 2.9 (of the exact value), power 1, arctan2 3 (of NumPy's).
F32_LIBM = {
    "tan": (np.tan, True, 4),
    "cbrt": (np.cbrt, True, 4),
    "power": (lambda x: np.power(np.abs(x), np.float32(1.37)), False, 4),
    "arctan2": (lambda x: np.arctan2(x, np.float32(0.5) * x + np.float32(1)), False, 4),
}


def float32_ulp_error(fn, of_x_alone: bool, x: np.ndarray) -> float:
    """The largest error of toolkit's float32 ``fn`` over ``x``, in ulp of the reference."""
    got = tk.jit(fn, backend="cpu")(x).astype(np.float64)
    with np.errstate(all="ignore"):
        want = fn(x.astype(np.float64)) if of_x_alone else fn(x).astype(np.float64)
    ok = np.isfinite(want) & (want != 0)
    spacing = np.spacing(np.abs(want[ok]).astype(np.float32)).astype(np.float64)
    return float(np.max(np.abs(got[ok] - want[ok]) / spacing))


@needs_libmvec
@pytest.mark.parametrize("name", list(F32_LIBM))
def test_float32_libm_calls_use_the_vector_library(name):
    fn, of_x_alone, bound = F32_LIBM[name]
    rng = seeded(f"test_float32_libm_calls_use_the_vector_library[{name}]")
    x = np.concatenate([rng.uniform(-10, 10, N), rng.uniform(-1e4, 1e4, N)]).astype(np.float32)
    assert float32_ulp_error(fn, of_x_alone, x) <= bound
    assert "@_ZGV" in tk.jit(fn, backend="cpu").compiled(x).as_text("llvm")


def test_without_the_vector_library_libm_is_called_as_before():
    import subprocess
    import sys
    code = (
        "import numpy as np, toolkit as tk; x = np.linspace(-3, 3, 4096); f = tk.jit(np.sin, "
        "backend='cpu');"
        "assert np.array_equal(f(x), np.sin(x)); assert '@_ZGV' not in "
        "f.compiled(x).as_text('llvm'); print('ok')"
    )
    env = {**__import__("os").environ, "TOOLKIT_VECTOR_MATH": "0", "TOOLKIT_CACHE_DIR": "off"}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.stdout.strip() == "ok", done.stderr[-2000:]


@needs_libmvec
def test_cached_machine_code_calling_the_vector_library_loads_in_a_fresh_process(tmp_path):
    """The persistent cache's machine code calls libmvec: a new process loads the library
    before linking it (else the link fails), and a host without it never shares the entry."""
    import subprocess
    import sys
    code = (
        "import numpy as np, toolkit as tk; x = np.linspace(-3, 3, 4096); f = tk.jit(np.tan, "
        "backend='cpu');"
        "y = f(x); assert np.max(np.abs(y - np.tan(x)) / np.spacing(np.abs(np.tan(x)))) <= 4;"
        "print(f.compiled(x)._executable.cache_status)"
    )
    env = {**__import__("os").environ, "TOOLKIT_CACHE_DIR": str(tmp_path)}
    statuses = [
        subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
        )
        for _ in range(2)
    ]
    assert [s.stdout.strip() for s in statuses] == ["miss", "persistent_hit"], [
        s.stderr[-1500:] for s in statuses
    ]


@needs_libmvec
def test_float64_erf_uses_the_vector_library_within_its_bound():
    rng = seeded("test_float64_erf_uses_the_vector_library_within_its_bound")
    x = np.concatenate(
        [rng.uniform(-6, 6, N), rng.uniform(-1e-6, 1e-6, 1000), [0.0, -0.0, np.inf, -np.inf]]
    )
    got, want = run_op64("erf", x), np.vectorize(math.erf, otypes=[np.float64])(x)
    ok = want != 0
    assert np.max(np.abs(got[ok] - want[ok]) / np.spacing(np.abs(want[ok]))) <= 4
    np.testing.assert_array_equal(np.signbit(got[~ok]), np.signbit(want[~ok]))
    assert np.isnan(run_op64("erf", np.array([np.nan]))[0])
