"""Immutable IR nodes: Instruction, Computation, Module.

Instructions reference their operands directly, so a computation is a DAG of frozen
objects; passes build new nodes instead of editing old ones. Equality is identity (two
``add`` instructions with the same operands are still two instructions)."""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Iterator, Mapping

from .shapes import AnyShape
from .source_names import display_location

_EMPTY: Mapping[str, Any] = MappingProxyType({})
TEXT_PRINTERS: dict[str, Any] = {}  # "module" -> ir.printer.module_to_text, set by that module
# attributes whose value is a called computation (branch_computations: a tuple of them)
CALLEE_ATTRIBUTES = (
    "to_apply",
    "calls",
    "condition",
    "body",
    "true_computation",
    "false_computation",
    "branch_computations",
)
_CALLEE_KEYS = frozenset(CALLEE_ATTRIBUTES)


@dataclass(frozen=True, slots=True)
class Metadata:
    """Where an instruction came from: XLA's ``metadata={op_name=... source_file=...
    source_line=...}``."""

    op_name: str = ""
    source_file: str = ""
    source_line: int = 0
    extra: tuple[tuple[str, str], ...] = ()  # other keys kept verbatim (e.g. stack_frame_id)

    @property
    def location(self) -> str:
        if not self.source_file:
            return ""
        return (
            display_location(self.source_file, self.source_line)
            if self.source_line
            else self.source_file
        )


@dataclass(frozen=True, slots=True, eq=False)
class Instruction:
    name: str
    opcode: str
    shape: AnyShape
    operands: tuple[Instruction, ...] = ()
    attrs: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    metadata: Metadata | None = None
    # set only by ComputationBuilder.add, which inferred this shape from these operands and
    # attributes (the verifier need not infer it again); never copied by dataclasses.replace
    shape_inferred: bool = field(default=False, init=False, repr=False, compare=False)
    # set by the frontend once it found no value for this instruction while tracing (it depends
    # on a parameter, or on more constants than the walk looks at): a fact of the immutable
    # instruction, so a replayed trace, which hands out the same instructions, asks once
    no_known_value: bool = field(default=False, init=False, repr=False, compare=False)

    def attr(self, key: str, default: Any = None) -> Any:
        return self.attrs.get(key, default)

    @property
    def called_computations(self) -> tuple[Computation, ...]:
        # (every pass asks this of every instruction: look at the few attributes it has, in
        # CALLEE_ATTRIBUTES' order, rather than look up all seven names)
        attrs = self.attrs
        if _CALLEE_KEYS.isdisjoint(attrs):
            return ()
        out = []
        for k in CALLEE_ATTRIBUTES:
            v = attrs.get(k)
            if v is not None:
                out.extend(v if isinstance(v, tuple) else (v,))
        return tuple(out)

    def __repr__(self) -> str:
        return f"<{self.opcode} %{self.name}: {self.shape}>"


def _fast_constructor():
    """``Instruction.__init__`` through the slots' own setters. The frozen dataclass's
    generated one calls ``object.__setattr__`` per field (1.5 us an instruction); every pass
    that rebuilds a program makes most of its instructions anew, and tracing makes each one.
    The same signature as the generated one (``dataclasses.replace`` calls it), 0.75 us."""
    setters = [Instruction.__dict__[name].__set__ for name in (
        "name", "opcode", "shape", "operands", "attrs", "metadata", "shape_inferred",
        "no_known_value")]
    set_name, set_opcode, set_shape, set_operands, set_attrs, set_metadata, set_inferred, \
        set_unknown = setters

    def __init__(self, name: str, opcode: str, shape: AnyShape, operands: tuple = (),
                 attrs: Mapping[str, Any] = _EMPTY, metadata: Metadata | None = None) -> None:
        set_name(self, name)
        set_opcode(self, opcode)
        set_shape(self, shape)
        set_operands(self, operands)
        set_attrs(self, attrs)
        set_metadata(self, metadata)
        set_inferred(self, False)
        set_unknown(self, False)

    return __init__, set_inferred


Instruction.__init__, _set_shape_inferred = _fast_constructor()


def mark_shape_inferred(inst: Instruction) -> None:
    """Record on the (frozen) instruction that its builder inferred its shape."""
    _set_shape_inferred(inst, True)


@dataclass(frozen=True, slots=True, eq=False)
class Computation:
    name: str
    parameters: tuple[Instruction, ...]  # ordered by parameter number
    instructions: tuple[Instruction, ...]  # a topological order; printing order
    root: Instruction

    @property
    def result_shape(self) -> AnyShape:
        return self.root.shape

    def __iter__(self) -> Iterator[Instruction]:
        return iter(self.instructions)

    def users(self) -> dict[Instruction, list[Instruction]]:
        out: dict[Instruction, list[Instruction]] = {i: [] for i in self.instructions}
        for inst in self.instructions:
            for op in inst.operands:
                out[op].append(inst)
        return out

    def __repr__(self) -> str:
        return f"<Computation {self.name}: {len(self.instructions)} instructions>"


@dataclass(frozen=True, slots=True, eq=False)
class Module:
    name: str
    computations: tuple[Computation, ...]  # callees before callers; the entry is last
    entry: Computation
    attributes: tuple[tuple[str, str], ...] = ()  # header attributes kept verbatim

    def computation(self, name: str) -> Computation:
        for comp in self.computations:
            if comp.name == name:
                return comp
        raise KeyError(name)

    def to_text(self, **options) -> str:
        """HLO text, written by the printer that ir.printer registers (ir/__init__ imports it):
        the printer builds on these nodes, so they cannot import it."""
        return TEXT_PRINTERS["module"](self, **options)

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        return f"<Module {self.name}: {len(self.computations)} computations>"


def post_order(roots) -> list[Instruction]:
    """Instructions reachable from ``roots``, operands before users (iterative: no recursion
    limit)."""
    seen: set[int] = set()
    order: list[Instruction] = []
    for root in roots:
        stack: list[tuple[Instruction, bool]] = [(root, False)]
        while stack:
            inst, expanded = stack.pop()
            if expanded:
                order.append(inst)
                continue
            if id(inst) in seen:
                continue
            seen.add(id(inst))
            stack.append((inst, True))
            for op in reversed(inst.operands):
                if id(op) not in seen:
                    stack.append((op, False))
    return order
