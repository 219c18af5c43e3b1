"""``python -m toolkit demo``: compile and profile the standard workloads (with a deliberate
recompilation), check them against NumPy, and write the static dashboard report, a Perfetto
trace and the profile as JSON."""
from __future__ import annotations

import json
import os
import statistics
import time

import numpy as np

from . import api
from .ir.ops import GroupOp
from .profiler import profile
from .workloads import DEMO, scaled


def _first_cause(prof) -> str:
    causes = prof.recompiles[0].causes if prof.recompiles else ()
    return causes[0].message if causes else "-"


def main(out_dir: str = "toolkit-report", backend: str | None = None, scale: float = 0.25,
         measure: bool = True) -> dict:
    os.makedirs(out_dir, exist_ok=True)
    compiled, summary, jitted, inputs = {}, [], {}, {}
    with profile(name="toolkit demo") as prof:
        for w in DEMO:
            w = scaled(w, scale)
            args = w.args()
            fn = w.make(np)
            f = jitted[w.name] = api.jit(fn, backend=backend)
            inputs[w.name] = args
            t0 = time.perf_counter()
            out = f(*args)
            first_ms = (time.perf_counter() - t0) * 1e3
            steady = []
            for _ in range(10):  # steady state: the median of ten calls (one-shot timings vary)
                t0 = time.perf_counter()
                out = f(*args)
                steady.append((time.perf_counter() - t0) * 1e3)
            expected = fn(*args)
            error = (
                float(
                    np.max(np.abs(np.asarray(out, np.float64) - np.asarray(expected, np.float64)))
                )
                if np.size(out)
                else 0.0
            )
            c = f.compiled(*args)  # the program the calls ran: no second compile
            compiled[w.name] = c
            summary.append(
                {
                    "name": w.name,
                    "backend": c.backend,
                    "first_call_ms": first_ms,
                    "steady_ms": statistics.median(steady),
                    "max_abs_error": error,
                    "kernels": sum(
                        i.opcode in GroupOp.COUNTED_AS_KERNELS
                        for i in c.optimized_hlo.entry.instructions
                    ),
                    "shapes": ", ".join(f"{np.asarray(a).dtype}{list(np.shape(a))}" for a in args),
                    **{
                        k: c.cost_analysis()[k]
                        for k in ("flops", "transcendentals", "bytes accessed")
                    },
                }
            )
            with open(os.path.join(out_dir, f"{w.make.__name__}.hlo"), "w") as fh:
                fh.write(c.as_text("hlo"))
        # a deliberate recompilation: the same softmax on half the rows
        name = scaled(DEMO[2], scale).name
        x = inputs[name][0]
        jitted[name](x[: max(1, x.shape[0] // 2)])
    ceilings = None
    if measure and prof.kernels and any(c.backend == "cpu" for c in compiled.values()):
        from .roofline import measure_ceilings

        ceilings = measure_ceilings(elements=1 << 22, progress=False)
    from .widgets.report import report_html

    report = os.path.join(out_dir, "report.html")
    with open(report, "w") as fh:
        fh.write(report_html(prof, ceilings, compiled, "toolkit demo", full_document=True))
    trace = os.path.join(out_dir, "trace.json")
    prof.to_chrome_trace(trace)
    prof.save(os.path.join(out_dir, "profile.json"))
    with open(os.path.join(out_dir, "summary.json"), "w") as fh:
        json.dump(summary, fh, indent=2)
    print(
        f"  {'workload':<24} {'backend':<11} {'kernels':>7}  {'first call':>10}  {'steady':>9}  "
        f"{'max|err|':>8}"
    )
    for s in summary:
        print(
            f"  {s['name']:<24} {s['backend']:<11} {s['kernels']:>7}  {s['first_call_ms']:7.1f} ms "
            " "
            f"{s['steady_ms']:6.2f} ms  {s['max_abs_error']:8.1e}"
        )
    print(
        f"  {len(prof.compiles)} compiles ({len(prof.recompiles)} recompile: "
        f"{_first_cause(prof)}), {len(prof.kernels)} "
        "kernel launches"
    )
    print(f"report: {os.path.abspath(report)}\ntrace:  {os.path.abspath(trace)} (open in https://ui.perfetto.dev)")
    return {"report": report, "trace": trace, "summary": summary, "profile": prof}
