"""Chrome Trace Event JSON that Perfetto opens: one process for the host (compilation and
dispatch tracks), one per device (a track per stream, one for the copy engine), live-memory
counters, and flow arrows from each recompilation to the kernels it produced."""
from __future__ import annotations

from .events import (AllocationEvent, CollectiveEvent, CompileEvent, DispatchEvent,
                     GraphBreakEvent, KernelEvent, PassEvent, RecompileEvent, TransferEvent)

HOST_PID = 1
COMPILE_TID, DISPATCH_TID = 1, 2
COPY_TID = 1000
COLLECTIVES_STREAM = 99  # a track of its own on each host device, beside its kernels


def _us(seconds: float, origin: float) -> float:
    return round((seconds - origin) * 1e6, 3)


def _dur(seconds: float) -> float:
    return round(max(seconds, 0.0) * 1e6, 3)


def chrome_trace(events, origin: float = 0.0) -> dict:
    out: list[dict] = [
        {"ph": "M", "name": "process_name", "pid": HOST_PID, "args": {"name": "host"}},
        {
            "ph": "M",
            "name": "thread_name",
            "pid": HOST_PID,
            "tid": COMPILE_TID,
            "args": {"name": "compilation"},
        },
        {
            "ph": "M",
            "name": "thread_name",
            "pid": HOST_PID,
            "tid": DISPATCH_TID,
            "args": {"name": "host dispatch"},
        },
    ]
    devices: dict[str, int] = {}
    streams: set[tuple[int, int]] = set()

    def device_pid(device: str) -> int:
        if device not in devices:
            devices[device] = HOST_PID + 1 + len(devices)
            out.append(
                {
                    "ph": "M",
                    "name": "process_name",
                    "pid": devices[device],
                    "args": {"name": f"device {device}"},
                }
            )
        return devices[device]

    def stream_tid(pid: int, stream: int, name: str) -> int:
        tid = COPY_TID if name == "copy engine" else 10 + stream
        if (pid, tid) not in streams:
            streams.add((pid, tid))
            out.append(
                {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}}
            )
        return tid

    recompiles = {e.compile_id: e for e in events if isinstance(e, RecompileEvent)}
    flow_id = 0
    flowed: set[tuple[int, str]] = set()
    for e in events:
        if isinstance(e, CompileEvent):
            args = {"signature": e.signature, "backend": e.backend, "cache": e.cache,
                    "compile_id": e.compile_id, "call_site": e.call_site}
            out.append(
                {
                    "ph": "X",
                    "cat": "compile",
                    "name": f"compile {e.function}",
                    "pid": HOST_PID,
                    "tid": COMPILE_TID,
                    "ts": _us(e.start, origin),
                    "dur": _dur(e.duration),
                    "args": args,
                }
            )
            for p in e.phases:
                out.append(
                    {
                        "ph": "X",
                        "cat": "compile",
                        "name": p.name,
                        "pid": HOST_PID,
                        "tid": COMPILE_TID,
                        "ts": _us(p.start, origin),
                        "dur": _dur(p.duration),
                    }
                )
        elif isinstance(e, RecompileEvent):
            causes = "; ".join(c.message for c in e.causes)
            out.append(
                {
                    "ph": "i",
                    "s": "p",
                    "cat": "recompile",
                    "name": f"recompile {e.function}",
                    "pid": HOST_PID,
                    "tid": COMPILE_TID,
                    "ts": _us(e.start, origin),
                    "args": {
                        "causes": causes,
                        "call_site": e.call_site,
                        "cost_ms": e.duration * 1e3,
                        "avoidable": e.avoidable,
                    },
                }
            )
        elif isinstance(e, PassEvent):
            out.append(
                {
                    "ph": "X",
                    "cat": "pass",
                    "name": e.pass_name,
                    "pid": HOST_PID,
                    "tid": COMPILE_TID,
                    "ts": _us(e.start, origin),
                    "dur": _dur(e.duration),
                    "args": {"changed": e.changed, "rewrites": dict(e.rewrites)},
                }
            )
        elif isinstance(e, GraphBreakEvent):  # the glue before a segment, then the segment
            where = f" at {e.location}" if e.location else ""
            out.append({"ph": "X", "cat": "python_glue", "name": f"{e.function}: Python glue",
                        "pid": HOST_PID, "tid": DISPATCH_TID,
                        "ts": _us(e.start - e.glue, origin), "dur": _dur(e.glue),
                        "args": {"ends_with": f"{e.reason}{where}"}})
            out.append({"ph": "X", "cat": "segment",
                        "name": f"{e.function}: segment to {e.reason}{where}",
                        "pid": HOST_PID, "tid": DISPATCH_TID, "ts": _us(e.start, origin),
                        "dur": _dur(e.duration),
                        "args": {"instructions": e.instructions, "compiled": e.compiled}})
        elif isinstance(e, DispatchEvent):
            out.append(
                {
                    "ph": "X",
                    "cat": "cpu_op",
                    "name": e.function,
                    "pid": HOST_PID,
                    "tid": DISPATCH_TID,
                    "ts": _us(e.start, origin),
                    "dur": _dur(e.duration),
                    "args": {"cache_hit": e.cache_hit, "compile_id": e.compile_id},
                }
            )
        elif isinstance(e, KernelEvent):
            pid = device_pid(e.device)
            tid = stream_tid(pid, e.stream, f"stream {e.stream}")
            ts = _us(e.start, origin)
            out.append(
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": e.name,
                    "pid": pid,
                    "tid": tid,
                    "ts": ts,
                    "dur": _dur(e.duration),
                    "args": {
                        "flops": e.flops,
                        "transcendentals": e.transcendentals,
                        "bytes": e.bytes_accessed,
                        "launch": e.launch,
                        "kind": e.kind,
                        "source": e.source,
                        "function": e.function,
                        "compile_id": e.compile_id,
                        **({"pass": e.phase} if e.phase else {}),
                    },
                }
            )
            rec = recompiles.get(e.compile_id)
            if rec is not None and (e.compile_id, e.name) not in flowed:
                flowed.add((e.compile_id, e.name))
                flow_id += 1
                out.append(
                    {
                        "ph": "s",
                        "cat": "recompile",
                        "name": "recompile → kernel",
                        "id": flow_id,
                        "pid": HOST_PID,
                        "tid": COMPILE_TID,
                        "ts": _us(rec.start, origin),
                    }
                )
                out.append({"ph": "f", "bp": "e", "cat": "recompile", "name": "recompile → kernel",
                            "id": flow_id, "pid": pid, "tid": tid, "ts": ts})
        elif isinstance(e, TransferEvent):
            pid = device_pid(e.device or "cpu:0")
            tid = stream_tid(pid, e.stream, "copy engine")
            out.append({"ph": "X", "cat": "gpu_memcpy", "name": e.direction, "pid": pid, "tid": tid,
                        "ts": _us(e.start, origin), "dur": _dur(e.duration),
                        "args": {"bytes": e.bytes, "what": e.what, "location": e.location}})
        elif isinstance(e, CollectiveEvent):
            pid = device_pid(f"host:{e.device}")
            tid = stream_tid(pid, COLLECTIVES_STREAM, "collectives")
            args = {"group": list(e.group), "bytes": e.bytes, "last to arrive": e.last,
                    "algbw GB/s": e.algbw / 1e9, "busbw GB/s": e.busbw / 1e9}
            if e.wait > 0:
                out.append({"ph": "X", "cat": "collective_wait", "name": f"wait: {e.op}",
                            "pid": pid, "tid": tid, "ts": _us(e.start, origin),
                            "dur": _dur(e.wait), "args": args})
            out.append({"ph": "X", "cat": "collective", "name": f"{e.op} %{e.name}", "pid": pid,
                        "tid": tid, "ts": _us(e.start + e.wait, origin),
                        "dur": _dur(e.duration), "args": args})
        elif isinstance(e, AllocationEvent):
            pid = device_pid(e.device)
            out.append({"ph": "C", "name": "live memory", "pid": pid, "ts": _us(e.start, origin),
                        "args": {"live_bytes": e.live_bytes}})
    return {"displayTimeUnit": "ns", "traceEvents": out,
            "otherData": {"producer": "toolkit", "clock_origin_seconds": origin}}
