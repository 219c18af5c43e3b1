"""Parser for HLO text as toolkit, XLA and JAX print it.

Accepts long-form computations (``%f (p: f32[]) -> f32[] {``) and short-form ones
(``region_0.1 {``), ``%``-prefixed or bare names, operand shapes before operand names,
``/*index=N*/`` comments, and the ``FileNames``/``StackFrames`` tables newer XLA prints.
Attributes toolkit does not model are kept verbatim and printed back. ``hlo_syntax`` reads the
text; this module turns what it read into verified IR (literals, computation order, nodes)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .builder import ComputationBuilder, NameUniquer
from .hlo_syntax import HloParseError, HloReader, RawComputation, RawInstruction
from .nodes import Computation, Module
from .shape_inference import ShapeError
from .shapes import Shape

__all__ = ["HloParseError", "parse_module"]

def _literal(text: str, shape: Shape, parser: HloReader, pos: int) -> np.ndarray:
    tokens = text.replace("{", " ").replace("}", " ").replace(",", " ").split()
    if tokens == ["..."]:
        raise parser.error("constant was printed elided ('{...}'); print it with large constants", pos)
    if shape.dtype.is_bool:
        table = {"true": True, "false": False, "1": True, "0": False}
        values = []
        for tok in tokens:
            if tok not in table:
                raise parser.error(f"bad pred literal '{tok}'", pos)
            values.append(table[tok])
    else:
        values = []
        for tok in tokens:
            try:
                if shape.dtype.is_float:
                    low = tok.lower()
                    values.append(math.copysign(math.nan, -1.0) if low == "-nan"
                                  else float(low.replace("inf", "inf")))
                else:
                    values.append(int(tok, 0) if tok.lower().startswith(("0x", "-0x")) else int(tok))
            except ValueError:
                raise parser.error(f"bad {shape.dtype.name} literal '{tok}'", pos) from None
    if len(values) != shape.size and not (shape.rank == 0 and len(values) == 1):
        raise parser.error(f"constant has {len(values)} values but {shape.to_text(False)} needs "
                           f"{shape.size}", pos)
    with np.errstate(over="ignore"):
        array = np.array(values, dtype=np.float64 if shape.dtype.is_float else object)
        array = array.astype(shape.dtype.numpy).reshape(shape.dims)
    array.flags.writeable = False
    return array


def _topological(comps: list[RawComputation], parser: HloReader) -> list[RawComputation]:
    by_name = {c.name: c for c in comps}
    order: list[RawComputation] = []
    state: dict[str, int] = {}

    def visit(c: RawComputation) -> None:
        if state.get(c.name) == 2:
            return
        if state.get(c.name) == 1:
            raise parser.error(f"computation %{c.name} calls itself", c.pos)
        state[c.name] = 1
        for inst in c.instructions:
            for callee in (inst.attrs.get(k) for k in ("to_apply", "calls")):
                if callee is None:
                    continue
                if callee not in by_name:
                    raise parser.error(f"unknown computation %{callee}", inst.pos)
                visit(by_name[callee])
        state[c.name] = 2
        order.append(c)

    for c in comps:
        visit(c)
    return order


def _build(raw: RawComputation, built: dict[str, Computation], parser: HloReader) -> Computation:
    # Names need only be unique within a computation, as in XLA's parser.
    b = ComputationBuilder(raw.name, NameUniquer())
    by_name = {}
    for inst in raw.instructions:
        if inst.name in by_name:
            raise parser.error(f"instruction %{inst.name} is defined twice", inst.pos)
        by_name[inst.name] = inst
    made: dict[str, Any] = {}
    roots = [i for i in raw.instructions if i.is_root]
    if len(roots) > 1:
        raise parser.error("one computation should have only one ROOT", roots[1].pos)
    if not raw.instructions:
        raise parser.error(f"computation %{raw.name} is empty", raw.pos)

    def make(inst: RawInstruction, chain: tuple[str, ...] = ()):
        if inst.name in made:
            return made[inst.name]
        if inst.name in chain:
            raise parser.error(f"%{inst.name} depends on itself", inst.pos)
        operands = []
        for op in inst.operands:
            if op not in by_name:
                raise parser.error(f"%{inst.name} uses undefined operand %{op}", inst.pos)
            operands.append(make(by_name[op], chain + (inst.name,)))
        attrs = dict(inst.attrs)
        for key in ("to_apply", "calls"):
            if key in attrs:
                attrs[key] = built[attrs[key]]
        if inst.raw_attrs:
            attrs["_raw"] = tuple(inst.raw_attrs)
        try:
            if inst.opcode == "parameter":
                node = b.parameter(inst.payload, inst.shape, inst.name, inst.metadata, exact_name=True)
            else:
                if inst.opcode == "constant":
                    if not isinstance(inst.shape, Shape):
                        raise parser.error("tuple constants are not supported", inst.pos)
                    pos, text = inst.payload
                    attrs["literal"] = _literal(text, inst.shape, parser, pos)
                node = b.add(inst.opcode, operands, attrs, inst.shape, inst.metadata, inst.name)
        except (ShapeError, ValueError) as e:
            if isinstance(e, HloParseError):
                raise
            raise parser.error(f"in %{inst.name}: {e}", inst.pos) from None
        made[inst.name] = node
        return node

    for inst in raw.instructions:
        make(inst)
    root = made[roots[0].name] if roots else made[raw.instructions[-1].name]
    return b.build(root, keep_dead=True)


def parse_module(text: str) -> Module:
    """Parse HLO text into a verified Module. Errors carry line and column."""
    parser = HloReader(text)
    name, attrs, raw_comps = parser.module()
    if not raw_comps:
        raise parser.error("module has no computations")
    entries = [c for c in raw_comps if c.is_entry]
    if len(entries) > 1:
        raise parser.error("expects only one ENTRY", entries[1].pos)
    entry_raw = entries[0] if entries else raw_comps[-1]
    built: dict[str, Computation] = {}
    for raw in _topological(raw_comps, parser):
        if raw.name in built:
            raise parser.error(f"computation %{raw.name} is defined twice", raw.pos)
        built[raw.name] = _build(raw, built, parser)
    order = [built[c.name] for c in _topological(raw_comps, parser) if c is not entry_raw]
    entry = built[entry_raw.name]
    kept = tuple((k, v) for k, v in attrs if k != "entry_computation_layout")
    return Module(name, tuple(order) + (entry,), entry, kept)
