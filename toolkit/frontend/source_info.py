"""The user's source file and line for an operation: the first frame outside toolkit and NumPy."""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import contextlib
import functools

import numpy as _np

from ..ir.source_names import display_location
from .errors import is_internal_file

_NUMPY_DIR = os.path.dirname(os.path.abspath(_np.__file__)) + os.sep
_internal_cache: dict[str, bool] = {}
# Frames of context managers and wrappers toolkit itself uses sit between the user and us.
_STDLIB_WRAPPERS = {contextlib.__file__, functools.__file__}


@dataclass(frozen=True, slots=True)
class SourceLocation:
    file: str
    line: int
    function: str

    def __str__(self) -> str:
        return display_location(self.file, self.line)


# The notebook machinery between a user's cell and toolkit is never the user's code.
_HOST_PACKAGES = tuple(f"{os.sep}{name}{os.sep}" for name in ("IPython", "ipykernel", "traitlets", "asyncio"))


def _skip(filename: str) -> bool:
    hit = _internal_cache.get(filename)
    if hit is None:
        path = os.path.abspath(filename)
        hit = is_internal_file(filename) or path.startswith(_NUMPY_DIR) \
            or filename.startswith("<frozen") or filename in _STDLIB_WRAPPERS \
            or any(p in path for p in _HOST_PACKAGES)
        _internal_cache[filename] = hit
    return hit


def user_location(depth: int = 1) -> SourceLocation | None:
    frame = sys._getframe(depth)
    while frame is not None and _skip(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return None
    return SourceLocation(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)
