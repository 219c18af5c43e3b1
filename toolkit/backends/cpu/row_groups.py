"""Row groups: consecutive kernels over the same rows, run row block by row block.

softmax is three kernels over a [4096, 1024] array: the row maxima, exp and its row sums, the
division. Run one after the other, each streams the whole array through memory: 80 MB of
traffic for a 16 MB input. Run together on blocks of rows that fit in the L2 cache (the max
of a block, then its exp and sums, then its division, then the next block), the array is
read from memory once and written once, and the exp, which only the group reads, lives in a
block-sized scratch buffer and never reaches memory at all.

A group is legal when every value a member takes from an earlier member is read only at the
rows being computed (``llvm/row_locality.py``). A driver function emitted into the same LLVM
module loops over the blocks of its [begin, end) rows and calls the members, so one call per
thread runs the whole group; scratch buffers are passed per thread and addressed as if they
were the full array (their pointer shifted back by the block's first row)."""
from __future__ import annotations

from dataclasses import dataclass, field

from llvmlite import ir

from ...config import env_bytes

from ..llvm.elemental import i64
from ..llvm.loops import for_range
from ..llvm.row_locality import row_local_parameters
from ..llvm.types import I8, I64
from .dot_views import window_of
from .executor import slot_types
from .native import CTYPES_MAX_POINTERS

BLOCK_BYTES = 256 << 10  # a block's rows across all the group's arrays: well inside a 1 MB L2
# Below this many bytes touched the arrays stay in cache anyway and grouping only adds calls.
MIN_GROUP_BYTES = env_bytes("TOOLKIT_ROW_GROUP_MIN_BYTES", 4 << 20)


@dataclass
class RowGroup:
    members: list  # the kernel steps, in order
    rows: int
    block_rows: int
    slots: list[int]  # every buffer the members touch, in the driver's argument order
    scratch: list[int]  # slots only the group reads: a block of rows per thread, not the array
    symbol: str
    row_bytes: dict[int, int] = field(default_factory=dict)  # slot -> bytes per leading row
    grain: int = 1  # thread splits and blocks fall on multiples of this (the members' row tile)

    @property
    def names(self) -> str:
        return ", ".join(m.inst.name for m in self.members)


def _row_local_inputs(step) -> set[int] | None:
    locality = step.extra.setdefault("row_local", row_local_parameters(step.extra["spec"]))
    if locality is None:
        return None
    return {slot for i, slot in enumerate(step.inputs) if i in locality}


def find_row_groups(steps, slots, out_slots, min_bytes: int | None = None) -> list[RowGroup]:
    min_bytes = MIN_GROUP_BYTES if min_bytes is None else min_bytes
    groups: list[RowGroup] = []
    current: list = []
    touched: set[int] = set()  # the buffers current's members touch
    readers: dict[int, int] = {}  # slot -> how many steps read it (a group's scratch: only it)
    for step in steps:
        for s in set(step.inputs):
            readers[s] = readers.get(s, 0) + 1

    def close():
        if len(current) >= 2:
            group = _make_group(list(current), readers, slots, out_slots)
            # (the bytes its rows stream: a group of kernels over a few rows of a large
            # array, a triangular loop's row slices, reads little of it and gains nothing)
            if group is not None and group.rows * sum(group.row_bytes.values()) >= min_bytes:
                groups.append(group)
        current.clear()
        touched.clear()

    types = slot_types(slots)
    for step in steps:
        joinable = (
            step.kind == "kernel"
            # (a kernel that only copies a window is read in place by the dot it feeds, and
            # dropped: grouped, it would be copied after all (covariance by columns))
            and window_of(step, types) is None
            and step.extent  # (a kernel over no rows runs nothing: no group, no blocks)
            and not step.full_reduction
            and step.splittable
            and "spec" in step.extra
            and not step.extra["spec"].in_place
            and _row_local_inputs(step) is not None
        )
        if not joinable:
            close()
            continue
        if (
            current
            and step.extent == current[0].extent
            # (a driver takes every buffer its members touch, and has no packed entry: ctypes
            # must be able to call it)
            and len(touched) + len({*step.inputs, *step.outputs} - touched) <= CTYPES_MAX_POINTERS
        ):
            produced = {s for m in current for s in m.outputs}
            needed = {s for s in step.inputs if s in produced}
            if needed <= _row_local_inputs(step):
                current.append(step)
                touched.update((*step.inputs, *step.outputs))
                continue
        close()
        current.append(step)
        touched.update((*step.inputs, *step.outputs))
    close()
    return groups


def _make_group(members, readers: dict[int, int], slots, out_slots) -> RowGroup | None:
    """The group of ``members``; ``readers``: how many of the program's steps read each slot
    (a slot the members read as often is read by no step outside the group)."""
    rows = members[0].extent
    touched = list(dict.fromkeys(s for m in members for s in [*m.inputs, *m.outputs]))
    produced = {s for m in members for s in m.outputs}
    read_inside: dict[int, int] = {}
    for m in members:
        for s in set(m.inputs):
            read_inside[s] = read_inside.get(s, 0) + 1
    outside = {s for s in touched if readers.get(s, 0) > read_inside.get(s, 0)}
    row_bytes = {}
    for s in touched:
        shape = slots[s]
        if shape.rank and shape.dims[0] == rows:
            row_bytes[s] = shape.size // rows * shape.dtype.numpy.itemsize if rows else 0
    scratch = [
        s
        for s in touched
        if s in produced and s not in outside and s not in out_slots and s in row_bytes
    ]
    per_row = sum(row_bytes.values()) or 1
    block_rows = max(1, min(rows, BLOCK_BYTES // per_row))
    # blocks start on multiples of the members' row tile, so every row lands in the same tile
    # (and the same code path: a tile's spare slots repeat a row, which the loop vectoriser's
    # overlap check then runs in order) however the rows are blocked and split among threads
    grain = max(m.grain for m in members)
    block_rows = min(rows, max(grain, block_rows - block_rows % grain))
    return RowGroup(
        members,
        rows,
        block_rows,
        touched,
        scratch,
        f"rowgroup_{members[0].inst.name}",
        row_bytes,
        grain,
    )


def emit_driver(module: ir.Module, group: RowGroup) -> None:
    """``void rowgroup_<first>(i8* slot..., i64 begin, i64 end)``: the members, block by block."""
    fn = ir.Function(
        module,
        ir.FunctionType(ir.VoidType(), [I8.as_pointer()] * len(group.slots) + [I64, I64]),
        group.symbol,
    )
    begin, end = fn.args[-2], fn.args[-1]
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    pointer = dict(zip(group.slots, fn.args))
    members = [module.globals[m.extra.get("symbol", m.inst.name)] for m in group.members]

    def block(first):
        limit = b.add(first, i64(group.block_rows))
        last = b.select(b.icmp_signed("<", limit, end), limit, end)
        for step, member in zip(group.members, members):
            args = []
            for slot, param in zip([*step.inputs, *step.outputs], member.args):
                p = pointer[slot]
                if slot in group.scratch:  # the block's rows sit at the start of the scratch buffer
                    p = b.gep(p, [b.mul(first, i64(-group.row_bytes[slot]))])
                args.append(b.bitcast(p, param.type))
            b.call(member, [*args, first, last])

    for_range(b, begin, end, block, "block", step=i64(group.block_rows))
    b.ret_void()
