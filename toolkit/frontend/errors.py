"""Errors a user can act on. Each names the user's value, shape and source line."""
from __future__ import annotations

import os
import types

import numpy as np

from ..ir.user_code import is_internal_file


class LazyText:
    """Error text built only if an error is raised: describing a traced value walks the program
    (the arguments it came from), which must not cost anything on the success path."""

    __slots__ = ("_make",)

    def __init__(self, make):
        self._make = make

    def __str__(self) -> str:
        return str(self._make())

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


class ToolkitError(Exception):
    """Base class of errors raised to users about their traced code."""


class TracerConversionError(ToolkitError, TypeError):
    """Python control flow, ``bool()``, ``int()`` or ``float()`` on a traced value."""


class UnsupportedNumpyError(ToolkitError, TypeError):
    """A NumPy function or feature toolkit cannot trace."""


class UndefinedResultError(UnsupportedNumpyError):
    """A call NumPy runs but whose result it leaves undefined (uninitialized elements): toolkit
    refuses it even where it could run it in NumPy at a graph break."""


class ShapeMismatchError(ToolkitError, ValueError):
    """Operand shapes that do not fit the operation (broadcasting, matmul, reshape ...)."""


class DTypeMismatchError(ToolkitError, TypeError):
    """An operation on an element type it does not support."""


class ArgumentTypeError(ToolkitError, TypeError):
    """An argument of a jitted function that is not an array, scalar or pytree of those."""


class LeakedTracerError(ToolkitError, RuntimeError):
    """A traced value used outside the trace that created it."""


# The user's mistake, reported as NumPy would report it (``except ValueError`` still works).
def subclass_problem(value, what: str) -> "ArgumentTypeError | None":
    """An error for an ndarray subclass whose semantics toolkit does not implement (masked
    arrays, np.matrix, ...): converting it with np.asarray would silently drop its mask or
    change what ``*`` means. np.memmap is a plain array in a file, and passes."""
    t = type(value)
    if t is np.ndarray or not isinstance(value, np.ndarray) or isinstance(value, np.memmap):
        return None
    if isinstance(value, np.ma.MaskedArray):
        fix = ("compute on the data with the masked entries replaced, x.filled(fill_value), or "
               "pass the mask as a second array and use np.where(mask, ...)")
    elif isinstance(value, np.matrix):
        fix = "pass np.asarray(x) and write matrix products with @"
    else:
        fix = "pass np.asarray(x) if its values are all that matter"
    return ArgumentTypeError(
        f"{what} is a {t.__module__}.{t.__name__}, an ndarray subclass whose semantics toolkit "
        f"does not implement (np.asarray would silently change the result); {fix}")


class UserValueError(ToolkitError, ValueError):
    pass


class UserTypeError(ToolkitError, TypeError):
    pass


class UserIndexError(ToolkitError, IndexError):
    pass


class UserOverflowError(ToolkitError, OverflowError):
    pass


class UserAxisError(ToolkitError, np.exceptions.AxisError):
    pass


def for_the_user(e: Exception) -> Exception | None:
    """``e`` with toolkit's frames removed from its traceback, or None when it must keep every
    frame (a bug in toolkit, or TOOLKIT_TRACEBACK=full): ``api_boundary``'s rule, for entry
    points that inline it (the dispatch fast path has no decorator frame to spare)."""
    if os.environ.get("TOOLKIT_TRACEBACK") == "full" or not _users_error(e):
        return None
    return e.with_traceback(user_traceback(e.__traceback__))


def api_boundary(fn):
    """Re-raise the user's errors with toolkit's frames removed from the traceback, so the user
    sees their own lines: toolkit's ToolkitErrors, and errors raised in the user's code. An
    error raised inside toolkit or a library that is not a ToolkitError is a bug in toolkit and
    keeps every frame (as does everything with TOOLKIT_TRACEBACK=full)."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        __tracebackhide__ = True  # noqa: F841  (IPython and pytest hide this frame)
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            if os.environ.get("TOOLKIT_TRACEBACK") == "full" or not _users_error(e):
                raise
            raise e.with_traceback(user_traceback(e.__traceback__)) from None

    return wrapper


def _users_error(e: BaseException) -> bool:
    if isinstance(e, ToolkitError):
        return True
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return False
    filename = os.path.abspath(tb.tb_frame.f_code.co_filename)
    # raised in the user's own code (NumPy raising on the user's call counts as theirs)
    return not is_internal_file(filename) and (
        "site-packages" not in filename or "/numpy/" in filename
    )


def user_traceback(tb: types.TracebackType | None) -> types.TracebackType | None:
    """``tb`` without toolkit's own frames, so a user sees their lines, not the tracer's."""
    frames = []
    while tb is not None:
        if not is_internal_file(tb.tb_frame.f_code.co_filename):
            frames.append(tb)
        tb = tb.tb_next
    result = None
    for frame_tb in reversed(frames):
        result = types.TracebackType(
            result, frame_tb.tb_frame, frame_tb.tb_lasti, frame_tb.tb_lineno
        )
    return result
