"""Where the user's code is: the first Python frame outside toolkit, NumPy and the notebook
machinery. Operations record it as their source line (HLO metadata), compiles as their call
site, and the device backend as the line that copied an array; the one formatter in
``source_names`` names it (``cell [3], line 2`` in a notebook)."""
from __future__ import annotations

import contextlib
import functools
import os
import sys
from dataclasses import dataclass

import numpy as _np

from .source_names import display_location

_TOOLKIT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The demo and its workloads play the user's part: their lines are the "user's lines".
_PLAYS_USER = {os.path.join(_TOOLKIT_DIR, name) for name in ("workloads.py", "demo.py")}
_NUMPY_DIR = os.path.dirname(os.path.abspath(_np.__file__)) + os.sep
# Frames of context managers and wrappers toolkit itself uses sit between the user and us.
_STDLIB_WRAPPERS = {contextlib.__file__, functools.__file__}
# The notebook machinery between a user's cell and toolkit is never the user's code.
_HOST_PACKAGES = tuple(f"{os.sep}{name}{os.sep}"
                       for name in ("IPython", "ipykernel", "traitlets", "asyncio"))
# filename -> not the user's: asked once per frame walked, so remembered (and bounded)
_not_users: dict[str, bool] = {}
MAX_REMEMBERED_FILES = 4096


def is_internal_file(filename: str) -> bool:
    """A file of toolkit's own (the demo's workloads excepted: they play the user)."""
    path = os.path.abspath(filename)
    return path.startswith(_TOOLKIT_DIR + os.sep) and path not in _PLAYS_USER


@dataclass(frozen=True, slots=True)
class SourceLocation:
    file: str
    line: int
    function: str

    def __str__(self) -> str:
        return display_location(self.file, self.line)


def _skip(filename: str) -> bool:
    hit = _not_users.get(filename)
    if hit is None:
        path = os.path.abspath(filename)
        hit = is_internal_file(filename) or path.startswith(_NUMPY_DIR) \
            or filename.startswith("<frozen") or filename in _STDLIB_WRAPPERS \
            or any(p in path for p in _HOST_PACKAGES)
        if len(_not_users) >= MAX_REMEMBERED_FILES:
            _not_users.clear()
        _not_users[filename] = hit
    return hit


def is_users_file(filename: str) -> bool:
    """Is ``filename`` the user's code (not toolkit's, NumPy's, the notebook machinery's)?"""
    return not _skip(filename)


def user_frame(depth: int = 1):
    """The user's frame nearest the caller (``depth`` frames up, then outwards), or None."""
    frame = sys._getframe(depth + 1)
    while frame is not None and _skip(frame.f_code.co_filename):
        frame = frame.f_back
    return frame


def user_location(depth: int = 1) -> SourceLocation | None:
    """The user's frame nearest the caller (``depth`` frames up, then outwards)."""
    frame = sys._getframe(depth)
    while frame is not None and _skip(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return None
    code, offset = frame.f_code, frame.f_lasti
    # one object per place: a traced Python loop asks for the same few at every NumPy call
    # (keyed by the bytecode offset: a frame works its line number out anew at each ask)
    found = _locations.get((code, offset))
    if found is None:
        if len(_locations) >= MAX_REMEMBERED_LINES:
            _locations.clear()
            _lines.clear()
        line = frame.f_lineno
        found = _lines.get((code, line))
        if found is None:
            found = _lines[code, line] = SourceLocation(code.co_filename, line, code.co_name)
        _locations[code, offset] = found
    return found


_locations: dict = {}  # (code object, bytecode offset) -> its SourceLocation
_lines: dict = {}  # (code object, line) -> its SourceLocation (one object per line)
MAX_REMEMBERED_LINES = 1 << 14


def user_line() -> str:
    """The user's line nearest the caller, as the user reads it; "" when there is none."""
    loc = user_location(2)
    return str(loc) if loc else ""


def user_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning point at the user's line, past toolkit's frames."""
    frame, level = sys._getframe(1), 1
    while frame is not None and is_internal_file(frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1
    return level


# code object -> byte ranges its ``try`` blocks with an ``except`` cover (``with`` blocks and
# ``finally`` alone catch nothing): asked only where an error could be raised, remembered
_CATCHING: dict = {}


def _catching_ranges(code) -> tuple[tuple[int, int], ...]:
    ranges = _CATCHING.get(code)
    if ranges is None:
        import dis

        instructions = list(dis.get_instructions(code))
        at = {ins.offset: n for n, ins in enumerate(instructions)}
        found = []
        for entry in dis.Bytecode(code).exception_entries:
            n = at.get(entry.target)
            handler = [ins.opname for ins in instructions[n:n + 6]] if n is not None else []
            if handler[:1] == ["PUSH_EXC_INFO"] and "WITH_EXCEPT_START" not in handler and (
                    "CHECK_EXC_MATCH" in handler or handler[1:2] == ["POP_TOP"]):
                found.append((entry.start, entry.end))  # (``except X:`` or a bare ``except:``)
        ranges = tuple(found)
        if len(_CATCHING) >= MAX_REMEMBERED_FILES:
            _CATCHING.clear()
        _CATCHING[code] = ranges
    return ranges


def inside_users_try(depth: int, outermost_frame_id: int | None) -> bool:
    """Is the caller (``depth`` frames up) running inside a user's ``try ... except`` between
    it and the frame ``outermost_frame_id`` (where tracing began: a try around the jitted call
    itself catches what is raised after the call)? Then an error NumPy raises here must be
    raised here, for that ``except`` to see it."""
    if outermost_frame_id is None:
        return False
    frame = sys._getframe(depth + 1)
    while frame is not None and id(frame) != outermost_frame_id:
        if not _skip(frame.f_code.co_filename):
            lasti = frame.f_lasti
            if any(start <= lasti < end for start, end in _catching_ranges(frame.f_code)):
                return True
        frame = frame.f_back
    return False
