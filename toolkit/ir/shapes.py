"""Array and tuple shapes, printed exactly as XLA prints them (``f32[8,128]{1,0}``)."""
from __future__ import annotations

import math
from dataclasses import dataclass

from .dtypes import ElementType


@dataclass(frozen=True, slots=True)
class Shape:
    """A dense array shape. ``layout`` is minor-to-major; ``None`` means row-major."""

    dtype: ElementType
    dims: tuple[int, ...]
    layout: tuple[int, ...] | None = None

    def __hash__(self) -> int:
        # (consistent with the generated equality: equal shapes have equal names and dims)
        return hash((self.dtype.name, self.dims, self.layout))

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def size(self) -> int:
        return math.prod(self.dims)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def minor_to_major(self) -> tuple[int, ...]:
        if self.layout is not None:
            return self.layout
        return tuple(range(self.rank - 1, -1, -1))

    @property
    def is_tuple(self) -> bool:
        return False

    def with_dtype(self, dtype: ElementType) -> Shape:
        return Shape(dtype, self.dims)

    def with_dims(self, dims) -> Shape:
        return Shape(self.dtype, tuple(int(d) for d in dims))

    def same_type(self, other) -> bool:
        """Equal element type and dimensions (layouts are ignored, as XLA's ``Compatible``)."""
        return isinstance(other, Shape) and self.dtype == other.dtype and self.dims == other.dims

    def to_text(self, layout: bool = True) -> str:
        body = f"{self.dtype.name}[{','.join(map(str, self.dims))}]"
        if layout and self.rank > 0:
            body += "{" + ",".join(map(str, self.minor_to_major)) + "}"
        return body

    def __str__(self) -> str:
        return self.to_text()


@dataclass(frozen=True, slots=True)
class TupleShape:
    elements: tuple[Shape | TupleShape, ...]

    @property
    def is_tuple(self) -> bool:
        return True

    @property
    def nbytes(self) -> int:
        return sum(e.nbytes for e in self.elements)

    def leaves(self) -> list[Shape]:
        out: list[Shape] = []
        for e in self.elements:
            out.extend(e.leaves() if isinstance(e, TupleShape) else [e])
        return out

    def same_type(self, other) -> bool:
        return (
            isinstance(other, TupleShape)
            and len(self.elements) == len(other.elements)
            and all(a.same_type(b) for a, b in zip(self.elements, other.elements))
        )

    def to_text(self, layout: bool = True) -> str:
        return "(" + ", ".join(e.to_text(layout) for e in self.elements) + ")"

    def __str__(self) -> str:
        return self.to_text()


AnyShape = Shape | TupleShape


def scalar(dtype: ElementType) -> Shape:
    return Shape(dtype, ())
