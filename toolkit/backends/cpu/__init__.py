"""The CPU backend: fused kernels emitted through llvmlite for the host CPU, dots on BLAS,
an executor that splits large kernels over threads and times every kernel when asked."""
from __future__ import annotations

import time

import numpy as np
from llvmlite import ir

from ...ir.nodes import Module
from ...ir.shapes import Shape, TupleShape
from ..base import Backend, register_backend
from ..llvm.elemental import CodegenUnsupported
from ..reference.interpreter import evaluate_computation, flatten_value
from .compiler import compile_ir
from .dot import make_dot
from .executor import CpuExecutable, Step, ctypes_function
from .kernels import as_computation, emit_kernel, plan_kernel

_ALIAS = {"tuple", "get-tuple-element", "parameter", "constant"}


def _leaf_shapes(shape) -> list[Shape]:
    return shape.leaves() if isinstance(shape, TupleShape) else [shape]


def compile_module(module: Module) -> CpuExecutable:
    t_start = time.perf_counter()
    entry = module.entry
    slots: list[Shape] = []
    value_slots: dict[int, list[int]] = {}  # instruction -> the slots holding its value(s)
    steps: list[Step] = []
    constants: dict[int, np.ndarray] = {}
    fallbacks: list[str] = []
    llvm_module = ir.Module(name=module.name)
    kernels: list[tuple[Step, str, int]] = []

    def new_slots(shape) -> list[int]:
        out = []
        for s in _leaf_shapes(shape):
            slots.append(s)
            out.append(len(slots) - 1)
        return out

    arg_slots = [0] * len(entry.parameters)
    for inst in entry.instructions:
        op = inst.opcode
        inputs = [s for o in inst.operands for s in value_slots[id(o)]]
        if op == "parameter":
            (slot,) = value_slots[id(inst)] = new_slots(inst.shape)
            arg_slots[inst.attrs["parameter_number"]] = slot
        elif op == "constant":
            (slot,) = value_slots[id(inst)] = new_slots(inst.shape)
            constants[slot] = np.array(inst.attrs["literal"])
        elif op == "tuple":
            value_slots[id(inst)] = inputs
        elif op == "get-tuple-element":
            value_slots[id(inst)] = [value_slots[id(inst.operands[0])][inst.attrs["index"]]]
        elif op == "dot":
            outs = value_slots[id(inst)] = new_slots(inst.shape)
            steps.append(Step("dot", inst, inputs, outs, extra={"run": make_dot(inst)}))
        else:
            outs = value_slots[id(inst)] = new_slots(inst.shape)
            try:
                if op == "call":
                    raise CodegenUnsupported("call (inline it first)")
                spec = plan_kernel(inst)
                emit_kernel(llvm_module, spec)
            except CodegenUnsupported as e:
                fallbacks.append(f"%{inst.name}: {e}")
                comp = inst.attrs["to_apply"] if op == "call" else as_computation(inst)
                steps.append(Step("fallback", inst, inputs, outs, extra={
                    "run": (lambda c: lambda ins: flatten_value(evaluate_computation(c, ins)))(comp)}))
                continue
            full = spec.kind == "row" and _is_full_reduction(spec)
            # a full reduction splits into partial results, unless it also writes extra
            # outputs: then it runs on one thread (work 0 keeps it below the threshold)
            partials = full and all(o.opcode == "reduce" for o in spec.outputs)
            step = Step("kernel", inst, inputs, outs, extent=spec.extent,
                        work=spec.work if partials or not full else 0,
                        reducers=[spec.reducers[id(o)] for o in spec.outputs] if partials else [],
                        full_reduction=partials)
            steps.append(step)
            kernels.append((step, spec.name, len(inputs) + len(outs)))
    root_slots = value_slots[id(entry.root)]
    codegen_seconds = time.perf_counter() - t_start
    machine = compile_ir(str(llvm_module)) if kernels else None
    if machine is not None:
        machine.phases.insert(0, ("llvm_ir", codegen_seconds))
    for step, name, n_ptrs in kernels:
        step.fn = ctypes_function(machine.address(name), n_ptrs)
        step.extra["machine"] = machine  # keeps the JIT engine alive as long as the step
    produced = {s for st in steps for s in st.outputs}
    temp_slots = produced - set(root_slots)
    return CpuExecutable(module, steps, slots, arg_slots, list(root_slots), temp_slots, constants,
                         machine, fallbacks)


def _is_full_reduction(spec) -> bool:
    hero = next(o for o in spec.outputs if o.opcode == "reduce")
    return len(hero.attrs["dimensions"]) == hero.operands[0].shape.rank


def _available() -> str | None:
    try:
        import llvmlite.binding  # noqa: F401
    except ImportError as e:  # pragma: no cover - llvmlite is a core dependency
        return f"llvmlite is not installed ({e})"
    return None


register_backend(Backend("cpu", "LLVM-compiled fused kernels for the host CPU, BLAS dots", 10,
                         compile_module, _available))
