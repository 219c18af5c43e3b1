"""The one formatter of user-facing source locations, on the file names notebook front ends give
cells: ipykernel's temporary files, terminal IPython's ``<ipython-input-N-HASH>``, %%xla cells."""
import sys
import types

import numpy as np
import pytest

from toolkit.ir.nodes import Metadata
from toolkit.ir import source_names
from toolkit.ir.printer import metadata_to_text
from toolkit.ir.source_names import display_file, display_location, register_cell_resolver

KERNEL_CELL = "/tmp/ipykernel_4242/1234567890.py"


@pytest.fixture(autouse=True)
def fresh_answers(monkeypatch):
    """Each test's shell is new: forget the files an earlier test's shell said were no cells."""
    monkeypatch.setattr(source_names, "_NOT_CELLS", set())


@pytest.fixture
def kernel_shell(monkeypatch):
    """A running shell as ipykernel's looks to duck-typing: its compiler maps each cell's
    temporary file to the cell's execution count (IPython's CachingCompiler._filename_map)."""
    shell = types.SimpleNamespace(compile=types.SimpleNamespace(_filename_map={KERNEL_CELL: 7}))
    fake = types.ModuleType("IPython")
    fake.get_ipython = lambda: shell
    monkeypatch.setitem(sys.modules, "IPython", fake)
    return shell


def test_a_kernel_cell_reads_as_cell_and_line(kernel_shell):
    assert display_location(KERNEL_CELL, 2) == "cell [7], line 2"
    assert display_location(KERNEL_CELL, "2,5") == "cell [7], lines 2,5"
    assert display_file(KERNEL_CELL) == "cell [7]"
    assert display_location("/tmp/ipykernel_4242/other.py", 3) == "/tmp/ipykernel_4242/other.py:3"
    assert display_location("/srv/model.py", 9) == "/srv/model.py:9"


def test_terminal_ipython_cells_read_as_cells_even_without_a_shell(monkeypatch):
    monkeypatch.delitem(sys.modules, "IPython", raising=False)
    assert display_location("<ipython-input-8-0a1b2c3d4e>", 1) == "cell [8], line 1"
    assert display_location("<ipython-input-x>", 1) == "<ipython-input-x>:1"


def test_a_shell_of_another_shape_keeps_the_file_name(monkeypatch):
    fake = types.ModuleType("IPython")
    fake.get_ipython = lambda: types.SimpleNamespace(compile=object())
    monkeypatch.setitem(sys.modules, "IPython", fake)
    assert display_location(KERNEL_CELL, 4) == f"{KERNEL_CELL}:4"


def test_hlo_metadata_names_the_cell_and_reads_back(kernel_shell):
    import toolkit as tk
    from toolkit import hlo

    text = metadata_to_text(Metadata("jit(f)/mul", KERNEL_CELL, 3))
    assert text == 'metadata={op_name="jit(f)/mul" source_file="cell [7]" source_line=3}'
    code = compile("def f(x):\n    return x * 2\n", KERNEL_CELL, "exec")
    scope: dict = {}
    exec(code, scope)  # noqa: S102 - a cell's code, as the kernel runs it
    module = hlo.parse(tk.jit(scope["f"]).lower(np.ones(2)).as_text())
    md = next(i.metadata for i in module.entry.instructions if i.opcode == "multiply")
    assert (md.source_file, md.location) == ("cell [7]", "cell [7], line 2")


def test_a_registered_resolver_names_its_files_and_shifts_their_lines():
    register_cell_resolver(lambda f: ("cell [5]", 1) if f == "<made-by-a-front-end>" else None)
    assert display_location("<made-by-a-front-end>", "1,3") == "cell [5], lines 2,4"
    assert 'source_file="cell [5]" source_line=3' in metadata_to_text(
        Metadata("f", "<made-by-a-front-end>", 2))


def test_recompile_reports_and_error_lines_use_it(kernel_shell):
    """The call site and definition of a recompile and a traced error's line, for code that
    lives in a kernel cell (compiled here under the cell's temporary file name)."""
    import toolkit as tk
    from toolkit.profiler.report import recompile_text

    code = compile("def f(x):\n    return np.sin(x)\n\ndef call(f, x):\n    return f(x)\n",
                   KERNEL_CELL, "exec")
    scope = {"np": np}
    exec(code, scope)  # noqa: S102 - a cell's code, as the kernel runs it
    f = tk.jit(scope["f"], on_recompile="ignore")
    scope["call"](f, np.ones(2))
    scope["call"](f, np.ones(3))
    text = recompile_text(f.recompiles[-1])
    assert "(defined cell [7], line 1) at call site cell [7], line 5" in text, text
    assert 'source_file="cell [7]" source_line=2' in f.lower(np.ones(2)).as_text()
    bad = compile("def g(x):\n    if x > 0:\n        return x\n    return -x\n", KERNEL_CELL,
                  "exec")
    exec(bad, scope)  # noqa: S102
    with pytest.raises(tk.ToolkitError, match=r"at cell \[7\], line 2"):
        tk.jit(scope["g"], fullgraph=True)(np.ones(2))
