"""Builds computations and modules, inferring and checking every shape as it goes."""
from __future__ import annotations

import itertools
import re
from types import MappingProxyType
from typing import Any, Mapping, Sequence

from .dtypes import ElementType
from .nodes import Computation, Instruction, Metadata, Module, mark_shape_inferred
from .shape_inference import infer_shape
from .shapes import AnyShape, Shape

_NAME_OK = re.compile(r"[^A-Za-z0-9_.\-]")


_SANITIZED: dict[str, str] = {}  # opcodes and a few hundred other bases: every add asks


def sanitize_name(name: str) -> str:
    """An HLO identifier made from arbitrary text (``params['w1']`` -> ``params_w1``)."""
    known = _SANITIZED.get(name)
    if known is not None:
        return known
    result = _sanitize(name)
    if len(_SANITIZED) < 4096:  # bounded: user-made names (argument paths) are unbounded
        _SANITIZED[name] = result
    return result


def _sanitize(name: str) -> str:
    cleaned = _NAME_OK.sub("_", name).strip("_.-") or "x"
    cleaned = re.sub(r"_+", "_", cleaned)
    return cleaned if not cleaned[0].isdigit() else f"_{cleaned}"


class NameUniquer:
    """XLA-style unique names: ``<base>.<id>`` with one id counter per module."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._used: set[str] = set()
        self._next_suffix: dict[str, int] = {}  # base -> the next N first_free tries

    @classmethod
    def from_names(cls, names) -> NameUniquer:
        """A uniquer that will not hand out any of ``names``."""
        u = cls()
        u._used.update(names)
        return u

    def add_names(self, names) -> None:
        """Hand out none of ``names`` from now on (names another builder gave out)."""
        self._used.update(names)

    def copy(self) -> NameUniquer:
        """An independent uniquer that hands out no name this one has (nor will next)."""
        following = next(self._ids)
        self._ids = itertools.count(following)
        u = NameUniquer()
        u._ids = itertools.count(following)
        u._used = set(self._used)
        u._next_suffix = dict(self._next_suffix)
        return u

    def take(self, name: str) -> str:
        """``name``, reserved in advance (``from_names``), now taken by its owner: a pass that
        renames nothing but inserts new instructions keeps every original's name."""
        self._used.discard(name)
        return name

    def is_used(self, name: str) -> bool:
        return name in self._used

    def first_free(self, base: str) -> str:
        """``base`` if unused, else the first unused ``base.N`` (not reserved). The next N to try
        is kept per base: 2,500 fusions of one kind cost 2,500 probes, not 3 million."""
        n = self._next_suffix.get(base, 0)
        while True:
            candidate = base if n == 0 else f"{base}.{n}"
            n += 1
            if candidate not in self._used:
                self._next_suffix[base] = n
                return candidate

    def reserve(self, name: str) -> str:
        if name in self._used:
            raise ValueError(f"duplicate name %{name}")
        self._used.add(name)
        return name

    def fresh(self, base: str) -> str:
        base = sanitize_name(base)
        while True:
            candidate = f"{base}.{next(self._ids)}"
            if candidate not in self._used:
                self._used.add(candidate)
                return candidate


_NO_ATTRIBUTES: Mapping[str, Any] = MappingProxyType({})
# One Shape object per distinct array shape built: a compile holds hundreds of thousands of
# instructions, most of a few shapes, and each Shape is an object Python's collector scans on
# every full collection (Shapes are immutable values and hold nothing else)
_SHAPES: dict[Shape, Shape] = {}
_SHAPES_KEPT = 1 << 14


_CONSTANT_SHAPES: dict[tuple, Shape] = {}  # (literal dtype, dimensions) -> its shape
_ATTRIBUTES: dict[tuple, Mapping[str, Any]] = {}
_ATTRIBUTES_KEPT = 1 << 16
_PLAIN = frozenset({int, bool, str, float, type(None)})


def _plain(value) -> bool:
    """A value that refers to nothing else: a number, a string, or tuples of them (never a
    computation, an array or a Python object a shared map would keep alive)."""
    kind = type(value)
    if kind in _PLAIN:
        return True
    return kind is tuple and all(type(v) in _PLAIN or type(v) is tuple and all(
        type(w) in _PLAIN for w in v) for v in value)


def frozen_attributes(attrs: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """``attrs`` as an immutable map: one shared map for equal maps of plain values (a
    compile's instructions repeat ``parameter_number: 0``, a reduce's dimensions, a slice; each
    map is an object Python's collector scans on every full collection)."""
    return _frozen_and_key(attrs)[0]


def frozen_plain_attributes(attrs: Mapping[str, Any]) -> Mapping[str, Any]:
    """``frozen_attributes`` for a caller that knows every value is plain (numbers, strings,
    tuples of them): not checked again (a traced loop's slices make thousands)."""
    key = tuple(attrs.items())
    found = _ATTRIBUTES.get(key)
    if found is None:
        if len(_ATTRIBUTES) >= _ATTRIBUTES_KEPT:
            _ATTRIBUTES.clear()
        found = _ATTRIBUTES[key] = MappingProxyType(dict(attrs))
    return found


def _frozen_and_key(attrs: Mapping[str, Any] | None) -> tuple[Mapping[str, Any], tuple | None]:
    """``frozen_attributes(attrs)`` and, for plain values, the hashable key equal maps share
    (None for a map holding a computation, an array or another object)."""
    if not attrs:
        return _NO_ATTRIBUTES, ()
    if not all(_plain(v) for v in attrs.values()):
        return MappingProxyType(dict(attrs)), None
    return frozen_plain_attributes(attrs), tuple(attrs.items())


# Shapes inferred for plain attributes: (opcode, attribute key, declared shape, *operand shapes)
# -> the shape. Shape inference is a function of these alone, and a traced Python loop asks the
# same few questions thousands of times (a slice of a row, a scalar's reshape, an add).
_INFERRED: dict[tuple, AnyShape] = {}
_INFERRED_KEPT = 1 << 15


def _inferred_shape(opcode: str, operands: Sequence[Instruction], attrs: Mapping[str, Any],
                    key: tuple | None, declared: AnyShape | None) -> AnyShape:
    shapes = [o.shape for o in operands]
    if key is None:
        return _shared_shape(infer_shape(opcode, shapes, attrs, declared))
    question = (opcode, key, declared, *shapes)
    found = _INFERRED.get(question)
    if found is None:  # (an invalid instruction raises here, every time it is asked)
        found = _shared_shape(infer_shape(opcode, shapes, attrs, declared))
        if len(_INFERRED) >= _INFERRED_KEPT:
            _INFERRED.clear()
        _INFERRED[question] = found
    return found


def planned_instruction(opcode: str, operand_shapes: Sequence[AnyShape],
                        attrs: Mapping[str, Any] | None = None,
                        shape: AnyShape | None = None) -> tuple[Mapping[str, Any], AnyShape]:
    """What ``add`` makes of an instruction: its frozen attributes and its inferred shape
    (an invalid instruction raises here), for a caller that adds it again and again
    (``add_planned``: a traced Python loop reads ``a[i, j]`` thousands of times)."""
    frozen, _ = _frozen_and_key(attrs)
    return frozen, _shared_shape(infer_shape(opcode, list(operand_shapes), frozen, shape))


def _shared_shape(shape):
    if type(shape) is not Shape:
        return shape
    found = _SHAPES.get(shape)
    if found is None:
        if len(_SHAPES) >= _SHAPES_KEPT:
            _SHAPES.clear()
        found = _SHAPES[shape] = shape
    return found


class ComputationBuilder:
    def __init__(self, name: str, uniquer: NameUniquer):
        self.name = name
        self.uniquer = uniquer
        self._instructions: list[Instruction] = []
        self._parameters: dict[int, Instruction] = {}

    def add(
        self,
        opcode: str,
        operands: Sequence[Instruction] = (),
        attrs: Mapping[str, Any] | None = None,
        shape: AnyShape | None = None,
        metadata: Metadata | None = None,
        name: str | None = None,
    ) -> Instruction:
        attrs, key = _frozen_and_key(attrs)
        result = _inferred_shape(opcode, operands, attrs, key, shape)
        inst = Instruction(
            name=self.uniquer.reserve(name) if name else self.uniquer.fresh(opcode),
            opcode=opcode, shape=result, operands=tuple(operands), attrs=attrs, metadata=metadata)
        mark_shape_inferred(inst)  # (frozen: set once, here)
        self._instructions.append(inst)
        return inst

    def add_planned(self, opcode: str, operands: tuple[Instruction, ...],
                    planned: tuple[Mapping[str, Any], AnyShape],
                    metadata: Metadata | None = None) -> Instruction:
        """``add`` of an instruction whose attributes and shape ``planned_instruction`` gave
        for these operands' shapes."""
        attrs, shape = planned
        inst = Instruction(self.uniquer.fresh(opcode), opcode, shape, operands, attrs, metadata)
        mark_shape_inferred(inst)
        self._instructions.append(inst)
        return inst

    def parameter(self, number: int, shape: AnyShape, name: str | None = None,
                  metadata: Metadata | None = None, exact_name: bool = False,
                  attrs: Mapping[str, Any] | None = None) -> Instruction:
        if number in self._parameters:
            raise ValueError(f"parameter({number}) defined twice in %{self.name}")
        if exact_name:
            inst = self.add("parameter", (), {**(attrs or {}), "parameter_number": number}, shape,
                            metadata, name)
        else:
            inst = Instruction(self.uniquer.fresh(name or f"Arg_{number}"), "parameter", shape, (),
                               frozen_attributes({"parameter_number": number}), metadata)
            self._instructions.append(inst)
        self._parameters[number] = inst
        return inst

    def adopt(self, inst: Instruction) -> Instruction:
        """Append an existing (immutable) instruction as is; parameters keep their number."""
        self._instructions.append(inst)
        if inst.opcode == "parameter":
            self._parameters[inst.attrs["parameter_number"]] = inst
        return inst

    def constant(self, literal, metadata: Metadata | None = None) -> Instruction:
        import numpy as np

        lit = np.array(literal)
        lit.flags.writeable = False
        # (a literal's shape is its dtype and dimensions: asked once per kind, as passes that
        # pad or roll make a few constants for each of thousands of instructions)
        kind = (lit.dtype, lit.shape)
        shape = _CONSTANT_SHAPES.get(kind)
        if shape is None:
            if len(_CONSTANT_SHAPES) >= _SHAPES_KEPT:
                _CONSTANT_SHAPES.clear()
            shape = _CONSTANT_SHAPES[kind] = _shared_shape(
                infer_shape("constant", (), {"literal": lit}))
        inst = Instruction(self.uniquer.fresh("constant"), "constant", shape, (),
                           MappingProxyType({"literal": lit}), metadata)
        mark_shape_inferred(inst)
        self._instructions.append(inst)
        return inst

    def build(self, root: Instruction, keep_dead: bool = False) -> Computation:
        """The computation ending in ``root``; instructions it does not need are dropped unless
        ``keep_dead`` (the parser keeps what the text says; DCE removes it)."""
        numbers = sorted(self._parameters)
        if numbers != list(range(len(numbers))):
            raise ValueError(
                f"%{self.name}: parameter numbers {numbers} are not 0..{len(numbers) - 1}"
            )
        params = tuple(self._parameters[n] for n in numbers)
        if keep_dead:
            return Computation(self.name, params, tuple(self._instructions), root)
        # one backward sweep, not a walk from the root: the builder's instructions come
        # operands first (a computation must, and the verifier checks it), so an instruction is
        # live when the root is it or a live instruction after it reads it
        live = {id(root)}
        live.update(id(p) for p in params)
        for inst in reversed(self._instructions):
            if id(inst) in live:
                live.update(map(id, inst.operands))
        kept = tuple(i for i in self._instructions if id(i) in live)
        return Computation(self.name, params, kept, root)


class PlannedAdds:
    """``builder.add`` and ``builder.constant`` for a pass that adds the same few kinds of
    instruction thousands of times (padding a loop nest's dots and writes): what ``add`` makes
    of an instruction (its frozen attributes, its shape, checked) is remembered per opcode,
    attributes, declared shape and operand shapes, so each kind is checked once. Remembered
    for as long as the pass holds this object."""

    def __init__(self, builder: ComputationBuilder):
        self.builder = builder
        self.constant = builder.constant
        self._plans: dict[tuple, tuple[Mapping[str, Any], AnyShape]] = {}

    def add(self, opcode: str, operands: Sequence[Instruction] = (),
            attrs: Mapping[str, Any] | None = None, shape: AnyShape | None = None,
            metadata: Metadata | None = None) -> Instruction:
        operands = tuple(operands)
        key = (opcode, tuple(attrs.items()) if attrs else (), shape,
               *[o.shape for o in operands])
        try:
            planned = self._plans.get(key)
        except TypeError:  # (an attribute that does not hash: an array literal)
            return self.builder.add(opcode, operands, attrs, shape, metadata)
        if planned is None:
            planned = self._plans[key] = planned_instruction(
                opcode, [o.shape for o in operands], attrs, shape)
        return self.builder.add_planned(opcode, operands, planned, metadata)


def binary_region(b: ComputationBuilder, opcode: str, dtype: ElementType) -> Computation:
    """``b`` built into the ``(T, T) -> T`` computation applying ``opcode``: the region of a
    reduce, an all-reduce or a scatter ("assign", a scatter's overwrite, returns its second
    argument)."""
    scalar = Shape(dtype, ())
    lhs = b.parameter(0, scalar, "Arg_0")
    rhs = b.parameter(1, scalar, "Arg_1")
    return b.build(rhs if opcode == "assign" else b.add(opcode, (lhs, rhs)))


class ModuleBuilder:
    def __init__(self, name: str):
        self.name = sanitize_name(name)
        self.uniquer = NameUniquer()
        self._computations: list[Computation] = []
        self._reducers: dict[tuple[str, ElementType], Computation] = {}

    def computation(self, base: str) -> ComputationBuilder:
        return ComputationBuilder(self.uniquer.fresh(base), self.uniquer)

    def add_computation(self, comp: Computation) -> Computation:
        self._computations.append(comp)
        return comp

    def scalar_reducer(self, opcode: str, dtype: ElementType) -> Computation:
        """A ``(T, T) -> T`` computation applying ``opcode``; one per (op, type) per module."""
        key = (opcode, dtype)
        if key not in self._reducers:
            self._reducers[key] = self.add_computation(
                binary_region(self.computation("region"), opcode, dtype))
        return self._reducers[key]

    def shared_computation(self, key, base: str, build) -> Computation:
        """The computation ``build(builder)`` makes, built once per ``key`` per module (a sort's
        comparator: see ir.sorting.numpy_order_comparator)."""
        if key not in self._reducers:
            self._reducers[key] = self.add_computation(build(self.computation(base)))
        return self._reducers[key]

    def build(self, entry: Computation, attributes=()) -> Module:
        comps = tuple(c for c in self._computations if c is not entry) + (entry,)
        return Module(self.name, comps, entry, tuple(attributes))
