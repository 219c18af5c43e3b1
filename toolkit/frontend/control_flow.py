"""Structured control flow, as ``jax.lax`` spells it: ``while_loop``, ``fori_loop``, ``cond``
and ``switch`` trace their functions once into computations of the enclosing module and emit
HLO ``while``/``conditional``, so a loop whose trip count is traced compiles once for every
trip count, and a branch chosen by a traced predicate runs only that branch.

Each function is traced in a nested ``Trace``: values of the enclosing function that it uses
are captured as extra parameters (carried through the loop state unchanged, or passed to the
branch), as autodidax joins a jaxpr's constants. Outside a trace the functions run eagerly in
Python, as JAX's do on concrete values."""
from __future__ import annotations

import dataclasses
import json
import operator

import numpy as np

from ..ir.nodes import Computation, Instruction
from ..ir.shapes import TupleShape
from . import lax
from .errors import UnsupportedNumpyError, UserTypeError
from .namespace import numpy_buffers_traced
from .pytree import flatten, unflatten
from .tracer import Trace, Tracer, current_trace


def has_tracer(leaves) -> bool:
    return any(isinstance(v, Tracer) for v in leaves)


def _lift_leaves(trace: Trace, leaves, what: str) -> list[Tracer]:
    return [v if isinstance(v, Tracer) else lax.lift(trace, v, what=what) for v in leaves]


def _aval(t: Tracer) -> tuple:
    return (tuple(t.shape), np.dtype(t.dtype))


def _trace_function(
    parent: Trace, fn, avals, treedef, name: str, wrap_args=lambda tree: (tree,), user_fn=None
):
    """Trace ``fn`` on parameters with ``avals`` (pytree ``treedef``) in a trace nested in
    ``parent``: (the nested trace, its output leaves as local instructions, the output treedef).
    ``user_fn``: the user's function ``fn`` wraps, whose module's ``np.zeros`` ... make traced
    buffers while it runs (as under ``tk.jit``)."""
    sub = Trace(parent.fn_name, parent=parent, computation_name=name)
    with sub.activate(), numpy_buffers_traced(user_fn if user_fn is not None else fn):
        params = [
            sub.parameter(i, dtype, shape, weak, f"{name}.{i}")
            for i, (shape, dtype, weak) in enumerate(avals)
        ]
        out = fn(*wrap_args(unflatten(treedef, params)))
        leaves, out_tree, paths = flatten(out)
        outs = [
            sub.local(v)
            if isinstance(v, Tracer)
            else lax.lift(sub, v, what=f"{name} output{p}").inst
            for v, p in zip(leaves, paths)
        ]
        weak = [
            v.weak_type
            if isinstance(v, Tracer)
            else isinstance(v, (int, float, complex)) and not isinstance(v, bool)
            for v in leaves
        ]
    written = [n for n, t in sub.mutated_parameters()]
    if written:
        raise UnsupportedNumpyError(
            f"{name}: the function writes its argument in place (x[i] = ..., x += ...); "
            "return the new value instead, as in JAX"
        )
    return sub, outs, weak, out_tree


def _wrap(parent: Trace, name: str, sub: Trace, state_shapes, index_of: dict[int, int], results,
          tuple_root: bool = False) -> Computation:
    """``sub``'s computation taking one tuple parameter (``state_shapes``): sub's parameter k is
    element ``index_of[k]``; ``results`` are instructions of sub or ints (a state element passed
    through). One result is returned as itself (unless ``tuple_root``: a loop body returns the
    loop state, a tuple however many elements it has), several as a tuple."""
    b = parent.module.computation(name)
    state = b.parameter(0, TupleShape(tuple(state_shapes)), "state")
    elements = [
        b.add("get-tuple-element", [state], {"index": i}, shape=s)
        for i, s in enumerate(state_shapes)
    ]
    mapping: dict[int, Instruction] = {
        id(inst): elements[index_of[n]] for n, inst in sub.builder._parameters.items()
    }
    for inst in sub.builder._instructions:
        if inst.opcode == "parameter":
            continue
        mapping[id(inst)] = b.adopt(
            dataclasses.replace(inst, operands=tuple(mapping[id(o)] for o in inst.operands))
        )
    items = [elements[r] if isinstance(r, int) else mapping[id(r)] for r in results]
    root = items[0] if len(items) == 1 and not tuple_root else b.add("tuple", items)
    return parent.module.add_computation(b.build(root))


def _check_same_types(what: str, want: list, got: list, tree_want, tree_got) -> None:
    if str(tree_want) != str(tree_got) or want != got:
        raise UserTypeError(
            f"{what} must have identical types: {tree_want} with "
            f"{[f'{d}{list(s)}' for s, d in want]} "
            f"but got {tree_got} with {[f'{d}{list(s)}' for s, d in got]}"
        )


def while_loop(cond_fun, body_fun, init_val, _trip_count: int | None = None):
    """``while cond_fun(val): val = body_fun(val)``, as HLO ``while``. ``_trip_count``: the
    number of trips when the caller knows it (fori_loop with Python-int bounds, scan), kept as
    XLA's ``known_trip_count`` (reverse-mode differentiation needs it)."""
    leaves, tree, _ = flatten(init_val)
    parent = current_trace()
    if parent is None and not has_tracer(leaves):
        val = init_val
        while bool(cond_fun(val)):
            val = body_fun(val)
        return val
    parent = parent or leaves[0].trace
    with parent.op_scope("while_loop"):
        carry = _lift_leaves(parent, leaves, "while_loop init_val")
        avals = [(t.shape, t.dtype, t.weak_type) for t in carry]
        n = len(carry)
        body, body_outs, body_weak, body_tree = _trace_function(
            parent, body_fun, avals, tree, "body"
        )
        got = [(tuple(i.shape.dims), i.shape.dtype.numpy) for i in body_outs]
        promoted = _promoted_weak_carry(carry, got, body_weak)
        if promoted is not None:  # (JAX's rule: a weak init takes the body's type; once)
            carry = promoted
            avals = [(t.shape, t.dtype, t.weak_type) for t in carry]
            body, body_outs, body_weak, body_tree = _trace_function(
                parent, body_fun, avals, tree, "body"
            )
            got = [(tuple(i.shape.dims), i.shape.dtype.numpy) for i in body_outs]
        _check_same_types(
            "while_loop body_fun output and input", [_aval(t) for t in carry], got, tree, body_tree
        )
        cond, cond_outs, _, _ = _trace_function(parent, cond_fun, avals, tree, "condition")
        if cond.checks:
            raise UnsupportedNumpyError(
                "while_loop cond_fun makes a check NumPy makes on the data (an index out "
                "of range ...); compute the condition from values known to be valid"
            )
        # NumPy's data checks in the body (a traced index out of range ...): one flag each, carried
        # through the loop OR-ed with every trip's, raised after the call as at the top level
        flags = [lax.full(parent, (), False, np.bool_) for _ in body.checks]
        with body.activate():
            first_flag = len(body.builder._parameters)
            body_flags = [
                body.parameter(first_flag + k, np.dtype(bool), (), False, f"check_{k}")
                for k in range(len(flags))
            ]
            body_outs = body_outs + [body.local(lax.elementwise("or", prev, now))
                                     for prev, (now, _, _) in zip(body_flags, body.checks)]
        if len(cond_outs) != 1 or cond_outs[0].shape.dims or not cond_outs[0].shape.dtype.is_bool:
            raise UserTypeError("while_loop cond_fun must return a boolean scalar, got "
                                f"{[i.shape.to_text(False) for i in cond_outs]}")
        # the loop state: the carry, the checks' flags, then what the body and the condition capture
        # (body parameters: carry, captures (numbered as they were met), flags; condition: carry,
        # captures)
        m = len(flags)
        body_caps = [outer for outer, _ in body.captures]
        cond_caps = [outer for outer, _ in cond.captures]
        state = carry + flags + body_caps + cond_caps
        shapes = [parent.local(t).shape for t in state]
        body_index = {k: k for k in range(n)} | {n + k: n + m + k for k in range(len(body_caps))} \
            | {first_flag + k: n + k for k in range(m)}
        cond_index = {k: k for k in range(n)} | {
            n + k: n + m + len(body_caps) + k for k in range(len(cond_caps))
        }
        body_results = body_outs + list(range(n + m, len(state)))
        body_comp = _wrap(parent, "body", body, shapes, body_index, body_results, tuple_root=True)
        cond_comp = _wrap(parent, "condition", cond, shapes, cond_index, cond_outs)
        attrs = {"condition": cond_comp, "body": body_comp}
        if _trip_count is not None:
            attrs["_raw"] = (
                (
                    "backend_config",
                    json.dumps(
                        {"known_trip_count": {"n": str(int(_trip_count))}}, separators=(",", ":")
                    ),
                ),
            )
        loop = parent.emit("while", (parent.emit("tuple", state),), attrs)
        outs = [
            Tracer(
                parent,
                parent.emit("get-tuple-element", (loop,), {"index": k}).inst,
                carry[k].weak_type,
            )
            for k in range(n)
        ]
        for k, (_, error, message) in enumerate(body.checks):
            flag = parent.emit("get-tuple-element", (loop,), {"index": n + k})
            parent.checks.append((flag, error, message))
    return unflatten(tree, outs)


def _promoted_weak_carry(carry: list, got: list, got_weak: list) -> list | None:
    """The loop state with each weakly typed init value (a Python number) converted to the
    type the body returns for it, where that differs (``fori_loop(0, n, lambda i, c: c +
    x32.sum(), 0.0)`` carries float32, as JAX's loops do); None where nothing changes."""
    changed = False
    out = list(carry)
    for k, (t, (shape, dtype), weak) in enumerate(zip(carry, got, got_weak)):
        if t.weak_type and not weak and tuple(t.shape) == tuple(shape) and t.dtype != dtype:
            out[k] = lax.convert(t, dtype)
            changed = True
    return out if changed else None


def fori_loop(lower, upper, body_fun, init_val):
    """``for i in range(lower, upper): val = body_fun(i, val)``; the bounds may be traced, and
    the program is the same for every trip count."""
    parent = current_trace()
    leaves, _, _ = flatten(init_val)
    if parent is None and not has_tracer(leaves + [lower, upper]):
        val = init_val
        for i in range(operator.index(lower), operator.index(upper)):
            val = body_fun(i, val)
        return val
    parent = parent or next(v for v in leaves + [lower, upper] if isinstance(v, Tracer)).trace
    bounds = _lift_leaves(parent, [lower, upper], "fori_loop bound")
    if any(b.dtype.kind not in "iu" or b.ndim for b in bounds):
        raise UserTypeError(
            f"fori_loop bounds must be integer scalars, got {[b.describe() for b in bounds]}"
        )
    dtype = np.result_type(*[b.dtype for b in bounds])
    lo, hi = (lax.convert(b, dtype, b.weak_type) for b in bounds)

    def cond(state):
        return lax.compare(state[0], state[1], "LT")

    def body(state):
        i, stop, val = state
        return (
            lax.elementwise("add", i, lax.full_like(i, 1), weak=i.weak_type),
            stop,
            body_fun(i, val),
        )

    trips = None
    # Python ints: the trip count is known
    if not any(isinstance(b, Tracer) for b in (lower, upper)):
        trips = max(operator.index(upper) - operator.index(lower), 0)
    return while_loop(cond, body, (lo, hi, init_val), _trip_count=trips)[2]


def scan(f, init, xs=None, length=None, reverse=False, unroll=1):
    """``carry, ys = scan(f, init, xs)``: ``carry, y = f(carry, x)`` for each ``x`` along the
    leading axis of ``xs`` (a pytree), the ``y``s stacked, as ``jax.lax.scan``; one HLO while
    reading ``xs`` with dynamic-slice and writing ``ys`` with dynamic-update-slice. ``unroll``
    (JAX's hint: trips per loop iteration) is accepted and changes nothing: the CPU backend's
    native loop driver runs a trip for about the cost of its kernels alone."""
    if not isinstance(unroll, (bool, int)) or unroll < 0:
        raise UserTypeError(f"scan: unroll must be a non-negative int or a bool, got {unroll!r}")
    x_leaves, x_tree, _ = flatten(xs)
    init_leaves, _, _ = flatten(init)
    lengths = {int(np.shape(v)[0]) for v in x_leaves if np.ndim(v)}
    if any(np.ndim(v) == 0 for v in x_leaves):
        raise UserTypeError("scan: every leaf of xs needs a leading axis to scan over")
    if length is not None:
        lengths.add(operator.index(length))
    if len(lengths) != 1:
        raise UserTypeError(
            f"scan: xs leaves and length= disagree on the length to scan over: {sorted(lengths)}"
        )
    (n,) = lengths
    parent = current_trace()
    if parent is None and not has_tracer(x_leaves + init_leaves):  # eager, as Python would
        if n == 0:  # the stacked outputs' shapes come from tracing f, which eager mode does not do
            raise UserTypeError(
                "scan over zero elements outside a jitted function: call it inside tk.jit, "
                "where f is traced and the outputs are empty arrays of its output shapes"
            )
        carry, ys = init, []
        for k in (range(n - 1, -1, -1) if reverse else range(n)):
            carry, y = f(carry, unflatten(x_tree, [v[k] for v in x_leaves]))
            ys.append(y)
        if reverse:
            ys.reverse()
        y_leaves = [flatten(y)[0] for y in ys]
        stacked = [np.stack([row[j] for row in y_leaves]) for j in range(len(y_leaves[0]))]
        return carry, unflatten(flatten(ys[0])[1], stacked)
    parent = parent or next(v for v in x_leaves + init_leaves if isinstance(v, Tracer)).trace
    with parent.op_scope("scan"):
        xs_t = _lift_leaves(parent, x_leaves, "scan xs")
        carry_t = _lift_leaves(parent, init_leaves, "scan init")
        _, carry_tree, _ = flatten(init)

        def element(i, leaves):
            return [
                lax.reshape(
                    lax.dynamic_slice(
                        v, [i] + [lax.full_like(i, 0)] * (v.ndim - 1), (1,) + tuple(v.shape[1:])
                    ),
                    tuple(v.shape[1:]),
                )
                for v in leaves
            ]

        def probe_f(carry_t):
            """f traced once aside (its computation is dropped): the ys' shapes, and the carry
            it returns (whose types a weak init takes, as in JAX)."""
            probe = Trace(parent.fn_name, parent=parent, computation_name="scan_probe")
            with probe.activate():
                c_params = [
                    probe.parameter(k, t.dtype, t.shape, t.weak_type, f"probe.{k}")
                    for k, t in enumerate(carry_t)
                ]
                x_params = [
                    probe.parameter(
                        len(c_params) + k, t.dtype, tuple(t.shape[1:]), t.weak_type,
                        f"probe.x{k}")
                    for k, t in enumerate(xs_t)
                ]
                c_out, y_probe = f(unflatten(carry_tree, c_params), unflatten(x_tree, x_params))
                y_leaves, y_tree, _ = flatten(y_probe)
                c_leaves = [v if isinstance(v, Tracer) else np.asarray(v)
                            for v in flatten(c_out)[0]]
                c_types = [(tuple(np.shape(v)), np.dtype(v.dtype)) for v in c_leaves]
                c_weak = [isinstance(v, Tracer) and v.weak_type for v in c_leaves]
                y_avals = [
                    (
                        tuple(np.shape(v)),
                        np.dtype(v.dtype if isinstance(v, Tracer) else np.asarray(v).dtype),
                    )
                    for v in y_leaves
                ]
            return y_tree, y_avals, c_types, c_weak

        y_tree, y_avals, c_types, c_weak = probe_f(carry_t)
        if len(c_types) == len(carry_t):
            promoted = _promoted_weak_carry(carry_t, c_types, c_weak)
            if promoted is not None:
                carry_t = promoted
                y_tree, y_avals, _, _ = probe_f(carry_t)
        ys0 = [lax.full(parent, (n,) + shape, 0, dtype) for shape, dtype in y_avals]
        if n == 0:  # no element to read: the carry as it came, and empty outputs of f's shapes
            return unflatten(carry_tree, carry_t), unflatten(y_tree, ys0)
        index_dtype = np.dtype(np.int64)

        def body(state):
            i, carry, ys = state
            k = lax.elementwise("subtract", lax.full_like(i, n - 1), i) if reverse else i
            new_carry, y = f(carry, unflatten(x_tree, element(k, xs_t)))
            new_ys = [
                lax.dynamic_update_slice(
                    buf,
                    lax.reshape(_lift_leaves(buf.trace, [v], "scan y")[0], (1,) + shape),
                    [k] + [lax.full_like(k, 0)] * len(shape),
                )
                for buf, v, (shape, _) in zip(ys, flatten(y)[0], y_avals)
            ]
            return lax.elementwise("add", i, lax.full_like(i, 1)), new_carry, new_ys

        start = lax.full(parent, (), 0, index_dtype)
        _, carry_out, ys_out = while_loop(
            lambda st: lax.compare(st[0], lax.full_like(st[0], n), "LT"),
            body,
            (start, unflatten(carry_tree, carry_t), ys0),
            _trip_count=n,
        )
        return carry_out, unflatten(y_tree, ys_out)


def _branches(parent: Trace, functions, operands, name: str):
    """Trace each branch on the operands: (computations, output tracers' weak flags, out tree)."""
    leaves, tree, _ = flatten(tuple(operands))
    args = _lift_leaves(parent, leaves, f"{name} operand")
    avals = [(t.shape, t.dtype, t.weak_type) for t in args]
    traced = [
        _trace_function(parent, fn, avals, tree, f"branch_{k}", wrap_args=lambda ops: tuple(ops))
        for k, fn in enumerate(functions)
    ]
    # NumPy's data checks in a branch (a traced index out of range ...): one flag output per
    # check of any branch (false in the others), raised after the call if the branch that ran
    # set it, as at the top level
    checks = [
        (k, flag, error, message)
        for k, (sub, *_) in enumerate(traced)
        for flag, error, message in sub.checks
    ]
    if checks:
        extended = []
        for k, (sub, outs, weak, out_tree) in enumerate(traced):
            with sub.activate():
                flags = [sub.local(flag) if owner == k else lax.full(sub, (), False, np.bool_).inst
                         for owner, flag, _, _ in checks]
            extended.append((sub, outs + flags, weak, out_tree))
        traced = extended
    first = traced[0]
    want = [(tuple(i.shape.dims), i.shape.dtype.numpy) for i in first[1]]
    for _, outs, _, out_tree in traced[1:]:
        got = [(tuple(i.shape.dims), i.shape.dtype.numpy) for i in outs]
        _check_same_types(f"{name} branches' outputs", want, got, first[3], out_tree)
    count = len(first[1]) - len(checks)
    computations, tuples = [], []
    for k, (sub, outs, _, _) in enumerate(traced):
        caps = [outer for outer, _ in sub.captures]
        state = args + caps
        shapes = [parent.local(t).shape for t in state]
        computations.append(
            _wrap(parent, f"branch_{k}", sub, shapes, {j: j for j in range(len(state))}, outs)
        )
        tuples.append(parent.emit("tuple", state))
    return (
        computations,
        tuples,
        first[2],
        first[3],
        count,
        [(error, message) for _, _, error, message in checks],
    )


def _results(parent: Trace, inst_tracer: Tracer, weak, out_tree, count: int, checks=()):
    if count == 1 and not checks:
        return unflatten(out_tree, [Tracer(parent, inst_tracer.inst, weak[0])])
    outs = [
        Tracer(parent, parent.emit("get-tuple-element", (inst_tracer,), {"index": k}).inst, weak[k])
        for k in range(count)
    ]
    for c, (error, message) in enumerate(checks):
        parent.checks.append(
            (parent.emit("get-tuple-element", (inst_tracer,), {"index": count + c}), error, message)
        )
    return unflatten(out_tree, outs)


def cond(pred, true_fun, false_fun, *operands):
    """``true_fun(*operands) if pred else false_fun(*operands)``; with a traced ``pred`` only
    the chosen branch runs (HLO ``conditional``)."""
    if not isinstance(pred, Tracer):  # a Python value: the branch is known now
        return true_fun(*operands) if bool(pred) else false_fun(*operands)
    parent = current_trace() or pred.trace
    with parent.op_scope("cond"):
        p = pred if isinstance(pred, Tracer) else lax.lift(parent, pred)
        if p.ndim:
            raise UserTypeError(f"cond predicate must be a scalar, got {p.describe()}")
        if p.dtype != np.bool_:
            p = lax.compare(p, lax.full_like(p, 0), "NE")
        comps, tuples, weak, out_tree, count, checks = _branches(
            parent, (true_fun, false_fun), operands, "cond"
        )
        result = parent.emit("conditional", [p] + tuples,
                             {"true_computation": comps[0], "false_computation": comps[1]})
        return _results(parent, result, weak, out_tree, count, checks)


def switch(index, branches, *operands):
    """``branches[clamp(index, 0, len(branches) - 1)](*operands)``, as ``jax.lax.switch``."""
    branches = list(branches)
    if not branches:
        raise UserTypeError("switch needs at least one branch")
    if not isinstance(index, Tracer):  # a Python value: the branch is known now
        return branches[min(max(operator.index(index), 0), len(branches) - 1)](*operands)
    parent = current_trace() or index.trace
    with parent.op_scope("switch"):
        i = index if isinstance(index, Tracer) else lax.lift(parent, index)
        if i.ndim or i.dtype.kind not in "iu":
            raise UserTypeError(f"switch index must be an integer scalar, got {i.describe()}")
        wide = lax.convert(i, np.int64)
        clamped = lax.elementwise(
            "minimum",
            lax.elementwise("maximum", wide, lax.full_like(wide, 0)),
            lax.full_like(wide, len(branches) - 1),
        )
        comps, tuples, weak, out_tree, count, checks = _branches(
            parent, branches, operands, "switch"
        )
        result = parent.emit("conditional", [lax.convert(clamped, np.int32)] + tuples,
                             {"branch_computations": tuple(comps)})
        return _results(parent, result, weak, out_tree, count, checks)


__all__ = ["while_loop", "fori_loop", "cond", "switch", "scan"]
