"""Structural identity of computations: two computations that differ only in the names of their
instructions (and of the computations they call) and in metadata compute the same function.

An unrolled loop makes one fused kernel per trip, all alike (a stencil step, a layer); a backend
compiles each distinct one once and lets the others call it (``exact_key``: exact, and cheaper
than printing them)."""
from __future__ import annotations

import numpy as np

from .nodes import Computation


def _called(comp: Computation) -> list[Computation]:
    found = []
    for inst in comp.instructions:
        for value in inst.attrs.values():
            if isinstance(value, Computation):
                found.append(value)
            elif isinstance(value, (tuple, list)):
                found.extend(v for v in value if isinstance(v, Computation))
    return found


def frozen_attribute(value, keys: dict[int, tuple]):
    """An attribute value as a hashable value with exact equality (array literals by their
    bytes; called computations by their ``exact_key``, remembered in ``keys``)."""
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, Computation):
        key = keys.get(id(value))
        if key is None:  # (exact_key keys callees first: only other callers get here)
            key = keys[id(value)] = exact_key(value)
        return ("computation", key)
    if isinstance(value, (tuple, list)):
        return tuple(frozen_attribute(v, keys) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, frozen_attribute(v, keys)) for k, v in value.items()))
    hash(value)  # anything else must be hashable already (ints, strings, enums ...)
    return value


def exact_key(comp: Computation) -> tuple:
    """A hashable key equal for computations that are the same program up to instruction names
    and metadata; compared exactly (no digest), so equal keys mean equal programs. Cheaper than
    printing: a segment's key is computed on every call of a function with graph breaks.
    Computations it calls are keyed first, with an explicit stack rather than recursion."""
    keys: dict[int, tuple] = {}
    stack: list[tuple[Computation, bool]] = [(comp, False)]
    while stack:
        current, expanded = stack.pop()
        if id(current) in keys:
            continue
        called = _called(current)
        if not expanded and any(id(c) not in keys for c in called):
            stack.append((current, True))
            stack.extend((c, False) for c in called if id(c) not in keys)
            continue
        position = {id(inst): k for k, inst in enumerate(current.instructions)}
        rows = []
        for inst in current.instructions:
            attrs = inst.attrs
            rows.append((inst.opcode, inst.shape, tuple(position[id(o)] for o in inst.operands),
                         tuple((k, frozen_attribute(v, keys)) for k, v in attrs.items())
                         if attrs else ()))
        keys[id(current)] = (position[id(current.root)], tuple(rows))
    return keys[id(comp)]
