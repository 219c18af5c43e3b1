"""A traced array's ndim, shape and size, astype, and np.copyto."""
from __future__ import annotations

import numpy as np

from . import lax
from .arguments import as_tracer
from .errors import UnsupportedNumpyError
from .inplace import store_result
from .registry import EXPORTS, FUNCTIONS, numpy_function
from .tracer import Tracer
from .views import fresh_results


def astype(x, dtype, copy=True):
    x = as_tracer(x)
    result = lax.convert(x, lax.check_supported_dtype(dtype, "astype target"))
    return result if not copy and result is x else fresh_results(result, [x])


EXPORTS["astype"] = astype

def ndim(a) -> int:
    return a.ndim if isinstance(a, Tracer) else np.ndim(a)


def shape(a) -> tuple[int, ...]:
    return a.shape if isinstance(a, Tracer) else np.shape(a)


def size(a) -> int:
    return a.size if isinstance(a, Tracer) else np.size(a)


FUNCTIONS[np.ndim], FUNCTIONS[np.shape], FUNCTIONS[np.size] = ndim, shape, size
EXPORTS.update(ndim=ndim, shape=shape, size=size)


@numpy_function(np.copyto)
def copyto(dst, src, casting="same_kind", where=True):
    if where is not True:
        raise UnsupportedNumpyError("np.copyto(..., where=) is not supported on traced arrays; "
                                    "use dst[...] = np.where(where, src, dst)")
    if not isinstance(dst, Tracer):
        raise UnsupportedNumpyError(
            "np.copyto of a traced value into a NumPy array: the array is not part of the traced "
            "program. Make it with toolkit.numpy (tnp.zeros, tnp.empty ...) or return the value")
    trace = dst.trace
    value = src if isinstance(src, Tracer) else lax.lift(trace, src, what="np.copyto source")
    if value.dtype != dst.dtype and not np.can_cast(value.dtype, dst.dtype, casting):
        raise UnsupportedNumpyError(
            f"np.copyto: Cannot cast array data from dtype('{value.dtype}') to "
            f"dtype('{dst.dtype}') according to the rule '{casting}'"
        )
    store_result(
        dst,
        lax.convert(value, dst.dtype, value.weak_type) if casting != "same_kind" else value,
        "np.copyto",
    )


