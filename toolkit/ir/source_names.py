"""How a source file is named to the user: a notebook cell as ``cell [n]`` (its execution count,
as IPython's own tracebacks show it), any other file by its path."""
from __future__ import annotations

import sys


def notebook_cell(filename: str) -> int | None:
    """The execution count of the IPython cell compiled under ``filename`` (a kernel names cells
    /tmp/ipykernel_NNN/HASH.py), as IPython's own tracebacks show it; None elsewhere. Reads the
    running shell only if IPython is already imported: the core never imports it."""
    ipython = sys.modules.get("IPython")
    if ipython is None or not filename.endswith(".py") and not filename.startswith("<ipython-input"):
        return None
    try:
        shell = ipython.get_ipython()
        return shell.compile._filename_map.get(filename) if shell is not None else None
    except AttributeError:  # another IPython version's compiler: keep the file name
        return None


def display_location(filename: str, lines: str | int) -> str:
    """``cell [3], line 5`` for a notebook cell, else ``file.py:5`` (``lines`` may list several: ``5,7``)."""
    cell = notebook_cell(filename)
    if cell is None:
        return f"{filename}:{lines}"
    return f"cell [{cell}], line{'s' if ',' in str(lines) else ''} {lines}"
