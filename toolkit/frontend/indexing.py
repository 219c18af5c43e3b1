"""Indexing traced arrays with NumPy's rules.

Basic indices (ints, slices of any step, None, ...) become ``slice``/``reverse``/``reshape``.
Anything else is advanced indexing, lowered as JAX lowers it:
- integer arrays, lists and traced integers (with slices, None and ... around them) become one
  ``gather``; the broadcast advanced dimensions go where NumPy puts them: in place of the
  advanced indices when those are adjacent, else first;
- a lone traced integer (``x[i]``) becomes a ``dynamic-slice``;
- a concrete boolean array is its ``nonzero()``; a traced boolean mask cannot be read (the
  result's length would depend on data), only assigned through (``inplace``).

Negative indices count from the end. Out-of-range *concrete* indices raise IndexError at trace
time, as NumPy does; *traced* ones are checked on every call: the program returns a flag and
the call raises NumPy's IndexError (the HLO itself clamps, as XLA's gather does)."""
from __future__ import annotations

import operator
from dataclasses import dataclass

import numpy as np

from . import lax
from .errors import ShapeMismatchError, UnsupportedNumpyError, UserIndexError
from .shape_functions import stack
from .tracer import Tracer, can_break, concrete_or_raise


def _is_basic(k) -> bool:
    if k is None or k is Ellipsis or isinstance(k, slice):
        return True
    if isinstance(k, (Tracer, list, tuple, np.ndarray)) or isinstance(k, (bool, np.bool_)):
        return False
    return hasattr(k, "__index__")


def _as_tuple(key) -> tuple:
    return key if isinstance(key, tuple) else (key,)


def is_plain_key(key) -> bool:
    """Python ints and slices only (a cheap test that the index is basic)."""
    if type(key) is tuple:
        return all(type(k) is int or type(k) is slice for k in key)
    return type(key) is int or type(key) is slice


def is_advanced(key) -> bool:
    return not all(_is_basic(k) for k in _as_tuple(key))


def decompose(x: Tracer, key):
    """A basic index of ``x`` as (slice spec per dimension of ``x``, dimensions to reverse,
    the result's shape). Callers check ``is_advanced`` first."""
    plain = plain_decompose(x, key)
    if plain is not None:
        return plain
    key = tuple(_static_slice(k, key) for k in _as_tuple(key))
    for k in key:
        if not _is_basic(k):
            raise UnsupportedNumpyError(
                f"x[{key_text(key)}]: a slice with traced bounds has a data-dependent size; "
                "use a fixed-size window, np.take with traced indices, or mark the bound static")
    key = _expand_ellipsis(x, key)
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
            i = _checked_int(operator.index(k), size, dim, x)
            spec.append((i, i + 1, 1))
        dim += 1
    return spec, reverse, out_shape


def plain_decompose(x: Tracer, key):
    """``decompose`` for the index a Python loop writes most (``a[i, :j]``, ``a[:, k]``):
    Python ints and forward slices of Python ints, one per leading dimension. None for any
    other key (the general path then handles it, errors included)."""
    entries = key if type(key) is tuple else (key,)
    shape = x.shape
    if len(entries) > len(shape):
        return None
    spec, out_shape = [], []
    for dim, k in enumerate(entries):
        size = shape[dim]
        if type(k) is int:
            if not -size <= k < size:
                return None
            k %= size
            spec.append((k, k + 1, 1))
        elif type(k) is slice and (k.step is None or type(k.step) is int and k.step > 0) and \
                (k.start is None or type(k.start) is int) and \
                (k.stop is None or type(k.stop) is int):
            start, stop, step = k.indices(size)
            n = len(range(start, stop, step))
            spec.append((start, start + (n - 1) * step + 1 if n else start, step))
            out_shape.append(n)
        else:
            return None
    for size in shape[len(entries):]:
        spec.append((0, size, 1))
        out_shape.append(size)
    return spec, [], out_shape


def _checked_int(i: int, size: int, dim: int, x: Tracer) -> int:
    if not -size <= i < size:
        raise UserIndexError(
            f"index {i} is out of bounds for axis {dim} with size {size} ({x.describe()})"
        )
    return i % size


def _consumed(k) -> int:
    if k is None or k is Ellipsis:
        return 0
    if isinstance(k, np.ndarray) and k.dtype == np.bool_:
        return max(k.ndim, 1) if k.ndim else 0
    if isinstance(k, Tracer) and k.dtype == np.bool_:
        return k.ndim
    return 1


def _static_slice(k, key):
    """A slice whose bounds are traced, with their values (a graph break) where the function
    may break; anything else as it is."""
    if not isinstance(k, slice) or not any(isinstance(v, Tracer) for v in (k.start, k.stop,
                                                                           k.step)):
        return k
    error = UnsupportedNumpyError(
        f"x[{key_text(key)}]: a slice with traced bounds has a data-dependent size; use a "
        "fixed-size window (np.take with an index array, or lax.dynamic_slice), or mark the "
        "bound static")
    bounds = [v if not isinstance(v, Tracer) else
              operator.index(concrete_or_raise(v, "a slice with traced bounds", error)[()])
              for v in (k.start, k.stop, k.step)]
    return slice(*bounds)


def _expand_ellipsis(x: Tracer, key: tuple) -> tuple:
    n_ellipsis = sum(1 for k in key if k is Ellipsis)
    if n_ellipsis > 1:
        raise UserIndexError("an index can only have a single ellipsis ('...')")
    consumed = sum(_consumed(k) for k in key)
    if consumed > x.ndim:
        raise UserIndexError(
            f"too many indices for array: array is {x.ndim}-dimensional, but {consumed} were "
            "indexed"
        )
    if n_ellipsis:
        i = next(j for j, k in enumerate(key) if k is Ellipsis)
        return key[:i] + (slice(None),) * (x.ndim - consumed) + key[i + 1:]
    return key + (slice(None),) * (x.ndim - consumed)


def getitem(x: Tracer, key) -> Tracer:
    if not is_plain_key(key) and is_advanced(key):
        return advanced_getitem(x, key)
    spec, reverse, out_shape = decompose(x, key)
    result = lax.reshape(lax.rev(lax.slice_(x, spec), reverse), out_shape)
    if result is x:  # x[...] and x[:] are views of x too
        result = Tracer(x._trace, x.inst, x.weak_type)
    return result


# ---- advanced indexing -----------------------------------------------------------------------
@dataclass
class _Advanced:
    """An index entry that selects by integer: one per indexed dimension of ``x``."""
    dim: int  # the dimension of x it indexes
    value: object  # an integer np.ndarray (normalised, checked) or an integer Tracer


def _integer_index(k, x: Tracer, dim: int, key) -> object:
    """An integer index entry as a non-negative int64 ndarray, or an integer Tracer whose
    negative entries are wrapped at run time."""
    size = x.shape[dim]
    if isinstance(k, Tracer):
        if k.dtype.kind not in "iu":
            raise UserIndexError(
                f"arrays used as indices must be of integer (or boolean) type, got "
                f"{k.describe()} in x[{key_text(key)}]"
            )
        t = lax.convert(k, np.int64) if k.dtype != np.int64 else k
        # (NumPy casts a uint64 index to intp: from 2**63 it wraps to a negative index)
        signed = k.dtype.kind == "i" or k.dtype == np.uint64
        # NumPy raises IndexError for an index out of range: checked on every call
        low = (
            lax.compare(t, lax.full(t.trace, t.shape, -size, np.int64), "LT")
            if signed
            else None
        )
        high = lax.compare(t, lax.full(t.trace, t.shape, size, np.int64), "GE")
        lax.add_check(high if low is None else lax.elementwise("or", low, high), UserIndexError,
                      f"a traced index is out of bounds for axis {dim} with size {size} "
                      f"(x[{key_text(key)}] of {x.describe()})")
        if signed:
            zero = lax.full(t.trace, t.shape, 0, np.int64)
            t = lax.select(lax.compare(t, zero, "LT"),
                           lax.elementwise("add", t, lax.full(t.trace, t.shape, size, np.int64)), t)
        return t
    arr = np.asarray(k)
    if arr.dtype.kind not in "iu":
        raise UserIndexError(f"arrays used as indices must be of integer (or boolean) type, got "
                             f"{arr.dtype} in x[{key_text(key)}]")
    if arr.dtype == np.uint64:  # NumPy's cast to intp: from 2**63 a negative index
        arr = arr.astype(np.int64)
    bad = (arr < -size) | (arr >= size)
    if bad.any():
        raise UserIndexError(
            f"index {arr[bad].flat[0]} is out of bounds for axis {dim} with size {size} "
            f"({x.describe()})"
        )
    return np.where(arr < 0, arr + size, arr).astype(np.int64)


def _parse(x: Tracer, key):
    """The key as a list of entries: ('slice', dim, slice) | ('new',) | ('adv', _Advanced)."""
    raw = _as_tuple(key)
    expanded = []
    for k in raw:  # lists become arrays; concrete boolean arrays become their nonzero()
        if isinstance(k, (list, tuple)):
            if any(isinstance(v, Tracer) for v in k):
                k = stack([v if isinstance(v, Tracer) else lax.lift(x.trace, v) for v in k])
            else:
                # x[[]]: an empty integer index
                k = np.asarray(k) if len(k) else np.zeros(0, np.int64)
        if isinstance(k, (bool, np.bool_)):
            k = np.asarray(k)
        expanded.append(k)
    key_t = _expand_ellipsis(x, tuple(expanded))
    entries, dim = [], 0
    for k in key_t:
        if k is None:
            entries.append(("new",))
        elif isinstance(k, slice):
            entries.append(("slice", dim, _static_slice(k, raw)))
            dim += 1
        elif isinstance(k, Tracer) and k.dtype == np.bool_:
            if can_break(k) is None or k.ndim == 0:
                raise UnsupportedNumpyError(
                    f"x[{key_text(raw)}] with a traced boolean mask: the result's length depends "
                    "on how many "
                    f"entries are True, which is data. Use np.where(mask, x, 0) (same shape), or "
                    f"np.nonzero(mask, size=N) for a fixed number of entries ({k.describe()})"
                )
            want = x.shape[dim: dim + k.ndim]
            if k.shape != tuple(want):
                raise UserIndexError(
                    f"boolean index did not match indexed array along axis {dim}; "
                    f"size of axis is {want[0] if want else 0} but size of corresponding "
                    f"boolean axis is {k.shape[0]}")
            # a graph break hands over the count alone: the positions stay traced, so the next
            # segment compiles again only for a new count, not for new positions
            from .registry import EXPORTS

            for d, idx in enumerate(EXPORTS["nonzero"](k)):
                entries.append(("adv", _Advanced(dim + d, idx)))
            dim += k.ndim
        elif isinstance(k, np.ndarray) and k.dtype == np.bool_:
            if k.ndim == 0:
                raise UnsupportedNumpyError(
                    f"x[{key_text(raw)}]: a scalar boolean index is not supported; use x[None] "
                    "(for True) or an empty slice")
            want = x.shape[dim: dim + k.ndim]
            if k.shape != tuple(want):
                raise UserIndexError(
                    f"boolean index did not match indexed array along axis {dim}; "
                    f"size of axis is {want[0] if want else 0} but size of corresponding "
                    f"boolean axis is {k.shape[0]}"
                )
            for d, idx in enumerate(np.nonzero(k)):
                entries.append(("adv", _Advanced(dim + d, idx.astype(np.int64))))
            dim += k.ndim
        elif hasattr(k, "__index__") and not isinstance(k, (Tracer, np.ndarray)):
            entries.append(
                ("adv", _Advanced(dim, _integer_index(np.asarray(operator.index(k)), x, dim, raw)))
            )
            dim += 1
        else:
            entries.append(("adv", _Advanced(dim, _integer_index(k, x, dim, raw))))
            dim += 1
    return entries


def _broadcast_shape(advanced, key) -> tuple[int, ...]:
    shapes = [tuple(a.value.shape) for a in advanced]
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise UserIndexError(
            "shape mismatch: indexing arrays could not be broadcast together with shapes "
            + " ".join(str(s).replace(" ", "") for s in shapes)
        ) from None


@dataclass
class _Plan:
    """How x[key] reads with advanced indices: slice x (``spec``/``reverse``), gather at the
    broadcast advanced indices (``batch`` dims, the rest of x at ``offset_dims``), then insert
    the size-1 dims of None (``layout``)."""
    advanced: list
    spec: list
    reverse: list
    batch: tuple
    offset_dims: list
    layout: list

    def plain(self, shape) -> bool:
        """Only advanced indices and whole dimensions: a write is the gather's transpose."""
        return not self.reverse and all(s == (0, n, 1) for s, n in zip(self.spec, shape)) and \
            all(item[0] != "new" for item in self.layout)


def _plan(x: Tracer, key) -> _Plan:
    entries = _parse(x, key)
    advanced = [e[1] for e in entries if e[0] == "adv"]
    spec = [(0, n, 1) for n in x.shape]  # the slices, on their own dims (advanced dims stay whole)
    reverse = []
    for e in entries:
        if e[0] == "slice":
            _, dim, k = e
            start, stop, step = k.indices(x.shape[dim])
            n = len(range(start, stop, step))
            if step > 0:
                spec[dim] = (start, start + (n - 1) * step + 1 if n else start, step)
            else:
                spec[dim] = (start + (n - 1) * step if n else 0, start + 1 if n else 0, -step)
                reverse.append(dim)
    batch = _broadcast_shape(advanced, key)
    # where the broadcast advanced dimensions go: in place when adjacent, else first
    positions = [i for i, e in enumerate(entries) if e[0] == "adv"]
    adjacent = positions == list(range(positions[0], positions[-1] + 1))
    layout = []  # output dims: ("batch",) once, ("dim", d) per sliced dim, ("new",) per None
    for i, e in enumerate(entries):
        if e[0] == "adv":
            if adjacent and i == positions[0]:
                layout.append(("batch",))
        else:
            layout.append(("dim", e[1]) if e[0] == "slice" else ("new",))
    if not adjacent:
        layout.insert(0, ("batch",))
    offset_dims, out_dim = [], 0
    for item in layout:
        if item[0] == "batch":
            out_dim += len(batch)
        elif item[0] == "dim":
            offset_dims.append(out_dim)
            out_dim += 1
    return _Plan(advanced, spec, reverse, batch, offset_dims, layout)


def advanced_getitem(x: Tracer, key) -> Tracer:
    plan = _plan(x, key)
    x = lax.rev(lax.slice_(x, plan.spec), plan.reverse)
    result = _gather(x, plan.advanced, plan.batch, plan.offset_dims)
    final_shape, it = [], iter(result.shape)  # None adds size-1 dimensions
    for item in plan.layout:
        if item[0] == "new":
            final_shape.append(1)
        elif item[0] == "batch":
            final_shape.extend(next(it) for _ in plan.batch)
        else:
            final_shape.append(next(it))
    return lax.reshape(result, final_shape)


def _index_array(x: Tracer, advanced: list[_Advanced], batch) -> Tracer:
    """The advanced indices broadcast to ``batch`` and stacked along a last dimension."""
    trace = x.trace
    columns = []
    for a in advanced:
        v = (
            a.value
            if isinstance(a.value, Tracer)
            else lax.lift(trace, a.value, np.int64, weak=False, what="index")
        )
        columns.append(lax.reshape(lax.broadcast_to(v, batch), tuple(batch) + (1,)))
    return columns[0] if len(columns) == 1 else lax.concatenate(columns, len(batch))


def _check_nonempty(x: Tracer, dims) -> None:
    for d in dims:
        if x.shape[d] == 0:  # only a traced index gets here: concrete ones were checked
            raise UserIndexError(
                f"a traced index into axis {d} of size 0 of {x.describe()} is always out "
                "of bounds (NumPy raises IndexError)"
            )


def _gather(x: Tracer, advanced: list[_Advanced], batch, offset_dims) -> Tracer:
    """x gathered at the broadcast advanced indices: the batch dimensions, then the remaining
    dimensions of x at ``offset_dims``; scalar indices, one of them traced, are a dynamic-slice."""
    dims = [a.dim for a in advanced]
    trace = x.trace
    out_shape = list(batch)
    for d in offset_dims:
        out_shape.insert(d, None)
    rest = iter(n for d, n in enumerate(x.shape) if d not in dims)
    out_shape = [next(rest) if n is None else n for n in out_shape]
    if 0 in out_shape:
        return lax.full(trace, out_shape, 0, x.dtype, x.weak_type)
    _check_nonempty(x, dims)
    if not batch and any(isinstance(a.value, Tracer) for a in advanced):
        starts = [lax.full(trace, (), 0, np.int64)] * x.ndim
        for a in advanced:
            starts[a.dim] = (
                a.value
                if isinstance(a.value, Tracer)
                else lax.lift(trace, a.value, np.int64, weak=False)
            )
        sizes = [1 if d in dims else n for d, n in enumerate(x.shape)]
        sliced = lax.dynamic_slice(x, starts, sizes)
        return lax.reshape(sliced, [n for d, n in enumerate(x.shape) if d not in dims])
    return lax.gather(x, _index_array(x, advanced, batch), offset_dims=offset_dims,
                      collapsed_slice_dims=sorted(dims), start_index_map=dims,
                      slice_sizes=[1 if d in dims else n for d, n in enumerate(x.shape)],
                      index_vector_dim=len(batch))


# ---- writes through an advanced index ----------------------------------------------------------
def element_positions(x: Tracer, key) -> Tracer:
    """The flat (row-major) position in ``x`` of every element ``x[key]`` selects, in the shape
    of ``x[key]``: writes through any index are a scatter at these positions."""
    trace = x.trace
    if x.ndim == 0:
        return getitem(lax.full(trace, (), 0, np.int64), key)
    flat = None
    stride = 1
    for d in range(x.ndim - 1, -1, -1):
        term = lax.iota(trace, np.int64, x.shape, d)
        if stride != 1:
            term = lax.elementwise("multiply", term, lax.full(trace, x.shape, stride, np.int64))
        flat = term if flat is None else lax.elementwise("add", flat, term)
        stride *= x.shape[d]
    return getitem(flat, key)


def scatter_into(x: Tracer, key, values: Tracer, combiner: str) -> Tracer:
    """``x`` with ``values`` (broadcast to the shape of ``x[key]``) combined into the selected
    elements, in row-major order of ``x[key]``: with 'assign' the last duplicate wins, as in
    NumPy; with 'add' duplicates accumulate, as in ``np.add.at``."""
    if is_advanced(key):
        plan = _plan(x, key)
        if plan.plain(x.shape):
            return _scatter_plain(x, plan, values, combiner)
    positions = element_positions(x, key)
    values = _values_for_write(values, positions.shape, x)
    n = positions.size
    flat_x = lax.reshape(x, (x.size,))
    if n == 0:
        return x
    out = lax.scatter(
        flat_x,
        lax.reshape(positions, (n, 1)),
        lax.reshape(values, (n,)),
        combiner,
        update_window_dims=(),
        inserted_window_dims=(0,),
        scatter_dims_to_operand_dims=(0,),
        index_vector_dim=1,
    )
    return lax.reshape(out, x.shape)


def _values_for_write(values: Tracer, shape, x: Tracer) -> Tracer:
    """``values`` broadcast to the shape of ``x[key]``, or NumPy's error for a write."""
    try:
        return lax.broadcast_to(values, tuple(shape))
    except ShapeMismatchError:
        raise ShapeMismatchError(
            f"shape mismatch: value array of shape {tuple(values.shape)} could not be "
            f"broadcast to indexing result of shape {tuple(shape)} "
            f"(assigning to {x.describe()})"
        ) from None


def _scatter_plain(x: Tracer, plan: _Plan, values: Tracer, combiner: str) -> Tracer:
    """The transpose of the gather: update windows of x's whole remaining dimensions."""
    dims = [a.dim for a in plan.advanced]
    shape = list(plan.batch)
    for d in plan.offset_dims:  # the read's shape: batch dims, x's other dims at offset_dims
        shape.insert(d, None)
    others = iter(n for d, n in enumerate(x.shape) if d not in dims)
    shape = [next(others) if n is None else n for n in shape]
    values = _values_for_write(values, shape, x)
    if 0 in shape:
        return x
    _check_nonempty(x, dims)
    return lax.scatter(x, _index_array(x, plan.advanced, plan.batch), values, combiner,
                       update_window_dims=plan.offset_dims, inserted_window_dims=sorted(dims),
                       scatter_dims_to_operand_dims=dims, index_vector_dim=len(plan.batch))


def key_text(key) -> str:
    def one(k):
        if isinstance(k, slice):
            return (
                ":".join("" if v is None else str(v) for v in (k.start, k.stop, k.step)).rstrip(":")
                or ":"
            )
        if k is Ellipsis:
            return "..."
        if isinstance(k, Tracer):
            return "<traced>"
        if isinstance(k, np.ndarray):
            return f"<array {k.dtype}{list(k.shape)}>"
        return repr(k)
    return ", ".join(one(k) for k in _as_tuple(key))
