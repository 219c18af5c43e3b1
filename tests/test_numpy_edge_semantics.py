"""Silent differences from NumPy that a differential hunt found (session 27), each now NumPy's:
float16 arithmetic with Python numbers, integer powers with negative exponents known when
tracing, numbers assigned into integer arrays, nan-reductions' ``initial=``, var/std with
``ddof`` at or past the count, np.linspace in float32, and np.histogram's types (edges in the
data's float type, counts in the weights' type). Each case compares with NumPy directly."""
import warnings

import numpy as np
import pytest

import toolkit as tk

BACKENDS = ["interpreter", "cpu"]


def _same(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want)
    if want.dtype.kind == "f":
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def _outcome(fn, *args):
    """fn's result, or the family of the error it raises."""
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return fn(*args)
    except (OverflowError, ValueError, TypeError) as e:
        return [k for k in (OverflowError, ValueError, TypeError) if isinstance(e, k)][0]


def _check(fn, *args, backend="cpu"):
    want = _outcome(fn, *[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    got = _outcome(tk.jit(fn, backend=backend, on_recompile="ignore"),
                   *[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    if isinstance(want, type):
        assert got is want, (got, want)
    else:
        for g, w in zip(got if isinstance(want, tuple) else (got,),
                        want if isinstance(want, tuple) else (want,)):
            _same(g, w)


@pytest.mark.parametrize("backend", BACKENDS)
def test_float16_arithmetic_rounds_python_numbers_to_float16_first(backend):
    """NumPy's float16 loops read a Python number as float16: x * 0.1 multiplies by
    float16(0.1) (toolkit used float32(0.1)); 70000.0 is inf; x == 3.3 compares with
    float16(3.3)."""
    x = np.array([7.0, 0.0, 3.3, -2.5, 65000], np.float16)
    for fn in (lambda v: v * 0.1, lambda v: v % 0.3, lambda v: v * 70000.0, lambda v: v == 3.3,
               lambda v: 0.1 / v, lambda v: np.hypot(v, 0.1), lambda v: v + 3,
               lambda v: np.logaddexp(v, 0.3), lambda v: v * np.arange(5, dtype=np.int8)):
        _check(fn, x, backend=backend)

    def scale(v):
        v *= 0.1
        return v

    _check(scale, x, backend=backend)
    _check(lambda v, s: v * s, x, 0.1, backend=backend)  # a traced Python float


def test_integer_powers_with_negative_exponents_raise_as_numpys():
    i = np.array([-3, -1, 2])
    for fn in (lambda v: np.power(v, -2), lambda v: v ** np.int64(-1),
               lambda v: np.power(v, np.array([-1, 2, 3])), lambda v: v ** -1):
        _check(fn, i)
    for fn in (lambda v: np.power(v, 2), lambda v: np.power(v, np.array([1, 2, 3]))):
        _check(fn, i)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.float16, np.bool_])
def test_numbers_assigned_into_arrays_raise_where_numpys_do(dtype):
    """NumPy converts a number assigned to one element or a slice with checks (int8 and
    np.int64(300), NaN into an integer) and one assigned through an index array by a cast
    (which wraps): each as NumPy does."""
    values = (np.int64(300), np.float64(300.5), np.float64(np.nan), np.float64(1e20),
              np.float64(-1.5), 300.5, np.uint8(255), np.int16(-129), np.float32(200.0), True,
              np.inf, 300, np.int64(5), np.float64(-1.0), [300, 1])

    def element(a, v):
        a[0] = v
        return a

    def part(a, v):
        a[:2] = v
        return a

    def picked(a, v):
        a[[0, 2]] = v
        return a

    def masked(a, v):
        a[np.array([True, False, True])] = v
        return a

    for value in values:
        for fn in (part, picked, masked) + ((element,) if np.ndim(value) == 0 else ()):
            _check(lambda a, fn=fn, value=value: fn(a, value), np.zeros(3, dtype))


@pytest.mark.parametrize("backend", BACKENDS)
def test_nan_reductions_start_from_initial(backend):
    x = np.array([[1, -2, np.nan], [4, -0.0, 6], [np.nan, np.nan, np.nan]])
    for fn in (lambda v: np.nanmax(v, axis=1, initial=100),
               lambda v: np.nanmin(v, axis=1, initial=-5.0),
               lambda v: np.nansum(v, axis=1, initial=100),
               lambda v: np.nanprod(v, axis=0, initial=2.0),
               lambda v: np.nanmax(v, axis=1, initial=-100)):
        _check(fn, x, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_variance_with_ddof_at_or_past_the_count_divides_by_zero(backend):
    """NumPy divides by max(n - ddof, 0): inf, or NaN for a zero sum (toolkit gave NaN, and
    divided by a negative count over an axis)."""
    x = np.array([[4, -0.0, 6]])
    for fn in (lambda v: np.var(v, ddof=3), lambda v: np.var(v, ddof=5),
               lambda v: np.var(v, axis=0, ddof=2), lambda v: np.std(v, axis=0, ddof=2),
               lambda v: np.var(v[:, :2], ddof=2), lambda v: np.std(v, ddof=3)):
        _check(fn, x, backend=backend)


def test_linspace_of_float32_endpoints_is_float32():
    lo, hi = np.array(np.float32(0)), np.array(np.float32(1))
    for fn in (lambda a, b: np.linspace(a, b, 8), lambda a, b: np.linspace(a, b, 8,
                                                                           dtype=np.float32),
               lambda a, b: np.linspace(a, 3.0, 5), lambda a, b: np.linspace(a.astype(int), 5, 6)):
        _check(fn, lo, hi)


@pytest.mark.parametrize("backend", BACKENDS)
def test_histograms_take_numpys_types(backend):
    """Edges in the data's float type (float32 data: float32 edges, which move the counts at
    bin boundaries), integer bins kept, counts in the weights' type (int8 weights wrap; float32
    ones summed per block of 65536 as NumPy's)."""
    rng = np.random.default_rng(0)
    f32 = rng.standard_normal(1000).astype(np.float32)
    cases = [
        (np.array([0, 0.2, 1], np.float16), dict(bins=5)),
        (np.array([0, 2 / 7, 3 / 7, 4 / 7, 1], np.float32), dict(bins=7)),
        (f32, dict(bins=13)), (f32, dict(bins=10, range=(-1, 1.5))),
        (rng.integers(0, 100, 500).astype(np.int8), dict(bins=9)),
        (np.array([3.0, 3.0, 3.0]), dict(bins=4)), (np.array([3, 3, 3], np.int32), dict(bins=2)),
        (rng.standard_normal(300), dict(bins=np.array([-1, 0, 2]))),
        (rng.standard_normal(100), dict(bins=4, range=(np.float32(-1), np.float32(1)))),
        (np.zeros(0, np.float32), dict(bins=3)),
    ]
    for data, options in cases:
        _check(lambda v, options=options: np.histogram(v, **options), data, backend=backend)
    weighted = [(f32[:300], rng.standard_normal(300).astype(np.float32)),
                (rng.standard_normal(300), np.full(300, 100, np.int8)),
                (rng.standard_normal(70000).astype(np.float32),
                 rng.random(70000).astype(np.float32))]
    for data, weights in weighted:
        _check(lambda v, w: np.histogram(v, bins=6, weights=w), data, weights, backend=backend)


def test_histogram_of_data_with_inf_raises_numpys_error():
    with pytest.raises(ValueError, match="autodetected range"):
        np.histogram(np.array([1.0, np.inf, 2.0]))
    with pytest.raises(ValueError, match="autodetected range"):
        tk.jit(np.histogram)(np.array([1.0, np.inf, 2.0]))


@pytest.mark.parametrize("backend", BACKENDS)
def test_uint64_indices_from_2_63_wrap_as_numpys_cast_to_intp(backend):
    """NumPy casts a uint64 index to intp: 2**64 - 1 is -1 (the last element), 2**63 an
    IndexError (toolkit read element 0 for both)."""
    a = np.arange(10.0)
    wrapped = np.array([2 ** 64 - 1, 3], np.uint64)
    too_far = np.array([2 ** 63], np.uint64)

    def write(x, j):
        x[j] = 5.0
        return x

    for fn in (lambda x, j: x[j], lambda x, j: np.take(x, j), write):
        _check(fn, a, wrapped, backend=backend)
        with pytest.raises(IndexError):
            fn(a.copy(), too_far)
        with pytest.raises(IndexError):
            tk.jit(fn, backend=backend, on_recompile="ignore")(a.copy(), too_far)
    _check(lambda x: x[np.array([2 ** 64 - 1], np.uint64)], a, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_variance_sums_in_the_dtype_given(backend):
    """np.var(x, dtype=np.float32) sums the squared deviations in float32 and returns float32
    (toolkit returned float64)."""
    x = np.array([1.5, 2.25, 7.125, -3.0])
    for fn, data in ((lambda v: np.var(v, dtype=np.float32), x),
                     (lambda v: np.std(v, dtype=np.float16), np.array([1, 2, 4, 8])),
                     (lambda v: np.var(v, dtype=np.complex128), x),
                     (lambda v: np.std(v, dtype=np.float32, ddof=1), x)):
        _check(fn, data, backend=backend)


def test_unsigned_arrays_to_a_negative_python_int_power_raise_overflow():
    for dtype in (np.uint8, np.uint64):
        x = np.array([1, 2], dtype)
        with pytest.raises(OverflowError):
            x ** -1
        with pytest.raises(OverflowError, match="out of bounds"):
            tk.jit(lambda v: v ** -1)(x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_boolean_and_integer_dtypes_of_sums_and_means(backend):
    """NumPy adds booleans in a bool dtype= as or (multiplies as and), and a mean in an
    integer dtype= divides into that type, truncating (toolkit counted, and returned float64)."""
    m = np.array([[True, True, False], [False, False, False]])
    for fn in (lambda v: np.sum(v, dtype=bool), lambda v: np.sum(v, axis=1, dtype=bool),
               lambda v: np.prod(v, axis=0, dtype=bool), lambda v: np.cumsum(v, dtype=bool),
               lambda v: np.cumprod(v, axis=1, dtype=bool), lambda v: np.sum(v),
               lambda v: np.mean(v, dtype=bool)):
        _check(fn, m, backend=backend)
    for fn, data in ((lambda v: np.mean(v, dtype=np.int64), np.array([1, 2, 4, 8])),
                     (lambda v: np.mean(v, dtype=np.int32), np.array([-1.5, -2.75, 3.0])),
                     (lambda v: np.mean(v, dtype=np.int8), np.array([40, 80, 160, 320])),
                     (lambda v: np.mean(v, dtype=np.uint8), np.array([1, 2, 4, 8]))):
        _check(fn, data, backend=backend)


def test_functions_raise_where_numpy_raises():
    """Differences of booleans, a negative minlength, 2-d or complex bincount weights, and
    ediff1d's to_begin of another kind: NumPy raises; toolkit returned values. np.round of
    booleans is float16, as NumPy's."""
    b = np.array([True, False, True])
    ints = np.array([1, 2])
    for fn, data in ((lambda v: np.gradient(v), b), (lambda v: np.ediff1d(v), b),
                     (lambda v: np.round(v, 1), b),
                     (lambda v: np.bincount(v, minlength=-1), ints),
                     (lambda v: np.ediff1d(v.astype(np.uint8), to_begin=[1]), ints),
                     (lambda v: np.ediff1d(v, to_begin=[1.5]), ints),
                     (lambda v: np.bincount(v, weights=np.ones((2, 1))), ints),
                     (lambda v: np.bincount(v, weights=np.array([1 + 1j, 2])), ints)):
        _check(fn, data)
    for fn, data in ((lambda v: np.round(v), b), (lambda v: np.around(v), b),
                     (lambda v: np.ediff1d(v, to_begin=[1], to_end=[2, 3]), np.array([1, 2, 5])),
                     (lambda v: np.bincount(v, weights=np.array([0.5, 2.0]), minlength=4), ints)):
        _check(fn, data)


@pytest.mark.parametrize("spec", ["i->", "ii", "ij->", "ij->i"])
def test_float16_einsum_reductions_sum_in_float32(spec):
    """NumPy's half einsum accumulates in float; toolkit reduced in float16, and the CPU
    backend's float16 full reduction crashed the process (a separate backend bug, noted)."""
    a = (np.arange(9, dtype=np.float16).reshape(3, 3) if len(spec.split("->")[0]) == 2
         else np.ones(3, np.float16))
    _check(lambda v: np.einsum(spec, v), a)


X8 = (np.arange(100) % 7).astype(np.int8)
HALF = np.arange(5, dtype=np.float16)
F32 = np.arange(3, dtype=np.float32)
EVEN = np.arange(100) % 2 == 0

# Python numbers passed as arguments stay Python numbers (weak) through Python's operators only:
# every NumPy function makes an array or NumPy scalar of them (np.maximum(t, 0) is an np.int64),
# and the functions that make arrays of their operands first (np.dot, np.outer, np.kron) promote
# a literal Python number as an int64, float64 or complex128 array. (Session 28's hunt findings.)
WEAK_CASES = {
    "np.maximum(t, 0) + int8": (lambda t, x: np.maximum(t, 0) + x, 100, X8),
    "np.sqrt(t) + float16": (lambda t, x: np.sqrt(t) + x, 2.0, HALF),
    "np.where(c, t, 1) + int8": (lambda t, x: np.where(EVEN, t, 1) + x, 100, X8),
    "np.clip(t, 0, 200) + int8": (lambda t, x: np.clip(t, 0, 200) + x, 100, X8),
    "np.reshape(t, (1,)) + int8": (lambda t, x: np.reshape(t, (1,)) + x, 100, X8),
    "np.broadcast_to(t) + int8": (lambda t, x: np.broadcast_to(t, (100,)) + x, 100, X8),
    "np.asarray(t) + int8": (lambda t, x: np.asarray(t) + x, 100, X8),
    "np.stack([t, t]) + int8": (lambda t, x: np.stack([t, t]) + x[:2], 100, X8),
    "np.add(t, 1) + int8": (lambda t, x: np.add(t, 1) + x, 100, X8),
    "abs(t) + int8 (Python's operator: weak)": (lambda t, x: abs(t) + x, 100, X8),
    "t * 2 + int8 overflows": (lambda t, x: t * 2 + x, 100, X8),
    "t - 200 + int8 fits": (lambda t, x: t - 200 + x, 300, X8),
    "t - 200 + int8 overflows": (lambda t, x: t - 200 + x, 100, X8),
    "t + uint64 with t < 0": (lambda t, x: t + x.astype(np.uint64), -1, X8),
    "np.outer(int8, t)": (lambda t, x: np.outer(x[:3], t), 2, X8),
    "np.kron(int8, t)": (lambda t, x: np.kron(x[:3], t), 2, X8),
    "np.multiply.outer(int8, t)": (lambda t, x: np.multiply.outer(x[:3], t), 2, X8),
    "np.dot(int8, t)": (lambda t, x: np.dot(x[:3], t), 2, X8),
    "np.outer(int8, 2)": (lambda t, x: np.outer(x[:3], 2) + t, 0, X8),
    "np.inner(int8, 2)": (lambda t, x: np.inner(x[:3], 2) + t, 0, X8),
    "np.tensordot(int8, 2, 0)": (lambda t, x: np.tensordot(x[:3], 2, 0) + t, 0, X8),
    "np.einsum('i,->i', int8, 2)": (lambda t, x: np.einsum("i,->i", x[:3], 2) + t, 0, X8),
    "np.kron(int8, 2)": (lambda t, x: np.kron(x[:3], 2) + t, 0, X8),
    "np.where(c, float32, 1j)": (lambda t, x: np.where(x[:3] > 2, x[:3].astype(np.float32), 1j),
                                 0, X8),
    "np.choose(i, [int8, 5])": (lambda t, x: np.choose(x[:3] % 2, [x[:3], 5]) + t, 0, X8),
    "np.choose(i, [int8, 300]) wraps": (lambda t, x: np.choose(x[:3] % 2, [x[:3], 300]), 0, X8),
    "np.where(c, 100, 1) + int8": (lambda t, x: np.where(EVEN, 100, 1) + x, 0, X8),
    "np.sqrt(2.0) + float16": (lambda t, x: np.sqrt(2.0) + x + t, 0, HALF),
}


@pytest.mark.parametrize("case", sorted(WEAK_CASES))
def test_python_numbers_become_numpy_values_where_numpys_functions_make_them(case):
    fn, t, x = WEAK_CASES[case]
    _check(fn, t, x)


def _into(fill):
    def fn(t, x):
        fill(t, x)
        return x
    return fn


# A Python int (here a jitted function's argument) made a narrower integer: NumPy 2 refuses
# one that does not fit, except where it casts operands unsafely (np.where's branches) or
# clips (np.clip drops a bound beyond the array's range).
INT_INTO_CASES = {
    "np.full_like": lambda t, x: np.full_like(x, t),
    "np.pad constant_values": lambda t, x: np.pad(x, 1, constant_values=t),
    "np.insert": lambda t, x: np.insert(x, 0, t),
    "np.put": _into(lambda t, x: np.put(x, [0], [t])),
    "np.place": _into(lambda t, x: np.place(x, x > 1, [t])),
    "np.copyto": _into(lambda t, x: np.copyto(x, t)),
    "np.copyto unsafe": _into(lambda t, x: np.copyto(x, t, casting="unsafe")),
    "np.asarray(t, int8)": lambda t, x: np.asarray(t, dtype=np.int8),
    "np.array([t, 1], int8)": lambda t, x: np.array([t, 1], dtype=np.int8),
    "x[0] = t": _into(lambda t, x: x.__setitem__(0, t)),
    "x.fill(t)": _into(lambda t, x: x.fill(t)),
    "np.max(initial=t)": lambda t, x: np.max(x, initial=t),
    "np.append(x, t)": lambda t, x: np.append(x, t),
    "np.clip(x, 0, t)": lambda t, x: np.clip(x, 0, t),
    "np.clip(x, -t, t)": lambda t, x: np.clip(x, -t, t),
    "np.clip(x, t, None)": lambda t, x: np.clip(x, t, None),
    "np.where(c, x, t)": lambda t, x: np.where(x > 1, x, t),
    "np.choose(i, [x, t])": lambda t, x: np.choose(x % 2, [x, t]),
    "x + t * 2": lambda t, x: x + t * 2,
}


@pytest.mark.parametrize("t", [300, -200, 100])
@pytest.mark.parametrize("case", sorted(INT_INTO_CASES))
def test_python_ints_meeting_narrower_integers_raise_or_wrap_as_numpys(case, t):
    _check(INT_INTO_CASES[case], t, np.arange(4, dtype=np.int8))


@pytest.mark.parametrize("backend", BACKENDS)
def test_float16_sums_round_as_numpys_along_lines_and_across_them(backend):
    """NumPy sums float16 lines in float32 and rounds once per line; across lines (a column
    sum, the outer axes of a mixed reduction) it rounds every step."""
    x = np.random.default_rng(7).standard_normal((30, 7, 40)).astype(np.float16)
    for axis in (None, 0, 1, 2, (0, 2), (1, 2), (0, 1)):
        _check(lambda a, axis=axis: (a.sum(axis), a.prod(axis), a.mean(axis)), x,
               backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_float16_products_sum_in_float32_as_numpys(backend):
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal(s).astype(np.float16) for s in ((2, 5, 300), (2, 300, 4)))
    _check(lambda a, b: (a @ b, a[0] @ b[0], a[0, 0] @ b[0, :, 0]), a, b, backend=backend)


U8 = np.array([1, 2, 3, 200], np.uint8)
I8 = np.array([1, -2, 3], np.int8)
F32_PAIR = np.array([1.5, 2.5], np.float32)

# Types, shapes and errors of functions with options (session 28's list of known differences)
OPTION_CASES = {
    "linspace retstep, 0 samples": (lambda a, b: np.linspace(a[0], a[1], 0, retstep=True),
                                    F32_PAIR),
    "linspace retstep, 1 sample": (lambda a, b: np.linspace(a[0], a[1], 1, retstep=True),
                                   F32_PAIR),
    "linspace retstep, 3 samples": (lambda a, b: np.linspace(a[0], a[1], 3, retstep=True),
                                    F32_PAIR),
    "unique of a 0-d array, inverse": (lambda a, b: np.unique(a[0], return_inverse=True),
                                       F32_PAIR),
    "geomspace of float32 endpoints": (lambda a, b: np.geomspace(a[0], a[1], 3), F32_PAIR),
    "setdiff1d keeps ar1's type": (lambda a, b: np.setdiff1d(a, b), U8),
    "concatenate dtype=": (lambda a, b: np.concatenate([a, b], dtype=np.float32), U8),
    "concatenate dtype= same_kind refuses": (
        lambda a, b: np.concatenate([a, b], dtype=np.uint8), U8),
    "concatenate dtype= unsafe": (
        lambda a, b: np.concatenate([a, b], dtype=np.uint8, casting="unsafe"), U8),
    "stack dtype=": (lambda a, b: np.stack([a[:3], b], dtype=np.int16), U8),
    "stack dtype= same_kind refuses": (lambda a, b: np.stack([a[:3], b], dtype=np.int8), U8),
    "searchsorted sorter of another size": (
        lambda a, b: np.searchsorted(a, 3, sorter=np.array([0, 1])), U8),
    "isin kind='table' of floats": (lambda a, b: np.isin(a.astype(float), b, kind="table"), U8),
    "einsum dtype=": (lambda a, b: np.einsum("i,i->", a[:3], b, dtype=np.float64), U8),
    "einsum dtype= safe refuses": (lambda a, b: np.einsum("i,i->", a[:3], b, dtype=np.int8), U8),
}


@pytest.mark.parametrize("case", sorted(OPTION_CASES))
def test_functions_with_options_give_numpys_types_shapes_and_errors(case):
    fn, a = OPTION_CASES[case]
    want = _outcome(fn, a, I8)
    got = _outcome(tk.jit(fn, on_recompile="ignore"), a, I8)
    if isinstance(want, type):
        assert got is want, (got, want)
        return
    for g, w in zip(*(r if isinstance(r, tuple) else (r,) for r in (got, want))):
        assert type(g) is type(w) or isinstance(w, np.ndarray), (type(g), type(w))
        if isinstance(w, float):  # (the Python float nan of an undefined step)
            np.testing.assert_equal(g, w)
        else:
            _same(g, w)


SET_CASES = {
    "np.unique": lambda a, b: np.unique(a),
    "np.unique equal_nan=False": lambda a, b: np.unique(a, equal_nan=False),
    "np.unique every output": lambda a, b: np.unique(a, True, True, True),
    "np.unique_all": lambda a, b: tuple(np.unique_all(a)),
    "np.unique_counts": lambda a, b: tuple(np.unique_counts(a)),
    "np.unique_inverse": lambda a, b: tuple(np.unique_inverse(a)),
    "np.unique_values": lambda a, b: np.unique_values(a),
    "np.union1d": lambda a, b: np.union1d(a, b),
    "np.setxor1d": lambda a, b: np.setxor1d(a, b),
    "np.setdiff1d": lambda a, b: np.setdiff1d(a, b),
    "np.intersect1d": lambda a, b: np.intersect1d(a, b),
}


@pytest.mark.parametrize("dtype", [np.float64, np.complex128, np.int32])
@pytest.mark.parametrize("case", sorted(SET_CASES))
def test_set_functions_treat_nans_and_zeros_as_numpys(case, dtype):
    """np.unique and the set functions built on it count NaNs as one (equal_nan), the array
    API's unique functions keep each, setxor1d keeps one NaN per array that has one; which of
    -0.0 and 0.0 stands for both is what NumPy's own sort puts first."""
    a = np.array([3.0, np.nan, 1.0, np.nan, 3.0, -0.0, 0.0, 2.0])
    b = np.array([np.nan, 2.0, 1.0, -0.0, 5.0])
    if dtype == np.int32:
        a, b = np.nan_to_num(a, nan=7), np.nan_to_num(b, nan=7)
    fn = SET_CASES[case]
    a, b = a.astype(dtype), b.astype(dtype)
    want, got = fn(a, b), tk.jit(fn, on_recompile="ignore")(a, b)
    for g, w in zip(*(r if isinstance(r, tuple) else (r,) for r in (got, want))):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)
        np.testing.assert_array_equal(np.signbit(np.real(g)), np.signbit(np.real(w)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_nan_reductions_of_complex_arrays_skip_nans_as_numpys(backend):
    """A complex number with a NaN part is NaN to np.isnan: the nan-reductions skip it (they
    summed it in)."""
    rng = np.random.default_rng(5)
    c = rng.standard_normal((4, 9)) + 1j * rng.standard_normal((4, 9))
    c[0, 3], c[1, 2], c[2] = np.nan, complex(1, np.nan), np.nan
    _check(lambda a: (np.nansum(a, 1), np.nanmean(a, 1), np.nanvar(a, 1), np.nanstd(a, 1),
                      np.nanprod(a[:, :4], 1)), c, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_nanvar_in_a_wider_dtype_rounds_deviations_to_the_data_type_as_numpys(backend):
    x = np.random.default_rng(1).standard_normal(50).astype(np.float32)
    x[7] = np.nan
    _check(lambda a: np.nanvar(a, dtype=np.float64), x, backend=backend)


def test_round_scales_by_numpys_power_of_ten():
    """NumPy's round builds 10**n past 1e22 by repeated multiplication from 1e9, which rounds
    differently from 10.0 ** n."""
    x = np.random.default_rng(0).standard_normal(200) * 10.0 ** np.arange(-40, 40, 0.4)
    _check(lambda a: tuple(np.round(a, d) for d in (-30, -25, -23, 23, 25, 30)), x)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16])
@pytest.mark.parametrize("how", ["element", "slice", "mask", "fill"])
@pytest.mark.parametrize("source", [[200, 100], [-150, -50], [3, 2], [np.nan, 1.0],
                                    [np.inf, 0.0], [255.5, 0.0], [-3.7, 0.25]])
def test_numpy_scalars_computed_in_the_function_stored_into_integers_as_numpys(dtype, how,
                                                                               source):
    """``x[0] = y.sum()``: a NumPy scalar goes into a signed integer array through a Python
    int (NaN, infinity and values out of range raise); an unsigned one, a mask or an index
    array cast it."""
    def store(x, y):
        s = y.sum()
        if how == "element":
            x[0] = s
        elif how == "slice":
            x[1:3] = s
        elif how == "mask":
            x[x >= 0] = s
        else:
            x.fill(s)
        return x
    _check(store, np.zeros(4, dtype), np.array(source))


def test_python_numbers_joined_into_arrays_are_int64_as_numpys():
    x, u = np.arange(3, dtype=np.int8), np.arange(4, dtype=np.uint64)
    _check(lambda x, t: np.stack([x[0], t]), x, 100)
    _check(lambda x, t: np.concatenate([x, [t]]), x, 300)
    _check(lambda u, t: np.clip(u, 1, t), u, 2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_cov_scales_by_the_reciprocal_as_numpys(backend):
    """NumPy's ``c *= np.true_divide(1, fact)``: integer-valued data make the product exact,
    so only the scaling can differ (a division by 3 differs from NumPy's in 6 of 9 entries)."""
    x = np.array([[1.0, 2, 4, 7], [3, -1, 5, 2], [0, 6, 1, 1]])
    _check(lambda a: (np.cov(a), np.cov(a, dtype=np.float32), np.corrcoef(a)), x,
           backend=backend)


_RNG = np.random.default_rng(11)
_A = _RNG.standard_normal((3, 3)) + 1j * _RNG.standard_normal((3, 3))
_H = _A @ _A.conj().T

# Complex linear algebra and correlation (helper-19's hunt, session 28): each was silently wrong
COMPLEX_LINALG_CASES = {
    "solve keeps b's imaginary part": (lambda a: np.linalg.solve(a, a[:, 0] * 1j), _A),
    "solve of float32 and int8 is float64": (
        lambda a: np.linalg.solve(a.real.astype(np.float32) + 3 * np.eye(3, dtype=np.float32),
                                  np.arange(3, dtype=np.int8)), _A),
    "cholesky(upper=True), real": (lambda a: np.linalg.cholesky(
        np.array([[4.0, 0.0], [2.0, 4.0]]) + 0 * a[:2, :2].real, upper=True), _A),
    "cholesky(upper=True), complex": (lambda a: np.linalg.cholesky(a, upper=True), _H),
    "vecdot conjugates": (lambda a: np.vecdot(a, a), _A),
    "vecmat conjugates": (lambda a: np.vecmat(a[0], a), _A),
    "correlate with a constant complex v": (
        lambda a: np.correlate(a[0].real, np.array([1j, 2.0]), "full"), _A),
    "eigvalsh is real": (lambda a: np.linalg.eigvalsh(a), _H),
    "svd's singular values are real": (lambda a: np.linalg.svd(a, compute_uv=False), _A),
    "slogdet's magnitude is real": (lambda a: np.linalg.slogdet(a)[1], _A),
}


@pytest.mark.parametrize("case", sorted(COMPLEX_LINALG_CASES))
def test_complex_linear_algebra_as_numpys(case):
    fn, a = COMPLEX_LINALG_CASES[case]
    got, want = np.asarray(tk.jit(fn)(a)), np.asarray(fn(a))
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
def test_float16_ffts_have_numpys_types_and_values(norm):
    """NumPy computes float16 transforms in float32 with a float16 normalisation, and keeps
    float16 for the one-axis real results (irfft, hfft); they were complex128 and float64."""
    h = np.arange(6, dtype=np.float16) * 1.3
    _check(lambda a: tuple(getattr(np.fft, n)(a, norm=norm)
                           for n in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft")), h)
    _check(lambda a: tuple(getattr(np.fft, n)(a.reshape(2, 3), norm=norm)
                           for n in ("fftn", "ifftn", "rfftn", "irfftn", "irfft2")), h)


@pytest.mark.parametrize("value", [5.0, 0.0])
def test_argwhere_and_nonzero_of_a_0d_array_as_numpys(value):
    _check(lambda a: np.argwhere(a), np.array(value))
    _check(lambda a: np.nonzero(a), np.array(value))  # (NumPy's ValueError)


UFUNC_DTYPE_CASES = {
    "add int8 dtype=int16": (lambda a: np.add(a, a, dtype=np.int16),
                             np.array([100, 120, -128], np.int8)),
    "multiply int8 dtype=float64": (lambda a: np.multiply(a, a, dtype="float64"),
                                    np.array([100, 120, -128], np.int8)),
    "negative int8 dtype=int16": (lambda a: np.negative(a, dtype="int16"),
                                  np.array([100, -128], np.int8)),
    "subtract uint8 dtype=int16": (lambda a: np.subtract(a, 200, dtype="int16"),
                                   np.array([1, 2], np.uint8)),
    "add bool dtype=int8": (lambda a: np.add(a, a, dtype=np.int8), np.array([True, False])),
    "power int8 dtype=float64": (lambda a: np.power(a, -1, dtype="float64"),
                                 np.array([2, 4], np.int8)),
    "add float64 dtype=int64 refuses": (lambda a: np.add(a, a, dtype=np.int64),
                                        np.array([1.5, -2.5])),
    "add float64 dtype=float32 safe refuses": (
        lambda a: np.add(a, a, dtype="float32", casting="safe"), np.array([1.5, -2.5])),
    "add float64 dtype=int64 unsafe": (lambda a: np.add(a, a, dtype=np.int64, casting="unsafe"),
                                       np.array([1.5, -2.5])),
}


@pytest.mark.parametrize("case", sorted(UFUNC_DTYPE_CASES))
def test_ufunc_dtype_picks_the_loop_as_numpys(case):
    """dtype= is NumPy's signature=(None, ..., dtype): the inputs are cast to it and computed
    in it (np.add(int8, int8, dtype=int16) does not wrap), under casting=."""
    fn, a = UFUNC_DTYPE_CASES[case]
    _check(fn, a)


def _types_and_values(result):
    return [(type(v), getattr(v, "dtype", None), str(np.asarray(v).tolist()),  # (nan == nan)
             np.signbit(np.asarray(v, float)).tolist() if np.asarray(v).dtype.kind == "f" else None)
            for v in (result if isinstance(result, tuple) else (result,))]


@pytest.mark.parametrize("backend", BACKENDS)
def test_python_bools_numpy_scalars_and_scalar_powers_as_numpys(backend):
    """np.allclose/array_equal/array_equiv return Python bools (weak in arithmetic), np.isclose
    of scalars a NumPy bool, np.isscalar knows traced NumPy scalars, a NumPy scalar's ** is its
    scalar math's (np.True_ ** 2 is int64; np.float64(-0.0) ** 0.5 is 0.0), and ndarray.conj of
    a real array is the array itself (bool stays bool)."""
    def compare(a, b, x8):
        same = np.allclose(a, b)
        return (same, np.array_equal(a, b), np.array_equiv(a, b[:1]), np.isclose(a[0], b[0]),
                x8 + same, np.array_equal(a, b) * 3, np.array_equal(a, b) + 1.5,
                np.isscalar(a[0]), np.isscalar(a), np.isscalar(a.sum()), np.isscalar(a[1:2]))

    def powers(flags, z, f32):
        c = flags.conj()
        c[0] = False  # (the same array: the write shows in flags)
        return (flags[1] ** 2, z[0] ** 0.5, z[1] ** 0.5, z[2] ** 0.5, f32[0] ** 0.5, z ** 0.5,
                flags, flags[0].conj(), np.conjugate(flags))

    x8 = np.arange(3, dtype=np.int8)
    for a, b in [(np.ones(3), np.ones(3)), (np.ones(3), np.array([1.0, 2.0, 1.0]))]:
        want = compare(a, b, x8)
        assert _types_and_values(tk.jit(compare, backend=backend)(a, b, x8)) == \
            _types_and_values(want)
    args = (np.array([True, True]), np.array([-0.0, -np.inf, 6.25]),
            np.array([-0.0], np.float32))
    want = powers(*[a.copy() for a in args])
    got = tk.jit(powers, backend=backend)(*[a.copy() for a in args])
    assert _types_and_values(got) == _types_and_values(want)


@pytest.mark.parametrize("backend", BACKENDS + ["gpu-simulated"])
@pytest.mark.parametrize("ufunc, dtype", [
    (np.add, np.complex128), (np.multiply, np.complex64), (np.subtract, np.complex128),
    (np.add, np.bool_), (np.multiply, np.bool_), (np.add, np.float16),
    (np.logical_or, np.float32), (np.logical_and, np.complex64), (np.maximum, np.complex128),
    (np.bitwise_xor, np.bool_), (np.minimum, np.int8),
], ids=lambda v: getattr(v, "__name__", None) or np.dtype(v).name)
def test_ufunc_at_of_every_dtype_as_numpys(ufunc, dtype, backend):
    """ufunc.at accumulates as NumPy's loop of that dtype: complex combiners crashed the LLVM
    code generators (an integer add of a {float, float} pair), bool add and multiply are or
    and and, and the logical ufuncs on numbers and complex max/min run in NumPy at a break."""
    def at(x, i, v):
        ufunc.at(x, i, v)
        return x

    x = (np.arange(5) % 3).astype(dtype) * (1 + 1j if np.dtype(dtype).kind == "c" else 1)
    i, v = np.array([0, 1, 1, 4, 1]), (np.array([1, 0, 2, 1, 3]) % 2 + 0.5).astype(dtype)
    _check(at, x, i, v, backend=backend)


_Z = np.array(3.0)
_A = np.array([[1.0, 2.0], [3.0, 4.0]])


@pytest.mark.parametrize("fn", [
    lambda x: np.sum(x, axis=0), lambda x: np.max(x, axis=-1), lambda x: np.any(x, axis=0),
    lambda x: np.count_nonzero(x, axis=-1), lambda x: np.ptp(x, axis=0),
    lambda x: np.argmax(x, axis=0), lambda x: np.argmin(x, axis=-1), lambda x: np.argsort(x),
    lambda x: x.argsort(), lambda x: np.cumsum(x, axis=0), lambda x: np.take(x, 0, axis=0),
    lambda x: np.repeat(x, 2, axis=0), lambda x: np.squeeze(x, axis=-1), lambda x: np.flip(x),
    lambda x: np.flip(x, axis=0), lambda x: np.roll(x, 1, axis=0), lambda x: np.mean(x, axis=0),
    lambda x: np.sum(x, axis=1), lambda x: np.sort(x), lambda x: np.partition(x, 0),
])
def test_a_0d_array_with_an_axis_as_numpys(fn):
    """NumPy's ufunc reductions take axis 0 or -1 of a 0-d array and reduce nothing;
    argmax/argsort/cumsum/take/repeat read it as a 1-d array of one element (argsort gives
    [0]); mean, flip, roll and sort raise AxisError (toolkit crashed with internal errors)."""
    _check(fn, _Z)
    want, got = _outcome(fn, _Z), _outcome(tk.jit(fn), _Z)
    if not isinstance(want, type):
        assert _types_and_values(got) == _types_and_values(want)


@pytest.mark.parametrize("fn, arg", [
    (lambda a: np.linalg.cond(a), _A), (lambda a: np.linalg.slogdet(a), _A),
    (lambda a: np.linalg.vecdot(a[0], a[1]), _A),
    (lambda a: np.linalg.multi_dot([a[0], a, a[1]]), _A),
    *[(lambda a, p=p: np.linalg.cond(a, p), np.ones((2, 2)))
      for p in (None, 1, -1, 2, np.inf, "fro", "nuc")],
    (lambda a: np.linalg.cond(a, 1), np.stack([np.ones((2, 2)), 2 * np.eye(2)])),
    (lambda a: np.linalg.cond(a, "fro"), np.array([[np.nan, 1.0], [1.0, 1.0]])),
    (lambda a: np.linalg.matrix_rank(a), np.zeros((0, 0))),
    *[(lambda a, o=o: np.linalg.norm(a, o), np.zeros((0, 0))) for o in (None, "fro", 1, 2, np.inf)],
    *[(lambda a, o=o: np.linalg.norm(a, o), _A[:, ::-1] * 0.37) for o in (None, "fro")],
    (lambda a: np.linalg.outer(a, a), _A), (lambda a: np.linalg.cross(a, a), _A),
    (lambda a: np.linalg.cross(a, a + 1), np.arange(6.0).reshape(2, 3)),
])
def test_linear_algebra_types_and_edges_as_numpys(fn, arg):
    """NumPy scalars from cond, slogdet, vecdot and multi_dot; cond of a singular matrix is
    inf for every p (its inverse taken with errors ignored); empty matrices have norm and rank
    0; norm(x) is sqrt(dot(x, x)) as NumPy computes it; np.linalg.outer and cross refuse what
    the array API refuses."""
    want = _outcome(fn, arg)
    got = _outcome(tk.jit(fn), arg)
    if isinstance(want, type):
        assert got is want
    else:
        assert _types_and_values(got) == _types_and_values(want)


def test_python_ints_beyond_an_integer_range_compare_exactly():
    """NumPy 2 compares a Python int with an integer array exactly: x_uint64 > -1 is all True
    and x_int64 == 2**64 all False (toolkit raised OverflowError); and a Python int no int64
    holds comes back as that int."""
    u = np.array([2 ** 63 + 5, 1, 0], np.uint64)
    i = np.array([-3, 2 ** 62, -2 ** 63], np.int64)
    for fn in (lambda x: x > -1, lambda x: -1 < x, lambda x: x == -1, lambda x: x != 2 ** 64,
               lambda x: 2 ** 70 > x, lambda x: x >= -2 ** 70, lambda x: np.equal(-5, x),
               lambda x: x[0] > -1):
        for x in (u, i):
            assert _types_and_values(tk.jit(fn)(x)) == _types_and_values(fn(x))
    big = tk.jit(lambda x: (int(x[0]), x[1] + 1))
    for v in (2 ** 63 + 5, 2 ** 64 - 1, 7):
        x = np.array([v, 1], np.uint64)
        assert big(x) == (v, 2) and type(big(x)[0]) is int


def test_float16_nextafter_of_equal_values_keeps_the_first():
    x = np.array([-0.0, 0.0, 1.0], np.float16)
    y = np.array([0.0, -0.0, 1.0], np.float16)
    got = tk.jit(np.nextafter)(x, y)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(np.nextafter(x, y)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_traced_negative_integer_exponent_raises_as_numpy(backend):
    power = tk.jit(lambda x, n: x ** n, backend=backend)
    x = np.arange(4)
    np.testing.assert_array_equal(power(x, np.array([1, 2, 0, 3])), x ** np.array([1, 2, 0, 3]))
    with pytest.raises(ValueError, match="Integers to negative integer powers are not allowed"):
        power(x, np.array([1, -2, 0, 3]))


def test_flatten_is_a_copy_to_write_into():
    def fill(x):
        y = x.flatten()
        y[0] = 5.0
        z = x.T.flatten()
        z[1] = -1.0
        return y, x, z, x.flatten("F")

    x = np.arange(6.0).reshape(2, 3)
    for got, want in zip(tk.jit(fill)(x.copy()), fill(x.copy())):
        _same(got, want)


@pytest.mark.parametrize("fn, arg", [
    (lambda b: np.logspace(0, 2, 3, base=b), np.array([2.0, 3.0, 4.0])),
    (lambda b: np.logspace(0, 2, 4, base=b), np.array([2.0, 3.0])),
    (lambda x: np.var(x, dtype=np.int64), np.array([[1, 5, -3, 8], [2, 2, 2, 9]], np.int8)),
    (lambda x: np.var(x, axis=1, dtype=np.int32), np.array([[1, 5, -3, 8], [2, 2, 2, 9]], np.int8)),
    (lambda x: np.std(x, dtype=np.int64), np.array([[1, 5, -3, 8], [2, 2, 2, 9]], np.int8)),
    (lambda x: np.std(x, axis=0, dtype=np.int16), np.array([[1, 5], [2, 2]], np.int8)),
    (lambda p: np.unwrap(p, period=6), np.array([0, 2, 5, 1, 4, 10])),
    (lambda p: np.unwrap(p, period=7), np.array([0, 2, 5, 1, 4, 10])),
    (lambda x: np.histogram(x, bins=3), np.array([1e308, -1e308, 0.0])),
    (lambda x: np.array([x[0], 5], dtype=np.int8), np.array([1000])),
    (lambda x: np.array([x[0], 5], dtype=np.int8), np.array([np.nan])),
    (lambda x: np.array([x[0], 5], dtype=np.int8), np.array([2.5])),
    (lambda x: np.einsum("ij->j", x), np.array([[True, False], [False, False]])),
    (lambda x: np.tensordot(x, x, axes=np.int64(1)), np.arange(4.0).reshape(2, 2)),
    (lambda x: np.full_like(x, np.nan), np.zeros(2, np.uint8)),
    (lambda x: np.full_like(x, -1), np.zeros(2, np.uint8)),
    (lambda x: np.pad(x, 1, constant_values=-1), np.zeros(2, np.uint8)),
    (lambda x: np.median(x, axis=0), np.zeros((0, 3))),
    (lambda x: np.nanmedian(x), np.zeros(0)),
    (lambda x: np.quantile(x, 0.5), np.zeros(0)),
    (lambda x: np.nan_to_num(x), np.array([complex(np.nan, np.inf), complex(-np.inf, 2), 1j])),
])
def test_functions_found_by_the_second_hunt_as_numpys(fn, arg):
    """logspace with an array base, var/std with an integer dtype=, unwrap of integers,
    histogram's too-many-bins check, np.array(dtype=int8) of out-of-range traced scalars,
    bool einsum, tensordot(axes=np.int64), full_like/pad casting as NumPy, the median of
    nothing, complex nan_to_num."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            want = fn(arg)
        except (OverflowError, ValueError, TypeError, IndexError) as error:
            family = next(k for k in (OverflowError, ValueError, TypeError, IndexError)
                          if isinstance(error, k))
            with pytest.raises(family):
                tk.jit(fn)(arg)
            return
        got = tk.jit(fn)(arg)
    assert _types_and_values(got if not isinstance(got, tuple) else got) == \
        _types_and_values(want)


def test_writes_the_caller_sees_through_ascontiguousarray_and_nan_to_num():
    def through(x):
        y = np.ascontiguousarray(x)
        y[0] = 9.0
        np.nan_to_num(x, copy=False)
        return x.sum(), 3.0 in x, 7.0 in x

    x = np.array([1.0, np.nan, np.inf])
    want_x, got_x = x.copy(), x.copy()
    want, got = through(want_x), tk.jit(through)(got_x)
    assert _types_and_values(got) == _types_and_values(want)
    np.testing.assert_array_equal(got_x, want_x)


def test_a_loop_body_that_writes_outside_is_refused_by_name():
    def body_writes(x, out):
        def body(i, c):
            out[i] = c
            return c + 1
        return tk.lax.fori_loop(0, 3, body, x)

    with pytest.raises(TypeError, match=r"a write into f64\[3\] \(argument 'out'\)"):
        tk.jit(body_writes)(1.0, np.zeros(3))
