"""Dot operands read in place: where a BLAS product's operand is a window of another buffer (a
``slice``, alone or fused with reshapes that only add or drop unit dimensions; or a reshape
alone, which is the whole buffer with its elements in order; or, for a batched product, any
chain of slices, reshapes and transposes that keeps it a strided view, as the heads horizontal
batching stacks are), the native
program hands BLAS the source buffer plus the window's offset, with the source's leading
dimension or increment, as NumPy's matmul passes a view, instead of the slice kernel's copy.

This is about the numbers as much as the time: OpenBLAS's gemv and dot kernels sum in another
order for another lda or increment, so a product of ``d[:, i:]`` read from a copy (lda = its
width) differs in the last bit from NumPy's product of the view (lda = d's width). Whether a
view is read so is native_loop._gemm_op's call (NumPy's is_blasable2d rules); this module
offers the windows, and says which slice steps no one needs once their readers take them.

A window is offered to a dot only when the source buffer is not written between the slice and
the dot (no later step overwrote what the slice would have copied); a slice step is dropped
only when every step reading its result before that buffer is next written is a dot that
reads the window instead, and the program does not return it."""
from __future__ import annotations

import bisect

from .native_loop import Operand


def _unit_preserving(inst) -> bool:
    return inst.opcode == "reshape" or inst.opcode == "bitcast"


def window_of(step, slot_types) -> Operand | None:
    """The window of its source that a slice step's output is, as an Operand over the output's
    dimensions, or None for any other step. A slice is a ``slice``, or a ``dynamic-slice`` whose
    start indices are constants of the program (the offset-operands pass makes fusions alike up
    to their offsets share code that way), then reshapes that only add or drop unit
    dimensions."""
    inst = step.inst
    if step.kind != "kernel" or len(step.outputs) != 1:
        return None
    chain = _chain(step)
    if not chain or any(not _unit_preserving(i) for i in chain[1:]) or any(
            len(i.operands) != 1 or i.operands[0] is not p for p, i in zip(chain, chain[1:])):
        return None
    slice_ = chain[0]
    if _unit_preserving(slice_):  # reshapes alone: the whole source, its elements in order
        return _reshaped(step, chain, slot_types)
    if slice_.opcode == "slice":
        if len(step.inputs) != 1:
            return None
        source_slot = step.inputs[0]
        spec = slice_.attrs.get("slice")
    elif slice_.opcode == "dynamic-slice" and inst.opcode == "fusion":
        found = _constant_starts(inst, slice_)
        if found is None:
            return None
        source_slot, spec = step.inputs[found[0]], found[1]
    else:
        return None
    source = slot_types[source_slot]
    if source is None or slot_types[step.outputs[0]] is None:
        return None
    dims = source[0]
    if spec is None or len(spec) != len(dims) or tuple(chain[-1].shape.dims) != tuple(
        slot_types[step.outputs[0]][0]
    ):
        return None
    row_major, size = [], 1
    for d in reversed(dims):
        row_major.append(size)
        size *= d
    row_major.reverse()
    offset = sum(start * s for (start, _, _), s in zip(spec, row_major))
    # the window's dimensions longer than 1, with their strides, in order: what a reshape that
    # only adds or drops unit dimensions keeps
    kept = [(d, stride * s) for d, (_, _, stride), s in zip(slice_.shape.dims, spec, row_major)
            if d != 1]
    out_dims = chain[-1].shape.dims
    if [d for d in out_dims if d != 1] != [d for d, _ in kept]:
        return None
    strides, it = [], iter(kept)
    for d in out_dims:
        strides.append(1 if d == 1 else next(it)[1])
    return Operand(source_slot, offset, tuple(strides))


def batched_window_of(step, slot_types) -> Operand | None:
    """The window of its source that a kernel's (batch, rows, columns) result is, where the
    kernel only slices, reshapes and transposes one buffer so that its result stays a strided
    view of it (attention's heads stacked: a reshape that splits the columns into heads, a
    transpose that puts the heads first, a slice of the heads), or None. Offered to batched
    products alone: a matrix or vector product reads its windows as NumPy's matmul reads the
    slice it was given (``window_of``)."""
    inst = step.inst
    if step.kind != "kernel" or len(step.outputs) != 1 or inst.shape.rank != 3:
        return None
    chain = _chain(step)
    if not chain or inst.opcode != "fusion" or not all(_regrouping_link(i) for i in chain):
        return None
    source = chain[0].operands[0]
    if source.opcode != "parameter" or 0 in source.shape.dims or 0 in inst.shape.dims:
        return None
    slot = step.inputs[source.attrs["parameter_number"]]
    if slot_types[slot] is None or slot_types[step.outputs[0]] is None:
        return None
    dims = tuple(slot_types[slot][0])
    if dims != tuple(source.shape.dims):
        return None
    strides, size = [], 1
    for d in reversed(dims):
        strides.append(size)
        size *= d
    strides, offset, last = tuple(reversed(strides)), 0, source
    for link in chain:
        if link.operands[0] is not last:
            return None
        last = link
        if link.opcode == "transpose":
            perm = link.attrs["dimensions"]
            dims, strides = tuple(dims[p] for p in perm), tuple(strides[p] for p in perm)
            continue
        if _unit_preserving(link):
            strides = _regrouped_strides(dims, strides, tuple(link.shape.dims))
            if strides is None:
                return None
            dims = tuple(link.shape.dims)
            continue
        spec = _window_spec(inst, link, dims)
        if spec is None:
            return None
        offset += sum(start * s for (start, _, _), s in zip(spec, strides))
        strides = tuple(step_ * s for (_, _, step_), s in zip(spec, strides))
        dims = tuple(link.shape.dims)
    if dims != tuple(slot_types[step.outputs[0]][0]):
        return None
    return Operand(slot, offset, tuple(1 if d == 1 else s for d, s in zip(dims, strides)))


def _regrouping_link(inst) -> bool:
    """A slice, dynamic-slice, reshape or transpose: what a window regrouped is made of."""
    op = inst.opcode
    return bool(inst.operands) and (op == "slice" or op == "dynamic-slice" or op == "transpose"
                                    or _unit_preserving(inst))


def _window_spec(fusion, link, dims):
    """A slice's (start, limit, stride) per dimension, or a dynamic-slice's whose starts are
    constants of the program (clamped as dynamic-slice clamps them); None for other ops."""
    if link.opcode == "slice":
        return [tuple(s) for s in link.attrs["slice"]]
    if link.opcode != "dynamic-slice":
        return None
    spec = []
    for start, size, dim in zip(link.operands[1:], link.attrs["dynamic_slice_sizes"], dims):
        bound = (fusion.operands[start.attrs["parameter_number"]]
                 if start.opcode == "parameter" else start)
        if bound.opcode != "constant":
            return None
        value = min(max(int(bound.attrs["literal"].reshape(())), 0), dim - size)
        spec.append((value, value + size, 1))
    return spec


def _regrouped_strides(dims, strides, new_dims):
    """The strides of a strided view's elements under ``new_dims`` (a row-major regrouping), or
    None where the regrouping is no view: each run of dimensions merged must be contiguous
    within itself (heads split out of a slice of columns are a view; columns of a strided
    window merged are not)."""
    kept = [(d, s) for d, s in zip(dims, strides) if d != 1]  # (a unit stride is never read)
    out: list[int] = []
    i = 0
    for d in new_dims:
        if d == 1:
            out.append(1)
            continue
        if i >= len(kept):
            return None
        size, stride = kept[i]
        if size % d == 0 and size != d:  # d splits off the front of this dimension
            kept[i] = (size // d, stride)
            out.append(stride * (size // d))
            continue
        product, j = size, i
        while product < d and j + 1 < len(kept):
            if kept[j][1] != kept[j + 1][0] * kept[j + 1][1]:
                return None  # (not contiguous: merging them would need a copy)
            j += 1
            product *= kept[j][0]
        if product != d:
            return None
        out.append(kept[j][1])
        i = j + 1
    return tuple(out) if i == len(kept) else None


def _reshaped(step, chain, slot_types) -> Operand | None:
    """A reshape step's result as a view of its source (row-major reshapes keep every element
    where it was: ``a.reshape(r * q, p)`` for a GEMM), or None."""
    if len(step.inputs) != 1 or len(chain[0].operands) != 1 or (
            step.inst.opcode == "fusion" and chain[0].operands[0].opcode != "parameter"):
        return None
    source, result = slot_types[step.inputs[0]], slot_types[step.outputs[0]]
    if source is None or result is None or tuple(chain[-1].shape.dims) != tuple(result[0]):
        return None
    dims = result[0]
    strides, size = [], 1
    for d in reversed(dims):
        strides.append(size)
        size *= d
    return Operand(step.inputs[0], 0, tuple(reversed(strides)))


def _constant_starts(fusion, dynamic_slice):
    """(the fusion operand a dynamic-slice reads, its window as a slice spec) when its operand
    is a parameter and every start index a parameter bound to a constant of the program;
    starts clamp as dynamic-slice's do."""
    operand = dynamic_slice.operands[0]
    if operand.opcode != "parameter":
        return None
    values = _window_spec(fusion, dynamic_slice, operand.shape.dims)
    return None if values is None else (operand.attrs["parameter_number"], values)


def offered_views(exe) -> dict[int, dict[int, tuple[int, Operand]]]:
    """dot step position -> {input position: (slice step position, window)}: the windows each
    dot may read in place of a slice step's result. Linear in the steps: the windows current
    at each step are indexed by their result slot and by their source slot."""
    steps = exe.steps
    windows = {}  # output slot -> (slice position, window), while that result is current
    by_source: dict[int, set[int]] = {}  # source slot -> output slots of windows over it
    offered: dict[int, dict[int, tuple[int, Operand]]] = {}

    def forget(slot: int) -> None:
        entry = windows.pop(slot, None)
        if entry is not None:
            by_source.get(entry[1].slot, set()).discard(slot)

    for position, step in enumerate(steps):
        if step.kind == "dot":
            for k, slot in enumerate(step.inputs):
                if slot in windows:
                    offered.setdefault(position, {})[k] = windows[slot]
        written = set(step.outputs)
        # a window is stale once its result slot or its source slot is written
        for slot in written:
            forget(slot)
            for result in list(by_source.get(slot, ())):
                forget(result)
        window = window_of(step, exe._slot_types) or batched_window_of(step, exe._slot_types)
        if window is not None and window.slot not in written:
            windows[step.outputs[0]] = (position, window)
            by_source.setdefault(window.slot, set()).add(step.outputs[0])
    return offered


def droppable_slices(exe, offered, read_in_place: dict[int, set[int]]) -> set[int]:
    """The positions of slice steps whose result no one reads any more: every reader before
    the result's slot is next written is a dot that reads the window in its place
    (``read_in_place``: dot position -> the input positions it reads so). One pass indexes
    every slot's reads and writes, so each candidate looks only at its own readers."""
    candidates = {slice_position for inputs in offered.values()
                  for slice_position, _ in inputs.values()}
    if not candidates:
        return set()
    steps = exe.steps
    watched = {steps[p].outputs[0] for p in candidates}
    events: dict[int, list[tuple[int, int]]] = {}  # slot -> (position, input k, or -1: written)
    for position, step in enumerate(steps):
        for k, s in enumerate(step.inputs):
            if s in watched:
                events.setdefault(s, []).append((position, k))
        for s in step.outputs:  # (after the step's reads: a step reads, then writes)
            if s in watched:
                events.setdefault(s, []).append((position, -1))
    returned = set(exe.out_slots)
    dropped = set()
    for slice_position in candidates:
        slot = steps[slice_position].outputs[0]
        if slot in returned:
            continue
        found = events.get(slot, [])
        start = bisect.bisect_right(found, (slice_position, float("inf")))
        needed = False
        for position, k in found[start:]:
            if k == -1:  # the slot is written again: later reads are of something else
                break
            if k not in read_in_place.get(position, ()):
                needed = True
                break
        if not needed:
            dropped.add(slice_position)
    return dropped


def reshaped_results(exe) -> dict[int, int]:
    """dot step position -> the slot it may write its product into: the result of the reshape
    step right after it, whose only input is the product (``(a @ c).reshape(r, q, p)``): a
    row-major reshape keeps every element where it is, so the reshape's buffer holds the
    product as it is, and that step need not copy it. Only where nothing else reads the
    product (before its slot is written again; the program does not return it) and the
    reshape's buffer is none of the dot's inputs."""
    steps, types = exe.steps, exe._slot_types
    candidates = {}
    for p in range(len(steps) - 1):
        dot, after = steps[p], steps[p + 1]
        if dot.kind != "dot" or len(dot.outputs) != 1 or after.kind != "kernel":
            continue
        product, target = dot.outputs[0], after.outputs[0] if len(after.outputs) == 1 else None
        if target is None or after.inputs != [product] or target in dot.inputs \
                or product in exe.out_slots:
            continue
        chain = _chain(after)
        if not chain or not all(_unit_preserving(i) for i in chain) \
                or _reshaped(after, chain, types) is None \
                or types[target] is None or types[product] is None \
                or types[target][1] != types[product][1]:
            continue
        candidates[p] = (product, target)
    if not candidates:
        return {}
    watched = {product for product, _ in candidates.values()}
    events: dict[int, list[tuple[int, bool]]] = {}  # slot -> (position, written?)
    for position, step in enumerate(steps):
        for s in step.inputs:
            if s in watched:
                events.setdefault(s, []).append((position, False))
        for s in step.outputs:
            if s in watched:
                events.setdefault(s, []).append((position, True))
    redirected = {}
    for p, (product, target) in candidates.items():
        found = events.get(product, [])
        start = bisect.bisect_right(found, (p + 1, True))  # after the reshape's read
        later = found[start:]
        if not later or later[0][1]:  # unread until written again (or never again)
            redirected[p] = target
    return redirected


def _chain(step) -> list:
    """A kernel step's instructions in order: a fusion's computed ones (its parameters and
    constants left out: a dynamic-slice's start indices, the same in every alike fusion), or
    the unfused instruction."""
    inst = step.inst
    if inst.opcode == "fusion":
        comp = inst.attrs.get("calls")
        return [] if comp is None else [i for i in comp.instructions
                                        if i.opcode != "parameter" and i.opcode != "constant"]
    return [inst]
