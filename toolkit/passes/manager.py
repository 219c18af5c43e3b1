"""The pass manager: runs a named pipeline, timing each pass (a PassEvent), verifying the
module after each one, and keeping the text after every pass whose name matches a pattern
(as XLA's --xla_dump_hlo_pass_re), with a unified diff against the stage before."""
from __future__ import annotations

import difflib
import re

from ..profiler.progress import phase as progress_phase
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

from ..config import env_str, warn_once
from ..ir.nodes import Module
from .called import CONTROL, optimize_called
from ..ir.verifier import (Answered, VerificationError, built_questions, built_questions_lazily,
                           verify, verify_after)
from ..profiler.events import FusionDecision, PassEvent

PassFn = Callable[[Module], tuple[Module, Counter, list]]  # -> (module, rewrites, decisions)


@dataclass(frozen=True)
class PassDump:
    pass_name: str
    index: int
    text: str  # the module after the pass
    diff: str  # unified diff against the module before it


@dataclass
class PipelineResult:
    module: Module
    passes: list[PassEvent] = field(default_factory=list)
    dumps: list[PassDump] = field(default_factory=list)
    # the passes' decisions as they made them, with the compile and the time to stamp them with
    # when first read (an unrolled loop makes tens of thousands, which an unprofiled first
    # call never reads)
    _unstamped: list = field(default_factory=list)
    _stamped: list = field(default_factory=list)

    def add_decisions(self, decisions: list, compile_id: int, start: float) -> None:
        if decisions:
            self._unstamped.append((decisions, compile_id, start))

    def absorb(self, inner: "PipelineResult") -> None:
        """A nested run's passes and decisions (a loop body's, a branch's)."""
        self.passes.extend(inner.passes)
        self._stamped.extend(inner._stamped)
        self._unstamped.extend(inner._unstamped)

    @property
    def decisions(self) -> list[FusionDecision]:
        if self._unstamped:
            for decisions, compile_id, start in self._unstamped:
                self._stamped.extend(_with_compile(d, compile_id, start) for d in decisions)
            self._unstamped = []
        return self._stamped

    @property
    def rewrites(self) -> Counter:
        total: Counter = Counter()
        for p in self.passes:
            total.update(dict(p.rewrites))
        return total


def verify_passes() -> str:
    """``TOOLKIT_VERIFY_PASSES``: ``end`` (the default) or ``each``."""
    value = (env_str("TOOLKIT_VERIFY_PASSES") or "end").lower()
    if value not in ("each", "end"):
        warn_once("TOOLKIT_VERIFY_PASSES", value, "expected 'each' or 'end'; using 'end'")
        return "end"
    return value


class PassError(RuntimeError):
    """A pass produced an invalid module (an internal error that names the pass)."""


@dataclass(frozen=True)
class Pipeline:
    name: str
    passes: tuple[tuple[str, PassFn], ...]
    fixed_point: tuple[str, ...] = ()  # these passes repeat, in order, until none changes
    max_rounds: int = 4
    # passes that change nothing when run on their own output (CSE): in the fixed point, such a
    # pass is not run again on a module no pass changed since it made it
    idempotent: tuple[str, ...] = ()

    def run(self, module: Module, clock=None, dump_pattern: str | None = None,
            verify_each: bool | None = None, compile_id: int = 0) -> PipelineResult:
        """Run the passes on ``module``. ``verify_each``: verify after every pass that changed
        the module (True), or once at the end (False); None reads ``TOOLKIT_VERIFY_PASSES``
        (``each``, which the test suite sets, or ``end``, the default: a 20k-instruction
        program spent half a second verifying between passes). A module found invalid at the
        end is optimised again, verified after each pass, so that the error names the pass."""
        if verify_each is None:
            verify_each = verify_passes() == "each"
        if verify_each:
            return self._run(module, clock, dump_pattern, True, compile_id)
        result = self._run(module, clock, dump_pattern, False, compile_id)
        if result.module is module:
            return result  # (no pass changed it: what the caller gave, checked where it was made)
        try:
            # (what the builder inferred for the module given is trusted: an instruction a pass
            # rebuilt around operands of the same shapes, keeping its attributes, or adopted
            # into a fused computation, asks what the builder answered; only the new ones are
            # inferred again)
            verify_after(result.module, built_questions_lazily(module))
        except VerificationError as e:
            self._run(module, clock, dump_pattern, True, compile_id)  # raises, naming the pass
            raise PassError(f"the pipeline '{self.name}' produced an invalid module: {e}") from e
        return result

    def _run(self, module: Module, clock, dump_pattern: str | None, verify_each: bool,
             compile_id: int) -> PipelineResult:
        now = clock.now if clock is not None else time.perf_counter
        result = PipelineResult(module)
        pattern = re.compile(dump_pattern) if dump_pattern else None
        text_before = module.to_text() if pattern else ""

        # what shape inference answered for the last verified module (or the builder, for the
        # module the pipeline starts from): not asked again
        verified = built_questions(module) if verify_each else Answered()

        def run_one(name: str, fn: PassFn) -> bool:
            nonlocal text_before, verified
            progress_phase(f"pass {name}")
            start = now()
            new, rewrites, decisions = fn(result.module)
            duration = now() - start
            changed = new is not result.module
            if changed and verify_each:
                try:
                    # (what the last verified module holds is not checked again)
                    verified = verify_after(new, verified)
                except VerificationError as e:
                    raise PassError(f"pass '{name}' produced an invalid module: {e}") from e
            result.module = new
            result.passes.append(PassEvent(name, compile_id, start, duration, changed,
                                           tuple(sorted(rewrites.items()))))
            result.add_decisions(decisions, compile_id, start)
            if pattern is not None and pattern.search(name):
                text = new.to_text()
                diff = "".join(
                    difflib.unified_diff(
                        text_before.splitlines(True),
                        text.splitlines(True),
                        f"before {name}",
                        f"after {name}",
                    )
                )
                result.dumps.append(PassDump(name, len(result.passes), text, diff))
                text_before = text
            elif pattern is not None and changed:
                text_before = new.to_text()
            return changed

        by_name = dict(self.passes)
        for name, fn in self.passes:
            if name in self.fixed_point:
                if name != self.fixed_point[0]:
                    continue
                made_by: dict[str, Module] = {}  # an idempotent pass -> the module it returned
                for _ in range(self.max_rounds):
                    changed = False
                    for n in self.fixed_point:
                        if made_by.get(n) is result.module:
                            continue  # its own output, unchanged since: it would change nothing
                        changed = run_one(n, by_name[n]) or changed
                        if n in self.idempotent:
                            made_by[n] = result.module
                    if not changed:
                        break
            else:
                run_one(name, fn)
        if self.passes and any(i.opcode in CONTROL for i in result.module.entry.instructions):
            def run_called(sub: Module) -> Module:  # loop bodies and branches: the same pipeline
                inner = self._run(sub, clock, None, verify_each, compile_id)
                result.absorb(inner)
                return inner.module

            result.module = optimize_called(result.module, run_called)
            if verify_each:
                try:
                    verify(result.module)
                except VerificationError as e:
                    raise PassError(
                        f"optimising the loop bodies and branches produced an invalid module: {e}"
                    ) from e
        return result


def _with_compile(d: FusionDecision, compile_id: int, start: float) -> FusionDecision:
    # (the constructor, not dataclasses.replace: an unrolled loop makes tens of thousands)
    return FusionDecision(d.producer, d.consumer, d.fused, d.reason, d.message,
                          d.producer_location, d.consumer_location, d.bytes_saved, d.fusion,
                          compile_id, start)
