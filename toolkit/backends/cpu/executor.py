"""The CPU executable: a plan of steps over buffer slots, run per call.

Steps are compiled kernels (split over threads when large), BLAS dots (NumPy's matmul into
preallocated buffers), interpreter fallbacks for the rare instruction the emitter cannot lower,
and aliases (tuple, get-tuple-element). Arguments are never written; outputs are fresh arrays
each call; temporaries are reused across calls (per thread) since they never escape."""
from __future__ import annotations

import ctypes
import operator
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from ...ir.nodes import Instruction, Module
from ...ir.ops import reducer_ufunc
from ...ir.shapes import Shape
from ..base import Executable, KernelInfo, RunContext
from ..buffer_plan import report as buffer_report
from ..control import trips_text
from .native import (  # noqa: F401  (the build's facts, imported from here by its users)
    _NATIVE_TIMED,
    _native,
    _native_call,
    native_kernel_pointers,
    native_op_codes,
    native_run_loop,
    native_run_steps,
    native_split,
)
from .threads import (  # noqa: F401  (as the native facts)
    _BUDGET,
    NATIVE_SPLIT_WORK,
    PARALLEL_THRESHOLD,
    _budget,
    _fork_join,
    available_cores,
    kernel_threads,
    num_threads,
    pool,
    split_bounds,
)


@dataclass
class Step:
    kind: str  # kernel | dot | library (a host routine: sort) | fallback
    inst: Instruction
    inputs: list[int]
    outputs: list[int]
    fn: object = None
    address: int = 0  # the kernel's entry point (the C fast path calls it without ctypes)
    # a kernel of many buffers: its packed entry (kernels.packed_symbol), which native programs
    # call with the buffers as one array; 0 where it has none
    packed_address: int = 0
    extent: int | None = None  # the [begin, end) range the kernel takes; None: it ignores it
    work: int = 0
    reducers: list[str] = field(default_factory=list)  # per output, for combining partials
    full_reduction: bool = False
    # False: one thread, whatever the work (a full reduction with extra outputs)
    splittable: bool = True
    grain: int = 1  # thread splits of [begin, end) fall on multiples of this (a row kernel's tile)
    extra: dict = field(default_factory=dict)


# the steps that are work, as a profile reports them (aliases and copies of arguments are not)
_KERNEL_KINDS = ("kernel", "dot", "library", "fallback", "control", "collective")


def slot_types(slots) -> list:
    """(dims, NumPy dtype) of each buffer slot, None for a tuple or an unused slot: what the
    view analyses (dot_views.py) read of a program's buffers."""
    return [(s.dims, s.dtype.numpy) if s is not None and not s.is_tuple else None for s in slots]


class CpuExecutable(Executable):
    def __init__(self, module: Module, steps: list[Step], slots: list[Shape | None],
                 arg_slots: list[int], out_slots: list[int], temp_slots: set[int],
                 constants: dict[int, np.ndarray], machine_code, fallbacks: list[str],
                 in_place_outputs: frozenset[int] | set[int] = frozenset(),
                 buffer_decisions: tuple = ()):
        self.module = module
        self._own_buffer_decisions = tuple(buffer_decisions)
        self.steps = steps
        self.slots = slots
        self.arg_slots = arg_slots
        self.out_slots = out_slots
        self.temp_slots = temp_slots
        self.constants = constants
        self.machine_code = machine_code
        self.fallbacks = fallbacks
        self.threads = num_threads()
        self._local = threading.local()
        # (native program or None, steps, slots to allocate first, the program's slots, the
        # step of each of its ops): runs of steps that native code runs in one call
        # (native_program.plan_segments sets them), the rest from Python
        self._segments: list[tuple] = [(None, steps, (), (), ())]
        self._one_program = None
        # a result is copied when the caller could otherwise alias something: an argument, a
        # constant, a reused temporary, or the same buffer returned twice
        # (an argument written in place is returned as itself: the caller's array, already updated)
        self.in_place_outputs = frozenset(in_place_outputs)
        seen: set[int] = set()
        self._copy_out = []
        for k, slot in enumerate(out_slots):
            self._copy_out.append(slot in seen or slot in temp_slots or slot in constants or
                                  (slot in arg_slots and k not in self.in_place_outputs))
            seen.add(slot)
        # (the usual case, several results none of which is copied: one C call takes them)
        self._take_outputs = (operator.itemgetter(*out_slots)
                              if len(out_slots) > 1 and not any(self._copy_out) else None)
        self._constant_items = list(constants.items())
        self._given_slots = frozenset(arg_slots) | frozenset(constants)
        read = {s for st in steps for s in st.inputs} | set(out_slots)
        self._unread_slots = frozenset(range(len(slots))) - read
        self._slot_types = slot_types(slots)
        self.plain_run = self._single_kernel_run()

    @property
    def segments(self) -> list[tuple]:
        return self._segments

    @segments.setter
    def segments(self, value: list[tuple]) -> None:
        self._segments = value
        self._one_program = self._one_program_plan()

    def _one_program_plan(self):
        """For a program that is one native segment (native_program.py) and returns no copy:
        what ``run`` needs to call it straight from the arguments, without the buffer table of
        every slot: the program, the places of the arguments and of the fresh outputs in its
        buffer list, and the places of the results. None for any other program."""
        if len(self._segments) != 1 or any(self._copy_out):
            return None
        program, _, allocate, slots, _ = self._segments[0]
        if program is None:
            return None
        place = {slot: k for k, slot in enumerate(slots)}
        if any(slot not in place for slot in self.out_slots):
            return None
        given = set(self.arg_slots)
        arguments = tuple((place[slot], k) for k, slot in enumerate(self.arg_slots)
                          if slot in place)
        fresh = tuple((place[slot], *self._slot_types[slot]) for slot in allocate
                      if slot not in given)
        outs = tuple(place[slot] for slot in self.out_slots)
        take = operator.itemgetter(*outs) if len(outs) > 1 else None
        return program, tuple(slots), arguments, fresh, outs, take

    def _one_program_base(self, slots) -> list:
        """This thread's buffer list of the one native segment before the arguments and
        outputs: its constants and the temporaries it reuses from call to call."""
        template = getattr(self._local, "template", None)
        if template is None:
            template = self._template()
        base = [template[slot] for slot in slots]
        self._local.one_base = base
        return base

    @property
    def llvm_ir(self) -> str:
        return self.machine_code.llvm_ir if self.machine_code else ""

    @property
    def asm(self) -> str:
        return self.machine_code.asm if self.machine_code else ""

    @property
    def compile_phases(self):
        return self.machine_code.phases if self.machine_code else []

    def stages(self):
        return {
            "llvm": lambda: self.llvm_ir,
            "asm": lambda: self.asm,
            "buffers": lambda: buffer_report(self.buffer_decisions),
        }

    @property
    def buffer_decisions(self) -> tuple:
        """The buffer plan's in-place writes and inserted copies, with those of the loop bodies
        and branches it runs (each names its computation)."""
        found = []
        pending = [self]
        while pending:  # iterative: loops nest
            exe = pending.pop()
            found.extend(exe._own_buffer_decisions)
            for step in reversed(exe.steps):
                pending.extend(
                    reversed(
                        [p for p in getattr(step.extra.get("run"), "programs", ())
                         if isinstance(p, CpuExecutable)]
                    )
                )
        return tuple(found)

    def kernels(self) -> tuple[KernelInfo, ...]:
        found = []
        for step in self.steps:
            if step.kind == "group":  # a row group: one compiled driver running its members
                found.extend(KernelInfo(m.inst.name, "kernel", m.inst)
                             for m in step.extra["group"].members)
            elif step.kind in _KERNEL_KINDS:
                found.append(KernelInfo(step.inst.name, step.kind, step.inst))
        return tuple(found)

    def _single_kernel_run(self):
        """``run(args) -> result`` for the commonest small program: one kernel on one thread
        reading the arguments (C-contiguous ones, in any order) and writing one fresh output;
        the dispatch fast path calls it directly. None for any other program."""
        if _native_call is None or len(self.steps) != 1 or len(self.out_slots) != 1:
            return None
        step = self.steps[0]
        if (step.kind != "kernel" or not step.address or not set(step.inputs) <= set(self.arg_slots)
                or len(step.outputs) != 1 or step.outputs != self.out_slots or self._copy_out[0]
                or step.outputs[0] in self.arg_slots or len(step.inputs) + 1 > 16
                or (self.threads > 1 and step.work >= PARALLEL_THRESHOLD and step.splittable)
                or self.native_threads(step) > 1):  # (a one-op native program splits it)
            return None
        dims, dtype = self._slot_types[step.outputs[0]]
        address, end, native, general = (
            step.address,
            1 if step.extent is None else step.extent,
            _native_call,
            self,
        )
        order = [self.arg_slots.index(slot) for slot in step.inputs]
        in_order = order == list(range(len(self.arg_slots)))

        def run(args):
            for a in args:
                if not a.flags.c_contiguous:
                    return general(args)[0]
            out = np.empty(dims, dtype)
            native(address, 0, end, *(args if in_order else [args[k] for k in order]), out)
            return out

        return run

    def _template(self) -> list:
        """This thread's slot list before the arguments: constants, and the temporaries it
        reuses from call to call (built once per thread: a call copies the list)."""
        bufs: list = [None] * len(self.slots)
        for slot, value in self._constant_items:
            bufs[slot] = value
        for slot in self.temp_slots:
            shape = self.slots[slot]
            bufs[slot] = np.empty(shape.dims, shape.dtype.numpy)
        self._local.template = bufs
        return bufs

    def _buffers(self, args) -> list:
        template = getattr(self._local, "template", None)
        bufs = (template if template is not None else self._template()).copy()
        for slot, arg in zip(self.arg_slots, args):
            # (np.ascontiguousarray would turn a 0-d array into shape (1,))
            bufs[slot] = arg if arg.flags.c_contiguous else np.array(arg, order="C")
        return bufs

    def run(self, args):
        """The unprofiled hot path: no clock, no callbacks. Runs of small kernels and matrix
        products go to native code as one call each (native_program.py)."""
        single = self.plain_run
        if single is not None:  # (one kernel: the dispatch fast path's own call)
            for arg in args:
                if not arg.flags.c_contiguous:
                    break
            else:
                return (single(args),)
        plan = self._one_program
        if plan is not None:  # (the whole program one native call: its buffers only)
            program, slots, arguments, fresh, outs, take = plan
            base = getattr(self._local, "one_base", None)
            buffers = (base if base is not None else self._one_program_base(slots)).copy()
            for place, k in arguments:
                arg = args[k]
                # (np.ascontiguousarray would turn a 0-d array into shape (1,))
                buffers[place] = arg if arg.flags.c_contiguous else np.array(arg, order="C")
            for place, dims, dtype in fresh:
                buffers[place] = np.empty(dims, dtype)
            native_run_steps(program, buffers)
            return take(buffers) if take is not None else (buffers[outs[0]],)
        bufs = self._buffers(args)
        for program, steps, allocate, slots, _ in self.segments:
            if program is not None:
                for s in allocate:
                    if bufs[s] is None:
                        self._alloc(bufs, s)
                native_run_steps(program, [bufs[s] for s in slots])
            else:
                self._run_steps(steps, bufs)
        if self._take_outputs is not None:
            return self._take_outputs(bufs)
        if len(self.out_slots) == 1:
            out = bufs[self.out_slots[0]]
            return (np.array(out) if self._copy_out[0] else out,)
        return tuple(
            np.array(bufs[s]) if copy else bufs[s]
            for s, copy in zip(self.out_slots, self._copy_out)
        )

    def _run_steps(self, steps, bufs) -> None:
        single = _budget(self.threads) == 1
        native = _native_call
        for step in steps:
            if step.kind == "kernel" and (
                single or step.work < PARALLEL_THRESHOLD or not step.splittable
            ):
                outs = [
                    bufs[s] if bufs[s] is not None else self._alloc(bufs, s) for s in step.outputs
                ]
                end = 1 if step.extent is None else step.extent
                if native is not None and step.address and len(step.inputs) + len(outs) <= 16:
                    native(step.address, 0, end, *[bufs[s] for s in step.inputs], *outs)
                else:
                    step.fn(
                        *[address(bufs[s]) for s in step.inputs],
                        *[address(o) for o in outs],
                        0,
                        end,
                    )
            else:
                self._execute(step, bufs)

    __call__ = run  # the dispatch path calls it directly: no indirection through the base class

    def run_profiled(self, args, clock, on_kernel, context: RunContext = RunContext()):
        """As ``run``, timing every kernel. Native segments run the very program an unprofiled
        call runs, with each op timed inside it (``run_steps``' times): the same kernels and
        BLAS calls on the same windows, so a profile sees what runs and changes no bits (a
        step-by-step run would copy the slices a dot reads in place, and its BLAS would sum
        in another order)."""
        bufs = self._buffers(args)
        for program, steps, allocate, slots, op_steps in self.segments:
            if program is not None:
                for s in allocate:
                    if bufs[s] is None:
                        self._alloc(bufs, s)
                buffers = [bufs[s] for s in slots]
                if on_kernel is None:
                    native_run_steps(program, buffers)
                elif _NATIVE_TIMED:
                    self._timed_program(program, buffers, op_steps, clock, on_kernel)
                else:  # (a build that times no op: the same program, its time split evenly,
                    # never another run that would read the windows from copies)
                    start = clock.now()
                    native_run_steps(program, buffers)
                    share = (clock.now() - start) / max(len(op_steps), 1)
                    for k, step in enumerate(op_steps):
                        on_kernel(step.inst, start + k * share, share, "threads=1, native "
                                  "program (time split evenly: this build times no op)")
                continue
            for step in steps:
                self._run_profiled_step(step, bufs, clock, on_kernel)
        return tuple(
            np.array(bufs[s]) if copy else bufs[s]
            for s, copy in zip(self.out_slots, self._copy_out)
        )

    def _timed_program(self, program, buffers: list, op_steps, clock, on_kernel) -> None:
        """One native segment run with each op timed inside the call (run_steps' times)."""
        times = np.zeros((len(op_steps), 3))
        offset = clock.now() - time.perf_counter()  # (run_steps' clock is perf_counter's)
        native_run_steps(program, buffers, times)
        for step, (start, end, trips) in zip(op_steps, times.tolist()):
            threads = (min(_budget(step.extra.get("split_threads", 1)), step.extent or 1)
                       if step.kind == "kernel" else 1)
            launch = (trips_text(int(trips), end - start, "native")
                      if step.kind == "control" else f"threads={threads}, native program")
            on_kernel(step.inst, start + offset, end - start, launch)

    def _run_profiled_step(self, step: Step, bufs, clock, on_kernel) -> None:
        if step.kind == "group" and on_kernel is not None:
            self._group_profiled(step, bufs, clock, on_kernel)
            return
        start = clock.now() if on_kernel is not None else 0.0
        threads = self._execute(step, bufs)
        if on_kernel is not None and step.kind in _KERNEL_KINDS:
            # a while loop: how many times it ran
            trips = getattr(step.extra.get("run"), "trips", None)
            seconds = clock.now() - start
            driver = getattr(step.extra.get("run"), "driver", None)
            on_kernel(
                step.inst,
                start,
                seconds,
                trips_text(trips, seconds, driver)
                if trips is not None
                else f"threads={threads}",
            )

    def _take(self, bufs, slot, result, loop_inputs) -> None:
        """Put ``result`` in ``slot``: nothing to do when it is already there (a loop that ran
        in its state's buffer) or when nothing reads the slot (a loop-invariant leaf of a loop's
        result); an array of the step's own (a loop's state, which nothing else holds, or a
        library routine's fresh result: ``loop_inputs`` are the arrays the step was given) is
        taken as the slot's buffer; anything else is copied in."""
        if bufs[slot] is result or slot in self._unread_slots:
            return
        dims, dtype = self._slot_types[slot]
        if (
            loop_inputs is not None
            and all(result is not given for given in loop_inputs)
            and slot not in self._given_slots
            and isinstance(result, np.ndarray)
            and result.flags.c_contiguous
            and result.flags.writeable
            and result.dtype == dtype
            and result.shape == tuple(dims)
        ):
            bufs[slot] = result
            return
        self._alloc(bufs, slot)[...] = result

    def _alloc(self, bufs, slot):
        if bufs[slot] is None:
            dims, dtype = self._slot_types[slot]
            bufs[slot] = np.empty(dims, dtype)
        return bufs[slot]

    def _execute(self, step: Step, bufs) -> int:
        if step.kind == "group":
            return self._group(step, bufs)
        ins = [bufs[s] for s in step.inputs]
        if step.kind in ("fallback", "library", "control"):
            results = step.extra["run"](ins)  # fresh arrays (a loop's: its own state)
            for slot, r in zip(step.outputs, results):
                self._take(bufs, slot, r, ins)
            return 1
        outs = [self._alloc(bufs, s) for s in step.outputs]
        if step.kind == "dot":
            step.extra["run"](ins, outs[0])
            return 1
        if step.kind == "collective":  # the meeting writes the result into the slot's buffer
            step.extra["run"](ins, outs)
            return 1
        pointers = [address(a) for a in ins] + [address(o) for o in outs]
        extent = step.extent
        if self.splits(step):
            return self._parallel(step, pointers, outs, min(_budget(self.threads), extent))
        step.fn(*pointers, 0, 1 if extent is None else extent)  # an empty range stays empty
        return 1

    def native_threads(self, step: Step) -> int:
        """The threads a native program splits this kernel step over (1: it runs whole on
        the calling thread). A full reduction is not split there: its partial results are
        combined by the Python path (``_parallel``)."""
        if (not native_split or self.threads < 2 or not step.splittable or step.full_reduction
                or step.extent is None or step.extent < 2 or step.work < NATIVE_SPLIT_WORK):
            return 1
        return self.threads

    def splits(self, step: Step) -> bool:
        """Does this kernel step run split over threads (large enough to pay the hand-off)?"""
        return (
            _budget(self.threads) > 1
            and step.splittable
            and step.extent is not None
            and step.extent >= 2
            and step.work >= PARALLEL_THRESHOLD
        )

    def _parallel(self, step: Step, pointers, outs, n: int) -> int:
        bounds = split_bounds(step.extent, n, step.grain)
        if step.full_reduction:
            # each chunk reduces into its own partial result; combined in a fixed order
            partials = [np.empty_like(outs[i]) for i in range(len(outs)) for _ in range(n)]
            per_out = len(outs)
            calls = []
            for c in range(n):
                ptrs = pointers[: len(pointers) - per_out] + [
                    address(partials[k * n + c]) for k in range(per_out)
                ]
                calls.append((ptrs, bounds[c], bounds[c + 1]))
            _fork_join(n, lambda c: step.fn(*calls[c][0], calls[c][1], calls[c][2]))
            for k, o in enumerate(outs):
                combine = reducer_ufunc(step.reducers[k])
                acc = partials[k * n]
                for c in range(1, n):
                    acc = combine(acc, partials[k * n + c])
                o[...] = acc
            return n
        _fork_join(n, lambda c: step.fn(*pointers, bounds[c], bounds[c + 1]))
        return n


    # ---- row groups (row_groups.py) ------------------------------------------------------
    def _group_threads(self, step: Step) -> int:
        threads = _budget(self.threads)
        return (
            max(1, min(threads, step.extent))
            if threads > 1 and step.work >= PARALLEL_THRESHOLD
            else 1
        )

    def _scratch(self, group, c: int) -> dict:
        """Thread ``c``'s block-sized buffers for the group's scratch slots (kept per calling
        thread)."""
        cache = getattr(self._local, "scratch", None)
        if cache is None:
            cache = self._local.scratch = {}
        key = (group.symbol, c)
        buffers = cache.get(key)
        if buffers is None:
            buffers = cache[key] = {}
            for slot in group.scratch:
                shape = self.slots[slot]
                buffers[slot] = np.empty((group.block_rows, *shape.dims[1:]), shape.dtype.numpy)
        return buffers

    def _group_start(self, step: Step, bufs):
        """The group, its thread count and each thread's [begin, end) rows; outputs allocated."""
        group = step.extra["group"]
        for s in step.outputs:
            if s not in group.scratch:
                self._alloc(bufs, s)
        n = self._group_threads(step)
        return group, n, split_bounds(group.rows, n, group.grain)

    def _group(self, step: Step, bufs) -> int:
        group, n, bounds = self._group_start(step, bufs)

        def run(c):
            scratch = self._scratch(group, c)
            step.fn(
                *[address(scratch[s] if s in scratch else bufs[s]) for s in group.slots],
                bounds[c],
                bounds[c + 1],
            )

        if n == 1:
            run(0)
        else:
            _fork_join(n, run)
        return n

    def _group_profiled(self, step: Step, bufs, clock, on_kernel) -> None:
        """The group as it runs unprofiled (its compiled driver, block by block inside one
        call), timed as a whole: profiling does not change what it measures. Each member's
        event gets a share of that time in proportion to the bytes it reads and writes (the
        members of a row group stream the same rows; the launch text says the split is an
        estimate)."""
        group = step.extra["group"]
        start = clock.now()
        threads = self._group(step, bufs)
        wall = clock.now() - start
        weights = [_bytes_touched(member.inst) for member in group.members]
        total = sum(weights) or 1.0
        blocks = -(-group.rows // group.block_rows)
        t = start
        for member, weight in zip(group.members, weights):
            share = wall * weight / total
            on_kernel(
                member.inst,
                t,
                share,
                f"threads={threads} row group of {len(group.members)} "
                f"({group.names}): {blocks} blocks of {group.block_rows} rows; time split by bytes",
            )
            t += share


def _bytes_touched(inst) -> int:
    shapes = [inst.shape, *(o.shape for o in inst.operands)]
    return sum(s.nbytes for s in shapes)


def address(a: np.ndarray) -> int:
    """The data pointer of ``a``: ~0.3 µs through a ctypes view for writable buffers, where
    ``a.ctypes.data`` costs ~1.5 µs (kept for read-only and empty arrays)."""
    if a.flags.writeable and a.nbytes:
        return ctypes.addressof(ctypes.c_char.from_buffer(a))
    return a.ctypes.data
