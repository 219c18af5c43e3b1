"""The ``sort`` op's comparators and semantics. toolkit builds its comparators with
``build_numpy_order`` (NumPy's ascending order: NaN after every number, -0.0 equal to 0.0;
several keys compare lexicographically, the first key first); ``numpy_order_keys`` recognises
exactly those (by structure), so the evaluator can sort with NumPy's own stable sort. Any other
comparator is evaluated as written: a stable sort by rank, each element placed after every
element that compares less than it and every equal element that comes before it."""
from __future__ import annotations

import functools

import numpy as np

from .builder import ComputationBuilder, ModuleBuilder, NameUniquer
from .dtypes import ElementType
from .nodes import Computation
from .shapes import Shape


def numpy_order_comparator(module: ModuleBuilder, key_types, operand_types) -> Computation:
    """NumPy's ascending order on the leading ``key_types`` operands, one per module."""
    key = ("sort", tuple(key_types), tuple(operand_types))
    return module.shared_computation(
        key, "compare", lambda b: build_numpy_order(b, list(key_types), list(operand_types)))


def build_numpy_order(
    b: ComputationBuilder, key_types: list[ElementType], operand_types: list[ElementType]
) -> Computation:
    """(lhs_0, rhs_0, lhs_1, rhs_1, ...) -> pred: lhs < rhs in NumPy's order on the keys
    (the first ``len(key_types)`` operands); the other operands ride along."""
    params = []
    for i, t in enumerate(operand_types):
        scalar = Shape(t, ())
        params.append(
            (
                b.parameter(2 * i, scalar, f"Arg_{2 * i}"),
                b.parameter(2 * i + 1, scalar, f"Arg_{2 * i + 1}"),
            )
        )
    result = None
    for k in reversed(range(len(key_types))):  # lexicographic: key 0 decides, later keys break ties
        x, y = params[k]
        lt = _less(b, x, y, key_types[k])
        if result is None:
            result = lt
        else:
            gt = _less(b, y, x, key_types[k])
            tie = b.add("not", (b.add("or", (lt, gt)),))
            result = b.add("or", (lt, b.add("and", (tie, result))))
    return b.build(result)


def _less(b, x, y, t: ElementType):
    lt = b.add("compare", (x, y), {"direction": "LT"})
    if not t.is_float:
        return lt
    y_nan = b.add("compare", (y, y), {"direction": "NE"})
    x_num = b.add("compare", (x, x), {"direction": "EQ"})
    return b.add("or", (lt, b.add("and", (y_nan, x_num))))


def _structure(comp: Computation) -> list:
    index = {id(p): ("p", p.attrs["parameter_number"]) for p in comp.parameters}
    out = []
    for i, inst in enumerate(comp.instructions):
        if inst.opcode == "parameter":
            out.append(("param", inst.attrs["parameter_number"], inst.shape.dtype.name))
        else:
            out.append(
                (
                    inst.opcode,
                    inst.shape.dtype.name,
                    tuple(index[id(o)] for o in inst.operands),
                    tuple(sorted((k, v) for k, v in inst.attrs.items() if k == "direction")),
                )
            )
        index[id(inst)] = ("i", i)
    return out + [("root", index[id(comp.root)])]


# comparator -> numpy_order_keys's answer, by identity (the comparator held, so its id is not
# reused while it is here); a library call asks on every run, and the answer takes building
# probe comparators (~60 µs)
_KEYS: dict[int, tuple[Computation, int | None]] = {}
_KEYS_BOUND = 256


def numpy_order_keys(comp: Computation) -> int | None:
    """How many leading operands a comparator built by ``build_numpy_order`` sorts by, if it is
    one (structurally identical), else None."""
    known = _KEYS.get(id(comp))
    if known is not None and known[0] is comp:
        return known[1]
    found = _numpy_order_keys(comp)
    if len(_KEYS) >= _KEYS_BOUND:
        _KEYS.pop(next(iter(_KEYS)))
    _KEYS[id(comp)] = (comp, found)
    return found


def _numpy_order_keys(comp: Computation) -> int | None:
    if comp is None or len(comp.parameters) % 2 or not comp.parameters:
        return None
    types = [
        p.shape.dtype for p in sorted(comp.parameters, key=lambda p: p.attrs["parameter_number"])
    ][::2]
    shape = _structure(comp)
    for n_keys in range(1, len(types) + 1):
        probe = ComputationBuilder("probe", NameUniquer())
        if _structure(build_numpy_order(probe, types[:n_keys], types)) == shape:
            return n_keys
    return None


def sort(
    operands: list[np.ndarray], dimension: int, comp: Computation, evaluate,
    stable: bool = True, wanted: frozenset[int] | None = None,
) -> list[np.ndarray]:
    """Sort ``operands`` along ``dimension`` by ``comp``; ``evaluate(comp, args)`` runs a
    general comparator elementwise on arrays. A stable sort keeps ties in index order; an
    unstable one in NumPy's order (XLA leaves it open): by NumPy's order of one key, it is
    NumPy's own default np.sort / np.argsort, so np.argsort's indices of tied values, and
    the signs of equal zeros in np.sort, are NumPy's.

    ``wanted``: the results something reads (None: all). The others come back uncomputed
    (``np.empty``): np.argsort's sorted keys, which only the comparator needs, are never
    gathered."""
    n_keys = numpy_order_keys(comp)
    # (sorted along the last axis, where it already is in most sorts: np.moveaxis costs ~3 µs a
    # call, as much as sorting a thousand numbers)
    last = dimension in (-1, operands[0].ndim - 1)
    moved = operands if last else [np.moveaxis(o, dimension, -1) for o in operands]

    def back(o: np.ndarray) -> np.ndarray:
        return o if last else np.moveaxis(o, -1, dimension)

    if n_keys == 1 and len(moved) == 1:  # values alone: NumPy's sort of them, of that kind
        return [back(np.sort(moved[0], axis=-1, kind="stable" if stable else None))]

    def reorder(order: np.ndarray) -> list[np.ndarray]:
        return [np.empty_like(operands[i]) if wanted is not None and i not in wanted
                else back(order.astype(o.dtype, copy=False) if _positions(o) else
                          np.take_along_axis(o, order, axis=-1))
                for i, o in enumerate(moved)]

    if n_keys == 1 and not stable:
        return reorder(np.argsort(moved[0], axis=-1))
    if n_keys is not None:
        keys = moved[:n_keys]
        if n_keys == 1:
            order = np.argsort(keys[0], axis=-1, kind="stable")
        else:  # np.lexsort sorts by its last key first
            order = np.lexsort(tuple(reversed(keys)), axis=-1)
    else:
        order = _rank_order(moved, comp, evaluate)
    return reorder(order)


def _positions(o: np.ndarray) -> bool:
    """Is ``o`` each element's position along the last axis (np.argsort's iota)? Reordered by
    the sort's order it is that order itself, without a gather (checked, not assumed: one
    comparison pass, against a take_along_axis)."""
    n = o.shape[-1]
    return (o.dtype.kind in "iu" and n <= _largest(o.dtype) + 1 and o.size > 0
            and bool((o == np.arange(n, dtype=o.dtype)).all()))


@functools.lru_cache(maxsize=16)
def _largest(dtype: np.dtype) -> int:
    return int(np.iinfo(dtype).max)  # (np.iinfo builds its answer anew on every call)


def _rank_order(moved: list[np.ndarray], comp: Computation, evaluate) -> np.ndarray:
    """A general comparator: rank[i] = #{j: less(j, i)} + #{j < i: equal(i, j)}; O(n^2)."""
    n = moved[0].shape[-1]
    lhs = [m[..., :, None] for m in moved]  # element j
    rhs = [m[..., None, :] for m in moved]  # element i
    shape = moved[0].shape[:-1] + (n, n)
    args = []
    for a, c in zip(lhs, rhs):
        args += [np.broadcast_to(a, shape), np.broadcast_to(c, shape)]
    less_ji = np.asarray(evaluate(comp, args), bool)  # [.., j, i]: element j before element i
    swapped = []
    for a, c in zip(lhs, rhs):
        swapped += [np.broadcast_to(c, shape), np.broadcast_to(a, shape)]
    less_ij = np.asarray(evaluate(comp, swapped), bool)
    equal = ~less_ji & ~less_ij
    earlier = np.tril(np.ones((n, n), bool), -1)  # j < i
    rank = less_ji.sum(axis=-2) + (equal & earlier).sum(axis=-2)
    return np.argsort(rank, axis=-1, kind="stable")

