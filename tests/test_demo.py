"""The README's main job runs and writes a self-contained report."""
import json

from toolkit.__main__ import main


def test_demo_writes_report(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path), "--scale", "0.01"]) == 0
    report = (tmp_path / "report.html").read_text()
    assert report.startswith("<!DOCTYPE html>") and "softmax" in report
    # nothing loaded from the network
    assert "src='http" not in report and "href='http" not in report
    assert "x.shape[0]: now" in report  # the deliberate recompilation, explained
    trace = json.loads((tmp_path / "trace.json").read_text())
    assert any(e.get("cat") == "kernel" for e in trace["traceEvents"])
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert {r["name"].split()[0] for r in summary} == {
        "chain",
        "gelu",
        "softmax",
        "layernorm",
        "sum",
        "rowsum",
        "mlp",
    }
    assert all(r["max_abs_error"] < 1e-3 for r in summary)
    assert (tmp_path / "softmax.hlo").read_text().startswith("HloModule jit_softmax")
    assert "report:" in capsys.readouterr().out


def test_demo_reports_unknown_backend(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path), "--backend", "tpu"]) == 2
    assert "unknown backend 'tpu'" in capsys.readouterr().err


def test_demo_on_the_cpu_backend(tmp_path):
    assert main(["demo", "--out", str(tmp_path), "--scale", "0.005", "--backend", "cpu"]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert {r["backend"] for r in summary} == {"cpu"}
    assert all(r["max_abs_error"] < 1e-2 for r in summary)
