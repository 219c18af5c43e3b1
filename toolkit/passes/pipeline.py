"""Named pipelines. ``default``: inline calls; move loop-invariant work out of loops;
canonicalise dots (one GEMM where it goes without a copy); simplify, fold constants and CSE to
a fixed point; DCE; batch alike computations over windows of one array (attention one head at
a time: one batched dot; then the same passes once more); combine independent all-reduces (the
devices meet once); split concatenations of more operands than a fusion reads into trees;
then fuse, and let fusions alike up to their slice offsets take them as
operands so they share one kernel (loop bodies and branches: the same pipeline, each as a
module of its own). ``none``: no
optimisation (the optimised HLO equals the traced HLO)."""
from __future__ import annotations

from collections import Counter

from ..ir.nodes import Module
from .concatenate_splitting import RULE as SPLITTING_RULE, split_wide_concatenates
from .constant_folding import constant_folding
from .collective_combiner import combine_all_reduces
from .cse import cse, dce
from .dot_canonical import canonicalize_dots
from .fusion import FusionOptions, fuse
from .horizontal_batching import batch_alike
from .inline import inline_calls
from .loop_invariants import hoist_loop_invariants
from .loop_rolling import roll_loops
from .manager import Pipeline
from .offset_operands import offset_operands
from .simplify import simplify

PIPELINES = ("default", "simplify-only", "none")


def _plain(fn):
    def run(module: Module):
        new, counts = fn(module)
        return new, counts, []
    return run


def make_pipeline(name: str, evaluators: dict, fusion: FusionOptions = FusionOptions()) -> Pipeline:
    """``evaluators``: the reference interpreter's op table, used for constant folding."""
    if name not in PIPELINES:
        raise ValueError(f"unknown pipeline {name!r}; available: {', '.join(PIPELINES)}")
    if name == "none":
        return Pipeline("none", ())

    def fold(module):
        return constant_folding(module, evaluators)

    def batching_pass(module):
        new, counts, decisions = batch_alike(module)
        if new is module:
            return module, counts, decisions
        # the batched dots read stacked windows through transposes and reshapes: fold them into
        # the dots' dimensions and simplify what is left, as the first round did
        new, more, dot_decisions = canonicalize_dots(new)
        counts.update(more)
        for fn in (simplify, fold, cse, dce):
            new, more = fn(new)
            counts.update(more)
        return new, counts, decisions + dot_decisions

    def fusion_pass(module):
        result = fuse(module, fusion)
        return result.module, result.counts, result.decisions

    passes = [
        ("call-inliner", _plain(inline_calls)),
        # before everything else: the passes after it see one trip of an unrolled loop
        ("loop-rolling", roll_loops),
        ("while-loop-invariant-code-motion", _plain(hoist_loop_invariants)),
        # once, before the simplifier: its reshapes collapse with their neighbours there
        ("dot-canonicalization", canonicalize_dots),
        ("simplify", _plain(simplify)),
        ("constant-folding", _plain(fold)),
        ("cse", _plain(cse)),
        ("dce", _plain(dce)),
        # after the fixed point (equal constants are one instruction, slices of slices one
        # slice): alike computations over windows of one array run once, batched
        ("horizontal-batching", batching_pass),
        # after the fixed point: the all-reduces left meet once where they can
        ("all-reduce-combiner", combine_all_reduces),
    ]
    def offsets_pass(module):
        return offset_operands(module, fusion.max_parameters)

    def splitting_pass(module):
        return split_wide_concatenates(module, fusion.max_operands)

    if name == "default":
        # a concatenation of more operands than a fusion may read: a tree, its levels kernels
        passes.append((SPLITTING_RULE, splitting_pass))
        passes.append(("fusion", fusion_pass))
        # after fusion: kernels alike up to where they slice take their offsets as operands
        passes.append(("offset-operands", offsets_pass))
    return Pipeline(name, tuple(passes), fixed_point=("simplify", "constant-folding", "cse"),
                    idempotent=("cse",))


__all__ = ["PIPELINES", "make_pipeline", "Counter"]
