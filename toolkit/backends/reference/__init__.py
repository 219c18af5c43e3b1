"""The NumPy reference interpreter, registered as the ``interpreter`` backend."""
from __future__ import annotations

from ...ir.nodes import Module
from ...ir.ops import GroupOp
from ..base import Backend, Executable, KernelInfo, RunContext, register_backend
from .interpreter import EVALUATORS, evaluate_computation, flatten_value, run


class InterpreterExecutable(Executable):
    """Runs the entry computation; each top-level instruction counts as one 'kernel'."""

    def __init__(self, module: Module):
        self.module = module
        self._entry = module.entry

    def run(self, args):
        return flatten_value(evaluate_computation(self._entry, args))

    def kernels(self) -> tuple[KernelInfo, ...]:
        return tuple(KernelInfo(i.name, "instruction", i) for i in self._entry.instructions
                     if i.opcode not in GroupOp.BOOKKEEPING)

    def run_profiled(self, args, clock, on_kernel, context: RunContext = RunContext()):
        """As ``run``, reporting ``on_kernel(instruction, start, duration)`` per instruction."""
        def observe(inst, start, end):
            if inst.opcode not in GroupOp.BOOKKEEPING:  # not work: not reported as kernels
                on_kernel(inst, start, end - start)

        return flatten_value(evaluate_computation(self._entry, args, clock=clock, observe=observe))


register_backend(Backend("interpreter", "NumPy reference interpreter (the oracle)", 0,
                         InterpreterExecutable), aliases=("reference",))

__all__ = ["EVALUATORS", "evaluate_computation", "run", "InterpreterExecutable"]
