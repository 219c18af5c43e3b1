"""Type promotion as NumPy 2 does it (NEP 50): Python scalars are weak and take the array's
type when the kinds allow (``x_f32 * 2.0`` stays f32, ``x_i32 + 1`` stays i32)."""
from __future__ import annotations

import numpy as np

from .errors import UserOverflowError
from .tracer import Tracer

SUPPORTED = tuple(
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
)
_KIND_RANK = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}
_DEFAULT = {
    0: np.dtype(bool),
    1: np.dtype(np.int64),
    2: np.dtype(np.float64),
    3: np.dtype(np.complex128),
}


def kind_rank(dtype: np.dtype) -> int:
    return _KIND_RANK[np.dtype(dtype).kind]


def result_type(*typed: tuple[np.dtype, bool]) -> tuple[np.dtype, bool]:
    """``(dtype, weak)`` pairs -> the promoted ``(dtype, weak)``."""
    strong = [d for d, weak in typed if not weak]
    weak = [d for d, w in typed if w]
    if not strong:
        rank = max(kind_rank(d) for d in weak)
        widest = [d for d in weak if kind_rank(d) == rank]
        return np.result_type(*widest), True
    base = np.result_type(*strong)
    for d in weak:
        # a weak complex keeps a float's precision (f32 * 1j: c64)
        if kind_rank(d) > kind_rank(base):
            base = np.result_type(base, np.complex64) if kind_rank(d) == 3 and base.kind == "f" \
                else _DEFAULT[kind_rank(d)]
    return base, False


def python_scalar_dtype(value) -> np.dtype:
    if isinstance(value, bool):
        return np.dtype(bool)
    if isinstance(value, int):
        return np.dtype(np.int64)
    if isinstance(value, complex):
        return np.dtype(np.complex128)
    return np.dtype(np.float64)


def check_int_fits(value: int, dtype: np.dtype, where: str) -> None:
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        if not info.min <= value <= info.max:
            raise UserOverflowError(f"Python integer {value} out of bounds for {dtype}{where}")


def numpy_stand_in(t: Tracer):
    """What NumPy's promotion sees for a tracer: its dtype, or, for a weak one, a Python zero of
    its kind (NEP 50: weak values take the other operand's precision)."""
    return t.dtype.type(0).item() if t.weak_type else t.dtype


def result_dtype(values) -> np.dtype:
    """NumPy's promotion of ``values`` (weak Python scalars and weak tracers included)."""
    def arg(v):
        if isinstance(v, Tracer):
            return numpy_stand_in(v)
        if isinstance(v, (bool, int, float, complex)) and not isinstance(v, np.generic):
            return v
        return np.asarray(v).dtype
    return np.result_type(*[arg(v) for v in values])


def array_dtype(value) -> np.dtype:
    """The dtype ``np.asarray(value)`` has: what a NumPy function that converts its operands to
    arrays first (np.dot, np.outer, np.kron ...) promotes, a Python number as a strong int64,
    float64 or complex128 (and a weak tracer, a Python number, likewise)."""
    if isinstance(value, Tracer):
        return value.dtype
    if isinstance(value, (bool, int, float, complex)) and not isinstance(value, np.generic):
        return python_scalar_dtype(value)
    return np.asarray(value).dtype
