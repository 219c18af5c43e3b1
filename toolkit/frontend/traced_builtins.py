"""Python's ``max`` and ``min`` on traced scalars, inside the traced function's module.

Dynamic-programming code compares table entries with the builtins: ``table[i, j] =
max(table[i, j], table[i, k] + table[k + 1, j])``. Python's ``max(a, b)`` asks ``b > a`` and
then needs that traced comparison as a bool, which is a graph break per call (a program of
thousands of segments). With every value a 0-d traced array or a scalar, the same choice is
one ``select``: ``max`` keeps its running value ``m`` unless a later ``x`` has ``x > m``, and
``min`` unless ``x < m``. That is Python's rule exactly: the first of equal values wins
(``max(0.0, -0.0)`` is ``0.0``), and a NaN wins only where it comes first, since every
comparison with it is false.

Where Python would hand back values of different types (an int array and a float, or two
arrays of different dtypes) a select cannot (its result has one dtype), so the builtin runs as
before, as it does for ``key=``, for arrays of more than one element (ambiguous truth values
in NumPy too) and for calls with no traced value at all."""
from __future__ import annotations

import builtins
import sys

import numpy

from . import lax
from .tracer import Tracer, current_trace, numpy_scalar


def _scalar_fits(value, dtype: numpy.dtype) -> bool:
    """Is a Python scalar of the arrays' own kind (a bool with bools, an int that fits with
    integers, a float with floats)? Then the select's one type is what Python would hand back
    whichever it chose; ``max(0, x)`` with a float ``x`` is an int or a float in Python, and
    runs the builtin."""
    if isinstance(value, bool):
        return dtype.kind == "b"
    if isinstance(value, int):
        return dtype.kind in "iu" and _int_fits(value, dtype)
    if isinstance(value, float):
        return dtype.kind == "f"
    return False


def _int_fits(value: int, dtype: numpy.dtype) -> bool:
    info = numpy.iinfo(dtype)
    return info.min <= value <= info.max


def _selectable(values: list) -> bool:
    """Are ``values`` 0-d traced arrays of one dtype and Python scalars that keep it?"""
    dtype = None
    for v in values:
        if isinstance(v, Tracer):
            if v.shape != () or (dtype is not None and v.dtype != dtype):
                return False
            dtype = v.dtype
        elif not isinstance(v, (bool, int, float)):
            return False
    return dtype is not None and all(isinstance(v, Tracer) or _scalar_fits(v, numpy.dtype(dtype))
                                     for v in values)


def _select(replaces):
    """The select chain of ``max``/``min`` over values ``_selectable`` accepted."""

    def select(*values):
        from .registry import EXPORTS

        best = values[0]
        trace = current_trace()
        if all(type(v) is Tracer and v._trace is trace for v in values):
            # (what np.where makes of a comparison and two 0-d arrays of one type, without
            # resolving their types, lifting or broadcasting them: the same instructions)
            for value in values[1:]:
                taken = replaces(value, best)
                with trace.op_scope("where"):
                    best = lax.select(taken, value, best)
        else:
            for value in values[1:]:
                best = EXPORTS["where"](replaces(value, best), value, best)
        if any(isinstance(v, Tracer) and v._scalar for v in values):  # (max(x.max(), 0.5):
            return numpy_scalar(best)  # NumPy's scalar, or a Python float, which it subclasses)
        return best

    return select


def _extremum(builtin, replaces):
    select = _select(replaces)

    def extremum(*args, **kwargs):
        if (current_trace() is not None and "key" not in kwargs
                and not (len(args) == 1 and isinstance(args[0], Tracer))  # its elements
                and not ("default" in kwargs and len(args) > 1)):  # (Python's TypeError)
            if len(args) == 1:
                try:
                    values = list(args[0])
                except TypeError:  # not iterable: the builtin says so
                    return builtin(*args, **kwargs)
                args = (values,)  # (an iterator is consumed once, here)
            else:
                values = list(args)
            if len(values) > 1 or (values and len(args) == 1):
                if _selectable(values):
                    tape = current_trace().tape
                    if tape is None:
                        return select(*values)
                    # (one recorded operation, keyed by the user's line: a replayed call
                    # hands back its result without tracing)
                    return tape.operation(select, tuple(values), {}, sys._getframe(1))
        return builtin(*args, **kwargs)

    extremum.__name__ = extremum.__qualname__ = builtin.__name__
    extremum.__doc__ = builtin.__doc__
    return extremum


# name -> what it means in the traced function's module while it is traced
TRACED_BUILTINS = {
    "max": _extremum(builtins.max, lambda x, m: x > m),
    "min": _extremum(builtins.min, lambda x, m: x < m),
}
