"""Roofline ceilings: measured on this machine by toolkit's own compiler, or read from a spec
sheet. Every ceiling says which (``source``). Measurements are cached per machine."""
from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import sys
import time
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from .version import __version__


@dataclass(frozen=True)
class Ceiling:
    name: str
    kind: str  # "bandwidth" (bytes/s) or "compute" (FLOP/s)
    value: float
    source: str  # "measured" or "spec sheet"
    threads: int = 0
    detail: str = ""


@dataclass(frozen=True)
class Ceilings:
    device: str
    items: tuple[Ceiling, ...] = field(default_factory=tuple)
    measured_at: str = ""  # when measured (ISO 8601); "" for spec sheets
    load: float | None = None  # the 1-minute load average while measuring (os.getloadavg)
    doubts: tuple[str, ...] = ()  # how the measurements contradict themselves (see contradictions)

    def of_kind(self, kind: str) -> list[Ceiling]:
        return [c for c in self.items if c.kind == kind]

    def best(self, kind: str, source: str | None = None) -> Ceiling | None:
        found = [c for c in self.of_kind(kind) if source is None or c.source == source]
        return max(found, key=lambda c: c.value) if found else None

    def attainable(self, intensity: float) -> float:
        """The roofline bound at ``intensity`` FLOP/byte from the best ceilings of one source:
        measured ones when there are any (the kernels ran here), else the spec sheet's."""
        source = (
            "measured"
            if self.best("bandwidth", "measured") or self.best("compute", "measured")
            else None
        )
        bw, peak = self.best("bandwidth", source), self.best("compute", source)
        bounds = [c.value for c in (peak,) if c] + ([bw.value * intensity] if bw else [])
        return min(bounds) if bounds else float("nan")

    def __add__(self, other: Ceilings) -> Ceilings:
        measured = self if self.measured_at else other
        return Ceilings(f"{self.device} + {other.device}", self.items + other.items,
                        measured.measured_at, measured.load, self.doubts + other.doubts)

    def when(self) -> str:
        """``measured 2026-11-26 07:12 (load 3.1 on 2 cores)``, or "" for spec sheets."""
        if not self.measured_at:
            return ""
        day, _, clock = self.measured_at.partition("T")
        load = f" (load {self.load:.1f} on {os.cpu_count()} cores)" if self.load is not None else ""
        return f"measured {day} {clock[:5]}{load}".rstrip()

    def to_dict(self) -> dict:
        return {"device": self.device, "items": [asdict(c) for c in self.items],
                "measured_at": self.measured_at, "load": self.load, "doubts": list(self.doubts)}

    @classmethod
    def from_dict(cls, data: dict) -> Ceilings:
        return cls(data["device"], tuple(Ceiling(**c) for c in data["items"]),
                   data.get("measured_at", ""), data.get("load"), tuple(data.get("doubts", ())))

    def __str__(self) -> str:
        lines = [f"ceilings for {self.device}:"]
        for c in self.items:
            unit = "GB/s" if c.kind == "bandwidth" else "GFLOP/s"
            lines.append(f"  {c.name:<44} {c.value / 1e9:10.1f} {unit:<8} ({c.source})")
        return "\n".join(lines)


# ---- spec sheets --------------------------------------------------------------------------
def load_spec_sheets() -> dict:
    try:
        from importlib import resources

        text = resources.files("toolkit._data").joinpath("spec_sheets.json").read_text()
    except (ModuleNotFoundError, FileNotFoundError):  # a source checkout: data/ beside toolkit/
        path = os.path.join(
            os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "spec_sheets.json"
        )
        with open(path) as f:
            text = f.read()
    return json.loads(text)["devices"]


def spec_ceilings(device: str, dtype: str = "float32") -> Ceilings:
    sheets = load_spec_sheets()
    if device not in sheets:
        raise KeyError(f"no spec sheet for {device!r}; known: {', '.join(sorted(sheets))}")
    sheet = sheets[device]
    items = [
        Ceiling(
            f"{device} memory bandwidth",
            "bandwidth",
            sheet["memory_bandwidth"],
            "spec sheet",
            detail=sheet["source"],
        )
    ]
    for key, value in sheet["flops_per_second"].items():
        if key.split("_")[0] in (dtype, dtype.replace("float", "bfloat")) or key == dtype:
            items.append(
                Ceiling(
                    f"{device} peak {key}", "compute", value, "spec sheet", detail=sheet["source"]
                )
            )
    return Ceilings(device, tuple(items))


# ---- measurement --------------------------------------------------------------------------
def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _cache_path(backend: str) -> str | None:
    from .backends.disk_cache import cache_dir

    directory = cache_dir()
    if directory is None:
        return None
    key = hashlib.sha256(
        f"{cpu_model()}|{os.cpu_count()}|{__version__}|{backend}".encode()
    ).hexdigest()[:16]
    return os.path.join(directory, f"ceilings-{key}.json")


_THREADS = re.compile(r", (\d+) thread\(s\)$")
NO_FASTER = 1.05  # more threads must measure at least this much faster, or the pair is doubted


def contradictions(ceilings: Ceilings) -> list[str]:
    """How measured ceilings contradict themselves: a kernel measured on more threads no faster
    than on one (the machine was busy, or throttled, while measuring). Each says which."""
    by_family: dict[str, dict[int, Ceiling]] = {}
    for c in ceilings.items:
        match = _THREADS.search(c.name)
        if c.source == "measured" and match:
            family = re.sub(r"\s+\([^)]*\)", "", c.name[:match.start()])  # "STREAM copy"
            by_family.setdefault(family, {})[int(match.group(1))] = c
    doubts = []
    for family, runs in by_family.items():
        one = runs.get(1)
        for threads, many in sorted(runs.items()):
            if one is None or threads <= 1 or many.value >= NO_FASTER * one.value:
                continue
            unit, scale = ("GB/s", 1e9) if one.kind == "bandwidth" else ("GFLOP/s", 1e9)
            word = "slower" if many.value < one.value else "no faster"
            doubts.append(f"{family}: {threads} threads measured {word} than 1 "
                          f"({many.value / scale:.1f} vs {one.value / scale:.1f} {unit})")
    return doubts


def _load() -> float | None:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):  # not on every platform
        return None


def _best_seconds(call, repeats: int) -> float:
    call()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - t0)
    return best


class _Progress:
    def __init__(self, total: int, enabled: bool):
        self.total, self.done, self.enabled = total, 0, enabled

    def step(self, what: str) -> None:
        self.done += 1
        if self.enabled:
            bar = "#" * self.done + "." * (self.total - self.done)
            end = "\n" if self.done == self.total else ""
            print(f"\rmeasuring ceilings [{bar}] {what:<40}", end=end, file=sys.stderr, flush=True)


def measure_ceilings(
    backend: str = "cpu",
    elements: int = 32 << 20,
    repeats: int = 5,
    progress: bool = True,
    cache: bool = True,
    remeasure: bool = False,
) -> Ceilings:
    """Bandwidth (STREAM copy y=-x and triad a=b+s*c) and compute (an FMA-bound kernel) compiled
    by toolkit, plus BLAS sgemm; each on one thread and on every core, the best of ``repeats``
    runs. Stored per machine and per array size, with the date and how they were measured, so
    measurements at different sizes never overwrite each other; ``remeasure=True`` measures again.

    Ceilings that contradict themselves (more threads no faster than one: see
    ``contradictions``) are measured once more; if they still do, they are kept with their
    ``doubts``, and the roofline plot flags them with their date and load. A stored measurement
    from before that check is checked when read, and measured again if it fails it."""
    if backend != "cpu":
        raise ValueError(f"ceilings can be measured on the cpu backend here, not {backend!r}")
    path = _cache_path(backend) if cache else None
    stored = _stored_measurements(path)
    entry = stored.get(str(elements))
    if entry is not None and not remeasure:
        cached = Ceilings.from_dict(entry["ceilings"])
        if entry.get("checked") or not contradictions(cached):
            return replace(cached, measured_at=cached.measured_at or entry.get("measured_at", ""))
    result = _measure(elements, repeats, progress)
    if result.doubts:  # once more: a busy moment passes
        again = _measure(elements, repeats, progress)
        result = again if len(again.doubts) <= len(result.doubts) else result
    if path:
        stored = _stored_measurements(path)  # another process's measurements at other sizes stay
        stored[str(elements)] = {
            "ceilings": result.to_dict(), "elements": elements, "bytes_per_array": elements * 4,
            "measured_at": result.measured_at, "load": result.load, "checked": True,
            "repeats": repeats,
            "provenance": f"toolkit {__version__} measure_ceilings: "
                          f"best of {repeats} runs"}
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump({"format": 2, "measurements": stored}, f, indent=1)
        os.replace(tmp, path)
    return result


def _measure(elements: int, repeats: int, progress: bool) -> Ceilings:
    """One measurement of every ceiling, with its date, the load and its contradictions."""
    from . import api
    from .backends.cpu.executor import num_threads

    started, load_before = time.time(), _load()
    n = elements
    x = np.ones(n, np.float32)
    y = np.ones(n, np.float32)
    threads = num_threads()
    progress_bar = _Progress(3 * len({1, threads}) + 1, progress)
    items: list[Ceiling] = []

    def kernel_seconds(fn, args, t: int) -> float:
        compiled = api.jit(fn, backend="cpu", on_recompile="ignore").lower(*args).compile()
        compiled._executable.threads = t
        return _best_seconds(lambda: compiled(*args), repeats)

    for t in sorted({1, threads}):
        s = kernel_seconds(lambda a: -a, (x,), t)
        items.append(
            Ceiling(
                f"STREAM copy (y = -x), {t} thread(s)", "bandwidth", 2 * n * 4 / s, "measured", t
            )
        )
        progress_bar.step(f"STREAM copy, {t} thread(s)")
        s = kernel_seconds(lambda a, b: a + 3.0 * b, (x, y), t)
        items.append(
            Ceiling(
                f"STREAM triad (a = b + s*c), {t} thread(s)",
                "bandwidth",
                3 * n * 4 / s,
                "measured",
                t,
            )
        )
        progress_bar.step(f"STREAM triad, {t} thread(s)")
        m = min(n, max(1 << 20, 1 << 16) if t > 1 else 1 << 16)
        z = np.ones(m, np.float32)
        steps = 64

        def fma_chain(v):
            for i in range(steps):
                v = v * np.float32(0.999) + np.float32(0.001 * (i % 3))
            return v

        s = kernel_seconds(fma_chain, (z,), t)
        items.append(Ceiling(f"FMA-bound kernel (cache-resident), {t} thread(s)", "compute",
                             2 * steps * m / s, "measured", t, "x = x*a + b, 64 times per element"))
        progress_bar.step(f"FMA kernel, {t} thread(s)")
    k = 1024 if n >= (1 << 20) else 256
    a = np.ones((k, k), np.float32)
    out = np.empty((k, k), np.float32)
    s = _best_seconds(lambda: np.matmul(a, a, out=out), repeats)
    items.append(Ceiling(f"BLAS sgemm {k}^3 (NumPy's BLAS, its own threads)", "compute",
                         2 * k ** 3 / s, "measured", 0))
    progress_bar.step("BLAS sgemm")
    loads = [v for v in (load_before, _load()) if v is not None]
    result = Ceilings(f"{cpu_model()} ({threads} threads)", tuple(items),
                      time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
                      max(loads) if loads else None)
    return replace(result, doubts=tuple(contradictions(result)))


def _stored_measurements(path: str | None) -> dict:
    """size (as text) -> stored measurement; older single-measurement files read as one."""
    if not path or not os.path.exists(path):
        return {}
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    if data.get("format") == 2:
        return dict(data.get("measurements", {}))
    if "elements" in data and "ceilings" in data:
        return {str(data["elements"]): data}
    return {}


def bound_text(attained: float, bound: float) -> str:
    """'63%' of the roofline bound, or, above it, what that means: the data was in cache, so the
    DRAM roof does not bound it (never an unexplained 286 %)."""
    if not bound or bound != bound:
        return ""
    if attained > 1.05 * bound:
        return "cache-resident: above the DRAM roof"
    return f"{100 * attained / bound:.0f}%"
