"""The NumPy reference interpreter, registered as the ``interpreter`` backend."""
from __future__ import annotations

from ...ir.nodes import Module
from ..base import Backend, register_backend
from .interpreter import EVALUATORS, evaluate_computation, flatten_value, run


class InterpreterExecutable:
    def __init__(self, module: Module):
        self.module = module
        self._entry = module.entry

    def __call__(self, args):
        return flatten_value(evaluate_computation(self._entry, args))


register_backend(Backend("interpreter", "NumPy reference interpreter (the oracle)", 0,
                         InterpreterExecutable), aliases=("reference",))

__all__ = ["EVALUATORS", "evaluate_computation", "run", "InterpreterExecutable"]
