"""A NumPy scalar stored into an integer array, as NumPy stores it: through a Python int for a
signed integer array (NaN is a ValueError, a value beyond the range an OverflowError), a
wrapping cast elsewhere. Shared by item assignment (inplace), np.array of scalars (creation)
and np.pad's constant (shape_functions)."""
from __future__ import annotations

import numpy as np

from . import lax
from .errors import UserOverflowError, UserValueError
from .tracer import Tracer
from .ufuncs import apply_ufunc


def check_scalar_fits(value: Tracer, dtype: np.dtype) -> None:
    """A traced NumPy scalar (``y.sum()``, an ``np.int64`` argument) stored as one element or
    a slice of a signed integer array: NumPy converts it through a Python int, so NaN is a
    ValueError and a value beyond the range an OverflowError, where a cast (an unsigned target,
    an index array, a 0-d array) wraps. Checked by the program, as NumPy checks each call."""
    dtype = np.dtype(dtype)
    if dtype.kind != "i" or value.dtype.kind not in "iuf" or np.can_cast(value.dtype, dtype):
        return
    info = np.iinfo(dtype)
    if value.dtype.kind == "f":
        lax.add_check(apply_ufunc(np.isnan, (value,)), UserValueError,
                      "cannot convert float NaN to integer (a NumPy float scalar stored into "
                      f"an {dtype} array)")
        lax.add_check(apply_ufunc(np.isinf, (value,)), UserOverflowError,
                      "cannot convert float infinity to integer (a NumPy float scalar stored "
                      f"into an {dtype} array)")
        whole = apply_ufunc(np.trunc, (value,))
        outside = apply_ufunc(np.logical_or, (apply_ufunc(np.less, (whole, float(info.min))),
                                              apply_ufunc(np.greater, (whole, float(info.max)))))
    else:
        outside = apply_ufunc(np.logical_or, (apply_ufunc(np.less, (value, int(info.min))),
                                              apply_ufunc(np.greater, (value, int(info.max)))))
    lax.add_check(outside, UserOverflowError,
                  f"Python integer out of bounds for {dtype} (a NumPy scalar stored into an "
                  f"{dtype} array: NumPy converts it through a Python int)")
