"""``tk.hlo``: read, print and run HLO text (toolkit's own, or what JAX and XLA print)."""
from __future__ import annotations

import numpy as np

from .backends.reference.interpreter import run as _interpret
from .ir.nodes import Module
from .ir.parser import HloParseError, parse_module
from .ir.printer import module_to_text
from .ir.verifier import VerificationError, verify


def parse(text: str) -> Module:
    """Parse and verify HLO text; errors carry line and column."""
    return verify(parse_module(text))


def to_text(module: Module, metadata: bool = True) -> str:
    return module_to_text(module, metadata=metadata)


def run(module: Module, *args, backend: str = "interpreter", pipeline: str = "default") -> tuple:
    """Execute ``module`` on NumPy arrays; returns a tuple of arrays (the flattened results).
    The reference interpreter runs the module as written; other backends compile it after the
    optimisation ``pipeline``."""
    if backend in ("interpreter", "reference"):
        _one_device(module)
        return _interpret(module, *args)
    from .backends import get_backend
    from .backends.reference.interpreter import EVALUATORS, coerce_arguments
    from .passes.pipeline import make_pipeline

    from .backends.buffer_plan import donated_arguments

    optimized = make_pipeline(pipeline, EVALUATORS).run(module).module
    arrays = list(coerce_arguments(module, args))
    for number in set(donated_arguments(module).values()):  # a backend may write those in place:
        # run() leaves the caller's arrays alone
        arrays[number] = np.array(arrays[number])
    return get_backend(backend).compile(optimized)(arrays)


def _one_device(module: Module) -> None:
    """A module whose header asks for several devices and whose collectives would combine
    their values cannot run as one device: its all-reduce would return the operand unsummed."""
    from .backends.reference.spmd import device_counts
    from .ir.ops import GroupOp

    replicas, partitions = device_counts(module, None, None)
    if replicas * partitions > 1 and any(
            i.opcode in GroupOp.COLLECTIVE for c in module.computations for i in c.instructions):
        raise ValueError(
            f"module {module.name} runs on {replicas * partitions} devices ({replicas} "
            f"replica(s) x {partitions} partition(s)) and its collectives combine their values: "
            "run it with tk.hlo.run_spmd(module, device_args)")


def run_spmd(module: Module, device_args, *, replicas: int | None = None,
             partitions: int | None = None, timeout: float | None = None) -> list[tuple]:
    """Run an SPMD ``module`` on the reference interpreter, one thread per device, collectives
    meeting in shared memory; ``device_args[d]``: device d's arguments (d = replica *
    partitions + partition; counts default to the header's ``replica_count`` and
    ``num_partitions``). Returns each device's results. A device that fails, or never arrives
    at a collective within ``timeout`` s (``TOOLKIT_COLLECTIVE_TIMEOUT``), is a
    ``CollectiveError`` naming it."""
    from .backends.reference.spmd import run_spmd as _run_spmd

    return _run_spmd(module, device_args, replicas=replicas, partitions=partitions,
                     timeout=timeout)


__all__ = ["parse", "to_text", "run", "run_spmd", "Module", "HloParseError",
           "VerificationError"]
