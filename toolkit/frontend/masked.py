"""``x[mask]`` with a traced mask, kept dense until its length is needed.

NumPy code updates the selected elements of an array with an expression of selections by the
same mask: ``Z[I] = Z[I] ** 2 + C[I]`` (a Mandelbrot iteration), ``r[r > 0] = r[r > 0] ** -1.5``
(an N-body step). Each ``x[mask]`` has as many elements as the mask has True entries, which is
data: a graph break, and a program per count. But the expression is elementwise and the
selection is written back by the same mask, so the result is ``where(mask, f(Z, C), Z)``, the
same values without the count, as a compiler that predicates does.

``x[mask]`` (a traced boolean mask of ``x``'s shape) is a ``MaskedSelection``: the dense array
and the mask, snapshotted (later writes into ``x`` do not change it). Elementwise ufuncs and
operators of selections by an equal mask and scalars are selections again, computed densely
(the values outside the mask are computed and never read). ``y[mask] = selection`` by an equal
mask is ``y[...] = where(mask, selection's values, y)``; ``.sum()`` and ``.mean()`` reduce the
selected elements with the additive padding elsewhere. Anything else (its shape, an index, a
NumPy function, another mask) *materializes* it: ``x[mask]`` as before, with its graph break
where the length is needed. Masks are equal when they are the same traced value or the same
comparison of the same operands (``r > 0`` written twice)."""
from __future__ import annotations

import operator

import numpy as np

from .tracer import Tracer

_SCALARS = (bool, int, float, complex, np.generic)


def _user_line() -> str | None:
    from ..ir.user_code import user_location

    location = user_location(3)
    return f"{location.file}:{location.line}" if location is not None else None


def same_mask(a: Tracer, b: Tracer) -> bool:
    """The same traced value, or one computed alike from the very same values (a mask written
    twice over one array version, ``r[r > 0] = r[r > 0] ** -1.5``: two comparisons of ``r``
    with two constants 0), looked at ``_MASK_DEPTH`` instructions deep."""
    pending = [(a.inst, b.inst, 0)]
    while pending:
        x, y, depth = pending.pop()
        if x is y:
            continue
        if depth >= _MASK_DEPTH or x.opcode != y.opcode or x.shape != y.shape \
                or len(x.operands) != len(y.operands) or x.opcode == "parameter":
            return False
        if x.opcode == "constant":
            p, q = x.attrs["literal"], y.attrs["literal"]
            if p.dtype != q.dtype or p.shape != q.shape or p.tobytes() != q.tobytes():
                return False
            continue
        if x.called_computations or not _same_attributes(x, y):
            return False
        pending.extend((p, q, depth + 1) for p, q in zip(x.operands, y.operands))
    return True


_MASK_DEPTH = 4


def _same_attributes(x, y) -> bool:
    from ..ir.structural import frozen_attribute

    return x.attrs.keys() == y.attrs.keys() and all(
        frozen_attribute(x.attrs[k], {}) == frozen_attribute(y.attrs[k], {}) for k in x.attrs)


class MaskedSelection:
    """``dense[mask]``, not yet compacted (module docstring)."""

    # _array: the selection as NumPy has it, once materialized; from then on it is that array
    # (out= and in-place operators write into it, and every later use reads it)
    __slots__ = ("dense", "mask", "_array", "_line")
    __array_priority__ = 1000  # (NumPy defers its operators to ours)

    def __init__(self, dense: Tracer, mask: Tracer, line: str | None = None):
        # snapshots: a write into the array after the selection does not change it
        self.dense = Tracer(dense._trace, dense.inst, dense.weak_type)
        self.mask = Tracer(mask._trace, mask.inst, mask.weak_type)
        self._array = None
        self._line = line  # where the user's x[mask] is (results of operators: none)
        if line is not None:
            noted = dense._trace.selections.setdefault(line, [0, {}])
            noted[0] += 1

    @classmethod
    def taken(cls, dense: Tracer, mask: Tracer) -> "MaskedSelection":
        """The user's ``dense[mask]``, noted at its line for the graph-break report."""
        return cls(dense, mask, _user_line())

    # ---- what is known without the count -----------------------------------------------------
    @property
    def dtype(self):
        return self.dense.dtype if self._array is None else self._array.dtype

    @property
    def ndim(self) -> int:
        return 1

    def materialize(self) -> Tracer:
        """``dense[mask]`` as NumPy has it: its length is data (a graph break, or the error that
        explains why there can be none)."""
        from .indexing import getitem

        if self._array is None:
            if self._line is not None:
                needed = self.dense._trace.selections[self._line][1]
                where = _user_line() or "?"
                needed[where] = needed.get(where, 0) + 1
            self._array = getitem(self.dense, self.mask)
        return self._array

    @property
    def dense_values(self) -> bool:
        """Not materialized: its values are the dense array's where the mask holds."""
        return self._array is None

    def __getattr__(self, name):  # (its shape, .T, .reshape ...: the real selection's)
        return getattr(self.materialize(), name)

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.materialize(), dtype=dtype)

    def __len__(self) -> int:
        return len(self.materialize())

    def __iter__(self):
        return iter(self.materialize())

    def __bool__(self):
        return bool(self.materialize())

    def __getitem__(self, key):
        return self.materialize()[key]

    def __setitem__(self, key, value):  # (into the selection, a copy: as NumPy's)
        self.materialize()[key] = materialized(value)

    def __repr__(self) -> str:
        return f"MaskedSelection({self.dense.describe()} where {self.mask.describe()})"

    # ---- elementwise -------------------------------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method == "__call__" and not kwargs and ufunc.nout >= 1 and self.dense_values:
            dense = _dense_operands(inputs, self.mask)
            if dense is not None:
                result = ufunc(*dense)
                if isinstance(result, tuple):
                    return tuple(MaskedSelection(r, self.mask) for r in result)
                return MaskedSelection(result, self.mask)
        inputs = tuple(v.materialize() if isinstance(v, MaskedSelection) else v for v in inputs)
        if "out" in kwargs:
            kwargs["out"] = tuple(v.materialize() if isinstance(v, MaskedSelection) else v
                                  for v in kwargs["out"])
        return getattr(ufunc, method)(*inputs, **kwargs)

    def __array_function__(self, func, types, args, kwargs):
        reduce = _REDUCTIONS.get(func)
        if reduce is not None and len(args) == 1 and args[0] is self and not kwargs \
                and self.dense_values and (reduce in (_sum, _mean) or self.dtype.kind in "biuf"):
            return reduce(self)
        return func(*materialized(args), **materialized(kwargs))

    def sum(self, *args, **kwargs):
        if args or kwargs or not self.dense_values:
            return self.materialize().sum(*args, **kwargs)
        return _sum(self)

    def mean(self, *args, **kwargs):
        if args or kwargs or not self.dense_values:
            return self.materialize().mean(*args, **kwargs)
        return _mean(self)

    def max(self, *args, **kwargs):
        if args or kwargs or not self.dense_values or self.dtype.kind not in "biuf":
            return self.materialize().max(*args, **kwargs)
        return _max(self)

    def min(self, *args, **kwargs):
        if args or kwargs or not self.dense_values or self.dtype.kind not in "biuf":
            return self.materialize().min(*args, **kwargs)
        return _min(self)


def _dense_operands(inputs, mask: Tracer):
    """The ufunc's operands with each selection by an equal mask as its dense values, or None
    where one cannot be (another mask, an array whose length would have to match the count)."""
    dense = []
    for v in inputs:
        if isinstance(v, MaskedSelection):
            if not v.dense_values or not same_mask(v.mask, mask):
                return None
            dense.append(v.dense)
        elif isinstance(v, _SCALARS) or (isinstance(v, Tracer) and v.ndim == 0):
            dense.append(v)
        else:
            return None
    return dense


def materialized(value):
    """``value`` with every selection in it (lists, tuples, dicts) as NumPy's array."""
    if isinstance(value, MaskedSelection):
        return value.materialize()
    if isinstance(value, (list, tuple)):
        items = [materialized(v) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    if isinstance(value, dict):
        return {k: materialized(v) for k, v in value.items()}
    return value


def _padded(selection: MaskedSelection, dtype) -> Tracer:
    """The dense values in ``dtype``, with -0 outside the mask (x + -0.0 is x, -0.0 too)."""
    from .registry import EXPORTS

    values = selection.dense.astype(dtype) if selection.dtype != dtype else selection.dense
    kind = np.dtype(dtype).kind
    pad = (np.array(complex(-0.0, -0.0), dtype) if kind == "c" else
           np.array(-0.0, dtype) if kind == "f" else np.zeros((), dtype))
    return EXPORTS["where"](selection.mask, values, pad)


def _count(selection: MaskedSelection) -> Tracer:
    from .registry import EXPORTS

    return EXPORTS["count_nonzero"](selection.mask)


def _sum(selection: MaskedSelection):
    """``x[mask].sum()``: NumPy's dtype; an empty selection's sum is +0."""
    from .registry import EXPORTS

    dtype = np.sum(np.zeros(1, selection.dtype)).dtype
    total = EXPORTS["sum"](_padded(selection, dtype))
    if dtype.kind in "fc":  # (all padding: -0.0, where NumPy's empty sum is 0.0)
        total = EXPORTS["where"](_count(selection) == 0, np.zeros((), dtype), total)
    return total


def _mean(selection: MaskedSelection):
    """``x[mask].mean()``: summed in NumPy's accumulator type, divided in its result type (an
    empty selection: 0 / 0, NaN, as in NumPy)."""
    from .registry import EXPORTS

    result = np.mean(np.zeros(1, selection.dtype)).dtype
    # (NumPy's: float64 for integers, float32 for float16, else the result's own type)
    accumulate = np.float64 if selection.dtype.kind in "biu" else \
        np.float32 if result == np.float16 else result
    total = EXPORTS["sum"](_padded(selection, accumulate))
    return total.astype(result) / _count(selection).astype(result)


def _extreme(selection: MaskedSelection, ufunc):
    """``x[mask].max()`` / ``.min()``: the reduction of the dense values with the padding at
    the other end of the dtype's range (it never wins: a NaN selected still does), and, as
    NumPy, a ValueError after the call when nothing was selected."""
    from .registry import EXPORTS

    dtype = selection.dtype
    largest = ufunc is np.maximum
    if dtype.kind == "f":
        pad = -np.inf if largest else np.inf
    elif dtype.kind == "b":
        pad = not largest
    else:
        info = np.iinfo(dtype)
        pad = info.min if largest else info.max
    name = "max" if largest else "min"
    padded = EXPORTS["where"](selection.mask, selection.dense, np.array(pad, dtype))
    selection.dense.trace.add_check(
        _count(selection) == 0, ValueError,
        f"zero-size array to reduction operation {ufunc.__name__} which has no identity "
        f"({name} of x[mask] selecting nothing)")
    return EXPORTS[name](padded)


def _max(selection: MaskedSelection):
    return _extreme(selection, np.maximum)


def _min(selection: MaskedSelection):
    return _extreme(selection, np.minimum)


_REDUCTIONS = {np.sum: _sum, np.mean: _mean, np.max: _max, np.min: _min, np.amax: _max,
               np.amin: _min}


def _operator(apply, reflected: bool = False):
    """An operator of selections as the dense arrays' own operator (``ndarray.__pow__``'s
    fast paths included: ``x ** 2`` is ``np.square``), or of the materialized selection."""
    def op(self, other):
        operands = (other, self) if reflected else (self, other)
        dense = _dense_operands(operands, self.mask) if self.dense_values else None
        if dense is not None:
            return MaskedSelection(apply(*dense), self.mask)
        return apply(*materialized(operands))
    return op


def _in_place(apply):
    """``s op= other`` writes into the selection itself (another name for it sees the new
    values, as in NumPy), with the dense array's in-place rules (its casts, its errors)."""
    def op(self, other):
        dense = _dense_operands((self, other), self.mask) if self.dense_values else None
        if dense is not None:
            values = Tracer(self.dense._trace, self.dense.inst, self.dense.weak_type)
            self.dense = apply(values, dense[1])
        else:
            apply(self.materialize(), materialized(other))
        return self
    return op


def _unary(apply):
    def op(self):
        if self.dense_values:
            return MaskedSelection(apply(self.dense), self.mask)
        return apply(self._array)
    return op


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor",
              "lshift", "rshift"):
    _pyname = "and_" if _name == "and" else "or_" if _name == "or" else _name
    setattr(MaskedSelection, f"__{_name}__", _operator(getattr(operator, _pyname)))
    setattr(MaskedSelection, f"__r{_name}__", _operator(getattr(operator, _pyname),
                                                        reflected=True))
    setattr(MaskedSelection, f"__i{_name}__", _in_place(getattr(operator, f"i{_name}")))
for _name in ("lt", "le", "gt", "ge", "eq", "ne"):
    setattr(MaskedSelection, f"__{_name}__", _operator(getattr(operator, _name)))
MaskedSelection.__neg__ = _unary(operator.neg)
MaskedSelection.__pos__ = _unary(operator.pos)
MaskedSelection.__abs__ = _unary(abs)
MaskedSelection.__invert__ = _unary(operator.invert)
MaskedSelection.__hash__ = None
MaskedSelection.__matmul__ = lambda self, other: self.materialize() @ materialized(other)
MaskedSelection.__rmatmul__ = lambda self, other: materialized(other) @ self.materialize()


def assign_selection(target: Tracer, key, value: MaskedSelection) -> bool:
    """``target[key] = value`` where ``key`` is the mask ``value`` was selected by (an equal
    one) and covers ``target``: ``target[...] = where(mask, value's values, target)``, NumPy's
    cast to ``target``'s dtype included. False where it is not (the caller materializes)."""
    from .registry import EXPORTS

    if not (value.dense_values and isinstance(key, Tracer) and key.dtype == np.bool_
            and key.shape == target.shape and same_mask(key, value.mask)):
        return False
    merged = EXPORTS["where"](key, value.dense, target)
    target[...] = merged
    return True

__all__ = ["MaskedSelection", "assign_selection", "materialized", "same_mask"]
