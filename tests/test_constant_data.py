"""Constant arrays fused into kernels: every element type, short and long, on the CPU and the
GPU executor (simulated device), bit for bit against NumPy.

A short constant is an element list in the kernel's LLVM IR; a long one is its bytes, one
``c"..."`` string (llvmlite formats element lists at about 20 us an element: a program with
fifteen 32,768-element complex tables spent 12 s printing them)."""
import numpy as np
import pytest

from toolkit.backends import get_backend
from toolkit.backends.llvm.elemental import LITERAL_ELEMENTS
from toolkit.stages import lower_positional

from test_gpu_codegen import assemble, needs_ptxas

_DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.int32, np.int64, np.uint64, np.float16,
           np.float32, np.float64, np.complex64, np.complex128]


def _table(dtype, n):
    rng = np.random.default_rng(n)
    if dtype == np.bool_:
        return rng.random(n) < 0.5
    kind = np.dtype(dtype).kind
    if kind in "iu":
        info = np.iinfo(dtype)
        t = rng.integers(info.min, info.max, size=n, dtype=dtype, endpoint=True)
        t[:2] = info.min, info.max
        return t
    t = rng.standard_normal(n).astype(dtype)
    if kind == "c":
        t = (t + 1j * rng.standard_normal(n)).astype(dtype)
    t[:4] = [-0.0, np.inf, -np.inf, np.nan]
    return t


def _compiled(table, backend):
    # (traced as an SPMD program is, the closure's array is a constant of the program: tk.jit
    # would lift it into a parameter)
    def f(x):
        # a kernel that reads the table at two indexings (x is zero: the second is chosen)
        return np.where(x[0] > 0, table[::-1], table)
    return lower_positional(f, "tables", (np.zeros(1, np.float32),), get_backend(backend)).compile()


@pytest.mark.parametrize("n", [5, LITERAL_ELEMENTS + 1, 1000])
@pytest.mark.parametrize("dtype", _DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("backend", ["cpu", "gpu-simulated"])
def test_a_constant_table_reads_back_bit_for_bit(dtype, n, backend):
    table = _table(dtype, n)
    got = np.asarray(_compiled(table, backend)(np.zeros(1, np.float32)))
    want = table
    assert got.dtype == want.dtype and got.shape == want.shape
    # bits, not values: -0.0, the NaN's payload, a complex part's sign
    assert got.tobytes() == want.tobytes()


def test_a_long_constant_is_written_as_bytes_and_a_short_one_as_elements():
    long_table = np.linspace(0, 1, 4096) * np.exp(2j * np.pi * np.arange(4096) / 4096)
    text = _compiled(long_table, "cpu").as_text("llvm")
    assert "constant [65536 x i8] c\"" in text, text[:2000]
    short = _compiled(np.array([1.5, -0.0, 3.25]), "cpu").as_text("llvm")
    elements = "[double 1.500000e+00, double -0.000000e+00, double 3.250000e+00]"
    assert f"constant [3 x double] {elements}" in short


@needs_ptxas
def test_a_long_constant_assembles_for_the_gpu_as_a_global_byte_array(tmp_path):
    ptx = _compiled(np.arange(1000.0) * 1.5, "gpu-simulated").as_text("ptx")
    assert ".global .align 16 .b8 const_" in ptx and "[8000] = {" in ptx
    assemble(ptx, "sm_90", tmp_path)
