"""Python's own arithmetic where its numbers meet: traced Python numbers (weakly typed) behave
as Python's ints, floats and bools do, where that differs from NumPy's loops."""
from __future__ import annotations

import numpy as np

from .tracer import Tracer


# Python's arithmetic on its own numbers raises where NumPy's gives inf, NaN or 0: what it
# raises, and when (the divisor, or the shift count, of the second operand)
PYTHON_ERRORS = {
    np.true_divide: (ZeroDivisionError, "division by zero"),
    np.floor_divide: (ZeroDivisionError, "integer division or modulo by zero"),
    np.remainder: (ZeroDivisionError, "integer modulo by zero"),
    np.left_shift: (ValueError, "negative shift count"),
    np.right_shift: (ValueError, "negative shift count"),
}


# Python computes these on bools as on ints (True + True is 2, -True is -1, ~True is -2), where
# NumPy's bool loops give a bool or refuse
INT_ARITHMETIC = frozenset({np.add, np.subtract, np.multiply, np.floor_divide, np.remainder,
                            np.power, np.left_shift, np.right_shift, np.negative, np.positive,
                            np.absolute, np.invert})


def python_bools_as_ints(operands) -> tuple:
    """Python bools among Python-number operands, as the Python ints 0 and 1 they are."""
    from . import lax

    return tuple(int(v) if type(v) is bool else
                 lax.convert(v, np.int64, weak=True) if type(v) is Tracer and v.dtype == np.bool_
                 else v for v in operands)


def python_numbers(operands) -> bool:
    """Are both operands Python numbers (a Python number argument, or one made from them)?"""
    return all((type(v) is Tracer and v.weak_type and not v.shape and not v._scalar)
               or type(v) in (bool, int, float, complex) for v in operands)


def check_python_arithmetic(ufunc, a, b) -> None:
    """Raise what Python raises for ``a op b`` of Python numbers: at once where ``b`` is known,
    else after the call (a check the program returns)."""
    error, message = PYTHON_ERRORS[ufunc]
    shift = ufunc in (np.left_shift, np.right_shift)
    if type(b) is not Tracer:
        if (b < 0) if shift else (b == 0):
            raise error(message)
        return
    from . import lax

    zero = lax.full_like(b, 0)
    lax.add_check(lax.compare(b, zero, "LT" if shift else "EQ"), error, message)


__all__ = ["INT_ARITHMETIC", "PYTHON_ERRORS", "check_python_arithmetic", "python_bools_as_ints",
           "python_numbers"]
