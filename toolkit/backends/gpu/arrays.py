"""Device arrays: results of GPU programs, which stay on the device until asked for.

A ``DeviceArray`` holds a device buffer and where it came from (function and result). Passing
it to another GPU program copies nothing; ``np.asarray(a)``, ``a.get()`` or
``tk.device_get(a)`` copy it to the host once, and a profile records that copy. A host array
fetched that way and sent back to the device unchanged by a later call is a round trip the
profile flags as avoidable."""
from __future__ import annotations

import operator
import weakref

import numpy as np

from ...ir.user_code import user_line
from ...profiler.events import TransferEvent
from ...profiler.recorder import RECORDER

# id(host array) -> (weak reference to it, what it was fetched from): fetches while profiling
_fetched: dict[int, tuple[weakref.ref, str]] = {}
_FETCHED_LIMIT = 4096


def fetched_from(host: np.ndarray) -> str | None:
    """What device result ``host`` was fetched from, if it is an unchanged fetched copy."""
    entry = _fetched.get(id(host))
    if entry is None or entry[0]() is not host:
        return None
    return entry[1] if host.flags.writeable is False else None


def _remember_fetch(host: np.ndarray, what: str) -> None:
    if len(_fetched) >= _FETCHED_LIMIT:
        for key in [k for k, (ref, _) in _fetched.items() if ref() is None] or list(_fetched)[
            : _FETCHED_LIMIT // 2
        ]:
            _fetched.pop(key, None)
    key = id(host)
    _fetched[key] = (weakref.ref(host, lambda _, key=key: _fetched.pop(key, None)), what)


class DeviceArray:
    """An array in GPU memory. Read it with ``np.asarray``; pass it to jitted functions as is."""

    __toolkit_array__ = True  # what the tracer checks to take shape and dtype without a copy
    __array_priority__ = 100

    def __init__(self, buffer, device, origin: str = ""):
        self._buffer = buffer
        self._device = device
        self.origin = origin  # "f result[0]": what produced it, for transfer events
        self.shape = tuple(buffer.shape)
        self.dtype = np.dtype(buffer.dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def device(self) -> str:
        return self._device.label

    @property
    def buffer(self):
        """The underlying device buffer (a CuPy array on a CUDA device): shares memory."""
        return self._buffer

    @property
    def __cuda_array_interface__(self):
        """Zero-copy hand-off to CuPy, PyTorch, Numba (version 3): ``stream`` names the stream
        toolkit's kernels write on, so the consumer waits for them before reading."""
        interface = dict(self._buffer.__cuda_array_interface__)
        interface["version"] = 3
        interface["stream"] = self._device.stream_handle
        return interface

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d device array")
        return self.shape[0]

    def block_until_ready(self) -> DeviceArray:
        """Wait for the kernels that produce this array; returns it (as JAX's arrays do)."""
        self._device.synchronize()
        return self

    def get(self) -> np.ndarray:
        """A host copy (read-only: writing to it would not change the device array)."""
        if not RECORDER.active:
            host = self._device.download(self._buffer)
            host.flags.writeable = False
            return host
        start_event = self._device.timer()
        host = self._device.download(self._buffer)
        end_event = self._device.timer()
        duration = self._device.elapsed(start_event, end_event)
        host.flags.writeable = False
        what = self.origin or "device array"
        _remember_fetch(host, what)
        RECORDER.record(
            TransferEvent(
                "device_to_host",
                self.nbytes,
                RECORDER.clock.now() - duration,
                duration,
                what=what,
                location=user_line(),
                device=self._device.label,
                stream=self._device.copy_stream_id,
            )
        )
        return host

    def __array__(self, dtype=None, copy=None):
        if copy is False:
            raise ValueError("a device array cannot be viewed as a host array without a copy")
        host = self.get()
        return host if dtype is None else host.astype(dtype, copy=False)

    def __repr__(self) -> str:
        kind = self.dtype.name
        return f"DeviceArray({kind}{list(self.shape)}, device={self.device!r})"

    def __getitem__(self, index):
        """Indexing on the device (a jitted gather or slice); a boolean mask, whose count
        decides the result's length, is taken on a host copy."""
        return _dispatch(operator.getitem, (self, index))

    @property
    def T(self) -> DeviceArray:
        return _dispatch(np.transpose, (self,))

    @property
    def mT(self) -> DeviceArray:
        return _dispatch(np.matrix_transpose, (self,))

    def astype(self, dtype, copy: bool = True) -> DeviceArray:
        dtype = np.dtype(dtype)
        if dtype == self.dtype and not copy:
            return self
        return _dispatch(_astype, (self, dtype.str))

    def copy(self) -> DeviceArray:
        return DeviceArray(self._device.copy(self._buffer), self._device, self.origin)

    def item(self, *index):
        """One element as a Python scalar: only that element is read from the device."""
        value = self[index] if index else self
        if isinstance(value, DeviceArray):
            if value.size != 1:
                raise ValueError("can only convert an array of size 1 to a Python scalar")
            return value.get().item()
        return np.asarray(value).item()

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if kwargs.get("out") is not None:
            return NotImplemented  # NumPy then says the ufunc cannot write into a device array
        function = ufunc if method == "__call__" else getattr(ufunc, method)
        return _dispatch(function, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        if func in _METADATA:  # shape and type questions: answered here, nothing runs
            return func(*[_stand_in(a) for a in args], **kwargs)
        return _dispatch(func, args, kwargs)

    def __dlpack__(self, *args, **kwargs):
        """DLPack export (CuPy, JAX, PyTorch: ``from_dlpack``), sharing device memory."""
        return self._buffer.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self._buffer.__dlpack_device__()

    def _assign_from(self, value) -> None:
        """Take ``value`` as this array's contents: a function that writes this argument in
        place (``a[1:-1] = ...``) leaves its new value here, as NumPy leaves it in the array
        passed. A device result on the same device is taken without a copy."""
        if isinstance(value, DeviceArray) and value._device is self._device \
                and value.shape == self.shape and value.dtype == self.dtype:
            self._buffer = value._buffer
            return
        host = np.asarray(value).astype(self.dtype, copy=False)
        self._buffer = self._device.upload(np.ascontiguousarray(np.broadcast_to(host,
                                                                                self.shape)))

    def __setitem__(self, index, value):
        raise TypeError("device arrays are immutable: np.array(a) makes a writable host copy, or "
                        "compute the new value in a jitted function")

    def __iter__(self):
        return iter(self.get())

    def tolist(self):
        return self.get().tolist()

    __hash__ = None  # compared elementwise, as ndarray

    def __bool__(self) -> bool:
        return bool(self.get())

    def __float__(self) -> float:
        return float(self.get())

    def __int__(self) -> int:
        return int(self.get())


# How NumPy's functions, ufuncs, operators, methods and indexing run on device arrays: jitted
# calls on the array's device, set by toolkit.jitting.device_arrays (a higher layer: the jit
# machinery). ``_DISPATCH(func, args, kwargs) -> result``.
_DISPATCH = None


def set_array_dispatch(dispatch) -> None:
    global _DISPATCH
    _DISPATCH = dispatch


def _dispatch(func, args, kwargs=None):
    if _DISPATCH is None:  # toolkit.jitting is not loaded: NumPy on host copies
        host = [a.get() if isinstance(a, DeviceArray) else a for a in args]
        return func(*host, **(kwargs or {}))
    return _DISPATCH(func, args, kwargs or {})


def _operator(name: str, reflected: bool = False):
    op = getattr(operator, name)

    def apply(self, other=None):
        if name in _UNARY:
            return _dispatch(op, (self,))
        return _dispatch(op, (other, self) if reflected else (self, other))

    apply.__name__ = f"__{'r' if reflected else ''}{name.strip('_')}__"
    apply.__doc__ = "On the device: a cached jitted call of the operator."
    return apply


_UNARY = {"neg", "pos", "abs", "invert"}
_BINARY = ["add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and_", "or_", "xor",
           "lshift", "rshift"]
for _name in _BINARY:
    _dunder = _name.rstrip("_")
    setattr(DeviceArray, f"__{_dunder}__", _operator(_name))
    setattr(DeviceArray, f"__r{_dunder}__", _operator(_name, reflected=True))
for _name in ("eq", "ne", "lt", "le", "gt", "ge", *_UNARY):
    setattr(DeviceArray, f"__{_name}__", _operator(_name))


def _method(function, doc: str):
    def method(self, *args, **kwargs):
        return _dispatch(function, (self, *args), kwargs)

    method.__name__ = function.__name__
    method.__doc__ = doc
    return method


# ndarray's methods, run on the device like the np.* functions they are
def _shape_method(function):
    """``a.reshape(3, 4)`` and ``a.reshape((3, 4))`` alike, as ndarray's methods take them."""
    def method(self, *shape, **kwargs):
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        return _dispatch(function, (self, tuple(shape)) if shape else (self,), kwargs)

    method.__name__ = function.__name__
    method.__doc__ = f"``np.{function.__name__}`` on the device."
    return method


DeviceArray.reshape = _shape_method(np.reshape)
DeviceArray.transpose = _shape_method(np.transpose)
for _name in ("sum", "mean", "max", "min", "prod", "std", "var", "argmax", "argmin", "cumsum",
              "cumprod", "any", "all", "ravel", "flatten", "squeeze",
              "round", "clip", "conj", "swapaxes", "dot", "nonzero", "repeat", "take",
              "trace", "diagonal", "sort", "argsort"):
    _function = getattr(np, "ravel" if _name == "flatten" else _name)
    setattr(DeviceArray, _name, _method(_function, f"``np.{_function.__name__}`` on the device."))


# NumPy functions that read only an array's shape and dtype
_METADATA = frozenset({np.shape, np.size, np.ndim, np.result_type, np.iscomplexobj,
                       np.isrealobj, np.min_scalar_type})


def _stand_in(value):
    """A device array's shape and dtype as a host array of no memory (every element the one
    zero, broadcast), for the functions that read only those."""
    if isinstance(value, DeviceArray):
        return np.broadcast_to(np.zeros((), value.dtype), value.shape)
    return value


def _astype(x, dtype: str):
    return x.astype(np.dtype(dtype))


def device_get(tree):
    """Host copies of every device array in a pytree (tuples, lists, dicts); other leaves as is."""
    if isinstance(tree, DeviceArray):
        return tree.get()
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):  # a namedtuple
        return type(tree)(*(device_get(t) for t in tree))
    if isinstance(tree, (tuple, list)):
        return type(tree)(device_get(t) for t in tree)
    if isinstance(tree, dict):
        return {k: device_get(v) for k, v in tree.items()}
    return tree
