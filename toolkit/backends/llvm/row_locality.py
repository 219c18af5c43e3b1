"""Which inputs of a kernel are read only at the row being computed.

A kernel that computes rows [begin, end) of its leading dimension reads some inputs only at
those rows (``x`` in ``x - max(x, axis=-1)``, or a per-row statistic broadcast along the row),
and others anywhere (a bias broadcast down the columns, a transposed operand, a shifted
slice). When every input a kernel takes from an earlier kernel is of the first kind, the two
can run row block by row block, the second right after the first while the block is still in
cache. The analysis follows each value from the kernel's outputs back to the parameters and
is conservative: any op it does not know to keep the leading index reads "anywhere"."""
from __future__ import annotations

from ...ir.nodes import Instruction
from ...ir.ops import is_elementwise
from .planning import KernelSpec

ROW, ANYWHERE = "row", "anywhere"


def _leading_index_kept(inst: Instruction, operand: Instruction) -> bool:
    """Whether ``operand``'s leading index equals ``inst``'s when ``inst`` reads it."""
    if not operand.shape.rank or not inst.shape.rank or operand.shape.dims[0] != inst.shape.dims[0]:
        return False
    op = inst.opcode
    if is_elementwise(op) or op == "copy":
        return operand.shape.dims == inst.shape.dims
    if op == "reshape":  # a row-major reshape with an equal leading dimension keeps the row
        return True
    if op == "broadcast":
        dims = inst.attrs["dimensions"]
        return bool(dims) and dims[0] == 0
    if op == "transpose":
        return inst.attrs["dimensions"][0] == 0
    if op == "slice":
        start, limit, stride = inst.attrs["slice"][0]
        return start == 0 and stride == 1 and limit == operand.shape.dims[0]
    if op == "dynamic-slice":  # all the leading dimension: its start clamps to 0, whatever it is
        return operand is inst.operands[0]
    if op == "reduce":
        return operand is inst.operands[0] and 0 not in inst.attrs["dimensions"]
    return False


def row_local_parameters(spec: KernelSpec) -> set[int] | None:
    """Parameter numbers of the kernel's inputs read only at the rows it computes, or None
    when the kernel does not compute by rows of its leading dimension."""
    heroes = [o for o in spec.outputs if o.opcode == "reduce"]
    # scatter, update_slice: not one output row per index
    if spec.kind not in ("loop", "row", "general"):
        return None
    if (
        spec.extent is None
        or spec.split_dim != 0
        or spec.kind == "row"
        and len(heroes[0].attrs["dimensions"]) == heroes[0].operands[0].shape.rank
    ):
        return None
    state: dict[int, str] = {}
    order = spec.computation.instructions  # operands before users

    def mark(inst: Instruction, how: str) -> None:
        if state.get(id(inst)) != ANYWHERE:
            state[id(inst)] = how

    # loops write outputs at the iteration index; reductions read their input there
    for out in spec.outputs:
        if out.opcode == "reduce":
            mark(out.operands[0], ROW)
            for init in out.operands[1:]:
                mark(init, ANYWHERE)
        else:
            mark(out, ROW)
    for inst in reversed(order):
        how = state.get(id(inst))
        if how is None or inst.opcode == "parameter":
            continue
        if inst.opcode == "reduce" and inst in spec.outputs:
            continue  # its operands were marked above
        for operand in inst.operands:
            mark(operand, ROW if how == ROW and _leading_index_kept(inst, operand) else ANYWHERE)
    return {
        p.attrs["parameter_number"]
        for p in spec.computation.parameters
        if state.get(id(p), ROW) == ROW
    }
