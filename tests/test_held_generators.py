"""A random generator held by an object (``self.rng``, a layer's dropout, a static argument)
draws anew on every call, as NumPy's does, rather than once when traced
(``frontend.held_generators``)."""
from __future__ import annotations

import numpy as np
import pytest

import toolkit as tk
from toolkit.frontend.errors import UnsupportedNumpyError

BACKENDS = ["interpreter", "cpu", "gpu-simulated"]


class Noisy:
    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)

    def forward(self, x):
        return x * 2 + self.rng.normal(size=x.shape)


class Dropout:
    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)

    def __call__(self, x):
        return x * (self.rng.random(x.shape) > 0.5)


class Block:
    def __init__(self, seed: int):
        self.drop = Dropout(seed)

    def forward(self, x):
        return self.drop(x) + 1


class Model:
    def __init__(self):
        self.blocks = [Block(1), Block(2)]

    def __call__(self, x):
        for block in self.blocks:
            x = block.forward(x)
        return x


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_bound_methods_generator_draws_anew_and_advances_as_numpys(backend):
    x = np.arange(4.0)
    reference, model = Noisy(7), Noisy(7)
    jitted = tk.jit(model.forward, backend=backend)
    results = [jitted(x) for _ in range(3)]
    for got in results:
        np.testing.assert_allclose(got, reference.forward(x), rtol=1e-15)
    assert not np.array_equal(results[0], results[1])  # (drawn once and baked in, before)
    assert isinstance(model.rng, np.random.Generator)  # the user's own again, after the call
    assert model.rng.random() == reference.rng.random()  # and advanced as NumPy's


@pytest.mark.parametrize("backend", BACKENDS)
def test_generators_of_layers_in_a_list_draw_anew(backend):
    x = np.ones(6)
    reference, model = Model(), Model()
    jitted = tk.jit(model, backend=backend)
    for _ in range(4):
        np.testing.assert_array_equal(jitted(x), reference(x))


def test_a_static_arguments_generator_draws_anew():
    def forward(layer, x):
        return x + layer.rng.normal(size=x.shape)
    reference, layer = Noisy(3), Noisy(3)
    jitted = tk.jit(forward, static_argnums=0)
    x = np.zeros(3)
    for _ in range(3):
        np.testing.assert_allclose(jitted(layer, x), forward(reference, x), rtol=1e-15)


def test_the_report_names_the_path_of_the_draw():
    report = tk.explain(Noisy(0).forward, np.zeros(2))
    (draw,) = report.breaks
    assert "self.rng.normal()" in draw.reason and "draws new numbers every call" in draw.reason


def test_where_the_graph_may_not_break_the_draw_is_an_error_naming_it():
    with pytest.raises(UnsupportedNumpyError, match=r"self\.rng\.normal\(\)"):
        tk.jit(Noisy(0).forward, fullgraph=True)(np.zeros(2))
