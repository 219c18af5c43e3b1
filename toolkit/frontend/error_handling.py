"""NumPy's floating-point error handling (``np.errstate``, ``np.seterr``), which compiled code
does not follow.

Under ``np.errstate(divide="raise")`` NumPy checks the floating-point status after every ufunc
loop and raises ``FloatingPointError`` (or calls the ``np.seterrcall`` function, or logs to it)
where a division by zero happened. A compiled program computes ``inf`` and goes on. So where a
category is set to ``"raise"``, ``"call"`` or ``"log"``:
- a jitted call runs the function as NumPy (api: ``JitFunction``);
- inside a trace (``with np.errstate(...)`` in the function), every NumPy operation on traced
  values runs in NumPy at a graph break (frontend.dispatch), and raises the error where the
  graph may not break.
``"warn"``, ``"print"`` and ``"ignore"`` change no result and no control flow: compiled code
runs as usual (without NumPy's RuntimeWarnings)."""
from __future__ import annotations

import numpy as np

from .errors import UnsupportedNumpyError

# the handlings that make NumPy raise or call back: compiled code cannot follow them
HANDLED = frozenset({"raise", "call", "log"})

try:  # NumPy 2 keeps the state in a context variable: one read tells whether it changed
    from numpy._core._ufunc_config import _extobj_contextvar as _STATE

    numpy_error_state = _STATE.get  # (the state object now: about 20 ns)
except ImportError:  # pragma: no cover - another NumPy: np.geterr() on every question
    def numpy_error_state():
        return None


class _Quiet:
    """The last state object found to handle no error (a hot path compares against it)."""
    state: object = object()


QUIET = _Quiet()
_last: tuple[object, str | None] = (object(), None)  # (the state object, what it said)


def numpy_error_handling() -> str | None:
    """The categories NumPy handles as errors now (``"divide='raise'"``), or None. Cheap
    when nothing changed since the last question (one context-variable read); a hot path
    asks ``numpy_error_state() is not QUIET.state`` first."""
    global _last
    state = numpy_error_state()
    seen, said = _last
    if state is not None and state is seen:
        return said
    said = ", ".join(f"{category}={how!r}" for category, how in sorted(np.geterr().items())
                     if how in HANDLED) or None
    if state is not None:
        _last = (state, said)  # (one tuple: a thread reads an old or a new pair, both true)
        if said is None:
            QUIET.state = state
    return said


def check_error_handling() -> None:
    """Raise UnsupportedNumpyError where NumPy handles floating-point errors now: the NumPy
    operation being traced runs in NumPy instead (frontend.dispatch catches it and breaks)."""
    handling = numpy_error_handling()
    if handling is not None:
        raise UnsupportedNumpyError(
            f"NumPy's floating-point error handling is on (np.errstate({handling})), which "
            "compiled code does not follow: NumPy runs the operation, and raises as NumPy does")
