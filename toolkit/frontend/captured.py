"""Data a traced function reads from outside its arguments, as NumPy reads it: on every call.

``x @ W`` with ``W`` a global, ``x * self.scale``, ``params["b"]``, a closure's array: NumPy
reads the value the name holds at each call, so ``W = new`` or ``W -= lr * g`` between calls
is seen. A program that held ``W`` as a constant would silently keep computing with the old
one (as ``jax.jit`` does). So, while a call is traced anew (not replayed, not in segments):

- **Arrays are lifted into parameters.** Each array the traced code can reach (``frontend.
  reach``: a module name it uses, a closure cell, an attribute, a dict or list item) is swapped
  for a parameter tracer until the trace ends, as torch.compile lifts the tensors a graph
  reads. The compiled program takes it after the call's own arguments, and every call reads it
  again where it lives (no copy): a rebinding or an in-place change is seen, and a write into
  it inside the function goes back into it, as an argument's does. One array reached by two
  paths is one parameter, as long as both paths still hold that one array.
- **Numbers are guarded.** A Python or NumPy number is a constant of the program (a learning
  rate, a size), compared with the value it was traced with before every call. So is a small
  integer or boolean array (``SMALL_INTEGER_ARRAY`` elements at most: layer sizes, an index
  table, a mask), which code reads as configuration: shapes and indices made from it stay
  static, and a change of any of its values traces again.

When a lifted array is no longer an array of its traced shape and dtype, or a guarded number
changed, the call raises ``CapturedChanged`` and the jitted function traces it again (the
recompile report names the variable). A name the code itself stores (``global n; n += 1``,
``self.steps += 1``) is Python state (``python_effects``), neither lifted nor guarded. A lifted
array the finished program never reads (another item of a dict the code read one item of) is
neither read nor checked per call (``Captured.keep_used``). On a device backend a lifted host
array is uploaded on every call, as an argument is (the profile shows the copy, and a device
array costs nothing to pass): a constant uploaded once would not see a change."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .reach import Reached, cell_value


class CapturedChanged(Exception):
    """A value read from outside the arguments no longer matches the compiled program: the
    call is traced again. ``compiled``: the program to drop (set by the caller)."""

    def __init__(self, path: str, message: str):
        super().__init__(message)
        self.path = path  # the variable, as the code reads it ('W', 'self.W', "params['b']")
        self.compiled = None


@dataclass(frozen=True, eq=False)
class Place:
    """Where the traced code reads a value: a dict's key (a module's names, an object's
    attributes, a dict), a list's index, or a closure cell (key None)."""

    holder: object
    key: object
    path: str

    def read(self):
        if self.key is None:
            return cell_value(self.holder)
        try:
            return self.holder[self.key]
        except (KeyError, IndexError):
            raise CapturedChanged(self.path, f"'{self.path}' no longer exists") from None

    def write(self, value) -> None:
        if self.key is None:
            self.holder.cell_contents = value
        else:
            self.holder[self.key] = value


@dataclass(frozen=True, eq=False)
class LiftedArray:
    """A parameter of the program read from ``places`` on every call."""

    places: tuple[Place, ...]
    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def path(self) -> str:
        return self.places[0].path

    def read(self) -> np.ndarray:
        value = self.places[0].read()
        if not _is_array(value) or value.shape != self.shape or value.dtype != self.dtype:
            raise CapturedChanged(self.path, f"'{self.path}' is now {_described(value)}, was "
                                  f"an array {self.dtype}{list(self.shape)}")
        for place in self.places[1:]:
            if place.read() is not value:
                raise CapturedChanged(place.path, f"'{place.path}' and '{self.path}' were one "
                                      "array and now are not")
        return value


def _identity(value) -> tuple:
    """Equal for the same number of the same type, bit for bit (-0.0 is not 0.0, nan is nan)."""
    if isinstance(value, np.generic):
        return (type(value), value.tobytes())
    if type(value) is float:
        return (float, value.hex())
    if type(value) is complex:
        return (complex, value.real.hex(), value.imag.hex())
    return (type(value), value)


@dataclass(frozen=True, eq=False)
class Guard:
    """A number the program holds as a constant: checked before every call."""

    place: Place
    identity: tuple
    value: object

    def check(self) -> None:
        now = self.place.read()
        if now is self.value:  # (the usual case: the very object it was traced with)
            return
        if not _capturable_number(now) or _identity(now) != self.identity:
            raise CapturedChanged(self.place.path, f"'{self.place.path}' is now "
                                  f"{_described(now)}, was {self.value!r}")


@dataclass(frozen=True, eq=False)
class ValueGuard:
    """A small integer or boolean array (sizes, an index table, a mask: data Python reads as
    configuration, ``np.zeros(sizes[1])``, ``x[idx]``) kept a constant of the program, so that
    shapes and indices built from it stay static: checked to hold the same values before every
    call (a copy of them is kept), so a change traces again."""

    place: Place
    snapshot: np.ndarray

    def check(self) -> None:
        now = self.place.read()
        if not (isinstance(now, np.ndarray) and now.dtype == self.snapshot.dtype
                and now.shape == self.snapshot.shape and np.array_equal(now, self.snapshot)):
            was = _described_values(self.snapshot)
            raise CapturedChanged(self.place.path, f"'{self.place.path}' is now "
                                  f"{_described_values(now)}, was {was}")


# integer and boolean arrays up to this many elements are constants guarded by value, not
# parameters (frontend.captured's docstring)
SMALL_INTEGER_ARRAY = 1024


def _described_values(value) -> str:
    if isinstance(value, np.ndarray) and value.size <= 8:
        return f"{value.dtype}{list(value.shape)} {value.tolist()}"
    return _described(value)


def _is_array(value) -> bool:
    """A NumPy array (a memmap too) or a device array (``__toolkit_array__``)."""
    return type(value) is np.ndarray or isinstance(value, np.memmap) or getattr(
        type(value), "__toolkit_array__", False)


def _capturable_number(value) -> bool:
    return type(value) in (int, float, complex, bool) or (
        isinstance(value, np.generic) and value.dtype.kind in "biufc")


def _described(value) -> str:
    if isinstance(value, np.ndarray):
        return f"an array {value.dtype}{list(value.shape)}"
    text = repr(value)
    return text if len(text) <= 60 else text[:59] + "…"


class Captured:
    """What one trace lifted and guarded: ``arrays`` (the program's last parameters, in order)
    and ``guards``."""

    __slots__ = ("arrays", "guards", "swapped", "tracers", "_read")

    def __init__(self):
        self.arrays: list[LiftedArray] = []
        self.guards: list[Guard] = []
        self.swapped: list[tuple[Place, object, object]] = []  # (place, array, tracer)
        self.tracers: list = []  # each lifted array's parameter tracer, while the trace runs
        # per lifted array: its reader, or (an array the code reached but never used) a
        # stand-in of its shape that costs no memory, so that a change to it traces nothing
        self._read: list | None = None  # (None: every lifted array is read)

    def keep_used(self, used: set[int]) -> None:
        """After the trace: the lifted arrays whose parameters (by instruction id) the program
        reads are read on every call; the others (another item of a dict the code read one
        item of) are neither read nor checked."""
        self._read = []
        for lifted, tracer in zip(self.arrays, self.tracers):
            if id(tracer.inst) in used:
                self._read.append(lifted.read)
            else:
                stand_in = np.lib.stride_tricks.as_strided(
                    np.zeros(1, lifted.dtype), lifted.shape, (0,) * len(lifted.shape),
                    writeable=False)
                self._read.append(lambda stand_in=stand_in: stand_in)
        self.tracers = []

    def values(self) -> list:
        """The lifted arrays as they are now, after checking every guard (CapturedChanged)."""
        for guard in self.guards:
            guard.check()
        if self._read is None:
            return [lifted.read() for lifted in self.arrays]
        return [read() for read in self._read]


# lifted tracer -> the array it stands for, while its trace runs: what a use that needs the
# memory itself gets (``np.ndarray(shape, buffer=W)``, a view of the captured bytes)
_STANDING_IN: dict[int, np.ndarray] = {}


def captured_array(value):
    """The array a lifted tracer stands for (``value`` itself where it is none)."""
    return _STANDING_IN.get(id(value), value)


class values_captured:
    """For the duration of a trace, every array ``reached`` holds outside the arguments is a
    parameter (``make_parameter(path, array) -> tracer``), and every number a guard.
    ``reached`` None: nothing is lifted or guarded (a replay, segments)."""

    __slots__ = ("captured", "_reached", "_make")

    def __init__(self, reached: Reached | None, make_parameter):
        self.captured = Captured()
        self._reached = reached
        self._make = make_parameter

    def __enter__(self) -> Captured:
        reached = self._reached
        if reached is None:
            return self.captured
        captured = self.captured
        by_array: dict[int, tuple[list[Place], object]] = {}
        order: list[int] = []
        for holder, key, value, path in reached.captured:
            name = key if isinstance(key, str) else None
            if key is None:  # a closure cell: its variable's name is the path
                name = path
            if name is not None and name in reached.stored:
                continue  # Python state the code changes: python_effects watches it
            place = Place(holder, key, path)
            if isinstance(value, np.ndarray) and value.dtype.kind in "biu" \
                    and value.size <= SMALL_INTEGER_ARRAY:
                captured.guards.append(ValueGuard(place, value.copy()))
            elif _is_array(value):
                if id(value) not in by_array:
                    by_array[id(value)] = ([], value)
                    order.append(id(value))
                by_array[id(value)][0].append(place)
            else:
                captured.guards.append(Guard(place, _identity(value), value))
        for ident in order:
            places, array = by_array[ident]
            tracer = self._make(places[0].path, array)
            captured.arrays.append(LiftedArray(tuple(places), array.shape, array.dtype))
            captured.tracers.append(tracer)
            _STANDING_IN[id(tracer)] = array
            for place in places:
                place.write(tracer)
                captured.swapped.append((place, array, tracer))
        return captured

    def __exit__(self, *exc) -> None:
        for place, array, tracer in reversed(self.captured.swapped):
            try:
                current = place.read()
            except CapturedChanged:  # (the traced code deleted it)
                continue
            if current is tracer:  # unless the traced code rebound it itself
                place.write(array)
            _STANDING_IN.pop(id(tracer), None)
        self.captured.swapped = []


__all__ = ["Captured", "CapturedChanged", "Guard", "LiftedArray", "Place",
           "SMALL_INTEGER_ARRAY", "ValueGuard", "captured_array",
           "values_captured"]
