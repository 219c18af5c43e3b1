"""NumPy's names in a traced function's module are swapped for the trace (frontend/namespace.py)
from a scan kept per namespace: reused while the namespace keeps its size and its names, made
again when a name is added or rebound, and never kept from inside a running trace."""
import types

import numpy as np

import toolkit as tk
from toolkit.frontend import namespace
from toolkit.frontend.tracer import Tracer

SOURCE = """
import numpy as np

def kind(x):
    return x + np.zeros(3)  # np.zeros is traced when np is swapped

def seen(x):
    SEEN.append(type(np.zeros(3)).__name__)
    return x * 2.0

def via_alias(x):
    SEEN.append(type(alias.zeros(3)).__name__)
    return x * 2.0

def outer(x):
    SEEN.append(type(np.zeros(3)).__name__)
    return inner(x) + 1.0
"""


def _module():
    module = types.ModuleType("user_module_for_namespace_cache")
    module.SEEN = []
    exec(compile(SOURCE, "<user module>", "exec"), module.__dict__)
    return module


def test_the_scan_is_reused_and_made_again_when_the_namespace_changes():
    m = _module()
    f = tk.jit(m.seen)
    f(np.ones(3))
    assert m.SEEN == ["Tracer"]
    assert m.np is np  # restored after the trace
    scanned = namespace._SCANNED[id(m.__dict__)]
    tk.jit(m.seen)(np.ones(3))  # a second function of the module: the same scan
    assert namespace._SCANNED[id(m.__dict__)] is scanned
    m.alias = np  # a new name bound to NumPy: the namespace grew, so it is scanned again
    m.SEEN.clear()
    tk.jit(m.via_alias)(np.ones(3))
    assert m.SEEN == ["Tracer"] and m.alias is np
    m.np = types.SimpleNamespace(zeros=np.zeros)  # rebound: no longer NumPy, not swapped
    m.SEEN.clear()
    tk.jit(m.seen)(np.ones(3))
    assert m.SEEN == ["ndarray"]
    m.np = np  # and back
    m.SEEN.clear()
    tk.jit(m.seen)(np.ones(3))
    assert m.SEEN == ["Tracer"] and m.np is np


def test_a_scan_made_inside_a_running_trace_is_not_kept():
    m = _module()
    m.inner = tk.jit(m.seen)  # traced inline inside outer's trace: its scan sees swapped names
    out = tk.jit(m.outer)(np.ones(3))
    np.testing.assert_array_equal(out, np.full(3, 3.0))
    m.SEEN.clear()
    tk.jit(m.seen)(np.ones(3) * 2)  # a later trace still swaps NumPy's names
    assert m.SEEN == ["Tracer"] and m.np is np
    assert isinstance(Tracer, type)


BRANCHING = """
import numpy as np

def sign_of(v):
    if v > 0:
        return 1.0
    return -1.0

def signs(x):
    return x * sign_of(x[0])
"""


def test_plain_data_rebound_keeps_the_scan_and_a_function_rebound_makes_it_again():
    m = types.ModuleType("user_module_for_namespace_helpers")
    exec(compile(BRANCHING, "<user module>", "exec"), m.__dict__)
    x = np.array([2.0, -3.0])
    jitted = tk.jit(m.signs)
    np.testing.assert_array_equal(jitted(x), m.signs(x))
    scanned = namespace._SCANNED[id(m.__dict__)][3]
    assert "sign_of" in scanned  # a pure helper that branches: converted
    for i in range(3):  # a notebook's loop counter at the top level
        m.i = i
        m.data = np.full(2, float(i))
        np.testing.assert_array_equal(jitted(x), m.signs(x))
        assert namespace._SCANNED[id(m.__dict__)][3] is scanned
    assert jitted.graph_breaks.break_count == 0

    # rebound to a helper that appends to a list: scanned again, no longer converted
    exec(compile("def sign_of(v):\n    LOG.append(1)\n    if v > 0:\n        return 1.0\n"
                 "    return -1.0\n", "<user module>", "exec"), m.__dict__)
    m.LOG = []
    np.testing.assert_array_equal(tk.jit(m.signs)(x), m.signs(x))
    assert "sign_of" not in namespace._SCANNED[id(m.__dict__)][3]
    assert m.LOG == [1, 1]  # once by the jitted call (a break), once by NumPy's


def test_the_scan_is_checked_by_the_names_that_are_not_plain_data():
    """A notebook's namespace holds thousands of names: a scan is reused while as many names
    are bound and every name bound to something other than plain data (a module, a function,
    a container) is bound to the same object; plain data may change freely."""
    m = _module()
    for k in range(300):  # (IPython's _i1, _i2, ... and the user's numbers)
        setattr(m, f"_i{k}", f"cell {k}")
    m.config = {"scale": 2.0}
    f = tk.jit(m.seen)
    f(np.ones(3))
    scan = namespace._SCANNED[id(m.__dict__)]
    assert {name for name, _, _ in scan[2]} >= {"np", "seen", "config", "SEEN"}
    assert not any(name.startswith("_i") for name, _, _ in scan[2])
    for k in range(300):
        setattr(m, f"_i{k}", k * 0.5)  # plain data rebound: the scan stands
    assert namespace._names_to_swap(m.__dict__) is scan[3]
    m.config = {"scale": 3.0}  # a container rebound: scanned again
    swapped = namespace._names_to_swap(m.__dict__)
    assert namespace._SCANNED[id(m.__dict__)] is not scan and "np" in swapped
    scan = namespace._SCANNED[id(m.__dict__)]
    del m.config  # a watched name gone, another name in its place (as many names): again
    m.other = 1.0
    namespace._names_to_swap(m.__dict__)
    assert namespace._SCANNED[id(m.__dict__)] is not scan
    m.SEEN.clear()
    tk.jit(m.seen)(np.ones(3))  # (a new trace still swaps NumPy's names)
    assert m.SEEN == ["Tracer"] and m.np is np
