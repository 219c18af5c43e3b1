"""In-place NumPy on traced arrays, functionalized.

HLO values are immutable, so ``x[k] = v``, ``x += y``, ``np.add(a, b, out=x)``, ``np.copyto``
and ``x.fill`` compute a new value and rebind the traced array to it: ``Tracer.inst`` moves to
the new instruction, so every later read of that Python object sees the write, as in NumPy.

Views: a basic index (ints, slices, None, ...) of a traced array is a view. A write through it
is written into its parent (and so on up to the array that owns the data), and every live view
of that array is re-derived, so ``b = a[1:]; b[0] = 1`` changes ``a`` and later reads of ``a``
and ``b`` agree. Views made by functions toolkit does not track (reshape, transpose, ravel,
squeeze, swapaxes, flip, broadcast_to ...) cannot be written: that is an error naming the
function, never a lost write.

Arguments written in place become extra outputs of the program (printed as XLA's
``input_output_alias``) and are copied back into the caller's arrays after each call."""
from __future__ import annotations

import warnings

import numpy as np

from . import lax
from .errors import (
    DTypeMismatchError,
    ShapeMismatchError,
    UnsupportedNumpyError,
    UserIndexError,
    UserOverflowError,
    UserTypeError,
    UserValueError,
)
from .indexing import decompose, getitem, is_advanced, scatter_into
from .planned_indexing import basic_plan, write_box
from .scalar_stores import check_scalar_fits
from .tracer import Tracer, can_break, current_trace, note_changed
from .views import DerivedView, derived


def check_writable(target: Tracer, what: str) -> None:
    if target._scalar:  # (np.copyto(s, ...), out=s: NumPy refuses a scalar destination)
        raise TypeError(f"{what}: the destination is a NumPy scalar "
                        f"(numpy.{target.dtype.type.__name__}), which cannot be written")
    node = target
    while node is not None:  # the array written, and every array it is a view of
        if node._alias_of is not None and not _writes_through(node):
            if "read-only" in node._alias_of:
                raise UserValueError(f"{what}: assignment destination is read-only "
                                     f"(made by {node._alias_of})")
            raise UnsupportedNumpyError(
                f"{what}: this array is {'' if node is target else 'a view of one '}made by "
                f"{node._alias_of}, which in NumPy may be a view of another array, so writing into "
                f"it would change that array too; toolkit does not track views made by "
                f"{node._alias_of}. Write into the original array through an index, or copy first "
                f"(y = {node._alias_of}(...).copy()).")
        node = node._view[0] if node._view is not None else None


def _writes_through(view: Tracer) -> bool:
    """A view toolkit carries writes back from (``DerivedView.writable``: a transpose, a
    reshape of a contiguous array)."""
    link = view._view
    return link is not None and type(link[1]) is DerivedView and \
        link[1].writable(view, link[0])


def check_assigned(dtype: np.dtype, value, how: str) -> None:
    """Raise where NumPy's own assignment of ``value`` (known when tracing: a Python or NumPy
    number, a list of them) into an array of ``dtype`` raises, as toolkit's error of the same
    family. NumPy converts such values with checks a cast would not make, and they depend on
    how it assigns (``how``): one element (``a[0] = np.int64(300)`` for int8 raises) or a slice
    (so does ``a[:] = np.float64(300.5)``) but not an index array (``a[[0, 2]] = np.int64(300)``
    wraps); NaN or infinity into an integer; a list's Python ints under NEP 50. Asked of NumPy
    itself, on a one-element array."""
    if not isinstance(value, (int, float, complex, np.generic, list, tuple)):
        return
    kind = type(value)
    known = (dtype, kind, value, how) if kind is int or kind is float else None
    if known is not None and known in _ASSIGNABLE:  # (a traced loop stores the same numbers)
        return
    _probe(dtype, value, how)
    if known is not None:
        if len(_ASSIGNABLE) >= _ASSIGNABLE_KEPT:
            _ASSIGNABLE.clear()
        _ASSIGNABLE.add(known)


# (dtype, type, value, how) of Python numbers NumPy assigns without an error; bounded
_ASSIGNABLE: set = set()
_ASSIGNABLE_KEPT = 1 << 12


def _probe(dtype: np.dtype, value, how: str) -> None:
    probe = np.zeros(1, dtype)
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")  # (NumPy's cast warnings: the cast itself warns)
            if isinstance(value, (list, tuple)):
                np.asarray(value, dtype=dtype)
            elif how == "element":
                probe[0] = value
            elif how == "slice":
                probe[...] = value
            elif how == "mask":
                probe[np.ones(1, bool)] = value
            else:
                probe[[0]] = value
    except OverflowError as e:
        raise UserOverflowError(str(e)) from None
    except (ValueError, TypeError) as e:
        if isinstance(value, (list, tuple)):
            return  # (a ragged list or the like: the assignment's own shape checks say so)
        raise (UserValueError if isinstance(e, ValueError) else UserTypeError)(str(e)) from None


def _cast_value(target: Tracer, value, how: str = "index array") -> Tracer:
    """``value`` in ``target``'s dtype, as NumPy's item assignment casts it (and raises where
    it raises, by ``how`` it assigns: check_assigned)."""
    trace = target.trace
    if isinstance(value, (list, tuple)):
        from .registry import EXPORTS, has_tracer

        if has_tracer(value):
            # ``b[0:2] = [a[3], a[2]]``: NumPy makes an array of the sequence; so does the trace
            value = EXPORTS["array"](value, target.dtype)
    if not isinstance(value, Tracer):
        check_assigned(target.dtype, value, how)
    if isinstance(value, Tracer):
        _note_narrowing(value, target.dtype)
        if value._scalar and how in ("element", "slice"):
            check_scalar_fits(value, target.dtype)
        return lax.convert(value, target.dtype, target.weak_type)
    return lax.lift(trace, value, target.dtype, weak=target.weak_type, what="assigned value")


def updated(x: Tracer, key, value) -> Tracer:
    """The value of ``x`` after ``x[key] = value`` (a new tracer; ``x`` is unchanged)."""
    planned = basic_plan(x, key) if type(key) is int or type(key) is tuple else None
    if planned is not None:  # (Python ints and forward slices: a loop's ``a[i, j] = v``)
        spec, plan = planned
        reverse, out_shape, sliced = (), plan.out_shape, list(plan.counts)
    else:
        mask = key[0] if isinstance(key, tuple) and len(key) == 1 else key
        if _is_mask(mask) and (isinstance(mask, Tracer) or _is_scalar_value(value)):
            return _masked(x, mask, value)
        if is_advanced(key):
            return scatter_into(x, key, _cast_value(x, value), "assign")
        spec, reverse, out_shape = decompose(x, key)
        sliced = [len(range(start, limit, stride)) for start, limit, stride in spec]
    v = _cast_value(x, value, "slice" if out_shape else "element")
    try:
        v = lax.broadcast_to(v, out_shape)
    except ShapeMismatchError:
        raise ShapeMismatchError(
            f"could not broadcast input array from shape {tuple(v.shape)} into "
            f"shape {tuple(out_shape)} (assigning to {x.describe()})"
        ) from None
    if planned is not None and x.trace is x._trace:
        box = plan.box(x, spec)
        if box is not None:
            return write_box(x, spec, box, v)
    if 0 in sliced:
        return x
    v = lax.rev(lax.reshape(v, sliced), reverse)
    if sliced == list(x.shape):
        return v
    trace = x.trace
    if all(stride == 1 for _, _, stride in spec):  # a box: dynamic-update-slice at constant starts
        starts = [lax.full(trace, (), start, np.int64) for start, _, _ in spec]
        return lax.dynamic_update_slice(x, v, starts)
    padding = [
        (start, size - limit, stride - 1) for (start, limit, stride), size in zip(spec, x.shape)
    ]
    placed = lax.pad(v, lax.full(trace, (), 0, x.dtype, x.weak_type), padding)
    inside = lax.pad(
        lax.full(trace, sliced, True, np.bool_), lax.full(trace, (), False, np.bool_), padding
    )
    return lax.select(inside, placed, x)


def _is_mask(key) -> bool:
    return (
        (isinstance(key, Tracer) or isinstance(key, np.ndarray))
        and key.dtype == np.bool_
        and key.ndim > 0
    )


def _is_scalar_value(value) -> bool:
    return np.ndim(value) == 0 if not isinstance(value, Tracer) else value.size == 1


def _masked(x: Tracer, mask, value) -> Tracer:
    """``x[mask] = value`` with a boolean mask over the leading dimensions of ``x`` and a
    scalar value: a select."""
    trace = x.trace
    m = lax.lift(trace, mask, what="mask") if not isinstance(mask, Tracer) else mask
    if tuple(m.shape) != tuple(x.shape)[:m.ndim]:
        raise UserIndexError(
            f"boolean index did not match indexed array: mask {m.describe()} against {x.describe()}"
        )
    v = _cast_value(x, value, "mask")
    if v.size != 1 and (not isinstance(mask, Tracer) or can_break(mask) is not None):
        # an array of values, one per selected entry: a scatter at the mask's positions (a
        # traced mask's count crosses a graph break; its positions stay traced)
        from .indexing import scatter_into
        from .registry import EXPORTS

        positions = (tuple(np.nonzero(mask)) if not isinstance(mask, Tracer)
                     else tuple(EXPORTS["nonzero"](m)))
        return scatter_into(x, positions, v, "assign")
    if v.size != 1:
        raise UnsupportedNumpyError(
            f"x[mask] = values with an array of values depends on how many entries the mask "
            f"selects; use x = np.where(mask, values_of_x_shape, x) (got values {v.describe()})")
    m = lax.broadcast_in_dim(m, x.shape, range(m.ndim))
    return lax.select(m, lax.broadcast_to(lax.reshape(v, ()), x.shape), x)


def write(target: Tracer, new_value: Tracer) -> None:
    """Make ``new_value`` the whole value of ``target``; through views, up to their owner."""
    inner = current_trace()
    if inner is not None and target._trace is not inner:
        # (a loop body's, a branch's or a transformed function's write into an array of the
        # trace around it: a side effect its program cannot carry out, as in JAX)
        raise UnsupportedNumpyError(
            f"a write into {target.describe()}, an array from outside the function being "
            "traced (a tk.lax loop body or branch, or a function given to grad/vmap): carry "
            "it in the loop state or return it instead, as in JAX")
    node, value = target, new_value
    while node._view is not None:
        parent, key = node._view
        if type(key) is DerivedView:  # (a transpose's, a reshape's view: undone)
            check_writable(node, "a write")
            value = key.undo(node, value, parent)
            node = parent
            continue
        value = updated(parent, key, value)
        node = parent
    node.inst = value.inst
    note_changed(node)
    _refresh_views(node)


def _refresh_views(owner: Tracer) -> None:
    stack = [owner]
    while stack:
        t = stack.pop()
        alive = []
        for ref in t._views or ():
            view = ref()
            if view is None:
                continue
            alive.append(ref)
            how = view._view[1]
            view.inst = (derived(t, how) if type(how) is DerivedView else getitem(t, how)).inst
            note_changed(view)
            stack.append(view)
        t._views = alive or None
        note_changed(t)


def assign(target: Tracer, key, value) -> None:
    """``target[key] = value``."""
    check_writable(target, "item assignment")
    if isinstance(value, Tracer) and _is_live_view(value, target, key):
        # ``target[key] op= y`` is ``v = target[key]; v op= y; target[key] = v``: the augmented
        # assignment already wrote through the view, so storing the view back writes the values
        # it holds (a Python loop of ``C[i, :i] += ...`` would trace every write twice)
        return
    if isinstance(value, Tracer) and _reads_itself(value, target, key):
        return  # (``a[j, i] = a[i, j]`` where i == j: the element already holds that value)
    write(target, updated(target, key, value))


def _reads_itself(value: Tracer, target: Tracer, key) -> bool:
    """Is ``value`` the NumPy scalar ``target[key]`` read with nothing written into ``target``
    since (its slice reads ``target``'s current value, at the same place)? Then storing it back
    changes nothing. Only keys of Python ints are compared."""
    inst = value.inst
    if not value._scalar or inst.opcode != "reshape" or inst.operands[0].opcode != "slice":
        return False
    sliced = inst.operands[0]
    items = key if type(key) is tuple else (key,)
    if sliced.operands[0] is not target.inst or not all(type(k) is int for k in items):
        return False
    spec, reverse, _ = decompose(target, key)
    return not reverse and tuple(sliced.attrs["slice"]) == tuple(spec)


def _is_live_view(value: Tracer, target: Tracer, key) -> bool:
    """Is ``value`` the view ``target[key]`` (views are re-derived after every write, so it
    holds exactly what ``target[key]`` reads)? Only keys of Python ints, slices of them, None
    and Ellipsis are compared: equal such keys select the same elements."""
    view = value._view
    if view is None or view[0] is not target:
        return False
    a, b = view[1], key
    a, b = (a if type(a) is tuple else (a,)), (b if type(b) is tuple else (b,))
    return len(a) == len(b) and all(_plain_index(x) and _plain_index(y) for x, y in zip(a, b)) \
        and a == b


def _plain_index(item) -> bool:
    if item is None or item is Ellipsis or type(item) is int:
        return True
    return type(item) is slice and all(v is None or type(v) is int
                                       for v in (item.start, item.stop, item.step))


def store_result(out: Tracer, result: Tracer, what: str, casting: str = "same_kind") -> Tracer:
    """``out`` := ``result`` for ``out=`` and augmented assignment, with NumPy's casting rule
    (``casting=``, same_kind unless the call says otherwise)."""
    check_writable(out, what)
    if tuple(result.shape) != tuple(out.shape):
        try:
            result = lax.broadcast_to(result, out.shape)
        except ShapeMismatchError:
            raise ShapeMismatchError(f"{what}: non-broadcastable output operand with shape "
                                     f"{tuple(out.shape)} doesn't match the broadcast shape "
                                     f"{tuple(result.shape)}") from None
    if result.dtype != out.dtype and not np.can_cast(result.dtype, out.dtype, casting):
        raise DTypeMismatchError(f"{what}: Cannot cast ufunc output from dtype('{result.dtype}') "
                                 f"to dtype('{out.dtype}') with casting rule '{casting}'")
    _note_narrowing(result, out.dtype)
    write(out, lax.convert(result, out.dtype, out.weak_type))
    return out


def _note_narrowing(value: Tracer, dtype) -> None:
    """A Python-int argument stored into a narrower integer array: NumPy raises OverflowError
    when it does not fit, so its value is checked on every call (as for ufunc operands)."""
    dtype = np.dtype(dtype)
    if (
        value.weak_type
        and value.dtype.kind in "iu"
        and dtype.kind in "iu"
        and not np.can_cast(value.dtype, dtype)
    ):
        lax.check_weak_int_fits(value, dtype)


def check_mutation_targets(leaves, mutated, paths) -> None:
    """Before a call that writes arguments: each must be a writable array that shares no memory
    with another argument (toolkit cannot reproduce NumPy's aliasing between arguments). On
    every call of such a program: two arrays that each own their memory (NumPy allocated it:
    OWNDATA; not one wrapping memory from elsewhere) share none unless they are one object,
    which is asked without NumPy's bounds arithmetic."""
    # (each array's flags read once: a flags object costs ~0.1 µs, and this runs every call)
    owners = [type(x) is np.ndarray and x.flags.owndata for x in leaves]
    for i in mutated:
        leaf = leaves[i]
        if not isinstance(leaf, np.ndarray):
            continue
        flags = leaf.flags
        if not flags.writeable:
            raise UserValueError(
                f"output array is read-only: argument '{paths[i]}' is written in place"
            )
        owns = flags.owndata  # (memory NumPy allocated for it: no other array's)
        for j, other in enumerate(leaves):
            if j == i or not isinstance(other, np.ndarray):
                continue
            if (other is leaf or not owns or not owners[j]) \
                    and np.may_share_memory(leaf, other):
                raise UserValueError(
                    f"argument '{paths[i]}' is written in place and shares memory with "
                    "argument "
                    f"'{paths[j]}'; NumPy would see the write through both, toolkit cannot: "
                    "pass a copy"
                )


def write_back(leaves, mutated, results) -> None:
    """Copy the new values of arguments written in place into the caller's arrays."""
    for i, value in zip(mutated, results):
        leaf = leaves[i]
        if value is leaf:  # (a backend that wrote in place: the caller's array already)
            continue
        if isinstance(leaf, np.ndarray):  # scalars are immutable: a rebinding
            np.copyto(leaf, np.asarray(value), casting="unsafe")
        elif getattr(type(leaf), "__toolkit_array__", False):
            # a device array written in place takes the new value's device buffer (no copy),
            # so the caller's object shows the write, as NumPy's would
            leaf._assign_from(value)
