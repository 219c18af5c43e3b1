"""The NumPy reference interpreter (the ``interpreter`` backend): the IR layer's evaluator run
on a module's entry computation, with argument checking."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ...ir.evaluator import EVALUATORS, evaluate_computation
from ...ir.nodes import Module
from ...ir.shapes import Shape


class ArgumentError(TypeError):
    pass


def coerce_arguments(module: Module, args: Sequence[Any]) -> list[np.ndarray]:
    params = module.entry.parameters
    if len(args) != len(params):
        raise ArgumentError(
            f"module {module.name} takes {len(params)} argument(s), got {len(args)}"
        )
    out = []
    for i, (arg, p) in enumerate(zip(args, params)):
        shape = p.shape
        if not isinstance(shape, Shape):
            raise ArgumentError(f"tuple parameter %{p.name} is not supported as an argument")
        if isinstance(arg, (bool, int, float, complex)) and shape.rank == 0:
            arr = np.asarray(arg, dtype=shape.dtype.numpy)
        else:
            arr = np.asarray(arg)
        if arr.dtype != shape.dtype.numpy or arr.shape != shape.dims:
            raise ArgumentError(
                f"argument {i} (parameter %{p.name}) must be {shape.to_text(False)}, "
                f"got {arr.dtype}{list(arr.shape)}")
        out.append(arr)
    return out


def flatten_value(value) -> tuple[np.ndarray, ...]:
    if isinstance(value, tuple):
        return tuple(leaf for v in value for leaf in flatten_value(v))
    return (np.array(value),)  # a fresh, writable, contiguous array for the caller


def flatten_private(value) -> tuple[np.ndarray, ...]:
    """As ``flatten_value`` for a value that is the caller's alone (a collective's result):
    copied only where it is not contiguous."""
    if isinstance(value, tuple):
        return tuple(leaf for v in value for leaf in flatten_private(v))
    array = np.asarray(value)
    if array.flags.c_contiguous and array.flags.writeable:
        return (array,)
    return (np.array(array),)


def run(module: Module, *args) -> tuple[np.ndarray, ...]:
    """Execute ``module`` with NumPy; returns the flattened results as a tuple of arrays."""
    return flatten_value(evaluate_computation(module.entry, coerce_arguments(module, args)))


__all__ = [
    "EVALUATORS",
    "evaluate_computation",
    "coerce_arguments",
    "flatten_value",
    "run",
    "ArgumentError",
]
