"""Ceilings (measured and spec sheets), roofline and timeline plots, run comparison."""
import dataclasses
import json
import os
import pathlib
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.testing.compare import compare_images  # noqa: E402

import toolkit as tk  # noqa: E402
from toolkit.profiler import Profile  # noqa: E402
from toolkit.profiler.events import (Cause, CompileEvent, DispatchEvent, FusionDecision,  # noqa: E402
                                     KernelEvent, Phase, RecompileEvent, TransferEvent)
from toolkit.roofline import Ceiling, Ceilings, load_spec_sheets, measure_ceilings, spec_ceilings  # noqa: E402

BASELINE = pathlib.Path(__file__).parent / "baseline"
UPDATE = os.environ.get("TOOLKIT_UPDATE_GOLDEN") == "1"


def test_measured_ceilings_are_sane(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLKIT_CACHE_DIR", str(tmp_path))
    n = 1 << 21
    ceilings = measure_ceilings(elements=n, repeats=2, progress=False)
    a, out = np.ones(n, np.float32), np.empty(n, np.float32)
    t0 = time.perf_counter()
    for _ in range(5):
        np.copyto(out, a)
    numpy_copy = 2 * n * 4 * 5 / (time.perf_counter() - t0)
    for c in ceilings.of_kind("bandwidth"):
        assert c.source == "measured" and numpy_copy / 20 < c.value < numpy_copy * 20, (
            c,
            numpy_copy,
        )
    for c in ceilings.of_kind("compute"):
        assert 1e8 < c.value < 2e13, c  # positive, and below any CPU's spec sheet
    names = {c.name.split(" (")[0].split(",")[0] for c in ceilings.items}
    assert {"STREAM copy", "STREAM triad", "FMA-bound kernel"} <= names
    assert any(n.startswith("BLAS sgemm") for n in names)
    t0 = time.perf_counter()
    again = measure_ceilings(elements=n, repeats=2, progress=False)
    # reused from the per-machine cache
    assert again == ceilings and time.perf_counter() - t0 < 0.05
    (stored,) = list(tmp_path.glob("ceilings-*.json"))
    # another size: kept beside it
    other = measure_ceilings(elements=n // 2, repeats=1, progress=False)
    assert measure_ceilings(elements=n, repeats=2, progress=False) == ceilings
    assert measure_ceilings(elements=n // 2, repeats=1, progress=False) == other
    entry = json.loads(stored.read_text())["measurements"][str(n)]
    assert (
        entry["measured_at"]
        and entry["bytes_per_array"] == 4 * n
        and "best of 2 runs" in entry["provenance"]
    )
    # when, and under what load
    assert entry["checked"] and (entry["load"] is None or entry["load"] >= 0)
    assert ceilings.measured_at == entry["measured_at"] and ceilings.when().startswith("measured ")


def test_a_point_above_its_roof_is_explained_never_over_100_percent():
    from toolkit.roofline import bound_text

    assert bound_text(2.86e9, 1e9) == "cache-resident: above the DRAM roof"
    assert bound_text(0.63e9, 1e9) == "63%"
    assert bound_text(1.0, float("nan")) == ""


def test_spec_sheets_are_complete_and_sourced():
    sheets = load_spec_sheets()
    for device in ("NVIDIA A100 SXM4 80GB", "NVIDIA H100 SXM5 80GB", "NVIDIA H100 PCIe 80GB",
                   "NVIDIA H200 SXM 141GB", "NVIDIA L4", "NVIDIA GeForce RTX 4090"):
        sheet = sheets[device]
        assert sheet["source"].startswith("https://")
        assert 1e11 <= sheet["memory_bandwidth"] <= 1e13
        flops = sheet["flops_per_second"]
        assert 1e12 <= flops["float32"] <= 1e15
        assert all(v > 0 for v in flops.values())
        for key, value in flops.items():
            if key.endswith("_tensor") and key != "float64_tensor":
                assert value >= flops["float32"] * 0.9, (device, key)
    h100 = spec_ceilings("NVIDIA H100 SXM5 80GB")
    assert {c.source for c in h100.items} == {"spec sheet"}
    assert h100.best("bandwidth").value == 3.35e12
    with pytest.raises(KeyError, match="known:"):
        spec_ceilings("NVIDIA Z9000")


def synthetic_profile(scale: float = 1.0) -> Profile:
    p = Profile(name="synthetic")
    p.start, p.end = 0.0, 0.02
    p.extend(
        [
            CompileEvent(
                "f",
                "a.py:1",
                "x: f32[1024]",
                "cpu",
                1,
                0.0,
                0.006,
                (
                    Phase("trace", 0.0, 0.001),
                    Phase("passes", 0.001, 0.001),
                    Phase("llvm_ir", 0.002, 0.001),
                    Phase("llvm_optimize", 0.003, 0.002),
                    Phase("machine_code", 0.005, 0.001),
                ),
            ),
            CompileEvent(
                "f",
                "a.py:1",
                "x: f32[2048]",
                "cpu",
                2,
                0.008,
                0.004,
                (Phase("trace", 0.008, 0.001), Phase("machine_code", 0.009, 0.003)),
            ),
            RecompileEvent(
                "f",
                "a.py:1",
                "b.py:9",
                2,
                2,
                0.008,
                0.004,
                (Cause("SHAPE", "x.shape[0]", "1024", "2048", "x.shape[0]: now 2048, was 1024"),),
                "x: f32[2048]",
                "x: f32[1024]",
            ),
            DispatchEvent("f", 0.006, 0.001, False, 1),
            DispatchEvent("f", 0.012, 0.004, False, 2),
            KernelEvent(
                "loop_tanh_fusion",
                "cpu",
                0.0062,
                0.0007 * scale,
                flops=2e6,
                transcendentals=1e6,
                bytes_accessed=8e6,
                kind="kLoop",
                compile_id=1,
                source="a.py:3",
            ),
            KernelEvent(
                "input_reduce_fusion",
                "cpu",
                0.0122,
                0.0010 * scale,
                flops=4e6,
                bytes_accessed=16e6,
                kind="kInput",
                compile_id=2,
                source="a.py:4",
            ),
            KernelEvent(
                "dot.3",
                "cpu",
                0.0133,
                0.0020,
                flops=1e8,
                bytes_accessed=12e6,
                kind="dot",
                compile_id=2,
                source="a.py:5",
            ),
            TransferEvent("host_to_device", 8_000_000, 0.0140, 0.0008, "x", "b.py:9", "cpu:0"),
            FusionDecision("exp.1", "divide.2", False, "EXPENSIVE_WOULD_DUPLICATE", "..."),
        ]
    )
    return p


CEILINGS = Ceilings("test machine", (
    Ceiling("DRAM (measured)", "bandwidth", 20e9, "measured"),
    Ceiling("FMA (measured)", "compute", 100e9, "measured"),
    Ceiling("spec bandwidth", "bandwidth", 50e9, "spec sheet"),
    Ceiling("spec peak", "compute", 400e9, "spec sheet"),
))


def test_roofline_artists(monkeypatch):
    monkeypatch.setattr(plt, "show", lambda *a, **k: pytest.fail("plots must not call show()"))
    art = tk.plot.roofline(synthetic_profile(), CEILINGS)
    offsets = art["points"].get_offsets()
    assert len(offsets) == 3 and len(art["roofs"]) == 4 and len(art["labels"]) == 3
    # measured solid, spec dashed
    assert [line.get_linestyle() for line in art["roofs"]] == ["-", "--", "-", "--"]
    assert len(art["ridges"]) == 2
    dot = next(r for r in art["rows"] if r["name"] == "dot.3")
    assert dot["intensity"] == pytest.approx(1e8 / 12e6)
    # intensity 8.3 FLOP/byte: bound = min(100 GFLOP/s, 20 GB/s * 8.3) from the measured ceilings
    assert dot["percent_of_bound"] == pytest.approx(100 * (1e8 / 0.002) / 100e9)
    assert [t.get_text() for t in art["labels"]] == ["1", "2", "3"]  # by time, explained beside
    assert "% of bound" in art["table"].get_texts()[0].get_text()
    ax = art["axes"]
    assert "compiler estimate" in ax.get_xlabel() and "measured" in ax.get_ylabel()
    plt.close("all")


CROWDED_NAMES = ("rowsum/input_reduce_fusion", "chain/loop_add_fusion", "softmax/loop_exp_fusion",
                 "softmax/input_reduce_fusion", "mlp/dot.3", "mlp/loop_tanh_fusion",
                 "norm/input_reduce_fusion.1", "norm/loop_divide_fusion",
                 "chain/loop_multiply_fusion",
                 "scan/loop_add_fusion.2", "gelu/loop_tanh_fusion.1", "attn/dot.7")


def crowded_profile() -> Profile:
    """Twelve kernels, ten of them in one cluster (as a notebook's elementwise kernels are)."""
    p = Profile(name="crowded")
    p.start, p.end = 0.0, 1.0
    for i, name in enumerate(CROWDED_NAMES):
        kind = "dot" if "dot" in name else "kInput" if "reduce" in name else "kLoop"
        flops = 1e6 * (1 + 0.1 * i)
        intensity = 8.0 + i if kind == "dot" else 0.2 + 0.02 * i
        p.extend([KernelEvent(name, "cpu", 0.01 * i, 1e-4 * (1 + 0.05 * i), flops=flops,
                              bytes_accessed=flops / intensity, kind=kind, compile_id=1,
                              source=f"cell [3], line {i + 2}")])
    return p


# as measured by a busy machine: two threads no faster than one (STREAM copy)
STALE = Ceilings("test machine (2 threads)", (
    Ceiling("STREAM copy (y = -x), 1 thread(s)", "bandwidth", 10.0e9, "measured", 1),
    Ceiling("STREAM triad (a = b + s*c), 1 thread(s)", "bandwidth", 11.0e9, "measured", 1),
    Ceiling("STREAM copy (y = -x), 2 thread(s)", "bandwidth", 9.7e9, "measured", 2),
    Ceiling("STREAM triad (a = b + s*c), 2 thread(s)", "bandwidth", 18.0e9, "measured", 2),
    Ceiling("FMA-bound kernel (cache-resident), 1 thread(s)", "compute", 30e9, "measured", 1),
    Ceiling("FMA-bound kernel (cache-resident), 2 thread(s)", "compute", 58e9, "measured", 2),
    Ceiling("BLAS sgemm 1024^3 (NumPy's BLAS, its own threads)", "compute", 70e9, "measured", 0),
), measured_at="2026-11-20T09:14:03+0000", load=4.2)


def test_every_point_is_numbered_where_no_label_covers_another():
    from matplotlib.colors import to_hex

    fig, ax = plt.subplots(figsize=(9, 5))
    art = tk.plot.roofline(crowded_profile(), STALE, ax=ax)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    texts = art["labels"] + art["ceiling_labels"]
    assert sorted(int(t.get_text()) for t in art["labels"]) == list(range(1, 13))
    boxes = [t.get_window_extent(renderer) for t in texts]
    frame = ax.get_window_extent(renderer)
    overlapping = [(texts[i].get_text(), texts[j].get_text()) for i in range(len(boxes))
                   for j in range(i + 1, len(boxes)) if boxes[i].overlaps(boxes[j])]
    assert not overlapping
    assert all(frame.contains(b.x0, b.y0) and frame.contains(b.x1, b.y1) for b in boxes)
    table = [t.get_text() for t in art["table"].get_texts()]
    assert len(table) == 12 and all(f"{i + 1}. " in t for i, t in enumerate(table))
    assert all(any(name in t for t in table) for name in CROWDED_NAMES)
    line_colors = [to_hex(line.get_color()) for line in art["roofs"]]
    assert len(set(line_colors)) == len(line_colors) == 7  # each ceiling its own colour
    for line, label, c in zip(art["roofs"], art["ceiling_labels"], STALE.of_kind("bandwidth")
                              + STALE.of_kind("compute")):
        assert to_hex(label.get_color()) == to_hex(line.get_color())  # labelled at its line:
        x, y = label.xy
        assert y == pytest.approx(c.value * x if c.kind == "bandwidth" else c.value)
        assert c.name.split(" (")[0] in label.get_text()
    plt.close(fig)


def test_stale_ceilings_are_flagged_with_their_date_and_load():
    from toolkit.roofline import contradictions

    assert contradictions(STALE) == [
        "STREAM copy: 2 threads measured slower than 1 (9.7 vs 10.0 GB/s)"]
    doubted = Ceilings(STALE.device, STALE.items, STALE.measured_at, STALE.load,
                       tuple(contradictions(STALE)))
    art = tk.plot.roofline(crowded_profile(), doubted)
    flag = art["flag"].get_text().replace("\n", " ")
    assert "measured 2026-11-20 09:14 (load 4.2" in flag and "slower than 1" in flag, flag
    assert tk.plot.roofline(crowded_profile(), CEILINGS)["flag"] is None
    plt.close("all")
    # a kernel above its roof: 104% of the measured compute roof, which no cache explains
    p = Profile(name="above")
    p.extend([KernelEvent("dot.9", "cpu", 0.0, 1e-3, flops=104e6, bytes_accessed=1e6, kind="dot")])
    art = tk.plot.roofline(p, CEILINGS)
    assert "dot.9 reached 104% of its roof" in art["flag"].get_text().replace("\n", " ")
    plt.close("all")


def test_a_cached_measurement_that_contradicts_itself_is_measured_again(tmp_path, monkeypatch):
    import toolkit.roofline as roof

    monkeypatch.setenv("TOOLKIT_CACHE_DIR", str(tmp_path))
    path = roof._cache_path("cpu")
    n = 1 << 20
    items = [dataclasses.asdict(c) for c in STALE.items]
    old = {"ceilings": {"device": STALE.device, "items": items}, "elements": n,
           "measured_at": "2026-11-20T09:14:03+0000"}  # an entry from before the check
    pathlib.Path(path).write_text(json.dumps({"format": 2, "measurements": {str(n): old}}))
    fresh_items = tuple(dataclasses.replace(c, value=46.8e9) if c.name.startswith(
        "STREAM copy (y = -x), 2") else c for c in STALE.items)
    calls = []

    def measure(elements, repeats, progress):
        calls.append(elements)
        return Ceilings(STALE.device, fresh_items, "2026-11-26T07:00:00+0000", 0.5)

    monkeypatch.setattr(roof, "_measure", measure)
    got = roof.measure_ceilings(elements=n, progress=False)
    assert calls == [n] and not got.doubts
    assert got.best("bandwidth").value == 46.8e9
    entry = json.loads(pathlib.Path(path).read_text())["measurements"][str(n)]
    assert entry["checked"] and entry["load"] == 0.5
    assert entry["measured_at"] == "2026-11-26T07:00:00+0000"
    assert roof.measure_ceilings(elements=n, progress=False) == got and calls == [n]  # now reused

    # measured twice, still contradicting: kept, with its doubts
    def still_busy(elements, repeats, progress):
        calls.append(elements)
        return Ceilings(STALE.device, STALE.items, "2026-11-26T07:05:00+0000", 3.9,
                        tuple(roof.contradictions(STALE)))

    monkeypatch.setattr(roof, "_measure", still_busy)
    doubted = roof.measure_ceilings(elements=n, progress=False, remeasure=True)
    assert len(calls) == 3 and doubted.doubts and doubted.load == 3.9
    assert roof.measure_ceilings(elements=n, progress=False) == doubted and len(calls) == 3


def test_roofline_comparison_draws_arrows():
    art = tk.plot.roofline((synthetic_profile(1.0), synthetic_profile(0.5)), CEILINGS)
    assert len(art["arrows"]) == 3
    plt.close("all")


def test_timeline_artists():
    art = tk.plot.timeline(synthetic_profile(), min_label_fraction=0.01)
    assert art["lanes"] == ["compilation", "host dispatch", "cpu:0 stream 0", "cpu:0 copy engine"]
    assert len(art["phases"]) == 7 and len(art["dispatches"]) == 2 and len(art["kernels"]) == 3
    assert len(art["transfers"]) == 1 and len(art["markers"]) == 1
    texts = [t.get_text() for t in art["labels"]]
    assert any(t.startswith("recompile: x.shape[0]: now 2048, was 1024") for t in texts)
    # too narrow
    assert not any("H→D" in t.get_text() for t in tk.plot.timeline(synthetic_profile())["labels"])
    zoomed = tk.plot.timeline(synthetic_profile(), window=(12.0, 16.0))
    assert zoomed["axes"].get_xlim() == (12.0, 16.0)
    assert any("H→D 8.0 MB" in t.get_text() for t in zoomed["labels"])  # zoomed in, the label fits
    legend = [t.get_text() for t in art["legend"].get_texts()]
    assert (
        "recompile" in legend
        and "copy" in legend
        and any(t.startswith("compile: ") for t in legend)
    )
    assert any(t.startswith("kernel: ") for t in legend)
    plt.close("all")


@pytest.mark.parametrize("name", ["roofline", "timeline"])
def test_plots_match_stored_images(name, tmp_path):
    plt.rcParams.update({"font.family": "DejaVu Sans", "svg.hashsalt": "toolkit"})
    fig, ax = plt.subplots(figsize=(6, 4), dpi=72, layout="constrained")
    if name == "roofline":
        tk.plot.roofline(synthetic_profile(), CEILINGS, ax=ax)
    else:
        tk.plot.timeline(synthetic_profile(), ax=ax)
    actual = tmp_path / f"{name}.png"
    fig.savefig(actual)
    plt.close(fig)
    expected = BASELINE / f"{name}.png"
    if UPDATE or not expected.exists():
        expected.write_bytes(actual.read_bytes())
    assert compare_images(str(expected), str(actual), tol=8) is None


def test_compare_report():
    before, after = synthetic_profile(1.0), synthetic_profile(0.5)
    after.events = [
        e for e in after.events if not (isinstance(e, KernelEvent) and e.name == "dot.3")
    ]
    after.extend([KernelEvent("loop_new_fusion", "cpu", 0.015, 0.001, flops=1, bytes_accessed=1),
                  FusionDecision("exp.1", "divide.2", True, "FUSED", "...")])
    report = tk.compare(before, after)
    text = report.text()
    assert report.added == ["loop_new_fusion"] and report.removed == ["dot.3"]
    assert "kernel time: 3.700 ms -> 1.850 ms (-1.850 ms)" in text
    assert "fusion %exp.1 -> %divide.2: EXPENSIVE_WOULD_DUPLICATE -> FUSED" in text
    deltas = {k.name: k.delta for k in report.kernels}
    assert deltas["loop_tanh_fusion"] == pytest.approx(-0.00035)
    assert "<table>" in report._repr_html_()
