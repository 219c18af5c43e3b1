"""Primitive emitters on tracers, one HLO instruction (or a few) each, as ``jax.lax``.
NumPy-level functions (broadcasting, promotion, axis handling) are built on these."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..ir import dtypes as ir_dtypes
from ..ir.custom_calls import target as library_routine
from ..ir.ops import GroupOp, identity, initial_value
from ..ir.shapes import Shape
from ..ir.sorting import numpy_order_comparator
from ..ir.user_code import inside_users_try
from ..ir.windows import prefix_scan_window
from .errors import (DTypeMismatchError, ShapeMismatchError, UnsupportedNumpyError,
                     UserOverflowError, subclass_problem)
from .promotion import SUPPORTED, check_int_fits
from .tracer import Trace, Tracer, can_break, check_same_trace, current_trace


def ir_shape(dtype, dims) -> Shape:
    return Shape(ir_dtypes.from_numpy(dtype), tuple(int(d) for d in dims))


def check_supported_dtype(dtype, what: str) -> np.dtype:
    dtype = np.dtype(dtype)
    if dtype not in SUPPORTED:
        raise DTypeMismatchError(
            f"{what} has dtype {dtype}, which toolkit does not trace "
            f"(supported: {', '.join(map(str, SUPPORTED))})")
    return dtype


def trace_of(values: Sequence) -> Trace:
    for v in values:
        if isinstance(v, Tracer):
            return check_same_trace(v)
    trace = current_trace()
    if trace is None:
        raise RuntimeError("no active trace")  # internal: callers check for tracers first
    return trace


def lift(trace: Trace, value, dtype=None, weak: bool | None = None, what: str = "operand",
         wrap_ints: bool = False) -> Tracer:
    """A tracer for ``value``: tracers pass through (converted to ``dtype`` if given), Python
    scalars and NumPy arrays become constants. A Python int that does not fit ``dtype`` is an
    OverflowError, as in NumPy's ufuncs, unless ``wrap_ints`` (NumPy's casts, as np.where's)."""
    if isinstance(value, Tracer):
        check_same_trace(value)
        return (
            value
            if dtype is None or value.dtype == dtype
            else convert(value, dtype, value.weak_type, wrap=wrap_ints)
        )
    kind = type(value)
    if (kind is int or kind is float and value == value) and dtype is not None and not wrap_ints:
        # a Python number lifted before with this dtype: its constant (a float by its exact
        # text, so -0.0 and 0.0 are two constants, NaNs are never looked up; the range check
        # passed the first time)
        key = (kind, value if kind is int else value.hex(), dtype, weak)
        inst = trace.lifted_constant(key)
        if inst is None:
            made = _lift_value(trace, value, dtype, weak, what)
            if made.inst.opcode == "constant":
                trace.remember_lifted(key, made.inst)
            return made
        return Tracer(trace, inst, True if weak is None else weak)
    return _lift_value(trace, value, dtype, weak, what, wrap_ints)


def _lift_value(trace: Trace, value, dtype, weak: bool | None, what: str,
                wrap_ints: bool = False) -> Tracer:
    is_python = isinstance(value, (bool, int, float, complex)) and not isinstance(value, np.generic)
    problem = subclass_problem(value, what)
    if problem is not None:
        raise problem
    if dtype is None:
        from .promotion import python_scalar_dtype

        dtype = python_scalar_dtype(value) if is_python else np.asarray(value).dtype
    dtype = check_supported_dtype(dtype, what)
    if is_python and isinstance(value, int) and not isinstance(value, bool):
        if wrap_ints and dtype.kind in "iu":
            value = np.array(value, dtype=np.int64 if value < 2 ** 63 else np.uint64).astype(dtype)
        else:
            check_int_fits(value, dtype, f" (a Python int used as {what})")
    if isinstance(value, (list, tuple)):
        value = np.asarray(value)
    if isinstance(value, np.ndarray) and value.dtype.kind not in "biufc":
        raise UnsupportedNumpyError(f"{what}: arrays of dtype {value.dtype} cannot be traced")
    with np.errstate(all="ignore"):
        return trace.constant(value, dtype, weak=is_python if weak is None else weak)


def convert(x: Tracer, dtype, weak: bool = False, wrap: bool = False) -> Tracer:
    """``x`` as ``dtype``. A Python int (a weak integer tracer) made a narrower integer is
    checked against its range, as NumPy 2 refuses to wrap one (``np.full_like(x_int8, n)``),
    unless ``wrap``: NumPy's unsafe casts of operands (np.where's branches) wrap it."""
    dtype = np.dtype(dtype)
    if (x.weak_type and not wrap and x.dtype.kind in "iu" and dtype.kind in "iu"
            and not np.can_cast(x.dtype, dtype)):
        check_weak_int_fits(x, dtype)
    if x.dtype == dtype:
        return x if x.weak_type == weak else Tracer(x._trace, x.inst, weak)
    if x.dtype.kind == "c" and dtype.kind != "c":  # NumPy's casts: z != 0, or the real part
        if dtype.kind == "b":
            return compare(x, full_like(x, 0), "NE")
        x = x.trace.emit("real", (x,))
        if x.dtype == dtype:
            return x if x.weak_type == weak else Tracer(x._trace, x.inst, weak)
    if x.dtype.kind == "f" and dtype.kind in "iu":
        return _float_to_int(x, dtype, weak)
    return x.trace.emit("convert", (x,), shape=ir_shape(dtype, x.shape), weak=weak)


def check_weak_int_fits(x: Tracer, dtype: np.dtype) -> None:
    """NumPy 2 (NEP 50) raises OverflowError where a Python int meets an integer type that
    cannot hold it; the program would wrap it. A Python-int argument is checked before each call
    (Trace.note_argument_limit); a value computed from them (``t * 2``, ``n - k``) is checked by
    the program: the arguments' ranges say nothing about its own."""
    trace = x.trace
    info = np.iinfo(dtype)
    key = (x.inst, int(info.min), int(info.max))
    if key in trace.narrowed:
        return
    trace.narrowed.add(key)
    known = static_range(x.inst)
    if known is not None and info.min <= known[0] and known[1] <= info.max:
        return  # (every value it can take fits: nothing to check)
    if trace.note_argument_limit(x, dtype):
        return
    own = np.iinfo(x.dtype)
    lo, hi = (full_like(x, min(max(int(b), int(own.min)), int(own.max)))
              for b in (info.min, info.max))
    outside = elementwise("or", compare(x, lo, "LT"), compare(x, hi, "GT"))
    add_check(outside, UserOverflowError,
              f"Python integer out of bounds for {np.dtype(dtype)}: an integer computed from "
              f"Python-int arguments meets an array of dtype {np.dtype(dtype)}, as NumPy 2 "
              "(NEP 50) refuses too. Make it np.int64(...) to compute in int64")


# the instructions static_range looks through; a longer walk gives up (the check stays)
_RANGE_WALK = 32


def static_range(inst) -> tuple[int, int] | None:
    """The least and greatest value an integer instruction can take whatever the arguments
    are, where that is known without them: constants and the selects, broadcasts and reshapes
    of constants (what a helper's ``return 1`` / ``return 0`` makes, converted from its ``if``
    on traced values); None where it depends on values (or the walk is long)."""
    lo = hi = None
    stack, walked = [inst], 0
    while stack:
        node = stack.pop()
        walked += 1
        if walked > _RANGE_WALK:
            return None
        if node.opcode == "constant":
            literal = node.attrs.get("literal")
            if literal is None or np.asarray(literal).dtype.kind not in "iub":
                return None
            literal = np.asarray(literal)
            if literal.size:
                least, most = int(literal.min()), int(literal.max())
                lo = least if lo is None else min(lo, least)
                hi = most if hi is None else max(hi, most)
        elif node.opcode == "select":
            stack.extend(node.operands[1:])  # (whichever the predicate picks)
        elif node.opcode in GroupOp.SAME_ELEMENTS:  # (a reshape's or broadcast's values)
            stack.append(node.operands[0])
        else:
            return None
    return None if lo is None else (lo, hi)


def _float_to_int(x: Tracer, dtype: np.dtype, weak: bool) -> Tracer:
    """NumPy's float -> integer cast, as its C casts compile on x86-64: through int32 for the
    targets of up to 32 bits but uint32, through int64 for int64 and uint32, and for uint64
    through int64 with values from 2**63 offset by it. NaN and values whose truncation is out
    of the intermediate's range give its minimum (x86's "integer indefinite": NumPy warns
    "invalid value encountered in cast" there); then the low bits are kept, so 636.7 as int8 is
    124 as in NumPy, where XLA's convert (which saturates) gives 127. Values whose truncation
    fits the intermediate convert alike on every machine NumPy runs on."""
    if dtype == np.uint64:
        offset = float(2 ** 63)
        high = compare(x, full_like(x, offset), "GE")
        low_part = _truncated(x, np.dtype(np.int64))
        high_part = _truncated(elementwise("subtract", x, full_like(x, offset)),
                               np.dtype(np.int64))
        high_part = elementwise("xor", high_part, full_like(high_part, np.iinfo(np.int64).min))
        wide = select(high, high_part, low_part)
    else:
        through = np.dtype(np.int64 if dtype.itemsize == 8 or dtype == np.uint32 else np.int32)
        wide = _truncated(x, through)
    if wide.dtype == dtype:
        return wide if wide.weak_type == weak else Tracer(wide._trace, wide.inst, weak)
    return wide.trace.emit("convert", (wide,), shape=ir_shape(dtype, wide.shape), weak=weak)


def _truncated(x: Tracer, through: np.dtype) -> Tracer:
    """``x`` truncated to the signed ``through``, its minimum where NaN or out of range."""
    bits = through.itemsize * 8
    below = -float(2 ** (bits - 1)) - 1.0  # truncates to just under the minimum
    if float(x.dtype.type(below)) == below:
        low_ok = compare(x, full_like(x, below), "GT")
    else:  # (no value of x's type lies between ``below`` and the minimum)
        low_ok = compare(x, full_like(x, -float(2 ** (bits - 1))), "GE")
    with np.errstate(over="ignore"):  # (2**31 is inf in float16: every finite value is below)
        high = x.dtype.type(2 ** (bits - 1))
    in_range = elementwise("and", low_ok, compare(x, full_like(x, high), "LT"))
    converted = x.trace.emit("convert", (x,), shape=ir_shape(through, x.shape))
    return select(in_range, converted, full_like(converted, np.iinfo(through).min))


def bitcast_convert(x: Tracer, dtype) -> Tracer:
    return x.trace.emit("bitcast-convert", (x,), shape=ir_shape(dtype, x.shape))


def broadcast_in_dim(x: Tracer, shape: Sequence[int], dims: Sequence[int]) -> Tracer:
    shape = tuple(shape)
    if tuple(x.shape) == shape and list(dims) == list(range(len(shape))):
        return x
    return x.trace.emit("broadcast", (x,), {"dimensions": tuple(dims)},
                        ir_shape(x.dtype, shape), weak=x.weak_type)


def reshape(x: Tracer, shape: Sequence[int]) -> Tracer:
    shape = tuple(int(d) for d in shape)
    if tuple(x.shape) == shape:
        return x
    return x.trace.emit("reshape", (x,), shape=ir_shape(x.dtype, shape), weak=x.weak_type)


def broadcast_to(x: Tracer, shape: Sequence[int]) -> Tracer:
    """NumPy broadcasting of ``x`` to ``shape`` (size-1 dimensions stretch)."""
    shape = tuple(shape)
    if x.shape == shape:
        return x
    offset = len(shape) - x.ndim
    if offset < 0 or any(d not in (1, shape[offset + i]) for i, d in enumerate(x.shape)):
        raise ShapeMismatchError(f"cannot broadcast {x.describe()} to shape {shape}")
    kept = [i for i, d in enumerate(x.shape) if d == shape[offset + i]]
    squeezed = reshape(x, [x.shape[i] for i in kept])
    return broadcast_in_dim(squeezed, shape, [offset + i for i in kept])


def transpose(x: Tracer, perm: Sequence[int]) -> Tracer:
    perm = tuple(perm)
    if perm == tuple(range(x.ndim)):
        return x
    return x.trace.emit("transpose", (x,), {"dimensions": perm},
                        ir_shape(x.dtype, [x.shape[p] for p in perm]), weak=x.weak_type)


def slice_(x: Tracer, spec: Sequence[tuple[int, int, int]]) -> Tracer:
    if all(s == 0 and e == d and st == 1 for (s, e, st), d in zip(spec, x.shape)):
        return x
    return x.trace.emit("slice", (x,), {"slice": tuple(spec)}, weak=x.weak_type)


def rev(x: Tracer, dims: Sequence[int]) -> Tracer:
    if not dims:
        return x
    return x.trace.emit("reverse", (x,), {"dimensions": tuple(dims)}, weak=x.weak_type)


def concatenate(xs: Sequence[Tracer], axis: int) -> Tracer:
    if len(xs) == 1:
        return xs[0]
    return xs[0].trace.emit("concatenate", tuple(xs), {"dimensions": (axis,)},
                            weak=all(x.weak_type for x in xs))


def pad(x: Tracer, value: Tracer, spec: Sequence[tuple[int, int, int]]) -> Tracer:
    return x.trace.emit("pad", (x, value), {"padding": tuple(spec)}, weak=x.weak_type)


def select(pred: Tracer, a: Tracer, b: Tracer) -> Tracer:
    return a.trace.emit("select", (pred, a, b), weak=a.weak_type and b.weak_type)


def compare(a: Tracer, b: Tracer, direction: str) -> Tracer:
    return a.trace.emit("compare", (a, b), {"direction": direction})


def elementwise(opcode: str, *xs: Tracer, weak: bool = False) -> Tracer:
    return xs[0].trace.emit(opcode, xs, weak=weak)


def full(trace: Trace, shape: Sequence[int], value, dtype, weak: bool = False) -> Tracer:
    scalar = lift(trace, value, dtype, weak)
    return broadcast_in_dim(scalar, tuple(shape), ())


def full_like(x: Tracer, value, dtype=None) -> Tracer:
    return full(x.trace, x.shape, value, dtype or x.dtype)


def iota(trace: Trace, dtype, shape: Sequence[int], dimension: int) -> Tracer:
    return trace.emit("iota", (), {"iota_dimension": dimension}, ir_shape(dtype, shape))


def reduce(x: Tracer, opcode: str, axes: Sequence[int]) -> Tracer:
    """``reduce`` with a scalar ``opcode`` reducer over ``axes``, starting from NumPy's initial
    value (+0.0 for a float sum, as np.sum's)."""
    axes = tuple(sorted(axes))
    if not axes:
        return x
    trace = x.trace
    init = lift(trace, initial_value(opcode, x.dtype), x.dtype, weak=False)
    reducer = trace.module.scalar_reducer(opcode, ir_dtypes.from_numpy(x.dtype))
    return trace.emit("reduce", (x, init), {"dimensions": axes, "to_apply": reducer},
                      weak=x.weak_type)


def reduce_window(x: Tracer, opcode: str, window, init) -> Tracer:
    """XLA's ``reduce-window`` of ``x`` by the scalar ``opcode`` reducer (ir/windows.py),
    padding with ``init`` (a scalar Tracer of x's dtype)."""
    trace = x.trace
    reducer = trace.module.scalar_reducer(opcode, ir_dtypes.from_numpy(x.dtype))
    return trace.emit("reduce-window", (x, init), {"window": tuple(window), "to_apply": reducer},
                      weak=x.weak_type)


def prefix_scan(x: Tracer, axis: int, opcode: str) -> Tracer:
    """The inclusive scan of ``x`` along ``axis``: a reduce-window whose window is the whole
    axis padded in front, starting from the reducer's exact identity, so each element is the
    running fold in NumPy's sequential order (``np.add.accumulate``'s), bit for bit."""
    if x.shape[axis] < 2:
        return x
    init = lift(x.trace, identity(opcode, x.dtype), x.dtype, weak=False)
    return reduce_window(x, opcode, prefix_scan_window(x.shape, axis), init)


def dot_general(lhs: Tracer, rhs: Tracer, contracting: tuple[Sequence[int], Sequence[int]],
                batch: tuple[Sequence[int], Sequence[int]] = ((), ())) -> Tracer:
    attrs = {
        "lhs_batch_dims": tuple(batch[0]), "lhs_contracting_dims": tuple(contracting[0]),
        "rhs_batch_dims": tuple(batch[1]), "rhs_contracting_dims": tuple(contracting[1]),
    }
    if lhs.dtype == np.bool_:
        raise DTypeMismatchError(f"dot/matmul of bool arrays is not supported: {lhs.describe()}")
    return lhs.trace.emit("dot", (lhs, rhs), attrs)


# ---- indexing ------------------------------------------------------------------------------
def gather(x: Tracer, indices: Tracer, *, offset_dims, collapsed_slice_dims, start_index_map,
           slice_sizes, index_vector_dim: int) -> Tracer:
    attrs = {"offset_dims": tuple(offset_dims), "collapsed_slice_dims": tuple(collapsed_slice_dims),
             "start_index_map": tuple(start_index_map), "index_vector_dim": index_vector_dim,
             "slice_sizes": tuple(slice_sizes)}
    return x.trace.emit("gather", (x, indices), attrs, weak=x.weak_type)


def scatter(x: Tracer, indices: Tracer, updates: Tracer, combiner: str, *, update_window_dims,
            inserted_window_dims, scatter_dims_to_operand_dims, index_vector_dim: int) -> Tracer:
    """``combiner``: 'assign' (the update replaces the element) or a binary opcode ('add' ...)."""
    trace = x.trace
    attrs = {
        "update_window_dims": tuple(update_window_dims),
        "inserted_window_dims": tuple(inserted_window_dims),
        "scatter_dims_to_operand_dims": tuple(scatter_dims_to_operand_dims),
        "index_vector_dim": index_vector_dim,
        "to_apply": trace.module.scalar_reducer(combiner, ir_dtypes.from_numpy(x.dtype)),
    }
    return trace.emit("scatter", (x, indices, updates), attrs, weak=x.weak_type)


def add_check(failed: Tracer, error: type, message: str) -> None:
    """Raise ``error(message)`` after a call in which any element of ``failed`` is true."""
    flag = failed if failed.ndim == 0 else reduce(failed, "or", tuple(range(failed.ndim)))
    flag.trace.add_check(flag, error, message)


def sort(operands: Sequence[Tracer], dimension: int, num_keys: int = 1,
         stable: bool = True) -> tuple[Tracer, ...]:
    """Sort of ``operands`` along ``dimension`` in NumPy's order of the first ``num_keys``
    operands (NaN last); the rest are permuted alongside. ``stable``: ties keep their index
    order (NumPy's kind='stable'); otherwise ties are ordered as NumPy's default sort orders
    them (the library call is NumPy's own np.sort/np.argsort: ir/sorting.py)."""
    trace = operands[0].trace
    types = [ir_dtypes.from_numpy(o.dtype) for o in operands]
    comparator = numpy_order_comparator(trace.module, types[:num_keys], types)
    result = trace.emit("sort", tuple(operands), {"dimensions": (dimension,), "is_stable": stable,
                                                  "to_apply": comparator})
    if len(operands) == 1:
        return (Tracer(trace, result.inst, operands[0].weak_type),)
    return tuple(trace.emit("get-tuple-element", (result,), {"index": i}, weak=o.weak_type)
                 for i, o in enumerate(operands))


def dynamic_slice(x: Tracer, starts: Sequence[Tracer], sizes: Sequence[int]) -> Tracer:
    return x.trace.emit(
        "dynamic-slice", (x, *starts), {"dynamic_slice_sizes": tuple(sizes)}, weak=x.weak_type
    )


def dynamic_update_slice(x: Tracer, update: Tracer, starts: Sequence[Tracer]) -> Tracer:
    return x.trace.emit("dynamic-update-slice", (x, update, *starts), weak=x.weak_type)


def custom_call(target: str, operands, options: str = "") -> tuple[Tracer, ...]:
    """A ``custom-call`` to a library routine ir/custom_calls.py names; its results.

    A routine that may raise for some values (``np.linalg.inv`` of a singular matrix), traced
    inside the user's ``try ... except``, is not compiled where the graph may break: its error
    would come after the call, outside the ``except``. UnsupportedNumpyError sends the NumPy
    function that called it to NumPy at a break (frontend.run_by_numpy), where the ``except``
    sees what NumPy raises."""
    trace = operands[0].trace
    if (library_routine(target).raises and all(can_break(o) is not None for o in operands)
            and inside_users_try(1, trace.entry_frame)):
        raise UnsupportedNumpyError(
            f"{target} may raise for some values (np.linalg.LinAlgError), and it is called "
            "inside a try ... except: NumPy runs it there, so that the except sees its error")
    attrs = {"custom_call_target": target}
    if options:
        attrs["backend_config"] = options
    result = trace.emit("custom-call", tuple(operands), attrs)
    if not hasattr(result.inst.shape, "elements"):
        return (result,)
    return tuple(trace.emit("get-tuple-element", (result,), {"index": i})
                 for i in range(len(result.inst.shape.elements)))
