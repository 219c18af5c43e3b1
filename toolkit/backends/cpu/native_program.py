"""A program's steps run from native code: consecutive kernel calls and BLAS matrix products
(each small enough for one thread) are written out once as a program over the buffer table
and run by ``_kernel_call.run_steps`` in one call with the GIL released, as XLA:CPU runs a
thunk sequence. A chain of 100 small dots and their kernels spent 13 µs a step in Python's
dispatch; run natively a step costs its own work and a few nanoseconds.

Steps that are not a single-thread kernel or a plain matrix product (large kernels split over
threads, batched dots, host routines, loops) run from Python between such segments, as before.
The numbers are the same either way: the same kernels, and the same BLAS call (gemm, gemv or
dot, with the same arguments) NumPy's matmul makes for a plain matrix product, a
matrix-vector product or a vector dot product (native_loop's rules)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...config import env_int
from .dot_views import droppable_slices, offered_views, reshaped_results
from .executor import native_op_codes, native_run_steps, slot_types
from .native_loop import (GEMV_VIEW, KERNEL, _Unsupported, blas_gemm, mark_lingering, step_op,
                          while_op)

MIN_STEPS = 2  # one step gains nothing from a native program


@dataclass
class Segment:
    steps: list  # the executable's steps, in order
    program: np.ndarray | None = None  # int64 ops for run_steps; None: run from Python
    allocate: tuple[int, ...] = ()  # the slots to allocate before the native call
    # the slots the program reads and writes, in the order of its buffer list (its ops index
    # this list, so a call hands over only its own buffers, not the whole program's)
    slots: tuple[int, ...] = ()
    # the step each op of the program runs, in order (a profiled call's events: a slice no one
    # needs has no op, a reshape its dot wrote has none)
    op_steps: tuple = ()


def plan_segments(exe) -> list[tuple]:
    """The executable's steps as maximal native segments and Python steps, in order, as the
    executor runs them: (program or None, steps, slots to allocate first, the program's
    slots, the step of each of its ops)."""
    return [(s.program, s.steps, s.allocate, s.slots, s.op_steps) for s in _segments(exe)]


def _native_programs() -> bool:
    return native_run_steps is not None and env_int("TOOLKIT_NATIVE_PROGRAM", 1, 0, 1) == 1


def _views_read_in_place(exe, gemm):
    """The dots that read a slice's window in place (dot_views.py), the inputs each reads so,
    and the slice steps no one needs then: (offered, read_in_place, dropped)."""
    offered = offered_views(exe) if native_op_codes > GEMV_VIEW else {}
    read_in_place: dict[int, set[int]] = {}
    for position, inputs in offered.items():
        used: set[int] = set()
        try:
            step_op(exe, exe.steps[position], lambda s: 0, gemm,
                    {k: w for k, (_, w) in inputs.items()}, used)
        except _Unsupported:
            continue
        read_in_place[position] = used
    return offered, read_in_place, droppable_slices(exe, offered, read_in_place)


@dataclass
class _PlannedSteps:
    """What the view analysis reads of an executable, before its kernels are compiled."""
    steps: list
    _slot_types: list
    out_slots: list


def slices_never_run(steps, slots, out_slots) -> set[int]:
    """The positions of slice steps a native program will not run: every dot after them reads
    their window in place (a triangular loop's ``L[i, :i] @ x[:i]``: two copies a trip, each of
    its own size, so each its own kernel). They are compiled without optimisation: they run
    only where native programs are off."""
    if not _native_programs():
        return set()
    planned = _PlannedSteps(steps, slot_types(slots), out_slots)
    return _views_read_in_place(planned, blas_gemm())[2]


def _segments(exe) -> list[Segment]:
    if not _native_programs():
        return [Segment(list(exe.steps))]
    gemm = blas_gemm()
    offered, read_in_place, dropped = _views_read_in_place(exe, gemm)
    # dots whose product the reshape after them would only copy: they write its buffer
    # (not where that reshape is itself read in place by the next dot, and dropped)
    redirected = {p: target for p, target in reshaped_results(exe).items()
                  if p + 1 not in dropped}
    bypassed: set[int] = set()  # the products written straight into the reshapes' buffers
    reshaped: set[int] = set()  # those reshape steps (in the segment, with no op of their own)
    segments: list[Segment] = []
    run: list = []
    ops: list = []
    op_steps: list = []
    position: dict[int, int] = {}  # slot -> its place in the open segment's buffer list

    def index(slot: int) -> int:
        return position.setdefault(slot, len(position))

    def close():
        # (alone, a kernel gains nothing from a native program: the dispatcher calls it as
        # cheaply; a BLAS call does (NumPy's matmul from Python cost 4.5 µs more a gemv, and a
        # dot reading a window has no other way to read it), and so does a kernel split over
        # native helpers, which Python's pool would not split)
        if len(run) >= MIN_STEPS or any(op[0] != KERNEL for op in ops):
            mark_lingering(ops)
            program = np.array([len(ops)] + [v for op in ops for v in op], dtype=np.int64)
            written = {s for step in run for s in step.outputs} - unwritten - bypassed
            allocate = tuple(sorted(s for s in written if s not in exe.temp_slots
                                    and s not in exe.constants))
            slots = tuple(sorted(position, key=position.get))
            segments.append(Segment(list(run), program, allocate, slots, tuple(op_steps)))
        elif run:
            segments.append(Segment(list(run)))
        run.clear()
        ops.clear()
        op_steps.clear()
        position.clear()

    # the slots read after each step (a loop copies a leaf it only reads into its result's
    # buffer only when something reads that)
    unwritten: set[int] = set()  # loop results no one reads: never allocated
    read_after: dict[int, set[int]] = {}  # (kept at the loops only: linear in the program)
    later = set(exe.out_slots)
    for p in range(len(exe.steps) - 1, -1, -1):
        if exe.steps[p].kind == "control":
            read_after[p] = set(later)
        later.update(exe.steps[p].inputs)
    for p, step in enumerate(exe.steps):
        if p in dropped:
            continue
        if p in reshaped:  # (its dot wrote its buffer)
            run.append(step)
            continue
        before = dict(position)
        views = {k: w for k, (_, w) in offered.get(p, {}).items()}
        used: set[int] = set()
        try:
            if step.kind == "control":
                op = while_op(exe, step, index, read_after[p], unwritten)
            elif p in redirected:
                product, target = step.outputs[0], redirected[p]
                op = step_op(exe, step, lambda s: index(target if s == product else s), gemm,
                             views, used)
                bypassed.add(product)
                reshaped.add(p + 1)
            else:
                op = step_op(exe, step, index, gemm, views, used)
            if used != read_in_place.get(p, set()):
                raise AssertionError(f"%{step.inst.name}: read in place differently")
        except _Unsupported:
            position.clear()
            position.update(before)  # the refused step's slots are not the segment's
            close()
            segments.append(Segment([step]))
            continue
        run.append(step)
        ops.append(op)
        op_steps.append(step)
    close()
    # neighbouring Python segments merge back into one (fewer loops in the hot path)
    merged: list[Segment] = []
    for segment in segments:
        if merged and segment.program is None and merged[-1].program is None:
            merged[-1].steps.extend(segment.steps)
        else:
            merged.append(segment)
    return merged
