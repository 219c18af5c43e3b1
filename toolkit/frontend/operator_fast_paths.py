"""The operator fast paths of tracing: what ``apply_ufunc`` makes of two traced arrays of one
type, or of a traced array and a Python number its type holds, wherever NumPy's type
resolution computes the ufunc in that very type (``int32 + int32``, ``a < b``, ``x == 3``),
emitted without resolving types again, lifting or converting. A traced Python loop's
commonest operations cost a third of the general path's this way. The HLO is the general
path's instruction for instruction (tests/test_trace_fast_paths.py, every operator and dtype);
everything else (promotion, powers, float16, complex numbers, Python ints out of range, errors)
is the general path's (``dispatch._binary``)."""
from __future__ import annotations

import numpy as np

from . import lax, views
from .tracer import Tracer, current_trace, numpy_scalar
from .ufuncs import UFUNCS, broadcast_all

# the float types a Python float takes exactly (NEP 50), with no float16 rounding
_FAST_FLOATS = frozenset({np.dtype(np.float32), np.dtype(np.float64)})


def same_type_arrays(a: Tracer, b: Tracer) -> bool:
    """Two traced arrays of the current trace, of one type, not both weakly typed (a Python
    number's arithmetic is Python's: a weak result, its int range checked); a Python number
    traced as an argument of that type takes part, and the shapes broadcast as NumPy's do (an
    error there is the general path's own)."""
    return (a.dtype == b.dtype and not (a.weak_type and b.weak_type)
            and a._trace is b._trace and a._trace is current_trace())


# (ufunc, dtype) -> the result type of the ufunc's loop for two arrays of that dtype where
# NumPy runs it in that very type, else None (``same_type_loop``). At most the operators'
# ufuncs times the supported dtypes.
_SAME_TYPE_LOOPS: dict = {}
# ufuncs the general path lowers otherwise even in one type: power checks its integer
# exponents (float16, computed in float32, and complex numbers are refused by kind below)
_OTHERWISE_COMPUTED = frozenset({np.power})


def same_type_loop(ufunc, dtype: np.dtype):
    """The output type NumPy's type resolution gives ``ufunc`` for two arrays of ``dtype``,
    where it computes in ``dtype`` itself (``int32 + int32``, ``float64 < float64``: no
    conversion, no promotion) and apply_ufunc lowers it with nothing but the ufunc's own
    lowering; None elsewhere (the general path answers, errors included)."""
    key = (ufunc, dtype)
    found = _SAME_TYPE_LOOPS.get(key, _SAME_TYPE_LOOPS)
    if found is _SAME_TYPE_LOOPS:
        found = None
        if ufunc not in _OTHERWISE_COMPUTED and ufunc in UFUNCS and dtype.kind in "biuf" \
                and dtype != np.float16:
            try:
                *ins, out = ufunc.resolve_dtypes((dtype, dtype, None))
            except TypeError:  # (bool - bool: NumPy's own error, from the general path)
                ins, out = (), None
            if len(ins) == 2 and all(d == dtype for d in ins) and out.kind in "biuf" \
                    and out != np.float16:
                found = out
        _SAME_TYPE_LOOPS[key] = found
    return found


def exact_python_number(a: Tracer, number) -> bool:
    """A traced array of the current trace, not weakly typed, and a Python number NEP 50
    makes ``a``'s type exactly: for float32/float64 a Python float, or a Python int the type
    holds exactly (no float16 rounding); for an integer type a Python int in its range (no
    range check, no exact comparison in int64). The loop is then ``a``'s type's wherever NumPy
    computes the ufunc in that type (``same_type_loop``)."""
    kind = type(number)
    if a.weak_type or a._trace is not current_trace():
        return False
    dtype = a.dtype
    if dtype in _FAST_FLOATS:
        return kind is float or kind is int and -_EXACT_INTS <= number <= _EXACT_INTS
    if kind is int and dtype.kind in "iu":
        limits = _INT_LIMITS.get(dtype)
        if limits is None:
            info = np.iinfo(dtype)
            limits = _INT_LIMITS[dtype] = (int(info.min), int(info.max))
        return limits[0] <= number <= limits[1]
    return False


_EXACT_INTS = 1 << 24  # (float32 holds every int up to 2**24 exactly; float64 up to 2**53)
_INT_LIMITS: dict = {}  # integer dtype -> (its least, its greatest value): at most eight


def with_python_number(ufunc, a: Tracer, number, reflected: bool, out: np.dtype):
    """What apply_ufunc makes of ``a`` and a Python number (``exact_python_number``): the
    number lifted to a constant of ``a``'s type, broadcast to ``a``'s shape, and the ufunc's
    own lowering to ``out``, in that order (the same HLO), without resolving types again. The
    commonest operations of a stencil written with Python coefficients (``-c / (a * p[:, j] +
    b)``) and of integer code (``b1 + b2 == 3``)."""
    trace = a._trace
    name = ufunc.__name__
    with trace.op_scope(name):
        constant = lax.broadcast_to(lax.lift(trace, number, a.dtype, weak=False,
                                             what=f"operand of np.{name}"), a.shape)
        operands = (constant, a) if reflected else (a, constant)
        return numpy_scalar(views.fresh_results(UFUNCS[ufunc](*operands, out=out), (a,)))


def of_same_type(ufunc, operands, out: np.dtype) -> Tracer:
    """``ufunc`` of two traced arrays of one type (``same_type_arrays``) whose loop NumPy runs
    in that type, to ``out`` (``same_type_loop``): NumPy's broadcasting and the ufunc's own
    lowering, which makes ``out`` itself (no convert)."""
    name = ufunc.__name__
    with operands[0]._trace.op_scope(name):
        if operands[0].shape != operands[1].shape:
            operands = broadcast_all(list(operands), f"np.{name}", operands)
        return numpy_scalar(views.fresh_results(UFUNCS[ufunc](*operands, out=out), operands))
