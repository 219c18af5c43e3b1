"""Errors a user can act on. Each names the user's value, shape and source line."""
from __future__ import annotations

import os
import types


class ToolkitError(Exception):
    """Base class of errors raised to users about their traced code."""


class TracerConversionError(ToolkitError, TypeError):
    """Python control flow, ``bool()``, ``int()`` or ``float()`` on a traced value."""


class UnsupportedNumpyError(ToolkitError, TypeError):
    """A NumPy function or feature toolkit cannot trace."""


class ShapeMismatchError(ToolkitError, ValueError):
    """Operand shapes that do not fit the operation (broadcasting, matmul, reshape ...)."""


class DTypeMismatchError(ToolkitError, TypeError):
    """An operation on an element type it does not support."""


class ArgumentTypeError(ToolkitError, TypeError):
    """An argument of a jitted function that is not an array, scalar or pytree of those."""


class LeakedTracerError(ToolkitError, RuntimeError):
    """A traced value used outside the trace that created it."""


_TOOLKIT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def is_internal_file(filename: str) -> bool:
    return os.path.abspath(filename).startswith(_TOOLKIT_DIR + os.sep)


_USER_FACING = (ToolkitError, ValueError, TypeError, IndexError, OverflowError, NotImplementedError)


def api_boundary(fn):
    """Re-raise user-facing errors with toolkit's frames removed from the traceback, so the
    user sees their own lines (set TOOLKIT_TRACEBACK=full to keep every frame)."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        __tracebackhide__ = True  # noqa: F841  (IPython and pytest hide this frame)
        try:
            return fn(*args, **kwargs)
        except _USER_FACING as e:
            if os.environ.get("TOOLKIT_TRACEBACK") == "full" or _raised_by_a_library(e):
                raise
            raise e.with_traceback(user_traceback(e.__traceback__)) from None

    return wrapper


def _raised_by_a_library(e: BaseException) -> bool:
    """An error from inside a third-party library is an internal error: keep every frame.
    (NumPy raising on the user's own call is the user's error, so NumPy counts as user code.)"""
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return False
    filename = os.path.abspath(tb.tb_frame.f_code.co_filename)
    return "site-packages" in filename and not is_internal_file(filename) and "/numpy/" not in filename


def user_traceback(tb: types.TracebackType | None) -> types.TracebackType | None:
    """``tb`` without toolkit's own frames, so a user sees their lines, not the tracer's."""
    frames = []
    while tb is not None:
        if not is_internal_file(tb.tb_frame.f_code.co_filename):
            frames.append(tb)
        tb = tb.tb_next
    result = None
    for frame_tb in reversed(frames):
        result = types.TracebackType(result, frame_tb.tb_frame, frame_tb.tb_lasti, frame_tb.tb_lineno)
    return result
