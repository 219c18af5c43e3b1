"""The dependency rules of the architecture, checked on the source with ``ast``."""
import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1] / "toolkit"
GUI = {"IPython", "ipywidgets", "matplotlib"}

# package -> toolkit packages it may import (besides itself)
ALLOWED = {
    "ir": set(),
    "profiler": {"config"},
    "frontend": {"ir", "profiler", "config"},
    "passes": {"ir", "profiler", "config"},
    "backends": {"ir", "profiler", "config"},
}


def _imports(path: pathlib.Path):
    tree = ast.parse(path.read_text())
    rel_parts = path.relative_to(ROOT).parts
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                yield node.module or ""
            else:
                base = list(rel_parts[:-1])
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                yield ".".join(["toolkit", *base, *(node.module.split(".") if node.module else [])])


def _toolkit_package(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "toolkit" and len(parts) > 1 else None


def test_lower_layers_never_import_higher_ones():
    violations = []
    for package, allowed in ALLOWED.items():
        for path in (ROOT / package).rglob("*.py"):
            for module in _imports(path):
                target = _toolkit_package(module)
                if target and target != package and target not in allowed:
                    violations.append(f"{path.relative_to(ROOT)} imports {module}")
    assert not violations, "\n".join(violations)


def _backend_crossings(own: str, other: str) -> list[str]:
    return [f"{path.relative_to(ROOT)} imports {module}"
            for path in (ROOT / "backends" / own).rglob("*.py") for module in _imports(path)
            if module.startswith(f"toolkit.backends.{other}")]


def test_the_cpu_and_gpu_backends_never_import_each_other():
    # they share backends/llvm, backends/buffer_plan and the rest of backends/
    crossings = _backend_crossings("cpu", "gpu") + _backend_crossings("gpu", "cpu")
    assert not crossings, "\n".join(crossings)
    assert "toolkit.backends.llvm.elemental" in set(_imports(ROOT / "backends" / "cpu" /
                                                             "kernels.py"))  # the checker sees


def test_config_is_a_leaf():
    bad = [m for m in _imports(ROOT / "config.py") if _toolkit_package(m) or m.startswith(".")]
    assert not bad, bad


def test_core_never_imports_notebook_libraries():
    core = [
        p
        for p in ROOT.rglob("*.py")
        if p.relative_to(ROOT).parts[0] not in ("plots", "widgets", "notebook")
    ]
    bad = [
        f"{p.relative_to(ROOT)} imports {m}"
        for p in core
        for m in _imports(p)
        if m.split(".")[0] in GUI
    ]
    assert not bad, "\n".join(bad)


def test_nothing_imports_the_notebook_package():
    # toolkit/__init__.py's load_ipython_extension is the entry point IPython looks up
    bad = [f"{p.relative_to(ROOT)}" for p in ROOT.rglob("*.py")
           if p.relative_to(ROOT).parts[0] != "notebook" and p != ROOT / "__init__.py"
           and any(_toolkit_package(m) == "notebook" for m in _imports(p))]
    assert not bad


def test_the_checker_sees_imports():  # a test that cannot fail is a defect: prove it can
    assert "toolkit.ir.nodes" in set(_imports(ROOT / "ir" / "builder.py"))
    assert _toolkit_package("toolkit.frontend.tracer") == "frontend"


# ---- no import cycles -----------------------------------------------------------------------
def _module_name(path: pathlib.Path, root: pathlib.Path = ROOT) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _bound_names(init: pathlib.Path) -> set[str]:
    """The names a package's __init__.py binds at its top level (what ``from pkg import name``
    finds there before it looks for a submodule)."""
    names = {"*"}
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def _import_targets(path: pathlib.Path, root: pathlib.Path, modules: dict[str, pathlib.Path]):
    """The modules of ``modules`` that ``path`` names in its import statements."""
    name = _module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules:
                    yield alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                base = ".".join(base + (node.module.split(".") if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in modules:
                    yield sub
                elif base in modules and (modules[base].name != "__init__.py"
                                          or alias.name in _bound_names(modules[base])):
                    yield base
                # else a submodule with no source here (backends/cpu/_kernel_call, compiled)


def import_graph(root: pathlib.Path = ROOT) -> dict[str, set[str]]:
    modules = {_module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    graph = {name: set(_import_targets(path, root, modules)) for name, path in modules.items()}
    return {name: targets - {name} for name, targets in graph.items()}


def strongly_connected_components(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm with an explicit stack (no recursion: the graph may grow deep)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph.get(succ, ())))))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    components.append(sorted(component))
    return components


def import_cycles(root: pathlib.Path = ROOT) -> list[list[str]]:
    graph = import_graph(root)
    return [c for c in strongly_connected_components(graph) if len(c) > 1]


def _file_of(module: str, root: pathlib.Path = ROOT) -> str:
    path = root.parent.joinpath(*module.split("."))
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    return str(path.relative_to(root.parent))


def _describe_cycle(component: list[str], graph: dict[str, set[str]]) -> str:
    members = set(component)
    edges = [f"    {_file_of(a)} imports {_file_of(b)}"
             for a in component for b in sorted(graph[a] & members)]
    return f"{len(component)} files import each other:\n" + "\n".join(edges)


def test_the_cycle_checker_finds_cycles(tmp_path):  # prove it can fail
    package = tmp_path / "toolkit"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("from .sub import a\n__version__ = '0'\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "a.py").write_text("from . import b\n")
    (package / "sub" / "b.py").write_text("def f():\n    from .a import g\n")  # in a function
    (package / "leaf.py").write_text("import toolkit.sub.b\n")
    (package / "child.py").write_text("from . import __version__\n")  # a name from __init__
    (package / "sub" / "c.py").write_text("from . import _compiled\n")  # no source: no edge
    assert import_cycles(package) == [["toolkit.sub.a", "toolkit.sub.b"]]
    (package / "__init__.py").write_text("from . import child\n__version__ = '0'\n")
    assert ["toolkit", "toolkit.child"] in import_cycles(package)
    # a package __init__ importing its children is no cycle by itself
    (package / "sub" / "b.py").write_text("from toolkit.leaf import X\n")
    (package / "leaf.py").write_text("X = 1\n")
    (package / "sub" / "__init__.py").write_text("from . import a, b\n")
    (package / "__init__.py").write_text("from .sub import a\n__version__ = '0'\n")
    assert import_cycles(package) == []
    assert strongly_connected_components({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c"]]
    graph = {"toolkit.ir.nodes": {"toolkit.ir"}, "toolkit.ir": {"toolkit.ir.nodes"}}
    assert _describe_cycle(["toolkit.ir", "toolkit.ir.nodes"], graph) == (
        "2 files import each other:\n    toolkit/ir/__init__.py imports toolkit/ir/nodes.py\n"
        "    toolkit/ir/nodes.py imports toolkit/ir/__init__.py")


def test_no_import_cycles():
    """No two modules of the package import each other, directly or through others.

    The graph's nodes are the package's files, named as modules ("toolkit.ir.nodes", and
    "toolkit.ir" for toolkit/ir/__init__.py). An edge a -> b says that a's source names b in an
    import statement anywhere in the file: inside functions too, since a deferred import is a
    cycle put off, not removed. ``from pkg import sub``, where pkg/sub.py (or a compiled
    extension, or a subpackage) exists, names the submodule pkg.sub; a relative import is
    resolved against the importing file's package.

    How a package's __init__.py counts: importing toolkit.ir.nodes runs toolkit/ir/__init__.py
    first, but that is Python's machinery, not a dependency the child states, so it makes no
    edge; otherwise every __init__ that re-exports a submodule would form a "cycle" with it, and
    the check would forbid the ordinary package. An __init__.py that imports its submodules has
    edges to them like any module. A child that imports a name defined in its own package's
    __init__.py (``from . import name`` where name is no submodule, ``from toolkit import
    __version__``, ``import toolkit``) names the __init__ module, and that edge counts: with the
    re-export it closes a real cycle, the one that leaves a half-initialised package when the
    child is imported first."""
    graph = import_graph()
    cycles = [c for c in strongly_connected_components(graph) if len(c) > 1]
    assert not cycles, "\n".join(_describe_cycle(c, graph) for c in cycles)
