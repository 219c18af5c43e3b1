"""The CPU backend: fused kernels emitted through llvmlite for the host CPU, dots on BLAS,
an executor that splits large kernels over threads and times every kernel when asked, and a
persistent compilation cache on disk."""
from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict

from llvmlite import ir

from ...ir.evaluator import collective_into
from ...ir.nodes import Module
from ...ir.shapes import Shape
from ...ir.structural import exact_key
from ...ir.ops import GroupOp
from ..base import Backend, register_backend
from ..buffer_plan import BufferPlan, plan_buffers
from ..library_call import library_runner, tuple_reads
from ..library_dot import make_dot
from ..llvm.elemental import CodegenUnsupported
from ..reference.interpreter import (EVALUATORS, evaluate_computation, flatten_private,
                                     flatten_value)
from .. import disk_cache
from ..control import make_control_runner
from .compiler import compile_ir_parts, host_description, load_object
from .native_program import plan_segments, slices_never_run
from .executor import CpuExecutable, Step, num_threads
from .native import ctypes_function
from ..llvm.planning import emit_or_discard
from ..llvm.shared_code import SharedCode
from ..llvm.vector_math import keep_vector_variants
from ..llvm.planning import (
    KernelSpec,
    as_computation,
    elementwise_in_place_operands,
    kernel_key,
    memoized,
    plan_kernel,
    plan_update_in_place,
    update_in_place_operand,
)
from .kernels import PACKED_FROM, emit_kernel, packed_symbol, row_grain
from .native_loop import native_loop
from .row_groups import RowGroup, emit_driver, find_row_groups


def _fallback(step: Step, inst, reason: str, fallbacks: list[str]) -> None:
    """Run ``inst`` with the reference interpreter (correct, slow) and say so."""
    fallbacks.append(f"%{inst.name}: {reason}")
    comp = inst.attrs["to_apply"] if inst.opcode == "call" else as_computation(inst)
    step.kind = "fallback"
    step.extra["run"] = lambda ins: flatten_value(evaluate_computation(comp, ins))


def _is_full_reduction(spec: KernelSpec) -> bool:
    hero = next(o for o in spec.outputs if o.opcode == "reduce")
    return len(hero.attrs["dimensions"]) == hero.operands[0].shape.rank


def _plan(module: Module, fallbacks: list[str]) -> BufferPlan[Step]:
    update_in_place = memoized(update_in_place_operand)
    reads = tuple_reads(module)
    overwritable = memoized(elementwise_in_place_operands)

    def make_step(inst, inputs, outs) -> Step:
        if inst.opcode == "dot":
            return Step("dot", inst, inputs, outs, extra={"run": make_dot(inst)})
        if inst.opcode in GroupOp.CONTROL:  # host control over compiled computations
            return Step(
                "control",
                inst,
                inputs,
                outs,
                extra={
                    "run": make_control_runner(
                        inst,
                        compile_nested,
                        native_while=native_loop,
                        # state leaves planned into their initial value's (dead) buffer
                        owned=frozenset(
                            j for j, (i, o) in enumerate(zip(inputs, outs)) if i == o
                        ),
                        share_unwritten=True,
                    )
                },
            )
        if inst.opcode in GroupOp.COLLECTIVE:
            # between kernels, on the calling thread: the device it runs as (an SPMD run's
            # thread, ir/collectives.on_device) meets its group's devices in shared memory
            if isinstance(inst.shape, Shape):  # into the program's buffer: no copy
                return Step("collective", inst, inputs, outs,
                            extra={"run": lambda ins, out: collective_into(inst, ins, out[0])})
            # (the tuple all-to-all: its results are its own, made for this device: no copy)
            evaluate = EVALUATORS[inst.opcode]
            return Step("library", inst, inputs, outs,
                        extra={"run": lambda ins: flatten_private(evaluate(inst, ins))})
        if inst.opcode in GroupOp.LIBRARY:  # library calls (NumPy's sort, LAPACK), as XLA:CPU's
            return Step("library", inst, inputs, outs,
                        extra={"run": library_runner(inst, reads.get(id(inst)))})
        step = Step("kernel", inst, inputs, outs)
        try:
            if inst.opcode == "call":
                raise CodegenUnsupported("call (the call-inliner pass removes these)")
            in_place = update_in_place(inst)
            spec = (
                plan_update_in_place(inst)
                if in_place is not None and outs[0] in inputs
                else plan_kernel(inst)
            )
            spec.in_place = outs[0] in inputs
            if (
                spec.in_place
                and inputs.count(outs[0]) == 1
                and len(inputs) == len(spec.computation.parameters)
            ):
                spec.aliased_parameter = inputs.index(outs[0])
        except CodegenUnsupported as e:
            _fallback(step, inst, str(e), fallbacks)
            return step
        full = spec.kind == "row" and _is_full_reduction(spec)
        # a full reduction splits into partial results, unless it also writes extra
        # outputs: then it runs on one thread (work 0 keeps it below the threshold)
        partials = full and all(o.opcode == "reduce" for o in spec.outputs)
        step.extent = spec.extent
        step.work = spec.split_work
        step.splittable = partials or not full
        step.reducers = [spec.reducers[id(o)] for o in spec.outputs] if partials else []
        step.full_reduction = partials
        step.grain = row_grain(spec) if spec.kind == "row" and not full else 1
        step.extra["spec"] = spec
        return step

    return plan_buffers(
        module,
        make_step,
        update_in_place,
        overwritable,
        loop_state_in_place=True,
    )


def _with_groups(steps, groups, machine) -> list[Step]:
    """``steps`` with each row group's members replaced by one step that calls its driver."""
    for group in groups:
        addr = machine.address(group.symbol)
        if not addr:  # a cached object built without this group (another threshold): run ungrouped
            continue
        first = steps.index(group.members[0])
        member_ids = {id(m) for m in group.members}
        step = Step(
            "group",
            group.members[-1].inst,
            list(group.slots),
            [s for m in group.members for s in m.outputs],
            fn=ctypes_function(addr, len(group.slots)),
            extent=group.rows,
            work=sum(m.work for m in group.members),
            extra={"group": group, "machine": machine},
        )
        steps = steps[:first] + [step] + [s for s in steps[first:] if id(s) not in member_ids]
    return steps


KERNELS_PER_PART = 48  # below this many kernels a program compiles as one module


def _part_count(distinct_kernels: int) -> int:
    return max(1, min(num_threads(), distinct_kernels // KERNELS_PER_PART))


def share_identical_kernels(kernels) -> int:
    """Point every kernel whose code would repeat an earlier one's (an unrolled loop's trips) at
    that one's symbol, so it is generated and compiled once; the number shared."""
    first: dict[tuple, str] = {}
    shared = 0
    for step in kernels:
        symbol = first.setdefault(kernel_key(step.extra["spec"]), step.inst.name)
        step.extra["symbol"] = symbol
        shared += symbol != step.inst.name
    return shared


def symbol(step) -> str:
    """The function a kernel step calls: its own, or an identical earlier kernel's."""
    return step.extra.get("symbol", step.inst.name)


# A kernel of at most this many elements of work is compiled without LLVM's optimisation
# pipeline: a scalar update in an unrolled triangular loop (A[i, j] -= A[i, :j] @ A[:j, j]) runs
# in nanoseconds either way, but O3 spent about 60 ms on each, and such a program has thousands.
TINY_KERNEL_WORK = 16
# In a program of at least SMALL_KERNELS_FROM distinct kernels (an unrolled loop's trips that
# differ in shape), a kernel of at most SMALL_KERNEL_WORK elements is optimised for size: LLVM's
# vectorisers and unroller spent 80 % of the compile of a row-by-row rank-k update on 240 such
# kernels (4.5 s of LLVM, then 1.3 s), and at a few hundred elements a vector loop saves
# nanoseconds per run. A program of few kernels keeps O3 for all of them.
SMALL_KERNEL_WORK = 1024
SMALL_KERNELS_FROM = 8


def _calls_a_function(function: ir.Function) -> bool:
    return any(isinstance(i, ir.CallInstr) for block in function.blocks
               for i in block.instructions)


_FAST_MATH = frozenset(("fast", "reassoc", "contract", "nnan", "ninf", "nsz", "arcp", "afn"))


def _computes_alike_at_any_level(function: ir.Function) -> bool:
    """Whether any optimisation level gives this kernel the same numbers: it calls no function
    (a math call may become a vector-library variant under O3, which rounds in its own way) and
    no arithmetic may be reassociated (a reduction's ``reassoc`` flags let the vectoriser sum
    in another order)."""
    for block in function.blocks:
        for inst in block.instructions:
            if isinstance(inst, ir.CallInstr) or _FAST_MATH.intersection(
                    getattr(inst, "flags", ())):
                return False
    return True


def _compile_plainly(function: ir.Function) -> None:
    """No optimisation for this kernel, where that changes nothing but its speed: its IR calls
    no function (a math call may become a vector-library variant under O3, which rounds in its
    own way), and without the pipeline nothing reorders or contracts its arithmetic."""
    if _calls_a_function(function):
        return
    function.attributes.add("noinline")
    function.attributes.add("optnone")


def _compile_for_size(function: ir.Function) -> None:
    """LLVM's size pipeline for this kernel (``optsize``, and ``noimplicitfloat``, which keeps
    the loop and SLP vectorisers off it), where that changes nothing but its speed."""
    if not _computes_alike_at_any_level(function):
        return
    function.attributes.add("optsize")
    function.attributes.add("noimplicitfloat")


def _light_allowed() -> bool:
    """$TOOLKIT_TINY_OPT=0 compiles every kernel at O3 (to compare)."""
    return os.environ.get("TOOLKIT_TINY_OPT", "1") == "1"


def _light_optimisation(work: int, distinct_kernels: int):
    """How a kernel of ``work`` elements is compiled for speed of compile, or None for O3."""
    if not _light_allowed() or work <= 0:
        return None
    if work <= TINY_KERNEL_WORK:
        return _compile_plainly
    if work <= SMALL_KERNEL_WORK and distinct_kernels >= SMALL_KERNELS_FROM:
        return _compile_for_size
    return None


def _emit(
    name: str, steps, kernels, plan, fallbacks, parts: int = 1
) -> tuple[list[str], list[RowGroup]]:
    """The LLVM IR of every kernel and row-group driver, a text per module (kernels that cannot
    be lowered fall back, and are listed in ``fallbacks``). With ``parts`` > 1 the kernels are
    dealt out to that many modules, compiled in parallel; a driver declares members another part
    defines. A kernel identical to an earlier one is emitted once (``share_identical_kernels``),
    and one whose code repeats an earlier one's in its module is compiled once (``SharedCode``)."""
    modules = [ir.Module(name=name if parts == 1 else f"{name}.part{k}") for k in range(parts)]
    home: dict[str, ir.Module] = {}
    same_code: dict[str, str] = {}  # kernel -> the earlier kernel of its module with its code
    sharing = SharedCode()
    failed: dict[str, str] = {}
    kept = [0] * parts  # functions each module will compile
    distinct = len({symbol(step) for step in kernels})
    groups = find_row_groups(steps, plan.slots, plan.out_slots)
    # slice kernels the native program never runs (its dots read their windows in place):
    # compiled without optimisation, unless a kernel that does run shares their code
    grouped = {id(m) for g in groups for m in g.members}
    never_run = slices_never_run(steps, plan.slots, plan.out_slots)
    cold = {symbol(steps[p]) for p in never_run if id(steps[p]) not in grouped} - {
        symbol(s) for p, s in enumerate(steps)
        if s.kind == "kernel" and (p not in never_run or id(s) in grouped)}
    for step in list(kernels):
        own = symbol(step)
        if own in failed:  # the kernel this one repeats could not be lowered
            _fallback(step, step.inst, failed[own], fallbacks)
            continue
        if own in home:
            continue
        # the module with the fewest functions so far: the parts compile in parallel, so the
        # longest decides (a family of repeats compiles once per module it lands in)
        part = kept.index(min(kept))
        module = modules[part]
        try:
            emit_or_discard(module, emit_kernel, step.extra["spec"])
        except CodegenUnsupported as e:
            failed[own] = str(e)
            _fallback(step, step.inst, str(e), fallbacks)
            continue
        home[own] = module
        light = _light_optimisation(step.extra["spec"].work, distinct)
        if own in cold and _light_allowed():
            light = _compile_plainly
        if light is not None:
            light(module.globals[own])
        first = sharing.share(module, [n for n in (own, packed_symbol(own)) if n in module.globals])
        if first is None:
            kept[part] += 1
        else:
            same_code[own] = first
    for step in kernels:
        if symbol(step) in same_code:
            step.extra["symbol"] = same_code[symbol(step)]
    for module in modules:
        keep_vector_variants(module)
    for group in groups:
        module = home[symbol(group.members[0])]
        for member in group.members:  # defined in another part: linked when the engine loads both
            defined = home[symbol(member)]
            if defined is not module and symbol(member) not in module.globals:
                ir.Function(module, defined.globals[symbol(member)].function_type, symbol(member))
        emit_driver(module, group)
    return [sharing.text(m) for m in modules], groups


def _regenerate(module: Module) -> str:
    """The LLVM IR a compile of ``module`` emits: for IR views of machine code from the cache."""
    plan = _plan(module, [])
    kernels = [s for s in plan.steps if s.kind == "kernel"]
    share_identical_kernels(kernels)
    return _emit(module.name, plan.steps, kernels, plan, [])[0][0]


# Loop bodies and branches compiled, by their structure (names and metadata left out): the
# loops one nest rolls into (loop_rolling: ``for i: for j in range(i, n):``) have one body, which
# compiles once instead of once per loop (an LLVM compile of tens of ms each). Bounded.
_NESTED: OrderedDict = OrderedDict()
_NESTED_KEPT = 256
_nested_lock = threading.Lock()


def compile_nested(module: Module) -> CpuExecutable:
    """``compile_module`` for a while loop's condition or body or a conditional's branch, shared
    by every computation of the same structure. (An executable keeps no state between runs:
    each run takes its own buffers, so loops may share one.) Its kernels carry the names of
    the first computation compiled: a profile names another loop's kernels after those."""
    key = (exact_key(module.entry), module.attributes)
    with _nested_lock:
        found = _NESTED.get(key)
        if found is not None:
            _NESTED.move_to_end(key)
            return found
    compiled = compile_module(module)
    with _nested_lock:
        _NESTED[key] = compiled
        while len(_NESTED) > _NESTED_KEPT:
            _NESTED.popitem(last=False)
    return compiled


def compile_module(module: Module) -> CpuExecutable:
    t_start = time.perf_counter()
    fallbacks: list[str] = []
    plan = _plan(module, fallbacks)
    steps = plan.steps
    kernels = [s for s in steps if s.kind == "kernel"]
    shared = share_identical_kernels(kernels)
    key = disk_cache.cache_key(module.to_text(metadata=False, digest_literals=True),
                               host_description()) \
        if kernels and disk_cache.cache_dir() else None
    machine, status = None, "miss"
    if key is not None:
        object_code, found = disk_cache.load(key)
        if object_code is not None:
            try:
                machine = load_object(object_code)
            except Exception:  # noqa: BLE001 - an unloadable entry is rebuilt, never run
                found = "corrupt"
        if found in ("corrupt", "foreign", "unsafe", "unauthenticated"):
            status = f"miss ({found} cache entry rebuilt)"
    groups: list[RowGroup] = []
    if machine is None and kernels:
        distinct = len(kernels) - shared
        llvm_texts, groups = _emit(
            module.name, steps, kernels, plan, fallbacks, _part_count(distinct)
        )
        codegen_seconds = time.perf_counter() - t_start
        machine = compile_ir_parts(llvm_texts)
        machine.phases.insert(0, ("llvm_ir", codegen_seconds))
        if key is not None and machine.object_code is not None:
            disk_cache.store(key, machine.object_code)
    functions: dict[tuple[int, int], object] = {}  # (one ctypes pointer per kernel shared)
    for step in steps:
        if step.kind != "kernel":
            continue
        addr = machine.address(symbol(step))
        if not addr:  # not in the cached object: it fell back when the entry was built
            _fallback(
                step, step.inst, "not compiled (see the first compile's fallbacks)", fallbacks
            )
            continue
        arity = len(step.inputs) + len(step.outputs)
        step.address = addr
        if arity > PACKED_FROM:  # (0 in an object cached before packed entries)
            step.packed_address = machine.address(packed_symbol(symbol(step)))
        step.fn = functions.get((addr, arity))
        if step.fn is None:
            step.fn = functions[(addr, arity)] = ctypes_function(
                addr, arity, step.packed_address
            )
        step.extra["machine"] = machine  # keeps the JIT engine alive as long as the step
    # the same plan finds the same groups
    if machine is not None and machine.cache == "persistent_hit":
        groups = find_row_groups(steps, plan.slots, plan.out_slots)
        machine.regenerate = lambda: _regenerate(module)
    steps = _with_groups(steps, groups, machine)
    scratch = {s for st in steps if st.kind == "group" for s in st.extra["group"].scratch}
    executable = CpuExecutable(module, steps, plan.slots, plan.arg_slots, plan.out_slots,
                               plan.temp_slots - scratch, plan.constants, machine, fallbacks,
                               in_place_outputs=plan.in_place_outputs,
                               buffer_decisions=tuple(plan.decisions))
    executable.segments = plan_segments(executable)
    executable.cache_status = (
        "persistent_hit" if machine is not None and machine.cache == "persistent_hit" else status
    )
    return executable


def _available() -> str | None:
    try:
        import llvmlite.binding  # noqa: F401
    except ImportError as e:  # pragma: no cover - llvmlite is a core dependency
        return f"llvmlite is not installed ({e})"
    return None


register_backend(Backend("cpu", "LLVM-compiled fused kernels for the host CPU, BLAS dots", 10,
                         compile_module, _available))
