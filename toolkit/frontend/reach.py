"""What a traced function's code can reach of Python's own state: the objects, containers,
closure cells and module namespaces it may read or write, walked while a call is *recorded*
(traced anew, not replayed).

The walk starts from the function, its bound ``self`` (or the callable object), the call's
static arguments, the values of its closure and of the globals its code names. It follows the
attributes that code reads (the names in ``co_names`` of every function of the user's it
reaches), into lists, tuples and dict values, and into the methods of the objects it meets.
``held_generators`` swaps the random generators it finds; ``python_effects`` compares the
state it found before and after the trace. The walk is bounded (``_OBJECTS_WALKED``, depth
``_DEPTH``) and iterative; what lies beyond (a property, a C object's insides) is not seen."""
from __future__ import annotations

import dis
import functools
import types
from dataclasses import dataclass, field

import numpy

from ..ir.user_code import is_users_file
from .traced_random import GENERATOR_TYPES
from .tracer import Tracer


@dataclass
class Reached:
    # (the holder's __dict__, the attribute, the generator, the path the code reads it by)
    generators: list[tuple[dict, str, object, str]]
    # id -> (the path the code reads it by, the dict or list, its kind: "namespace" (a
    # module's), "attributes" (an object's __dict__), "dict" or "list")
    containers: dict[int, tuple[str, object, str]]
    cells: dict[int, tuple[str, object]]  # id -> (the free variable's name, the cell)
    # the names the reached code reads or writes (co_names): of a module's namespace, only
    # these are its state (a notebook's thousands of names are not compared)
    names: set[str] = field(default_factory=set)
    # data read from outside the arguments: (holder, key, value, path) for each array or number
    # found in a module's names the code uses, a closure cell (key None), an object's
    # attributes, a dict or a list (frontend.captured lifts the arrays and guards the numbers)
    captured: list[tuple[object, object, object, str]] = field(default_factory=list)
    # the names the reached code stores or deletes (globals, closure variables, attributes):
    # their values are Python state it changes (python_effects), not captured data
    stored: set[str] = field(default_factory=set)


_OBJECTS_WALKED = 512  # values looked at per walk, at most
_ITEMS_WALKED = 64  # elements of one list, tuple or dict looked at
_DEPTH = 4  # attributes followed from a root: self.blocks[0].dropout.rng


def cell_value(cell):
    """A closure cell's value, or None while its variable is not bound yet."""
    try:
        return cell.cell_contents
    except ValueError:
        return None


def function_of(fn) -> types.FunctionType | None:
    """The Python function behind ``fn``: through partials, bound methods, decorators
    (functools.wraps) and callable objects."""
    seen = 0
    while seen < 16:
        seen += 1
        if isinstance(fn, functools.partial):
            fn = fn.func
        elif hasattr(fn, "__func__"):
            fn = fn.__func__
        elif hasattr(fn, "__wrapped__"):
            fn = fn.__wrapped__
        elif isinstance(fn, types.FunctionType):
            return fn
        elif callable(fn) and isinstance(getattr(type(fn), "__call__", None), types.FunctionType):
            fn = type(fn).__call__
        else:
            return None
    return None


def _users_function(value) -> types.FunctionType | None:
    function = getattr(value, "__func__", value)  # (a bound method: its function)
    if type(function) is not types.FunctionType and hasattr(function, "__wrapped__"):
        function = function_of(function)  # (a decorated function, a tk.jit one called inside)
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


def reach(fn, args: tuple = (), kwargs: dict | None = None) -> Reached:
    """What ``fn``'s code can reach; ``args`` and ``kwargs`` are the call's (static arguments
    are objects too)."""
    reached = Reached([], {}, {})
    function = function_of(fn)
    if function is None or not is_users_file(function.__code__.co_filename):
        return reached
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
    found: dict[tuple, tuple] = {}
    for _ in range(_DEPTH + 2):  # (a function reached late may read names an object offers)
        before = len(names)
        _walk(function, roots, names, found, reached)
        if len(names) == before:
            break
    reached.generators.extend(found.values())
    reached.names = names
    return reached


def _capturable(value) -> bool:
    """Data the compiled program would otherwise hold as a constant: a NumPy array of numbers
    (lifted into a parameter) or a number (guarded)."""
    if type(value) is numpy.ndarray or isinstance(value, numpy.memmap) \
            or getattr(type(value), "__toolkit_array__", False):  # (a device array too)
        return numpy.dtype(value.dtype).kind in "biufc"
    return type(value) in (int, float, complex, bool) or (
        isinstance(value, numpy.generic) and value.dtype.kind in "biufc")


_STORES = frozenset({"STORE_GLOBAL", "STORE_DEREF", "STORE_ATTR", "DELETE_GLOBAL",
                     "DELETE_DEREF", "DELETE_ATTR"})


_GLOBAL_LOADS = frozenset({"LOAD_GLOBAL", "LOAD_NAME"})


def _loads_and_stores(code) -> tuple[set[str], set[str]]:
    """(the module names the code and its nested code (comprehensions, lambdas) read, the
    names it stores or deletes), from its bytecode."""
    loads, stores, pending = set(), set(), [code]
    while pending:
        c = pending.pop()
        for i in dis.get_instructions(c):
            if i.opname in _GLOBAL_LOADS:
                loads.add(i.argval)
            elif i.opname in _STORES:
                stores.add(i.argval)
        pending.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return loads, stores


def _walk(function, roots: list, names: set, found: dict, reached: Reached) -> None:
    functions, seen_functions = [function], {id(function)}
    objects, seen, walked = [], set(), 0
    noted = {(id(h), k) for h, k, _, _ in reached.captured}

    def note(holder, key, value, path: str) -> None:
        if _capturable(value) and (id(holder), key) not in noted:
            noted.add((id(holder), key))
            reached.captured.append((holder, key, value, path))

    def meet(path: str, value, depth: int, holder=None, attribute: str = "") -> None:
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
        meet(path, value, 0)
    while (functions or objects) and walked < _OBJECTS_WALKED:
        if functions:
            f = functions.pop()
            code = f.__code__
            names.update(code.co_names)
            loads, stores = _loads_and_stores(code)
            reached.stored.update(stores)
            reached.containers.setdefault(id(f.__globals__), ("", f.__globals__, "namespace"))
            for name, cell in zip(code.co_freevars, f.__closure__ or ()):
                reached.cells.setdefault(id(cell), (name, cell))
                note(cell, None, cell_value(cell), name)
                meet(name, cell_value(cell), 0)
            namespace = f.__globals__
            for name in code.co_names:
                if name in namespace:
                    if name in loads:
                        note(namespace, name, namespace[name], name)
                    meet(name, namespace[name], 0)
            for name in loads.difference(code.co_names):  # (read by a comprehension)
                if name in namespace:
                    note(namespace, name, namespace[name], name)
            continue
        path, value, depth = objects.pop()
        if id(value) in seen or depth >= _DEPTH:
            continue
        seen.add(id(value))
        walked += 1
        if isinstance(value, (list, tuple)):
            if type(value) is list:
                reached.containers.setdefault(id(value), (path, value, "list"))
            for k, item in enumerate(value[:_ITEMS_WALKED]):
                if type(value) is list:
                    note(value, k, item, f"{path}[{k}]")
                meet(f"{path}[{k}]", item, depth + 1)
        elif isinstance(value, dict):
            reached.containers.setdefault(id(value), (path, value, "dict"))
            for k, (key, item) in enumerate(value.items()):
                if k >= _ITEMS_WALKED:
                    break
                note(value, key, item, f"{path}[{key!r}]")
                meet(f"{path}[{key!r}]", item, depth + 1)
        elif _walkable(value):
            attributes = getattr(value, "__dict__", None)
            if not isinstance(attributes, dict):
                continue  # (a class's mappingproxy, slots: not swapped)
            reached.containers.setdefault(id(attributes), (path, attributes, "attributes"))
            for name in names.intersection(attributes):
                note(attributes, name, attributes[name], f"{path}.{name}")
                meet(f"{path}.{name}", attributes[name], depth + 1, attributes, name)
            cls = type(value) if not isinstance(value, type) else None
            if cls is not None:  # (self.method(), self.layer(x): their code reads more)
                for name in names.union(("__call__",)).intersection(vars(cls)):
                    meet(f"{path}.{name}", vars(cls)[name], depth + 1)


