"""Target-neutral kernel planning: what one fusion (or unfused instruction) computes, whether
it is a loop or a reduction and over which dimensions. Shared by the CPU and GPU emitters."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ...ir.builder import ComputationBuilder, NameUniquer
from ...ir.nodes import Computation, Instruction
from ...ir.ops import GroupOp
from ...ir.queries import reads_outside_update_window, reads_update_window, reducer_opcode
from ...ir.shapes import Shape
from ...ir.structural import exact_key
from ...ir.windows import compiled_scan
from .elemental import CodegenUnsupported


@dataclass
class KernelSpec:
    name: str
    computation: Computation  # parameters are the kernel's inputs
    outputs: list[Instruction]  # instructions of the computation written to memory
    # loop | row | general | scatter | update_slice (a window written in place) | scan (a
    # reduce-window that is a prefix scan: its lines folded in order along ``split_dim``)
    kind: str
    extent: int | None  # size of the dimension [begin, end) ranges over; None: ignores them
    work: int  # elements touched: decides whether threads pay off
    reducer: str | None = None  # for reductions: the first hero's reducer opcode
    reducers: dict[int, str] | None = None  # hero id -> its reducer opcode
    in_place: bool = False  # an input and the output share a buffer (read at the index written)
    # in place: that input's parameter number (read through the output)
    aliased_parameter: int | None = None
    # the dimension [begin, end) ranges over (loops and window updates: the first that is not
    # 1; general reductions: a kept input dimension); a scan's scanned axis
    split_dim: int = 0
    # parameters given as constants (offsets) whose value no dynamic-slice or
    # dynamic-update-slice start clamp changes: starts_in_bounds
    starts_in_bounds: frozenset[int] = frozenset()
    # ``work`` weighted by the arithmetic per element (loop_work): what threads split on
    split_work: int = 0

    def __post_init__(self):
        if not self.split_work:
            self.split_work = self.work


# A loop kernel's elements weighed by its arithmetic, for the choice to split it over threads:
# a transcendental or a division costs about as much as moving EXPENSIVE_WORK elements of
# ``x + 1`` through memory, CHEAP_OPS_PER_ELEMENT cheap operations about one, and an operation
# on complex numbers COMPLEX_COST real ones (a complex product is four products and two sums;
# the absolute value of a complex number is a hypot: expensive). Measured on a 2-core Xeon VM:
# three chained tanh over 131k float64 took 20x the time of x + 1, an 8-term polynomial (16
# operations) 1.4x, a Mandelbrot round (abs, compare, square, add, select on complex128) 20x.
# A kernel that computes much per element thus splits at fewer elements, where its time (not
# its size) repays the hand-off to a helper thread.
EXPENSIVE_WORK = 6
CHEAP_OPS_PER_ELEMENT = 10
COMPLEX_COST = 4


def loop_work(comp: Computation, elements: int) -> int:
    """``elements`` plus the element-equivalents of ``comp``'s arithmetic (each instruction
    counted once, at its own size: recomputation through several index maps is not)."""
    cheap = expensive = 0
    for inst in comp.instructions:
        if inst.opcode not in GroupOp.ELEMENTWISE or not isinstance(inst.shape, Shape):
            continue
        complex_ = any(isinstance(o.shape, Shape) and o.shape.dtype.is_complex
                       for o in inst.operands)
        size = inst.shape.size * (COMPLEX_COST if complex_ else 1)
        if inst.opcode in GroupOp.EXPENSIVE or complex_ and inst.opcode == "abs":
            expensive += size
        else:
            cheap += size
    return elements + EXPENSIVE_WORK * expensive + cheap // CHEAP_OPS_PER_ELEMENT


def kernel_key(spec: KernelSpec) -> tuple:
    """Equal for kernels whose code is the same up to names: the same computation up to names
    and metadata, writing the same outputs, planned the same way. (An unrolled loop's trips.)"""
    position = {id(inst): k for k, inst in enumerate(spec.computation.instructions)}
    reducers = tuple(sorted((position.get(i, -1 - i), r) for i, r in (spec.reducers or {}).items()))
    return (
        exact_key(spec.computation),
        tuple(position[id(o)] for o in spec.outputs),
        spec.kind,
        spec.extent,
        spec.reducer,
        reducers,
        spec.in_place,
        spec.aliased_parameter,
        spec.split_dim,
        spec.starts_in_bounds,
    )


def emit_or_discard(module, emit, spec):
    """Run ``emit(module, spec)``; if lowering fails halfway, remove the half-built function
    so the module stays valid, and re-raise."""
    before = set(module.globals)
    try:
        return emit(module, spec)
    except CodegenUnsupported:
        for name in set(module.globals) - before:
            if not name.startswith("llvm."):  # intrinsic declarations are harmless and shared
                del module.globals[name]
        raise


def as_computation(inst: Instruction) -> Computation:
    """A single unfused instruction as a computation of its own (pipeline 'none')."""
    if inst.opcode == "fusion":
        return inst.attrs["calls"]
    b = ComputationBuilder(f"kernel_{inst.name}", NameUniquer())
    params = [
        b.parameter(i, o.shape, f"param_{i}", exact_name=True) for i, o in enumerate(inst.operands)
    ]
    return b.build(b.adopt(dataclasses.replace(inst, operands=tuple(params))))


def _elementwise_cone(
    comp: Computation, sources: list[Instruction], dims, stop: Instruction | None = None
) -> bool:
    """Does every instruction (up to ``stop``) that depends on ``sources`` read them only at the
    element it computes: elementwise ops and row-major reshapes (``A[i, :]`` read as a row and
    written back as one) of ``dims``' size all the way, so an element's row-major position never
    changes (no broadcast, slice or transpose)?"""
    from ...ir.ops import is_elementwise

    size = 1
    for d in dims:
        size *= d
    tainted = {id(x) for x in sources}
    for inst in comp.instructions:
        if inst is stop or id(inst) in tainted or not any(id(o) in tainted for o in inst.operands):
            continue
        if not (is_elementwise(inst.opcode) or inst.opcode in GroupOp.RESHAPES) or \
                inst.shape.size != size:
            return False
        tainted.add(id(inst))
    return True


def update_in_place_operand(inst: Instruction) -> int | None:
    """The operand a dynamic-update-slice (alone or as a fusion's root) or a scatter may
    overwrite. A dynamic-update-slice's destination: the kernel reads it nowhere else but in the
    very window it writes, element by element (``A[1:-1] += 1``), or where the window provably
    is not (``y[:, j] = y[:, j - 1] * a``, constant starts), so writing the window alone leaves
    every other element as it was and reads each window element before writing it. A scatter's
    operand: its updates are applied in order into the operand's values, wherever they are."""
    if inst.opcode == "scatter":
        return 0 if len(inst.operands) == 3 and all(
            o is not inst.operands[0] for o in inst.operands[1:]) else None
    if inst.opcode == "dynamic-update-slice":
        return 0 if all(o is not inst.operands[0] for o in inst.operands[1:]) else None
    if inst.opcode != "fusion":
        return None
    comp = inst.attrs["calls"]
    root = comp.root
    if root.opcode != "dynamic-update-slice" or root.operands[0].opcode != "parameter":
        return None
    destination = root.operands[0]
    known = fusion_offsets(inst)
    readers = [i for i in comp.instructions if any(o is destination for o in i.operands)]
    if any(o is destination for o in root.operands[1:]):
        return None
    others = [r for r in readers if r is not root]
    # elements the window leaves alone may be read in any order: they are never written
    windows = [r for r in others if not reads_outside_update_window(r, root, known)]
    if not all(reads_update_window(r, root, known) for r in windows) or \
            not _elementwise_cone(comp, windows, root.operands[1].shape.dims, stop=root):
        return None
    if any(any(w is o for o in s.operands) for w in windows for s in root.operands[2:]):
        return None  # the window's values decide where the window is
    return destination.attrs["parameter_number"]


def fusion_offsets(inst: Instruction) -> dict[int, int]:
    """The values of the fused computation's parameters that ``inst`` (a fusion) is given as
    scalar integer constants, by id(parameter): the offsets of a kernel shared by the trips of
    an unrolled loop (passes/offset_operands.py), known for this call though not in its code,
    so where this call reads and writes is as known as if they were constants inside."""
    comp = inst.attrs["calls"]
    known = {}
    for p, o in zip(comp.parameters, inst.operands):
        if o.opcode == "constant" and o.shape.size == 1 and o.shape.rank == 0 \
                and o.attrs["literal"].dtype.kind in "iu":
            known[id(p)] = int(o.attrs["literal"].reshape(())[()])
    return known


def elementwise_in_place_operands(inst: Instruction) -> set[int]:
    """Operands of a loop fusion (or elementwise instruction) that the output may overwrite:
    same type and dimensions as the output, read only at the index being written."""
    from ...ir.ops import is_elementwise
    from ...ir.shapes import Shape

    if not isinstance(inst.shape, Shape):
        return set()
    if inst.opcode == "fusion":
        comp = inst.attrs["calls"]
        if not is_elementwise(comp.root.opcode):
            return set()
        return {p.attrs["parameter_number"] for p in comp.parameters
                if p.shape.same_type(inst.shape) and _elementwise_cone(comp, [p], inst.shape.dims)}
    if is_elementwise(inst.opcode):
        return {k for k, o in enumerate(inst.operands) if o.shape.same_type(inst.shape)}
    return set()


def starts_in_bounds(inst: Instruction, comp: Computation) -> frozenset[int]:
    """The parameter numbers of ``comp`` that ``inst`` (a fusion) is given as constants (the
    offsets of offset-operands) whose value lies within the range every dynamic-slice or
    dynamic-update-slice clamps it to where it is a start. For this call those clamps change
    nothing, so the code leaves them out: a clamp names the window's extent, and without it the
    trips of a loop over ever shorter windows (``r[k:]``, ``np.flip(y[:k])``) emit the same
    code and compile once."""
    if inst.opcode != "fusion":
        return frozenset()
    known = fusion_offsets(inst)
    if not known:
        return frozenset()
    inside = dict.fromkeys(known, True)
    for i in comp.instructions:
        if i.opcode == "dynamic-slice":
            starts, sizes = i.operands[1:], i.attrs["dynamic_slice_sizes"]
        elif i.opcode == "dynamic-update-slice":
            starts, sizes = i.operands[2:], i.operands[1].shape.dims
        else:
            continue
        for s, dim, n in zip(starts, i.operands[0].shape.dims, sizes):
            if id(s) in inside and not 0 <= known[id(s)] <= dim - n:
                inside[id(s)] = False
    return frozenset(p.attrs["parameter_number"] for p in comp.parameters if inside.get(id(p)))


def plan_update_in_place(inst: Instruction) -> KernelSpec:
    """A kernel that writes only the update window of a dynamic-update-slice (or applies only a
    scatter's updates) into the buffer of its operand (planned to be the output's)."""
    comp = as_computation(inst)
    if comp.root.opcode == "scatter":
        updates = comp.root.operands[2].shape
        return KernelSpec(inst.name, comp, [comp.root], "scatter", None, max(updates.size, 1),
                          in_place=True)
    update = comp.root.operands[1].shape
    split = ranged_dimension(update.dims)
    return KernelSpec(
        inst.name,
        comp,
        [comp.root],
        "update_slice",
        update.dims[split] if update.rank else None,
        max(update.size, 1),
        in_place=True,
        split_dim=split,
        starts_in_bounds=starts_in_bounds(inst, comp),
    )


def ranged_dimension(dims) -> int:
    """The dimension a loop kernel's [begin, end) ranges over: the first that is not 1. A row
    ``x[i, j:]`` is [1, k], and ranging over k, given at run time, keeps k out of the code, so
    the rows of a triangular loop share it (dimensions of 1 are loops the code folds away)."""
    return next((d for d, n in enumerate(dims) if n != 1), 0)


def plan_kernel(inst: Instruction) -> KernelSpec:
    spec = _plan_kernel(inst)
    in_bounds = starts_in_bounds(inst, spec.computation)
    return dataclasses.replace(spec, starts_in_bounds=in_bounds) if in_bounds else spec


def _plan_kernel(inst: Instruction) -> KernelSpec:
    comp = as_computation(inst)
    root = comp.root
    outputs = list(root.operands) if root.opcode == "tuple" else [root]
    if root.opcode in GroupOp.LIBRARY:
        raise CodegenUnsupported(f"{root.opcode} runs as a library call on the host")
    if root.opcode in GroupOp.CONTROL:
        raise CodegenUnsupported(f"{root.opcode} runs its computations from the host")
    if root.opcode == "scatter":  # the copy splits over threads; the updates run in order on one
        shape = root.shape
        return KernelSpec(inst.name, comp, [root], "scatter", None, max(shape.size, 1))
    if any(o.opcode == "scatter" for o in outputs):
        raise CodegenUnsupported("a scatter inside a fusion")
    if root.opcode == "reduce-window":
        return _plan_scan(inst, comp)
    heroes = [o for o in outputs if o.opcode == "reduce"]
    if not heroes:
        shape = outputs[0].shape
        if any(o.shape.dims != shape.dims for o in outputs):
            raise CodegenUnsupported("loop fusion outputs of different shapes")
        split = ranged_dimension(shape.dims)
        return KernelSpec(inst.name, comp, outputs, "loop",
                          shape.dims[split] if shape.rank else None, max(shape.size, 1),
                          split_dim=split, split_work=loop_work(comp, max(shape.size, 1)))
    hero = heroes[0]
    reducers = {}
    for h in heroes:
        reducers[id(h)] = reducer_opcode(h)
        if reducers[id(h)] not in GroupOp.REDUCERS or len(h.operands) != 2:
            raise CodegenUnsupported(f"reducer of %{h.name} is not a single elementwise op")
    in_shape = hero.operands[0].shape
    dims = tuple(sorted(hero.attrs["dimensions"]))
    for h in heroes:
        if (
            h.operands[0].shape.dims != in_shape.dims
            or tuple(sorted(h.attrs["dimensions"])) != dims
        ):
            raise CodegenUnsupported("sibling reductions over different shapes")
    for o in outputs:
        if o.opcode != "reduce" and o.shape.dims != in_shape.dims:
            raise CodegenUnsupported(
                f"extra output %{o.name} does not have the reduction's input shape"
            )
    rank = in_shape.rank
    row = dims == tuple(range(rank - len(dims), rank))
    if row:
        kind = "row"
        extent = in_shape.dims[0] if rank else None
        split_dim = 0
    else:
        kind = "general"
        split_dim = _column_split(in_shape, hero.shape.dtype.numpy.itemsize, dims)
        extent = in_shape.dims[split_dim] if split_dim is not None else None
    return KernelSpec(inst.name, comp, outputs, kind, extent, max(in_shape.size, 1),
                      reducers[id(hero)], reducers, split_dim=split_dim or 0)


def _plan_scan(inst: Instruction, comp: Computation) -> KernelSpec:
    """A reduce-window that is a prefix scan (NumPy's cumsum): lines folded in order along its
    axis; threads may split the leading dimension when the scan is along another. Any other
    window runs in the reference interpreter, which says so."""
    found = compiled_scan(inst)
    if found is None:
        raise CodegenUnsupported(
            f"reduce-window %{inst.name} is not a prefix scan from its reducer's identity (a "
            "window of the whole axis, padded in front): only those are compiled")
    axis, reducer = found
    shape = inst.shape
    extent = shape.dims[0] if axis > 0 else None
    return KernelSpec(inst.name, comp, [comp.root], "scan", extent, max(shape.size, 1),
                      reducer, {id(comp.root): reducer}, split_dim=axis)


# Threads that split a reduction's kept dimension write neighbouring stretches of one output;
# below this many output bytes per kept index range, they would mostly share cache lines.
MIN_SPLIT_OUTPUT_BYTES = 4096


def _column_split(in_shape, itemsize: int, dims) -> int | None:
    """The input dimension a general reduction's threads divide: the leading one when it is
    kept (each thread then owns whole rows of the output), else the first kept dimension when
    the output beyond it is wide enough (a column sum: each thread sums a band of columns down
    all the rows). Every output element is accumulated in the same order either way."""
    if 0 not in dims:
        return 0 if in_shape.rank else None
    kept = [d for d in range(in_shape.rank) if d not in dims]
    if not kept:
        return None
    first = kept[0]
    out_bytes = itemsize
    for d in kept:
        out_bytes *= in_shape.dims[d]
    return first if out_bytes >= MIN_SPLIT_OUTPUT_BYTES and in_shape.dims[first] >= 2 else None


def memoized(fn):
    """``fn`` of an instruction, asked once per instruction of one plan (the buffer plan and
    the steps ask the same kernel several times; each answer walks its fused computation)."""
    answers: dict = {}  # (instructions hash and compare by identity)

    def answer(inst):
        try:
            return answers[inst]
        except KeyError:
            found = answers[inst] = fn(inst)
            return found

    return answer
