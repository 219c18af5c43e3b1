"""The derivative of every elementwise op, written once for both modes of differentiation.

For an elementwise op each partial derivative is multiplication by a value, so one linear map
per operand serves forward mode (applied to the operand's tangent) and reverse mode (applied to
the result's cotangent). ``PARTIALS[opcode](operands, result)`` gives those maps (``None``: the
result does not depend on that operand). The formulas, and their values where the derivative
is undefined (``abs`` at 0, ``maximum`` on ties, ``power`` at 0), are JAX's."""
from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

from . import lax
from .tracer import Tracer

LinearMap = Callable[[Tracer], Tracer]


class NotDifferentiable:
    """The table entry of an op that has no derivative toolkit can give; ``reason`` says why."""

    def __init__(self, reason: str):
        self.reason = reason

    def __repr__(self) -> str:
        return f"NotDifferentiable({self.reason!r})"


# piecewise constant (floor, sign, compare ...) or with non-float results (bit ops): the
# tangent is zero wherever the derivative exists, as JAX's ``defjvp_zero``
ZERO_DERIVATIVE = "zero derivative"


def _const(x: Tracer, value) -> Tracer:
    return lax.full_like(x, value)


def _op(opcode: str, *xs: Tracer) -> Tracer:
    return lax.elementwise(opcode, *xs)


def _times(factor: Tracer) -> LinearMap:
    return lambda t: _op("multiply", t, factor)


def _over(divisor: Tracer) -> LinearMap:
    return lambda t: _op("divide", t, divisor)


def _identity(t: Tracer) -> Tracer:
    return t


def _negated(t: Tracer) -> Tracer:
    return _op("negate", t)


def _where(pred: Tracer, t: Tracer, zero_where_false: bool = True) -> Tracer:
    zero = _const(t, 0)
    return lax.select(pred, t, zero) if zero_where_false else lax.select(pred, zero, t)


def _balanced_eq(x: Tracer, out: Tracer, y: Tracer) -> Tracer:
    """1 where ``x`` is the result, 0.5 where both operands are (a tie), else 0 (JAX's rule
    for maximum and minimum, so that the two partials sum to 1)."""
    x_is = lax.compare(x, out, "EQ")
    y_is = lax.compare(y, out, "EQ")
    one, half, zero = _const(x, 1), _const(x, 0.5), _const(x, 0)
    return lax.select(x_is, lax.select(y_is, half, one), zero)


def _unary(derivative: Callable[[Tracer, Tracer], LinearMap]):
    return lambda xs, out: (derivative(xs[0], out),)


def _power(xs: Sequence[Tracer], out: Tracer):
    x, y = xs
    one = _const(y, 1)
    y_is_zero = lax.compare(y, _const(y, 0), "EQ")
    d_base = lax.select(
        y_is_zero, _const(x, 0), _op("multiply", y, _op("power", x, _op("subtract", y, one)))
    )
    x_is_zero = lax.compare(x, _const(x, 0), "EQ")
    d_exponent = lax.select(x_is_zero, _const(x, 0), _op("multiply", _op("log", x), out))
    return _times(d_base), _times(d_exponent)


def _divide(xs: Sequence[Tracer], out: Tracer):
    x, y = xs
    return _over(y), lambda t: _op("negate", _op("divide", _op("multiply", t, out), y))


def _remainder(xs: Sequence[Tracer], out: Tracer):
    x, y = xs  # x - trunc(x / y) * y
    q = _op("divide", x, y)
    trunc = _op("multiply", _op("sign", q), _op("floor", _op("abs", q)))
    return _identity, _times(_op("negate", trunc))


def _atan2(xs: Sequence[Tracer], out: Tracer):
    a, b = xs
    norm = _op("add", _op("multiply", a, a), _op("multiply", b, b))
    return _times(_op("divide", b, norm)), _times(_op("negate", _op("divide", a, norm)))


def _select(xs: Sequence[Tracer], out: Tracer):
    pred = xs[0]
    return None, lambda t: _where(pred, t), lambda t: _where(pred, t, zero_where_false=False)


def _erf_derivative(x: Tracer, out: Tracer) -> LinearMap:
    scale = _const(x, 2 / math.sqrt(math.pi))
    return _times(_op("multiply", scale, _op("exponential", _op("negate", _op("multiply", x, x)))))


def _real_part(xs: Sequence[Tracer], out: Tracer):
    return (_identity,)


def _complex_error(xs, out):
    raise AssertionError("complex values are refused before a rule runs")


PARTIALS: dict[str, object] = {
    "negate": lambda xs, out: (_negated,),
    "abs": _unary(lambda x, out: _times(_op("sign", x))),
    "sign": ZERO_DERIVATIVE,
    "not": ZERO_DERIVATIVE,
    "floor": ZERO_DERIVATIVE,
    "ceil": ZERO_DERIVATIVE,
    "round-nearest-even": ZERO_DERIVATIVE,
    "round-nearest-afz": ZERO_DERIVATIVE,
    "is-finite": ZERO_DERIVATIVE,
    "popcnt": ZERO_DERIVATIVE,
    "count-leading-zeros": ZERO_DERIVATIVE,
    "exponential": _unary(lambda x, out: _times(out)),
    "exponential-minus-one": _unary(lambda x, out: _times(_op("add", out, _const(out, 1)))),
    "log": _unary(lambda x, out: _over(x)),
    "log-plus-one": _unary(lambda x, out: _over(_op("add", x, _const(x, 1)))),
    "sqrt": _unary(lambda x, out: _over(_op("multiply", out, _const(out, 2)))),
    "rsqrt": _unary(
        lambda x, out: _times(_op("divide", _op("multiply", out, _const(out, -0.5)), x))
    ),
    "cbrt": _unary(
        lambda x, out: _over(_op("multiply", _const(out, 3), _op("multiply", out, out)))
    ),
    "tanh": _unary(
        lambda x, out: _times(_op("subtract", _const(out, 1), _op("multiply", out, out)))
    ),
    "logistic": _unary(
        lambda x, out: _times(_op("multiply", out, _op("subtract", _const(out, 1), out)))
    ),
    "sine": _unary(lambda x, out: _times(_op("cosine", x))),
    "cosine": _unary(lambda x, out: _times(_op("negate", _op("sine", x)))),
    "tan": _unary(lambda x, out: _times(_op("add", _const(out, 1), _op("multiply", out, out)))),
    "erf": _unary(_erf_derivative),
    "real": _real_part,  # of a real number: itself (complex values are refused earlier)
    "imag": ZERO_DERIVATIVE,  # of a real number: 0
    "add": lambda xs, out: (_identity, _identity),
    "subtract": lambda xs, out: (_identity, _negated),
    "multiply": lambda xs, out: (_times(xs[1]), _times(xs[0])),
    "divide": _divide,
    "remainder": _remainder,
    "power": _power,
    "maximum": lambda xs, out: (
        _times(_balanced_eq(xs[0], out, xs[1])),
        _times(_balanced_eq(xs[1], out, xs[0])),
    ),
    "minimum": lambda xs, out: (
        _times(_balanced_eq(xs[0], out, xs[1])),
        _times(_balanced_eq(xs[1], out, xs[0])),
    ),
    "atan2": _atan2,
    "and": ZERO_DERIVATIVE,
    "or": ZERO_DERIVATIVE,
    "xor": ZERO_DERIVATIVE,
    "shift-left": ZERO_DERIVATIVE,
    "shift-right-arithmetic": ZERO_DERIVATIVE,
    "shift-right-logical": ZERO_DERIVATIVE,
    "complex": NotDifferentiable("complex numbers are not differentiated yet"),
    "compare": ZERO_DERIVATIVE,
    "select": _select,
}


def is_differentiable_dtype(dtype) -> bool:
    """Can a value of ``dtype`` carry a derivative? Complex values can (and are then refused by
    name, rather than silently dropping the derivative that flows through them)."""
    return np.dtype(dtype).kind in "fc"
