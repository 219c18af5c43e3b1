"""``python -m toolkit demo``: compile the standard workloads, check them against NumPy, and
write a self-contained report (HLO at each stage, cost analysis, timings)."""
from __future__ import annotations

import html
import json
import os
import time
from dataclasses import asdict, dataclass

import numpy as np

from . import api
from .workloads import DEMO, scaled


@dataclass
class WorkloadResult:
    name: str
    description: str
    shapes: str
    backend: str
    trace_ms: float
    compile_ms: float
    run_ms: float
    numpy_ms: float
    max_abs_error: float
    cost: dict
    hlo: str
    optimized_hlo: str


def _ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1e3


def run_workload(workload, scale: float, backend: str | None) -> WorkloadResult:
    workload = scaled(workload, scale)
    args = workload.args()
    fn = workload.make(np)
    f = api.jit(fn, backend=backend)
    t0 = time.perf_counter()
    lowered = f.lower(*args)
    trace_ms = _ms(t0)
    t0 = time.perf_counter()
    compiled = lowered.compile()
    compile_ms = _ms(t0)
    t0 = time.perf_counter()
    out = compiled(*args)
    run_ms = _ms(t0)
    t0 = time.perf_counter()
    expected = fn(*args)
    numpy_ms = _ms(t0)
    error = float(np.max(np.abs(np.asarray(out, np.float64) - np.asarray(expected, np.float64)))) if np.size(out) else 0.0
    shapes = ", ".join(f"{np.asarray(a).dtype}{list(np.shape(a))}" for a in args)
    return WorkloadResult(workload.name, workload.name, shapes, compiled.backend, trace_ms,
                          compile_ms, run_ms, numpy_ms, error, compiled.cost_analysis(),
                          compiled.as_text("hlo"), compiled.as_text("optimized_hlo"))


def render_html(results: list[WorkloadResult]) -> str:
    e = html.escape
    rows = "".join(
        f"<tr><td>{e(r.name)}</td><td>{e(r.shapes)}</td><td>{e(r.backend)}</td>"
        f"<td>{r.trace_ms:.1f}</td><td>{r.compile_ms:.1f}</td><td>{r.run_ms:.1f}</td>"
        f"<td>{r.numpy_ms:.1f}</td><td>{r.cost['flops']:.3g}</td><td>{r.cost['transcendentals']:.3g}</td>"
        f"<td>{r.cost['bytes accessed']:.3g}</td><td>{r.max_abs_error:.2e}</td></tr>" for r in results)
    sections = "".join(
        f"<h2 id='{e(r.name)}'>{e(r.name)}: {e(r.description)}</h2>"
        f"<details><summary>HLO ({r.hlo.count(chr(10))} lines)</summary><pre>{e(r.hlo)}</pre></details>"
        f"<details><summary>optimized HLO</summary><pre>{e(r.optimized_hlo)}</pre></details>"
        for r in results)
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>toolkit report</title>
<style>body{{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}
td:first-child,th:first-child{{text-align:left}}pre{{background:#f6f8fa;padding:1em;overflow:auto;font-size:12px}}</style>
</head><body><h1>toolkit report</h1>
<p>Each workload traced from NumPy code, compiled and run; cost figures are compiler estimates
(XLA's counting rules); times are wall-clock for one call.</p>
<table><tr><th>workload</th><th>arguments</th><th>backend</th><th>trace ms</th><th>compile ms</th>
<th>run ms</th><th>NumPy ms</th><th>flops</th><th>transcendentals</th><th>bytes accessed</th><th>max |error|</th></tr>
{rows}</table>{sections}</body></html>
"""


def main(out_dir: str = "toolkit-report", backend: str | None = None, scale: float = 0.25) -> list[WorkloadResult]:
    os.makedirs(out_dir, exist_ok=True)
    results = []
    for w in DEMO:
        r = run_workload(w, scale, backend)
        results.append(r)
        with open(os.path.join(out_dir, f"{w.make.__name__}.hlo"), "w") as f:
            f.write(r.hlo)
        print(f"  {r.name:<22} {r.shapes:<48} trace {r.trace_ms:6.1f} ms  run {r.run_ms:7.1f} ms  "
              f"flops {r.cost['flops']:9.3g}  bytes {r.cost['bytes accessed']:9.3g}  "
              f"max|err| {r.max_abs_error:.1e}")
    report = os.path.join(out_dir, "report.html")
    with open(report, "w") as f:
        f.write(render_html(results))
    with open(os.path.join(out_dir, "summary.json"), "w") as f:
        json.dump([{k: v for k, v in asdict(r).items() if k not in ("hlo", "optimized_hlo")}
                   for r in results], f, indent=2)
    print(f"report: {os.path.abspath(report)}")
    return results
