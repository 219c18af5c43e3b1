"""Fusion's reason codes: every producer-consumer decision the fusion pass, the dot
canonicaliser and the offset-operands pass make carries one of these stable codes
(``FusionDecision.reason``), shown with its sentence in the profile and the dashboard."""
from __future__ import annotations

from .concatenate_splitting import REASONS as SPLITTING_REASONS
from .dot_canonical import APPLIED as DOT_APPLIED, REASONS as DOT_REASONS
from .horizontal_batching import REASONS as BATCHING_REASONS
from .offset_operands import REASONS as OFFSET_REASONS

REASONS = {
    "FUSED": "fused into its consumer",
    "MULTI_OUTPUT": "fused as an extra output of a reduction fusion",
    "SIBLING_MULTI_OUTPUT": "two reductions of the same input share one multi-output fusion",
    "LOOP_MULTI_OUTPUT": "two loop fusions that compute the same values share one multi-output "
                         "fusion",
    "LOOP_PRODUCER_CONSUMER": "a loop fusion and one that reads its values at the same element "
                              "share one multi-output fusion",
    "EXPENSIVE_WOULD_DUPLICATE": "an expensive producer would be recomputed in several fusions",
    "CODE_DUPLICATION": "the producer would be copied into too many fusions",
    "NOT_FUSIBLE": "the consumer cannot take producers",
    "NOT_ALL_CONSUMERS": "a producer fuses into all its consumers or none",
    "PRODUCER_IS_REDUCTION": "a reduction stays the root of its fusion",
    "BOTH_REDUCTIONS": "two reductions are not fused into one kernel",
    "LIBRARY_CALL": "dots are library calls",
    "BUDGET_OPERANDS": "the fusion would read too many operands",
    "BUDGET_INSTRUCTIONS": "the fusion would hold too many instructions",
    "BUDGET_PARAMETERS": "the kernel would take too many operands and outputs",
    "WOULD_CREATE_CYCLE": "fusing would create a cycle between kernels",
    "DIFFERENT_SHAPES": "sibling reductions iterate over different shapes",
    "SMALL_SHARED_INPUT": "sibling reductions share less input than either reads alone",
    "ROOT": "the consumer is the computation's output tuple",
    "REUSES_ELEMENTS": "the fusion would compute the producer too many times per output element",
    "EXPENSIVE_BROADCAST": "an expensive producer would be recomputed for every element it is "
                           "broadcast to",
    "BROADCAST_CHAIN": "a long chain of operations on fewer elements would be recomputed for "
                       "every element it is broadcast to",
    "IN_PLACE_UPDATE": "a dynamic-update-slice stays the root of its fusion, to write its window "
                       "in place",
    "READS_UPDATED_BUFFER": "the producer reads the buffer a dynamic-update-slice fusion writes, "
                            "where the window may be written",
    # the dot canonicaliser's decisions (dot_canonical.py), shown beside fusion's
    **DOT_REASONS,
    # the offset-operands pass's (offset_operands.py), run after fusion
    **OFFSET_REASONS,
    # horizontal batching's (horizontal_batching.py), run before fusion
    **BATCHING_REASONS,
    # concatenate splitting's (concatenate_splitting.py), run just before fusion
    **SPLITTING_REASONS,
}
# the decisions that fused a producer, or folded it into a dot (FusionDecision.fused)
FUSED_REASONS = frozenset({"FUSED", "MULTI_OUTPUT", "SIBLING_MULTI_OUTPUT",
                           "LOOP_MULTI_OUTPUT", "LOOP_PRODUCER_CONSUMER"}) | DOT_APPLIED
