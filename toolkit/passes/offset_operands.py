"""Offsets as operands: fusions alike up to where they slice compile once.

A Python loop over rows or columns unrolls at trace time into thousands of fusions that differ
only in their slice offsets (``x[:, j]``) and in the constant start indices of their
dynamic-update-slices (``y[:, j] = ...``). The backends share the code of kernels identical up
to names; this pass makes such fusions identical, as XLA passes dynamic offsets as operands:
within a group of fusions alike up to those offsets, an offset that varies becomes a new s64[]
parameter of the fused computation, and its value a constant operand of the fusion.

- A stride-1 ``slice`` whose start varies becomes a ``dynamic-slice`` of the same sizes. A
  static slice is always in bounds, and a dynamic-slice only clamps a start that would run past
  its operand, so both read the same elements.
- A scalar integer constant used only as a start index of a dynamic-slice or
  dynamic-update-slice becomes a parameter of the same type: the op clamps it the same way.

Fusions alike up to offsets *and extents* form a group too (a triangular loop's ``L[i, :i]``:
another row and another length each trip). Their computations still differ in shape, but the
backends emit code in which a window's outermost extent and a constant start's clamp do not
appear, and compile code that repeats once (backends/llvm/shared_code).

Offsets whose values agree in every member share one parameter (``y[:, j - 1]`` read and
``y[:, j]`` written by the same trip stay two; two reads of column ``j`` become one). Each
rewritten fusion leaves a FusionDecision (``OFFSETS_AS_OPERANDS``) naming the group's first
member and how many kernels share its code. Linear in the program's size."""
from __future__ import annotations

import dataclasses
from collections import Counter
from types import MappingProxyType

import numpy as np

from ..ir.dtypes import from_name
from ..ir.builder import ComputationBuilder, NameUniquer
from ..ir.nodes import Computation, Instruction, Module, mark_shape_inferred
from ..ir.shapes import Shape
from ..ir.structural import exact_key
from ..profiler.events import FusionDecision
from .rewriter import replace_entry, rewrite_computation, with_operands

REASONS = {
    "OFFSETS_AS_OPERANDS": "takes its offsets as operands",
}
# A group of two already saves a compile (tens of milliseconds of LLVM work) for a few scalar
# loads per kernel call, so any group that would share code is rewritten.
MIN_GROUP = 2
OFFSET_DTYPE = "s64"


def _is_offset_constant(inst: Instruction, uses: dict[int, list[tuple[Instruction, int]]]) -> bool:
    """A scalar integer constant read only as start indices of (dynamic-)slices and updates."""
    if inst.opcode != "constant" or not isinstance(inst.shape, Shape) or inst.shape.rank != 0:
        return False
    if not np.issubdtype(inst.attrs["literal"].dtype, np.integer):
        return False
    readers = uses.get(id(inst), [])
    return bool(readers) and all(
        (user.opcode == "dynamic-slice" and k >= 1)
        or (user.opcode == "dynamic-update-slice" and k >= 2)
        for user, k in readers
    )


def _is_offset_slice(inst: Instruction) -> bool:
    return inst.opcode == "slice" and all(stride == 1 for _, _, stride in inst.attrs["slice"])


class _Shape:
    """One fused computation seen up to its offsets: its keys and its offsets, in order.
    ``key`` also leaves out extents (the trips of a triangular loop read windows of another
    length each); ``exact`` keeps them."""

    def __init__(self, comp: Computation, callee_keys: dict[int, tuple]):
        uses: dict[int, list[tuple[Instruction, int]]] = {}
        for inst in comp.instructions:
            for k, o in enumerate(inst.operands):
                uses.setdefault(id(o), []).append((inst, k))
        position = {id(inst): k for k, inst in enumerate(comp.instructions)}
        rows = []
        shapes = []
        self.slots: list[tuple[int, int]] = []  # (instruction position, dimension or -1)
        self.values: list[int] = []
        self.types: list[str] = []
        for k, inst in enumerate(comp.instructions):
            operands = tuple(position[id(o)] for o in inst.operands)
            shapes.append(inst.shape)
            if _is_offset_constant(inst, uses):
                rows.append(("offset", _extentless(inst.shape), operands))
                self.slots.append((k, -1))
                self.values.append(int(inst.attrs["literal"].reshape(())[()]))
                self.types.append(inst.shape.dtype.name)
            elif _is_offset_slice(inst):
                rows.append(("slice-at", _extentless(inst.shape), operands))
                for d, (start, _, _) in enumerate(inst.attrs["slice"]):
                    self.slots.append((k, d))
                    self.values.append(int(start))
                    self.types.append(OFFSET_DTYPE)
            else:
                rows.append((inst.opcode, _extentless(inst.shape), operands,
                             _attrs(inst, callee_keys)))
        self.key = (position[id(comp.root)], tuple(rows))
        self.exact = (self.key, tuple(shapes))


def _extentless(shape) -> tuple:
    """A shape without its extents: element type, rank and layout."""
    if isinstance(shape, Shape):
        return (shape.dtype.name, len(shape.dims), shape.layout)
    return tuple(_extentless(s) for s in shape.elements)


def _attrs(inst: Instruction, callee_keys: dict[int, tuple]) -> tuple:
    out = []
    for name, value in inst.attrs.items():
        if isinstance(value, Computation):
            value = ("computation", _callee_key(value, callee_keys))
        elif isinstance(value, tuple) and any(isinstance(v, Computation) for v in value):
            value = tuple(("computation", _callee_key(v, callee_keys)) for v in value)
        elif isinstance(value, np.ndarray):
            value = ("array", value.dtype.str, value.shape, value.tobytes())
        elif isinstance(value, list):
            value = tuple(map(repr, value))
        else:
            try:
                hash(value)
            except TypeError:
                value = repr(value)
        out.append((name, value))
    return tuple(out)


def _callee_key(comp: Computation, callee_keys: dict[int, tuple]) -> tuple:
    key = callee_keys.get(id(comp))
    if key is None:
        key = callee_keys[id(comp)] = exact_key(comp)
    return key


def offset_operands(module: Module, max_parameters: int = 96
                    ) -> tuple[Module, Counter, list[FusionDecision]]:
    """Rewrite the entry's fusions that are alike up to offsets (see the module docstring).
    ``max_parameters``: a rewritten kernel's operands and outputs stay within this (the GPU's
    parameter space; fusion's own budget)."""
    entry = module.entry
    callee_keys: dict[int, tuple] = {}
    shapes: dict[int, _Shape] = {}
    groups: dict[tuple, list[Instruction]] = {}
    for inst in entry.instructions:
        if inst.opcode != "fusion":
            continue
        seen = shapes[id(inst)] = _Shape(inst.attrs["calls"], callee_keys)
        groups.setdefault(seen.key, []).append(inst)
    # fusion -> (its group, each offset's parameter or None, the parameters, exact group)
    plans: dict[int, tuple[list[Instruction], list[int | None], list, bool]] = {}
    for members in groups.values():
        if len(members) < MIN_GROUP:
            continue
        first = shapes[id(members[0])]
        columns = list(zip(*(shapes[id(m)].values for m in members)))
        # each varying offset's parameter: offsets equal in every member share one
        parameter_of: list[int | None] = []
        parameters: dict[tuple[str, tuple], int] = {}
        for slot, column in enumerate(columns):
            if len(set(column)) == 1:
                parameter_of.append(None)
                continue
            parameter_of.append(parameters.setdefault((first.types[slot], column),
                                                      len(parameters)))
        if not parameters:
            continue  # identical up to names already: shared as they are
        comp = members[0].attrs["calls"]
        outputs = len(comp.root.operands) if comp.root.opcode == "tuple" else 1
        if len(comp.parameters) + len(parameters) + outputs > max_parameters:
            continue
        # (exact: alike in their extents too; the same code by construction)
        exact = len({shapes[id(m)].exact for m in members}) == 1
        for m in members:
            plans[id(m)] = (members, parameter_of, list(parameters), exact)

    if not plans:
        return module, Counter(), []
    counts: Counter = Counter()
    decisions: list[FusionDecision] = []
    new_comps: list[Computation] = []
    constants: dict[tuple[str, int], Instruction] = {}

    def constant(builder: ComputationBuilder, dtype: str, value: int) -> Instruction:
        """One s64[] (or the start index's type) constant per value, shared by the fusions."""
        made = constants.get((dtype, value))
        if made is None:
            literal = np.array(value, from_name(dtype).numpy)
            made = constants[(dtype, value)] = builder.constant(literal)
        return made

    def visit(inst: Instruction, operands: list[Instruction], builder: ComputationBuilder):
        plan = plans.get(id(inst))
        if plan is None:
            return None
        members, parameter_of, parameters, exact = plan
        seen = shapes[id(inst)]
        values: list[int] = [0] * len(parameters)
        for slot, p in enumerate(parameter_of):
            if p is not None:
                values[p] = seen.values[slot]
        dtypes = [dtype for dtype, _ in parameters]
        fused = _with_offset_parameters(inst.attrs["calls"], seen, parameter_of, dtypes)
        new_comps.append(fused)
        extra = [constant(builder, dtype, value) for dtype, value in zip(dtypes, values)]
        counts["fusions taking offsets as operands"] += 1
        counts["offset operands"] += len(extra)
        if exact:
            alike = f"shares code with {len(members) - 1} alike kernels"
        else:  # (the backend compiles their code once where it is the same: llvm/shared_code)
            alike = (f"alike up to offsets and extents with {len(members) - 1} kernels, which "
                     "share its code where the extents do not enter it")
        decisions.append(FusionDecision(
            producer=members[0].name, consumer=inst.name, fused=False,
            reason="OFFSETS_AS_OPERANDS",
            message=f"{REASONS['OFFSETS_AS_OPERANDS']}: {alike} (its offsets {values} are "
                    f"constant operands; the first of them is %{members[0].name})",
            producer_location=_loc(members[0]), consumer_location=_loc(inst),
            fusion=inst.name))
        return builder.adopt(dataclasses.replace(
            inst, operands=tuple(operands + extra),
            attrs=MappingProxyType({**inst.attrs, "calls": fused})))

    new_entry, _ = rewrite_computation(entry, visit)
    return replace_entry(module, new_entry, tuple(new_comps)), counts, decisions


def _with_offset_parameters(comp: Computation, seen: _Shape, parameter_of: list[int | None],
                            dtypes: list[str]) -> Computation:
    """``comp`` with its varying offsets read from new parameters (numbered after its own):
    slices at varying starts become dynamic-slices, varying start constants parameters.

    Built directly, not through a ComputationBuilder: this runs once per member of every group
    (thousands in an unrolled loop), every instruction is kept (the rewrite leaves nothing
    dead), and the shapes of the few new instructions are known (a parameter's is its offset
    type; a dynamic-slice's is the slice's), so nothing is inferred or walked again. The pass
    manager verifies the result."""
    names = NameUniquer.from_names(i.name for i in comp.instructions)
    instructions: list[Instruction] = []
    first_number = len(comp.parameters)
    made: dict[int, Instruction] = {}

    def parameter(p: int) -> Instruction:
        if p not in made:
            name = names.reserve(names.first_free(f"offset_{p}"))
            made[p] = _known(Instruction(
                name, "parameter", _scalar(dtypes[p]), (),
                MappingProxyType({"parameter_number": first_number + p})))
            instructions.append(made[p])
        return made[p]

    fixed_starts: dict[int, Instruction] = {}

    def fixed(start: int) -> Instruction:
        """A start that every member shares, as an s64[] constant of the fused computation."""
        if start not in fixed_starts:
            literal = np.array(start, np.int64)
            literal.flags.writeable = False
            fixed_starts[start] = Instruction(
                names.fresh("constant"), "constant", _scalar(OFFSET_DTYPE), (),
                MappingProxyType({"literal": literal}))
            instructions.append(fixed_starts[start])
        return fixed_starts[start]

    slots_of: dict[int, list[tuple[int, int | None]]] = {}
    for (k, d), p in zip(seen.slots, parameter_of):
        slots_of.setdefault(k, []).append((d, p))
    mapping: dict[int, Instruction] = {}
    for k, inst in enumerate(comp.instructions):
        operands = [mapping[id(o)] for o in inst.operands]
        slots = slots_of.get(k, ())
        varying = [p for _, p in slots if p is not None]
        if not varying:
            new = with_operands(inst, operands)
            instructions.append(new)
        elif inst.opcode == "constant":
            new = parameter(varying[0])
        else:  # a slice at a start that varies: the same window read by a dynamic-slice
            starts = [parameter(p) if p is not None else fixed(start)
                      for (_, p), (start, _, _) in zip(slots, inst.attrs["slice"])]
            new = Instruction(
                names.fresh("dynamic-slice"), "dynamic-slice", inst.shape,
                (operands[0], *starts), MappingProxyType({"dynamic_slice_sizes": inst.shape.dims}),
                inst.metadata)
            instructions.append(new)
        mapping[id(inst)] = new
    for p in range(len(dtypes)):
        parameter(p)  # every offset is an operand, even where the rewrite left none to read
    parameters = tuple(mapping[id(p)] for p in comp.parameters) + tuple(
        made[p] for p in range(len(dtypes)))
    return Computation(comp.name, parameters, tuple(instructions), mapping[id(comp.root)])


_SCALARS: dict[str, Shape] = {}


def _scalar(dtype: str) -> Shape:
    shape = _SCALARS.get(dtype)
    if shape is None:
        shape = _SCALARS[dtype] = Shape(from_name(dtype), ())
    return shape


def _known(inst: Instruction) -> Instruction:
    """A parameter whose shape is its offset type by construction: the verifier need not ask."""
    mark_shape_inferred(inst)
    return inst


def _loc(inst: Instruction) -> str:
    return inst.metadata.location if inst.metadata is not None else ""
