"""Element types: XLA's primitive type names mapped onto NumPy dtypes."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class ElementType:
    """One XLA primitive type (``f32``, ``s64``, ``pred`` ...) and its NumPy twin."""

    name: str
    numpy: np.dtype
    kind: str  # 'b' bool, 'i' signed, 'u' unsigned, 'f' float, 'c' complex

    def __hash__(self) -> int:
        # (equal types have equal names; the generated hash also hashed the NumPy dtype, 0.4 us,
        # and every shape in every dict key of every pass hashes its element type)
        return hash(self.name)

    @property
    def itemsize(self) -> int:
        return self.numpy.itemsize

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def is_integer(self) -> bool:
        return self.kind in "iu"

    @property
    def is_bool(self) -> bool:
        return self.kind == "b"

    @property
    def is_complex(self) -> bool:
        return self.kind == "c"

    @property
    def component(self) -> "ElementType":
        """The real type of a complex type's two parts (``c64`` -> ``f32``); itself otherwise."""
        return {"c64": F32, "c128": F64}.get(self.name, self)

    def __repr__(self) -> str:
        return self.name


def _make(name: str, np_name: str) -> ElementType:
    dt = np.dtype(np_name)
    return ElementType(name, dt, dt.kind)


PRED = _make("pred", "bool")
S8 = _make("s8", "int8")
S16 = _make("s16", "int16")
S32 = _make("s32", "int32")
S64 = _make("s64", "int64")
U8 = _make("u8", "uint8")
U16 = _make("u16", "uint16")
U32 = _make("u32", "uint32")
U64 = _make("u64", "uint64")
F16 = _make("f16", "float16")
F32 = _make("f32", "float32")
F64 = _make("f64", "float64")
C64 = _make("c64", "complex64")
C128 = _make("c128", "complex128")

ALL: tuple[ElementType, ...] = (
    PRED,
    S8,
    S16,
    S32,
    S64,
    U8,
    U16,
    U32,
    U64,
    F16,
    F32,
    F64,
    C64,
    C128,
)
BY_NAME: dict[str, ElementType] = {t.name: t for t in ALL}
_BY_NUMPY: dict[np.dtype, ElementType] = {t.numpy: t for t in ALL}


class UnsupportedDTypeError(TypeError):
    pass


def from_numpy(dtype) -> ElementType:
    """The element type for a NumPy dtype (or anything ``np.dtype`` accepts)."""
    dt = np.dtype(dtype)
    try:
        return _BY_NUMPY[dt]
    except KeyError:
        supported = ", ".join(str(t.numpy) for t in ALL)
        raise UnsupportedDTypeError(
            f"dtype {dt} is not supported by toolkit (supported: {supported})"
        ) from None


def complex_of(t: ElementType) -> ElementType:
    """The complex type whose parts are ``t`` (``f32`` -> ``c64``)."""
    return {"f32": C64, "f64": C128}[t.name]


def from_name(name: str) -> ElementType:
    try:
        return BY_NAME[name]
    except KeyError:
        raise UnsupportedDTypeError(
            f"element type '{name}' is not supported (supported: {', '.join(BY_NAME)})"
        ) from None
