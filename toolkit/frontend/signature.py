"""Abstract signatures of jitted calls: what a compiled program is keyed by."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import ArgumentTypeError, subclass_problem
from .promotion import SUPPORTED
from .tracer import Tracer

_PY_SCALARS = {bool: np.dtype(bool), int: np.dtype(np.int64), float: np.dtype(np.float64),
               complex: np.dtype(np.complex128)}


@dataclass(frozen=True, slots=True)
class ArgSpec:
    """One array argument (a pytree leaf) as the compiler sees it."""

    path: str
    shape: tuple[int, ...]
    dtype: np.dtype
    weak_type: bool

    @property
    def text(self) -> str:
        return _spec_text(self.shape, self.dtype, self.weak_type)


@functools.lru_cache(maxsize=4096)
def _spec_text(shape: tuple[int, ...], dtype: np.dtype, weak: bool) -> str:
    """``f64[3,4]``, ``s64[]{weak}``: asked for every new segment of a call that breaks on
    data (each row of a sparse product), where the same few shapes repeat."""
    from ..ir.dtypes import from_numpy

    return f"{from_numpy(dtype).name}[{','.join(map(str, shape))}]" + (
        "{weak}" if weak else "")


def abstractify(leaf: Any, path: str) -> tuple[tuple[int, ...], np.dtype, bool]:
    """(shape, dtype, weak_type) of one argument leaf, or a TypeError naming it."""
    t = type(leaf)
    if t is np.ndarray:
        if leaf.dtype not in SUPPORTED:
            raise ArgumentTypeError(
                f"argument '{path}' has dtype {leaf.dtype}, which toolkit does not support "
                f"(supported: {', '.join(map(str, SUPPORTED))}); convert it with .astype(...)")
        return leaf.shape, leaf.dtype, False
    dtype = _PY_SCALARS.get(t)
    if dtype is not None:
        if t is int and not -2**63 <= leaf < 2**63:
            raise ArgumentTypeError(f"argument '{path}' = {leaf} does not fit in int64")
        return (), dtype, True  # (weak, as NEP 50 reads Python numbers: a bool too)
    if isinstance(leaf, np.generic):  # (weak None: a NumPy scalar, not a 0-d array)
        shape, dtype, _ = abstractify(np.asarray(leaf), path)
        return shape, dtype, None
    problem = subclass_problem(leaf, f"argument '{path}'")
    if problem is not None:
        raise problem
    if isinstance(leaf, np.ndarray):  # np.memmap
        return abstractify(np.asarray(leaf), path)
    if isinstance(leaf, Tracer):
        return leaf.shape, leaf.dtype, leaf.weak_type
    if getattr(t, "__toolkit_array__", False):  # a device array: its shape, without a copy
        return tuple(leaf.shape), np.dtype(leaf.dtype), False
    if hasattr(leaf, "__array__") and not isinstance(leaf, (str, bytes)):
        return abstractify(np.asarray(leaf), path)
    if isinstance(leaf, _GENERATORS):
        raise ArgumentTypeError(_generator_problem(f"argument '{path}'", t))
    raise ArgumentTypeError(
        f"argument '{path}' has type {t.__name__}, which jit cannot trace: pass NumPy arrays, "
        "Python/NumPy scalars, or tuples/lists/dicts of them; mark other values static with "
        "static_argnums=/static_argnames=")


_GENERATORS = (np.random.Generator, np.random.RandomState, np.random.BitGenerator)


def _generator_problem(what: str, t: type) -> str:
    return (f"{what} is a random generator ({t.__name__}): a compiled program would draw its "
            "numbers once, when traced, and every call would reuse them (so it cannot be "
            "static either). Draw the numbers outside and pass them in, or keep the generator "
            "at the module's top level (rng = np.random.default_rng(...)), where each call of "
            "the jitted function draws anew, as NumPy does")


def check_hashable_static(value: Any, name: str) -> None:
    if isinstance(value, _GENERATORS):
        raise ArgumentTypeError(_generator_problem(f"static argument '{name}'", type(value)))
    try:
        hash(value)
    except TypeError:
        raise ArgumentTypeError(
            f"static argument '{name}' has unhashable type {type(value).__name__}; static "
            "arguments key the compilation cache, so they must be hashable (use a tuple instead "
            "of a list, or pass it as a traced array argument)") from None
