"""A jitted call behaves as the plain call does around its Python: writes made before an error
stand when it is raised (as NumPy made them), and what a function changes in the containers it
is given is refused by name (it works on copies, and the caller would not see it). Found by a
differential hunt of calling conventions."""
import numpy as np
import pytest

import toolkit as tk

G = np.zeros(2)


def _writes_then_raises(x):
    x += 1
    raise ValueError("after the write")


def _breaks_writes_then_raises(x):
    x += 1
    n = int(x.sum())  # (a graph break)
    x *= n
    raise KeyError("after two writes")


def _writes_a_global_then_raises(x):
    G[0] = 1.0
    raise ValueError("after the global write")


def _writes_then_mismatches(x, y):
    x += 1
    return x + y  # (shapes (2,) and (3,): NumPy's ValueError after the write)


@pytest.mark.parametrize("fn, args", [
    (_writes_then_raises, (np.zeros(2),)),
    (_breaks_writes_then_raises, (np.ones(2),)),
    (_writes_a_global_then_raises, (np.zeros(2),)),
    (_writes_then_mismatches, (np.zeros(2), np.zeros(3))),
], ids=lambda v: getattr(v, "__name__", ""))
def test_writes_before_an_error_stand_as_numpys(fn, args):
    want_args = [a.copy() for a in args]
    G[:] = 0
    with pytest.raises(Exception) as numpy_error:
        fn(*want_args)
    want_global = G.copy()
    jitted = tk.jit(fn)
    for _ in range(2):  # (the first call, and a later one)
        got_args = [a.copy() for a in args]
        G[:] = 0
        with pytest.raises(Exception) as ours:
            jitted(*got_args)
        assert isinstance(ours.value, numpy_error.type)
        for got, want in zip(got_args, want_args):
            np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(G, want_global)


def test_changing_a_container_argument_is_refused_by_name():
    def adds(d):
        d["y"] = d["x"] + 1

    def appends(items):
        items.append(items[0] * 2)

    with pytest.raises(TypeError, match="changes what its argument 'd' holds"):
        tk.jit(adds)({"x": np.zeros(1)})
    with pytest.raises(TypeError, match="changes what its argument 'items' holds"):
        tk.jit(appends)([np.ones(1)])
    # writes into the arrays a container holds reach the caller, as in NumPy
    d = {"x": np.zeros(2)}

    def in_place(d):
        d["x"] += 1
        d["x"][0] = 5.0
        return d["x"].sum()

    assert tk.jit(in_place)(d) == 6.0
    np.testing.assert_array_equal(d["x"], [5.0, 1.0])


def test_python_bool_arguments_compute_as_python_bools():
    """Python computes on bools as on ints (True + True is 2, -True is -1), and bools with
    bools stay bools (True & True); NumPy arrays meet them as weak (NEP 50)."""
    for fn in (lambda a: -a, lambda a: ~a, lambda a: a + a, lambda a: a * 3, lambda a: a & True,
               lambda a: a / 2, lambda a: abs(a), lambda a: a == True, lambda a: a - True,  # noqa: E712
               lambda a: a ** 2, lambda a: 2 ** a):
        want, got = fn(True), tk.jit(fn)(True)
        assert type(got) is type(want) and got == want
    x = np.arange(3, dtype=np.int8)
    got = tk.jit(lambda x, b: x + b)(x, True)
    assert got.dtype == np.int8 and got.tolist() == [1, 2, 3]


def test_numpy_scalar_arguments_are_numpy_scalars_inside():
    """A NumPy scalar argument is traced as a NumPy scalar, not a 0-d array: its ** is its
    scalar math's, np.isscalar says so, it comes back as one, `s += 1` rebinds, and stored
    into an int8 array out of range it raises as NumPy does (a 0-d array wraps)."""
    def probe(s):
        return s ** 0.5, np.isscalar(s), s

    got, want = tk.jit(probe)(np.float64(-0.0)), probe(np.float64(-0.0))
    assert [type(v) for v in got] == [type(v) for v in want]
    assert np.signbit(got[0]) == np.signbit(want[0]) and got[1] is True

    def store(x, s):
        x[0] = s
        return x

    jitted = tk.jit(store)
    with pytest.raises(OverflowError):
        jitted(np.zeros(2, np.int8), np.int64(1000))
    np.testing.assert_array_equal(jitted(np.zeros(2, np.int8), np.array(1000)),
                                  store(np.zeros(2, np.int8), np.array(1000)))
    assert repr(tk.jit(lambda x, s: s)(0, np.float32(1))) == "np.float32(1.0)"


# ---- results that are arguments, or views of them, in NumPy ----------------------------------
def returned_itself(x):
    return x


def returned_rows(x):
    return x[1:]


def returned_transposed(x):
    return x.T


def returned_after_a_write(x):
    x[0, 0] = 7.0
    return x


def view_taken_before_a_write(x):
    v = x[0]
    x[0, 0] = 5.0
    return v


def squeezed_view(x):
    return np.squeeze(x[None, :, ::-1])


def same_bits(x):
    return x.view(np.int64)


def pieces(x):
    return np.split(x, 2)


def as_array(x):
    return np.asarray(x)


def a_copy_and_a_sum(x):
    return np.array(x), x + 1.0, x[:, 0]


VIEW_RESULTS = [returned_itself, returned_rows, returned_transposed, returned_after_a_write,
                view_taken_before_a_write, squeezed_view, same_bits, pieces, as_array,
                a_copy_and_a_sum]


@pytest.mark.parametrize("fn", VIEW_RESULTS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_results_that_view_an_argument_share_its_memory_as_in_numpy(fn, backend):
    """``return x`` is the caller's array and ``x[1:]``/``x.T``/``np.split`` views of it, as
    in NumPy: writing into the result writes into the argument. (They were new arrays.)"""
    jitted = tk.jit(fn, backend=backend)
    for _ in range(2):  # (traced, then the compiled program)
        x, expected_x = np.arange(4.0).reshape(2, 2), np.arange(4.0).reshape(2, 2)
        got, expected = jitted(x), fn(expected_x)
        got_leaves = got if isinstance(got, (tuple, list)) else [got]
        expected_leaves = expected if isinstance(expected, (tuple, list)) else [expected]
        for g, e in zip(got_leaves, expected_leaves, strict=True):
            np.testing.assert_array_equal(np.asarray(g), e)
            assert (g is x) == (e is expected_x)
            assert isinstance(g, np.ndarray) and np.shares_memory(g, x) \
                if np.shares_memory(e, expected_x) else not np.shares_memory(np.asarray(g), x)
        np.testing.assert_array_equal(x, expected_x)


def test_a_device_backends_results_stay_on_the_device():
    """The GPU backend's results are device arrays (its contract), views of arguments too."""
    from toolkit.backends.gpu.arrays import DeviceArray

    x = np.arange(4.0).reshape(2, 2)
    for fn in (returned_itself, returned_rows, returned_after_a_write, returned_in_segments):
        got = tk.jit(fn, backend="gpu-simulated")(x.copy())
        assert isinstance(got, DeviceArray)
        np.testing.assert_array_equal(np.asarray(got), fn(x.copy()))


def test_writing_into_a_returned_view_writes_the_argument():
    x = np.zeros(5)
    tail = tk.jit(lambda a: a[2:], backend="cpu")(x)
    tail[:] = 1.0
    np.testing.assert_array_equal(x, [0, 0, 1, 1, 1])


def reshape_read_after_a_write(x):
    flat = x.reshape(4)
    x[0, 0] = 9.0
    return flat * 1.0


def write_through_a_reshape(x):
    flat = x.reshape(-1)
    flat[1] = 8.0
    return x.sum()


def returned_reshape(x):
    return x.ravel()


def returned_in_segments(x):
    if x.sum() > 0:  # (a graph break: the call runs in segments)
        return x[1:]
    return x


@pytest.mark.parametrize("fn", [reshape_read_after_a_write, write_through_a_reshape,
                                returned_reshape, returned_in_segments], ids=lambda f: f.__name__)
@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_a_reshape_of_an_argument_is_its_view_as_numpy_makes_it(fn, backend):
    """A reshape of a C-contiguous argument is a view in NumPy: a later write into the argument
    shows through it, and a write through it reaches the argument (the reshape read the old
    values). Of another layout NumPy copies; where a call writes, that is a clear error."""
    jitted = tk.jit(fn, backend=backend)
    for _ in range(2):
        x, expected_x = np.arange(4.0).reshape(2, 2), np.arange(4.0).reshape(2, 2)
        got, expected = jitted(x), fn(expected_x)
        np.testing.assert_array_equal(got, expected)
        np.testing.assert_array_equal(x, expected_x)
        assert np.shares_memory(got, x) == np.shares_memory(expected, expected_x)
    column_major, expected_x = np.asfortranarray(np.arange(4.0).reshape(2, 2)), None
    if fn in (reshape_read_after_a_write, write_through_a_reshape):
        with pytest.raises(ValueError, match=r"argument 'x' is not C-contiguous, and the "
                                             r"function writes into it and uses a reshape of "
                                             r"it \(np.reshape at .*test_call_semantics"):
            jitted(column_major)
        np.testing.assert_array_equal(column_major, np.arange(4.0).reshape(2, 2))  # unwritten
    else:
        expected_x = column_major.copy(order="F")
        got, expected = jitted(column_major), fn(expected_x)
        np.testing.assert_array_equal(got, expected)
        assert np.shares_memory(got, column_major) == np.shares_memory(expected, expected_x)


def window_at_a_computed_start(x):
    i = np.argmax(x[:3])  # (a traced start: its slice's bounds are traced values)
    return x[i:i + 2]


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_a_returned_window_with_traced_bounds_is_its_value(backend):
    """A view whose index holds traced values is not made again from the caller's array (its
    bounds are not known after the call): the result is its value, a new array. (Replaying its
    index crashed with a KeyError.)"""
    x = np.array([0.0, 5.0, 1.0, 2.0, 3.0])
    jitted = tk.jit(window_at_a_computed_start, backend=backend)
    for _ in range(2):
        np.testing.assert_array_equal(jitted(x), window_at_a_computed_start(x))
