"""NumPy on device arrays: every np.* function, ufunc, operator, method and index of a
``DeviceArray`` runs as a cached jitted call on the array's own device, so results stay there
and the profile shows them as kernels, not copies.

A call's arrays (device or host) and Python numbers are traced; everything else (axes, shapes,
dtypes, slices) is part of the cache key, as JAX's static arguments are. A result whose size
depends on the data (a boolean mask, ``np.unique``) is a graph break of that call: only the
count goes to the host, the values stay on the device. What cannot be traced at all runs on
host copies, with a warning naming the function and why, once per function. The cache of
jitted calls is bounded (least recently used out)."""
from __future__ import annotations

import numbers
import warnings
from collections import OrderedDict

import numpy as np

from ..backends import Backend, register_backend
from ..backends.gpu import arrays, compile_module
from ..backends.gpu.device import CudaDevice
from ..frontend.errors import ToolkitError
from ..frontend.pytree import flatten
from ..frontend.tracer import Tracer, current_trace

CACHE_LIMIT = 256
_calls: OrderedDict = OrderedDict()
_backends: dict[int, str] = {}  # id(device) -> the backend name that compiles for it
_warned: set = set()


def _backend_for(device) -> str:
    name = _backends.get(id(device))
    if name is None:
        if isinstance(device, CudaDevice) and device.ordinal == 0:
            name = "gpu"
        else:
            name = f"gpu@{device.label}"
            register_backend(Backend(name, f"the GPU executor on {device.label}", -1,
                                     lambda module: compile_module(module, device=device)))
        _backends[id(device)] = name
    return name


class _Traced:
    """A placeholder in the static template of a call for its k-th traced value."""
    __slots__ = ("k",)

    def __init__(self, k: int):
        self.k = k

    def __eq__(self, other):
        return isinstance(other, _Traced) and other.k == self.k

    def __hash__(self):
        return hash(("traced", self.k))


def _is_array(x) -> bool:
    return isinstance(x, (arrays.DeviceArray, np.ndarray, np.generic))


def _traced_number(value, operand: bool) -> bool:
    """Python numbers are traced (weakly typed, one program for every value) where they are
    operands; integers elsewhere are shapes, axes, counts and slice bounds: static."""
    if isinstance(value, bool) or not isinstance(value, numbers.Number):
        return False
    return operand or not isinstance(value, numbers.Integral)


def _split(value, traced: list, operand: bool = False):
    """(hashable template, with _Traced where a traced value goes); appends to ``traced``.
    ``operand``: ``value`` is an operand of a ufunc or operator."""
    if _is_array(value) or _traced_number(value, operand):
        traced.append(value)
        return _Traced(len(traced) - 1)
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_split(v, traced) for v in value))
    if isinstance(value, slice):
        return ("slice", _split(value.start, traced), _split(value.stop, traced),
                _split(value.step, traced))
    if isinstance(value, dict):
        return ("dict", tuple((k, _split(v, traced)) for k, v in sorted(value.items())))
    if isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic)):
        return ("dtype", np.dtype(value).str)
    hash(value)  # anything else is static: it must be hashable (TypeError otherwise)
    return value


def _join(template, traced):
    """The value ``_split`` took apart, with ``traced`` in the placeholders."""
    if isinstance(template, _Traced):
        return traced[template.k]
    if isinstance(template, tuple) and template and template[0] in ("list", "tuple"):
        items = [_join(t, traced) for t in template[1]]
        return items if template[0] == "list" else tuple(items)
    if isinstance(template, tuple) and template and template[0] == "slice":
        return slice(*(_join(t, traced) for t in template[1:]))
    if isinstance(template, tuple) and template and template[0] == "dict":
        return {k: _join(v, traced) for k, v in template[1]}
    if isinstance(template, tuple) and template and template[0] == "dtype":
        return np.dtype(template[1])
    return template


def _name(func) -> str:
    return getattr(func, "__name__", None) or type(func).__name__


def _host(value):
    return value.get() if isinstance(value, arrays.DeviceArray) else value


def _on_host(func, args, kwargs, why: str):
    name = _name(func)
    if name not in _warned:
        _warned.add(name)
        warnings.warn(f"np.{name} on a device array runs on host copies: {why}", RuntimeWarning,
                      stacklevel=4)
    args = [_host(a) if not isinstance(a, (list, tuple)) else type(a)(_host(v) for v in a)
            for a in args]
    return func(*args, **kwargs)


def device_call(func, args, kwargs):
    leaves = flatten((args, kwargs))[0]
    if current_trace() is not None or any(isinstance(v, Tracer) for v in leaves):
        # inside a trace: the device array is a constant of the traced program
        return func(*[_host(a) for a in args], **{k: _host(v) for k, v in kwargs.items()})
    device = next(a._device for a in leaves if isinstance(a, arrays.DeviceArray))
    traced: list = []
    operands = isinstance(func, np.ufunc) or getattr(func, "__module__", "") in ("operator",
                                                                                "_operator")
    try:
        template = ("args", tuple(_split(a, traced, operands) for a in args),
                    _split(dict(kwargs), traced))
    except TypeError as e:
        return _on_host(func, args, kwargs, f"an argument is not hashable ({e})")
    key = (func, template, id(device))
    jitted = _calls.get(key)
    if jitted is None:
        from ..api import jit  # (toolkit.api is loaded before this module; only on a miss)

        def call(*values, template=template, func=func):
            call_args = [_join(t, values) for t in template[1]]
            return func(*call_args, **_join(template[2], values))

        call.__name__ = call.__qualname__ = _name(func)
        # a history of its own per call form: np.sum(axis=0) and np.sum(axis=1) are two
        # functions, not one recompiled; a new shape of the same form is a recompile of it
        call.__toolkit_history_key__ = ("device array", key)
        jitted = jit(call, backend=_backend_for(device), on_recompile="ignore")
        _calls[key] = jitted
        while len(_calls) > CACHE_LIMIT:
            _calls.popitem(last=False)
    else:
        _calls.move_to_end(key)
    try:
        return jitted(*traced)
    except ToolkitError as e:  # not traceable (data-dependent shapes, unsupported functions)
        _calls.pop(key, None)
        return _on_host(func, args, kwargs, str(e).splitlines()[0])


arrays.set_array_dispatch(device_call)
