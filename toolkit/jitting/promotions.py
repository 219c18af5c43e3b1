"""Float promotions by NumPy scalars, reported at compile time.

Under NumPy 2's rules (NEP 50) a NumPy float64 scalar, ``np.sqrt(2 / np.pi)`` or
``np.sqrt(d_k)``, is not weak: it turns a float32 array float64, and every value computed
from that one after it. toolkit computes what NumPy computes, so the program runs those in
float64: in a GPT-2 forward pass, 82 of 90 dots. Each such line is reported once per compile
(``PromotionEvent`` in the profile, a ``PromotionWarning``), with what it turned wider: the
instructions of the wide type reachable from it."""
from __future__ import annotations

import warnings

from ..ir.nodes import Module
from ..ir.ops import GroupOp
from ..ir.shapes import TupleShape
from ..ir.user_code import user_stacklevel
from ..profiler.events import PromotionEvent
from ..profiler.recorder import RECORDER



class PromotionWarning(UserWarning):
    """A NumPy scalar made a narrower float program wider (``tk.PromotionWarning``)."""


def _computation_of(module: Module, inst):
    for comp in module.computations:
        if any(i is inst for i in comp.instructions):
            return comp
    return None


def widened(module: Module, inst, wide) -> tuple[int, int]:
    """(dots, other operations) of dtype ``wide`` computed from ``inst`` on: a walk over its
    users, which stops at values of any other type (linear in the computation's size)."""
    comp = _computation_of(module, inst)
    if comp is None:
        return 0, 0
    users = comp.users()
    seen, stack, dots, operations = {id(inst)}, [inst], 0, 0
    while stack:
        for user in users.get(stack.pop(), ()):
            if id(user) in seen or isinstance(user.shape, TupleShape) \
                    or user.shape.dtype.numpy != wide:
                continue
            seen.add(id(user))
            stack.append(user)
            if user.opcode == "dot":
                dots += 1
            elif user.opcode not in GroupOp.BOOKKEEPING:
                operations += 1
    return dots, operations


def report_promotions(program, fn_name: str) -> list[PromotionEvent]:
    """One event (and one warning) per promoting line of the traced ``program``."""
    if not program.promotions:
        return []
    module = program.module
    total_dots = sum(i.opcode == "dot" for c in module.computations for i in c.instructions)
    events, lines = [], set()
    for location, what, narrow, wide, inst in program.promotions:
        where = str(location) if location else "?"
        if where in lines:
            continue
        lines.add(where)
        dots, operations = widened(module, inst, wide)
        event = PromotionEvent(fn_name, where, what, str(narrow), str(wide), dots, total_dots,
                               operations + 1, RECORDER.clock.now())
        events.append(event)
        RECORDER.record(event)
        warnings.warn(f"{fn_name}: {event.message}", PromotionWarning,
                      stacklevel=user_stacklevel())
    return events
