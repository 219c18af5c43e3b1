"""Library calls (a sort, a ``custom-call`` to a NumPy or LAPACK routine) as a backend runs
them on the host between kernels, as XLA:CPU calls a library.

Their results are the routine's own fresh arrays, so the executor takes them as the result
buffers instead of copying them (a copy is made only where a result is not contiguous or
shares memory with an operand). A sort computes only the results something reads: the
sorted keys of ``np.argsort``, which only its comparator needs, are never gathered."""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..ir.evaluator import custom_call_values, evaluate_computation
from ..ir.nodes import Instruction, Module
from ..ir.shapes import TupleShape
from ..ir.sorting import sort
from .llvm.planning import as_computation


def tuple_reads(module: Module) -> dict[int, frozenset[int] | None]:
    """For each tuple-shaped instruction of the entry computation (by ``id``), the elements
    its users read through ``get-tuple-element``; None where a user takes the whole tuple
    (the ROOT, a tuple operand of a call or loop)."""
    reads: dict[int, frozenset[int] | None] = {}
    entry = module.entry
    for inst in entry.instructions:
        for operand in inst.operands:
            if not isinstance(operand.shape, TupleShape):
                continue
            so_far = reads.get(id(operand), frozenset())
            if inst.opcode == "get-tuple-element" and so_far is not None:
                reads[id(operand)] = so_far | {inst.attrs["index"]}
            else:
                reads[id(operand)] = None
    reads[id(entry.root)] = None
    return reads


def fresh_results(value, given) -> tuple[np.ndarray, ...]:
    """The leaves of a routine's result as arrays the caller may keep and write: each as it
    is where it is contiguous, writable and shares no memory with an operand in ``given`` (a
    routine may return a view of its input) nor with an earlier leaf (a sort may return one
    order for two results), else a copy."""
    leaves: list[np.ndarray] = []
    stack = [value]
    while stack:  # depth first, left to right (iterative: no recursion over nesting)
        v = stack.pop()
        if isinstance(v, tuple):
            stack.extend(reversed(v))
            continue
        array = np.asarray(v)
        if (not (array.flags.c_contiguous and array.flags.writeable)
                or any(isinstance(g, np.ndarray) and np.may_share_memory(array, g)
                       for g in (*given, *leaves))):
            array = np.array(array, order="C")
        leaves.append(array)
    return tuple(leaves)


def library_runner(inst: Instruction, read: frozenset[int] | None = None) -> Callable:
    """``run(operands) -> results`` for the library call ``inst``; ``read``: the results
    something reads (tuple_reads), None for all."""
    if inst.opcode == "sort":
        dimension = inst.attrs["dimensions"][0]
        comparator = inst.attrs["to_apply"]
        stable = bool(inst.attrs.get("is_stable"))

        def run_sort(operands):
            results = sort(list(operands), dimension, comparator, evaluate_computation,
                           stable=stable, wanted=read)
            return fresh_results(tuple(results), operands)
        return run_sort
    if inst.opcode == "custom-call":  # the routine itself, without the interpreter's loop
        def run_routine(operands):
            with np.errstate(all="ignore"):  # (as the interpreter runs it)
                results = custom_call_values(inst, operands)
            return fresh_results(tuple(results), operands)
        return run_routine
    computation = as_computation(inst)
    return lambda operands: fresh_results(evaluate_computation(computation, operands), operands)
