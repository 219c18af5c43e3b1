"""Recompilation causes: each code with its argument path, old and new values, and call site."""
import inspect
import threading
import warnings

import numpy as np
import pytest

import toolkit as tk
from toolkit.backends.base import Backend, register_backend
from toolkit.backends.reference import InterpreterExecutable

f32 = np.float32


def line_of(marker: str) -> int:
    source, start = inspect.getsourcelines(inspect.currentframe().f_back.f_code)
    for i, line in enumerate(source):
        if marker in line:
            return start + i
    raise AssertionError(marker)


def only_recompile(fn):
    assert len(fn.recompiles) == 1, fn.recompiles
    return fn.recompiles[0]


def causes(event):
    return [(c.code, c.path, c.old, c.new) for c in event.causes]


def test_shape_names_the_dimension_and_call_site():
    @tk.jit
    def f(x):
        return x * 2

    f(np.ones((8, 128), f32))
    f(np.ones((16, 128), f32))  # CALL-SITE
    e = only_recompile(f)
    assert causes(e) == [("SHAPE", "x.shape[0]", "8", "16")]
    assert e.causes[0].message == "x.shape[0]: now 16, was 8"
    assert e.call_site == f"{__file__}:{line_of('# CALL-SITE')}"
    assert e.location == f"{__file__}:{line_of('def test_shape_names') + 1}"
    assert e.number == 2 and e.duration > 0
    assert e.new_signature == "x: f32[16,128]" and e.closest_signature == "x: f32[8,128]"


def test_rank_dtype_and_weak_type():
    f = tk.jit(lambda x, s: x * s)
    f(np.ones(3, f32), 2.0)
    f(np.ones((3, 1), f32), 2.0)
    f(np.ones(3, np.float64), 2.0)
    f(np.ones(3, f32), np.float32(2.0))
    got = [causes(e) for e in f.recompiles]
    assert got[0] == [("RANK", "x", "f32[3]", "f32[3,1]")]
    assert got[1] == [("DTYPE", "x", "float32", "float64")]
    assert got[2] == [
        ("DTYPE", "s", "float64", "float32"),
        (
            "WEAK_TYPE",
            "s",
            "a Python scalar (weakly typed)",
            "a NumPy scalar (strongly typed)",
        ),
    ]
    f(np.ones(3, f32), np.array(2.0, f32))  # (a 0-d array is no NumPy scalar: traced apart)
    assert [causes(e) for e in f.recompiles][3] == [
        ("WEAK_TYPE", "s", "a NumPy scalar (strongly typed)", "a NumPy array (strongly typed)")]


def test_nested_pytree_paths():
    @tk.jit
    def f(params, batch):
        return batch[0] @ params["w1"] + params["b1"], batch[1]

    params = {"w1": np.ones((4, 8), f32), "b1": np.zeros(8, f32)}
    f(params, (np.ones((2, 4), f32), np.ones(3, f32)))
    f(
        {"w1": np.ones((4, 16), f32), "b1": np.zeros(16, f32)},
        (np.ones((2, 4), f32), np.ones(3, np.int32)),
    )
    assert causes(only_recompile(f)) == [
        ("SHAPE", "params['w1'].shape[1]", "8", "16"),  # (in the dict's own order)
        ("SHAPE", "params['b1'].shape[0]", "8", "16"),
        ("DTYPE", "batch[1]", "float32", "int32"),
    ]


def test_tree_structure_and_arguments():
    f = tk.jit(lambda p, scale=None: p["a"] * (1 if scale is None else scale))
    f({"a": np.ones(2)})
    f({"a": np.ones(2), "b": np.ones(2)})
    f({"a": np.ones(2)}, scale=np.ones(2))
    tree, args = f.recompiles
    assert causes(tree) == [("TREE_STRUCTURE", "p", "{'a': *}", "{'a': *, 'b': *}")]
    assert causes(args)[0] == ("ARGUMENTS", "", "p", "p, scale")


def test_static_value_old_and_new_repr():
    f = tk.jit(lambda x, mode: x * 2 if mode == "double" else x, static_argnames="mode")
    f(np.ones(2), mode="double")
    f(np.ones(2), mode="identity")
    e = only_recompile(f)
    assert causes(e) == [("STATIC_VALUE", "mode", "'double'", "'identity'")]
    assert e.causes[0].message == "static argument 'mode': now 'identity', was 'double'"


def test_backend_change():
    register_backend(
        Backend("interpreter-copy", "a second interpreter, for tests", -1, InterpreterExecutable)
    )

    def body(x):
        return x + 1

    tk.jit(body)(np.ones(2))
    g = tk.jit(body, backend="interpreter-copy")
    g(np.ones(2))
    e = g.recompiles[-1]
    assert ("BACKEND", "", "interpreter", "interpreter-copy") in causes(e)
    assert (
        "NEW_FUNCTION_OBJECT",
        "",
        "earlier function object",
        "new function object",
    ) not in causes(e)


def test_function_redefined_in_a_loop_with_changing_closure():
    fns = []
    for i in range(3):
        f = tk.jit(lambda x: x * i)  # LOOP
        f(np.ones(2))
        fns.append(f)
    e = fns[-1].recompiles[-1]
    assert causes(e) == [
        ("NEW_FUNCTION_OBJECT", "", "earlier function object", "new function object"),
        ("CLOSURE_VALUE", "i", "1", "2"),
    ]
    assert "re-created on every call" in e.causes[0].message
    assert any("define the jitted function once" in s for s in e.suggestions)
    assert any("pass 'i' as an argument" in s for s in e.suggestions)


def test_jit_applied_again_to_the_same_function():
    def step(x):
        return x + 1

    for _ in range(2):
        tk.jit(step)(np.ones(2))  # the anti-pattern: a new wrapper, an empty cache, each time
    e = tk.jit(step).recompiles[-1]
    assert causes(e) == [("NEW_JIT_WRAPPER", "", "earlier tk.jit wrapper", "new tk.jit wrapper")]
    assert e.avoidable
    assert any("call tk.jit(f) once" in s for s in e.suggestions)


SCALE = 2.0


def test_global_captured_at_trace_time():
    global SCALE
    made = []
    for value in (2.0, 3.0):
        SCALE = value
        f = tk.jit(lambda x: x * SCALE)
        f(np.ones(2))
        made.append(f)
    e = made[-1].recompiles[-1]
    assert ("GLOBAL_VALUE", "SCALE", "2.0", "3.0") in causes(e)


def test_closest_signature_among_several():
    f = tk.jit(lambda x: x.sum())
    for shape in [(8, 4), (16, 4), (8, 5), (2, 2)]:
        f(np.ones(shape, f32))
    f(np.ones((16, 5), f32))
    e = f.recompiles[-1]
    assert len(e.causes) == 1
    assert {e.closest_signature, *e.other_closest} == {"x: f32[16,4]", "x: f32[8,5]"}


def test_identical_program_is_flagged_avoidable():
    f = tk.jit(lambda x, unused: x + 1, static_argnums=1)
    f(np.ones(3), "a")
    f(np.ones(3), "b")
    e = only_recompile(f)
    assert e.avoidable
    assert "identical to compile #1" in e.avoidable_reason and "static" in e.avoidable_reason
    g = tk.jit(lambda x: x + 1)
    g(np.ones(3))
    g(np.ones(4))
    assert not only_recompile(g).avoidable


def test_storm_warns_once_with_bucket_suggestion():
    f = tk.jit(lambda x: x * 2, max_recompiles=3)
    sizes = [8, 9, 10, 12, 17, 30]
    with pytest.warns(tk.RecompileWarning) as record:
        for n in sizes:
            f(np.ones(n, f32))  # STORM
    assert len(record) == 1
    message = str(record[0].message)
    assert "recompiled 4 times" in message and "x.shape[0]" in message
    assert "padding it to powers of two (8, 16, 32) would compile 3 times instead of 5" in message
    assert record[0].filename == __file__ and record[0].lineno == line_of("# STORM")
    e = f.recompiles[-1]
    assert (
        "padding it to powers of two (8, 16, 32) would compile 3 times instead of 6 (saves 3)"
        in e.suggestions[0]
    )


def test_on_recompile_error_and_ignore():
    strict = tk.jit(lambda x: x + 1, on_recompile="error", max_recompiles=0)
    strict(np.ones(2))
    strict(np.ones(2))
    with pytest.raises(tk.RecompileError, match=r"x.shape\[0\]: now 3, was 2"):
        strict(np.ones(3))
    assert strict.cache_size == 1
    quiet = tk.jit(lambda x: x + 1, on_recompile="ignore", max_recompiles=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for n in range(1, 5):
            quiet(np.ones(n))
    with pytest.raises(ValueError, match="on_recompile"):
        tk.jit(lambda x: x, on_recompile="sometimes")


def test_explain_recompiles_report_ranks_causes():
    @tk.jit
    def model(x, n):
        return x * n

    for shape in [(4,), (5,), (6,)]:
        model(np.ones(shape), 1)
    model(np.ones(6, np.int32), 1)
    report = tk.explain_recompiles(model)
    text = report.text()
    assert "4 compiles of 1 function(s)" in text and "3 recompiles" in text
    # by compile time spent, which varies run to run: check the order's rule
    ranked = report.causes()
    by_code = {c.code: c for c in ranked}
    assert by_code["SHAPE"].count == 2 and by_code["DTYPE"].count == 1
    assert [c.seconds for c in ranked] == sorted((c.seconds for c in ranked), reverse=True)
    assert "RECOMPILE #2 of model" in text and "x.shape[0]: now 5, was 4" in text
    assert "<table>" in report._repr_html_()
    assert "recompilations" in tk.explain_recompiles().text()


def test_report_html_escapes_user_strings():
    def evil(x):
        return x + 1

    evil.__name__ = "<script>alert(1)</script>"
    f = tk.jit(evil)
    f(np.ones(1))
    f(np.ones(2))
    html = tk.explain_recompiles(f)._repr_html_()
    assert "<script>" not in html and "&lt;script&gt;" in html


def test_recompiles_are_thread_safe():
    f = tk.jit(lambda x: x + 1, on_recompile="ignore")
    errors = []

    def worker(n):
        try:
            for _ in range(20):
                assert f(np.ones(n)).shape == (n,)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(1, 9)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert f.cache_size == 8 and len(f.compiles) == 8 and len(f.recompiles) == 7


def test_a_smaller_last_batch_gets_padding_advice():
    f = tk.jit(lambda x: x.sum())
    f(np.ones((128, 3)))
    f(np.ones((40, 3)))
    (suggestion,) = f.recompiles[-1].suggestions
    assert (
        "x.shape[0] is smaller than before (40 < 128)" in suggestion
        and "Pad it to 128 rows" in suggestion
    )


def test_a_closure_re_created_per_call_as_a_loop_body_is_named():
    run = tk.jit(
        lambda body, x: tk.lax.fori_loop(0, 3, body, x), static_argnums=0, on_recompile="ignore"
    )
    x = np.ones(3)
    for _ in range(3):
        run(lambda i, v: v * 2, x)  # BODY
    cause = run.recompiles[-1].causes[0]
    assert cause.code == "STATIC_VALUE" and "re-created from the same code" in cause.message
    assert (
        f"test_recompile.py:{line_of('# BODY')}" in cause.message and "optax#1171" in cause.message
    )
    assert "define 'body' once" in run.recompiles[-1].suggestions[0]
    other = tk.jit(lambda f, x: f(x), static_argnums=0, on_recompile="ignore")
    other(np.sin, x)
    other(np.cos, x)
    # different functions: plain change
    assert "re-created" not in other.recompiles[-1].causes[0].message
