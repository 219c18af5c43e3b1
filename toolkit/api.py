"""``jit`` and its stages: ``f.lower(*args)`` -> ``Lowered`` -> ``.compile()`` -> ``Compiled``."""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Iterable

import numpy as np

from . import backends
from .backends.base import Backend
from .frontend.errors import ArgumentTypeError, api_boundary
from .frontend.promotion import SUPPORTED
from .frontend.pytree import LEAF, flatten, unflatten
from .frontend.signature import ArgSpec, abstractify, check_hashable_static
from .frontend.trace_function import TracedProgram, trace_program
from .frontend.tracer import Tracer
from .ir.nodes import Module
from .passes.cost_analysis import cost_analysis as _cost_analysis

STAGES = ("hlo", "optimized_hlo")
_FAST_DTYPES = frozenset(SUPPORTED)


class Lowered:
    """A traced program for one abstract signature, before optimisation."""

    def __init__(self, program: TracedProgram, backend: Backend, fn_name: str):
        self._program = program
        self._backend = backend
        self.fn_name = fn_name

    @property
    def hlo(self) -> Module:
        return self._program.module

    @property
    def in_specs(self) -> tuple[ArgSpec, ...]:
        return self._program.in_specs

    def as_text(self, dialect: str = "hlo", metadata: bool = True) -> str:
        if dialect != "hlo":
            raise ValueError(f"unknown dialect {dialect!r}; toolkit prints 'hlo'")
        return self.hlo.to_text(metadata=metadata)

    def cost_analysis(self) -> dict[str, float]:
        return _cost_analysis(self.hlo)

    def compile(self) -> Compiled:
        optimized = self.hlo  # the optimisation pipeline plugs in here
        executable = self._backend.compile(optimized)
        return Compiled(self._program, optimized, executable, self._backend, self.fn_name)

    def __repr__(self) -> str:
        return f"<Lowered jit({self.fn_name}) {', '.join(s.text for s in self.in_specs)}>"


class Compiled:
    """An executable for one abstract signature, with its IR at every stage."""

    def __init__(self, program: TracedProgram, optimized: Module, executable, backend: Backend,
                 fn_name: str):
        self._program = program
        self.optimized_hlo = optimized
        self._executable = executable
        self.backend = backend.name
        self.fn_name = fn_name
        self._out_tree = program.out_tree
        self._single_output = program.out_tree.kind == "leaf"

    @property
    def hlo(self) -> Module:
        return self._program.module

    @property
    def in_specs(self) -> tuple[ArgSpec, ...]:
        return self._program.in_specs

    def as_text(self, stage: str = "optimized_hlo", metadata: bool = True) -> str:
        if stage == "hlo":
            return self.hlo.to_text(metadata=metadata)
        if stage == "optimized_hlo":
            return self.optimized_hlo.to_text(metadata=metadata)
        raise ValueError(f"unknown stage {stage!r}; available: {', '.join(STAGES)}")

    def cost_analysis(self) -> dict[str, float]:
        return _cost_analysis(self.optimized_hlo)

    def execute_flat(self, leaves: list) -> Any:
        arrays = [leaf if type(leaf) is np.ndarray else np.asarray(leaf, spec.dtype)
                  for leaf, spec in zip(leaves, self._program.in_specs)]
        results = self._executable(arrays)
        if self._single_output:
            return results[0]
        return unflatten(self._out_tree, results)

    def __call__(self, *args, **kwargs):
        leaves, _, paths = flatten((args, kwargs))
        specs = self._program.in_specs
        if len(leaves) != len(specs):
            raise ArgumentTypeError(f"compiled jit({self.fn_name}) takes {len(specs)} array "
                                    f"argument(s), got {len(leaves)}")
        for leaf, spec in zip(leaves, specs):
            shape, dtype, weak = abstractify(leaf, spec.path)
            if shape != spec.shape or dtype != spec.dtype:
                raise ArgumentTypeError(f"argument '{spec.path}' must be {spec.text} for this "
                                        f"compiled program, got {dtype}{list(shape)}")
        return self.execute_flat(leaves)

    def __repr__(self) -> str:
        return f"<Compiled jit({self.fn_name}) on {self.backend}>"


def _normalize_statics(fn, static_argnums, static_argnames):
    nums = {static_argnums} if isinstance(static_argnums, int) else set(static_argnums or ())
    names = {static_argnames} if isinstance(static_argnames, str) else set(static_argnames or ())
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # builtins and some C callables have no signature
        return None, [], frozenset(nums), frozenset(names)
    params = list(sig.parameters.values())
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    for n in list(nums):
        if n < 0:
            nums.discard(n)
            nums.add(len(positional) + n)
    for i, name in enumerate(positional):
        if name in names:
            nums.add(i)
        if i in nums:
            names.add(name)
    return sig, positional, frozenset(nums), frozenset(names)


class JitFunction:
    """A function compiled once per abstract signature and cached."""

    def __init__(self, fn: Callable, static_argnums: int | Iterable[int] = (),
                 static_argnames: str | Iterable[str] = (), backend: str | None = None):
        if not callable(fn):
            raise TypeError(f"jit expects a callable, got {type(fn).__name__}")
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.fn_name = getattr(fn, "__name__", "fn").replace("<lambda>", "lambda")
        self._sig, self._positional, self._static_nums, self._static_names = _normalize_statics(
            fn, static_argnums, static_argnames)
        self._backend_name = backend
        self._backend = backends.get_backend(backend)
        self._cache: dict[Any, Compiled] = {}

    # ---- argument handling --------------------------------------------------------------
    def _canonical(self, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        if kwargs and self._sig is not None:
            try:
                bound = self._sig.bind(*args, **kwargs)
            except TypeError as e:
                raise TypeError(f"jit({self.fn_name}): {e}") from None
            return bound.args, bound.kwargs
        return args, kwargs

    def _arg_name(self, i: int) -> str:
        return self._positional[i] if i < len(self._positional) else f"args[{i}]"

    def _split(self, args: tuple, kwargs: dict):
        statics = []
        dynamic: list[tuple[str, Any]] = []
        for i, a in enumerate(args):
            if i in self._static_nums:
                check_hashable_static(a, self._arg_name(i))
                statics.append((i, a))
            else:
                dynamic.append((self._arg_name(i), a))
        for k, v in kwargs.items():
            if k in self._static_names:
                check_hashable_static(v, k)
                statics.append((k, v))
            else:
                dynamic.append((k, v))
        return tuple(statics), dynamic

    def _signature(self, args: tuple, kwargs: dict):
        """The cache key and the array leaves of a call. The hot path: plain ndarray arguments
        skip pytree flattening; leaf paths are only computed when a trace needs them."""
        args, kwargs = self._canonical(args, kwargs)
        statics, dynamic = self._split(args, kwargs)
        leaves: list = []
        trees: list = []
        avals: list = []
        for name, value in dynamic:
            if type(value) is np.ndarray and value.dtype in _FAST_DTYPES:
                leaves.append(value)
                trees.append(LEAF)
                avals.append((value.shape, value.dtype, False))
                continue
            ls, td, ps = flatten(value, name)
            leaves.extend(ls)
            trees.append(td)
            avals.extend(abstractify(leaf, path) for leaf, path in zip(ls, ps))
        key = (tuple(trees), tuple(avals), statics, tuple(n for n, _ in dynamic))
        return key, leaves, args, kwargs

    def _paths(self, args: tuple, kwargs: dict) -> list[str]:
        _, dynamic = self._split(args, kwargs)
        return [p for name, value in dynamic for p in flatten(value, name)[2]]

    def _trace(self, key, paths, args, kwargs) -> TracedProgram:
        trees, avals, statics, names = key
        specs = [ArgSpec(p, shape, dtype, weak) for p, (shape, dtype, weak) in zip(paths, avals)]
        static_pos = {k: v for k, v in statics}

        def rebuild(params: list[Tracer]):
            it = iter(params)
            rebuilt = {name: unflatten(td, [next(it) for _ in range(td.num_leaves)])
                       for name, td in zip(names, trees)}
            new_args = [static_pos[i] if i in static_pos else rebuilt[self._arg_name(i)]
                        for i in range(len(args))]
            new_kwargs = {k: static_pos[k] if k in static_pos else rebuilt[k] for k in kwargs}
            return tuple(new_args), new_kwargs

        return trace_program(self.fn, self.fn_name, specs, rebuild)

    # ---- public -------------------------------------------------------------------------
    @api_boundary
    def lower(self, *args, **kwargs) -> Lowered:
        key, _, args, kwargs = self._signature(args, kwargs)
        program = self._trace(key, self._paths(args, kwargs), args, kwargs)
        return Lowered(program, self._backend, self.fn_name)

    @api_boundary
    def __call__(self, *args, **kwargs):
        key, leaves, cargs, ckwargs = self._signature(args, kwargs)
        compiled = self._cache.get(key)
        if compiled is None:
            if any(isinstance(leaf, Tracer) for leaf in leaves):
                return self.fn(*args, **kwargs)  # nested jit: inline into the enclosing trace
            program = self._trace(key, self._paths(cargs, ckwargs), cargs, ckwargs)
            compiled = self._cache[key] = Lowered(program, self._backend, self.fn_name).compile()
        return compiled.execute_flat(leaves)

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self, obj)

    @property
    def cache_size(self) -> int:
        return len(self._cache)

    def clear_cache(self) -> None:
        self._cache.clear()

    def __repr__(self) -> str:
        return f"<jit({self.fn_name}) backend={self._backend.name}, {len(self._cache)} compiled>"


def jit(fn: Callable | None = None, *, static_argnums=(), static_argnames=(),
        backend: str | None = None):
    """Compile ``fn`` with toolkit. Usable as ``@jit`` or ``@jit(static_argnums=...)``."""
    if fn is None:
        return functools.partial(jit, static_argnums=static_argnums,
                                 static_argnames=static_argnames, backend=backend)
    return JitFunction(fn, static_argnums, static_argnames, backend)
