"""A NumPy function toolkit does not compile (or an option of one it does) runs in NumPy at a
graph break, as torch.compile runs an operation it cannot compile eagerly: the jitted function
gives NumPy's results, writes what NumPy writes, and the break report names the function.
Where the graph may not break, the error that names the function is raised."""
from __future__ import annotations

import numpy as np
import pytest

import toolkit as tk
from toolkit.frontend.errors import UnsupportedNumpyError

BACKENDS = ["interpreter", "cpu", "gpu-simulated"]


def _same(expected, got):
    if isinstance(expected, (tuple, list)):
        assert type(got) is type(expected) and len(got) == len(expected), (expected, got)
        for e, g in zip(expected, got):
            _same(e, g)
        return
    e, g = np.asarray(expected), np.asarray(got)
    assert (e.shape, e.dtype) == (g.shape, g.dtype), ((e.shape, e.dtype), (g.shape, g.dtype))
    if e.dtype.kind in "fc":  # (the compiler may round a chain of operations differently)
        np.testing.assert_allclose(g, e, rtol=1e-13, atol=1e-15)
    else:
        np.testing.assert_array_equal(g, e)


def least_squares(a, b):
    c = a @ a.T + np.eye(a.shape[0])
    sol, residuals, rank, sv = np.linalg.lstsq(c, b, rcond=None)  # no rule in toolkit
    return sol * 2 + sv.sum(), rank


def edge_padding(x):
    y = np.pad(x * 2, 2, mode="linear_ramp")  # a mode toolkit's np.pad does not compile
    return y.sum() + y


def mask_put(a, b):
    m = a * 3
    np.putmask(m, m > 1.5, b)  # writes into m, which later code reads
    return m + 1, m.sum()


def argument_written(a, b):
    np.putmask(a, a > 0.5, b)  # writes the caller's array, as NumPy does
    return a.mean()


def reduce_at(x, out):
    np.add.reduceat(x * 2, [0, 2, 5], out=out)  # a ufunc method toolkit has no rule for
    return out * 1.0


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn, make", [
    (least_squares, lambda r: (r.random((5, 5)), r.random(5))),
    (edge_padding, lambda r: (r.random(6),)),
    (mask_put, lambda r: (r.random(7), r.random(7))),
    (argument_written, lambda r: (r.random(7), r.random(7))),
    (reduce_at, lambda r: (r.random(7), np.zeros(3))),
], ids=lambda v: getattr(v, "__name__", ""))
def test_numpy_runs_what_toolkit_does_not_compile(fn, make, backend):
    """Every call (traced, recorded, then one that would replay) with new values each time:
    NumPy's results, dtypes and writes into the arguments; one break site names the function."""
    rng = np.random.default_rng(3)
    jitted = tk.jit(fn, backend=backend)
    for _ in range(3):
        args = make(rng)
        np_args = [a.copy() for a in args]
        tk_args = [a.copy() for a in args]
        _same(fn(*np_args), jitted(*tk_args))
        for expected, got in zip(np_args, tk_args):
            np.testing.assert_array_equal(got, expected)
    report = jitted.graph_breaks
    assert any(" ran in NumPy" in b.reason for b in report.breaks), report.text
    assert "toolkit.numpy.supported_functions()" in report.text


def test_out_comes_back_as_the_traced_array():
    def f(x):
        out = np.zeros(3)
        got = np.add.reduceat(x, [0, 2, 4], out=out)
        got += 1  # NumPy's result is out itself: the write shows in both
        return out, got is out

    x = np.arange(6.0)
    expected = f(x.copy())
    got = tk.jit(f)(x.copy())
    _same(expected[0], got[0])
    assert got[1] is True


def test_the_break_report_names_the_function_and_its_line():
    rng = np.random.default_rng(0)
    report = tk.explain(least_squares, rng.random((4, 4)), rng.random(4))
    text = str(report)
    assert "np.linalg.lstsq() ran in NumPy: toolkit has no rule for it" in text
    assert "np.linalg.lstsq(c, b, rcond=None)" in text


def test_fullgraph_and_loop_bodies_raise_the_error_that_names_the_function():
    x = np.random.default_rng(1).random((3, 3))
    with pytest.raises(UnsupportedNumpyError, match="np.linalg.lstsq is not supported"):
        tk.jit(lambda a: np.linalg.lstsq(a, a[0], rcond=None)[0], fullgraph=True)(x)

    def loop(a):
        return tk.lax.fori_loop(0, 2, lambda i, v: v + np.linalg.eigvals(v).real.sum(), a)

    with pytest.raises(UnsupportedNumpyError, match="np.linalg.eigvals is not supported"):
        tk.jit(loop)(x)


def test_a_result_that_views_an_argument_is_refused():
    def windows(x):  # (a writable view: toolkit compiles only NumPy's read-only one)
        return np.lib.stride_tricks.sliding_window_view(x * 1.0, 2, writeable=True)

    with pytest.raises(UnsupportedNumpyError, match="returns a view of its argument"):
        tk.jit(windows)(np.arange(4.0))


def test_asarray_of_a_traced_array_is_the_array_itself():
    """``x = np.asarray(x)`` (defensive code at a function's top) and later writes reach the
    caller's array, and a view made by it sees later writes, as in NumPy; np.array copies."""
    def defensive(x, s):
        x = np.asarray(x)
        y = np.asarray(x, dtype=np.float32)  # a new array: later writes into x do not show
        z = np.array(x)  # a copy
        w = np.asarray(s)  # a Python float becomes a (strong) float64 array
        x[0] = 5.0
        z[1] = -1.0
        return x.sum(), y, z, w * np.ones(2, np.float32), np.asarray(x) is x, np.array(x) is x

    for backend in BACKENDS:
        args = np.arange(4.0), 2.5
        expected_arg, got_arg = args[0].copy(), args[0].copy()
        expected = defensive(expected_arg, args[1])
        jitted = tk.jit(defensive, backend=backend)
        got = jitted(got_arg, args[1])
        _same(expected[:4], got[:4])
        assert got[4:] == (True, False)
        np.testing.assert_array_equal(got_arg, expected_arg)
        assert jitted.graph_breaks.break_count == 0  # (np.asarray used to break, and copy)


def test_a_write_into_one_of_two_views_of_one_array_is_refused():
    def overlapping(a):
        m = a * 1.0
        np.putmask(m, m > 0, m[::-1])  # NumPy sees the writes through the view; copies do not
        return m

    with pytest.raises(UnsupportedNumpyError, match="another argument views"):
        tk.jit(overlapping)(np.arange(4.0))


def dropout(x, p):
    mask = np.random.rand(*x.shape) > p
    return x * mask / (1 - p)


@pytest.mark.parametrize("backend", BACKENDS)
def test_numpy_random_draws_anew_on_every_call(backend):
    """np.random inside a jitted function: NumPy's own draws on every call (the same numbers
    NumPy draws from the same seed), never the first call's numbers baked into the program."""
    jitted = tk.jit(dropout, backend=backend)
    x = np.ones(64)
    for seed in (1, 2, 1, 3):
        np.random.seed(seed)
        expected = dropout(x, 0.5)
        np.random.seed(seed)
        np.testing.assert_array_equal(jitted(x, 0.5), expected)
    assert any("draws new numbers every call" in b.reason for b in jitted.graph_breaks.breaks)
    assert "pass them in as an argument" in jitted.graph_breaks.text


def test_a_seeded_generator_made_inside_compiles_to_one_program():
    def seeded(x):
        return x + np.random.default_rng(0).random(x.shape)

    jitted = tk.jit(seeded)
    for _ in range(2):
        np.testing.assert_array_equal(jitted(np.ones(4)), seeded(np.ones(4)))
    assert jitted.graph_breaks.break_count == 0


def _seeded_by_argument(n, seed):
    rng = np.random.default_rng(seed)
    return 4 * np.mean(rng.random(n) ** 2 + rng.random(n) ** 2 <= 1.0)


def _seeded_by_data(x):
    return x + np.random.default_rng(seed=x.astype(np.int64)).random(x.shape)


def test_a_generator_seeded_from_an_argument_or_from_data_draws_numpys_numbers():
    """``default_rng(seed)`` with the seed an argument raised NumPy's TypeError (a traced
    value is no int): the seed's value is read, so the argument is static, a program per
    seed; a seed computed from data breaks the graph there."""
    by_argument = tk.jit(_seeded_by_argument)
    for seed in (7, 8, 7):
        assert by_argument(1000, seed) == _seeded_by_argument(1000, seed)
    x = np.arange(4.0)
    np.testing.assert_array_equal(tk.jit(_seeded_by_data)(x), _seeded_by_data(x))


def test_a_draw_where_the_graph_may_not_break_is_an_error():
    with pytest.raises(UnsupportedNumpyError, match="would draw its numbers once"):
        tk.jit(dropout, fullgraph=True)(np.ones(4), 0.5)


_GENERATOR = np.random.default_rng(7)  # a notebook's `rng = np.random.default_rng(...)` up top


def noisy(x):
    return x + _GENERATOR.normal(size=x.shape)


def test_a_module_level_generator_draws_anew_and_advances_as_numpys():
    jitted = tk.jit(noisy)
    got = [jitted(np.zeros(5)) for _ in range(3)]
    reference = np.random.default_rng(7)
    for g in got:
        np.testing.assert_array_equal(g, reference.normal(size=5))
    assert repr(_GENERATOR).startswith("Generator(")  # (the module's own object, restored)


def test_a_generator_argument_is_refused_even_static_saying_why():
    """A generator as an argument (traced or static) would have its first draws baked into the
    program; the error says so and what to do."""
    def f(x, rng):
        return x + rng.normal(size=x.shape)

    from toolkit.frontend.errors import ArgumentTypeError

    rng = np.random.default_rng(0)
    for jitted in (tk.jit(f), tk.jit(f, static_argnames="rng"), tk.jit(f, static_argnums=1)):
        with pytest.raises(ArgumentTypeError, match="random generator .* draw its numbers once"):
            jitted(np.zeros(3), rng)
