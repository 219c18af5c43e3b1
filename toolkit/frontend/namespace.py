"""While a function is traced, ``np`` in its module means NumPy with traced buffers.

Real code fills arrays it makes itself: ``out = np.empty_like(x); out[0] = x[0] ...``. Such a
call sees no traced argument, so NumPy would hand back a real array, and writing a traced
value into it cannot work. So, for the duration of a trace, every global of the traced
function's module that *is* the numpy module is rebound to ``TRACING_NUMPY``: a module that is
NumPy in everything except the buffer-making functions (``BUFFER_FUNCTIONS``), which return
traced arrays while a trace is active on the calling thread. Names imported from NumPy
(``from numpy import zeros``) are rebound the same way. The bindings are restored when the
trace ends, whatever happens. So are Python's ``max`` and ``min``, where the module has no
names of its own for them: on traced scalars they are a select, not a graph break
(``traced_builtins``); and the module's own pure helpers that branch, whose data-dependent
``if``s become selects (``if_conversion``).

Where it stops: functions of *other* modules that the traced function calls keep their own
``np``; a buffer they make and fill with traced values raises an error that names
``toolkit.numpy``. A buffer that only ever holds constants keeps a value that Python can use
(``if mask.any():`` works), see ``Trace.known_value``.

``np.ndarray`` there is ``TRACED_NDARRAY``: called during a trace in the plain buffer-less form
``np.ndarray(shape, dtype=float, order=...)`` it is ``np.empty``; every other use is NumPy's
class (``isinstance``, ``issubclass``, ``==``, attributes, subscripts, subclassing). One thing
differs: ``type(a) is np.ndarray`` is False in the traced function's module while it is traced
(``is`` cannot be delegated; ``==`` can and is)."""
from __future__ import annotations

import functools
import types

import numpy

from .captured import captured_array
from .errors import DTypeMismatchError
from .if_conversion import converting
from .purity import pure_helper
from .replay import replayable_function
from .python_effects import PRINT
from .reach import cell_value, function_of
from .traced_builtins import TRACED_BUILTINS
from .traced_random import GENERATOR_TYPES, TRACING_RANDOM, GeneratorProxy
from .tracer import Tracer, current_trace

BUFFER_FUNCTIONS = ("empty", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like",
                    "full_like", "eye", "identity")


def _traced_buffer(name: str):
    from .registry import EXPORTS

    original = getattr(numpy, name)
    like = name.endswith("_like")
    base = name.removesuffix("_like") if like else name

    @functools.wraps(original)
    def buffer(*args, **kwargs):
        if current_trace() is None or any(isinstance(a, Tracer) for a in args):
            return (EXPORTS[name] if args and isinstance(args[0], Tracer) else original)(
                *args, **kwargs
            )
        try:
            if like:  # the shape and dtype of a NumPy prototype: no need to embed its data
                proto, rest = numpy.asarray(args[0]), list(args[1:])
                fill = [rest.pop(0) if rest else kwargs.pop("fill_value")] if base == "full" else []
                dtype = kwargs.pop("dtype", rest.pop(0) if rest else None)
                shape = kwargs.pop("shape", None)
                return EXPORTS[base](proto.shape if shape is None else shape, *fill,
                                     dtype=proto.dtype if dtype is None else dtype)
            if name == "identity":
                return EXPORTS["eye"](*args, **kwargs)
            return EXPORTS[name](*args, **kwargs)
        except DTypeMismatchError:  # object or string buffers: NumPy's own, as before
            return original(*args, **kwargs)

    buffer.__toolkit_buffer__ = True
    return buffer


CONVERSION_FUNCTIONS = ("asarray", "asanyarray", "array", "ascontiguousarray")


def _traced_conversion(name: str):
    """``np.asarray``/``np.asanyarray``/``np.array`` of a traced array with NumPy's identity
    rules, not a graph break: ``np.asarray(x)`` is ``x`` itself (so ``x = np.asarray(x)`` then
    ``x[0] = 5`` writes the caller's array, as in NumPy), ``np.array(x)`` a copy, and a new
    dtype a new array. A traced Python number becomes a NumPy array (no longer weak)."""
    from .registry import EXPORTS, has_tracer

    original = getattr(numpy, name)

    @functools.wraps(original)
    def convert(a, dtype=None, *args, **kwargs):
        if current_trace() is None or not (isinstance(a, Tracer) or (
                isinstance(a, (list, tuple)) and has_tracer(a))):
            return original(a, dtype, *args, **kwargs)
        if not isinstance(a, Tracer):  # (a list of traced values: stacked, a new array)
            return EXPORTS["asarray"](a, dtype)
        if name == "ascontiguousarray":
            if a._view is not None:  # (NumPy copies a view only where it is not contiguous)
                return original(a, dtype, *args, **kwargs)
            kwargs = {"ndmin": 1}  # (a traced array is C-contiguous: itself, at least 1-d)
        ndmin = kwargs.get("ndmin", 0)
        copy = kwargs.get("copy", True if name == "array" else None)
        result = a
        if dtype is not None and numpy.dtype(dtype) != a.dtype or a.weak_type:
            if copy is False:  # (NumPy's own words)
                raise ValueError("Unable to avoid copy while creating an array as requested.")
            result = EXPORTS["asarray"](a.astype(a.dtype if dtype is None else dtype)
                                        if a.weak_type else a, dtype)
        elif copy:
            result = EXPORTS["copy"](a)
        elif a._scalar:  # (a NumPy scalar: NumPy makes a 0-d array of it)
            result = Tracer(a._trace, a.inst, a.weak_type)
        if ndmin > result.ndim:  # (a view, as NumPy's)
            result = result.reshape((1,) * (ndmin - result.ndim) + tuple(result.shape))
        return result

    convert.__toolkit_buffer__ = True  # (pure: a stand-in for NumPy's own, as the buffers)
    return convert


class _TracedNdarray:
    """``np.ndarray`` inside traced code: its constructor's buffer-less form makes a traced
    empty buffer during a trace; everything else is delegated to ``numpy.ndarray``."""

    __name__ = __qualname__ = "ndarray"
    __module__ = "numpy"
    __doc__ = numpy.ndarray.__doc__

    def __call__(self, shape, dtype=float, buffer=None, offset=0, strides=None, order=None):
        plain = buffer is None and offset == 0 and strides is None
        if current_trace() is None or not plain or isinstance(shape, Tracer):
            # (a captured array lifted into a parameter: its memory, as NumPy would view it)
            return numpy.ndarray(shape, dtype, captured_array(buffer), offset, strides, order)
        from .registry import EXPORTS

        try:
            return EXPORTS["empty"](shape, dtype=dtype, order=order or "C")
        except DTypeMismatchError:  # object or string buffers: NumPy's own
            return numpy.ndarray(shape, dtype, buffer, offset, strides, order)

    def __instancecheck__(self, instance):  # (a traced array is one; a NumPy scalar is not)
        return isinstance(instance, numpy.ndarray) or (
            type(instance) is Tracer and not instance._scalar)

    def __subclasscheck__(self, cls):
        return issubclass(cls, numpy.ndarray)

    def __mro_entries__(self, bases):  # class MyArray(np.ndarray): subclasses NumPy's
        return (numpy.ndarray,)

    def __getattr__(self, name):
        return getattr(numpy.ndarray, name)

    def __getitem__(self, item):  # np.ndarray[Any, np.dtype[np.float64]]
        return numpy.ndarray[item]

    def __eq__(self, other):
        return other is numpy.ndarray or other is self

    def __hash__(self):
        return hash(numpy.ndarray)

    def __repr__(self):
        return repr(numpy.ndarray)


TRACED_NDARRAY = _TracedNdarray()


def _isscalar(element) -> bool:
    """``np.isscalar``: a traced NumPy scalar (``x[0]``, ``x.sum()``) is one, as is a traced
    Python number; a traced array, 0-d included, is not."""
    if type(element) is Tracer:
        return bool(element._scalar or (element.weak_type and not element.shape))
    return numpy.isscalar(element)


_isscalar.__name__ = _isscalar.__qualname__ = "isscalar"
_isscalar.__module__ = "numpy"


class _TracingNumpy(types.ModuleType):
    """NumPy, but its buffer functions return traced arrays during a trace."""

    def __getattr__(self, name):  # NumPy's lazily loaded attributes (np.linalg, np.testing ...)
        return getattr(numpy, name)

    def __dir__(self):
        return dir(numpy)


TRACING_NUMPY = _TracingNumpy("numpy", numpy.__doc__)
TRACING_NUMPY.__dict__.update(
    {k: v for k, v in vars(numpy).items() if k not in ("__name__", "__doc__")}
)
_REBOUND = {
    id(getattr(numpy, name)): (getattr(numpy, name), replayable_function(_traced_buffer(name)))
    for name in BUFFER_FUNCTIONS
}
_REBOUND.update({
    id(getattr(numpy, name)): (getattr(numpy, name), replayable_function(_traced_conversion(name)))
    for name in CONVERSION_FUNCTIONS
})
for _original, _buffer in _REBOUND.values():
    setattr(TRACING_NUMPY, _original.__name__, _buffer)
TRACING_NUMPY.ndarray = TRACED_NDARRAY
TRACING_NUMPY.isscalar = _isscalar
TRACING_NUMPY.random = TRACING_RANDOM  # (draws run on every call: traced_random)


def _is_library(namespace: dict) -> bool:
    name = namespace.get("__name__", "") or ""
    return name.split(".")[0] in ("numpy", "toolkit")


# Python's builtins the traced module sees as stand-ins, unless it has names of its own for
# them: max and min (traced_builtins), print (python_effects)
_STAND_IN_BUILTINS = {**TRACED_BUILTINS, "print": PRINT}
_REPLACEMENTS = {id(replacement) for _, replacement in _REBOUND.values()} | {
    id(builtin) for builtin in _STAND_IN_BUILTINS.values()}
# id(namespace) -> (the namespace, its names, its values' ids, the names to swap, its values'
# types, its functions) when last scanned: a notebook's namespace holds hundreds of names, and
# a function that breaks its graph is traced (replayed) on every call
_SCANNED: dict[int, tuple] = {}
_SCANNED_KEPT = 64
# values whose rebinding changes nothing a scan decides (a loop's counter, an array)
_DATA_TYPES = frozenset({int, float, bool, complex, str, bytes, type(None), numpy.ndarray})
_MISSING = object()


def _watched(namespace: dict) -> tuple:
    """What the reuse of a scan checks: every name bound to something other than plain data,
    with the object itself where it may be swapped (a module, a function: held, so that no
    other object takes its id) or else its id (an instance, a container: not kept alive)."""
    watched = []
    for name, value in namespace.items():
        kind = type(value)
        if kind in _DATA_TYPES or issubclass(kind, numpy.generic):
            continue
        held = callable(value) or kind is types.ModuleType
        watched.append((name, value if held else id(value), held))
    return tuple(watched)


def _unchanged(namespace: dict, found: tuple) -> bool:
    if found[0] is not namespace or len(namespace) != found[1]:
        return False
    get = namespace.get
    for name, ref, held in found[2]:
        value = get(name, _MISSING)
        if (value is not ref) if held else (id(value) != ref):
            return False
    return True


def _replacement(value, name: str, namespace: dict, verdicts: dict):
    """What ``value``, bound to ``name`` in ``namespace`` or in a closure of its code, stands
    for while that code is traced; None where it stays itself. (The cheapest test first.)"""
    if value is numpy:
        return TRACING_NUMPY
    if value is numpy.random:  # (from numpy import random)
        return TRACING_RANDOM
    if isinstance(value, GENERATOR_TYPES):  # (rng = np.random.default_rng(0) up top)
        return GeneratorProxy(value, name)
    rebound = _REBOUND.get(id(value))
    if rebound is not None and rebound[0] is value:
        return rebound[1]
    if type(value) is types.FunctionType and value.__globals__ is namespace \
            and pure_helper(value, verdicts):
        return converting(value)
    return None


def _is_replacement(value) -> bool:
    """A stand-in already (a scan made while the module's code is traced)."""
    return (value is TRACING_NUMPY or value is TRACING_RANDOM or id(value) in _REPLACEMENTS
            or type(value) is GeneratorProxy or hasattr(value, "__toolkit_converts__"))


def _names_to_swap(namespace: dict) -> dict:
    """The names of ``namespace`` bound to NumPy, to its buffer functions or to pure helpers
    that branch, with their replacements. The last scan is reused while the namespace holds
    as many names, and every name bound to something other than plain data is bound to the
    same object: a notebook's namespace holds hundreds or thousands of names (IPython adds
    several every cell), and a function that breaks its graph is traced (replayed) on every
    call, so the check looks at the few names that matter, not at every name (rebinding
    plain data, ``for i in ...: f(x)`` at a notebook's top level, keeps the scan). Plain data
    rebound to a function of NumPy's is not seen until the next scan: that function then runs
    as NumPy's own (a graph break where its result meets a traced value), never wrongly."""
    found = _SCANNED.get(id(namespace))
    if found is not None and _unchanged(namespace, found):
        return found[3]
    swapped, verdicts = {}, {}
    inside = False  # a trace of this module's code is running (its names are swapped now)
    for name, value in list(namespace.items()):
        if _is_replacement(value):
            inside = True
            continue
        replacement = _replacement(value, name, namespace, verdicts)
        if replacement is not None:
            swapped[name] = (value, replacement)
    if not inside:  # (a scan made inside a trace would find nothing to swap after it)
        if len(_SCANNED) >= _SCANNED_KEPT:
            _SCANNED.clear()
        _SCANNED[id(namespace)] = (namespace, len(namespace), _watched(namespace), swapped)
    return swapped


# id(fn) -> _Traced: asked on every traced call
_NAMESPACES: dict[int, "_Traced"] = {}
_CELLS_KEPT = 256  # closure cells looked at per traced function, at most


class _Traced:
    """What a traced function's code reaches that may need a stand-in: its module's namespace
    (None for NumPy's and toolkit's own code) and the cells of the closures it reaches, each
    as [cell, the value it held when last looked at, that value's stand-in or None]."""

    __slots__ = ("fn", "function", "namespace", "scan", "cells")

    def __init__(self, fn):
        self.fn = fn  # (held: no other object takes its id meanwhile)
        self.function = function_of(fn)
        namespace = None if self.function is None else self.function.__globals__
        self.namespace = None if namespace is None or _is_library(namespace) else namespace
        self.scan, self.cells = None, []

    def closure_cells(self, scan: dict) -> list:
        """The cells, found again when the module's scan is a new one (a name rebound)."""
        if scan is not self.scan:
            self.scan, self.cells = scan, [[cell, _UNSEEN, None, name]
                                           for cell, name in _reached_cells(self.function)]
        return self.cells


_UNSEEN = object()


def _reached_cells(function) -> list:
    """The cells of ``function``'s closure, and of the closures of the functions its code
    reaches through them and through its module's globals (breadth-first, each once, at most
    ``_CELLS_KEPT``): where a factory's ``rng``, ``np`` or helper lives, as (cell, its name)."""
    namespace = function.__globals__
    found, seen, pending = [], {id(function)}, [function]
    while pending and len(found) < _CELLS_KEPT:
        f = pending.pop(0)
        code = f.__code__
        reached = [(cell, name) for cell, name in zip(f.__closure__ or (), code.co_freevars)]
        for cell, name in reached:
            if len(found) < _CELLS_KEPT:
                found.append((cell, name))
        values = [cell_value(cell) for cell, _ in reached]
        values += [namespace.get(name) for name in code.co_names]
        for value in values:
            value = getattr(value, "__toolkit_converts__", value) if type(
                value) is types.FunctionType else value
            if type(value) is types.FunctionType and id(value) not in seen \
                    and value.__globals__ is namespace:
                seen.add(id(value))
                pending.append(value)
    return found


class numpy_buffers_traced:
    """Rebind ``np`` (and names imported from NumPy's buffer functions, generators and pure
    helpers) in ``fn``'s module and in the closures its code reaches, for the duration of the
    block. (A class, not a generator: a call that breaks its graph enters it on every call.)"""

    __slots__ = ("namespace", "traced", "swapped", "added", "cells")

    def __init__(self, fn):
        traced = _NAMESPACES.get(id(fn))
        if traced is None or traced.fn is not fn:
            traced = _Traced(fn)
            if len(_NAMESPACES) >= _SCANNED_KEPT:
                _NAMESPACES.clear()
            _NAMESPACES[id(fn)] = traced
        self.traced, self.namespace = traced, traced.namespace

    def __enter__(self):
        namespace = self.namespace
        if namespace is None:
            return
        self.swapped = swapped = _names_to_swap(namespace)
        for name, (_, replacement) in swapped.items():
            namespace[name] = replacement
        # Python's max/min and print, where the module does not define its own
        self.added = added = [name for name in _STAND_IN_BUILTINS if name not in namespace]
        for name in added:
            namespace[name] = _STAND_IN_BUILTINS[name]
        # the closures: a factory's rng = np.random.default_rng(), import numpy as np, helper
        self.cells = cells = []
        verdicts = None
        for slot in self.traced.closure_cells(swapped):
            value = cell_value(slot[0])
            if value is not slot[1]:  # (rebound since, by nonlocal or by the factory)
                if verdicts is None:
                    verdicts = {}
                slot[1], slot[2] = value, None if _is_replacement(value) else _replacement(
                    value, slot[3], namespace, verdicts)
            if slot[2] is not None:
                slot[0].cell_contents = slot[2]
                cells.append(slot)

    def __exit__(self, *exc) -> None:
        namespace = self.namespace
        if namespace is None:
            return
        for cell, original, replacement, _ in self.cells:
            if cell_value(cell) is replacement:  # unless the traced code rebound it itself
                cell.cell_contents = original
        for name, (original, replacement) in self.swapped.items():
            if namespace.get(name) is replacement:  # unless the traced code rebound it itself
                namespace[name] = original
        for name in self.added:
            if namespace.get(name) is _STAND_IN_BUILTINS[name]:
                del namespace[name]
