"""What a traced call does to Python's own state: prints, and writes to globals, closure
variables, objects' attributes, lists and dicts (``calls += 1``, ``log.append(loss)``,
``self.steps += 1``).

A compiled program computes arrays; it cannot print or write Python's state. Run once when
traced, such a line would be skipped silently by every later call, where NumPy runs it every
time. So, as torch.compile replays a graph's side effects, toolkit runs the function's Python
on every call, in segments (``Breaker.runs_python_every_call``), and the line runs each time:

- ``print`` in the traced function's module is, while it is traced, a stand-in that says so
  before it prints (``PRINT``, bound by ``frontend.namespace`` as ``max`` and ``min`` are);
- while a call is recorded, the state its code can reach (``frontend.reach``: the module's
  namespace, closure cells, the attributes of the objects it reads, the lists and dicts among
  them) is compared before and after the trace; a name rebound, an attribute set or a list
  grown says so too.

Traced values the call leaves in that state (``losses.append(loss)``, a tuple of them) become
their values when the call ends (``stored_tracers``, ``put_values``), and a call that starts
again (traced anew for a Python int argument, or run as plain NumPy where tracing cost far more
than its segments ran: ``jitting.eager``) first puts that state back (``_undo``), so that
nothing happens twice.

Where the graph may not break (``fullgraph=True``, a loop body, grad or vmap) the line runs
once, when traced, and a warning says that it will not run again. What the walk does not
reach (a C object's insides, an object behind a property, state written by another module's
function) is not seen."""
from __future__ import annotations

import builtins
import warnings

from ..ir.user_code import user_frame
from .reach import Reached, cell_value
from .segments import RunAsNumpy, SpecializeAndRetrace
from .tracer import Tracer, current_trace, python_every_call_breaker

_SIZED = (list, dict, set, bytearray)
_GONE = object()


def note_effect(what: str, reason: str) -> None:
    """Python state changes here (``what``, for the warning; ``reason``, the break's): the call
    runs its Python every call (or, where the graph may not break, a warning says the line
    runs only when traced)."""
    tracing, breaker = python_every_call_breaker()
    if not tracing:
        return
    if breaker is None:
        frame = user_frame(1)  # (the print's line, or the call's for a change of state)
        warnings.warn_explicit(
            f"{what} inside a compiled program runs once, when traced, not on every call; "
            "with graph breaks allowed (tk.jit without fullgraph=True, outside loop bodies and "
            "transformations) toolkit runs it on every call", UserWarning,
            frame.f_code.co_filename if frame is not None else "<unknown>",
            frame.f_lineno if frame is not None else 0)
        return
    breaker.runs_python_every_call(reason)


def _print(*args, **kwargs):
    trace = current_trace()
    if trace is not None and trace.active:
        note_effect("print()", "print() runs every call")
        # (a traced value prints as NumPy prints its value, as builtins.print called from the
        # user's line would show it: Tracer.__str__)
        args = tuple(_printed(a) if type(a) is Tracer else a for a in args)
    return builtins.print(*args, **kwargs)


def _printed(t: Tracer):
    value = t._shown("str()", asked_by_user=True)
    return t if value is None else value


_print.__name__ = _print.__qualname__ = "print"
_print.__doc__ = builtins.print.__doc__
PRINT = _print


def _value_mark(value) -> tuple:
    """What tells a value's rebinding or growth: its identity, and its size if it has one."""
    return (id(value), len(value) if isinstance(value, _SIZED) else -1)


def _marks(container, kind: str, names: set) -> dict | tuple:
    if kind == "namespace":  # (only the names the code reads or writes)
        return {key: _value_mark(container[key]) for key in names if key in container}
    if isinstance(container, dict):
        return {key: _value_mark(v) for key, v in list(container.items())}
    return tuple(_value_mark(v) for v in container)


class python_state_watched:
    """Compare the state a recorded call reaches (``reached``; None: a replay, nothing is
    compared) before and after the trace; a change makes the call run its Python every call."""

    __slots__ = ("reached", "before", "cells", "saved", "saved_cells")

    def __init__(self, reached: Reached | None):
        self.reached = reached

    def __enter__(self):
        reached = self.reached
        if reached is not None:
            self.before = {key: _marks(c, kind, reached.names)
                           for key, (_, c, kind) in reached.containers.items()}
            self.saved_cells = {key: cell_value(cell) for key, (_, cell) in reached.cells.items()}
            self.cells = {key: _value_mark(value) for key, value in self.saved_cells.items()}
            # (shallow copies, to undo what a call that starts again did: SpecializeAndRetrace,
            # RunAsNumpy)
            self.saved = {key: {n: c[n] for n in reached.names if n in c}
                          if kind == "namespace" else dict(c) if kind != "list" else list(c)
                          for key, (_, c, kind) in reached.containers.items()}
        return self

    def __exit__(self, kind, error, traceback) -> None:
        if self.reached is None:
            return
        if kind is SpecializeAndRetrace or kind is RunAsNumpy:  # (the call starts again)
            self._undo()
            return
        if kind is not None:
            return
        changed = self._changed()
        if changed is not None:
            note_effect(f"a change of Python state ({changed})",
                        f"Python state changed: {changed}")

    def _undo(self) -> None:
        """Put back the state the call reached as it was before the trace: the trace that
        starts again does what this one did (an append, a counter bumped) once more."""
        reached = self.reached
        for key, (_, cell) in reached.cells.items():
            if _value_mark(cell_value(cell)) != self.cells[key]:
                cell.cell_contents = self.saved_cells[key]
        for key, (_, container, kind) in reached.containers.items():
            if _marks(container, kind, reached.names) == self.before[key]:
                continue
            saved = self.saved[key]
            if kind == "list":
                container[:] = saved
                continue
            added = [n for n in container if n not in saved and (
                kind != "namespace" or n in reached.names)]
            for name in added:
                del container[name]
            for name, value in saved.items():
                if container.get(name, _GONE) is not value:
                    container[name] = value

    def _changed(self) -> str | None:
        """What changed, in the user's words (the first change found), or None."""
        reached = self.reached
        for key, (name, cell) in reached.cells.items():
            if _value_mark(cell_value(cell)) != self.cells[key]:
                return f"`{name}` (a variable of the enclosing function) rebound"
        for key, (path, container, kind) in reached.containers.items():
            before, after = self.before[key], _marks(container, kind, reached.names)
            if before == after:
                continue
            if kind == "list":
                return f"`{path}` (a list) changed"
            for name in list(before) + [n for n in after if n not in before]:
                if before.get(name) != after.get(name):
                    where = (f"global `{name}`" if kind == "namespace" else
                             f"`{path}.{name}`" if kind == "attributes" else
                             f"`{path}[{name!r}]`")
                    return _described(where, before.get(name), after.get(name))
        return None


    # ---- traced values left in Python's state ------------------------------------------------
    def stored_tracers(self, trace) -> list[tuple[tuple, object]]:
        """The traced values of ``trace`` the call left in the state it reaches (``log.append(
        loss)``, ``history.append((step, loss))``, ``self.last = y``, ``nonlocal best; best =
        x``), each with where it is (a traced value, or a tuple holding some): they become
        their values when the call ends (``put_values``), as NumPy's would be there."""
        reached = self.reached
        if reached is None:
            return []

        def holds(value) -> bool:
            return (type(value) is Tracer and value._trace is trace) or (
                type(value) is tuple and any(type(v) is Tracer and v._trace is trace
                                             for v in value))

        found = []
        for _, cell in reached.cells.values():
            value = cell_value(cell)
            if holds(value):
                found.append((("cell", cell, None), value))
        for _, container, kind in reached.containers.values():
            if kind == "list":
                items = enumerate(container)
            elif kind == "namespace":
                items = ((n, container[n]) for n in reached.names if n in container)
            else:
                items = list(container.items())
            for key, value in items:
                if holds(value):
                    found.append((("item", container, key), value))
        return found

    @staticmethod
    def put_values(stored: list[tuple[tuple, object]], value_of: dict) -> None:
        """Each stored traced value's place gets its value (``value_of``: by the tracer's id),
        a tuple a tuple of values (unless the place was rebound meanwhile)."""
        for (kind, holder, key), item in stored:
            value = value_of[id(item)] if type(item) is Tracer else tuple(
                value_of.get(id(v), v) for v in item)
            if kind == "cell":
                if cell_value(holder) is item:
                    holder.cell_contents = value
            elif key < len(holder) if type(holder) is list else key in holder:
                if holder[key] is item:
                    holder[key] = value


def stored_tracers_in(item, trace) -> list:
    """The traced values of ``trace`` a stored item is or holds (``stored_tracers``)."""
    return [item] if type(item) is Tracer else [
        v for v in item if type(v) is Tracer and v._trace is trace]


def _described(where: str, before, after) -> str:
    if before is not None and after is not None and before[0] == after[0]:
        return f"{where} grew or shrank"
    return f"{where} {'set' if before is None else 'deleted' if after is None else 'rebound'}"

