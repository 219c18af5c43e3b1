import itertools
import os

import numpy as np

DTYPES = [
    np.dtype(t)
    for t in (
        "bool",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "float16",
        "float32",
        "float64",
        "complex64",
        "complex128",
    )
]


def assert_same(got, expected, approx: bool = False, rtol: float | None = None,
                signed_zeros: bool = True):
    """Same dtype, shape and values (NaN equals NaN); exact results keep the sign of zero
    unless ``signed_zeros`` is False (where NumPy itself does not pin it down)."""
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.dtype == expected.dtype, f"dtype {got.dtype} != NumPy's {expected.dtype}"
    assert got.shape == expected.shape, f"shape {got.shape} != NumPy's {expected.shape}"
    if approx and expected.dtype.kind in "fc":
        tol = rtol if rtol is not None else {np.dtype(np.float16): 1e-3, np.dtype(np.float32): 4e-7,
                                             np.dtype(np.complex64): 4e-7}.get(
            expected.dtype, 1e-15)  # float16: one ulp of a float32 result rounded to half
        np.testing.assert_allclose(got, expected, rtol=tol, atol=0, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, expected)
        parts = (
            [(got, expected)]
            if expected.dtype.kind == "f"
            else [(got.real, expected.real), (got.imag, expected.imag)]
            if expected.dtype.kind == "c"
            else []
        )
        for g, e in parts if signed_zeros else []:
            zeros = e == 0
            np.testing.assert_array_equal(np.signbit(g[zeros]), np.signbit(e[zeros]),
                                          err_msg="the sign of a zero differs from NumPy's")


def assert_same_bits(expected, got):
    """Same shape, dtype and values, and for floats the same sign bit everywhere (NaNs too)."""
    e, g = np.asarray(expected), np.asarray(got)
    assert e.shape == g.shape and e.dtype == g.dtype, (e.shape, g.shape, e.dtype, g.dtype)
    np.testing.assert_array_equal(g, e)
    if e.dtype.kind == "f":
        assert np.array_equal(np.signbit(e), np.signbit(g))


def assert_outputs_match(got, expected, rtol: float = 3e-6, atol: float = 1e-6):
    """Two sequences of arrays: same count, dtypes and shapes; floats close, the rest equal."""
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        g, e = np.asarray(g), np.asarray(e)
        assert g.dtype == e.dtype and g.shape == e.shape
        if e.dtype.kind in "fc":
            np.testing.assert_allclose(g, e, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(g, e)


def run_both(fn, *args):
    """(toolkit result, NumPy result) of ``fn``; toolkit through jit and the interpreter."""
    import toolkit as tk

    with np.errstate(all="ignore"):
        expected = fn(*args)
    return tk.jit(fn)(*args), expected


# Sweeps that compile every ufunc per example: fewer examples in the default (CI) profile, which
# keeps the suite near five minutes; HYPOTHESIS_PROFILE=thorough runs four times as many and more.
THOROUGH = os.environ.get("HYPOTHESIS_PROFILE") == "thorough"


def sweep_examples(ci: int) -> int:
    return ci * 8 if THOROUGH else ci


def special_grid(special, dtype=np.complex128):
    """Every pairing of ``special`` as real and imaginary parts (signed zeros, infinities, NaN
    ...): a complex array of them."""
    parts = np.array(list(itertools.product(special, special)))
    with np.errstate(all="ignore"):
        z = (parts[:, 0] + 0j).astype(dtype)
        z.imag = parts[:, 1]
    return z


def run_jitted(fn, backend, *args):
    """``fn(*args)`` jitted on ``backend``, the results on the host."""
    import toolkit as tk

    out = tk.jit(fn, backend=backend, on_recompile="ignore")(*args)
    return tk.device_get(out) if backend == "gpu-emulated" else out


def expect(fn, *args):
    """NumPy's own result, its floating-point warnings silenced."""
    with np.errstate(all="ignore"):
        return fn(*args)


def host_values(out):
    """A call's results as NumPy arrays (device arrays copied to the host), its tuple kept."""
    return tuple(np.asarray(o) for o in out) if isinstance(out, tuple) else np.asarray(out)


def assert_close_scaled(got, want, rtol=2e-5):
    """Each result within ``rtol`` of NumPy's, absolutely within ``rtol`` times the largest
    magnitude (a GPU's sums add in another order)."""
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,)):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol * max(1.0, np.abs(w).max()))
