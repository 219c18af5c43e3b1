"""The Executable protocol: every backend's compile returns one, and the stages above read it
only through the protocol (no probing for optional attributes)."""
import ast
import pathlib

import numpy as np
import pytest

import toolkit as tk
from toolkit.backends import Executable, KernelInfo, ResultPlacement, RunContext

ROOT = pathlib.Path(__file__).resolve().parents[1] / "toolkit"
BACKENDS = {"interpreter": ResultPlacement.HOST, "cpu": ResultPlacement.HOST,
            "gpu-simulated": ResultPlacement.DEVICE}


def _program(x, w):
    return np.tanh(x @ w).sum(axis=1) + 1.0


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_every_backend_returns_an_executable(backend):
    x, w = np.ones((4, 3), np.float32), np.ones((3, 5), np.float32)
    compiled = tk.jit(_program, backend=backend).compiled(x, w)
    exe = compiled.executable
    assert isinstance(exe, Executable)
    assert exe.result_placement is BACKENDS[backend]
    kernels = compiled.kernels()
    assert kernels and all(isinstance(k, KernelInfo) for k in kernels)
    assert "dot" in {k.instruction.opcode for k in kernels} | {k.kind for k in kernels}
    seen = []
    results = exe.run_profiled([x, w], tk.profiler.recorder.RECORDER.clock,
                               lambda inst, *rest, **kw: seen.append(inst.name),
                               RunContext("_program"))
    np.testing.assert_allclose(np.asarray(results[0]), _program(x, w), rtol=1e-6)
    assert set(seen) == {k.name for k in kernels}  # the profile reports exactly its kernels


def test_stage_texts_come_from_the_executable():
    x = np.ones(8, np.float32)
    cpu = tk.jit(lambda a: a * 2.0, backend="cpu").compiled(x)
    assert set(cpu.executable.stages()) == {"llvm", "asm", "buffers"}
    assert "define" in cpu.as_text("llvm")
    assert cpu.as_text("buffers") == "0 in place, 0 copies inserted (0 B copied per run)"
    gpu = tk.jit(lambda a: a * 2.0, backend="gpu-simulated").compiled(x)
    assert "ptx" in gpu.executable.stages() and ".entry" in gpu.as_text("ptx")
    interp = tk.jit(lambda a: a * 2.0, backend="interpreter").compiled(x)
    with pytest.raises(ValueError, match="not available on the interpreter backend"):
        interp.as_text("llvm")
    assert interp.as_text("buffers").startswith("0 in place")  # no plan: nothing in place


def _probes(path: pathlib.Path) -> list[str]:
    """getattr/hasattr calls on an executable in ``path``'s source."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr") and node.args
                and "executable" in ast.unparse(node.args[0])):
            found.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_nothing_probes_an_executable():
    probes = [p for path in ROOT.rglob("*.py") for p in _probes(path)]
    assert not probes, "\n".join(probes)


def test_the_probe_finder_finds_probes(tmp_path):  # a test that cannot fail is a defect
    source = tmp_path / "probe.py"
    source.write_text("x = getattr(compiled._executable, 'cache_status', 'miss')\n")
    assert _probes(source)


def _patches(source: str) -> list[str]:
    """Module-level assignments to an attribute of an imported module (monkeypatching). Names
    of classes (capitalised: dispatch.py wires NumPy's protocols onto ``Tracer`` by design) are
    not modules."""
    tree = ast.parse(source)
    imported = {alias.asname or alias.name.split(".")[0] for node in tree.body
                if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}
    imported = {name for name in imported if not name.lstrip("_")[:1].isupper()}
    return [ast.unparse(target) for node in tree.body if isinstance(node, ast.Assign)
            for target in node.targets if isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name) and target.value.id in imported]


def test_no_module_patches_another_at_import():
    patched = [f"{p.relative_to(ROOT)}: {t}" for p in ROOT.rglob("*.py")
               for t in _patches(p.read_text())]
    assert not patched, patched


def test_the_patch_finder_finds_patches():
    assert _patches("from .backends.gpu import arrays as _a\n_a.locate_caller = print\n")
