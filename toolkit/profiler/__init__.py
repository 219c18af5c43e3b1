"""Profiler core: event records, the recorder, sessions, JSON and Chrome-trace export,
reports. A leaf package: it imports nothing else of toolkit."""
from .clock import DEFAULT_CLOCK, ManualClock, PerfClock
from .events import (AllocationEvent, Cause, CompileEvent, DispatchEvent, FusionDecision,
                     KernelEvent, PassEvent, Phase, RecompileEvent, TransferEvent)
from .recorder import RECORDER
from .report import RecompileReport
from .session import Profile, profile

__all__ = ["DEFAULT_CLOCK", "ManualClock", "PerfClock", "AllocationEvent", "Cause", "CompileEvent",
           "DispatchEvent", "FusionDecision", "KernelEvent", "PassEvent", "Phase", "RecompileEvent",
           "TransferEvent", "RECORDER", "RecompileReport", "Profile", "profile"]
