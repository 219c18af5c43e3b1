"""The backend registry: backends register themselves; the runtime asks for one by name."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

import numpy as np

from ..ir.nodes import Module


class Executable(Protocol):
    def __call__(self, args: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]: ...


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
