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
    np.testing.assert_array_equal(inner(x), 2 * x)  # cached: the hit path used to run it on a tracer
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
