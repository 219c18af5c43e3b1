"""Random generators held by objects (``self.rng``, ``config.rng``), seen while a call is traced.

A generator the traced code names directly, in its module or a closure, is swapped for a
``GeneratorProxy`` by ``frontend.namespace``. One held by an object is reached through an
attribute, ``self.rng.normal(...)``, which no name swap sees: its draw would run once, when
traced, and every later call would reuse those numbers (a dropout mask that never changes).

So, while a call is *recorded* (traced anew, not replayed), the objects its code can reach are
walked: from the function, its bound ``self``, the values of its closure and of the globals
its code names, through the attributes its code reads (the names in ``co_names`` of every
function of the user's reached), into lists, tuples and dict values. A generator found as an
attribute is swapped in the holder's ``__dict__`` for a ``GeneratorProxy`` until the trace
ends: its draw then makes the call run its Python on every call, in segments, as a module-level
generator's does. A replayed call needs no swap: its signature runs in segments already, so
its Python, the draw included, runs for real. The walk is bounded (``_OBJECTS_WALKED``) and
iterative; what it does not reach (a generator behind a property, or past the bound) is not
swapped."""
from __future__ import annotations

import types

import numpy

from ..ir.user_code import is_users_file
from .traced_random import GENERATOR_TYPES, GeneratorProxy
from .tracer import Tracer

_OBJECTS_WALKED = 512  # values looked at per walk, at most
_ITEMS_WALKED = 64  # elements of one list, tuple or dict looked at
_DEPTH = 4  # attributes followed from a root: self.blocks[0].dropout.rng


def _function_of(fn):
    from .namespace import _function_of as resolve  # (namespace imports this module)

    return resolve(fn)


def _users_function(value) -> types.FunctionType | None:
    function = getattr(value, "__func__", value)  # (a bound method: its function)
    if type(function) is types.FunctionType and is_users_file(function.__code__.co_filename):
        return function
    return None


def _walkable(value) -> bool:
    """An object whose attributes may hold a generator: the user's instances, classes and
    modules, not NumPy's, toolkit's or Python's own."""
    if isinstance(value, types.ModuleType):
        return is_users_file(getattr(value, "__file__", None) or "<unknown>")
    module = getattr(type(value) if not isinstance(value, type) else value, "__module__", "")
    return (module or "").split(".")[0] not in ("numpy", "toolkit", "builtins", "jax")


def _walkable_argument(value) -> bool:
    """A static argument that may hold a generator (not an array, number, string or tracer)."""
    return not isinstance(value, (int, float, complex, str, bytes, type(None), Tracer,
                                  numpy.ndarray, numpy.generic)) and _walkable(value)


def held_generators(fn, args: tuple = (), kwargs: dict | None = None
                    ) -> list[tuple[dict, str, object, str]]:
    """Each generator ``fn``'s code can reach through an object's attribute, as (the holder's
    ``__dict__``, the attribute, the generator, the path the code reads it by); ``args`` and
    ``kwargs`` are the call's (static arguments are objects too)."""
    function = _function_of(fn)
    if function is None or not is_users_file(function.__code__.co_filename):
        return []
    if isinstance(fn, types.MethodType):  # tk.jit(model.forward)
        roots = [("self", fn.__self__)]
    elif callable(fn) and not isinstance(fn, (types.FunctionType, types.BuiltinFunctionType)) \
            and not hasattr(fn, "__wrapped__") and not hasattr(fn, "func"):
        roots = [("self", fn)]  # tk.jit(model), a callable object
    else:
        roots = []
    code = function.__code__
    offset = len(roots) if roots and type(fn) is types.MethodType else 0
    parameters = code.co_varnames[offset:code.co_argcount + code.co_kwonlyargcount]
    for k, value in enumerate(args):
        if _walkable_argument(value):
            roots.append((parameters[k] if k < len(parameters) else f"argument {k}", value))
    for name, value in (kwargs or {}).items():
        if _walkable_argument(value):
            roots.append((name, value))
    names: set[str] = set()
    found: dict[int, tuple] = {}
    for _ in range(_DEPTH + 2):  # (a function reached late may read names an object offers)
        before = len(names)
        _walk(function, roots, names, found)
        if len(names) == before:
            break
    return list(found.values())


def _walk(function, roots: list, names: set, found: dict) -> None:
    functions, seen_functions = [function], {id(function)}
    objects, seen, walked = [], set(), 0

    def reach(path: str, value, depth: int, holder=None, attribute: str = "") -> None:
        if isinstance(value, GENERATOR_TYPES):
            if holder is not None:
                found.setdefault((id(holder), attribute), (holder, attribute, value, path))
            return
        f = _users_function(value)
        if f is not None:
            if id(f) not in seen_functions:
                seen_functions.add(id(f))
                functions.append(f)
            owner = getattr(value, "__self__", None)  # (self.forward: its self too)
            if owner is not None and owner is not value:
                objects.append((path, owner, depth))
            return
        objects.append((path, value, depth))

    for path, value in roots:
        reach(path, value, 0)
    while (functions or objects) and walked < _OBJECTS_WALKED:
        if functions:
            f = functions.pop()
            code = f.__code__
            names.update(code.co_names)
            for name, cell in zip(code.co_freevars, f.__closure__ or ()):
                try:
                    reach(name, cell.cell_contents, 0)
                except ValueError:  # (not bound yet)
                    pass
            namespace = f.__globals__
            for name in code.co_names:
                if name in namespace:
                    reach(name, namespace[name], 0)
            continue
        path, value, depth = objects.pop()
        if id(value) in seen or depth >= _DEPTH:
            continue
        seen.add(id(value))
        walked += 1
        if isinstance(value, (list, tuple)):
            for k, item in enumerate(value[:_ITEMS_WALKED]):
                reach(f"{path}[{k}]", item, depth + 1)
        elif isinstance(value, dict):
            for k, (key, item) in enumerate(value.items()):
                if k >= _ITEMS_WALKED:
                    break
                reach(f"{path}[{key!r}]", item, depth + 1)
        elif _walkable(value):
            attributes = getattr(value, "__dict__", None)
            if not isinstance(attributes, dict):
                continue  # (a class's mappingproxy, slots: not swapped)
            for name in names.intersection(attributes):
                reach(f"{path}.{name}", attributes[name], depth + 1, attributes, name)
            cls = type(value) if not isinstance(value, type) else None
            if cls is not None:  # (self.method(), self.layer(x): their code reads more)
                for name in names.union(("__call__",)).intersection(vars(cls)):
                    reach(f"{path}.{name}", vars(cls)[name], depth + 1)


class generators_held_by_objects_traced:
    """Swap each held generator for a ``GeneratorProxy`` for the duration of a recorded trace
    (``recording`` False: a replay, nothing is swapped)."""

    __slots__ = ("swapped",)

    def __init__(self, fn, recording: bool, args: tuple = (), kwargs: dict | None = None):
        self.swapped = []
        if recording:
            for holder, attribute, generator, path in held_generators(fn, args, kwargs):
                proxy = GeneratorProxy(generator, path)
                holder[attribute] = proxy
                self.swapped.append((holder, attribute, generator, proxy))

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        for holder, attribute, generator, proxy in self.swapped:
            if holder.get(attribute) is proxy:  # unless the traced code rebound it itself
                holder[attribute] = generator
