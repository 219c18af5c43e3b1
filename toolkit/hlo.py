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


__all__ = ["parse", "to_text", "run", "Module", "HloParseError", "VerificationError"]
