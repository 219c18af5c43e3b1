"""What a backend is and what its compile returns: the ``Executable`` protocol every backend
(the interpreter, the CPU, the GPU) implements, and the registry the runtime finds backends in.

The stages above a backend (``Compiled``, ``jit``) read an executable only through this
protocol: its results' placement, its kernels, its texts, its two ways to run. Nothing above
probes an executable for optional attributes."""
from __future__ import annotations

import abc
import enum
import os
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence


from ..ir.nodes import Instruction, Module


class ResultPlacement(enum.Enum):
    """Where a program's results live after a run."""

    HOST = "host"  # NumPy arrays
    DEVICE = "device"  # device arrays, which stay on the device until the user asks for them


@dataclass(frozen=True, slots=True)
class RunContext:
    """Who runs a profiled program, for the events a backend records itself (copies between
    host and device): the jitted function and the user's line that called it."""

    function: str = ""
    location: str = ""


@dataclass(frozen=True, slots=True)
class KernelInfo:
    """One unit of work an executable runs per call: a fused kernel, a library call (BLAS,
    cuBLAS, LAPACK), a loop or branch, or an instruction run on the host."""

    name: str  # the instruction's name in the optimised module
    kind: str  # kernel | dot | library | control | fallback | host | group | instruction
    instruction: Instruction


# on_kernel(instruction, start, seconds, launch text, device=..., stream=...): one kernel ran
OnKernel = Callable[..., None]


class Executable(abc.ABC):
    """A compiled program, as every backend's ``compile(module)`` returns it.

    ``run(args)`` is the unprofiled hot path (no clock, no callbacks); ``run_profiled`` also
    reports each kernel through ``on_kernel`` on the profile's clock. Both take the leaf
    arguments in parameter order and return the leaf results."""

    #: where ``run`` leaves the results
    result_placement: ResultPlacement = ResultPlacement.HOST
    #: how the backend came by the machine code: "miss" (compiled now), "persistent_hit" (the
    #: on-disk cache), or "miss (<why the cached entry was rebuilt>)"
    cache_status: str = "miss"
    #: the backend's compile phases after the passes, in order: (name, seconds)
    compile_phases: Sequence[tuple[str, float]] = ()
    #: result positions written straight into their argument's memory (in-place updates)
    in_place_outputs: frozenset[int] = frozenset()
    #: where the buffer plan wrote an update in place and where it inserted a copy, and why
    #: (``buffer_plan.BufferDecision``), loop bodies' included
    buffer_decisions: tuple = ()
    #: ``run(args) -> the one result`` for programs simple enough to skip the general path, or
    #: None; ``jit``'s dispatch fast path calls it directly
    plain_run: Callable[[list], Any] | None = None

    @abc.abstractmethod
    def run(self, args: Sequence[Any]) -> tuple[Any, ...]:
        """Run the program on ``args``; the results, placed as ``result_placement`` says."""

    @abc.abstractmethod
    def run_profiled(self, args: Sequence[Any], clock, on_kernel: OnKernel,
                     context: RunContext = RunContext()) -> tuple[Any, ...]:
        """As ``run``, calling ``on_kernel`` once per kernel (timed on ``clock``)."""

    @abc.abstractmethod
    def kernels(self) -> tuple[KernelInfo, ...]:
        """The kernels one call runs, in order."""

    def stages(self) -> Mapping[str, Callable[[], str]]:
        """The texts this executable can show beyond the HLO (``"llvm"``, ``"asm"``, ``"ptx"``,
        ``"ptx:sm_90"`` ...), each made when asked for."""
        return {}

    def describe(self, function_name: str, arg_names: Sequence[str]) -> None:
        """Names for what the executable reports and returns: the jitted function and its
        arguments' paths (a device backend names its copies and results with them)."""

    def __call__(self, args: Sequence[Any]) -> tuple[Any, ...]:
        return self.run(args)


@dataclass(frozen=True)
class Backend:
    name: str
    description: str
    priority: int  # the highest-priority available backend is the default
    compile: Callable[[Module], Executable]
    available: Callable[[], str | None] = lambda: None  # None, or why it cannot run here


class BackendUnavailableError(RuntimeError):
    pass


_REGISTRY: dict[str, Backend] = {}
_ALIASES: dict[str, str] = {}


def register_backend(backend: Backend, aliases: Sequence[str] = ()) -> None:
    _REGISTRY[backend.name] = backend
    for alias in aliases:
        _ALIASES[alias] = backend.name


def backend_names() -> list[str]:
    return sorted(_REGISTRY)


def get_backend(name: str | None = None) -> Backend:
    """The named backend; without a name, $TOOLKIT_BACKEND or the best one available here."""
    if name is None:
        name = os.environ.get("TOOLKIT_BACKEND") or None
    if name is None:
        usable = [b for b in _REGISTRY.values() if b.available() is None]
        return max(usable, key=lambda b: b.priority)
    backend = _REGISTRY.get(_ALIASES.get(name, name))
    if backend is None:
        raise BackendUnavailableError(
            f"unknown backend {name!r}; available backends: {', '.join(backend_names())}")
    reason = backend.available()
    if reason is not None:
        raise BackendUnavailableError(f"backend {name!r} cannot run here: {reason}")
    return backend

