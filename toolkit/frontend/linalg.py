"""Linear algebra on traced arrays: matmul, dot, vdot, inner, outer, tensordot, einsum."""
from __future__ import annotations

import operator

import numpy as np

from . import lax
from .einsum import einsum as _einsum
from .errors import ShapeMismatchError, UserTypeError, UserValueError
from .arguments import promote_pair, normalize_axis, reject
from .promotion import array_dtype
from .registry import numpy_function
from .ufuncs import apply_ufunc


@numpy_function(np.matmul)
def matmul(a, b, out=None, **kwargs):
    reject(out=out)
    a, b = promote_pair(a, b, "matmul")
    if a.ndim == 0 or b.ndim == 0:
        raise UserValueError(
            "matmul: input operand does not have enough dimensions (use * for scalars)"
        )
    if a.ndim <= 2 and b.ndim <= 2 and (a.ndim == 1 or b.ndim == 1):
        # a vector operand without batch dimensions: one dot of the vector itself, as JAX's
        # HLO has it (f64[k] . f64[k] -> f64[]), not reshapes to a matrix and back
        rhs_axis = b.ndim - 2 if b.ndim == 2 else 0
        if a.shape[-1] != b.shape[rhs_axis]:
            raise ShapeMismatchError(
                f"matmul: contracting dimensions differ: {a.describe()} @ {b.describe()} "
                f"({a.shape[-1]} != {b.shape[rhs_axis]})")
        return lax.dot_general(a, b, ((a.ndim - 1,), (rhs_axis,)))
    a2 = lax.reshape(a, (1,) + a.shape) if a.ndim == 1 else a
    b2 = lax.reshape(b, b.shape + (1,)) if b.ndim == 1 else b
    if a2.shape[-1] != b2.shape[-2]:
        raise ShapeMismatchError(
            f"matmul: contracting dimensions differ: {a.describe()} @ {b.describe()} "
            f"({a2.shape[-1]} != {b2.shape[-2]})")
    try:
        batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    except ValueError:
        raise ShapeMismatchError(
            f"matmul: batch dimensions do not broadcast: {a.describe()} @ {b.describe()}"
        ) from None
    a3 = lax.broadcast_to(a2, batch + a2.shape[-2:])
    b3 = lax.broadcast_to(b2, batch + b2.shape[-2:])
    nb = len(batch)
    out = lax.dot_general(a3, b3, ((nb + 1,), (nb,)), (tuple(range(nb)), tuple(range(nb))))
    shape = (
        batch + ((a2.shape[-2],) if a.ndim > 1 else ()) + ((b2.shape[-1],) if b.ndim > 1 else ())
    )
    return lax.reshape(out, shape)


@numpy_function(np.dot)
def dot(a, b, out=None):
    reject(out=out)
    a, b = promote_pair(a, b, "dot")
    if a.ndim == 0 or b.ndim == 0:
        return apply_ufunc(np.multiply, [a, b])
    rhs_axis = 0 if b.ndim == 1 else b.ndim - 2
    if a.shape[-1] != b.shape[rhs_axis]:
        raise ShapeMismatchError(
            f"dot: shapes {a.shape} and {b.shape} not aligned: "
            f"{a.shape[-1]} (dim {a.ndim - 1}) != {b.shape[rhs_axis]} (dim {rhs_axis})"
        )
    return lax.dot_general(a, b, ((a.ndim - 1,), (rhs_axis,)))


@numpy_function(np.vdot)
def vdot(a, b):
    a, b = promote_pair(a, b, "vdot")
    if a.dtype.kind == "c":  # NumPy conjugates the first argument
        a = apply_ufunc(np.conjugate, (a,))
    return dot(lax.reshape(a, (a.size,)), lax.reshape(b, (b.size,)))


@numpy_function(np.inner)
def inner(a, b):
    a, b = promote_pair(a, b, "inner")
    if a.ndim == 0 or b.ndim == 0:
        return apply_ufunc(np.multiply, [a, b])
    return lax.dot_general(a, b, ((a.ndim - 1,), (b.ndim - 1,)))


@numpy_function(np.outer)
def outer(a, b, out=None):
    reject(out=out)
    a, b = promote_pair(a, b, "outer")
    a1 = lax.reshape(a, (a.size, 1))
    b1 = lax.reshape(b, (1, b.size))
    return apply_ufunc(np.multiply, [a1, b1])


@numpy_function(np.tensordot)
def tensordot(a, b, axes=2):
    a, b = promote_pair(a, b, "tensordot")
    if not isinstance(axes, (list, tuple)):  # (any integer: NumPy's operator.index)
        axes = operator.index(axes)
        la, lb = tuple(range(a.ndim - axes, a.ndim)), tuple(range(axes))
    else:
        la, lb = (tuple(operator.index(v) for v in x) if isinstance(x, (list, tuple))
                  else (operator.index(x),) for x in axes)
    la = tuple(normalize_axis(x, a.ndim) for x in la)
    lb = tuple(normalize_axis(x, b.ndim) for x in lb)
    for i, j in zip(la, lb):
        if a.shape[i] != b.shape[j]:
            raise ShapeMismatchError(
                f"tensordot: shape-mismatch for sum ({a.describe()} axis {i} vs {b.describe()} "
                f"axis {j})"
            )
    return lax.dot_general(a, b, (la, lb))


@numpy_function(np.einsum)
def einsum(subscripts, *operands, out=None, optimize=False, dtype=None, casting="safe",
           order="K"):
    reject(out=out)
    if dtype is not None:  # NumPy casts every operand to dtype first, under casting= ("safe")
        dtype = lax.check_supported_dtype(dtype, "dtype= of np.einsum")
        trace = lax.trace_of(list(operands))
        for k, v in enumerate(operands):
            if not np.can_cast(array_dtype(v), dtype, casting):
                raise UserTypeError(
                    f"Cannot cast array data from {array_dtype(v)!r} to {dtype!r} according to "
                    f"the rule {casting!r} (operand {k} of np.einsum)")
        operands = tuple(lax.lift(trace, v, dtype, weak=False, wrap_ints=True) for v in operands)
    return _einsum(subscripts, *operands)
