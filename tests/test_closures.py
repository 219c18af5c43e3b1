"""What a traced function reaches through closures is traced as its module's names are
(``frontend.namespace``): a factory's random generator draws anew on every call, its own
``import numpy`` makes traced buffers, and its pure helpers that branch become selects. The
cells hold their own values again after the call."""
from __future__ import annotations

import numpy as np
import pytest

import toolkit as tk

BACKENDS = ["interpreter", "cpu", "gpu-simulated"]


def _noisy_factory(seed: int):
    rng = np.random.default_rng(seed)

    def noisy(x):
        return x * 2 + rng.normal(size=x.shape)
    return noisy, rng


def _nested_noise_factory(seed: int):
    rng = np.random.default_rng(seed)

    def noise(shape):  # (the generator is in this helper's closure, not in the traced one's)
        return rng.normal(size=shape)

    def noisy(x):
        return x + noise(x.shape)
    return noisy


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_generator_in_a_factorys_closure_draws_anew_on_every_call(backend):
    x = np.arange(4.0)
    reference, _ = _noisy_factory(7)
    traced, rng = _noisy_factory(7)
    jitted = tk.jit(traced, backend=backend)
    results = [jitted(x) for _ in range(3)]
    for got in results:
        np.testing.assert_allclose(got, reference(x), rtol=1e-15)
    assert not np.array_equal(results[0], results[1])  # (it was drawn once and baked in)
    (cell,) = traced.__closure__
    assert cell.cell_contents is rng  # the user's generator again, advanced as NumPy's


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_generator_in_a_helpers_closure_draws_anew(backend):
    x = np.zeros(3)
    reference, jitted = _nested_noise_factory(3), tk.jit(_nested_noise_factory(3),
                                                          backend=backend)
    for _ in range(3):
        np.testing.assert_allclose(jitted(x), reference(x), rtol=1e-15)


def _buffer_factory():
    import numpy as onp  # (the factory's own name for NumPy: a closure variable)

    def fill(x):
        out = onp.zeros(x.shape)
        for i in range(x.shape[0]):
            out[i] = x[i] * 2 + 1
        return out
    return fill


@pytest.mark.parametrize("backend", BACKENDS)
def test_numpy_imported_in_a_factory_makes_traced_buffers(backend):
    fill = _buffer_factory()
    jitted = tk.jit(fill, backend=backend)
    for n in (3, 5):
        x = np.linspace(-1, 1, n)
        np.testing.assert_array_equal(jitted(x), fill(x))
    assert jitted.graph_breaks.break_count == 0
    assert fill.__closure__[0].cell_contents is np


def _branching_factory(scale: float, log: list | None = None):
    def clip(v):  # pure, with a data-dependent if: a select where the factory's is swapped
        if v[0] > 0:
            return v * scale
        return -v

    def impure_clip(v):  # reads a list of the factory's: not pure, so Python branches
        if v[0] > log[0]:
            return v * scale
        return -v

    def f(x):
        return (clip(x) if log is None else impure_clip(x)) + 1
    return f


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_pure_helper_in_a_closure_branches_without_a_break(backend):
    f = _branching_factory(3.0)
    jitted = tk.jit(f, backend=backend)
    for x in (np.array([1.0, -2.0]), np.array([-1.0, 2.0]), np.array([0.0, 5.0])):
        np.testing.assert_array_equal(jitted(x), f(x))
    assert jitted.graph_breaks.break_count == 0
    report = tk.explain(_branching_factory(3.0), np.array([1.0, 2.0]))
    assert "clip" in str(report) and not report.breaks


def test_a_helper_reading_a_closure_value_that_may_change_is_not_merged():
    log = [0.0]
    f = _branching_factory(3.0, log)
    jitted = tk.jit(f)
    x = np.array([1.0, -2.0])
    np.testing.assert_array_equal(jitted(x), f(x))
    log[0] = 5.0  # (were its if a select, the 0.0 seen when traced would stay)
    np.testing.assert_array_equal(jitted(x), f(x))
    assert jitted.graph_breaks.break_count >= 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_closure_variable_rebound_by_the_traced_code_keeps_the_new_value(backend):
    def factory():
        rng = np.random.default_rng(0)

        def f(x):
            nonlocal rng
            y = x + rng.normal(size=x.shape)
            rng = np.random.default_rng(5)  # (each later call draws from a fresh seed 5)
            return y
        return f
    reference, traced = factory(), factory()
    jitted = tk.jit(traced, backend=backend)
    x = np.zeros(2)
    for _ in range(3):
        np.testing.assert_allclose(jitted(x), reference(x), rtol=1e-15)
    assert isinstance(traced.__closure__[0].cell_contents, np.random.Generator)
