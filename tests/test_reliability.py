"""Silent wrong results and crashes a careful user would hit: Python ints that do not fit,
ndarray subclasses, misspelt static arguments, jit inside jit, recursion, profile sessions."""
import threading

import numpy as np
import pytest

import toolkit as tk
from toolkit.frontend.errors import ArgumentTypeError


# ---- weak Python ints at dtype limits --------------------------------------------------------
@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_a_python_int_that_does_not_fit_raises_as_numpy_does(backend):
    f = tk.jit(lambda x, s: x + s, backend=backend)
    x = np.arange(3, dtype=np.int32)
    np.testing.assert_array_equal(f(x, 5), x + 5)  # compiled, then a cache hit below
    with pytest.raises(OverflowError) as numpy_error:
        x + 2 ** 40
    with pytest.raises(OverflowError, match="out of bounds for int32") as ours:
        f(x, 2 ** 40)
    assert str(numpy_error.value) in str(ours.value) and "argument 's'" in str(ours.value)
    for edge in (2 ** 31 - 1, -2 ** 31):
        np.testing.assert_array_equal(f(x, edge), x + edge)
    for over in (2 ** 31, -2 ** 31 - 1):
        with pytest.raises(OverflowError):
            f(x, over)


def test_the_int_check_runs_on_profiled_calls_and_through_scalar_arithmetic():
    f = tk.jit(lambda x, s: x * (s + 1))
    x = np.arange(3, dtype=np.int32)
    f(x, 1)
    with tk.profile(), pytest.raises(OverflowError):
        f(x, 2 ** 33)


def test_python_ints_that_meet_wide_or_float_arrays_are_not_limited():
    f = tk.jit(lambda x, y, s: (x + s, y + s))
    a, b = f(np.arange(3), np.ones(3, np.float32), 2 ** 40)
    np.testing.assert_array_equal(a, np.arange(3) + 2 ** 40)
    assert b.dtype == np.float32


def test_numpy_scalars_are_strong_and_keep_their_own_dtype():
    out = tk.jit(lambda x, s: x + s)(np.arange(3, dtype=np.int32), np.int64(2 ** 40))
    np.testing.assert_array_equal(out, np.arange(3, dtype=np.int32) + np.int64(2 ** 40))


# ---- ndarray subclasses ----------------------------------------------------------------------
def test_masked_arrays_are_refused_not_summed_through_their_mask():
    m = np.ma.masked_array([1.0, 2.0, 1e6], mask=[0, 0, 1])
    with pytest.raises(ArgumentTypeError, match=r"argument 'x' is a numpy.ma.MaskedArray.*filled"):
        tk.jit(lambda x: x.sum())(m)
    with pytest.raises(ArgumentTypeError, match=r"args\['m'\]"):
        tk.jit(lambda args: args["m"] * 2)({"m": m})


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")
def test_matrix_is_refused_not_multiplied_elementwise():
    a = np.matrix([[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(ArgumentTypeError, match=r"numpy.matrix.*np.asarray\(x\).*@"):
        tk.jit(lambda x: x * x)(a)


def test_a_captured_masked_array_is_refused():
    m = np.ma.masked_array([1.0, 2.0, 3.0], mask=[0, 1, 0])
    with pytest.raises(ArgumentTypeError, match="MaskedArray"):
        tk.jit(lambda x: x + m)(np.ones(3))


def test_memmap_is_a_plain_array(tmp_path):
    mm = np.memmap(tmp_path / "a.dat", dtype=np.float64, mode="w+", shape=(4,))
    mm[:] = [1, 2, 3, 4]
    assert tk.jit(lambda x: x.sum())(mm) == 10


# ---- static arguments ------------------------------------------------------------------------
def test_unknown_static_arguments_are_errors():
    def f(x, n):
        return x * n

    with pytest.raises(ValueError, match="static_argnums=\\(2,\\).*2 positional"):
        tk.jit(f, static_argnums=2)
    with pytest.raises(ValueError, match=r"static_argnames \['m'\].*x, n"):
        tk.jit(f, static_argnames="m")
    with pytest.raises(ValueError):
        tk.jit(f, static_argnums=-3)
    assert tk.jit(f, static_argnums=-1)(np.ones(2), 3).tolist() == [3, 3]
    tk.jit(lambda *args: args[0], static_argnums=5)  # *args may take it
    tk.jit(lambda x, **kw: x, static_argnames="anything")  # **kwargs may take it


# ---- jit inside jit --------------------------------------------------------------------------
def test_a_jitted_function_called_inside_another_after_running_alone_inlines():
    inner = tk.jit(lambda x: x * 2)
    outer = tk.jit(lambda x: inner(x) + 1)
    x = np.ones(3)
    # cached: the hit path used to run it on a tracer
    np.testing.assert_array_equal(inner(x), 2 * x)
    np.testing.assert_array_equal(outer(x), 2 * x + 1)
    assert "multiply" in outer.lower(x).as_text()  # inlined, not a call to compiled code


def test_recursion_on_static_shapes_unrolls():
    @tk.jit
    def total(x):
        if x.shape[0] == 1:
            return x[0]
        return total(x[1:]) + x[0]

    assert total(np.arange(5.0)) == 10


def test_endless_self_recursion_is_a_clear_error_not_a_deadlock():
    @tk.jit
    def f(x):
        return f(np.ones(2)) + x

    result = {}

    def call():
        try:
            f(np.ones(2))
        except Exception as e:  # noqa: BLE001
            result["error"] = e

    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), "deadlocked"
    assert isinstance(result["error"], TypeError) and "calls itself" in str(result["error"])


# ---- profile sessions ------------------------------------------------------------------------
def test_closing_one_of_two_equal_sessions_detaches_that_one():
    from toolkit.profiler.recorder import RECORDER

    f = tk.jit(lambda x: x + 1)
    outer, inner = tk.Profile(), tk.Profile()
    assert outer == inner  # two empty sessions compare equal
    with outer:
        with inner:
            pass
        f(np.ones(2))
        assert RECORDER.active
    assert not RECORDER.active
    assert len(outer.compiles) == 1 and not inner.compiles


def test_a_session_cannot_be_opened_twice_at_once():
    session = tk.Profile()
    with session:
        with pytest.raises(RuntimeError, match="already open"):
            session.__enter__()


# ---- small differences from NumPy ------------------------------------------------------------
@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
@pytest.mark.parametrize(
    "lo, hi",
    [(-1.0, 0.0), (-0.0, 0.0), (0.0, -0.0), (1.0, 0.0), (np.nan, 2.0), (0.0, np.nan), (-1, 0)],
)
def test_clip_keeps_numpys_zero_signs_and_nans(backend, lo, hi):
    x = np.array([1.0, np.nan, -0.0, 0.0, 5.0, -5.0, 0.5, -0.5])
    f = tk.jit(lambda x, lo, hi: np.clip(x, lo, hi), backend=backend)
    for bounds in [(lo, hi), (np.full(x.size, lo), np.full(x.size, hi)), (np.full(x.size, lo), hi)]:
        got, want = f(x, *bounds), np.clip(x, *bounds)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
        assert got.dtype == want.dtype


def test_power_follows_ndarray_pow_fast_path():
    b = np.array([True, False])
    i = np.array([3, -2], np.int32)
    f32 = np.array([3.0, -0.5], np.float32)
    square = tk.jit(lambda b: b ** 2)(b)  # NumPy: bool ** 2 is np.square, int8
    assert square.dtype == np.int8 and square.tolist() == [1, 0]
    for x, e in [(i, 2), (f32, 2), (f32, -1), (f32, 0.5), (i, 0.5), (b, 2.0), (i, 1)]:
        got, want = tk.jit(lambda x: x ** e)(x), x ** e
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want)
    for x in (i, b):
        with pytest.raises(ValueError, match="Integers to negative integer powers are not allowed"):
            tk.jit(lambda x: x ** -1)(x)


@pytest.mark.parametrize(
    "spec, sa, sb",
    [
        ("ij,ij->ij", (3, 1), (1, 4)),
        ("ij,jk->ik", (3, 1), (4, 5)),
        ("ij,ij->i", (3, 1), (3, 4)),
        ("bij,bjk->bik", (1, 2, 3), (4, 3, 5)),
        ("i,i->", (1,), (5,)),
    ],
)
def test_einsum_broadcasts_size_one_indices_as_numpy_does(spec, sa, sb, rng):
    a, b = rng.normal(size=sa), rng.normal(size=sb)
    np.testing.assert_allclose(
        tk.jit(lambda a, b: np.einsum(spec, a, b))(a, b), np.einsum(spec, a, b)
    )


def test_einsum_still_rejects_sizes_that_do_not_broadcast():
    with pytest.raises(ValueError, match="sizes 3 and 2"):
        tk.jit(lambda a, b: np.einsum("ij,ij->ij", a, b))(np.ones((3, 2)), np.ones((2, 2)))


def test_a_list_of_python_numbers_warns_that_it_is_a_pytree():
    with pytest.warns(tk.ScalarListWarning, match="argument 'x' is a list of 3 Python numbers"):
        tk.jit(lambda x: x[0])([1, 2, 3])
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tk.jit(lambda x: x[0])((1, 2, 3))  # a tuple: separate scalars on purpose
        tk.jit(lambda x: x[0])([np.ones(2), np.ones(2)])  # a list of arrays: a pytree on purpose


def test_dollar_signs_in_user_strings_do_not_reach_math_text(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from toolkit.plots.timeline import timeline
    from toolkit.widgets.dashboard import Dashboard

    f = tk.jit(lambda d: d["$x^{2$"] * 2, on_recompile="ignore")
    with tk.profile() as prof:
        f({"$x^{2$": np.ones(3)})
        f({"$x^{2$": np.ones(4)})  # a recompile whose cause names the argument
    assert any("$x^{2$" in r.causes[0].message for r in prof.recompiles)
    fig, ax = plt.subplots()
    artists = timeline(prof, ax=ax, min_label_fraction=0.0)
    fig.canvas.draw()  # math text would raise here
    plt.close(fig)
    assert artists["labels"]
    Dashboard(prof).save(str(tmp_path / "report.html"))


@pytest.mark.parametrize("arg", [[1.0, 2.0], [[1.0, 2.0], [3.0, 4.0]]], ids=["flat", "nested"])
def test_a_list_of_python_numbers_that_fails_says_so_and_names_the_argument(arg):
    """A nested list warns too; the error that follows is about the list (pass np.asarray),
    not about if/while on traced values or np.zeros buffers."""
    kind = "nested list" if isinstance(arg[0], list) else "list"
    for body in (lambda x: np.exp(x), lambda x: x * 2.0):
        f = tk.jit(body, fullgraph=True)
        with pytest.warns(tk.ScalarListWarning, match=f"argument 'x' is a {kind} of"):
            with pytest.raises(tk.ScalarListError) as caught:
                f(arg)
        message = str(caught.value)
        assert f"argument 'x' is a {kind} of {np.size(arg)} Python numbers" in message
        assert "Pass np.asarray(x)" in message
        for wrong in ("if/while", "np.zeros", "static_argnums"):
            assert wrong not in message, message
    assert isinstance(caught.value, TypeError)  # as Python's own error on a list is
    # with graph breaks, NumPy takes the list's values, as it would outside the trace
    with pytest.warns(tk.ScalarListWarning):
        got = tk.jit(lambda x: np.exp(x))(arg)
    np.testing.assert_array_equal(got, np.exp(arg))
