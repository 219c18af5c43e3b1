"""Which traced arrays are views, for in-place writes (see inplace): views that writes reach
(``view_of``), views of functions toolkit does not track (``mark_untracked_view``: writing
through them is an error naming the function), and fresh results that must not alias an
input (``fresh_results``)."""
from __future__ import annotations

import threading
import weakref

from .tracer import Tracer, note_changed

# np.* functions whose result is a view of their first argument in NumPy (when it can be):
# writing through them is refused rather than silently not reaching the original.
VIEW_FUNCTIONS = frozenset(
    {
        "reshape",
        "ravel",
        "transpose",
        "swapaxes",
        "moveaxis",
        "squeeze",
        "expand_dims",
        "broadcast_to",
        "flip",
        "fliplr",
        "flipud",
        "atleast_1d",
        "atleast_2d",
        "atleast_3d",
        "diagonal",
        "real",
        "imag",
        "split",
        "array_split",
        "hsplit",
        "vsplit",
        "dsplit",
        "unstack",
        "rot90",
        "rollaxis",
        "permute_dims",
        "matrix_transpose",
        "broadcast_arrays",
        "view",
        "sliding_window_view",
    }
)


# NumPy functions (and ndarray methods of the same names) whose 0-d results are NumPy scalars,
# as its reductions, statistics and products return them; every other function's 0-d result
# stays a 0-d array (np.reshape(x, ()), np.where, np.copy, np.squeeze, x.astype ...)
SCALAR_FUNCTIONS = frozenset(
    {
        "sum", "prod", "max", "min", "amax", "amin", "mean", "average", "var", "std", "ptp",
        "median", "percentile", "quantile", "nansum", "nanprod", "nanmax", "nanmin",
        "nanmean", "nanvar", "nanstd", "nanmedian", "nanpercentile", "nanquantile", "argmax",
        "argmin", "nanargmax", "nanargmin", "all", "any", "count_nonzero", "searchsorted",
        "interp", "polyval", "dot", "vdot", "inner", "matmul", "einsum", "trace", "det",
        "norm", "matrix_rank", "trapezoid", "corrcoef", "take", "choose", "round", "around",
        "clip", "nan_to_num", "angle", "sinc", "fix", "unwrap", "cumulative_sum",
        "unravel_index", "ravel_multi_index", "isclose", "cond", "slogdet", "vecdot",
        "multi_dot",
    }
)
# NumPy's functions that return a Python bool (``bool(res)`` in their source), not a NumPy one
PYTHON_BOOL_FUNCTIONS = frozenset({"array_equal", "array_equiv", "allclose"})


def view_of(parent: Tracer, key, view: Tracer) -> Tracer:
    """Register ``view`` (``parent[key]``) so that writes through it reach ``parent``."""
    view._view = (parent, key)
    if parent._views is None:
        parent._views = []
    parent._views.append(weakref.ref(view))
    note_changed(parent)
    note_changed(view)
    return view


READ_ONLY_VIEWS = frozenset({"broadcast_to", "broadcast_arrays", "sliding_window_view"})


class DerivedView:
    """How a view toolkit does not track for writes follows its parent for reads: ``derive``
    runs the function that made it (a reshape, a transpose, a broadcast) on the parent's
    current value, after every write into the parent, as ``getitem`` re-derives a sliced view.
    So ``v = x.reshape(2, 2); x[0] = 9; v[0, 0]`` reads 9, as in NumPy. ``key`` names the
    derivation for a replayed call's record (None: it cannot be recorded)."""

    __slots__ = ("derive", "key", "function", "numpy")

    def __init__(self, derive, key, function: str = "", numpy=None):
        self.derive = derive
        self.key = key
        self.function = function  # (np.<function> made it; "" for a piece or a reshaped one)
        # the same view made by NumPy of the parent's array (None: not known), for a result
        # that views an argument (``argument_view``)
        self.numpy = numpy

    def writable(self, view: Tracer, parent: Tracer) -> bool:
        """Can a write into ``view`` be carried back into ``parent``: a reshape of a contiguous
        parent (linked only then) or a plain transpose, each of which holds every element of
        its parent once?"""
        if self.function in RESHAPING:
            return True
        inst = view.inst
        return self.function in PERMUTING and inst.opcode == "transpose" and \
            inst.operands[0] is parent.inst

    def undo(self, view: Tracer, value: Tracer, parent: Tracer) -> Tracer:
        """``parent``'s value once ``view`` holds ``value`` (``writable`` said it can be had)."""
        from . import lax

        if self.function in RESHAPING:
            return lax.reshape(value, parent.shape)
        perm = view.inst.attrs["dimensions"]
        inverse = [0] * len(perm)
        for position, axis in enumerate(perm):
            inverse[axis] = position
        return lax.transpose(value, inverse)

    def piece(self, n: int) -> "DerivedView":
        """The derivation of the ``n``-th of several results (np.split's pieces)."""
        return DerivedView(lambda parent, derive=self.derive: derive(parent)[n],
                           None if self.key is None else (self.key, n), "",
                           None if self.numpy is None else
                           lambda array, make=self.numpy: make(array)[n])

    def reshaped(self, shape: tuple) -> "DerivedView":
        """This derivation, then a reshape (``v.shape = ...`` on the view)."""
        from . import lax

        return DerivedView(lambda parent, derive=self.derive: lax.reshape(derive(parent), shape),
                           None if self.key is None else (self.key, "reshape", shape), "",
                           None if self.numpy is None else
                           lambda array, make=self.numpy: make(array).reshape(shape))


# views a write goes through to the parent (the rest, broadcasts and np.split's pieces among
# them, stay refused: a broadcast is read-only in NumPy too)
RESHAPING = frozenset({"reshape", "ravel", "squeeze", "expand_dims", "atleast_1d", "atleast_2d",
                       "atleast_3d"})
PERMUTING = frozenset({"transpose", "permute_dims", "matrix_transpose", "swapaxes", "moveaxis",
                       "rollaxis"})

_deriving = threading.local()  # (re-deriving a view: the function's own views are temporaries)


def derived(parent: Tracer, how: DerivedView) -> Tracer:
    """The view ``how`` describes, of ``parent`` as it is now."""
    _deriving.active = True
    try:
        return how.derive(parent)
    finally:
        _deriving.active = False


def mark_untracked_view(result, source, function: str, how: DerivedView | None = None):
    if isinstance(result, (tuple, list)):  # np.split's pieces, np.atleast_1d(a, b) ...
        return type(result)(
            mark_untracked_view(r, source, function,
                                how.piece(n) if how is not None else None)
            for n, r in enumerate(result))
    if isinstance(source, (tuple, list)):  # several arguments: an argument handed back is itself
        if not isinstance(result, Tracer) or (
            function not in READ_ONLY_VIEWS and any(result is s for s in source)
        ):
            return result
        source = next((s for s in source if isinstance(s, Tracer)), None)
        how = None  # (which argument it views is not recorded)
    if not (isinstance(result, Tracer) and isinstance(source, Tracer)):
        return result
    if function in READ_ONLY_VIEWS:  # NumPy's result is a read-only view, even of the same shape
        result = Tracer(result._trace, result.inst, result.weak_type)
        result._alias_of = f"np.{function} (a read-only view)"
    elif result is not source:
        result._alias_of = f"np.{function}"
        note_changed(result)
    else:
        return result
    if how is not None and not getattr(_deriving, "active", False):
        view_of(source, how, result)  # (reads follow the parent; writes stay refused)
    return result


def argument_view(t: Tracer, parameters: dict[int, int]):
    """Where the traced result ``t`` is, in NumPy, one of the function's arguments or a view
    of one (``return x``, ``x[1:]``, ``x.T``, a reshape): that argument's leaf index and the
    NumPy steps that make the view of the caller's array, so the call returns the argument
    itself, or a view sharing its memory, as NumPy does. ``parameters``: id of a parameter
    tracer -> its leaf index. None where it is not, or where a step is not known (an index
    holding traced values, a view NumPy would make of a traced value)."""
    steps = []
    while True:
        leaf = parameters.get(id(t))
        if leaf is not None:
            return leaf, tuple(reversed(steps))
        if t._view is None:
            return None
        parent, how = t._view
        if type(how) is DerivedView:
            if how.numpy is None:
                return None
            steps.append(how.numpy)
        else:  # a basic index (getitem made it a view only then)
            if _holds_tracer(how):
                return None
            steps.append(lambda array, key=how: array[key])
        t = parent


def _holds_tracer(key) -> bool:
    """Does a basic index hold a traced value (an index, or a slice's bound)?"""
    for k in key if type(key) is tuple else (key,):
        if isinstance(k, Tracer) or type(k) is slice and any(
                isinstance(v, Tracer) for v in (k.start, k.stop, k.step)):
            return True
    return False


def fresh_results(result, inputs):
    """A function that is not a view in NumPy returns a new array: when toolkit's version hands
    back an input tracer unchanged (an identity cast, ``+x``, a one-array concatenate), give it
    a new identity, so writing into the result does not write into the input."""
    if isinstance(result, Tracer):
        return (
            Tracer(result._trace, result.inst, result.weak_type)
            if _is_one_of(result, inputs)
            else result
        )
    if isinstance(result, (tuple, list)) and any(isinstance(r, Tracer) for r in result):
        return type(result)(fresh_results(r, inputs) for r in result)
    return result


def _is_one_of(t: Tracer, inputs) -> bool:
    for v in inputs:
        if v is t or isinstance(v, (list, tuple)) and any(u is t for u in v):
            return True
    return False
