"""While loops driven from native code: the condition's and the body's steps, written out as a
small program of kernel calls, BLAS matrix products and copies over a table of buffers, run by
``_kernel_call.run_loop`` trip after trip without coming back to Python (as XLA:CPU runs a while
thunk's sequence). A recurrent network's loop of a dozen small kernels and two or three
128-wide matrix products a trip spent more time in Python's dispatch than in the work.

Loops run this way only where it changes nothing but the time: every step is a compiled kernel
small enough to run on one thread (larger ones are split over threads by the Python driver) or
a loop driven so itself (a nest rolled from the inside out: ``run_while`` within the trip), or
a plain 2-D matrix product (any of NumPy's BLAS types: float32, float64, complex64 and
complex128; no zero-sized dimension, two different operands:
NumPy's matmul calls the same BLAS gemm for those; for a matrix-vector product the same gemv,
with NumPy's arguments; for a vector dot product the same dot); each state element comes back
in its own buffer or in a temporary copied into it. Any other loop runs from Python, as
before."""
from __future__ import annotations

import ctypes
import functools
import glob
import math
import os
import threading
from dataclasses import dataclass

import numpy as np

from ...config import env_int
from .executor import (
    CpuExecutable,
    native_kernel_pointers as KERNEL_POINTERS,
    native_op_codes,
    native_run_loop,
    native_run_steps,
)
from .native import native_blas_types

# the BLAS element type of an op's type field (_kernel_call.c), in the order of BLAS_TYPES
BLAS_TYPE = {"float32": 0, "float64": 1, "complex64": 2, "complex128": 3}

KERNEL, GEMM, COPY, DOT, GEMV = 0, 1, 2, 3, 4
# the same with operands read in place in larger buffers (dot_views.py)
GEMM_VIEW, DOT_VIEW, GEMV_VIEW = 5, 6, 7
WHILE = 8  # a loop inside a program or a loop body (_kernel_call's run_while)
SPLIT = 9  # a kernel split over native helper threads (_kernel_call's run_split)
GEMM_BATCH = 10  # a strided batched product: one GEMM_VIEW per batch element
_ALIGN = 64  # bytes: where each temporary of a loop starts in its arena
CBLAS_ROW_MAJOR, CBLAS_COL_MAJOR = 101, 102
MAX_POINTERS = 16


@functools.cache
def blas_gemm() -> dict | None:
    """{'float32': (address, ilp64), 'float64': ...}: the CBLAS gemm of the BLAS NumPy calls
    (the OpenBLAS its wheels bundle), for each of NumPy's four BLAS types, or None where it
    cannot be found; and {('float32', 'dot'): (address, ilp64), ...} for each routine (a complex
    dot is ``?dotu_sub``, as NumPy's CFLOAT_dot calls)."""
    try:
        # the wheels' bundled libraries: numpy.libs (Linux), .dylibs (macOS)
        here = os.path.dirname(np.__file__)
        candidates = (glob.glob(os.path.join(os.path.dirname(here), "numpy.libs", "*openblas*.so*"))
                      + glob.glob(os.path.join(here, ".dylibs", "*openblas*.dylib")))
        for path in candidates:
            library = ctypes.CDLL(path)
            for prefix, suffix, ilp64 in (
                ("scipy_", "64_", True),
                ("", "64_", True),
                ("scipy_", "", False),
                ("", "", False),
            ):
                names = {
                    (t, routine): f"{prefix}cblas_{c}{_ROUTINE_NAMES[c in 'cz'][routine]}{suffix}"
                    for t, c in (("float32", "s"), ("float64", "d"), ("complex64", "c"),
                                 ("complex128", "z"))
                    for routine in _ROUTINES
                }
                found = {
                    key: (ctypes.cast(getattr(library, n), ctypes.c_void_p).value, ilp64)
                    for key, n in names.items() if hasattr(library, n)
                }
                # the real routines at least (the complex ones where this BLAS has them all)
                if all(key in found for key in names if key[0].startswith("float")):
                    types = [t for t in BLAS_TYPE if all((t, r) in found for r in _ROUTINES)]
                    return {**{t: found[(t, "gemm")] for t in types},
                            **{(t, r): found[(t, r)] for t in types for r in _ROUTINES}}
    except OSError:
        return None
    return None


_ROUTINES = ("gemm", "dot", "gemv")
# CBLAS's names of each routine: real, complex
_ROUTINE_NAMES = ({"gemm": "gemm", "dot": "dot", "gemv": "gemv"},
                  {"gemm": "gemm", "dot": "dotu_sub", "gemv": "gemv"})


def _blas_type(inst) -> int:
    """The op's type field for the dot ``inst``'s element type, or _Unsupported where the build
    or the type has none."""
    code = BLAS_TYPE.get(inst.shape.dtype.numpy.name)
    if code is None or code >= native_blas_types:
        raise _Unsupported(f"dot %{inst.name}: no native BLAS call for {inst.shape.dtype.numpy}")
    return code


class _Unsupported(Exception):
    pass


@dataclass(frozen=True)
class Operand:
    """A dot operand as BLAS reads it: a buffer slot, the offset of its first element in that
    buffer, and its elements' strides per dimension (in elements). A whole buffer is offset 0
    with row-major strides; a view (dot_views.py) is a window of a larger buffer."""
    slot: int
    offset: int
    strides: tuple[int, ...]

    @property
    def is_view(self) -> bool:
        return self.offset != 0 or self.strides != ()


def _plain(slot: int) -> Operand:
    return Operand(slot, 0, ())


def _strides(operand: Operand, dims) -> tuple[int, ...]:
    if operand.strides:
        return operand.strides
    strides, size = [], 1
    for d in reversed(dims):
        strides.append(size)
        size *= d
    return tuple(reversed(strides))


def _blasable(stride1: int, stride2: int, d2: int) -> bool:
    """NumPy's is_blasable2d, in elements: the second dimension contiguous, the first stride at
    least as long as a row (numpy/_core/src/umath/matmul.c.src)."""
    return stride2 == 1 and d2 <= stride1 < 2 ** 31 - 1


def _dot_op(step, index, gemm, n: int | None = None, x: Operand | None = None,
            y: Operand | None = None, incx: int = 1, incy: int = 1) -> list[int]:
    """A vector dot product of ``n`` elements (1-D @ 1-D, or (1, n) @ (n, 1)), as NumPy's
    matmul computes it: BLAS's dot, with the operands' increments (NumPy's TYPE_dot)."""
    inst = step.inst
    lhs, rhs = inst.operands
    t = inst.shape.dtype.numpy
    routine = gemm.get((t.name, "dot")) if gemm is not None else None
    # (an extension built before op 3 would read it as a copy: run_steps came with it)
    if routine is None or native_run_steps is None or lhs.shape.dtype != inst.shape.dtype \
            or rhs.shape.dtype != inst.shape.dtype or 0 in lhs.shape.dims:
        raise _Unsupported(f"dot %{inst.name} is not a float vector dot product")
    address, ilp64 = routine
    n = lhs.shape.dims[0] if n is None else n
    if not ilp64 and n >= 2 ** 31:
        raise _Unsupported("a dimension beyond a 32-bit BLAS")
    x = x or _plain(step.inputs[0])
    y = y or _plain(step.inputs[1])
    type_ = _blas_type(inst)
    if x.is_view or y.is_view:
        return [DOT_VIEW, address, int(ilp64), type_, n, index(x.slot), x.offset, incx,
                index(y.slot), y.offset, incy, index(step.outputs[0])]
    return [DOT, address, int(ilp64), type_, n, index(x.slot), index(y.slot),
            index(step.outputs[0])]


def _gemv_op(step, index, gemm, matrix: Operand, matrix_strides, vector: Operand, incx: int,
             length: int, k: int):
    """A matrix-vector product (one of m, n is 1, k > 1) as NumPy's matmul computes it: its
    ``gemv`` (numpy/_core/src/umath/matmul.c.src), which calls
    ``cblas_?gemv(order, CblasTrans, k, length, 1, A, lda, x, incx, 0, y, 1)`` for the matrix
    as an (output length, k) array with strides ``matrix_strides``: column-major with lda = its
    first stride where k is contiguous, else row-major with lda = its second stride. The call
    depends only on how the matrix is stored, not on which side of the product it is, so a dot
    with its operands swapped makes NumPy's call too. OpenBLAS sums in another order for each
    order, lda and increment (its gemv kernels' tails): the same arguments give the same sums."""
    inst = step.inst
    t = inst.shape.dtype.numpy
    routine = gemm.get((t.name, "gemv"))
    if routine is None or native_op_codes <= GEMV:  # (a build before op 4 reads it as a copy)
        raise _Unsupported(f"dot %{inst.name}: no BLAS gemv, or a C extension without it")
    address, ilp64 = routine
    if not ilp64 and max(length, k) >= 2 ** 31 - 1:  # NumPy's BLAS_MAXSIZE
        raise _Unsupported("a dimension beyond a 32-bit BLAS")
    s_out, s_k = matrix_strides
    order, lda = (CBLAS_COL_MAJOR, s_out) if _blasable(s_out, s_k, k) else (CBLAS_ROW_MAJOR, s_k)
    head = [address, int(ilp64), _blas_type(inst), order, k, length, lda, incx, 1]
    if matrix.is_view or vector.is_view:
        return [GEMV_VIEW, *head, index(matrix.slot), matrix.offset, index(vector.slot),
                vector.offset, index(step.outputs[0])]
    return [GEMV, *head, index(matrix.slot), index(vector.slot), index(step.outputs[0])]


def _gemm_op(step, index, gemm, views: dict | None = None, used: set | None = None) -> list[int]:
    """A plain matrix product as the BLAS call NumPy's matmul makes for it. ``views``: input
    position -> Operand, a window of a larger buffer that input may be read through instead
    of its own (copied) buffer; it is where NumPy would pass that view to BLAS as it is
    (its is_blasable2d rules), and the positions read so go into ``used``."""
    inst = step.inst
    a = inst.attrs
    lhs, rhs = inst.operands
    t = inst.shape.dtype.numpy
    views = views or {}
    operands = [views.get(k) or _plain(s) for k, s in enumerate(step.inputs)]
    strides = [_strides(o, x.shape.dims) for o, x in zip(operands, (lhs, rhs))]

    def read(*positions):
        if used is not None:
            used.update(k for k in positions if operands[k].is_view)

    dims = [lhs.shape.dims, rhs.shape.dims]
    contracting = [a.get("lhs_contracting_dims", ()), a.get("rhs_contracting_dims", ())]
    batch = _leading_batch(inst)
    if batch is not None:
        # a leading batch dimension (attention's heads batched): each batch element is the
        # product NumPy's matmul makes of it, one GEMM each, the operands and the result that
        # many elements further on
        if native_op_codes <= GEMM_BATCH:
            raise _Unsupported(f"dot %{inst.name}: this build has no batched products")
        batch_strides = [st[0] for st in strides]
        dims = [dims[0][1:], dims[1][1:]]
        strides = [st[1:] for st in strides]
        contracting = [tuple(c - 1 for c in contracting[0]), tuple(c - 1 for c in contracting[1])]
    elif lhs.shape.rank == rhs.shape.rank == 1 and not a.get("lhs_batch_dims") \
            and len(a.get("lhs_contracting_dims", ())) == 1:
        op = _dot_op(step, index, gemm, None, operands[0], operands[1], strides[0][0],
                     strides[1][0])
        read(0, 1)
        return op
    # a vector beside a matrix (matmul's f64[m,k] . f64[k] -> f64[m]) is the matrix product
    # NumPy makes of it: a (1, k) row on the left, a (k, 1) column on the right (the unit
    # dimension's stride is never read: such a product is a gemv or a dot)
    if batch is None and lhs.shape.rank + rhs.shape.rank == 3 and len(contracting[0]) == 1 \
            and len(contracting[1]) == 1:
        k_ = 0 if lhs.shape.rank == 1 else 1
        dims[k_] = (1, dims[k_][0]) if k_ == 0 else (dims[k_][0], 1)
        strides[k_] = (1, strides[k_][0]) if k_ == 0 else (strides[k_][0], 1)
        contracting[k_] = (1,) if k_ == 0 else (0,)

    def plain(k):  # matrix k from its own buffer: NumPy would not hand the view to BLAS
        operands[k] = _plain(step.inputs[k])
        strides[k] = _strides(operands[k], dims[k])
        if batch is not None:
            batch_strides[k] = math.prod(dims[k])

    if (
        gemm is None
        or t.name not in gemm
        or lhs.shape.dtype != inst.shape.dtype
        or rhs.shape.dtype != inst.shape.dtype
        or len(dims[0]) != 2
        or len(dims[1]) != 2
        or (batch is None and (a.get("lhs_batch_dims") or a.get("rhs_batch_dims")))
        or len(contracting[0]) != 1
        or len(contracting[1]) != 1
        or 0 in dims[0]
        or 0 in dims[1]
    ):
        raise _Unsupported(f"dot %{inst.name} is not a plain matrix product")
    trans_a = contracting[0][0] == 0
    trans_b = contracting[1][0] == 1
    m, k = (dims[0][1], dims[0][0]) if trans_a else dims[0]
    n = dims[1][0] if trans_b else dims[1][1]

    def numpys():  # NumPy's operands' strides: (is1_m, is1_n), (is2_n, is2_p)
        return (strides[0][::-1] if trans_a else strides[0],
                strides[1][::-1] if trans_b else strides[1])

    if batch is not None and (m == 1 or n == 1 or k == 1):
        raise _Unsupported(f"dot %{inst.name}: a batch of vector products")
    if m == 1 and n == 1:  # (1, k) @ (k, 1): NumPy takes it to dot, with the two increments
        (_, is1_n), (is2_n, _) = numpys()
        op = _dot_op(step, index, gemm, k, operands[0], operands[1], is1_n, is2_n)
        read(0, 1)
        return op
    if k == 1:
        # an outer product: NumPy's own loop (0 + a * b), not BLAS (the simplifier makes a
        # real k = 1 dot a multiply; a complex one it keeps, and gemm would round and sign its
        # zeros otherwise)
        raise _Unsupported(f"dot %{inst.name} contracts one element: NumPy's own loop")
    if m == 1 or n == 1:
        # row @ matrix: the matrix is the rhs, read (n, k); matrix @ column: the lhs, (m, k)
        mat, vec, length = (1, 0, n) if m == 1 else (0, 1, m)
        (is1_m, is1_n), (is2_n, is2_p) = numpys()
        s_out, s_k = (is2_p, is2_n) if m == 1 else (is1_m, is1_n)
        if not (_blasable(s_out, s_k, k) or _blasable(s_k, s_out, length)):
            plain(mat)
            (is1_m, is1_n), (is2_n, is2_p) = numpys()
            s_out, s_k = (is2_p, is2_n) if m == 1 else (is1_m, is1_n)
        op = _gemv_op(step, index, gemm, operands[mat], (s_out, s_k), operands[vec],
                      is1_n if m == 1 else is2_n, length, k)
        read(0, 1)
        return op
    (is1_m, is1_n), (is2_n, is2_p) = numpys()
    if not (_blasable(is1_m, is1_n, k) or _blasable(is1_n, is1_m, m)):
        plain(0)  # NumPy copies it into a row-major buffer, as the slice kernel does
    if not (_blasable(is2_n, is2_p, n) or _blasable(is2_p, is2_n, k)):
        plain(1)
    (is1_m, is1_n), (is2_n, is2_p) = numpys()
    if (operands[0].slot, operands[0].offset) == (operands[1].slot, operands[1].offset):
        # the same memory on both sides: NumPy's matmul may take it to syrk (x @ x.T)
        raise _Unsupported(f"dot %{inst.name} multiplies a matrix by itself")
    address, ilp64 = gemm[t.name]
    if not ilp64 and max(m, n, k) >= 2 ** 31:
        raise _Unsupported("a dimension beyond a 32-bit BLAS")
    trans1, lda = (0, is1_m) if _blasable(is1_m, is1_n, k) else (1, is1_n)
    trans2, ldb = (0, is2_n) if _blasable(is2_n, is2_p, n) else (1, is2_p)
    head = [address, int(ilp64), _blas_type(inst), trans1, trans2, m, n, k, lda, ldb, n]
    a_, b_ = operands
    read(0, 1)
    if batch is not None:
        return [GEMM_BATCH, *head, index(a_.slot), a_.offset, index(b_.slot), b_.offset,
                index(step.outputs[0]), batch, *batch_strides, m * n]
    if a_.is_view or b_.is_view:
        return [GEMM_VIEW, *head, index(a_.slot), a_.offset, index(b_.slot), b_.offset,
                index(step.outputs[0])]
    return [GEMM, *head, index(a_.slot), index(b_.slot), index(step.outputs[0])]


def _leading_batch(inst) -> int | None:
    """The batch size of a dot of two (batch, rows, columns) operands batched over their first
    dimension alone, else None."""
    a = inst.attrs
    lhs, rhs = inst.operands
    if tuple(a.get("lhs_batch_dims", ())) != (0,) or tuple(a.get("rhs_batch_dims", ())) != (0,) \
            or lhs.shape.rank != 3 or rhs.shape.rank != 3:
        return None
    return lhs.shape.dims[0]


def step_op(exe: CpuExecutable, step, index, gemm, views: dict | None = None,
            used: set | None = None) -> list[int]:
    """One step as a native op (a kernel call or a BLAS product), or _Unsupported. ``views``
    and ``used``: a dot's inputs it may read in place, and those it does (_gemm_op)."""
    if step.kind == "dot":
        return _gemm_op(step, index, gemm, views, used)
    if step.kind != "kernel" or not step.address:
        raise _Unsupported(f"%{step.inst.name} runs as a {step.kind} step")
    slots = [*step.inputs, *step.outputs]
    entry = step.address
    if len(slots) > MAX_POINTERS:  # (called through its packed entry, where the build can)
        entry = step.packed_address
        if not entry or len(slots) > KERNEL_POINTERS:
            raise _Unsupported(f"%{step.inst.name} takes more than {MAX_POINTERS} buffers")
    threads = exe.native_threads(step)
    step.extra["split_threads"] = threads  # (what a profile reports: the op's own split)
    if threads > 1:  # (linger 0 until mark_lingering sees what follows)
        return [SPLIT, entry, 0, step.extent, step.grain, threads, 0, len(slots),
                *[index(s) for s in slots]]
    if exe.splits(step):
        raise _Unsupported(f"%{step.inst.name} is split over threads")
    return [KERNEL, entry, 0, 1 if step.extent is None else step.extent, len(slots),
            *[index(s) for s in slots]]


LINGER_BEFORE_BLAS = 3  # ops: a split this close before a BLAS call lets its helpers sleep


def mark_lingering(ops: list[list[int]]) -> list[list[int]]:
    """Sets each split op's linger flag unless a BLAS call follows within LINGER_BEFORE_BLAS
    ops: its helpers then spin a while for the next split (waking one costs ~20 µs on a VM, and
    the next split is often the next call's) rather than sleep, but never spin into a BLAS
    call, whose own threads want the cores."""
    for k, op in enumerate(ops):
        if op[0] != SPLIT:
            continue
        op[6] = 1
        for following in ops[k + 1:k + 1 + LINGER_BEFORE_BLAS]:
            if following[0] == SPLIT:
                break
            if following[0] != KERNEL and following[0] != COPY:
                op[6] = 0
                break
    return ops


def _ops(exe: CpuExecutable, index, gemm) -> list[list[int]]:
    """The steps of a loop's body or condition as native ops; a loop inside (a nest rolled
    from the inside out) is one op, run by run_while within the trip."""
    read_after: dict[int, set[int]] = {}  # (for a loop inside: what the trip reads after it)
    later = set(exe.out_slots)
    for p in range(len(exe.steps) - 1, -1, -1):
        if exe.steps[p].kind == "control":
            read_after[p] = set(later)
        later.update(exe.steps[p].inputs)
    return mark_lingering([
        while_op(exe, step, index, read_after[p], set()) if step.kind == "control"
        else step_op(exe, step, index, gemm) for p, step in enumerate(exe.steps)])


def while_op(exe, step, index, read_after: set[int], unwritten: set[int]) -> list[int]:
    """A while loop the CPU backend drives natively (``NativeLoop``) as one op of the program,
    so that a program of many rolled loops (a triangular nest's inner loops) makes no trip
    through Python per loop; _Unsupported where the loop has no native driver.

    Each state leaf is handled as the Python driver handles it (``control.make_control_runner``):
    run in place in the buffer the plan gave the loop (its initial value's, dead after it), or
    read in place when the body never writes it, else copied into the result's buffer and run
    there. A leaf only read is copied into its result's buffer only when something reads that
    (``read_after``); otherwise that buffer is never written, nor allocated (``unwritten``).
    The loop's temporaries live in an arena of the run; its constants are the executables' own
    arrays, which live as long as the program."""
    run = step.extra.get("run") if step.kind == "control" else None
    native = getattr(run, "native", None)
    if native is None or native_op_codes <= WHILE:
        raise _Unsupported(f"%{step.inst.name} runs as a {step.kind} step")
    body, cond = native.body, native.cond
    if len(step.inputs) != len(body.arg_slots) or len(step.outputs) != len(body.arg_slots):
        raise _Unsupported(f"%{step.inst.name}: its leaves are not its state's")
    states = []
    for k, (slot_in, slot_out) in enumerate(zip(step.inputs, step.outputs)):
        size = exe.slots[slot_in].nbytes
        if slot_in == slot_out:
            mode = 0
        elif k in run.keep:
            mode = 3 if slot_out in read_after else 2
            if mode == 2:
                unwritten.add(slot_out)
        else:
            mode = 1
        states.append((mode, index(slot_in), index(slot_out), size))
    entries, arena = [], 0
    for exe_part in (body, cond):
        state_of = {slot: k for k, slot in enumerate(exe_part.arg_slots)}
        used = _array_slots(exe_part)
        for slot in range(len(exe_part.slots)):
            if slot in state_of:
                entries.append((3, state_of[slot]))
            elif slot in exe_part.constants:
                entries.append((1, exe_part.constants[slot].ctypes.data))
            elif slot in used and exe_part._slot_types[slot] is not None:
                entries.append((2, arena))
                arena += -(-max(exe_part.slots[slot].nbytes, 1) // _ALIGN) * _ALIGN
            else:
                entries.append((1, 0))
    program = native.program.tolist()
    return [WHILE, len(entries), len(states), arena, len(program),
            *[v for e in entries for v in e], *[v for st in states for v in st], *program]


def _array_slots(exe: CpuExecutable) -> set[int]:
    return (
        {s for st in exe.steps for s in (*st.inputs, *st.outputs)}
        | set(exe.arg_slots)
        | set(exe.out_slots)
    )


class NativeLoop:
    """``run(state leaves) -> (final leaves, trips)`` for one while loop's compiled parts."""

    def __init__(self, cond: CpuExecutable, body: CpuExecutable):
        gemm = blas_gemm()
        self.cond, self.body = cond, body
        offset = len(body.slots)  # the table: the body's slots, then the condition's
        if len(cond.out_slots) != 1 or cond._slot_types[cond.out_slots[0]] is None \
                or cond._slot_types[cond.out_slots[0]][1] != np.bool_:
            raise _Unsupported("the condition does not compute one predicate")
        if len(body.arg_slots) != len(body.out_slots) or len(cond.arg_slots) != len(body.arg_slots):
            raise _Unsupported("the body's results do not match its state")
        for exe in (cond, body):
            for slot in _array_slots(exe):
                if exe._slot_types[slot] is None:
                    raise _Unsupported("a tuple-shaped buffer")
        body_ops = _ops(body, lambda s: s, gemm)
        cond_ops = _ops(cond, lambda s: s + offset, gemm)
        # each state element comes back in its own buffer, or in a temporary copied into it
        copies = []
        outs = body.out_slots
        for k, (arg, out) in enumerate(zip(body.arg_slots, outs)):
            if out == arg:
                continue
            if (
                out in body.arg_slots
                or out in body.constants
                or outs.count(out) > 1
                or body.arg_slots.count(arg) > 1
            ):
                raise _Unsupported("a state element comes back in another element's buffer")
            copies.append([COPY, arg, out, body.slots[out].nbytes])
        program = [len(cond_ops), len(body_ops) + len(copies), cond.out_slots[0] + offset]
        for op in cond_ops + body_ops + copies:
            program.extend(op)
        self.program = np.array(program, dtype=np.int64)
        self._local = threading.local()

    def _template(self) -> list:
        """This thread's buffer list: constants and the temporaries of the body and the
        condition (allocated once per thread: a run leaves nothing in them that outlives it),
        with the state's places left empty."""
        template = getattr(self._local, "template", None)
        if template is None:
            template = []
            for exe in (self.body, self.cond):
                bufs: list = [None] * len(exe.slots)
                for slot, value in exe.constants.items():
                    bufs[slot] = value
                state = set(exe.arg_slots)
                for slot in _array_slots(exe):
                    if bufs[slot] is None and slot not in state:
                        dims, dtype = exe._slot_types[slot]
                        bufs[slot] = np.empty(dims, dtype)
                template += bufs
            self._local.template = template
        return template

    def run(self, state: list[np.ndarray], limit: int) -> tuple[list[np.ndarray], int]:
        """Runs the loop on ``state`` (arrays the loop owns: written in place), at most ``limit``
        trips; the state after it and the trips run."""
        state = [v if v.flags.c_contiguous else np.array(v, order="C") for v in state]
        buffers = self._template().copy()
        offset = len(self.body.slots)
        for body_slot, cond_slot, value in zip(self.body.arg_slots, self.cond.arg_slots, state):
            buffers[body_slot] = value
            buffers[offset + cond_slot] = value
        trips = native_run_loop(self.program, buffers, limit)
        return [buffers[s] for s in self.body.arg_slots], trips


def native_loop(cond: CpuExecutable, body: CpuExecutable) -> NativeLoop | None:
    """The native driver for a loop of these compiled parts, or None where it would differ."""
    if native_run_loop is None or env_int("TOOLKIT_NATIVE_LOOP", 1, 0, 1) == 0:
        return None
    try:
        return NativeLoop(cond, body)
    except _Unsupported:
        return None
