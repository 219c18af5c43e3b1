"""Plain NumPy in place of segments (toolkit/jitting/eager.py): a signature whose calls break
the graph many times is timed once as plain NumPy and runs as NumPy where that was at least
twice as fast; every call runs once, with NumPy's results, side effects and writes."""
import numpy as np
import pytest

import toolkit as tk
from toolkit.jitting import eager

from test_graph_break_programs import crc16  # (a break on every bit: 320 a call for 40 bytes)


CALLS: list = []


def crc_into(data, out):
    """crc16 with a side effect and an argument written in place."""
    CALLS.append(len(data))
    out[0] = crc16(data)
    return out * 2


def _data(seed):
    return np.random.default_rng(seed).integers(0, 256, 40).astype(np.uint8)


def test_a_call_that_breaks_on_every_bit_runs_as_plain_numpy_after_it_was_timed():
    f = tk.jit(crc16, backend="cpu")
    for k in range(6):
        data = _data(k)
        assert int(f(data)) == crc16(data)
    report = f.graph_breaks
    assert len(report.numpy_fallback) == 1, report.text
    text = report.numpy_fallback[0]
    # (the trial is the second call: against what replaying the first would cost)
    assert text.startswith("(u8[40]) runs as plain NumPy: 320 breaks a call, "), text
    assert "estimated from the first call" in text
    assert "5 call(s) so far" in text and "np.where" in text
    assert report.calls == 1
    assert "signatures timed as plain NumPy" in report.text
    got = f(_data(9))  # as plain NumPy: NumPy's own result, type and all
    assert type(got) is int and got == crc16(_data(9))


def test_every_call_runs_once_with_numpys_side_effects_and_writes():
    CALLS.clear()
    f = tk.jit(crc_into, backend="cpu")
    for k in range(6):
        data, out, want = _data(k), np.zeros(2, np.int64), np.zeros(2, np.int64)
        got = f(data, out)
        expected = crc_into(data, want)
        np.testing.assert_array_equal(got, expected)
        np.testing.assert_array_equal(out, want)  # written in place, as NumPy wrote it
    assert CALLS == [40] * 12  # one run per jitted call, one per NumPy call: never two
    assert f.graph_breaks.numpy_fallback[0].split(")")[0] == "(u8[40], s64[2]"


def test_numpy_fallback_false_and_device_backends_keep_every_call_in_segments():
    kept = tk.jit(crc16, backend="cpu", numpy_fallback=False)
    device = tk.jit(crc16, backend="gpu-simulated")
    for k in range(4):  # (the fourth call would be the trial)
        data = _data(k)
        assert int(kept(data)) == crc16(data)
        assert int(tk.device_get(device(data))) == crc16(data)
    for f in (kept, device):
        report = f.graph_breaks
        assert report.numpy_fallback == () and report.calls == 4, report.text


def test_few_breaks_a_call_never_try_numpy():
    def clip_steps(x):
        for _ in range(4):
            if x.max() > 1:
                x = x / 2
        return x

    f = tk.jit(clip_steps, backend="cpu")
    for k in range(6):
        x = np.linspace(0, 8 + k, 16)
        np.testing.assert_array_equal(f(x), clip_steps(x))
    assert f.graph_breaks.numpy_fallback == () and f.graph_breaks.calls == 6


@pytest.mark.parametrize("segmented, numpy_, decided", [
    ([6e-3, 5e-3], 1e-4, "numpy"),  # 50x faster: NumPy takes over
    ([6e-3, 5e-3], 2.5e-3, "numpy"),  # exactly twice as fast
    ([6e-3, 5e-3], 3e-3, "segments"),  # faster, but not twice: segments stay
    ([1e-3, 9e-3], 1e-3, "segments"),  # against the best call in segments
])
def test_the_choice_needs_numpy_twice_as_fast_as_the_best_call_in_segments(
        segmented, numpy_, decided):
    choice = eager.EagerChoice("f64[8]")
    assert not choice.runs_eagerly
    for seconds in segmented:
        choice.segmented(seconds, eager.EAGER_MIN_BREAKS)
    assert choice.runs_eagerly  # (the trial)
    choice.eager(numpy_)
    assert choice.decided == decided
    assert choice.runs_eagerly == (decided == "numpy")
    assert choice.text.startswith("(f64[8]) " + ("runs as plain NumPy" if decided == "numpy"
                                                 else "stays in segments"))
    choice.eager(numpy_ / 10)  # (decided once: later calls do not change it)
    assert choice.decided == decided


def test_many_breaks_in_the_first_call_make_the_second_call_numpys_trial():
    """The first call traces every operation, so it is no measure of the next; what its
    segments ran plus a replayed break's cost is. NumPy twice as fast as that takes over at
    once (a sparse product slicing every row spent three calls of 15-23 s in segments)."""
    choice = eager.EagerChoice("f64[8]")
    choice.first_call(2.0, 0.05, 1000)  # estimate: 50 ms of segments + 1000 breaks of 20 us
    assert choice.estimated_seconds == pytest.approx(0.05 + 1000 * eager.REPLAYED_BREAK)
    assert choice.runs_eagerly
    choice.eager(0.035)  # exactly twice as fast as the estimate (70 ms)
    assert choice.decided == "numpy" and choice.runs_eagerly
    assert "1000 breaks a call, 70.00 ms in segments replayed (estimated from the first call, " \
        "which took 2000.00 ms), plain NumPy 35.00 ms (2.0x faster)" in choice.text


def test_numpy_losing_to_the_first_calls_estimate_is_decided_on_measured_calls_without_a_rerun():
    choice = eager.EagerChoice("f64[8]")
    choice.first_call(2.0, 0.05, 1000)
    choice.eager(0.05)  # not twice as fast as the 70 ms estimate: segments go on, measured
    assert choice.decided is None and not choice.runs_eagerly
    choice.segmented(0.2, 1000)  # (the replay is slower than the estimate)
    assert choice.decided is None and not choice.runs_eagerly
    choice.segmented(0.15, 1000)
    assert choice.decided == "numpy" and choice.eager_calls == 1  # 0.05 * 2 <= 0.15
    assert choice.text.startswith("(f64[8]) runs as plain NumPy: 1000 breaks a call took 150.00")
    kept = eager.EagerChoice("f64[8]")
    kept.first_call(2.0, 0.05, 1000)
    kept.eager(0.05)
    kept.segmented(0.07, 1000)
    kept.segmented(0.06, 1000)
    assert kept.decided == "segments" and not kept.runs_eagerly


def test_few_breaks_in_the_first_call_leave_the_choice_to_the_calls_after_it():
    choice = eager.EagerChoice(hot=1)
    choice.first_call(2.0, 0.001, eager.EAGER_MIN_BREAKS - 1)
    assert choice.estimated_seconds is None and not choice.runs_eagerly


def test_a_signature_that_breaks_a_few_times_is_tried_once_its_segments_compiled():
    """Few breaks a call: NumPy is timed against the compiled segments, never against the
    interpreted runs before them (which NumPy would beat where compiled code would not)."""
    choice = eager.EagerChoice(hot=4)
    for _ in range(4):  # (the 4th call compiles its segments)
        choice.segmented(1.0, eager.EAGER_MIN_BREAKS - 1)
        assert not choice.runs_eagerly
    choice.segmented(0.2, eager.EAGER_MIN_BREAKS - 1)
    assert not choice.runs_eagerly
    choice.segmented(0.3, eager.EAGER_MIN_BREAKS - 1)
    assert choice.runs_eagerly  # (the trial, after SEGMENTED_CALLS compiled calls)
    choice.eager(0.17)  # faster than the interpreted calls, not 1.25x the compiled ones
    assert choice.decided == "segments" and choice.segmented_seconds == 0.2
    faster = eager.EagerChoice(hot=1)
    for seconds in (1.0, 0.2, 0.3):
        faster.segmented(seconds, 1)
    faster.eager(0.2 / eager.EAGER_SPEEDUP_COMPILED)
    assert faster.decided == "numpy"


def test_a_small_solver_with_a_convergence_test_each_step_runs_as_numpy():
    """npbench's channel_flow: a few breaks a call (the while test), and between them dozens
    of operations on a 21x21 grid, each replayed for microseconds where NumPy takes less than
    one: 7.5x slower in segments than NumPy. Timed once its segments compiled, it runs as
    NumPy, with NumPy's results and writes into its arguments."""
    def step(u, dt):
        un = u.copy()
        u[1:-1, 1:-1] = un[1:-1, 1:-1] - dt * (un[1:-1, 1:-1] - un[1:-1, 0:-2]) \
            + dt * (un[2:, 1:-1] - 2 * un[1:-1, 1:-1] + un[0:-2, 1:-1]) + dt
        u[0, :] = 0

    def solve(nit, u, dt):
        diff, count = 1.0, 0
        while diff > 1e-3 and count < nit:
            before = u.copy()
            step(u, dt)
            diff = (np.sum(u) - np.sum(before)) / np.sum(u)
            count += 1
        return count

    f = tk.jit(solve)
    for _ in range(10):
        mine, theirs = np.zeros((21, 21)), np.zeros((21, 21))
        assert f(5, mine, 0.01) == solve(5, theirs, 0.01)
        np.testing.assert_array_equal(mine, theirs)
    (choice,) = f._breaks.log.eager.values()
    assert choice.decided == "numpy", choice.text


def test_a_profile_shows_a_call_run_as_plain_numpy_as_glue():
    f = tk.jit(crc16, backend="cpu")
    for k in range(4):
        f(_data(k))
    with tk.profile() as prof:
        f(_data(7))
    spans = [e for e in prof.events if type(e).__name__ == "GraphBreakEvent"]
    assert [(e.reason, e.duration, e.instructions) for e in spans] == [("plain NumPy", 0.0, 0)]
    assert spans[0].glue > 0 and spans[0].function == "crc16"
    assert not prof.kernels
    from toolkit.profiler.report import graph_break_lines

    assert graph_break_lines(spans)[0].startswith("graph breaks: 0, ")  # (a call, not a break)
    assert "signature (u8[40]) runs as plain NumPy" in f.graph_breaks._repr_html_()


def test_once_decided_plain_array_calls_take_the_fast_path_to_numpy():
    f = tk.jit(crc16, backend="cpu")
    for k in range(5):
        f(_data(k))
    choice = next(iter(f._plain_numpy.values()))
    before = choice.eager_calls
    for k in range(3):
        assert f(_data(k)) == crc16(_data(k))
    assert choice.eager_calls == before + 3
    f.clear_cache()
    assert not f._plain_numpy


def test_explain_says_when_a_call_breaks_often_enough_to_be_timed_as_numpy():
    text = tk.explain(crc16, _data(0)).text
    assert "320 breaks a call: after two calls in segments, a call is timed as plain NumPy" \
        in text, text
    few = tk.explain(lambda x: x * 2 if x.sum() > 0 else x, np.ones(3)).text
    assert "timed as plain NumPy" not in few
