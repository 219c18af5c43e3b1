"""The garbage collector around traces and compiles (toolkit/collector.py): relaxed while a
trace runs and restored after, even when the trace raises; the user's own settings kept."""
import gc
import threading

import numpy as np
import pytest

import toolkit as tk
from toolkit import collector


@pytest.fixture
def thresholds():
    saved = gc.get_threshold()
    yield
    gc.set_threshold(*saved)


def test_a_trace_runs_with_fewer_collections_and_restores_the_thresholds(thresholds):
    gc.set_threshold(700, 10, 10)
    seen = []

    def f(x):
        seen.append(gc.get_threshold())
        return x + 1.0

    tk.jit(f)(np.ones(3))
    assert seen == [(collector.YOUNG_THRESHOLD, 10, 10)]
    assert gc.get_threshold() == (700, 10, 10)


def test_the_thresholds_come_back_when_the_traced_function_raises(thresholds):
    gc.set_threshold(500, 7, 9)

    def f(x):
        raise ValueError("user error")

    with pytest.raises(ValueError, match="user error"):
        tk.jit(f)(np.ones(3))
    assert gc.get_threshold() == (500, 7, 9)


def test_a_users_own_settings_are_kept(thresholds):
    gc.set_threshold(0)  # collections off: a trace does not turn them on
    with collector.collector_relaxed():
        assert gc.get_threshold()[0] == 0
    assert gc.get_threshold()[0] == 0
    gc.set_threshold(700, 10, 10)
    with collector.collector_relaxed():
        gc.set_threshold(1234, 10, 10)  # set by the user's code meanwhile: theirs stays
    assert gc.get_threshold() == (1234, 10, 10)


def test_traces_on_several_threads_restore_once_the_last_ends(thresholds):
    gc.set_threshold(700, 10, 10)
    inside, release = threading.Barrier(3), threading.Event()

    def trace():
        with collector.collector_relaxed():
            inside.wait()
            release.wait()

    threads = [threading.Thread(target=trace) for _ in range(2)]
    for t in threads:
        t.start()
    inside.wait()
    assert gc.get_threshold()[0] == collector.YOUNG_THRESHOLD
    release.set()
    for t in threads:
        t.join()
    assert gc.get_threshold() == (700, 10, 10)


def test_a_compile_pauses_the_collector_and_turns_it_back_on():
    assert gc.isenabled()
    with collector.collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with collector.collector_paused():
            pass
        assert not gc.isenabled()  # off before: stays off
    finally:
        gc.enable()


def _garbage_functions(run) -> list[str]:
    """The names of the functions ``run()`` leaves in reference cycles (found by a collection
    with the collector paused around it, as a compile pauses it)."""
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        run()
        gc.collect()
        return [o.__qualname__ for o in gc.garbage if type(o).__name__ == "function"]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was:
            gc.enable()


def test_rebuilding_a_module_leaves_no_cycle_that_keeps_the_old_one_alive():
    """A compile pauses the collector; a pass's walk that formed a cycle (a nested function
    calling itself through its cell) kept every version of the program in memory to the end."""
    from toolkit.passes.rewriter import replace_entry

    def body(x):
        return tk.lax.fori_loop(0, 3, lambda i, c: c * 2.0 + np.sum(c), x)

    module = tk.jit(body).lower(np.ones(4)).hlo
    assert len(module.computations) > 2  # (the loop's body and condition, a reducer)

    def run():
        rebuilt = replace_entry(module, module.entry)
        assert [c.name for c in rebuilt.computations] == [c.name for c in module.computations]

    assert _garbage_functions(run) == []


def test_emitting_a_kernel_nest_leaves_no_cycle_through_its_loops():
    from llvmlite import ir

    from toolkit.backends.llvm.loops import nest

    def run():
        module = ir.Module()
        fn = ir.Function(module, ir.FunctionType(ir.VoidType(), []), "k")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        visited = []
        nest(b, (2, 3, 4), visited.append)
        b.ret_void()
        assert len(visited) == 1 and len(visited[0]) == 3

    assert [name for name in _garbage_functions(run) if "nest" in name] == []
