"""Basic indexing of traced arrays: ints, slices (any step), None and Ellipsis."""
from __future__ import annotations

import operator

import numpy as np

from . import lax
from .errors import UnsupportedNumpyError, UserIndexError
from .tracer import Tracer


def decompose(x: Tracer, key):
    """A basic index of ``x`` as (slice spec per dimension of ``x``, dimensions to reverse,
    the result's shape). Advanced indices are an UnsupportedNumpyError naming the index."""
    key = key if isinstance(key, tuple) else (key,)
    for k in key:
        if isinstance(k, Tracer) or isinstance(k, (list, np.ndarray)) or (
                not isinstance(k, (int, slice, type(None), type(Ellipsis))) and not hasattr(k, "__index__")):
            raise UnsupportedNumpyError(
                f"x[{_key_text(key)}]: advanced indexing (with arrays, lists or traced indices) "
                f"is not supported on {x.describe()}; only ints, slices, None and ... are")
    n_ellipsis = sum(k is Ellipsis for k in key)
    if n_ellipsis > 1:
        raise UserIndexError("an index can only have a single ellipsis ('...')")
    consumed = sum(k is not None and k is not Ellipsis for k in key)
    if consumed > x.ndim:
        raise UserIndexError(f"too many indices for array: array is {x.ndim}-dimensional, but {consumed} were indexed")
    if n_ellipsis:
        i = key.index(Ellipsis)
        key = key[:i] + (slice(None),) * (x.ndim - consumed) + key[i + 1:]
    else:
        key = key + (slice(None),) * (x.ndim - consumed)

    spec, reverse, out_shape = [], [], []
    dim = 0
    for k in key:
        if k is None:
            out_shape.append(1)
            continue
        size = x.shape[dim]
        if isinstance(k, slice):
            start, stop, step = k.indices(size)
            n = len(range(start, stop, step))
            if step > 0:
                spec.append((start, start + (n - 1) * step + 1 if n else start, step))
            else:  # a negative step: slice the mirrored range, then reverse it
                first = start + (n - 1) * step if n else 0
                spec.append((first, start + 1 if n else 0, -step))
                reverse.append(dim)
            out_shape.append(n)
        else:
            i = operator.index(k)
            if not -size <= i < size:
                raise UserIndexError(f"index {i} is out of bounds for axis {dim} with size {size} ({x.describe()})")
            i %= size
            spec.append((i, i + 1, 1))
        dim += 1
    return spec, reverse, out_shape


def getitem(x: Tracer, key) -> Tracer:
    spec, reverse, out_shape = decompose(x, key)
    result = lax.reshape(lax.rev(lax.slice_(x, spec), reverse), out_shape)
    if result is x:  # x[...] and x[:] are views of x too
        result = Tracer(x.trace, x.inst, x.weak_type)
    return result


def _key_text(key) -> str:
    def one(k):
        if isinstance(k, slice):
            return ":".join("" if v is None else str(v) for v in (k.start, k.stop, k.step)).rstrip(":") or ":"
        if k is Ellipsis:
            return "..."
        if isinstance(k, Tracer):
            return "<traced>"
        return repr(k)
    return ", ".join(one(k) for k in key)
