"""Every cache has a bound: compiled programs per function (LRU, evictions explained), compile
histories, the set of function histories, and the %%xla cells' functions."""
import functools

import numpy as np
from IPython import get_ipython
import pytest

import toolkit as tk
from toolkit.runtime import history


def test_the_jit_cache_evicts_the_oldest_program_and_names_the_eviction():
    f = tk.jit(lambda x: x + 1, cache_size=2, on_recompile="ignore")
    with tk.profile() as prof:
        for n in (1, 2, 3, 1):
            np.testing.assert_array_equal(f(np.ones(n)), np.full(n, 2.0))
    assert f.cache_size == 2
    assert [c.evicted for c in prof.compiles] == ["", "", "x: f64[1]", "x: f64[2]"]
    last = prof.recompiles[-1]
    assert last.causes[0].code == "EVICTED" and "cache_size" in last.causes[0].message
    assert all(c.code != "EVICTED" for r in prof.recompiles[:-1] for c in r.causes)


def test_cache_size_must_be_positive():
    with pytest.raises(ValueError, match="cache_size"):
        tk.jit(lambda x: x, cache_size=0)


def test_histories_keep_the_most_recent_records_and_an_exact_count(monkeypatch):
    monkeypatch.setattr(history, "MAX_HISTORY", 5)
    f = tk.jit(lambda x: x * 3, on_recompile="ignore")
    for n in range(1, 13):
        f(np.ones(n))
    assert len(f.compiles) == 5 and len(f.recompiles) == 5
    assert f.recompile_count == 11
    assert f.compiles[-1].signature == "x: f64[12]"


def test_partials_share_their_functions_history_not_an_id():
    def scale(x, k):
        return x * k

    first = tk.jit(functools.partial(scale, k=2.0))
    first(np.ones(2))
    assert history.history_key(functools.partial(scale, k=3.0)) == history.history_key(scale)

    class Model:
        def __call__(self, x):
            return x + 1

    assert history.history_key(Model()) == history.history_key(Model())
    assert history.history_key(np.add)[0] == "object"  # no code: a serial, never an id()


def test_the_number_of_function_histories_is_bounded(monkeypatch):
    monkeypatch.setattr(history, "MAX_FUNCTIONS", 3)
    for i in range(6):
        exec(f"def f{i}(x):\n    return x + {i}", ns := {})
        tk.jit(ns[f"f{i}"])
    assert len(history.all_histories()) <= 3


def test_an_edited_xla_cell_drops_its_old_function(monkeypatch):
    from IPython.testing.globalipapp import start_ipython
    from IPython.utils.capture import capture_output

    from toolkit.notebook import magics

    ip = start_ipython() or get_ipython()
    ip.run_cell("%load_ext toolkit")
    xla = ip.magics_manager.registry["XlaMagics"]
    ip.user_ns["x"] = np.ones(4)
    cell = {"id": "cell-a"}
    monkeypatch.setattr(magics, "_cell_id", lambda shell: cell["id"])
    with capture_output():
        for k in range(5):  # one notebook cell, edited five times
            ip.run_cell(f"%%xla --quiet\ny = x * {k}\n")
    assert len(xla._cells) == 1 and np.array_equal(ip.user_ns["y"], np.full(4, 4.0))
    monkeypatch.setattr(magics, "MAX_CELLS", 3)
    with capture_output():
        for k in range(6):  # six different cells
            cell["id"] = f"cell-{k}"
            ip.run_cell(f"%%xla --quiet\nz{k} = x + {k}\n")
    assert len(xla._cells) == 3


def test_inferred_shapes_are_remembered_within_a_bound_and_errors_are_not(monkeypatch):
    from toolkit.ir import builder as ir_builder
    from toolkit.ir.dtypes import from_numpy
    from toolkit.ir.shape_inference import ShapeError
    from toolkit.ir.shapes import Shape

    monkeypatch.setattr(ir_builder, "_INFERRED", {})
    monkeypatch.setattr(ir_builder, "_INFERRED_KEPT", 4)
    b = ir_builder.ComputationBuilder("c", ir_builder.NameUniquer())
    x = b.parameter(0, Shape(from_numpy(np.dtype(np.float64)), (8, 8)))
    first = b.add("slice", [x], {"slice": ((3, 4, 1), (0, 8, 1))})
    again = b.add("slice", [x], {"slice": ((3, 4, 1), (0, 8, 1))})
    assert first.shape is again.shape and first.shape.dims == (1, 8)
    for _ in range(2):  # an invalid question is asked again, and raises again
        with pytest.raises(ShapeError, match="out of bounds"):
            b.add("slice", [x], {"slice": ((3, 9, 1), (0, 8, 1))})
    for n in range(1, 9):
        assert b.add("slice", [x], {"slice": ((0, n, 1), (0, 8, 1))}).shape.dims == (n, 8)
        assert len(ir_builder._INFERRED) <= 4
