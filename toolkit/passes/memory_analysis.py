"""Buffer liveness over the schedule (the entry computation's instruction order), giving the
figures JAX's ``Compiled.memory_analysis()`` reports: argument, output, temporary and peak
bytes. Tuples, get-tuple-element, bitcasts and row-major reshapes alias their operand."""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.nodes import Module
from ..ir.ops import GroupOp
from ..ir.shapes import Shape, TupleShape


@dataclass(frozen=True)
class MemoryAnalysis:
    argument_size_in_bytes: int
    output_size_in_bytes: int
    temp_size_in_bytes: int  # the most temporary bytes live at once
    peak_memory_in_bytes: int  # arguments + the most temporaries and outputs live at once
    alias_size_in_bytes: int = 0
    constant_size_in_bytes: int = 0


def _nbytes(shape) -> int:
    return sum(s.nbytes for s in shape.leaves()) if isinstance(shape, TupleShape) else shape.nbytes


def memory_analysis(module: Module) -> MemoryAnalysis:
    entry = module.entry
    order = {id(i): n for n, i in enumerate(entry.instructions)}
    owner: dict[int, int] = {}  # instruction -> the instruction whose buffer it uses
    for inst in entry.instructions:
        if inst.opcode in GroupOp.ALIASING and inst.operands and inst.opcode != "tuple":
            owner[id(inst)] = owner.get(id(inst.operands[0]), id(inst.operands[0]))
        else:
            owner[id(inst)] = id(inst)
    root_buffers = set()

    def mark_outputs(inst):
        if inst.opcode == "tuple":
            for o in inst.operands:
                mark_outputs(o)
        else:
            root_buffers.add(owner[id(inst)])

    mark_outputs(entry.root)
    last_use: dict[int, int] = {}
    for inst in entry.instructions:
        for o in inst.operands:
            last_use[owner[id(o)]] = order[id(inst)]
    size = {id(i): _nbytes(i.shape) for i in entry.instructions}
    kinds = {id(i): i.opcode for i in entry.instructions}
    arguments = sum(size[id(p)] for p in entry.parameters)
    constants = sum(size[id(i)] for i in entry.instructions if i.opcode == "constant")
    outputs = sum(size[b] for b in root_buffers if kinds[b] != "parameter")
    live_temp = live_out = peak_temp = peak_live = 0
    frees: dict[int, list[int]] = {}
    for buf, at in last_use.items():
        frees.setdefault(at, []).append(buf)
    for inst in entry.instructions:
        n = order[id(inst)]
        buf = id(inst)
        # a buffer of its own that is no temporary: an argument, a constant, a tuple's index table
        if owner[buf] == buf and kinds[buf] not in GroupOp.BOOKKEEPING:
            if buf in root_buffers:
                live_out += size[buf]
            else:
                live_temp += size[buf]
        peak_temp = max(peak_temp, live_temp)
        peak_live = max(peak_live, live_temp + live_out)
        for freed in frees.get(n, []):
            if freed not in root_buffers and kinds[freed] not in GroupOp.BOOKKEEPING:
                live_temp -= size[freed]
    return MemoryAnalysis(arguments, outputs, peak_temp, arguments + peak_live,
                          constant_size_in_bytes=constants)


__all__ = ["MemoryAnalysis", "memory_analysis", "Shape"]
