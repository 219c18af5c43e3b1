"""``tk.hlo``: read, print and run HLO text (toolkit's own, or what JAX and XLA print)."""
from __future__ import annotations

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


def run(module: Module, *args, backend: str = "interpreter") -> tuple:
    """Execute ``module`` on NumPy arrays; returns a tuple of arrays (the flattened results)."""
    if backend not in ("interpreter", "reference"):
        from .backends import get_backend
        from .backends.reference.interpreter import coerce_arguments

        return get_backend(backend).compile(module)(coerce_arguments(module, args))
    return _interpret(module, *args)


__all__ = ["parse", "to_text", "run", "Module", "HloParseError", "VerificationError"]
