"""Random generators held by objects (``self.rng``, ``config.rng``), seen while a call is traced.

A generator the traced code names directly, in its module or a closure, is swapped for a
``GeneratorProxy`` by ``frontend.namespace``. One held by an object is reached through an
attribute, ``self.rng.normal(...)``, which no name swap sees: its draw would run once, when
traced, and every later call would reuse those numbers (a dropout mask that never changes).

So, while a call is *recorded* (traced anew, not replayed), the objects its code can reach are
walked (``frontend.reach``), and a generator found as an attribute is swapped in the holder's
``__dict__`` for a ``GeneratorProxy`` until the trace ends: its draw then makes the call run
its Python on every call, in segments, as a module-level generator's does. A replayed call
needs no swap: its signature runs in segments already, so its Python, the draw included, runs
for real. What the walk does not reach (a generator behind a property, or past its bound) is
not swapped."""
from __future__ import annotations

from .reach import Reached
from .traced_random import GeneratorProxy


class generators_held_by_objects_traced:
    """Swap each held generator for a ``GeneratorProxy`` for the duration of a recorded trace
    (``reached`` None: a replay, nothing is swapped)."""

    __slots__ = ("swapped",)

    def __init__(self, reached: Reached | None):
        self.swapped = []
        for holder, attribute, generator, path in (reached.generators if reached else ()):
            proxy = GeneratorProxy(generator, path)
            holder[attribute] = proxy
            self.swapped.append((holder, attribute, generator, proxy))

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        for holder, attribute, generator, proxy in self.swapped:
            if holder.get(attribute) is proxy:  # unless the traced code rebound it itself
                holder[attribute] = generator
