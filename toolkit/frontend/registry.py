"""The registry of NumPy functions on traced arrays: ``FUNCTIONS`` (NumPy's function -> its
traced implementation, for ``__array_function__``) and ``EXPORTS`` (name -> the public
``toolkit.numpy`` function), filled by ``@numpy_function``.

It imports none of the modules that register: each family (reductions, shape_functions,
sorting ...) registers itself when imported, and ``toolkit/numpy/__init__.py`` imports them all.
Called without traced arguments outside a trace, the functions are NumPy's own."""
from __future__ import annotations

import functools
from typing import Callable

from . import lax
from .errors import UnsupportedNumpyError
from .tracer import Tracer, current_trace
from .views import VIEW_FUNCTIONS, DerivedView, fresh_results, mark_untracked_view

FUNCTIONS: dict[Callable, Callable] = {}  # NumPy function -> traced implementation
EXPORTS: dict[str, Callable] = {}  # name -> public toolkit.numpy function
WRAPPERS: dict[Callable, Callable] = {}  # NumPy function -> its exported wrapper (views ...)


def has_tracer(values) -> bool:
    """Is a Tracer among ``values``, or inside their (nested) lists and tuples (np.block)?"""
    stack = list(values)
    while stack:
        v = stack.pop()
        if isinstance(v, Tracer):
            return True
        if isinstance(v, (list, tuple)):
            stack.extend(v)
    return False


def numpy_function(np_func: Callable | None, name: str | None = None, creation: bool = False):
    """Register ``impl`` as the traced version of ``np_func`` and export it."""

    def deco(impl):
        public_name = name or impl.__name__.lstrip("_")
        impl = _refusing_complex(impl, public_name)

        @functools.wraps(impl)
        def wrapper(*args, **kwargs):
            traced = has_tracer(args) or has_tracer(kwargs.values())
            trace = current_trace() if creation else None
            if not traced and trace is None:
                if np_func is None:
                    raise UnsupportedNumpyError(f"tnp.{public_name} needs a traced argument")
                return np_func(*args, **kwargs)
            if trace is None:
                trace = lax.trace_of(
                    list(args) + [a for v in args if isinstance(v, (list, tuple)) for a in v]
                )
            with trace.op_scope(public_name):
                result = impl(*args, **kwargs)
            if public_name in VIEW_FUNCTIONS and args:
                # functions of several arrays (np.atleast_1d(a, b)) view each of them
                several = (
                    public_name in ("atleast_1d", "atleast_2d", "atleast_3d", "broadcast_arrays")
                    and len(args) > 1
                )
                how = None if several else _derivation(impl, public_name, args, kwargs,
                                                       np_func)
                return mark_untracked_view(result, args if several else args[0], public_name,
                                           how)
            return fresh_results(result, list(args) + list(kwargs.values()))

        wrapper.__name__ = wrapper.__qualname__ = public_name
        if np_func is not None:
            FUNCTIONS[np_func] = impl
            WRAPPERS[np_func] = wrapper
        EXPORTS[public_name] = wrapper
        return wrapper

    return deco


# view functions whose result NumPy copies instead where the parent is not C-contiguous: their
# results follow only parents toolkit knows to be contiguous (made inside the function)
MAY_COPY = frozenset({"reshape", "ravel"})


def _derivation(impl, name: str, args: tuple, kwargs: dict,
                np_func: Callable | None = None) -> DerivedView | None:
    """How the view ``impl(*args, **kwargs)`` of ``args[0]`` follows it (``DerivedView``):
    the same call on the parent's later values; keyed by the call's other arguments. NumPy's
    ``np_func`` makes the same view of an array."""
    source = args[0]
    if not isinstance(source, Tracer) or has_tracer(args[1:]) or has_tracer(kwargs.values()):
        return None
    if name in MAY_COPY and not _contiguous(source) \
            and not source._trace.assume_contiguous(_reshaped(source), name):
        return None  # (NumPy copies where the parent is not contiguous: a view, a slice)
    rest = args[1:]
    try:
        key = (name, repr(rest), repr(sorted(kwargs.items())))
    except Exception:  # (an argument without a faithful repr: the view is not recorded)
        key = None
    return DerivedView(lambda parent: impl(parent, *rest, **kwargs), key, name,
                       None if np_func is None else
                       lambda array: np_func(array, *rest, **kwargs))


def _reshaped(t: Tracer) -> Tracer:
    """What ``t`` is a reshape (of a reshape ...) of."""
    while t._view is not None and type(t._view[1]) is DerivedView \
            and t._view[1].function in MAY_COPY:
        t = t._view[0]
    return t


def _contiguous(t: Tracer) -> bool:
    """Does toolkit know ``t`` to be C-contiguous in NumPy: made inside the function (not an
    argument, whose layout the caller chose), or a reshape of such an array?"""
    while t._view is not None:
        parent, how = t._view
        if type(how) is not DerivedView or how.function not in MAY_COPY:
            return False
        t = parent
    return t._alias_of is None and t._origin is None


# Functions that trace complex arrays as NumPy computes them (the rest raise, naming the function:
# their real-number implementations may take paths that are wrong for complex numbers)
COMPLEX_FUNCTIONS = frozenset(
    {
        # (sum scans: a reduce-window adding complex numbers in NumPy's order, bit for bit; not
        # products: NumPy's accumulate multiplies in its scalar loop, which rounds otherwise than
        # toolkit's complex multiply; nor the nan forms, whose NaN test is real-only)
        "cumsum",
        "cumulative_sum",
        "reshape",
        "ravel",
        "transpose",
        "permute_dims",
        "matrix_transpose",
        "swapaxes",
        "moveaxis",
        "rollaxis",
        "squeeze",
        "expand_dims",
        "atleast_1d",
        "atleast_2d",
        "atleast_3d",
        "broadcast_to",
        "broadcast_arrays",
        "concatenate",
        "concat",
        "stack",
        "hstack",
        "vstack",
        "dstack",
        "column_stack",
        "row_stack",
        "block",
        "split",
        "array_split",
        "hsplit",
        "vsplit",
        "dsplit",
        "unstack",
        "flip",
        "fliplr",
        "flipud",
        "roll",
        "rot90",
        "tile",
        "repeat",
        "take",
        "take_along_axis",
        "diagonal",
        "diag",
        "diagflat",
        "tril",
        "triu",
        "copy",
        "asarray",
        "array",
        "asanyarray",
        "ascontiguousarray",
        "where",
        "zeros_like",
        "ones_like",
        "empty_like",
        "full_like",
        "real",
        "imag",
        "angle",
        "conj",
        "conjugate",
        "iscomplex",
        "isreal",
        "iscomplexobj",
        "isrealobj",
        "sum",
        "mean",
        "prod",
        "dot",
        "vdot",
        "matmul",
        "inner",
        "outer",
        "tensordot",
        "einsum",
        "kron",
        "trace",
        "shape",
        "ndim",
        "size",
        "pad",
        "astype",
        "array_equal",
        "all",
        "any",
        "var",
        "std",
        "sort_complex",
        "count_nonzero",
        "nonzero",
        "flatnonzero",
        "select",
        "choose",
        "compress",
        "extract",
        "append",
        "insert",
        "delete",
        "resize",
        "trim_zeros",
        "put",
        "put_along_axis",
        "place",
        "copyto",
        "fill_diagonal",
        "empty",
        "zeros",
        "ones",
        "full",
        "identity",
        "eye",
        "tri",
        "linspace",
    }
)


def _refusing_complex(impl, public_name: str):
    if public_name in COMPLEX_FUNCTIONS:
        return impl

    @functools.wraps(impl)
    def checked(*args, **kwargs):
        stack = list(args) + list(kwargs.values())
        while stack:
            v = stack.pop()
            if isinstance(v, Tracer) and v.dtype.kind == "c":
                raise UnsupportedNumpyError(
                    f"np.{public_name} of a complex array ({v.describe()}) is not supported by "
                    "toolkit; on "
                    "complex arrays it traces arithmetic, abs, exp, log, sqrt, conj, real, imag, "
                    "angle, sums, "
                    "products, dots and data movement (take .real/.imag to work on the parts)"
                )
            if isinstance(v, (list, tuple)):
                stack.extend(v)
        return impl(*args, **kwargs)

    return checked

