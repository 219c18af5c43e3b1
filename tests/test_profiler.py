"""Profile sessions: events, nesting, overhead, JSON round trip, Chrome trace format."""
import inspect
import json
import threading

import numpy as np
import pytest

import toolkit as tk
from toolkit.stages import Compiled
from toolkit.profiler import (RECORDER, CompileEvent, DispatchEvent, KernelEvent, ManualClock,
                              Profile, RecompileEvent)
from toolkit.profiler.events import Cause, Phase, TransferEvent, AllocationEvent


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_profile_collects_compiles_dispatches_and_kernels():
    def fresh(x):  # a history of its own: other tests compile softmax too, in any order
        return softmax(x)

    f = tk.jit(fresh)
    with tk.profile() as prof:
        f(np.ones((4, 8), np.float32))
        f(np.ones((4, 8), np.float32))
        f(np.ones((2, 8), np.float32))
    assert [c.signature for c in prof.compiles] == ["x: f32[4,8]", "x: f32[2,8]"]
    assert [p.name for p in prof.compiles[0].phases] == ["trace", "passes", "backend_compile"]
    assert len(prof.recompiles) == 1 and prof.recompiles[0].causes[0].code == "SHAPE"
    assert [d.cache_hit for d in prof.dispatches] == [False, True, False]
    kernels = prof.kernels
    assert {k.kind for k in kernels} == {"kInput", "kLoop"}
    assert len({k.name for k in kernels if k.compile_id == prof.compiles[0].compile_id}) == 3
    exp = next(k for k in kernels if k.transcendentals)  # the fusion computing exp and its sum
    assert exp.transcendentals == 32
    assert exp.bytes_accessed == (32 + 4) * 4 + (32 + 4) * 4  # reads x, max; writes exp, sum
    lines = inspect.getsourcelines(softmax)[1]
    assert exp.source == f"{__file__}:{lines + 1},{lines + 2}"
    assert all(k.compile_id in {c.compile_id for c in prof.compiles} for k in kernels)
    assert prof.overhead_seconds > 0 and 0 < prof.overhead_fraction < 1


def test_manual_clock_needs_no_sleeping():
    clock = ManualClock(100.0)
    f = tk.jit(lambda x: x + 1)
    with tk.profile(clock=clock) as prof:
        f(np.ones(3))
        clock.advance(0.5)
    assert prof.start == 100.0 and prof.end == 100.5 and prof.wall_seconds == 0.5
    assert all(e.start == 100.0 for e in prof.events)


def test_nested_sessions_both_see_events():
    f = tk.jit(lambda x: x * 3)
    with tk.profile() as outer:
        f(np.ones(2))
        with tk.profile() as inner:
            f(np.ones(2))
        f(np.ones(2))
    assert len(outer.dispatches) == 3 and len(inner.dispatches) == 1
    assert not RECORDER.active


def test_recording_off_builds_no_events(monkeypatch):
    f = tk.jit(lambda x: x + 1)
    f(np.ones(2))

    def boom(*a, **k):
        raise AssertionError("profiling path used while no profile is open")

    monkeypatch.setattr(Compiled, "execute_profiled", boom)
    monkeypatch.setattr(RECORDER, "record", boom)
    for _ in range(3):
        f(np.ones(2))
    assert not RECORDER.active


def test_events_from_threads_are_all_recorded():
    f = tk.jit(lambda x: x + 1)
    f(np.ones(4))
    barrier = threading.Barrier(4)  # all alive at once: thread idents are reused after exit

    def work():
        barrier.wait()
        for _ in range(50):
            f(np.ones(4))

    with tk.profile() as prof:
        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(prof.dispatches) == 200
    assert len({d.thread for d in prof.dispatches}) == 4


def test_save_load_round_trip(tmp_path):
    f = tk.jit(softmax)
    with tk.profile(name="round trip") as prof:
        f(np.ones((2, 3), np.float32))
        f(np.ones((3, 3), np.float32))
    prof.extend([TransferEvent("host_to_device", 96, 1.0, 0.1, "x", "a.py:3", "gpu:0"),
                 AllocationEvent(1.0, 96, 96, "gpu:0", "x")])
    path = tmp_path / "profile.json"
    prof.save(str(path))
    loaded = Profile.load(str(path))
    assert loaded == prof
    assert loaded.events == prof.events  # dataclass equality, nested Phase/Cause tuples included
    assert isinstance(loaded.recompiles[0].causes[0], Cause)
    assert isinstance(loaded.compiles[0].phases[0], Phase)
    data = json.loads(path.read_text())
    assert data["format"] == "toolkit-profile" and data["version"] == 1
    data["version"] = 99
    with pytest.raises(ValueError, match="newer than this toolkit"):
        Profile.from_dict(data)
    with pytest.raises(ValueError, match="not a toolkit profile"):
        Profile.from_dict({"format": "other"})


REQUIRED = {
    "X": {"name", "ph", "pid", "tid", "ts", "dur"},
    "M": {"name", "ph", "pid", "args"},
    "i": {"name", "ph", "pid", "ts", "s"},
    "C": {"name", "ph", "pid", "ts", "args"},
    "s": {"name", "ph", "pid", "tid", "ts", "id"},
    "f": {"name", "ph", "pid", "tid", "ts", "id", "bp"},
}


def validate_trace_event_format(trace: dict) -> None:
    assert set(trace) >= {"traceEvents", "displayTimeUnit"}
    json.dumps(trace)  # serialisable
    for ev in trace["traceEvents"]:
        ph = ev["ph"]
        assert ph in REQUIRED, ph
        missing = REQUIRED[ph] - set(ev)
        assert not missing, (ev, missing)
        if ph != "M":
            assert isinstance(ev["ts"], (int, float))
        if ph == "X":
            assert isinstance(ev["dur"], (int, float)) and ev["dur"] >= 0
        if ph == "C":
            assert isinstance(ev["args"], dict) and all(
                isinstance(v, (int, float)) for v in ev["args"].values()
            )
        assert isinstance(ev["pid"], int) and isinstance(ev.get("tid", 0), int)


def test_chrome_trace_tracks_and_flows(tmp_path):
    def fresh(x):
        return softmax(x)

    f = tk.jit(fresh)
    with tk.profile() as prof:
        f(np.ones((2, 8), np.float32))
        f(np.ones((4, 8), np.float32))
    prof.extend([TransferEvent("host_to_device", 64, prof.start, 1e-6, "x", device="cpu:0"),
                 AllocationEvent(prof.start, 64, 64)])
    path = tmp_path / "trace.json"
    trace = prof.to_chrome_trace(str(path))
    assert json.loads(path.read_text()) == trace
    validate_trace_event_format(trace)
    events = trace["traceEvents"]
    names = {
        (e["pid"], e.get("tid")): e["args"]["name"]
        for e in events
        if e["ph"] == "M" and e["name"] == "thread_name"
    }
    assert {"compilation", "host dispatch", "stream 0", "copy engine"} <= set(names.values())
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert kernels and all("flops" in e["args"] for e in kernels)
    flows_start = [e for e in events if e["ph"] == "s"]
    flows_end = [e for e in events if e["ph"] == "f"]
    recompile_id = prof.recompiles[0].compile_id
    assert flows_start and len(flows_start) == len(flows_end)
    assert {e["id"] for e in flows_start} == {e["id"] for e in flows_end}
    assert len(flows_end) == len(
        {k["name"] for k in kernels if k["args"]["compile_id"] == recompile_id}
    )
    assert any(e["ph"] == "C" and e["name"] == "live memory" for e in events)
    assert any(e["ph"] == "i" and e["cat"] == "recompile" for e in events)


def test_summary_text_and_html():
    def softmax(x):
        e = np.exp(x - x.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    f = tk.jit(softmax)
    with tk.profile() as prof:
        f(np.ones((2, 8), np.float32))
        f(np.ones((3, 8), np.float32))
    text = prof.summary()
    assert "compiles: 2 (1 recompiles)" in text
    assert "RECOMPILE #2 of softmax" in text and "x.shape[0]: now 3, was 2" in text
    assert "kernels:" in text and "GB/s" in text and "profiler overhead" in text
    assert prof._repr_html_().startswith("<pre")
    assert "Profile" in repr(prof)


def test_events_are_immutable():
    e = CompileEvent("f", "a.py:1", "x: f32[1]", "interpreter", 1, 0.0, 1.0)
    with pytest.raises(Exception):
        e.duration = 2.0
    assert not e.persistent_cache_hit
    assert KernelEvent("k", "cpu", 0.0, 1.0).device == "cpu:0"
    assert DispatchEvent("f", 0.0, 1.0, True, 1).cache_hit
    assert RecompileEvent("f", "", "", 1, 2, 0.0, 0.0, (), "", "").number == 2


def test_debug_session_prints_compiles_and_kernels():
    import io

    from toolkit.profiler.debug import PrintingSession

    out = io.StringIO()
    session = PrintingSession(2, out)
    f = tk.jit(lambda x: np.tanh(x) * 2)
    with session:
        f(np.ones(64, np.float32))
        f(np.ones(32, np.float32))
    text = out.getvalue()
    assert "[toolkit] compile lambda(x: f32[64])" in text
    assert "[toolkit] RECOMPILE #2 of lambda" in text and "x.shape[0]: now 32, was 64" in text
    assert "GFLOP/s" in text and "GB/s" in text
    assert not session.events  # it prints, it does not keep
