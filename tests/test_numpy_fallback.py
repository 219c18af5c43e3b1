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


# ---- a first call that stops at a break and runs as plain NumPy (eager.GIVE_UP_*) ----------
TRIPS: list = []


def relax(u, steps):
    """A solver testing convergence every step (a break on every trip), writing its argument
    in place and appending to a global list: what a stopped first call must not do twice."""
    diff, count = 1.0, 0
    while diff > 1e-12 and count < steps:
        before = u.copy()
        u[1:-1] = 0.5 * (before[:-2] + before[2:])
        diff = float(np.abs(u - before).max())
        TRIPS.append(count)
        count += 1
    return u.sum() * 2, count


@pytest.fixture
def stop_at_the_fourth_break(monkeypatch):
    """The thresholds lowered so that a first call stops at its fourth break, whatever this
    machine's speed (the mechanism under test, not the timing)."""
    monkeypatch.setattr(eager, "GIVE_UP_BREAKS", 4)
    monkeypatch.setattr(eager, "GIVE_UP_SECONDS", 0.0)
    monkeypatch.setattr(eager, "GIVE_UP_RATIO", 0.0)


def _grid():
    u = np.zeros(64)
    u[20:40] = np.linspace(1.0, 3.0, 20)
    return u


def test_a_first_call_whose_python_costs_far_more_than_its_segments_stops_and_runs_as_numpy(
        stop_at_the_fourth_break):
    f = tk.jit(relax, backend="cpu")
    for call in range(3):
        TRIPS.clear()
        mine, theirs = _grid(), _grid()
        got = f(mine, 30)
        mine_trips = list(TRIPS)
        TRIPS.clear()
        want = relax(theirs, 30)
        assert got == want and type(got[0]) is type(want[0]) and type(got[1]) is int
        np.testing.assert_array_equal(mine, theirs)  # written in place once, as NumPy wrote it
        assert mine_trips == list(range(30)), call  # the stopped trace's appends put back
    (choice,) = f._breaks.log.eager.values()
    assert choice.stopped_run_seconds is not None and choice.breaks == 4
    assert choice.segmented_calls == 0 and choice.eager_calls == 3
    text = choice.text
    assert "its first call stopped after 4 breaks and " in text, text
    assert "and ran as plain NumPy from its start; plain NumPy " in text, text
    # (NumPy's 30 steps on 64 numbers take well under a millisecond; the 4 traced: several)
    assert choice.decided == "numpy", text
    assert text.startswith("(f64[64]) runs as plain NumPy: "), text  # (steps: static)
    assert "(at least " in text and f.graph_breaks.numpy_fallback == (text,)


def test_numpy_losing_to_the_stopped_part_leaves_the_choice_to_calls_in_segments():
    choice = eager.EagerChoice("f64[8]")
    choice.gave_up(1.5, 0.2, 40)
    assert choice.runs_eagerly is False and choice.decided is None
    choice.eager(2.0)  # NumPy's whole call took longer than the part of the first that ran
    assert choice.decided is None and not choice.runs_eagerly
    choice.segmented(5.0, 40)
    choice.segmented(4.5, 40)  # (NumPy twice as fast as the best call in segments)
    assert choice.decided == "numpy"
    assert choice.text.startswith("(f64[8]) runs as plain NumPy: 40 breaks a call took 4500.00")
    won = eager.EagerChoice("f64[8]")
    won.gave_up(1.5, 0.2, 40)
    won.eager(1.5)  # no slower than the part that ran: NumPy from now on
    assert won.decided == "numpy" and won.runs_eagerly
    assert "its first call stopped after 40 breaks and 1500.00 ms in segments, of which they " \
        "ran 200.00 ms (the rest tracing and compiling)" in won.text
    assert "(at least 1.0x faster)" in won.text


def test_a_first_call_that_printed_or_drew_random_numbers_never_starts_again(
        stop_at_the_fourth_break, capsys):
    def noisy(u, steps):
        diff, count = 1.0, 0
        while diff > 1e-12 and count < steps:
            before = u.copy()
            u[1:-1] = 0.5 * (before[:-2] + before[2:])
            diff = float(np.abs(u - before).max())
            print("step", count)
            count += 1
        return u

    f = tk.jit(noisy, backend="cpu")
    mine, theirs = _grid(), _grid()
    np.testing.assert_array_equal(f(mine, 8), noisy(theirs, 8))
    printed = capsys.readouterr().out
    assert printed.count("step 7\n") == 2  # once by the jitted call, once by NumPy's: never 3
    (choice,) = f._breaks.log.eager.values()
    assert choice.stopped_run_seconds is None


def test_kept_in_segments_a_first_call_never_stops(stop_at_the_fourth_break):
    for f in (tk.jit(relax, backend="cpu", numpy_fallback=False),
              tk.jit(relax, backend="gpu-simulated")):
        TRIPS.clear()
        mine, theirs = _grid(), _grid()
        got = f(mine, 10)
        assert TRIPS == list(range(10))
        TRIPS.clear()
        assert float(np.asarray(tk.device_get(got[0]))) == relax(theirs, 10)[0]
        assert not f._breaks.log.eager


def test_segments_that_do_the_work_keep_a_first_call_in_segments(monkeypatch):
    """The Python around a segment is not compared with nothing: where the segments' runs are
    most of the call (a sort of a million numbers per trip, interpreted), the call goes on."""
    monkeypatch.setattr(eager, "GIVE_UP_BREAKS", 2)
    monkeypatch.setattr(eager, "GIVE_UP_SECONDS", 0.0)

    def heavy(x, steps):
        total, count = 0.0, 0
        while total < 1e300 and count < steps:
            x = np.sort(x[::-1] + 1.0)
            total = float(x[0])
            count += 1
        return x

    x = np.random.default_rng(0).random(1 << 20)
    f = tk.jit(heavy, backend="cpu")
    np.testing.assert_array_equal(f(x, 4), heavy(x, 4))
    (choice,) = f._breaks.log.eager.values()
    assert choice.stopped_run_seconds is None and choice.first_seconds > 0
