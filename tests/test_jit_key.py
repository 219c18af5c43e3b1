"""jit's cache key is a value (``JitKey``), made in one place; the dispatch fast path finds
plain calls through an index of the cache that evictions keep exact; a miss is recorded by
one call into the history, which alone makes compile events."""
import ast
import dataclasses
import pathlib

import numpy as np
import pytest

import toolkit as tk
from toolkit.api import JitKey

ROOT = pathlib.Path(__file__).resolve().parents[1] / "toolkit"


def test_the_key_is_a_frozen_value_read_by_name():
    f = tk.jit(lambda x, n: x * n, static_argnums=1)
    f(np.ones(3), 2)
    (key,) = f._cache
    assert isinstance(key, JitKey) and dataclasses.is_dataclass(key)
    assert (
        key.statics == ((1, 2),)
        and key.arg_names == ("x",)
        and key.backend == f.options.backend.name
    )
    assert key.avals == (((3,), np.dtype(np.float64), False),)
    with pytest.raises(dataclasses.FrozenInstanceError):
        key.backend = "interpreter"


def test_keys_are_made_in_one_place():
    made = [f"{p.relative_to(ROOT)}:{n.lineno}" for p in ROOT.rglob("*.py")
            for n in ast.walk(ast.parse(p.read_text()))
            if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "JitKey"]
    assert made and all(m.startswith("jitting/key.py") for m in made), made


def test_compile_events_are_made_by_the_history_alone():
    made = [f"{p.relative_to(ROOT)}" for p in ROOT.rglob("*.py")
            for n in ast.walk(ast.parse(p.read_text()))
            if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "CompileEvent"]
    assert set(made) == {"runtime/history.py"}, made


def test_the_fast_path_serves_plain_calls_and_nothing_else():
    f = tk.jit(lambda x, y=1.0: x + y)
    a = np.ones(4)
    f(a), f(a, 2.0), f(a, y=np.float64(3.0))
    assert len(f._cache) == 3
    # f(a), f(a, 2.0) (a Python float: weak) and f(a, y=np.float64(3.0)), which binds as
    # f(a, np.float64(3.0)) (a NumPy scalar: weak None, traced as a NumPy scalar)
    f64 = np.dtype(np.float64)
    assert set(f._plain) == {(((4,), f64, False),), (((4,), f64, False), ((), f64, True)),
                             (((4,), f64, False), ((), f64, None))}
    np.testing.assert_array_equal(f(a, np.float64(3.0)), a + 3.0)
    np.testing.assert_array_equal(f(a, -0.5), a - 0.5)  # (the float's own program, another value)
    assert len(f._cache) == 3


def test_python_numbers_take_the_fast_path_with_their_checks():
    f = tk.jit(lambda x, s, n: x * s + n)
    x = np.arange(4, dtype=np.int32)
    np.testing.assert_array_equal(f(x, 2, 3), x * 2 + 3)
    assert (((4,), np.dtype(np.int32), False), ((), np.dtype(np.int64), True),
            ((), np.dtype(np.int64), True)) in f._plain
    np.testing.assert_array_equal(f(x, 5, -1), x * 5 - 1)  # the same program
    assert len(f._cache) == 1
    with pytest.raises(OverflowError, match="out of bounds for int32"):
        f(x, 2 ** 40, 0)  # an int the int32 array cannot hold: NumPy's error, on the fast path
    g = tk.jit(lambda x, s: x * s)
    np.testing.assert_array_equal(g(np.ones(3, np.float32), 0.25), np.full(3, 0.25, np.float32))
    assert g(np.ones(3, np.float32), 0.5).dtype == np.float32  # weak: the array's dtype


def test_an_evicted_program_leaves_the_fast_path_too():
    f = tk.jit(lambda x: x * 2.0, cache_size=1, on_recompile="ignore")
    a, b = np.ones(3), np.ones(4)
    f(a), f(b)
    assert len(f._plain) == 1
    f(a)  # evicted: compiles again, its recompile says why
    assert len(f.compiles) == 3
    assert f.recompiles[-1].causes[0].code == "EVICTED"


def test_a_wrapped_functions_attributes_do_not_hide_jits_methods():
    def g(x):
        return x + 1.0
    g._compiled = None
    g.lower = "not a method"
    f = tk.jit(g)
    np.testing.assert_array_equal(f(np.zeros(2)), np.ones(2))
    assert f.lower(np.zeros(2)).as_text().startswith("HloModule")


# ---- the C fast path (jitting/_plain_call.c) --------------------------------------------------
plain_index = pytest.importorskip("toolkit.jitting.plain_index")
needs_c = pytest.mark.skipif(plain_index.plain_call is None,
                             reason="the C dispatch path was not built (no C compiler)")
_MISS = object()


def _served(args, avals, weak_ints=True):
    """What the C path does with ``args`` given a table of one program, signed ``avals``."""
    seen = []
    table = {plain_index.signature_key(avals): lambda leaves: seen.append(leaves) or "ran"}
    result = plain_index.plain_call(table, tuple(args), weak_ints, _MISS)
    return (seen[0] if seen else None) if result == "ran" else result


@needs_c
@pytest.mark.parametrize("dtype", ["bool", "int8", "uint16", "int32", "int64", "uint64",
                                   "float16", "float32", "float64", "complex64", "complex128"])
def test_the_c_path_signs_calls_as_the_key_does(dtype):
    dt = np.dtype(dtype)
    for shape in [(), (0,), (3,), (2, 0, 5), (1, 2, 3, 4)]:
        x = np.zeros(shape, dt)
        avals = ((shape, dt, False), ((), np.dtype(np.float64), True),
                 ((), np.dtype(np.int64), True))
        leaves = _served([x, 0.5, 7], avals)  # (the arguments as they came, as a list)
        assert type(leaves) is list and leaves[0] is x and leaves[1:] == [0.5, 7]
        # a NumPy scalar signs as one (weak None), a 0-d array as an array; another shape or
        # dtype is another program
        one = dt.type(1)
        assert _served([one], (((), dt, None),))[0] is one
        assert _served([one], (((), dt, False),)) is _MISS
        assert _served([np.asarray(one)], (((), dt, False),)) is not _MISS
        assert _served([np.asarray(one)], (((), dt, None),)) is _MISS
        assert _served([np.zeros(shape + (1,), dt)], ((shape, dt, False),)) is _MISS
        other = np.dtype(np.int16 if dt != np.int16 else np.int8)
        assert _served([np.zeros(shape, other)], ((shape, dt, False),)) is _MISS


@needs_c
def test_the_c_path_leaves_everything_else_to_the_full_path():
    f64 = np.dtype(np.float64)
    one = (((3,), f64, False),)
    assert _served([np.zeros(3, ">f8")], one) is _MISS  # another byte order
    assert _served([np.zeros(3).view(np.recarray)], one) is _MISS  # a subclass
    assert _served([[0.0, 0.0, 0.0]], one) is _MISS  # a list
    weak_int = (((), np.dtype(np.int64), True),)
    assert _served([True], weak_int) is _MISS  # a bool is no weak int
    assert _served([2 ** 63], weak_int) is _MISS  # beyond int64: the full path's error
    assert _served([3], weak_int, weak_ints=False) is _MISS  # ints made static by a break
    assert _served([np.datetime64(1, "s")], one) is _MISS
    structured = np.zeros(3, [("a", "f8")])
    assert _served([structured], one) is _MISS


def test_calls_the_c_path_does_not_serve_still_compute_numpys_values():
    f = tk.jit(lambda x, n: x * n)
    with pytest.raises(TypeError, match="dtype >f8, which toolkit does not support"):
        f(np.arange(4.0).astype(">f8"), 2)  # (the full path's clear error, not a misread)
    np.testing.assert_array_equal(f(np.arange(4.0), True), np.arange(4.0))
    sliced = np.arange(8.0)[::2]  # (the program's own path for a non-contiguous argument)
    np.testing.assert_array_equal(f(sliced, 3), sliced * 3)
    np.testing.assert_array_equal(f(sliced, 3), sliced * 3)


@needs_c
def test_the_c_path_runs_every_program_the_index_holds_and_only_those():
    f = tk.jit(lambda x, y: (x + y, x * y), cache_size=2, on_recompile="ignore")
    a, b, c = np.ones(3), np.ones(4), np.ones(5)
    for x in (a, b, c):
        f(x, x)
    assert len(f._plain.by_signature) == len(f._plain.by_avals) == 2  # (a's was evicted)
    r = f(np.full(5, 2.0), np.full(5, 3.0))
    assert type(r) is tuple and [v.tolist() for v in r] == [[5.0] * 5, [6.0] * 5]
    f.clear_cache()
    assert not f._plain.by_signature


def test_static_values_are_keyed_with_their_types():
    """True is not 1 and (2,) is not (2.0,) to Python code (x[True] is not x[1]); == took them
    for one key, and later calls ran the first one's program. NaN statics hit their program."""
    g = tk.jit(lambda x, t: (x, t), static_argnums=1, on_recompile="ignore")
    x = np.ones(2)
    for t in [(2,), (2.0,), (1,), (True,), -0.0, 0.0, 1, True]:
        got = g(x, t)[1]
        assert got == t and type(got) is type(t) and repr(got) == repr(t)
    g(x, float("nan"))
    before = g.cache_size
    g(x, float("nan"))
    assert g.cache_size == before


def test_python_containers_behave_as_python_ones():
    """A list times a Python int repeats it (it multiplied elementwise); dicts keep their own
    order in and out (they came sorted); Python numbers divide as Python's do."""
    assert len(tk.jit(lambda x, n: [x] * n)(np.zeros(2), 3)) == 3
    assert tk.jit(lambda n: (1, 2) * n)(3) == (1, 2, 1, 2, 1, 2)
    with pytest.raises(TypeError, match="can't multiply sequence by non-int of type 'float'"):
        tk.jit(lambda x, s: [x] * s)(np.zeros(1), 2.0)
    p = {"w": np.ones(2), "b": np.zeros(2)}
    np.testing.assert_array_equal(tk.jit(lambda p: np.stack(list(p.values())))(p),
                                  np.stack(list(p.values())))
    assert list(tk.jit(lambda x: {"b": x, "a": x})(np.ones(1))) == ["b", "a"]
    for fn, args in [(lambda a, b: a // b, (7, 0)), (lambda a, b: a / b, (1.0, 0.0)),
                     (lambda a, b: a % b, (7, 0)), (lambda a, b: divmod(a, b), (7, 0))]:
        with pytest.raises(ZeroDivisionError):
            tk.jit(fn)(*args)
    with pytest.raises(ValueError, match="negative shift count"):
        tk.jit(lambda a, b: a << b)(7, -1)
    assert tk.jit(lambda a, b: a // b)(7, 2) == 3


def test_a_list_of_arrays_is_keyed_as_its_walked_tree_is():
    """A list or tuple of plain arrays takes a short path (no pytree walk, one tree object per
    length, 0.35 µs a leaf where the walk took 1.4): its key is the very key the walk makes,
    and anything else in the list (a number, a nested tuple, an unsupported dtype) takes the
    walk, with its error naming the leaf."""
    from toolkit.frontend.pytree import LEAF, TreeDef, flat_tree, flatten

    xs = [np.ones(3), np.zeros(2, np.float32)]
    f = tk.jit(lambda xs: xs[0].sum() + xs[1].sum())
    f(xs)
    f(tuple(xs))  # a tuple is another tree
    f([np.ones(3), np.zeros(2, np.float32), 1.0][:2])
    lst, tup = f._cache
    walked = flatten(xs, "xs")[1]
    assert lst.trees == (walked,) and hash(lst.trees[0]) == hash(walked)
    assert tup.trees[0] == TreeDef("tuple", (LEAF, LEAF)) != walked
    assert flat_tree("list", 2) is lst.trees[0]
    assert lst.avals == (((3,), np.dtype(np.float64), False), ((2,), np.dtype(np.float32), False))
    assert f([np.ones(3), 2.0]) == 5.0  # a Python number: the walk (weak float)
    assert f([np.ones(3), (np.ones(2),)][:1] + [np.ones(2)]) == 5.0
    with pytest.raises(TypeError, match=r"argument 'xs\[1\]' has dtype <U1"):
        f([np.ones(3), np.array(["a"])])


def test_a_trees_hash_is_computed_once():
    from toolkit.frontend.pytree import TreeDef, flatten

    tree = flatten({"w": [np.ones(2)] * 3, "b": (np.ones(1), None)}, "p")[1]
    assert tree._hash is None
    h = hash(tree)
    assert tree._hash == h == hash(flatten({"w": [1, 2, 3], "b": (4, None)}, "p")[1])
    assert TreeDef("list", ()) == TreeDef("list", ()) and hash(TreeDef("none")) == hash(
        TreeDef("none"))
