"""``np.random`` while a function is traced: new numbers on every call, as NumPy draws them.

NumPy's random functions take no traced argument, so tracing would run them once and bake
their numbers into the compiled program: every later call would reuse the first call's
"random" numbers (a dropout mask that never changes), silently. While a trace is active, the
traced module's ``np.random`` is this stand-in: a draw from NumPy's global generator (or a
generator seeded from fresh entropy, ``np.random.default_rng()``) makes the call run its
Python on every call, in segments (``Breaker.runs_python_every_call``), so NumPy draws anew
each time and the numbers reach the program as parameters. Where the graph may not break
(``fullgraph=True``, a loop body, grad or vmap) the draw is an error that says so. A seeded
generator made inside the function (``np.random.default_rng(0)``) draws the same numbers on
every call in NumPy too, and is left alone."""
from __future__ import annotations

import types

import numpy

from .errors import UnsupportedNumpyError
from .tracer import Tracer, python_every_call_breaker

# what builds a generator from the seed it is given (the same numbers every call when seeded)
_SEEDED = frozenset({"default_rng", "Generator", "RandomState", "SeedSequence", "PCG64",
                     "PCG64DXSM", "MT19937", "Philox", "SFC64", "BitGenerator"})


def _drawn(name: str, args: tuple, kwargs: dict) -> bool:
    """Does ``np.random.<name>(*args, **kwargs)`` depend on state outside the call?"""
    if name in _SEEDED:
        seed = args[0] if args else kwargs.get("seed", kwargs.get("bit_generator"))
        return seed is None
    return not name.startswith("_") and name[:1].islower()


def _note_draw(what: str) -> None:
    """A draw during a trace: the call runs its Python every call (or, where the graph may not
    break, an error says why it cannot be compiled)."""
    tracing, breaker = python_every_call_breaker()
    if not tracing:
        return
    if breaker is None:
        raise UnsupportedNumpyError(
            f"{what} inside a compiled program would draw its numbers once, when traced, and "
            "every call would reuse them; draw them outside and pass them in (or, with graph "
            "breaks allowed, tk.jit without fullgraph=True runs the draw on every call)")
    breaker.runs_python_every_call(f"{what} draws new numbers every call")


def _concrete_seed(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """A seeded constructor's seed as Python values: NumPy reads a seed's value, so a traced
    one (a Python int argument, ``default_rng(seed)``) is asked for its value, which makes that
    argument static (a program per seed, as the numbers differ per seed) or breaks the graph
    where it was computed."""
    if args and isinstance(args[0], Tracer):
        args = (args[0].tolist(),) + args[1:]
    elif isinstance(kwargs.get("seed"), Tracer):
        kwargs = dict(kwargs, seed=kwargs["seed"].tolist())
    return args, kwargs


def _stand_in(name: str, original):
    def draw(*args, **kwargs):
        if name in _SEEDED:
            args, kwargs = _concrete_seed(args, kwargs)
        if _drawn(name, args, kwargs):
            _note_draw(f"np.random.{name}()")
        return original(*args, **kwargs)

    draw.__name__ = draw.__qualname__ = name
    draw.__doc__ = getattr(original, "__doc__", None)
    return draw


class _TracingRandom(types.ModuleType):
    """``numpy.random`` with its functions as ``_stand_in``s (types and classes unchanged)."""

    def __getattr__(self, name: str):
        value = getattr(numpy.random, name)
        if callable(value) and (not isinstance(value, type) or name in _SEEDED):
            value = _stand_in(name, value)
            setattr(self, name, value)  # (made once per name)
        return value

    def __dir__(self):
        return dir(numpy.random)


TRACING_RANDOM = _TracingRandom("numpy.random", numpy.random.__doc__)

GENERATOR_TYPES = (numpy.random.Generator, numpy.random.RandomState)


class GeneratorProxy:
    """A module-level generator (``rng = np.random.default_rng(0)`` at a notebook's top) while
    a function of its module is traced: each draw from it is a draw (``_note_draw``), then the
    generator's own, so its state advances as in NumPy."""

    __slots__ = ("_generator", "_name")

    def __init__(self, generator, name: str):
        self._generator = generator
        self._name = name

    def __getattr__(self, attribute: str):
        value = getattr(self._generator, attribute)
        if attribute.startswith("_") or not callable(value):
            return value

        def draw(*args, **kwargs):
            _note_draw(f"{self._name}.{attribute}()")
            return value(*args, **kwargs)

        return draw

    def __repr__(self) -> str:
        return repr(self._generator)
