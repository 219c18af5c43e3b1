"""``TOOLKIT_DEBUG=1`` prints every compile and recompilation as it happens; ``TOOLKIT_DEBUG=2``
also one line per kernel with its time, GFLOP/s, GB/s and source line (as tinygrad's DEBUG=2).
It is an ordinary profile session that prints instead of keeping, so it costs what profiling
costs, and nothing when the variable is unset."""
from __future__ import annotations

import sys

from ..config import env_int
from .events import CompileEvent, KernelEvent, RecompileEvent
from .report import recompile_text
from .session import Profile


class PrintingSession(Profile):
    def __init__(self, level: int, stream=None):
        super().__init__(name="TOOLKIT_DEBUG")
        self.level = level
        self.stream = stream or sys.stderr

    def _append(self, event) -> None:
        if isinstance(event, CompileEvent):
            phases = " ".join(f"{p.name}={p.duration * 1e3:.1f}ms" for p in event.phases)
            print(f"[toolkit] compile {event.function}({event.signature}) on {event.backend}: "
                  f"{event.duration * 1e3:.1f} ms ({phases}) {event.cache}", file=self.stream)
        elif isinstance(event, RecompileEvent):
            print(
                "[toolkit] " + recompile_text(event).replace("\n", "\n[toolkit] "), file=self.stream
            )
        elif isinstance(event, KernelEvent) and self.level >= 2:
            t = max(event.duration, 1e-12)
            flops = (event.flops + event.transcendentals) / t / 1e9
            gbps = event.bytes_accessed / t / 1e9
            print(
                f"[toolkit] {event.name:<28} {event.kind:<7} {event.duration * 1e3:9.3f} ms "
                f"{flops:9.2f} GFLOP/s {gbps:8.2f} GB/s  {event.launch:<10} {event.source}",
                file=self.stream,
            )


def install_from_environment(recorder) -> PrintingSession | None:
    level = env_int("TOOLKIT_DEBUG", 0, 0, 2)
    if level <= 0:
        return None
    session = PrintingSession(level)
    session.start = session.clock.now()
    recorder.attach(session)
    return session
