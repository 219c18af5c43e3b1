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


def test_config_is_a_leaf():
    bad = [m for m in _imports(ROOT / "config.py") if _toolkit_package(m) or m.startswith(".")]
    assert not bad, bad


def test_core_never_imports_notebook_libraries():
    core = [p for p in ROOT.rglob("*.py") if p.relative_to(ROOT).parts[0] not in ("plots", "widgets", "notebook")]
    bad = [f"{p.relative_to(ROOT)} imports {m}" for p in core for m in _imports(p) if m.split(".")[0] in GUI]
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
