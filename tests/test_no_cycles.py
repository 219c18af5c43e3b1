"""A call leaves no reference cycles behind: results and temporaries die with their last user.

A cycle (a closure that calls itself, holding the outputs) keeps every result alive until the
garbage collector runs; a program returning 4 MB then gets fresh pages from the kernel on every
call (page faults, measured 4x slower on the per-example-gradients row) and memory grows
between collections."""
import gc

import numpy as np
import pytest

import toolkit as tk


def _garbage_after(call) -> list:
    gc.collect()
    gc.disable()
    try:
        gc.set_debug(gc.DEBUG_SAVEALL)
        call()
        gc.collect()
        found = list(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    return found


def _tree_program(params, x):
    h = np.tanh(x @ params["w"])
    return {"out": h.sum(axis=1), "parts": (h, [h * 2.0, None])}


def _loss(w, x):
    return np.sum(np.tanh(x @ w) ** 2)


CALLS = {
    "jit with pytree arguments and results": lambda: tk.jit(_tree_program),
    "jit of grad": lambda: tk.jit(tk.grad(_loss)),
    "grad outside jit": lambda: tk.grad(_loss),
    "vmap of grad": lambda: tk.vmap(tk.grad(_loss), in_axes=(None, 0)),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_cache_hit_call_creates_no_garbage_cycles(name):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 4))
    x = rng.standard_normal((5, 8))
    fn = CALLS[name]()
    args = ({"w": w}, x) if "pytree" in name else (w, x[:, None, :] if "vmap" in name else x)
    fn(*args)  # compile and warm
    found = _garbage_after(lambda: fn(*args))
    assert not found, f"{name}: one call left {len(found)} objects in cycles: " + \
        ", ".join(sorted({type(o).__name__ for o in found}))


def test_a_profiled_call_creates_no_garbage_cycles_holding_arrays():
    f = tk.jit(lambda a: np.exp(a) + 1.0)
    a = np.ones(1000)
    f(a)
    with tk.profile():
        found = _garbage_after(lambda: f(a))
    assert not [o for o in found if isinstance(o, np.ndarray)]
