"""What ``jit(fn, ...)`` was asked for, checked once when the function is wrapped."""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Iterable

from .. import backends
from ..backends.base import Backend
from ..passes.pipeline import PIPELINES
from ..runtime import history
from ..stages import DEFAULT_PIPELINE

# Compiled programs kept per jitted function (least recently used go first; each holds its
# machine code, ~0.2 MB on the CPU). An eviction is named as the cause of a later recompile.
DEFAULT_CACHE_SIZE = 256


@dataclass(frozen=True)
class Parameters:
    """How a function's arguments are read: its signature (None for callables without one),
    its positional parameter names, and which arguments are static (by position and name,
    each completed from the other)."""

    signature: inspect.Signature | None
    positional: tuple[str, ...]
    static_nums: frozenset[int]
    static_names: frozenset[str]


@dataclass(frozen=True)
class JitOptions:
    backend: Backend
    pipeline: str = DEFAULT_PIPELINE
    dump_passes: str | None = None
    on_recompile: str = "warn"
    max_recompiles: int = history.DEFAULT_MAX_RECOMPILES
    cache_size: int = DEFAULT_CACHE_SIZE
    fullgraph: bool = False  # graph breaks are errors (torch.compile's name)
    # a signature whose calls break the graph many times may run as plain NumPy where that
    # measured faster (jitting.eager)
    numpy_fallback: bool = True

    @property
    def keyed(self) -> tuple[tuple[str, str], ...]:
        """The options a compiled program depends on, as a recompile report names them."""
        return (("pipeline", self.pipeline), ("dump_passes", str(self.dump_passes)))


def make_options(backend: str | None, pipeline: str, dump_passes: str | None, on_recompile: str,
                 max_recompiles: int, cache_size: int, fullgraph: bool = False,
                 numpy_fallback: bool = True) -> JitOptions:
    if on_recompile not in history.POLICIES:
        raise ValueError(f"on_recompile must be one of {history.POLICIES}, got {on_recompile!r}")
    if pipeline not in PIPELINES:
        raise ValueError(f"unknown pipeline {pipeline!r}; available: {', '.join(PIPELINES)}")
    if int(cache_size) < 1:
        raise ValueError(f"cache_size must be at least 1, got {cache_size}")
    return JitOptions(backends.get_backend(backend), pipeline, dump_passes, on_recompile,
                      int(max_recompiles), int(cache_size), bool(fullgraph), bool(numpy_fallback))


def read_parameters(fn, static_argnums: int | Iterable[int],
                    static_argnames: str | Iterable[str]) -> Parameters:
    """``fn``'s parameters, with ``static_argnums``/``static_argnames`` checked against them."""
    nums = {static_argnums} if isinstance(static_argnums, int) else set(static_argnums or ())
    names = {static_argnames} if isinstance(static_argnames, str) else set(static_argnames or ())
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # builtins and some C callables have no signature
        return Parameters(None, (), frozenset(nums), frozenset(names))
    params = list(sig.parameters.values())
    positional = [p.name for p in params
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    var_positional = any(p.kind == p.VAR_POSITIONAL for p in params)
    var_keyword = any(p.kind == p.VAR_KEYWORD for p in params)
    name = getattr(fn, "__name__", "fn")
    bad_nums = sorted(n for n in nums if not -len(positional) <= n < len(positional))
    if bad_nums and not var_positional:
        raise ValueError(
            f"jit({name}) has static_argnums={tuple(sorted(nums))}, but {name} accepts only "
            f"{len(positional)} positional argument(s): {', '.join(positional) or 'none'}")
    keyword_names = {p.name for p in params
                     if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    bad_names = sorted(names - keyword_names)
    if bad_names and not var_keyword:
        raise ValueError(f"jit({name}) has static_argnames {bad_names} that {name} does not "
                         f"take; its arguments are: {', '.join(sig.parameters) or 'none'}")
    for n in list(nums):
        if n < 0:
            nums.discard(n)
            nums.add(len(positional) + n)
    for i, param in enumerate(positional):
        if param in names:
            nums.add(i)
        if i in nums:
            names.add(param)
    return Parameters(sig, tuple(positional), frozenset(nums), frozenset(names))
