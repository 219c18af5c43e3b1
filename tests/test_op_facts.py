"""The op table is the one home of facts about ops: no module outside toolkit/ir writes a set
of opcodes (or a table of per-op constants) of its own, and the facts the table states hold."""
from __future__ import annotations

import ast
import pathlib

import numpy as np
import pytest

from toolkit.ir.ops import OPS, GroupOp, identity, initial_value, reducer_ufunc

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "toolkit"

# XLA's opcodes that toolkit does not model: a set naming them is an opcode set all the same
XLA_OTHER_OPCODES = frozenset({
    "add-dependency", "after-all", "all-gather-start", "all-gather-done", "all-reduce-start",
    "all-reduce-done", "async-start", "async-update", "async-done", "batch-norm-grad",
    "batch-norm-inference", "batch-norm-training", "cholesky", "collective-broadcast",
    "collective-permute-start", "collective-permute-done", "convolution", "copy-start",
    "copy-done", "domain", "dynamic-reshape", "fft", "get-dimension-size", "infeed", "map",
    "outfeed", "ragged-all-to-all", "ragged-dot", "recv", "recv-done", "reduce-precision",
    "reduce-window", "rng", "rng-bit-generator", "rng-get-and-update-state",
    "select-and-scatter", "send", "send-done", "set-dimension-size", "stochastic-convert",
    "topk", "triangular-solve",
})

def _opcode_names(nodes) -> list[str] | None:
    """The strings of ``nodes`` when every one is an opcode name (toolkit's or XLA's), else
    None: a list of NumPy or Python names that happens to hold an opcode is no opcode set."""
    names = []
    for n in nodes:
        if not (isinstance(n, ast.Constant) and isinstance(n.value, str)):
            return None
        if n.value not in OPS and n.value not in XLA_OTHER_OPCODES:
            return None
        names.append(n.value)
    return names


def _rooted_at_numpy(node: ast.AST) -> bool:
    while isinstance(node, (ast.Attribute, ast.Call)):
        node = node.value if isinstance(node, ast.Attribute) else node.func
    return isinstance(node, ast.Name) and node.id in ("np", "numpy")


def _is_fact_value(node: ast.AST) -> bool:
    """A number, a NumPy attribute (np.add, -np.inf), or a lambda that calls nothing but NumPy
    (``lambda dt: np.iinfo(dt).min``): a per-op fact. A per-op emitter or rule is a function,
    and a per-op message or intrinsic name is text: those are per-op tables, and fine."""
    if isinstance(node, ast.Constant):
        return not isinstance(node.value, str)
    if isinstance(node, ast.UnaryOp):
        return _is_fact_value(node.operand)
    if isinstance(node, ast.Attribute):
        return _rooted_at_numpy(node)
    if isinstance(node, ast.Lambda):
        return all(_rooted_at_numpy(n.func) for n in ast.walk(node.body) if isinstance(n, ast.Call))
    return False


def opcode_sets(source: str) -> list[tuple[int, str]]:
    """(line, what) for every opcode set, and every table of per-op constants, in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Set, ast.Tuple, ast.List)):
            names = _opcode_names(node.elts)
            if names is not None and sum(n in OPS for n in names) >= 2:
                found.append((node.lineno, f"opcode set {sorted(names)}"))
        elif isinstance(node, ast.Dict) and node.keys and None not in node.keys:
            names = _opcode_names(node.keys)
            if names is not None and sum(n in OPS for n in names) >= 2 \
                    and all(_is_fact_value(v) for v in node.values):
                found.append((node.lineno, f"per-op constants keyed by {sorted(names)}"))
    return found


def _modules_outside_ir():
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE.parent).as_posix()
        if not relative.startswith("toolkit/ir/"):
            yield relative, path


def test_no_opcode_set_outside_ir():
    problems = []
    for relative, path in _modules_outside_ir():
        problems += [f"{relative}:{line}: {what}" for line, what in opcode_sets(path.read_text())]
    assert not problems, ("facts about ops belong on OpDef / GroupOp in toolkit/ir/ops.py:\n"
                          + "\n".join(problems))


@pytest.mark.parametrize("source", [
    'PINNED = frozenset({"while", "conditional", "rng"})',
    'def f(op):\n    return op in ("add", "multiply")',
    'SIMPLE = ["maximum", "minimum"]',
    'INIT = {"add": 0, "multiply": 1, "maximum": -np.inf}',
    'UFUNCS = {"add": np.add, "and": np.bitwise_and}',
    'IDENTITY = {"add": lambda dt: -0.0, "or": lambda dt: 0}',
])
def test_the_check_finds_an_opcode_set(source):
    assert opcode_sets(source), source


@pytest.mark.parametrize("source", [
    'def f(op):\n    return op == "add" or op == "multiply"',  # one opcode at a time
    'METHODS = ("sum", "prod", "dot", "copy")',  # NumPy names, two of which are also opcodes
    'OPERATORS = ["add", "sub", "mul", "xor"]',  # Python's operator names
    'EMIT = {"add": lambda b, x, y: b.add(x, y), "multiply": _multiply}',  # a per-op emitter
    'COLORS = {"kLoop": "#4C72B0", "dot": "#C44E52", "fusion": "#4C72B0"}',  # not all opcodes
    'WHY = {"fusion": "exists only after passes", "sort": "no rule"}',  # per-op messages
    'INTRINSICS = {"maximum": "llvm.maximum", "minimum": "llvm.minimum"}',
    'X = ("add",)',
])
def test_the_check_leaves_other_literals(source):
    assert not opcode_sets(source), source


def test_the_check_reads_the_old_sets():
    """The sets this test replaced, as they were written, are found."""
    old = """
_NEVER_FOLD = {"parameter", "constant", "tuple", "get-tuple-element", "call", "fusion", "iota",
               "broadcast", "opt-barrier"}
COMMUTATIVE = {"add", "multiply", "maximum", "minimum", "and", "or", "xor"}
_REDUCER_INIT = {
    "add": lambda dt: 0,
    "maximum": lambda dt: -np.inf if dt.kind == "f" else (False if dt.kind == "b" else np.iinfo(dt).min),
}
"""  # noqa: E501
    assert [line for line, _ in opcode_sets(old)] == [2, 4, 5]


# ---- the facts ---------------------------------------------------------------------------------
_DTYPES = {
    "add": "f2 f4 f8 c8 c16 i1 i2 i4 i8 u1 u2 u4 u8",
    "multiply": "f2 f4 f8 c8 c16 i1 i4 i8 u1 u8",
    "maximum": "? f2 f4 f8 i1 i4 i8 u1 u8",
    "minimum": "? f2 f4 f8 i1 i4 i8 u1 u8",
    "and": "? i1 i4 i8 u1 u8",
    "or": "? i1 i4 i8 u1 u8",
    "xor": "? i1 i4 i8 u1 u8",
}


def _samples(dt: np.dtype) -> np.ndarray:
    if dt.kind == "b":
        return np.array([False, True])
    if dt.kind in "fc":
        values = [-0.0, 0.0, 1.5, -2.0, np.finfo(dt).max, np.finfo(dt).tiny]
        if dt.kind == "c":  # (an infinite part makes complex products NaN, identity or not)
            return np.array([complex(a, b) for a in values for b in values], dt)
        return np.array(values + [np.inf, -np.inf], dt)
    info = np.iinfo(dt)
    return np.array([0, 1, info.min, info.max, info.max // 3], dt)


@pytest.mark.parametrize("opcode", sorted(GroupOp.REDUCERS))
def test_identity_is_exact(opcode):
    assert set(_DTYPES) == GroupOp.REDUCERS
    ufunc = reducer_ufunc(opcode)
    for code in _DTYPES[opcode].split():
        dt = np.dtype(code)
        x = _samples(dt)
        e = np.array(identity(opcode, dt)).astype(dt)
        with np.errstate(all="ignore"):
            for result in (ufunc(e, x), ufunc(x, e)):
                assert result.dtype == dt, (opcode, code)
                if opcode == "multiply" and dt.kind == "c":
                    # (1+0j)(a+bj) = (a - 0b) + (b + 0a)j: a zero part may change sign, so no
                    # complex number is a bit-exact identity; 1 is one up to zeros' signs
                    assert (result == x).all(), (opcode, code)
                else:
                    assert result.tobytes() == x.tobytes(), (opcode, code)


@pytest.mark.parametrize("opcode", sorted(GroupOp.REDUCERS))
def test_initial_value_is_numpy_start(opcode):
    ufunc = reducer_ufunc(opcode)
    for code in _DTYPES[opcode].split():
        dt = np.dtype(code)
        start = np.array(initial_value(opcode, dt)).astype(dt)
        if ufunc.identity is not None:  # NumPy's empty reduction
            empty = ufunc.reduce(np.zeros(0, dt), dtype=dt)
            assert empty.dtype == dt and empty.tobytes() == start.tobytes(), (opcode, code)
        else:  # NumPy has none: the exact identity
            assert start.tobytes() == np.array(identity(opcode, dt)).astype(dt).tobytes()


def test_float_add_identity_and_numpy_start_differ_in_sign():
    """The simplifier may drop only -0.0 (+0.0 + -0.0 is +0.0); np.sum starts at +0.0."""
    assert np.signbit(identity("add", np.float32)) and not np.signbit(initial_value("add", "f4"))
    assert np.signbit(np.add.reduce(np.array([-0.0]), initial=identity("add", "f8")))


def test_groups_agree_with_the_fields():
    assert GroupOp.COMMUTATIVE == GroupOp.ASSOCIATIVE == GroupOp.REDUCERS
    assert GroupOp.REDUCERS == (GroupOp.ARITHMETIC_REDUCERS | GroupOp.SELECTING_REDUCERS
                                | GroupOp.BITWISE_REDUCERS)
    assert GroupOp.PER_ELEMENT | GroupOp.CONTROL | GroupOp.LIBRARY <= set(OPS)
    assert GroupOp.TRANSCENDENTAL <= GroupOp.EXPENSIVE <= set(OPS)
    assert all(OPS[n].calls_computations for n in GroupOp.CONTROL | {"reduce", "fusion"})
    for name in GroupOp.REDUCERS:
        assert OPS[name].ufunc is reducer_ufunc(name) and OPS[name].identity_of is not None
    with pytest.raises(KeyError):
        reducer_ufunc("subtract")  # a ufunc, but not a reducer's
    with pytest.raises(KeyError):
        identity("subtract", np.float32)


def test_operand_types_match_shape_inference():
    from toolkit.ir.shape_inference import SHAPE_RULES, ShapeError
    from toolkit.ir.shapes import Shape
    from toolkit.ir import dtypes as dt

    for name in GroupOp.FLOAT_OPERANDS:
        with pytest.raises(ShapeError, match="floating-point"):
            SHAPE_RULES[name]([Shape(dt.S32, (2,))] * OPS[name].arity, {}, None)
    for name in GroupOp.INTEGER_OPERANDS:
        with pytest.raises(ShapeError, match="integer"):
            SHAPE_RULES[name]([Shape(dt.F32, (2,))] * OPS[name].arity, {}, None)


def test_cumsum_keeps_a_leading_negative_zero():
    """A scan pads with the exact identity: NumPy's cumsum of -0.0s is -0.0s (a +0.0 padded
    in turned the first element into +0.0)."""
    import toolkit as tk

    x = np.array([-0.0, -0.0, 1.0])
    got = np.asarray(tk.jit(np.cumsum)(x))
    assert np.signbit(got).tolist() == np.signbit(np.cumsum(x)).tolist() == [True, True, False]
