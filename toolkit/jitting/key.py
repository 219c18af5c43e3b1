"""What a call is cached under: ``JitKey``, computed from the arguments in one place.

A cache hit is one key computation and one dict lookup, so the key is built from the
arguments with as little work as possible: plain NumPy arrays and Python scalars skip the
pytree walk, and the argument paths (``params['w']``) are only computed when a trace needs
them."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..frontend.errors import UserTypeError
from ..frontend.promotion import SUPPORTED
from ..frontend.pytree import LEAF, TreeDef, flat_tree, flatten
from ..frontend.signature import ArgSpec, abstractify, check_hashable_static
from .options import Parameters

FAST_DTYPES = frozenset(SUPPORTED)
_PY_DTYPES = {float: np.dtype(np.float64), int: np.dtype(np.int64)}
_INT64 = 2 ** 63
_WEAK_PYTHON = frozenset(_PY_DTYPES.values())  # the dtypes of Python floats and ints as leaves
_PYTHON_INTS = (int, bool)  # the argument types a graph break may specialize

# (shape, dtype, weak): the abstract value of one array leaf; weak marks a Python scalar
# (True), a NumPy array (False) or a NumPy scalar (None: strongly typed, and traced as a NumPy
# scalar, immutable and returned as one)
Aval = tuple[tuple[int, ...], np.dtype, bool]


@dataclass(frozen=True, slots=True)
class JitKey:
    """One compiled program's signature: change any field and the function recompiles."""

    trees: tuple[TreeDef, ...]  # the pytree structure of each dynamic argument
    avals: tuple[Aval, ...]  # every array leaf, in order
    # (position or name, value) of static arguments (compared through _static_types)
    statics: tuple[tuple[int | str, Any], ...] = field(compare=False)
    arg_names: tuple[str, ...]  # the dynamic arguments' names, in order
    backend: str
    # the static values with their types: ``==`` takes True for 1 and (2,) for (2.0,), which
    # Python code tells apart (x[True] is not x[1]); -0.0 is not 0.0
    _static_types: tuple = field(init=False, repr=False)
    # (hashed once: a call looks its key up in several dicts, and the fields are nested tuples)
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_static_types",
                           tuple((where, _typed(value)) for where, value in self.statics))
        object.__setattr__(self, "_hash", hash((self.trees, self.avals, self._static_types,
                                                self.arg_names, self.backend)))

    def __hash__(self) -> int:
        return self._hash



def _plain_avals(values) -> list[Aval] | None:
    """The abstract values of ``values`` (a list or tuple) where they are NumPy arrays of
    supported dtypes and only that; else None."""
    # (one comprehension, then the dtypes checked as a set: 125 ns a leaf, 170 in one loop)
    found = [(a.shape, a.dtype, False) for a in values if type(a) is np.ndarray]
    if len(found) != len(values) or not FAST_DTYPES.issuperset({aval[1] for aval in found}):
        return None
    return found


def _typed(value) -> Any:
    """``value`` as the cache compares a static argument: with its type, through tuples and
    frozensets (as deep as the value nests, as the pytree walk goes); a float by its bits."""
    t = type(value)
    if t is tuple:
        return t, tuple(_typed(v) for v in value)
    if t is frozenset:
        return t, frozenset(_typed(v) for v in value)
    if t is float:
        return t, value.hex()
    return t, value


class KeyMaker:
    """Reads a call's arguments the way one jitted function's parameters say."""

    def __init__(self, fn_name: str, parameters: Parameters, backend: str):
        self.fn_name = fn_name
        self.parameters = parameters
        self.backend = backend
        # Python int arguments found to be used as numbers by Python (a graph break asked for
        # one): static from then on, while the call passes a Python int there (name -> where)
        self.specialized: dict[str, str] = {}
        # key -> (its leaves' paths, their ArgSpecs): a signature that runs in segments traces
        # (replays) on every call, and both follow from the key alone (its trees and names)
        self._described: dict[JitKey, tuple[list[str], list[ArgSpec]]] = {}

    def arg_name(self, i: int) -> str:
        positional = self.parameters.positional
        return positional[i] if i < len(positional) else f"args[{i}]"

    def is_user_static(self, position_or_name: int | str) -> bool:
        """Did the user make this argument static (static_argnums/static_argnames)?"""
        if isinstance(position_or_name, int):
            return position_or_name in self.parameters.static_nums
        return position_or_name in self.parameters.static_names

    def plain_names(self, n: int) -> tuple[str, ...]:
        return tuple(self.arg_name(i) for i in range(n))

    def is_plain(self, key: JitKey) -> bool:
        """Is ``key`` a call with positional NumPy arrays and Python floats and ints only (no
        pytrees or static arguments)? Those are the calls the dispatch fast path serves, and it
        finds their programs by ``key.avals`` alone."""
        return (not key.statics and all(t is LEAF for t in key.trees)
                and all(not weak or (shape == () and dtype in _WEAK_PYTHON)
                        for shape, dtype, weak in key.avals)
                and key.arg_names == self.plain_names(len(key.arg_names)))

    def canonical(self, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        """Keyword arguments bound to their parameters, as a positional call passes them."""
        sig = self.parameters.signature
        if kwargs and sig is not None:
            try:
                bound = sig.bind(*args, **kwargs)
            except TypeError as e:
                raise UserTypeError(f"jit({self.fn_name}): {e}") from None
            return bound.args, bound.kwargs
        return args, kwargs

    def split(self, args: tuple, kwargs: dict) -> tuple[tuple, list[tuple[str, Any]]]:
        """The static arguments ``((position or name, value), ...)`` and the dynamic ones."""
        static_nums, static_names = self.parameters.static_nums, self.parameters.static_names
        statics = []
        dynamic: list[tuple[str, Any]] = []
        specialized = self.specialized
        for i, a in enumerate(args):
            if i in static_nums:
                check_hashable_static(a, self.arg_name(i))
                statics.append((i, a))
            elif specialized and type(a) in _PYTHON_INTS and self.arg_name(i) in specialized:
                statics.append((i, a))
            else:
                dynamic.append((self.arg_name(i), a))
        for k, v in kwargs.items():
            if k in static_names:
                check_hashable_static(v, k)
                statics.append((k, v))
            elif specialized and type(v) in _PYTHON_INTS and k in specialized:
                statics.append((k, v))
            else:
                dynamic.append((k, v))
        return tuple(statics), dynamic

    def key(self, args: tuple, kwargs: dict) -> tuple[JitKey, list, tuple, dict]:
        """The key and the array leaves of a call, and its canonical arguments."""
        args, kwargs = self.canonical(args, kwargs)
        statics, dynamic = self.split(args, kwargs)
        leaves: list = []
        trees: list = []
        avals: list = []
        for name, value in dynamic:
            t = type(value)
            if (t is np.ndarray or isinstance(value, np.generic)) and value.dtype in FAST_DTYPES:
                leaves.append(value)
                trees.append(LEAF)
                avals.append((value.shape, value.dtype, False if t is np.ndarray else None))
                continue
            if t is float or t is int and -_INT64 <= value < _INT64:
                leaves.append(value)
                trees.append(LEAF)
                avals.append(((), _PY_DTYPES[t], True))
                continue
            if t is list or t is tuple:  # (a list of arrays: no walk, no paths)
                plain = _plain_avals(value)
                if plain is not None:
                    leaves.extend(value)
                    trees.append(flat_tree("list" if t is list else "tuple", len(value)))
                    avals.extend(plain)
                    continue
            ls, td, ps = flatten(value, name)
            leaves.extend(ls)
            trees.append(td)
            avals.extend(abstractify(leaf, path) for leaf, path in zip(ls, ps))
        key = JitKey(tuple(trees), tuple(avals), statics, tuple(n for n, _ in dynamic),
                     self.backend)
        return key, leaves, args, kwargs

    def described(self, key: JitKey, args: tuple, kwargs: dict) -> tuple[list[str], list]:
        """``paths`` and ``specs`` of a call with ``key``, remembered per key (at most 256)."""
        found = self._described.get(key)
        if found is None:
            paths = self.paths(args, kwargs)
            found = (paths, self.specs(key, paths))
            if len(self._described) >= 256:
                self._described.clear()
            self._described[key] = found
        return found

    def paths(self, args: tuple, kwargs: dict) -> list[str]:
        """Every array leaf's path (``x``, ``params['w']``), in the key's order."""
        _, dynamic = self.split(args, kwargs)
        return [p for name, value in dynamic for p in flatten(value, name)[2]]

    @staticmethod
    def specs(key: JitKey, paths: list[str]) -> list[ArgSpec]:
        return [ArgSpec(p, shape, dtype, weak) for p, (shape, dtype, weak) in zip(paths, key.avals)]
