"""Turning a ``%%xla`` cell into a function: names the cell reads before assigning are its
arguments, names it assigns are its results. The cell keeps its own line numbers."""
from __future__ import annotations

import ast
import builtins
import hashlib
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class CellInfo:
    source: str
    inputs: tuple[str, ...]  # read before being assigned, in order of first use
    outputs: tuple[str, ...]  # assigned by the cell

    @property
    def filename(self) -> str:
        digest = hashlib.sha1(self.source.encode()).hexdigest()[:8]
        return f"<xla-cell-{digest}>"


def _stores(node: ast.AST) -> list[str]:
    out = []
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            out.append(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            out.append(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            out.extend((a.asname or a.name).split(".")[0] for a in n.names)
    return out


def _loads(node: ast.AST) -> list[str]:
    out = []
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            out.append(n.id)
        elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
            out.append(n.target.id)  # x += 1 reads x
    return out


def analyze(source: str) -> CellInfo:
    tree = ast.parse(source)
    assigned: set[str] = set()
    inputs: list[str] = []
    outputs: list[str] = []
    for stmt in tree.body:
        for name in _loads(stmt):
            if name not in assigned and name not in inputs and not hasattr(builtins, name):
                inputs.append(name)
        for name in _stores(stmt):
            assigned.add(name)
            if name not in outputs:
                outputs.append(name)
    return CellInfo(source, tuple(inputs), tuple(outputs))


def is_array_value(value) -> bool:
    return isinstance(value, (np.ndarray, np.generic)) and value.dtype.kind in "biuf"


def build_function(info: CellInfo, params: list[str], namespace: dict, outputs=None):
    """``def <cell>(*params): <cell body>; return {outputs}`` (by default every assigned name)
    with the cell's line numbers; globals come from ``namespace`` (the user's)."""
    outputs = info.outputs if outputs is None else tuple(outputs)
    tree = ast.parse(info.source)
    last = max((getattr(n, "end_lineno", 1) or 1) for n in ast.walk(tree)) if tree.body else 1
    tail = ast.parse("def _f():\n    __tk_locals = locals()\n"
                     f"    return {{__tk_n: __tk_locals[__tk_n] for __tk_n in {list(outputs)!r} "
                     "if __tk_n in __tk_locals}").body[0].body
    for stmt in tail:
        ast.increment_lineno(stmt, last - stmt.lineno)
    args = ast.arguments(posonlyargs=[], args=[ast.arg(arg=p) for p in params], vararg=None,
                         kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])
    fn = ast.FunctionDef(name="xla_cell", args=args, body=(tree.body or [ast.Pass()]) + tail,
                         decorator_list=[], returns=None, lineno=1, col_offset=0)
    module = ast.Module(body=[fn], type_ignores=[])
    ast.fix_missing_locations(module)
    code = compile(module, info.filename, "exec")
    scope: dict = {}
    exec(code, namespace, scope)  # noqa: S102 - the user's own cell, as IPython would run it
    return scope["xla_cell"]
