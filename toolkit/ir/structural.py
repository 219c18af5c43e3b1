"""Structural identity of computations: two computations that differ only in the names of their
instructions (and of the computations they call) and in metadata compute the same function.

An unrolled loop makes one fused kernel per trip, all alike (a stencil step, a layer); a backend
compiles each distinct one once and lets the others call it (``exact_key``: exact, and cheaper
than printing them)."""
from __future__ import annotations

import hashlib
from array import array
from typing import Mapping

import numpy as np

from .nodes import Computation, Module
from .shapes import Shape


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


def fingerprint(module: Module) -> str:
    """A digest of ``module`` that is equal for programs the same up to instruction names and
    metadata, in every process (a compile's record, compared across calls and across ranks).
    Each instruction is its kind (opcode, shape and attributes, as text) and its operands'
    positions. Kinds are numbered by their text in the order they first appear, and each
    instruction enters the digest as integers: its kind, its operand count and positions.
    Shapes and attribute maps are shared objects (the builder interns them), so an
    instruction's kind is found by their identities and each kind's text is made once. A
    200k-instruction trace printed as HLO text took 1.5 s to fingerprint, as a row of text per
    instruction 0.5 s."""
    digest = hashlib.sha1(repr((module.attributes, len(module.computations))).encode())
    index = {id(c): k for k, c in enumerate(module.computations)}
    by_identity: dict[tuple, int] = {}  # (opcode, id(shape), id(attrs)) -> kind
    by_text: dict[str, int] = {}  # a kind's text -> kind, in the order first seen
    for comp in module.computations:
        position = {inst: k for k, inst in enumerate(comp.instructions)}
        rows = array("q", (len(comp.instructions), position[comp.root]))
        append, extend = rows.append, rows.extend
        for inst in comp.instructions:
            key = (inst.opcode, id(inst.shape), id(inst.attrs))
            kind = by_identity.get(key)
            if kind is None:
                text = (f"{inst.opcode} {_shape_text(inst.shape)} "
                        f"{_attributes_text(inst.attrs, index)}")
                kind = by_identity[key] = by_text.setdefault(text, len(by_text))
            operands = inst.operands
            append(kind)
            append(len(operands))
            extend(map(position.__getitem__, operands))
        digest.update(rows.tobytes())
    digest.update("\n".join(by_text).encode())  # (dicts keep the order kinds were first seen)
    return digest.hexdigest()[:16]


# Texts of shapes and of attribute maps of plain values, kept across fingerprints: a call that
# breaks on data makes a new segment at every break (each row of a sparse product), of the
# same few shapes and attributes. Keyed by value, never by id (an id outlives no object).
_TEXTS: dict = {}
_TEXTS_KEPT = 1 << 14
# (bool is left out: True == 1 as a key, and its text is another)
_PLAIN_VALUES = frozenset({int, str, type(None)})


def _kept_text(key, make) -> str:
    text = _TEXTS.get(key)
    if text is None:
        if len(_TEXTS) >= _TEXTS_KEPT:
            _TEXTS.clear()
        text = _TEXTS[key] = make()
    return text


def _shape_text(shape) -> str:
    return _kept_text(shape, lambda: str(shape)) if type(shape) is Shape else str(shape)


def _attributes_text(attrs: Mapping, index: dict[int, int]) -> str:
    def text() -> str:
        return ";".join(f"{k}={_attribute_text(v, index)}" for k, v in attrs.items())

    items = tuple(attrs.items())
    # (floats are left out: 0.0 == -0.0 as keys, and their texts differ)
    if all(type(v) in _PLAIN_VALUES or type(v) is tuple and all(
            type(w) in _PLAIN_VALUES for w in v) for _, v in items):
        return _kept_text(("attributes", items), text)
    return text()


def _attribute_text(value, index: dict[int, int]) -> str:
    """An attribute value as text that tells any two values apart: arrays by their type and
    bytes (a digest past 64 bytes), computations by their place in the module."""
    if isinstance(value, np.ndarray):
        data = np.ascontiguousarray(value).tobytes()
        body = data.hex() if len(data) <= 64 else hashlib.sha1(data).hexdigest()
        return f"array({value.dtype.str},{value.shape},{body})"
    if isinstance(value, Computation):
        return f"computation({index.get(id(value), value.name)})"
    if isinstance(value, (tuple, list)):
        return "(" + ",".join(_attribute_text(v, index) for v in value) + ")"
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{k}:{_attribute_text(v, index)}"
                              for k, v in sorted(value.items())) + "}"
    if isinstance(value, float):
        return value.hex()  # (-0.0 and 0.0 apart)
    return repr(value)
