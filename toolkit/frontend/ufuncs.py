"""NumPy ufuncs on traced arrays. Types come from NumPy's own resolution
(``ufunc.resolve_dtypes``, NEP 50 weak scalars included); each ufunc then lowers to HLO
with NumPy's semantics, where they differ from XLA's (floor division, modulo, fmod by 0)."""
from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

from . import lax
from .complex_ufuncs import COMPLEX_UFUNCS, unsupported_complex_ufunc
from .errors import (DTypeMismatchError, LazyText, ShapeMismatchError, UnsupportedNumpyError,
                     UserValueError)
from .tracer import Tracer
from .views import fresh_results

Impl = Callable[..., Tracer]  # (operands converted and broadcast, out dtype) -> Tracer
UFUNCS: dict[np.ufunc, Impl] = {}


def _register(*ufuncs):
    def deco(fn):
        for u in ufuncs:
            UFUNCS[u] = fn
        return fn
    return deco


def _op(opcode: str) -> Impl:
    return lambda *xs, out: lax.elementwise(opcode, *xs, weak=all(x.weak_type for x in xs))


def _const(x: Tracer, value, dtype=None) -> Tracer:
    return lax.full_like(x, value, dtype)


def _describe(value) -> str:
    if isinstance(value, Tracer):
        return value.describe()
    if isinstance(value, (bool, int, float, complex)):
        return f"Python {type(value).__name__} {value!r}"
    arr = np.asarray(value)
    return f"NumPy {arr.dtype}{list(arr.shape)}"


def _type_descriptor(value):
    if isinstance(value, Tracer):
        return {"f": float, "c": complex}.get(value.dtype.kind, int) \
            if value.weak_type and value.dtype.kind != "b" else value.dtype
    if isinstance(value, bool):
        return np.dtype(bool)
    if isinstance(value, (int, float, complex)) and not isinstance(value, np.generic):
        return type(value)
    return np.asarray(value).dtype


def apply_ufunc(ufunc: np.ufunc, inputs: Sequence, kwargs: dict | None = None) -> Tracer:
    name = ufunc.__name__
    impl = UFUNCS.get(ufunc)
    if impl is None:
        raise UnsupportedNumpyError(
            f"np.{name} is not supported on traced arrays by toolkit "
            f"(supported ufuncs: {', '.join(sorted(u.__name__ for u in UFUNCS))})")
    kwargs = dict(kwargs or {})
    dtype = kwargs.pop("dtype", None)
    if kwargs.pop("out", None) is not None or kwargs.get("where", True) is not True:
        raise UnsupportedNumpyError(
            f"np.{name}: 'out=' and 'where=' are not supported on traced arrays"
        )
    kwargs.pop("where", None)
    casting = kwargs.pop("casting", None)
    if kwargs:
        raise UnsupportedNumpyError(f"np.{name}: arguments {sorted(kwargs)} are not supported")
    trace = lax.trace_of(inputs)
    with trace.op_scope(name):
        if ufunc in _COMPARISONS and dtype is None:
            decided = _compared_beyond_range(ufunc, inputs)
            if decided is not None:
                return decided
        descriptors = tuple(_type_descriptor(v) for v in inputs)
        # dtype= is NumPy's signature=(None, ..., dtype): the loop of that output type, its
        # inputs cast to it (under casting=), not the usual result cast afterwards
        signature = None if dtype is None else (None,) * ufunc.nin + (
            lax.check_supported_dtype(dtype, f"dtype= of np.{name}"),) * ufunc.nout
        resolved = _RESOLVED.get((ufunc, descriptors, signature, casting))
        if resolved is None:
            resolved = _resolve(ufunc, descriptors, inputs, trace, signature, casting)
        dtypes, in_dtypes, out_dtype, complex_ = resolved
        if complex_:
            impl = COMPLEX_UFUNCS[ufunc]
        if ufunc in _COMPARISONS and _compares_python_int_to_narrow_int(inputs, in_dtypes):
            # NumPy 2 compares a Python int with a narrower integer array exactly (2**40 > any
            # int32) rather than raising: compare in int64, where both fit.
            in_dtypes = (np.dtype(np.int64),) * ufunc.nin
        # (Python numbers alone, bools among them, make a Python number: weakly typed)
        weak = all(isinstance(v, Tracer) and v.weak_type or
                   (isinstance(v, (int, float, complex)) and not isinstance(v, np.generic))
                   for v in inputs)
        # (a Python-int operand made a narrower integer is checked by lax.convert: NEP 50)
        promoter = _promoting_scalar(inputs, out_dtype)
        operands = [lax.lift(trace, _as_float16(v, weak) if r == np.float16 and d != r else v, d,
                             weak=weak, what=f"operand of np.{name}")
                    for v, r, d in zip(inputs, dtypes, in_dtypes)]
        if ufunc is np.power and np.dtype(out_dtype).kind in "iu":
            # (after lifting: NumPy converts a Python-int exponent first, so one out of the
            # type's range is its OverflowError before any negative exponent's ValueError)
            _check_integer_exponent(inputs[1])
        operands = broadcast_all(operands, f"np.{name}", inputs)
        if ufunc is np.power and np.dtype(out_dtype) in _POWER_FAST_PATHS_DTYPES \
                and np.size(inputs[1]) == 1 and np.dtype(in_dtypes[1]) == np.dtype(out_dtype):
            result = _scalar_power(operands[0], operands[1], inputs[1], np.dtype(out_dtype))
        else:
            result = impl(*operands, out=np.dtype(out_dtype))
        if ufunc.nout > 1:  # np.modf: one result per output dtype
            return tuple(
                fresh_results(lax.convert(r, d, weak), inputs)
                for r, d in zip(result, dtypes[ufunc.nin :])
            )
        result = lax.convert(result, out_dtype, weak)
        if weak and np.dtype(out_dtype).kind == "i" and ufunc in _PYTHON_INT_GROWTH:
            _check_python_int_fits(ufunc, operands)
        if dtype is None and promoter is not None:
            narrow = max((v.dtype for v in inputs if isinstance(v, Tracer)),
                         key=lambda d: d.itemsize)
            trace.promotions.append((trace.location(), f"np.{name} with the NumPy scalar "
                                     f"{promoter!r}", narrow, np.dtype(out_dtype), result))
        return fresh_results(result, inputs)


# Arithmetic of Python ints alone (traced ints are weak int64) that Python would carry past
# int64 as an arbitrary-precision int: n * n * n with n = 2**30 is 2**90 in Python, and would
# wrap to 0 here. Each such result is checked on every call; beyond int64 the call raises.
_PYTHON_INT_GROWTH = {np.add: "add", np.subtract: "subtract", np.multiply: "multiply",
                      np.power: "power", np.left_shift: None, np.negative: "negate",
                      np.absolute: "abs"}
# (float64's rounding, at most 2**10 near 2**63, never hides an overflow: a result within
# 4,096 of the end raises too, where Python's int would still fit)
_INT64_FLOAT_LIMIT = float(2 ** 63 - 2 ** 12)


def _check_python_int_fits(ufunc: np.ufunc, operands) -> None:
    """Raise OverflowError after a call whose Python-int arithmetic left int64: the same
    operation in float64 tells the result's magnitude."""
    floats = [lax.convert(o, np.float64) for o in operands]
    opcode = _PYTHON_INT_GROWTH[ufunc]
    if opcode is None:  # a << b is a * 2 ** b
        two = lax.full_like(floats[1], 2.0)
        magnitude = lax.elementwise("multiply", floats[0],
                                    lax.elementwise("power", two, floats[1]))
    else:
        magnitude = lax.elementwise(opcode, *floats)
    magnitude = lax.elementwise("abs", magnitude)
    failed = lax.compare(magnitude, lax.full_like(magnitude, _INT64_FLOAT_LIMIT), "GE")
    lax.add_check(failed, OverflowError,
                  f"np.{ufunc.__name__} of Python ints leaves int64, where toolkit traces "
                  "Python ints (Python would give an arbitrary-precision int): mark the "
                  "argument static (static_argnums=), or compute in float")


_POWER_FAST_PATHS_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
# (ufunc, operand type descriptors) -> what _resolve found: a traced NumPy program asks the same
# few dozen questions thousands of times (bounded; only answers that raised nothing are kept)
_RESOLVED: dict[tuple, tuple] = {}
_RESOLVED_KEPT = 4096


def _resolve(ufunc: np.ufunc, descriptors: tuple, inputs, trace, signature=None,
             casting=None) -> tuple:
    """(all dtypes, the input dtypes it computes in, the output dtype, complex?) for operands
    of these types, as NumPy's type resolution picks them; an error where toolkit cannot."""
    name = ufunc.__name__
    key = (ufunc, descriptors, signature, casting)
    if all(isinstance(d, type) for d in descriptors):  # only Python scalars: NumPy's defaults
        descriptors = tuple(
            np.dtype({int: np.int64, float: np.float64, complex: np.complex128}[d])
            for d in descriptors
        )
    try:
        options = {} if signature is None else {"signature": signature}
        dtypes = ufunc.resolve_dtypes(descriptors + (None,) * ufunc.nout,
                                      casting="same_kind" if casting is None else casting,
                                      **options)
    except TypeError as e:
        raise DTypeMismatchError(
            f"np.{name} does not accept {' and '.join(_describe(v) for v in inputs)}: {e}"
            + _where(trace)) from None
    in_dtypes, out_dtype = dtypes[: ufunc.nin], dtypes[-1]
    complex_ = any(np.dtype(d).kind == "c" for d in dtypes)
    if complex_ and COMPLEX_UFUNCS.get(ufunc) is None:
        raise unsupported_complex_ufunc(name)
    # NumPy's float16 loops compute in float32 (but for steps between float16 neighbours)
    if any(d == np.float16 for d in in_dtypes) and ufunc not in (np.nextafter, np.spacing):
        in_dtypes = tuple(np.dtype(np.float32) if d == np.float16 else d for d in in_dtypes)
    for v, d in zip(inputs, in_dtypes):
        lax.check_supported_dtype(d, LazyText(
            lambda v=v, d=d: f"np.{name} of {_describe(v)} (NumPy computes it in {d})"))
    lax.check_supported_dtype(out_dtype, f"the result of np.{name}")
    resolved = (dtypes, tuple(in_dtypes), out_dtype, complex_)
    if len(_RESOLVED) >= _RESOLVED_KEPT:
        _RESOLVED.clear()
    _RESOLVED[key] = resolved
    return resolved


def _check_integer_exponent(exponent) -> None:
    """NumPy's integer power loop raises for a negative exponent; one known when tracing (a
    number, a NumPy scalar, a constant array) is checked here, a traced one on every call (the
    program returns the flag: lax.add_check)."""
    known = exponent._known() if isinstance(exponent, Tracer) else exponent
    if known is None:
        if exponent.dtype.kind == "i":
            lax.add_check(lax.compare(exponent, lax.full_like(exponent, 0), "LT"),
                          UserValueError, "Integers to negative integer powers are not allowed.")
        return
    known = np.asarray(known)
    if known.dtype.kind in "iu" and (known < 0).any():
        raise UserValueError("Integers to negative integer powers are not allowed.")


def _as_float16(value, weak: bool):
    """An operand NumPy's float16 loop reads as float16 (a Python float or int, a weak traced
    number, a narrow int array), rounded to float16 before the loop widens it to float32:
    ``x * 0.1`` multiplies by float16(0.1), as NumPy's does (70000.0 becomes inf)."""
    if isinstance(value, Tracer):
        return value if value.dtype == np.float16 else lax.convert(value, np.float16, weak)
    with np.errstate(over="ignore"):
        return np.asarray(value).astype(np.float16)


def _scalar_power(x: Tracer, e: Tracer, exponent, out: np.dtype) -> Tracer:
    """``np.power`` with one exponent for the whole array, as NumPy's float32/float64 loops
    compute it: an exponent of 2 squares (``x * x``), -1 takes the reciprocal, 0.5 the square
    root (so ``np.power(-0.0, 0.5)`` is -0.0 and ``np.power(-inf, 0.5)`` NaN, where ``pow`` gives
    0 and inf); any other exponent calls ``pow``. A traced exponent picks at run time."""
    special = [(2.0, lambda: _square(x, out)), (-1.0, lambda: _reciprocal(x, out)),
               (0.5, lambda: UFUNCS[np.sqrt](x, out=out))]
    known = exponent._known() if isinstance(exponent, Tracer) else np.asarray(exponent)
    if known is not None:
        value = float(np.asarray(known).reshape(()))
        for fast, compute in special:
            if value == fast:
                return compute()
        return UFUNCS[np.power](x, e, out=out)
    result = UFUNCS[np.power](x, e, out=out)
    for fast, compute in reversed(special):
        result = lax.select(lax.compare(e, lax.full_like(e, fast), "EQ"), compute(), result)
    return result


def _promoting_scalar(inputs, out_dtype):
    """The NumPy scalar (np.float64(...), a 0-d float64 array) that makes a narrower traced
    float array's result wider, under NumPy 2's rules (NEP 50: such a scalar is not weak, unlike
    a Python float); None where there is none."""
    out = np.dtype(out_dtype)
    if out.kind not in "fc":
        return None
    traced = [v for v in inputs if isinstance(v, Tracer) and v.dtype.kind in "fc"]
    if not traced or any(v.dtype.itemsize >= out.itemsize for v in traced):
        return None
    for v in inputs:
        if isinstance(v, (np.generic, np.ndarray)) and np.ndim(v) == 0 \
                and np.dtype(v.dtype).kind in "fc" and np.dtype(v.dtype).itemsize == out.itemsize:
            return v[()] if isinstance(v, np.ndarray) else v
    return None


_COMPARISONS = frozenset(
    {np.equal, np.not_equal, np.less, np.less_equal, np.greater, np.greater_equal}
)


_MIRRORED = {np.less: np.greater, np.less_equal: np.greater_equal, np.greater: np.less,
             np.greater_equal: np.less_equal, np.equal: np.equal, np.not_equal: np.not_equal}


def _compared_beyond_range(ufunc, inputs) -> Tracer | None:
    """NumPy 2 compares a Python int with an integer array exactly: an int beyond the array
    dtype's whole range decides every element (``x_uint64 > -1`` is all True, ``x_int64 ==
    2**64`` all False), where converting it would overflow. None where it does not apply."""
    if len(inputs) != 2:
        return None
    for k, (array, number) in enumerate((inputs, inputs[::-1])):
        if type(number) is int and isinstance(array, Tracer) and not array.weak_type \
                and array.dtype.kind in "iu":
            info = np.iinfo(array.dtype)
            if info.min <= number <= info.max:
                return None
            above = number > info.max
            op = ufunc if k == 0 else _MIRRORED[ufunc]  # (n < x is x > n)
            value = {np.less: above, np.less_equal: above, np.greater: not above,
                     np.greater_equal: not above, np.equal: False, np.not_equal: True}[op]
            return lax.full(array.trace, array.shape, value, np.bool_)
    return None


def _compares_python_int_to_narrow_int(inputs, in_dtypes) -> bool:
    """A Python int that may not fit the narrow integer type the comparison resolved to: a
    constant out of its range, or a weak traced int (an argument, whose value varies)."""
    if not all(d.kind in "iu" and d.itemsize < 8 for d in in_dtypes):
        return False
    info = np.iinfo(in_dtypes[0])
    return any(type(v) is int and not info.min <= v <= info.max
               or isinstance(v, Tracer) and v.weak_type and v.dtype.kind in "iu" for v in inputs)


def _where(trace) -> str:
    loc = trace.location()
    return f" (at {loc})" if loc else ""


def broadcast_all(operands: list[Tracer], what: str, originals=None) -> list[Tracer]:
    shapes = [t.shape for t in operands]
    if all(s == shapes[0] for s in shapes):
        return operands
    try:
        shape = np.broadcast_shapes(*shapes)
    except ValueError:
        originals = originals or operands
        desc = " and ".join(_describe(v) for v in originals)
        trace = operands[0].trace
        raise ShapeMismatchError(
            f"{what}: operands could not be broadcast together: {desc}{_where(trace)}") from None
    return [lax.broadcast_to(t, shape) for t in operands]


# ---- arithmetic -----------------------------------------------------------------------
@_register(np.add)
def _add(a, b, out):
    return _op("or" if out == np.bool_ else "add")(a, b, out=out)


@_register(np.multiply)
def _multiply(a, b, out):
    return _op("and" if out == np.bool_ else "multiply")(a, b, out=out)


UFUNCS[np.subtract] = _op("subtract")
UFUNCS[np.true_divide] = _op("divide")
UFUNCS[np.maximum] = _op("maximum")
UFUNCS[np.minimum] = _op("minimum")
UFUNCS[np.arctan2] = _op("atan2")
UFUNCS[np.negative] = _op("negate")
UFUNCS[np.power] = _op("power")
UFUNCS[np.bitwise_and] = _op("and")
UFUNCS[np.bitwise_or] = _op("or")
UFUNCS[np.bitwise_xor] = _op("xor")
UFUNCS[np.invert] = _op("not")
UFUNCS[np.left_shift] = _op("shift-left")
UFUNCS[np.right_shift] = _op("shift-right-arithmetic")


@_register(np.positive)
def _positive(x, out):
    return x


@_register(np.absolute)
def _absolute(x, out):
    return x if x.dtype == np.bool_ else _op("abs")(x, out=out)


@_register(np.sign)
def _sign(x, out):
    s = _op("sign")(x, out=out)
    # HLO's sign keeps -0.0 (as XLA's does); NumPy's gives +0.0, which -0.0 + 0.0 is
    return lax.elementwise("add", s, _const(s, 0.0), weak=s.weak_type) if s.dtype.kind == "f" else s


def _int_floor_divide(a, b):
    zero = _const(a, 0)
    q = lax.elementwise("divide", a, b)
    r = lax.elementwise("remainder", a, b)
    adjust = _and(lax.compare(r, zero, "NE"), lax.compare(lax.compare(r, zero, "LT"),
                                                         lax.compare(b, zero, "LT"), "NE"))
    q = lax.select(adjust, lax.elementwise("subtract", q, _const(a, 1)), q)
    return lax.select(lax.compare(b, zero, "EQ"), zero, q)


def _int_mod(a, b):
    zero = _const(a, 0)
    r = lax.elementwise("remainder", a, b)
    adjust = _and(lax.compare(r, zero, "NE"), lax.compare(lax.compare(r, zero, "LT"),
                                                         lax.compare(b, zero, "LT"), "NE"))
    r = lax.select(adjust, lax.elementwise("add", r, b), r)
    return lax.select(lax.compare(b, zero, "EQ"), zero, r)


def _and(p, q):
    return lax.elementwise("and", p, q)


def _float_divmod(a, b):
    """NumPy's ``npy_divmod`` (floor division and modulo for floats), branch-free."""
    zero, one = _const(a, 0.0), _const(a, 1.0)
    mod = lax.elementwise("remainder", a, b)
    quotient = lax.elementwise("divide", a, b)
    div = lax.elementwise("divide", lax.elementwise("subtract", a, mod), b)
    mod_nonzero = lax.compare(mod, zero, "NE")
    wrong_sign = lax.compare(lax.compare(b, zero, "LT"), lax.compare(mod, zero, "LT"), "NE")
    adjust = _and(mod_nonzero, wrong_sign)
    div = lax.select(adjust, lax.elementwise("subtract", div, one), div)
    mod = lax.select(adjust, lax.elementwise("add", mod, b), mod)
    # a zero remainder has the divisor's sign; made from mod itself (-(0 - mod) is -0.0 and
    # mod + 0 is +0.0), not a constant, so that it differentiates as mod does (by a, 1)
    mod = lax.select(mod_nonzero, mod,
                     lax.select(lax.compare(b, zero, "LT"),
                                lax.elementwise("negate", lax.elementwise("subtract", zero, mod)),
                                lax.elementwise("add", mod, zero)))
    floor = lax.elementwise("floor", div)
    round_up = lax.compare(lax.elementwise("subtract", div, floor), _const(a, 0.5), "GT")
    floor = lax.select(round_up, lax.elementwise("add", floor, one), floor)
    signed_zero = lax.elementwise("multiply", zero, quotient)
    floordiv = lax.select(lax.compare(div, zero, "NE"), floor, signed_zero)
    b_zero = lax.compare(b, zero, "EQ")
    floordiv = lax.select(b_zero, quotient, floordiv)
    return floordiv, mod


@_register(np.floor_divide)
def _floor_divide(a, b, out):
    return _float_divmod(a, b)[0] if out.kind == "f" else _int_floor_divide(a, b)


@_register(np.remainder)
def _remainder(a, b, out):
    return _float_divmod(a, b)[1] if out.kind == "f" else _int_mod(a, b)


@_register(np.fmod)
def _fmod(a, b, out):
    r = lax.elementwise("remainder", a, b)
    if out.kind == "f":
        return r
    zero = _const(a, 0)
    return lax.select(lax.compare(b, zero, "EQ"), zero, r)


def _nan_ignoring(opcode):
    def impl(a, b, out):
        m = lax.elementwise(opcode, a, b)
        if out.kind != "f":
            return m
        a_nan, b_nan = lax.compare(a, a, "NE"), lax.compare(b, b, "NE")
        return lax.select(b_nan, a, lax.select(a_nan, b, m))
    return impl


UFUNCS[np.fmax] = _nan_ignoring("maximum")
UFUNCS[np.fmin] = _nan_ignoring("minimum")


@_register(np.square)
def _square(x, out):
    return lax.elementwise("multiply", x, x)


@_register(np.reciprocal)
def _reciprocal(x, out):
    if out.kind == "f":
        return lax.elementwise("divide", _const(x, 1.0), x)
    # NumPy's integer reciprocal is 1.0 / x converted back: 1, -1, else 0; 1 / 0 is x86's
    # "integer indefinite" (INT_MIN) for 32- and 64-bit signed types and 0 for the others
    if out.kind == "u":
        return lax.select(lax.compare(x, _const(x, 1), "EQ"), _const(x, 1), _const(x, 0))
    by_zero = np.iinfo(out).min if out.itemsize >= 4 else 0
    result = lax.select(lax.compare(x, _const(x, 0), "EQ"), _const(x, by_zero), _const(x, 0))
    result = lax.select(lax.compare(x, _const(x, -1), "EQ"), _const(x, -1), result)
    return lax.select(lax.compare(x, _const(x, 1), "EQ"), _const(x, 1), result)


# ---- transcendental and rounding --------------------------------------------------------
for _ufunc, _opcode in [(np.exp, "exponential"), (np.expm1, "exponential-minus-one"),
                        (np.log, "log"), (np.log1p, "log-plus-one"), (np.sqrt, "sqrt"),
                        (np.cbrt, "cbrt"), (np.tanh, "tanh"), (np.sin, "sine"),
                        (np.cos, "cosine"), (np.tan, "tan")]:
    UFUNCS[_ufunc] = _op(_opcode)


def _scaled_log(base: float) -> Impl:
    def impl(x, out):
        return lax.elementwise("divide", lax.elementwise("log", x), _const(x, math.log(base)))
    return impl


UFUNCS[np.log2] = _scaled_log(2.0)
UFUNCS[np.log10] = _scaled_log(10.0)


@_register(np.exp2)
def _exp2(x, out):
    return lax.elementwise("power", _const(x, 2.0), x)


def _rounding(opcode):
    def impl(x, out):
        return x if x.dtype.kind != "f" else lax.elementwise(opcode, x)
    return impl


UFUNCS[np.floor] = _rounding("floor")
UFUNCS[np.ceil] = _rounding("ceil")
UFUNCS[np.rint] = _rounding("round-nearest-even")


@_register(np.trunc)
def _trunc(x, out):
    if x.dtype.kind != "f":
        return x
    negative = lax.compare(x, _const(x, 0.0), "LT")
    return lax.select(negative, lax.elementwise("ceil", x), lax.elementwise("floor", x))


@_register(np.isfinite)
def _isfinite(x, out):
    return lax.elementwise("is-finite", x) if x.dtype.kind == "f" else _const(x, True, np.bool_)


@_register(np.isnan)
def _isnan(x, out):
    return lax.compare(x, x, "NE") if x.dtype.kind == "f" else _const(x, False, np.bool_)


@_register(np.isinf)
def _isinf(x, out):
    if x.dtype.kind != "f":
        return _const(x, False, np.bool_)
    return lax.compare(lax.elementwise("abs", x), _const(x, np.inf), "EQ")


# ---- comparisons and logic ---------------------------------------------------------------
# A signed value compared with an unsigned one (NumPy 2 compares int64 with uint64 exactly):
# the answer when the signed side is negative, per direction, for (signed on the left, on the right)
_NEGATIVE_SIGNED = {
    "EQ": (False, False),
    "NE": (True, True),
    "LT": (True, False),
    "LE": (True, False),
    "GT": (False, True),
    "GE": (False, True),
}


def _compare(a: Tracer, b: Tracer, direction: str) -> Tracer:
    if a.dtype == b.dtype:
        return lax.compare(a, b, direction)
    signed_left = a.dtype.kind == "i"
    s = a if signed_left else b
    wide = np.dtype(np.uint64)
    exact = lax.compare(lax.convert(a, wide), lax.convert(b, wide), direction)
    negative = lax.compare(s, _const(s, 0), "LT")
    answer = _NEGATIVE_SIGNED[direction][0 if signed_left else 1]
    return lax.select(negative, _const(negative, answer, np.bool_), exact)


for _ufunc, _direction in [(np.equal, "EQ"), (np.not_equal, "NE"), (np.less, "LT"),
                           (np.less_equal, "LE"), (np.greater, "GT"), (np.greater_equal, "GE")]:
    UFUNCS[_ufunc] = (lambda d: lambda a, b, out: _compare(a, b, d))(_direction)


def _truth(x: Tracer) -> Tracer:
    return x if x.dtype == np.bool_ else lax.compare(x, _const(x, 0), "NE")


for _ufunc, _opcode in [(np.logical_and, "and"), (np.logical_or, "or"), (np.logical_xor, "xor")]:
    UFUNCS[_ufunc] = (lambda op: lambda a, b, out: lax.elementwise(op, _truth(a), _truth(b)))(
        _opcode
    )


@_register(np.logical_not)
def _logical_not(x, out):
    return lax.elementwise("not", _truth(x))


def ufunc_names() -> list[str]:
    return sorted(u.__name__ for u in UFUNCS)
