"""Basic indexing planned once per shape of window. A traced Python loop reads and writes
windows of the same few shapes thousands of times at ever other places (``a[i, j]``,
``a[i, :j]``, ``a[i, j] = v``); the general path (``indexing.getitem``, ``inplace.updated``)
works out each one's slice spec, shapes and instructions anew, 40-60 µs an operation. Here the
shapes are planned once per (array shape, kept counts, result shape) and the very instructions
the general path emits are added with them (``ComputationBuilder.add_planned``): 11-15 µs a read,
26 µs an element store."""
from __future__ import annotations

import numpy as np

from ..ir.builder import frozen_plain_attributes, planned_instruction
from . import lax, views
from .indexing import plain_decompose
from .tracer import Tracer

# (x's shape, the counts its basic index keeps per dimension, the result's shape) -> the
# index's ``BasicPlan``: a traced Python loop reads and writes windows of the same few shapes
# thousands of times (``a[i, j]``, ``a[i, :j]``) at ever other places. Bounded, cleared when
# full.
_PLANS: dict = {}
_PLANS_KEPT = 1 << 14


class BasicPlan:
    """A basic index of Python ints and forward slices, worked out once per shape of window:
    the planned reshape that reads it after its slice and the planned write of a box (a
    unit-stride window, not the whole array) of it. The slice's own shape is the counts'."""

    __slots__ = ("counts", "out_shape", "whole", "slice_shape", "reshaped", "_box")

    def __init__(self, x: Tracer, spec, counts, out_shape):
        shape = x.inst.shape
        self.counts, self.out_shape = counts, out_shape
        self.whole = list(counts) == list(shape.dims)
        self.slice_shape = planned_instruction("slice", (shape,), {"slice": tuple(spec)})[1]
        self.reshaped = None
        if tuple(counts) != tuple(out_shape):
            self.reshaped = planned_instruction("reshape", (self.slice_shape,), None,
                                                lax.ir_shape(x.dtype, out_shape))
        self._box = None

    def box(self, x: Tracer, spec):
        """How a value of ``out_shape`` and ``x``'s dtype is written into ``x`` where the
        index is a box: the planned reshape to the window's shape (None: not needed) and
        dynamic-update-slice at int64 starts; None where the write is not a box."""
        box = self._box
        if box is None:
            box = self._box = False
            counts, shape = self.counts, x.inst.shape
            if 0 not in counts and not self.whole:
                value = lax.ir_shape(x.dtype, self.out_shape)
                reshaped = None
                if tuple(self.out_shape) != tuple(counts):
                    reshaped = planned_instruction("reshape", (value,), None,
                                                   lax.ir_shape(x.dtype, counts))
                    value = reshaped[1]
                starts = [lax.ir_shape(np.int64, ())] * len(counts)
                box = self._box = (reshaped, planned_instruction(
                    "dynamic-update-slice", (shape, value, *starts)))
        if not box or any(stride != 1 for _, _, stride in spec):
            return None
        return box


def basic_plan(x: Tracer, key):
    """``(decompose's spec, the index's BasicPlan)`` for a key of Python ints and forward
    slices in range, else None: the general path handles every other key, errors included."""
    plain = plain_decompose(x, key)
    if plain is None:
        return None
    spec, _, out_shape = plain
    counts = tuple(len(range(start, limit, stride)) for start, limit, stride in spec)
    question = (x.inst.shape, counts, tuple(out_shape))
    plan = _PLANS.get(question)
    if plan is None:
        plan = BasicPlan(x, spec, counts, out_shape)
        if len(_PLANS) >= _PLANS_KEPT:
            _PLANS.clear()
        _PLANS[question] = plan
    return spec, plan


def planned_getitem(x: Tracer, key) -> Tracer | None:
    """``x[key]`` as NumPy gives it (a NumPy scalar for one element, else a view) where the
    key is planned; None where the general path must answer (``dispatch._getitem``)."""
    kind = type(key)
    if kind is not int and kind is not tuple or x.trace is not x._trace:
        return None  # (a value of an enclosing trace: captured by the general path)
    planned = basic_plan(x, key)
    if planned is None:
        return None
    result = read(x, *planned)
    if not result.shape:  # x[i, j]: a NumPy scalar, not a view
        result._scalar = True
        return result
    return views.view_of(x, key, result)


def read(x: Tracer, spec, plan: BasicPlan) -> Tracer:
    """``x[key]`` by its plan: the instructions ``getitem`` emits, without working their
    shapes out again. ``x`` belongs to the current trace."""
    trace = x._trace
    metadata = trace.metadata("getitem")  # (the user's line: metadata walks out to it)
    inst = x.inst
    if not plan.whole:
        inst = trace.builder.add_planned(
            "slice", (inst,), (frozen_plain_attributes({"slice": tuple(spec)}), plan.slice_shape),
            metadata)
    if plan.reshaped is not None:
        inst = trace.builder.add_planned("reshape", (inst,), plan.reshaped, metadata)
    return Tracer(trace, inst, x.weak_type)


def write_box(x: Tracer, spec, box, value: Tracer) -> Tracer:
    """``x`` with ``value`` (of the plan's result shape, ``x``'s dtype) written into the box
    ``BasicPlan.box`` describes: the instructions ``inplace.updated`` emits for it."""
    trace = x._trace
    metadata = trace.metadata("setitem")
    reshaped, placed = box
    inst = trace.local(value)
    if reshaped is not None:
        inst = trace.builder.add_planned("reshape", (inst,), reshaped, metadata)
    starts = tuple(lax.lift(trace, start, np.int64, False).inst for start, _, _ in spec)
    inst = trace.builder.add_planned("dynamic-update-slice", (x.inst, inst, *starts), placed,
                                     metadata)
    return Tracer(trace, inst, x.weak_type)
