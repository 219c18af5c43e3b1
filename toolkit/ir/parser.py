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
from .nodes import CALLEE_ATTRIBUTES, Computation, Module
from .shape_inference import ShapeError
from .shapes import Shape

__all__ = ["HloParseError", "parse_module"]

def _literal(text: str, shape: Shape, parser: HloReader, pos: int) -> np.ndarray:
    tokens = (
        text.replace("{", " ")
        .replace("}", " ")
        .replace(",", " ")
        .replace("(", " ")
        .replace(")", " ")
        .split()
    )
    if tokens == ["..."]:
        raise parser.error(
            "constant was printed elided ('{...}'); print it with large constants", pos
        )
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
                if shape.dtype.is_float or shape.dtype.is_complex:
                    low = tok.lower()
                    values.append(math.copysign(math.nan, -1.0) if low == "-nan"
                                  else float(low.replace("inf", "inf")))
                else:
                    values.append(
                        int(tok, 0) if tok.lower().startswith(("0x", "-0x")) else int(tok)
                    )
            except ValueError:
                raise parser.error(f"bad {shape.dtype.name} literal '{tok}'", pos) from None
        if shape.dtype.is_integer:
            info = np.iinfo(shape.dtype.numpy)
            bad = next((v for v in values if not info.min <= v <= info.max), None)
            if bad is not None:
                raise parser.error(f"{shape.dtype.name} literal {bad} is out of range "
                                   f"[{info.min}, {info.max}]", pos)
    if shape.dtype.is_complex:  # (real, imag) pairs
        if len(values) % 2:
            raise parser.error(f"{shape.dtype.name} literal needs (real, imag) pairs", pos)
        values = [complex(r, i) for r, i in zip(values[::2], values[1::2])]
    if len(values) != shape.size and not (shape.rank == 0 and len(values) == 1):
        raise parser.error(f"constant has {len(values)} values but {shape.to_text(False)} needs "
                           f"{shape.size}", pos)
    with np.errstate(over="ignore"):
        array = np.array(values, dtype=np.float64 if shape.dtype.is_float else
                         np.complex128 if shape.dtype.is_complex else object)
        array = array.astype(shape.dtype.numpy).reshape(shape.dims)
    array.flags.writeable = False
    return array


def _topological(comps: list[RawComputation], parser: HloReader) -> list[RawComputation]:
    """Computations callees first (an iterative depth-first walk: no recursion limit)."""
    by_name = {c.name: c for c in comps}
    order: list[RawComputation] = []
    state: dict[str, int] = {}  # 1: on the walk's path, 2: done

    def callees(c: RawComputation) -> list[RawComputation]:
        out = []
        for inst in c.instructions:
            named = [inst.attrs.get(k) for k in CALLEE_ATTRIBUTES]
            for callee in [n for v in named for n in (v if isinstance(v, tuple) else (v,))]:
                if callee is None:
                    continue
                if callee not in by_name:
                    raise parser.error(f"unknown computation %{callee}", inst.pos)
                out.append(by_name[callee])
        return out

    for start in comps:
        if state.get(start.name) == 2:
            continue
        state[start.name] = 1
        stack = [(start, iter(callees(start)))]
        while stack:
            comp, pending = stack[-1]
            for callee in pending:
                if state.get(callee.name) == 1:
                    raise parser.error(f"computation %{callee.name} calls itself", callee.pos)
                if state.get(callee.name) != 2:
                    state[callee.name] = 1
                    stack.append((callee, iter(callees(callee))))
                    break
            else:
                stack.pop()
                state[comp.name] = 2
                order.append(comp)
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

    def make(inst: RawInstruction):
        operands = [made[op] for op in inst.operands]
        attrs = dict(inst.attrs)
        for key in CALLEE_ATTRIBUTES:
            if key in attrs:
                v = attrs[key]
                attrs[key] = tuple(built[n] for n in v) if isinstance(v, tuple) else built[v]
        if inst.raw_attrs:
            attrs["_raw"] = tuple(inst.raw_attrs)
        try:
            if inst.opcode == "parameter":
                return b.parameter(
                    inst.payload, inst.shape, inst.name, inst.metadata, exact_name=True, attrs=attrs
                )
            if inst.opcode == "constant":
                if not isinstance(inst.shape, Shape):
                    raise parser.error("tuple constants are not supported", inst.pos)
                pos, text = inst.payload
                attrs["literal"] = _literal(text, inst.shape, parser, pos)
            return b.add(inst.opcode, operands, attrs, inst.shape, inst.metadata, inst.name)
        except (ShapeError, ValueError) as e:
            if isinstance(e, HloParseError):
                raise
            raise parser.error(f"in %{inst.name}: {e}", inst.pos) from None

    # Operands may be written after their users (XLA's parser allows it): build in a post-order
    # found by an explicit stack, so a long chain written users-first cannot hit a recursion limit.
    on_path: set[str] = set()
    for first in raw.instructions:
        if first.name in made:
            continue
        stack = [(first, iter(first.operands))]
        on_path.add(first.name)
        while stack:
            inst, pending = stack[-1]
            for op in pending:
                if op not in by_name:
                    raise parser.error(f"%{inst.name} uses undefined operand %{op}", inst.pos)
                if op in on_path:
                    raise parser.error(f"%{op} depends on itself", by_name[op].pos)
                if op not in made:
                    on_path.add(op)
                    stack.append((by_name[op], iter(by_name[op].operands)))
                    break
            else:
                stack.pop()
                on_path.discard(inst.name)
                made[inst.name] = make(inst)
    root = made[roots[0].name] if roots else made[raw.instructions[-1].name]
    try:
        return b.build(root, keep_dead=True)
    # parameter numbers with a gap: the text's mistake, said at its computation
    except ValueError as e:
        raise parser.error(str(e), raw.pos) from None


def parse_module(text: str | bytes) -> Module:
    """Parse HLO text (str, or UTF-8 bytes) into a Module. Every malformed input raises
    HloParseError with line and column."""
    if isinstance(text, (bytes, bytearray, memoryview)):
        raw = bytes(text)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            good = raw[:e.start].decode("utf-8")
            raise HloParseError("HLO text is not valid UTF-8", good + "?", len(good)) from None
    if not isinstance(text, str):
        raise TypeError(f"parse expects HLO text (str or bytes), got {type(text).__name__}")
    parser = HloReader(text)
    name, attrs, raw_comps = parser.module()
    if not raw_comps:
        raise parser.error("module has no computations")
    seen: set[str] = set()
    for comp in raw_comps:
        if comp.name in seen:
            raise parser.error(f"computation %{comp.name} is defined twice", comp.pos)
        seen.add(comp.name)
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
