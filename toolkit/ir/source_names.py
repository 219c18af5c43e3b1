"""How a source location is named to the user: the one formatter behind recompile reports, error
lines, kernel tables, the timeline's hovers and the HLO's ``source_file``. A notebook cell reads
``cell [3], line 5`` (its execution count, as IPython's own tracebacks show it), any other file
``path.py:5``. The core never imports IPython: it reads a running shell by duck-typing, and the
notebook layer registers resolvers for the files it compiles itself (``%%xla`` cells)."""
from __future__ import annotations

import re
import sys
from typing import Callable

# filename -> (the cell's name such as "cell [3]", lines to add to the file's line numbers)
CellResolver = Callable[[str], "tuple[str, int] | None"]
_resolvers: list[CellResolver] = []
# terminal IPython and older kernels compile cell N as <ipython-input-N-HASH>
_IPYTHON_INPUT = re.compile(r"<ipython-input-(\d+)-[0-9a-f]*>")
# a name this module gave, read back from HLO text: already the cell's (lines already shifted)
_NAMED_CELL = re.compile(r"cell \[\d+\]|%%xla cell")
# Files found not to be cells (asking the shell costs ~25 µs; HLO text asks per instruction).
# A cell's file is asked about only after the shell compiled it, so a "no" stays true; a "yes"
# is never kept: re-running a cell's same text moves its file to the new execution count.
_NOT_CELLS: set[str] = set()
MAX_NOT_CELLS = 4096


def register_cell_resolver(resolver: CellResolver) -> None:
    """Name the files a front end compiles (tried before the running shell's cells); once each."""
    if resolver not in _resolvers:
        _resolvers.append(resolver)


def _shell_cell(filename: str) -> int | None:
    """The execution count of the IPython cell compiled under ``filename`` (a kernel names cells
    /tmp/ipykernel_NNN/HASH.py, the terminal <ipython-input-N-HASH>); None elsewhere. Reads the
    running shell only if IPython is already imported."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return None
    try:
        shell = ipython.get_ipython()
        count = shell.compile._filename_map.get(filename) if shell is not None else None
    except AttributeError:  # another IPython version's compiler: the name may still say
        count = None
    return count if isinstance(count, int) else None


def notebook_cell(filename: str) -> tuple[str, int] | None:
    """(``cell [n]``, line offset) for a file that is a notebook cell, else None."""
    if not filename or filename in _NOT_CELLS:
        return None
    if _NAMED_CELL.fullmatch(filename):
        return filename, 0
    for resolve in _resolvers:
        found = resolve(filename)
        if found is not None:
            return found
    count = _shell_cell(filename)
    if count is None:
        match = _IPYTHON_INPUT.fullmatch(filename)
        count = int(match.group(1)) if match else None
    if count is None:
        if len(_NOT_CELLS) >= MAX_NOT_CELLS:
            _NOT_CELLS.clear()
        _NOT_CELLS.add(filename)
        return None
    return f"cell [{count}]", 0


def display_file(filename: str) -> str:
    """``cell [3]`` for a notebook cell, else the file name unchanged."""
    cell = notebook_cell(filename)
    return cell[0] if cell is not None else filename


def display_location(filename: str, lines: str | int) -> str:
    """``cell [3], line 5`` for a notebook cell, else ``file.py:5`` (``lines`` may list several:
    ``5,7``, read ``cell [3], lines 5,7``)."""
    cell = notebook_cell(filename)
    if cell is None:
        return f"{filename}:{lines}"
    name, offset = cell
    numbers = [part for part in str(lines).split(",") if part]
    if offset:
        numbers = [str(int(n) + offset) if n.isdigit() else n for n in numbers]
    return f"{name}, line{'s' if len(numbers) > 1 else ''} {','.join(numbers)}"
