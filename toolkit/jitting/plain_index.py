"""The index the dispatch fast path looks plain calls up in: positional NumPy arrays, NumPy
scalars and Python floats and ints, found by their abstract values alone.

Two views of one map, kept together here: ``by_avals`` (``(shape, dtype, weak)`` triples to
the compiled program), which the Python path reads, and ``by_signature`` (the same signature
packed into machine words, ``signature_key``, to the program's run function), which the C path
(``_plain_call.c``) reads without building a tuple per argument."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .key import FAST_DTYPES

try:  # built from source by pip where a C compiler is present; the Python path otherwise
    from ._plain_call import plain_call
except ImportError:  # pragma: no cover - depends on the install
    plain_call = None

# the header word's "what": _plain_call.c's ARRAY, SCALAR, WEAK_FLOAT, WEAK_INT
_ARRAY, _SCALAR, _WEAK_FLOAT, _WEAK_INT = ord("a"), ord("s"), ord("f"), ord("i")


def _header(what: int, kind: str = "\0", byteorder: str = "\0", itemsize: int = 0,
            rank: int = 0) -> int:
    return what | ord(kind) << 8 | ord(byteorder) << 16 | itemsize << 24 | rank << 48


def signature_key(avals) -> bytes:
    """``avals`` packed as the C path packs a call's arguments: per argument a header word and
    its dimensions. A weak float64 or int64 is a Python float or int, weak None a NumPy
    scalar; anything else an array of that shape and dtype."""
    words: list[int] = []
    for shape, dtype, weak in avals:
        if weak:
            words.append(_header(_WEAK_FLOAT if dtype.kind == "f" else _WEAK_INT))
            continue
        words.append(_header(_ARRAY if weak is False else _SCALAR, dtype.kind, dtype.byteorder,
                             dtype.itemsize, len(shape)))
        words.extend(shape)
    return np.array(words, np.int64).tobytes()


def _runner(avals, compiled) -> Callable:
    """What runs a plain call of ``avals`` from its arguments as they came: a program's own
    fast run takes arrays (a Python or NumPy scalar becomes a 0-d one); its general path
    takes the arguments as they are (it checks a Python int against the arrays it meets)."""
    run = compiled.plain_run
    if run is None:
        return compiled.execute_flat
    if all(shape for shape, _, _ in avals):  # (no number among them)
        return run
    return lambda leaves: run([a if type(a) is np.ndarray else np.asarray(a) for a in leaves])


class PlainIndex:
    """Plain calls' programs by their abstract values (``add``, ``drop``), in both views."""

    def __init__(self) -> None:
        self.by_avals: dict[tuple, Any] = {}
        # what the C path calls with the arguments (``_runner``)
        self.by_signature: dict[bytes, Callable] = {}

    def get(self, avals):
        return self.by_avals.get(avals)

    def __len__(self) -> int:
        return len(self.by_avals)

    def __iter__(self):
        return iter(self.by_avals)

    def __contains__(self, avals) -> bool:
        return avals in self.by_avals

    def add(self, avals, compiled) -> None:
        self.by_avals[avals] = compiled
        if all(dtype in FAST_DTYPES for _, dtype, _ in avals):  # (as the Python path asks)
            self.by_signature[signature_key(avals)] = _runner(avals, compiled)

    def discard(self, avals, compiled) -> None:
        """Forget ``avals`` if it still finds ``compiled`` (a later program may have taken it)."""
        if self.by_avals.get(avals) is compiled:
            del self.by_avals[avals]
            self.by_signature.pop(signature_key(avals), None)

    def drop(self, compiled) -> None:
        for avals in [a for a, c in self.by_avals.items() if c is compiled]:
            self.discard(avals, compiled)

    def clear(self) -> None:
        self.by_avals.clear()
        self.by_signature.clear()
