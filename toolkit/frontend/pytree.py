"""Pytrees: nested tuples, lists, dicts, namedtuples and None around array leaves."""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass(frozen=True, slots=True)
class TreeDef:
    kind: str  # 'leaf', 'none', 'tuple', 'list', 'dict', 'namedtuple', 'static'
    children: tuple[TreeDef, ...] = ()
    meta: Any = None  # dict keys, the namedtuple class, or a static value (an output's dtype)
    # (hashed once, when first asked: every call hashes its key's trees, and a list of 1,000
    # arrays is a tree of 1,000 leaves)
    _hash: int | None = field(default=None, init=False, repr=False, compare=False)

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = hash((self.kind, self.children, self.meta))
            object.__setattr__(self, "_hash", h)
        return h

    @property
    def num_leaves(self) -> int:
        if self.kind == "leaf":
            return 1
        return sum(c.num_leaves for c in self.children)

    def __str__(self) -> str:
        if self.kind == "leaf":
            return "*"
        if self.kind == "none":
            return "None"
        if self.kind == "static":
            return repr(self.meta)
        inner = ", ".join(map(str, self.children))
        if self.kind == "dict":
            inner = ", ".join(f"{k!r}: {c}" for k, c in zip(self.meta, self.children))
            return "{" + inner + "}"
        if self.kind == "list":
            return f"[{inner}]"
        if self.kind == "namedtuple":
            return f"{self.meta.__name__}({inner})"
        return f"({inner}{',' if len(self.children) == 1 else ''})"


LEAF = TreeDef("leaf")
NONE = TreeDef("none")


@functools.lru_cache(maxsize=256)
def flat_tree(kind: str, n: int) -> TreeDef:
    """The tree of a list or tuple of ``n`` leaves: one object per shape, so a key holding it
    hashes and compares by identity, not leaf by leaf."""
    return TreeDef(kind, (LEAF,) * n)


def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def flatten(tree, path: str = "", is_static: Callable[[Any], bool] | None = None
            ) -> tuple[list[Any], TreeDef, list[str]]:
    """Leaves in order, the structure, and each leaf's path (``params['w1']``, ``batch[0]``);
    with ``is_static``, the values it accepts are part of the structure, not leaves (a jitted
    function's outputs that are no arrays: a dtype, a string)."""
    leaves: list[Any] = []
    paths: list[str] = []
    treedef = _walk(tree, path, leaves, paths, is_static)
    return leaves, treedef, paths


def _walk(node, p: str, leaves: list, paths: list, is_static=None) -> TreeDef:
    # (a module-level function, not a closure that calls itself: such a closure is a reference
    # cycle that keeps the leaves alive until the garbage collector runs)
    if node is None:
        return NONE
    t = type(node)
    if t is tuple or t is list:
        kids = tuple(_walk(c, f"{p}[{i}]", leaves, paths, is_static) for i, c in enumerate(node))
        return TreeDef("tuple" if t is tuple else "list", kids)
    if t is dict:
        # (in the dict's own order, not sorted as JAX does: the function iterates the dict it
        # is given, `list(p.values())`, and a returned dict keeps its order, as in Python)
        keys = tuple(node)
        kids = tuple(_walk(node[k], f"{p}[{k!r}]", leaves, paths, is_static) for k in keys)
        return TreeDef("dict", kids, keys)
    if _is_namedtuple(node):
        kids = tuple(_walk(getattr(node, f), f"{p}.{f}", leaves, paths, is_static)
                     for f in node._fields)
        return TreeDef("namedtuple", kids, t)
    if is_static is not None and is_static(node):
        return TreeDef("static", (), node)
    leaves.append(node)
    paths.append(p)
    return LEAF


def ordered_like(reference, tree) -> Any:
    """``tree`` with each dict in the key order of the dict at the same place in ``reference``
    where both hold the same keys: JAX's trees sort dict keys, toolkit's keep their order,
    and a tangent or cotangent tree made by JAX-style code matches its primals either way."""
    if type(tree) is dict and type(reference) is dict and set(tree) == set(reference):
        return {k: ordered_like(reference[k], tree[k]) for k in reference}
    if type(tree) in (tuple, list) and type(reference) in (tuple, list) and \
            len(tree) == len(reference):
        return type(tree)(ordered_like(r, t) for r, t in zip(reference, tree))
    return tree


def unflatten(treedef: TreeDef, leaves) -> Any:
    return _build(treedef, iter(leaves))


def _build(td: TreeDef, it) -> Any:
    # (module-level for the same reason as _walk: the results must die with their last user,
    # not wait for the garbage collector; a 4 MB output kept alive that way costs fresh pages)
    if td.kind == "leaf":
        return next(it)
    if td.kind == "none":
        return None
    if td.kind == "static":
        return td.meta
    kids = [_build(c, it) for c in td.children]
    if td.kind == "tuple":
        return tuple(kids)
    if td.kind == "list":
        return kids
    if td.kind == "dict":
        return dict(zip(td.meta, kids))
    return td.meta(*kids)


def tree_map(fn: Callable, tree) -> Any:
    leaves, td, _ = flatten(tree)
    return unflatten(td, [fn(x) for x in leaves])
