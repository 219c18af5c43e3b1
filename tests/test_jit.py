"""jit: caching by abstract signature, static arguments, pytrees, nesting, stages, errors."""
import collections
import traceback

import numpy as np
import pytest

import toolkit as tk
from toolkit.backends import BackendUnavailableError
from toolkit.frontend.errors import (ArgumentTypeError, LeakedTracerError, ShapeMismatchError,
                                     TracerConversionError, UnsupportedNumpyError)


def traces(jf) -> int:
    """How many times ``jf`` traced and compiled its function. (A counter the function itself
    bumps is Python state: toolkit runs such a function's Python on every call, as NumPy does,
    so it would count calls, not traces.)"""
    return len(jf.compiles)


def test_cache_hit_does_not_retrace():
    jf = tk.jit(lambda x: x * 2)
    x = np.ones((3, 4), np.float32)
    jf(x)
    jf(x + 1)
    assert traces(jf) == 1 and jf.cache_size == 1


@pytest.mark.parametrize("second", [
    np.ones((3, 5), np.float32),  # shape
    np.ones((3, 4), np.float64),  # dtype
])
def test_new_signature_recompiles(second):
    jf = tk.jit(lambda x: x * 2)
    before = traces(jf)  # (compiles are remembered by the function's line: both cases share it)
    jf(np.ones((3, 4), np.float32))
    jf(second)
    assert traces(jf) - before == 2


def test_weak_type_is_part_of_the_key():
    jf = tk.jit(lambda x, s: x * s)
    x = np.ones(3, np.float32)
    assert jf(x, 2.0).dtype == np.float32  # Python float: weak
    assert jf(x, np.float64(2.0)).dtype == np.float64  # NumPy float64: strong
    assert traces(jf) == 2
    jf(x, 3.0)
    assert traces(jf) == 2  # same weak signature, new value: no retrace


def test_static_argnums_and_argnames():
    jf = tk.jit(lambda x, n, scale=1.0: x * n * scale, static_argnums=1,
                static_argnames="scale")
    x = np.ones(2, np.float32)
    assert jf(x, 3)[0] == 3
    assert jf(x, 3)[0] == 3
    assert traces(jf) == 1
    assert jf(x, 4)[0] == 4
    assert jf(x, n=4, scale=0.5)[0] == 2  # n by keyword is still static
    assert traces(jf) == 3
    text = jf.lower(x, 5).as_text()
    assert "parameter(1)" not in text  # static values are baked in


def test_static_python_control_flow():
    def f(x, mode):
        if mode == "double":
            return x * 2
        return x

    jf = tk.jit(f, static_argnames="mode")
    np.testing.assert_array_equal(jf(np.ones(2), mode="double"), [2, 2])
    np.testing.assert_array_equal(jf(np.ones(2), mode="id"), [1, 1])


def test_unhashable_static_argument_is_named():
    jf = tk.jit(lambda x, shape: x.reshape(shape), static_argnums=1)
    with pytest.raises(ArgumentTypeError, match="static argument 'shape' has unhashable type list"):
        jf(np.ones(4), [2, 2])
    assert jf(np.ones(4), (2, 2)).shape == (2, 2)


def test_pytrees_in_and_out():
    Pair = collections.namedtuple("Pair", "a b")

    @tk.jit
    def f(params, batch):
        h = batch[0] @ params["w"] + params["b"]
        return {"out": h, "stats": Pair(h.sum(), None), "list": [batch[1] * 2]}

    params = {"w": np.ones((3, 2), np.float32), "b": np.zeros(2, np.float32)}
    out = f(params, (np.ones((4, 3), np.float32), np.arange(3)))
    assert set(out) == {"out", "stats", "list"}
    assert isinstance(out["stats"], Pair) and out["stats"].b is None
    np.testing.assert_array_equal(out["out"], np.full((4, 2), 3.0, np.float32))
    assert out["stats"].a == 24.0
    np.testing.assert_array_equal(out["list"][0], [0, 2, 4])
    text = f.lower(params, (np.ones((4, 3), np.float32), np.arange(3))).as_text()
    assert 'metadata={op_name="params[\'w\']"}' in text
    assert "%batch_0" in text


def test_nested_jit_inlines():
    inner = tk.jit(lambda x: np.sin(x) * 2)

    @tk.jit
    def outer(x):
        return inner(x) + inner(x * 3)

    x = np.linspace(0, 1, 5).astype(np.float32)
    np.testing.assert_allclose(outer(x), np.sin(x) * 2 + np.sin(x * 3) * 2, rtol=1e-6)
    assert inner.cache_size == 0  # never compiled on its own
    assert outer.lower(x).as_text().count("sine(") == 2


def test_methods_need_self_static():
    class Model:
        def __init__(self, scale):
            self.scale = scale

        @tk.jit
        def apply(self, x):
            return x * 2

        def __hash__(self):
            return hash(self.scale)

    with pytest.raises(ArgumentTypeError, match="argument 'self' has type Model"):
        Model(3).apply(np.ones(2))
    static = tk.jit(lambda self, x: x * self.scale, static_argnums=0)
    assert static(Model(3), np.ones(2))[0] == 3


def test_outputs_can_be_constants_and_inputs():
    f = tk.jit(lambda x: (x, 3.0, np.arange(3), None))
    x, three, r, none = f(np.ones(2, np.float32))
    assert type(three) is float and three == 3.0  # (a Python number, as NumPy returns it)
    assert list(r) == [0, 1, 2] and none is None


@pytest.mark.parametrize("backend", ["cpu", "interpreter"])
def test_python_numbers_returned_come_back_as_python_numbers(backend):
    """As NumPy: a Python number the function returns is that number, not a 0-d array, on a
    compiled call, a profiled one and a call in segments (a graph break); a reduction is
    NumPy's scalar (tests/test_numpy_scalars.py)."""
    def counts(x, flag):
        n = 0
        for _ in range(x.shape[0]):
            n += 2
        return n, x.shape[0] * 1.5, n > 3, complex(n, 1), x.sum(), flag

    def breaking(x, flag):
        return (*counts(x, flag)[:4], bool(x.sum() > 0))

    x = np.arange(3.0)
    for fn in (counts, breaking):
        f = tk.jit(fn, backend=backend)
        want = fn(x, 1)
        for _ in range(3):  # (the first call traces, then the cache, then a replay)
            got = f(x, 1)
            assert [type(v) for v in got[:4]] == [int, float, bool, complex], got
            assert got[:4] == want[:4]
        with tk.profile():
            assert f(x, 1)[:4] == want[:4] and type(f(x, 1)[0]) is int
    total, flag = tk.jit(counts, backend=backend)(x, 1)[4:]
    assert type(total) is np.float64 and total == 3.0  # (NumPy's scalar, as NumPy returns)


def test_results_are_fresh_writable_arrays_unless_numpy_returns_the_argument():
    x = np.ones(3, np.float32)
    y = tk.jit(lambda a: a * 1)(x)
    y[0] = 5
    assert x[0] == 1
    assert tk.jit(lambda a: a)(x) is x  # (NumPy's identity: the caller's own array)


def test_stages():
    x = np.random.default_rng(0).standard_normal((8, 128)).astype(np.float32)
    f = tk.jit(lambda x: np.exp(x) / np.exp(x).sum(-1, keepdims=True))
    lowered = f.lower(x)
    assert lowered.as_text().startswith(
        "HloModule jit_lambda, entry_computation_layout={(f32[8,128]{1,0})->f32[8,128]{1,0}}"
    )
    compiled = lowered.compile()
    assert compiled.as_text("hlo") == lowered.as_text()
    assert compiled.as_text() == compiled.as_text("optimized_hlo")
    assert lowered.cost_analysis()["transcendentals"] == 2 * 8 * 128  # as traced: exp twice
    assert compiled.cost_analysis()["transcendentals"] == 8 * 128  # after CSE: once
    np.testing.assert_allclose(compiled(x), f(x))
    with pytest.raises(ArgumentTypeError, match="must be f32\\[8,128\\]"):
        compiled(np.ones((2, 2), np.float32))
    with pytest.raises(ValueError, match="unknown stage"):
        compiled.as_text("cubin")


def test_metadata_names_the_users_source_line():
    def f(x):
        y = x * 2  # line A
        return np.exp(y)  # line B

    import inspect

    first = inspect.getsourcelines(f)[1]
    text = tk.jit(f).lower(np.ones(3)).as_text()
    assert f'op_name="jit(f)/multiply" source_file="{__file__}" source_line={first + 1}' in text
    assert f'op_name="jit(f)/exp" source_file="{__file__}" source_line={first + 2}' in text


# ---- errors a user can act on --------------------------------------------------------------
def _internal_frames(exc: BaseException) -> list[str]:
    """toolkit's own frames (by toolkit's rule, so the name of the clone's folder does not
    matter)."""
    from toolkit.frontend.errors import is_internal_file

    return [
        f.filename for f in traceback.extract_tb(exc.__traceback__) if is_internal_file(f.filename)
    ]


def test_python_if_on_traced_value_explains_and_points_at_the_line():
    def f(x):
        if x.sum() > 0:
            return x
        return -x

    with pytest.raises(TracerConversionError) as info:
        tk.jit(f, fullgraph=True)(np.ones(3, np.float32))
    msg = str(info.value)
    assert "bool() was called on a traced value" in msg
    assert "pred[] (the result of 'greater'" in msg and "computed from 'x'" in msg
    assert "tnp.where" in msg and "static_argnums" in msg and "tk.lax.cond" in msg
    assert f"{__file__}:" in msg
    assert len(_internal_frames(info.value)) <= 1  # only the API boundary that re-raises


def test_int_and_float_of_traced_argument_name_the_argument():
    with pytest.raises(TracerConversionError, match="argument 'n'"):
        tk.jit(lambda x, n: x * int(n), fullgraph=True)(np.ones(2), 3)
    with pytest.raises(TracerConversionError, match="float\\(\\)"):
        tk.jit(lambda x: float(x[0]), fullgraph=True)(np.ones(2))


def test_unsupported_numpy_function_is_named():
    """Where the graph may not break (fullgraph=True); elsewhere NumPy runs it at a break
    (tests/test_run_by_numpy.py)."""
    with pytest.raises(UnsupportedNumpyError, match=r"np.abs \(vectorized\) is not supported"):
        tk.jit(lambda x: np.frompyfunc(abs, 1, 1)(x), fullgraph=True)(np.ones(3))
    with pytest.raises(
        UnsupportedNumpyError, match=r"np.linalg.eig is not supported.*supported_functions\(\)"
    ):
        tk.jit(lambda x: np.linalg.eig(x), fullgraph=True)(np.ones((3, 3)))


def test_shape_mismatch_names_both_shapes_and_the_line():
    def f(x, y):
        return x + y

    with pytest.raises(ShapeMismatchError) as info:
        tk.jit(f)(np.ones((8, 128), np.float32), np.ones(64, np.float32))
    msg = str(info.value)
    assert "f32[8,128] (argument 'x')" in msg and "f32[64] (argument 'y')" in msg
    assert f"{__file__}:" in msg
    with pytest.raises(ShapeMismatchError, match="contracting dimensions differ"):
        tk.jit(lambda a, b: a @ b)(np.ones((2, 3)), np.ones((4, 2)))
    with pytest.raises(ShapeMismatchError, match="cannot reshape"):
        tk.jit(lambda a: a.reshape(5, -1))(np.ones(12))


def test_unsupported_argument_types_are_named():
    with pytest.raises(ArgumentTypeError, match="argument 'opts\\['name'\\]' has type str"):
        tk.jit(lambda x, opts: x)(np.ones(1), {"name": "relu"})
    with pytest.raises(ArgumentTypeError, match="argument 'x' has dtype datetime64"):
        tk.jit(lambda x: x)(np.zeros(2, "datetime64[s]"))
    with pytest.raises(ArgumentTypeError, match="does not fit in int64"):
        tk.jit(lambda x: x)(2**70)


def test_leaked_tracer_is_reported():
    # (with graph breaks allowed the list would get the value itself, as in NumPy:
    # python_effects; as one program, the append runs when traced and keeps a traced value)
    leaked = []
    with pytest.warns(UserWarning, match="runs once, when traced"):
        tk.jit(lambda x: leaked.append(x) or x, fullgraph=True)(np.ones(2))
    with pytest.raises(LeakedTracerError, match="after that trace ended"):
        tk.jit(lambda y: y + leaked[0])(np.ones(2))


def test_data_dependent_indexing_is_explained():
    with pytest.raises(UnsupportedNumpyError, match=r"traced boolean mask.*np.where\(mask, x, 0\)"):
        tk.jit(lambda x: x[x > 0], fullgraph=True)(np.ones(3))
    with pytest.raises(UnsupportedNumpyError, match="traced bounds"):
        tk.jit(lambda x, n: x[:n], fullgraph=True)(np.ones(3), np.int64(2))


def test_dtype_errors_follow_numpy():
    with pytest.raises(TypeError, match="boolean subtract"):
        tk.jit(lambda x: x - x)(np.ones(3, bool))
    with pytest.raises(TypeError, match="float128|longdouble"):
        tk.jit(lambda x: x)(np.ones(3, np.longdouble))
    half = tk.jit(lambda x: np.exp(x))(np.ones(3, bool))  # NumPy computes exp of bool in float16
    assert half.dtype == np.float16


def test_unknown_backend():
    with pytest.raises(BackendUnavailableError, match="unknown backend 'tpu'"):
        tk.jit(lambda x: x, backend="tpu")
    assert "interpreter" in tk.backend_names()


def test_internal_errors_keep_every_frame(monkeypatch):
    from toolkit.passes import pipeline

    monkeypatch.setattr(pipeline, "fuse", None)  # calling it raises TypeError inside toolkit: a bug
    with pytest.raises(TypeError) as info:
        tk.jit(lambda x: x + 1)(np.ones(2))
    assert any(f.endswith("pipeline.py") for f in _internal_frames(info.value))


def test_user_code_errors_point_at_user_code():
    def f(x):
        raise ValueError("my own bug")

    with pytest.raises(ValueError, match="my own bug") as info:
        tk.jit(f)(np.ones(2))
    assert len(_internal_frames(info.value)) <= 1


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_arithmetic_of_python_numbers_returns_python_numbers_as_numpy_does(backend):
    def f(x, n, s):
        return x * n, n * 2, n > 2, s * 0.5, -n, abs(n), n // 2, x.sum() * n, np.add(n, 1)

    got = tk.jit(f, backend=backend)(np.ones(2), 3, 1.5)
    want = f(np.ones(2), 3, 1.5)
    assert [type(v) for v in got] == [type(v) for v in want]  # (int, bool, float; np.float64
    for g, w in zip(got, want):  # for the sum, np.int64 for the ufunc: NumPy scalars)
        np.testing.assert_array_equal(g, w)
