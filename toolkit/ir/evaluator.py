"""The evaluator: what every op computes, on NumPy arrays. It is the reference interpreter
(the oracle every pass and backend is checked against), constant folding's arithmetic, and
what the frontend uses to read the value of a traced array that depends on no argument.

One evaluator per op (``EVALUATORS``), each taking the instruction and its operand values.
Values are NumPy arrays (read-only views are fine) or Python tuples for tuple shapes."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from . import collectives
from . import indexing as ix
from . import semantics as sem
from . import windows
from .nodes import Computation, Instruction
from .ops import OPS, GroupOp
from .queries import reducer_opcode
from .shapes import Shape

Evaluator = Callable[[Instruction, list], Any]
EVALUATORS: dict[str, Evaluator] = {}


def _np_dtype(inst: Instruction) -> np.dtype:
    return inst.shape.dtype.numpy


def _elementwise(fn: Callable) -> Evaluator:
    def run(inst, args):
        out = fn(*args)
        return np.asarray(out).astype(_np_dtype(inst), copy=False)
    return run


def _float_or_int(float_fn, int_fn) -> Evaluator:
    def run(inst, args):
        fn = float_fn if args[0].dtype.kind in "fc" else int_fn
        return np.asarray(fn(*args)).astype(_np_dtype(inst), copy=False)
    return run


def _rsqrt(x):
    return np.ones((), x.dtype) / np.sqrt(x)


# Ops the op table names a NumPy ufunc for are that ufunc; these others are not one
_SIMPLE = {
    "sign": sem.sign, "round-nearest-afz": sem.round_half_away, "rsqrt": _rsqrt,
    "logistic": sem.logistic, "erf": sem.erf, "count-leading-zeros": sem.count_leading_zeros,
    "shift-left": lambda a, b: sem.shift(a, b, "left"),
    "shift-right-arithmetic": lambda a, b: sem.shift(a, b, "arithmetic"),
    "shift-right-logical": lambda a, b: sem.shift(a, b, "logical"),
    "select": np.where, "real": np.real, "imag": np.imag, "complex": sem.make_complex,
}
for _name, _fn in _SIMPLE.items():
    EVALUATORS[_name] = _elementwise(_fn)
for _name, _op in OPS.items():
    if _op.ufunc is not None:
        EVALUATORS[_name] = _elementwise(_op.ufunc)

# a copy keeps 0-d as 0-d
EVALUATORS["bitcast-convert"] = lambda inst, args: np.array(args[0]).view(_np_dtype(inst))
EVALUATORS["not"] = _elementwise(
    lambda x: np.logical_not(x) if x.dtype.kind == "b" else np.invert(x)
)
EVALUATORS["divide"] = _float_or_int(np.divide, sem.int_divide)
EVALUATORS["remainder"] = _float_or_int(np.fmod, sem.int_remainder)
EVALUATORS["power"] = _float_or_int(np.power, sem.int_power)
EVALUATORS["clamp"] = _elementwise(lambda lo, x, hi: np.minimum(np.maximum(x, lo), hi))

_COMPARE = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal,
            "GT": np.greater, "GE": np.greater_equal}
EVALUATORS["compare"] = lambda inst, args: _COMPARE[inst.attrs["direction"]](*args)
EVALUATORS["convert"] = lambda inst, args: sem.convert(args[0], _np_dtype(inst))
EVALUATORS["constant"] = lambda inst, args: inst.attrs["literal"]
EVALUATORS["parameter"] = lambda inst, args: args[0]  # bound by the caller


def _iota(inst, args):
    shape: Shape = inst.shape
    d = inst.attrs["iota_dimension"]
    ramp = np.arange(shape.dims[d], dtype=shape.dtype.numpy)
    view = [1] * shape.rank
    view[d] = shape.dims[d]
    return np.broadcast_to(ramp.reshape(view), shape.dims)


def _broadcast(inst, args):
    (x,) = args
    out: Shape = inst.shape
    view = [1] * out.rank
    for i, d in enumerate(inst.attrs["dimensions"]):
        view[d] = x.shape[i]
    return np.broadcast_to(x.reshape(view), out.dims)


def _slice(inst, args):
    return args[0][tuple(slice(s, e, st) for s, e, st in inst.attrs["slice"])]


def _pad(inst, args):
    x, value = args
    spec = inst.attrs["padding"]
    inner = [d + max(d - 1, 0) * it for d, (_, _, it) in zip(x.shape, spec)]
    grown = [max(lo, 0) + n + max(hi, 0) for n, (lo, hi, _) in zip(inner, spec)]
    out = np.full(grown, value, dtype=x.dtype)
    out[tuple(slice(max(lo, 0), max(lo, 0) + n, it + 1)
              for n, (lo, _, it) in zip(inner, spec))] = x
    crop = tuple(slice(-min(lo, 0), g - (-min(hi, 0))) for g, (lo, hi, _) in zip(grown, spec))
    return out[crop]


def _reduce(inst, args):
    comp: Computation = inst.attrs["to_apply"]
    dims = tuple(inst.attrs["dimensions"])
    n = len(args) // 2
    inputs, inits = args[:n], args[n:]
    reducer = reducer_opcode(inst) if n == 1 else None
    ufunc = OPS[reducer].ufunc if reducer in GroupOp.REDUCERS else None
    if ufunc is not None:
        x, init = inputs[0], inits[0]
        ufunc = _logical(ufunc, x.dtype)
        with np.errstate(all="ignore"):
            out = ufunc.reduce(x, axis=dims, initial=init[()]) if dims else ufunc(x, init)
        return np.asarray(out).astype(x.dtype, copy=False)
    # General reducer: fold the computation along the reduced elements, vectorised over the rest.
    keep = [i for i in range(inputs[0].ndim) if i not in dims]
    moved = [np.transpose(x, list(dims) + keep).reshape((-1,) + tuple(x.shape[i] for i in keep))
             for x in inputs]
    acc = [np.broadcast_to(i, moved[0].shape[1:]) for i in inits]
    for k in range(moved[0].shape[0]):
        result = evaluate_computation(comp, acc + [m[k] for m in moved])
        acc = list(result) if n > 1 else [result]
    acc = [np.asarray(a).astype(i.dtype, copy=False) for a, i in zip(acc, inits)]
    return tuple(acc) if n > 1 else acc[0]


def _reduce_window(inst, args):
    x, init = args
    window = inst.attrs["window"]
    reducer = reducer_opcode(inst)
    if reducer in GroupOp.REDUCERS:
        ufunc = _logical(OPS[reducer].ufunc, x.dtype)
        axis = windows.scan_axis(window, x.shape)
        if axis is not None and windows.idempotent_init(reducer, init):
            return windows.accumulate(x, init, axis, ufunc)

        def fold(acc, values):
            with np.errstate(all="ignore"):
                return ufunc(acc, values)
    else:
        comp: Computation = inst.attrs["to_apply"]

        def fold(acc, values):
            return evaluate_computation(comp, [np.asarray(acc), np.ascontiguousarray(values)])
    return windows.evaluate_reduce_window(x, init, window, fold)


def _logical(ufunc, dtype):
    """The bitwise reducers on pred are NumPy's logical ufuncs."""
    if dtype.kind == "b" and ufunc in (np.bitwise_and, np.bitwise_or, np.bitwise_xor):
        return {np.bitwise_and: np.logical_and, np.bitwise_or: np.logical_or,
                np.bitwise_xor: np.logical_xor}[ufunc]
    return ufunc


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _dot(inst, args):
    lhs, rhs = args
    a = inst.attrs
    lb, lc = list(a.get("lhs_batch_dims", ())), list(a.get("lhs_contracting_dims", ()))
    rb, rc = list(a.get("rhs_batch_dims", ())), list(a.get("rhs_contracting_dims", ()))
    letters = iter(_LETTERS)
    lsub = [next(letters) for _ in range(lhs.ndim)]
    rsub = [None] * rhs.ndim
    for l_dim, r_dim in zip(lb + lc, rb + rc):
        rsub[r_dim] = lsub[l_dim]
    rsub = [s if s is not None else next(letters) for s in rsub]
    out = [lsub[d] for d in lb]
    out += [lsub[i] for i in range(lhs.ndim) if i not in lb + lc]
    out += [rsub[i] for i in range(rhs.ndim) if i not in rb + rc]
    dtype = _np_dtype(inst)
    # NumPy's float16 dot and matmul sum products in float32 and round once (einsum's float16
    # loop would round every step)
    work = np.dtype(np.float32) if dtype == np.float16 else dtype
    spec = f"{''.join(lsub)},{''.join(rsub)}->{''.join(out)}"
    with np.errstate(all="ignore"):
        result = np.einsum(spec, lhs.astype(work, copy=False), rhs.astype(work, copy=False))
    return np.asarray(result).astype(dtype, copy=False)


EVALUATORS.update(
    {
        "iota": _iota,
        "broadcast": _broadcast,
        "reshape": lambda inst, args: args[0].reshape(inst.shape.dims),
        "bitcast": lambda inst, args: args[0].reshape(inst.shape.dims),
        "transpose": lambda inst, args: np.transpose(args[0], inst.attrs["dimensions"]),
        "slice": _slice,
        "concatenate": lambda inst, args: np.concatenate(args, axis=inst.attrs["dimensions"][0]),
        "pad": _pad,
        "reverse": lambda inst, args: np.flip(args[0], axis=tuple(inst.attrs["dimensions"])),
        "copy": lambda inst, args: args[0].copy(),
        "reduce": _reduce,
        "reduce-window": _reduce_window,
        "dot": _dot,
        "tuple": lambda inst, args: tuple(args),
        "get-tuple-element": lambda inst, args: args[0][inst.attrs["index"]],
        "opt-barrier": lambda inst, args: args[0],
        "call": lambda inst, args: evaluate_computation(inst.attrs["to_apply"], args),
        "fusion": lambda inst, args: evaluate_computation(inst.attrs["calls"], args),
        "gather": lambda inst, args: ix.gather(args[0], args[1], inst.attrs, inst.shape.dims),
        "scatter": lambda inst, args: ix.scatter(
            args[0], args[1], args[2], inst.attrs, evaluate_computation
        ),
        "sort": lambda inst, args: _sort(inst, args),
        "custom-call": lambda inst, args: _custom_call(inst, args),
        "dynamic-slice": lambda inst, args: ix.dynamic_slice(
            args[0], args[1:], inst.attrs["dynamic_slice_sizes"]
        ),
        "dynamic-update-slice": lambda inst, args: ix.dynamic_update_slice(
            args[0], args[1], args[2:]
        ),
        "while": lambda inst, args: _while(inst, args),
        "conditional": lambda inst, args: _conditional(inst, args),
    }
)

def _combiner(inst):
    """How an all-reduce or reduce-scatter combines two devices' operands: the reducer's ufunc
    where ``to_apply`` is ``op(p0, p1)`` (logical on pred), else the computation itself,
    evaluated elementwise on whole arrays."""
    comp = inst.attrs.get("to_apply")
    if comp is None:
        return None
    reducer = reducer_opcode(inst)
    if reducer in GroupOp.REDUCERS:
        def combine(a, b, opcode=reducer):
            return EVALUATORS[opcode](comp.root, [a, b])
        return combine
    return lambda a, b: evaluate_computation(comp, [a, b])


def _collective(inst, args):
    if inst.opcode == "all-to-all" and "dimensions" not in inst.attrs:  # the tuple form
        return collectives.evaluate(inst, tuple(args), None)
    return collectives.evaluate(inst, args[0] if args else None, _combiner(inst))


def collective_into(inst, args, out):
    """A collective of one array result, written into ``out`` (a compiled program's buffer)."""
    return collectives.evaluate(inst, args[0] if args else None, _combiner(inst), out)


for _name in GroupOp.COLLECTIVE:
    EVALUATORS[_name] = _collective

assert set(EVALUATORS) == set(OPS), set(OPS) ^ set(EVALUATORS)


def _while(inst, args):
    """Run the body while the condition holds: a Python loop, however many trips."""
    cond, body = inst.attrs["condition"], inst.attrs["body"]
    state = args[0]
    while bool(evaluate_computation(cond, [state])):
        state = evaluate_computation(body, [state])
    return state


def _conditional(inst, args):
    """The branch the selector picks (an s32 index out of range picks the last, as XLA's)."""
    selector = args[0]
    if "branch_computations" in inst.attrs:
        branches = inst.attrs["branch_computations"]
        k = int(selector)
        k = k if 0 <= k < len(branches) else len(branches) - 1
    else:
        branches = (inst.attrs["true_computation"], inst.attrs["false_computation"])
        k = 0 if bool(selector) else 1
    return evaluate_computation(branches[k], [args[1 + k]])


def custom_call_values(inst, args) -> list[np.ndarray]:
    """The results of the custom-call ``inst`` (its library routine) in its declared types."""
    from .custom_calls import evaluate
    out = evaluate(inst.attrs["custom_call_target"], inst.attrs.get("backend_config", ""), args)
    dtypes = [
        s.dtype.numpy
        for s in (inst.shape.elements if hasattr(inst.shape, "elements") else (inst.shape,))
    ]
    return [np.asarray(v).astype(d, copy=False) for v, d in zip(out, dtypes)]


def _custom_call(inst, args):
    out = custom_call_values(inst, args)
    return tuple(out) if len(out) > 1 else out[0]


def _sort(inst, args):
    from .sorting import sort
    out = sort(list(args), inst.attrs["dimensions"][0], inst.attrs["to_apply"],
               evaluate_computation, stable=bool(inst.attrs.get("is_stable")))
    return tuple(out) if len(out) > 1 else out[0]


def evaluate_computation(comp: Computation, args: Sequence[Any], clock=None, observe=None) -> Any:
    """Values of ``comp`` on ``args``; with ``observe``, ``observe(inst, start, end)`` is called
    for each instruction with times from ``clock.now()``."""
    values: dict[int, Any] = {}
    with np.errstate(all="ignore"):
        for inst in comp.instructions:
            if inst.opcode == "parameter":
                values[id(inst)] = args[inst.attrs["parameter_number"]]
                continue
            operands = [values[id(o)] for o in inst.operands]
            start = clock.now() if observe is not None else 0.0
            try:
                values[id(inst)] = EVALUATORS[inst.opcode](inst, operands)
            except (np.linalg.LinAlgError, collectives.CollectiveError):
                raise  # a library routine's error about the data (NumPy's own), or the devices'
            except Exception as e:  # internal errors name the instruction
                raise RuntimeError(
                    f"interpreter failed on %{inst.name} ({inst.opcode}): {e}"
                ) from e
            if observe is not None:
                observe(inst, start, clock.now())
    return values[id(comp.root)]




def evaluate_cone(inst: Instruction, values: dict, given: Callable[[Instruction], Any],
                  admits: Callable[[Instruction], bool], limit: int) -> Any:
    """The value of ``inst`` from the instructions it depends on, or None. ``values`` maps
    ``id(instruction)`` to ``(instruction, value)`` for values found before (each entry holds
    its instruction, so its id names it while the entry lives) and is extended with every value
    found here. ``given(node)``: the value of a node taken as it is (a parameter bound to a
    value), or None; ``admits(node)``: may the node be evaluated. None where the cone holds a
    node neither given nor admitted, or more than ``limit`` nodes to evaluate. An iterative
    walk (no recursion over the program's depth)."""
    found = values.get(id(inst))
    if found is not None and found[0] is inst:
        return found[1]
    order: list[Instruction] = []
    seen: set[int] = set()
    stack = [(inst, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        key = id(node)
        held = values.get(key)
        if key in seen or (held is not None and held[0] is node):
            continue
        value = given(node)
        if value is not None:
            values[key] = (node, value)
            continue
        if not admits(node) or len(seen) >= limit:
            return None
        seen.add(key)
        stack.append((node, True))
        stack.extend((o, False) for o in node.operands)
    with np.errstate(all="ignore"):
        for node in order:
            values[id(node)] = (node, EVALUATORS[node.opcode](
                node, [values[id(o)][1] for o in node.operands]))
    return values[id(inst)][1]
