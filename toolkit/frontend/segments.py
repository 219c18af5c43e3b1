"""Graph breaks, the tracing half: cut the program traced so far into a segment, and go on
tracing into a new one.

When Python needs a concrete value (``bool(x)``, ``int(n)``, ``x[mask]`` ...) in a jitted
function that allows breaks, the jit layer's breaker (``Trace.breaker``) asks ``cut`` for the
segment traced since the last break: a module whose parameters are the values bound so far and
whose outputs are the value asked for and every traced value still alive (Python may use any of
them later). It runs that module, then ``resume`` rebinds each live tracer, in place, to a
parameter of the next segment bound to its computed value: Python's references stay valid and
the rest of the function traces on as before (PyTorch/XLA's LazyTensor and tinygrad cut their
graphs at such "sync points" the same way).

Tracers are rebound rather than replaced because user code holds them in variables, lists and
closures. Instructions held outside tracers would go stale, so the frontend asks for concrete
values only through tracers (``Tracer._concrete``, ``concrete_or_raise``)."""
from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from ..ir.builder import ModuleBuilder
from ..ir.nodes import Instruction, Metadata, Module, post_order
from .tracer import Trace, Tracer


@dataclass
class Segment:
    """The program traced since the last break, ready to compile and run."""

    module: Module
    parameters: list[Instruction]  # in parameter order; their values are bound by the breaker
    outputs: list[Tracer]  # the values it computes (the asked-for one first), deduplicated
    check_count: int  # data checks (NumPy's runtime errors), the module's last outputs
    checks: list[tuple[type, str]]
    int_limits: dict[int, tuple[int, int, np.dtype, str]]
    promotions: list
    instruction_count: int


class GraphBroken(Exception):
    """Not an error: the traced function broke its graph at least once, so its result was
    computed segment by segment while it ran (``result``); the jit layer returns it."""

    def __init__(self, result, python_ints: dict | None = None):
        super().__init__("graph break")
        self.result = result
        # Python int arguments that Python needed as numbers (name -> break site): the jit
        # layer makes them static on later calls
        self.python_ints = python_ints or {}


class SpecializeAndRetrace(BaseException):
    """Not an error: Python asked for a Python int argument as a number (``range(steps)``,
    ``if flag:``) before anything of the call had run, so the jit layer makes that argument
    static and traces the call again as one whole program, instead of compiling segments
    that later calls (which specialize it anyway) would never run again. A BaseException, so
    that a ``try: ... except Exception:`` in the user's code around the loop does not take it."""

    def __init__(self, python_ints: dict):
        super().__init__("specialize and trace again")
        self.python_ints = python_ints  # name -> the break site that asked for it


class RunAsNumpy(BaseException):
    """Not an error: a signature's first call, in segments, spent far more in its Python's
    tracing and compiling than its segments computed (``jitting.eager``: a Python loop that
    breaks every trip and traces its body anew each time), so the jit layer stops it at a
    break and runs the call as plain NumPy from its start. Nothing of the call has reached
    the caller yet (segments read their arguments, write-back comes at the return), and the
    Python state it changed is put back first (``frontend.python_effects``), as for
    ``SpecializeAndRetrace``. A BaseException for the same reason."""

    def __init__(self, breaks: int, seconds: float, run_seconds: float):
        super().__init__("run as plain NumPy")
        self.breaks = breaks  # breaks before it stopped
        self.seconds = seconds  # the call's time until it stopped
        self.run_seconds = run_seconds  # of which its segments ran (compiles not included)


def live_tracers(trace: Trace) -> list[Tracer]:
    """Tracers of ``trace`` still referenced by someone (the user's variables, or the frontend
    frame that asked for a value), in the order they were made."""
    alive, seen = [], set()
    for ref in trace.born:
        t = ref()
        if t is not None and t._trace is trace and id(t) not in seen:
            seen.add(id(t))
            alive.append(t)
    return alive


def _is_bound(inst: Instruction) -> bool:
    """A value the next segment can have without this one computing it."""
    return inst.opcode == "parameter" or inst.opcode == "constant"


def cut(trace: Trace, wanted: list[Tracer], live: list[Tracer]) -> Segment:
    """The segment that computes ``wanted`` and every live value not already bound."""
    outputs, seen, asked = [], set(), {id(t) for t in wanted}
    for t in list(wanted) + live:  # (identity: a tracer's == is NumPy's elementwise equal)
        if id(t.inst) not in seen and (id(t) in asked or not _is_bound(t.inst)):
            seen.add(id(t.inst))
            outputs.append(t)
    flags = [flag for flag, _, _ in trace.checks]
    roots = [t.inst for t in outputs] + [f.inst for f in flags]
    builder = trace.builder
    # always a tuple, even of one value: one calling convention for every segment
    root = builder.add("tuple", roots)
    own = {id(i) for i in builder._instructions}
    for inst in post_order([root]):
        if id(inst) not in own:  # an instruction held across a break, not through a tracer
            raise RuntimeError(
                f"internal error at a graph break: %{inst.name} ({inst.opcode}) from before the "
                "break was used after it; please report this (tk.jit(..., fullgraph=True) avoids "
                "the break)")
    computation = builder.build(root)
    module = trace.module.build(computation)
    parameters = [builder._parameters[n] for n in sorted(builder._parameters)]
    return Segment(module, parameters, outputs, len(flags),
                   [(error, message) for _, error, message in trace.checks],
                   dict(trace.int_limits), list(trace.promotions),
                   len(computation.instructions))


def resume(trace: Trace, live: list[Tracer], bind) -> dict[int, Instruction]:
    """Start the next segment: every live tracer becomes a parameter (or, for a constant, the
    same constant) of a fresh computation; ``bind(new_parameter, tracer, old_instruction)``
    records the value the new parameter stands for (the old instruction's computed value).
    Returns each old instruction's new one, by id (what a replay of the break rebinds)."""
    trace.module = ModuleBuilder(trace.module.name)
    trace.builder = trace.module.computation("main")
    trace._constants.clear()
    trace._known.clear()
    trace.checks = []
    trace.int_limits = {}
    trace.promotions = []
    trace.born = []
    rebound: dict[int, Instruction] = {}
    for t in live:
        old = t.inst
        new = rebound.get(id(old))
        if new is None:
            if old.opcode == "constant":
                new = trace.builder.add("constant", (), {"literal": old.attrs["literal"]},
                                        metadata=old.metadata)
            else:
                number = len(trace.builder._parameters)
                new = trace.builder.parameter(number, old.shape, f"carried_{number}",
                                              Metadata(_carried_name(t)))
                bind(new, t, old)
            rebound[id(old)] = new
        t.inst = new
        trace.born.append(weakref.ref(t))
    return rebound


def _carried_name(t: Tracer) -> str:
    md = t.inst.metadata
    return md.op_name if md is not None and md.op_name else t.inst.opcode
