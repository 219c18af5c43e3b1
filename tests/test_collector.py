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
