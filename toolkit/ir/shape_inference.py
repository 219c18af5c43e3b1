"""Shape rules: one per op. Each rule takes the operand shapes, the attributes and the
declared result shape (``None`` when the caller wants it inferred) and returns the result
shape or raises ``ShapeError`` saying what does not fit."""
from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from . import dtypes as dt
import difflib

from . import indexing_shapes as ix
from .ops import KEPT_VERBATIM, OPS, RAW_ATTRIBUTES, opdef
from .shapes import AnyShape, Shape, TupleShape
from .windows import check_window, window_output_dims


class ShapeError(ValueError):
    """An instruction whose operands or attributes do not fit its op."""


Rule = Callable[[Sequence[AnyShape], Mapping[str, Any], "AnyShape | None"], AnyShape]
SHAPE_RULES: dict[str, Rule] = {}

def _array(s: AnyShape, what: str) -> Shape:
    if not isinstance(s, Shape):
        raise ShapeError(f"{what} must be an array, got tuple {s}")
    return s


def _check_dtype(opcode: str, s: Shape) -> None:
    t, op = s.dtype, OPS[opcode]
    if t.is_complex:
        if not op.on_complex:
            raise ShapeError(f"{opcode} on complex numbers is not supported by toolkit, got {s}")
        return
    if op.operand_types == "float" and not t.is_float:
        takes = "a complex or floating-point" if op.on_complex else "a floating-point"
        raise ShapeError(f"{opcode} needs {takes} operand, got {s}")
    if op.operand_types == "integer" and not t.is_integer:
        raise ShapeError(f"{opcode} needs an integer operand, got {s}")
    if op.operand_types == "integer_or_pred" and t.is_float:
        raise ShapeError(f"{opcode} needs an integer or pred operand, got {s}")
    # maximum and minimum take pred: they are its or and and
    if op.operand_types == "numeric" and t.is_bool and op.reducer != "selecting":
        raise ShapeError(f"{opcode} is not defined on pred, got {s}")


def _expect(declared: AnyShape | None, inferred: AnyShape, opcode: str) -> AnyShape:
    if declared is not None and not inferred.same_type(declared):
        raise ShapeError(
            f"{opcode}: declared result {declared.to_text(False)} but operands give "
            f"{inferred.to_text(False)}"
        )
    return declared if declared is not None else inferred


def _need_declared(declared, opcode: str) -> Shape:
    if declared is None:
        raise ShapeError(f"{opcode} needs an explicit result shape")
    return _array(declared, f"{opcode} result")


def _dims_attr(attrs, key="dimensions") -> tuple[int, ...]:
    return tuple(attrs.get(key, ()))


def _unary(opcode: str) -> Rule:
    def rule(ops, attrs, declared):
        x = _array(ops[0], f"{opcode} operand")
        _check_dtype(opcode, x)
        if opcode == "is-finite":
            out = x.with_dtype(dt.PRED)
        elif opcode in ("abs", "real", "imag"):  # a complex number's modulus and parts are real
            out = Shape(x.dtype.component, x.dims)
        else:
            out = Shape(x.dtype, x.dims)
        return _expect(declared, out, opcode)
    return rule


def _binary(opcode: str) -> Rule:
    def rule(ops, attrs, declared):
        a, b = (_array(s, f"{opcode} operand") for s in ops)
        if a.dims != b.dims or a.dtype != b.dtype:
            raise ShapeError(
                f"{opcode} operands must have the same shape and type, got "
                f"{a.to_text(False)} and {b.to_text(False)}"
            )
        if opcode == "complex":
            if a.dtype.name not in ("f32", "f64"):
                raise ShapeError(f"complex needs f32 or f64 parts, got {a.to_text(False)}")
            return _expect(declared, Shape(dt.complex_of(a.dtype), a.dims), opcode)
        _check_dtype(opcode, a)
        if opcode == "compare":
            direction = attrs.get("direction")
            if direction not in ("EQ", "NE", "LT", "LE", "GT", "GE"):
                raise ShapeError(f"compare needs direction=EQ|NE|LT|LE|GT|GE, got {direction!r}")
            if a.dtype.is_complex and direction not in ("EQ", "NE"):
                raise ShapeError(
                    f"compare of complex numbers needs direction=EQ|NE, got {direction}"
                )
            return _expect(declared, a.with_dtype(dt.PRED), opcode)
        return _expect(declared, Shape(a.dtype, a.dims), opcode)
    return rule


def _select(ops, attrs, declared):
    p, a, b = (_array(s, "select operand") for s in ops)
    if not p.dtype.is_bool:
        raise ShapeError(f"select predicate must be pred, got {p.to_text(False)}")
    if a.dims != b.dims or a.dtype != b.dtype:
        raise ShapeError(f"select branches differ: {a.to_text(False)} vs {b.to_text(False)}")
    if p.dims != a.dims and p.rank != 0:
        raise ShapeError(f"select predicate {p.to_text(False)} does not match {a.to_text(False)}")
    return _expect(declared, Shape(a.dtype, a.dims), "select")


def _clamp(ops, attrs, declared):
    lo, x, hi = (_array(s, "clamp operand") for s in ops)
    for bound in (lo, hi):
        if bound.dtype != x.dtype or (bound.dims != x.dims and bound.rank != 0):
            raise ShapeError(f"clamp bound {bound.to_text(False)} does not fit {x.to_text(False)}")
    return _expect(declared, Shape(x.dtype, x.dims), "clamp")


def _convert(ops, attrs, declared):
    x = _array(ops[0], "convert operand")
    out = _need_declared(declared, "convert")
    if out.dims != x.dims:
        raise ShapeError(
            f"convert cannot change dimensions: {x.to_text(False)} -> {out.to_text(False)}"
        )
    if x.dtype.is_complex and not out.dtype.is_complex:
        raise ShapeError(
            f"convert {x.to_text(False)} -> {out.to_text(False)} would drop the imaginary part "
            "(take real() first, as XLA requires)"
        )
    return out


def _custom_call(ops, attrs, declared):
    from .custom_calls import TARGETS
    name = attrs.get("custom_call_target")
    if not isinstance(name, str):
        raise ShapeError("custom-call needs custom_call_target=\"...\"")
    known = TARGETS.get(name)
    if known is None:  # a routine toolkit cannot run: the text says what it returns
        return (
            _need_declared(declared, "custom-call")
            if not isinstance(declared, TupleShape)
            else declared
        )
    arrays = [_array(s, "custom-call operand") for s in ops]
    if not known.matrices:
        try:
            results = known.results(arrays, attrs.get("backend_config", ""))
        except ShapeError:
            raise
        except ValueError as e:  # the routine's options do not fit its operand
            raise ShapeError(f"{name}: {e}") from None
        return _expect(
            declared, results[0] if len(results) == 1 else TupleShape(tuple(results)), "custom-call"
        )
    if not arrays or any(a.rank < 2 for a in arrays[:1]):
        raise ShapeError(
            f"{name} needs a matrix (or a batch of them), got {[a.to_text(False) for a in arrays]}"
        )
    if arrays[0].dims[-1] != arrays[0].dims[-2] and name not in (
        "numpy.linalg.qr",
        "numpy.linalg.svd",
        "numpy.linalg.svdvals",
        "numpy.linalg.pinv",
    ):
        raise ShapeError(f"{name} needs square matrices, got {arrays[0].to_text(False)}")
    results = known.results(arrays, attrs.get("backend_config", ""))
    out = results[0] if len(results) == 1 else TupleShape(tuple(results))
    return _expect(declared, out, "custom-call")


def _sort(ops, attrs, declared):
    arrays = [_array(s, "sort operand") for s in ops]
    if not arrays:
        raise ShapeError("sort needs at least one operand")
    (dim,) = _dims_attr(attrs) or (None,)
    first = arrays[0]
    if dim is None or not 0 <= dim < max(first.rank, 1) or first.rank == 0:
        raise ShapeError(f"sort dimensions={{{dim}}} is out of range for {first.to_text(False)}")
    for a in arrays[1:]:
        if a.dims != first.dims:
            raise ShapeError(
                f"sort operands {first.to_text(False)} and {a.to_text(False)} differ in dimensions"
            )
    comp = attrs.get("to_apply")
    if comp is not None:
        want = [Shape(a.dtype, ()) for a in arrays for _ in (0, 1)]
        params = [
            p.shape for p in sorted(comp.parameters, key=lambda p: p.attrs["parameter_number"])
        ]
        if len(params) != len(want) or any(not p.same_type(w) for p, w in zip(params, want)) or \
                not comp.root.shape.same_type(Shape(dt.PRED, ())):
            raise ShapeError(
                f"sort comparator %{comp.name} must take two scalars per operand and return pred"
            )
    out = first if len(arrays) == 1 else TupleShape(tuple(Shape(a.dtype, a.dims) for a in arrays))
    return _expect(declared, Shape(first.dtype, first.dims) if len(arrays) == 1 else out, "sort")


def _bitcast_convert(ops, attrs, declared):
    x = _array(ops[0], "bitcast-convert operand")
    out = _need_declared(declared, "bitcast-convert")
    if (
        out.dims != x.dims
        or out.dtype.itemsize != x.dtype.itemsize
        or x.dtype.is_bool
        or out.dtype.is_bool
    ):
        raise ShapeError(
            f"bitcast-convert {x.to_text(False)} -> {out.to_text(False)} must keep the dimensions "
            "and the (non-pred) element width"
        )
    return out


def _parameter(ops, attrs, declared):
    if declared is None:
        raise ShapeError("parameter needs an explicit shape")
    return declared


def _constant(ops, attrs, declared):
    lit = attrs.get("literal")
    if not isinstance(lit, np.ndarray):
        raise ShapeError("constant needs a literal")
    return _expect(declared, Shape(dt.from_numpy(lit.dtype), lit.shape), "constant")


def _iota(ops, attrs, declared):
    out = _need_declared(declared, "iota")
    d = attrs.get("iota_dimension")
    if not isinstance(d, int) or not 0 <= d < max(out.rank, 1) or out.rank == 0:
        raise ShapeError(f"iota_dimension={d} is out of range for {out.to_text(False)}")
    if out.dtype.is_bool:
        raise ShapeError("iota cannot produce pred")
    return out


def _broadcast(ops, attrs, declared):
    x = _array(ops[0], "broadcast operand")
    out = _need_declared(declared, "broadcast")
    dims = _dims_attr(attrs)
    if len(dims) != x.rank:
        raise ShapeError(
            f"broadcast dimensions={{{','.join(map(str, dims))}}} must name one output "
            f"dimension per operand dimension of {x.to_text(False)}"
        )
    if any(not 0 <= d < out.rank for d in dims) or list(dims) != sorted(set(dims)):
        raise ShapeError(
            f"broadcast dimensions {dims} must be increasing and within rank {out.rank}"
        )
    for i, d in enumerate(dims):
        if x.dims[i] != out.dims[d]:
            raise ShapeError(f"broadcast of {x.to_text(False)} to {out.to_text(False)}: operand "
                             f"dimension {i} ({x.dims[i]}) != output dimension {d} ({out.dims[d]})")
    if out.dtype != x.dtype:
        raise ShapeError("broadcast cannot change the element type")
    return out


def _reshape(opcode: str) -> Rule:
    def rule(ops, attrs, declared):
        x = _array(ops[0], f"{opcode} operand")
        out = _need_declared(declared, opcode)
        if out.size != x.size or out.dtype != x.dtype:
            raise ShapeError(f"{opcode} {x.to_text(False)} -> {out.to_text(False)} changes the "
                             "element count or type")
        return out
    return rule


def _transpose(ops, attrs, declared):
    x = _array(ops[0], "transpose operand")
    perm = _dims_attr(attrs)
    if sorted(perm) != list(range(x.rank)):
        raise ShapeError(f"transpose dimensions {perm} are not a permutation of rank {x.rank}")
    return _expect(declared, x.with_dims(x.dims[p] for p in perm), "transpose")


def _slice(ops, attrs, declared):
    x = _array(ops[0], "slice operand")
    spec = tuple(attrs.get("slice", ()))
    if len(spec) != x.rank:
        raise ShapeError(f"slice needs {x.rank} ranges for {x.to_text(False)}, got {len(spec)}")
    dims = []
    for i, (start, limit, stride) in enumerate(spec):
        if not (0 <= start <= limit <= x.dims[i]) or stride < 1:
            raise ShapeError(f"slice [{start}:{limit}:{stride}] is out of bounds for dimension "
                             f"{i} of {x.to_text(False)}")
        dims.append(-(-(limit - start) // stride))
    return _expect(declared, x.with_dims(dims), "slice")


def _concatenate(ops, attrs, declared):
    arrays = [_array(s, "concatenate operand") for s in ops]
    if not arrays:
        raise ShapeError("concatenate needs at least one operand")
    (axis,) = _dims_attr(attrs) or (None,)
    first = arrays[0]
    if axis is None or not 0 <= axis < first.rank:
        raise ShapeError(f"concatenate dimension {axis} is out of range for {first.to_text(False)}")
    for a in arrays[1:]:
        same = a.rank == first.rank and all(
            a.dims[i] == first.dims[i] for i in range(a.rank) if i != axis)
        if not same or a.dtype != first.dtype:
            raise ShapeError(f"concatenate operands {first.to_text(False)} and {a.to_text(False)} "
                             f"differ outside dimension {axis}")
    dims = list(first.dims)
    dims[axis] = sum(a.dims[axis] for a in arrays)
    return _expect(declared, first.with_dims(dims), "concatenate")


def _pad(ops, attrs, declared):
    x = _array(ops[0], "pad operand")
    value = _array(ops[1], "pad value")
    if value.rank != 0 or value.dtype != x.dtype:
        raise ShapeError(f"pad value must be a {x.dtype.name} scalar, got {value.to_text(False)}")
    spec = tuple(attrs.get("padding", ()))
    if len(spec) != x.rank:
        raise ShapeError(f"padding needs {x.rank} entries for {x.to_text(False)}")
    dims = []
    for d, (lo, hi, interior) in zip(x.dims, spec):
        if interior < 0:
            raise ShapeError("interior padding must be non-negative")
        n = lo + hi + d + max(d - 1, 0) * interior
        if n < 0:
            raise ShapeError(f"padding {lo}_{hi}_{interior} makes a negative dimension")
        dims.append(n)
    return _expect(declared, x.with_dims(dims), "pad")


def _same_shape_with_dims(opcode: str) -> Rule:
    def rule(ops, attrs, declared):
        x = _array(ops[0], f"{opcode} operand")
        dims = _dims_attr(attrs)
        if any(not 0 <= d < x.rank for d in dims) or len(set(dims)) != len(dims):
            raise ShapeError(f"{opcode} dimensions {dims} are invalid for {x.to_text(False)}")
        return _expect(declared, Shape(x.dtype, x.dims), opcode)
    return rule


def _identity(opcode: str) -> Rule:
    def rule(ops, attrs, declared):
        x = _array(ops[0], f"{opcode} operand")
        return _expect(declared, Shape(x.dtype, x.dims), opcode)
    return rule


def _reduce(ops, attrs, declared):
    if len(ops) % 2 or not ops:
        raise ShapeError("reduce needs inputs followed by as many init values")
    n = len(ops) // 2
    inputs = [_array(s, "reduce input") for s in ops[:n]]
    inits = [_array(s, "reduce init value") for s in ops[n:]]
    dims = _dims_attr(attrs)
    first = inputs[0]
    if any(not 0 <= d < first.rank for d in dims) or len(set(dims)) != len(dims):
        raise ShapeError(f"reduce dimensions {dims} are invalid for {first.to_text(False)}")
    outs = []
    for x, init in zip(inputs, inits):
        if x.dims != first.dims:
            raise ShapeError("variadic reduce inputs must share dimensions")
        if init.rank != 0 or init.dtype != x.dtype:
            raise ShapeError(f"reduce init {init.to_text(False)} must be a {x.dtype.name} scalar")
        outs.append(x.with_dims(d for i, d in enumerate(x.dims) if i not in dims))
    comp = attrs.get("to_apply")
    if comp is not None:
        params = [p.shape for p in comp.parameters]
        want = [Shape(s.dtype, ()) for s in inits] * 2
        if len(params) != 2 * n or any(not p.same_type(w) for p, w in zip(params, want)):
            raise ShapeError(f"reducer %{comp.name} must take {2 * n} scalars of the init types")
    out = outs[0] if n == 1 else TupleShape(tuple(outs))
    return _expect(declared, out, "reduce")


def _reduce_window(ops, attrs, declared):
    if len(ops) != 2:
        raise ShapeError("reduce-window takes one input and its init value (toolkit does not "
                         f"model the variadic form), got {len(ops)} operands")
    x = _array(ops[0], "reduce-window input")
    init = _array(ops[1], "reduce-window init value")
    if init.rank != 0 or init.dtype != x.dtype:
        raise ShapeError(f"reduce-window init {init.to_text(False)} must be a "
                         f"{x.dtype.name} scalar")
    window = attrs.get("window")
    if window is None:
        raise ShapeError("reduce-window needs window={size=...}")
    problem = check_window(x.dims, window)
    if problem:
        raise ShapeError(f"reduce-window of {x.to_text(False)}: {problem}")
    comp = attrs.get("to_apply")
    if comp is not None:
        params = [p.shape for p in comp.parameters]
        if len(params) != 2 or any(not p.same_type(Shape(x.dtype, ())) for p in params):
            raise ShapeError(f"reducer %{comp.name} must take 2 scalars of the init type")
    return _expect(declared, x.with_dims(window_output_dims(x.dims, window)), "reduce-window")


def _dot(ops, attrs, declared):
    lhs, rhs = (_array(s, "dot operand") for s in ops)
    lb, lc = _dims_attr(attrs, "lhs_batch_dims"), _dims_attr(attrs, "lhs_contracting_dims")
    rb, rc = _dims_attr(attrs, "rhs_batch_dims"), _dims_attr(attrs, "rhs_contracting_dims")
    if len(lb) != len(rb) or len(lc) != len(rc):
        raise ShapeError("dot needs as many lhs as rhs batch and contracting dimensions")
    for side, shape, dims in (("lhs", lhs, lb + lc), ("rhs", rhs, rb + rc)):
        if any(not 0 <= d < shape.rank for d in dims) or len(set(dims)) != len(dims):
            raise ShapeError(f"dot {side} dimensions {dims} are invalid for {shape.to_text(False)}")
    for a, b, what in [(x, y, "batch") for x, y in zip(lb, rb)] + [
        (x, y, "contracting") for x, y in zip(lc, rc)
    ]:
        if lhs.dims[a] != rhs.dims[b]:
            raise ShapeError(f"dot {what} dimension mismatch: lhs {lhs.to_text(False)} dim {a} "
                             f"vs rhs {rhs.to_text(False)} dim {b}")
    if lhs.dtype != rhs.dtype:
        raise ShapeError(
            f"dot operands differ in type: {lhs.to_text(False)} vs {rhs.to_text(False)}"
        )
    dims = [lhs.dims[d] for d in lb]
    dims += [d for i, d in enumerate(lhs.dims) if i not in lb + lc]
    dims += [d for i, d in enumerate(rhs.dims) if i not in rb + rc]
    dtype = declared.dtype if isinstance(declared, Shape) else lhs.dtype
    if dtype.is_bool != lhs.dtype.is_bool or dtype.is_float != lhs.dtype.is_float:
        raise ShapeError(f"dot of {lhs.to_text(False)} operands cannot produce {dtype.name} "
                         "(the result type may only widen within the operands' kind)")
    return _expect(declared, Shape(dtype, tuple(dims)), "dot")


def _one_parameter(comp, shape, what: str) -> None:
    params = comp.parameters
    if len(params) != 1 or not params[0].shape.same_type(shape):
        raise ShapeError(
            f"{what} %{comp.name} must take one parameter of the operand's shape {shape}"
        )


def _while(ops, attrs, declared):
    if len(ops) != 1:
        raise ShapeError(
            f"while takes one operand (a tuple carries several values), got {len(ops)}"
        )
    (state,) = ops
    cond, body = attrs.get("condition"), attrs.get("body")
    if cond is None or body is None:
        raise ShapeError("while needs condition= and body=")
    _one_parameter(cond, state, "while condition")
    _one_parameter(body, state, "while body")
    if not cond.root.shape.same_type(Shape(dt.PRED, ())):
        raise ShapeError(
            f"while condition %{cond.name} must return pred[], returns {cond.root.shape}"
        )
    if not body.root.shape.same_type(state):
        raise ShapeError(f"while body %{body.name} must return the loop state's shape {state}, "
                         f"returns {body.root.shape}")
    return _expect(declared, state, "while")


def _conditional(ops, attrs, declared):
    if not ops:
        raise ShapeError("conditional needs a selector operand")
    selector = _array(ops[0], "conditional selector")
    if "branch_computations" in attrs:
        if selector.rank != 0 or selector.dtype.name != "s32":
            raise ShapeError(
                f"conditional with branch_computations needs an s32[] index, got {selector}"
            )
        branches = tuple(attrs["branch_computations"])
    else:
        if selector.rank != 0 or not selector.dtype.is_bool:
            raise ShapeError(
                f"conditional with true/false computations needs a pred[] selector, got {selector}"
            )
        if attrs.get("true_computation") is None or attrs.get("false_computation") is None:
            raise ShapeError(
                "conditional needs true_computation= and false_computation=, or "
                "branch_computations="
            )
        branches = (attrs["true_computation"], attrs["false_computation"])
    if not branches or len(ops) - 1 != len(branches):
        raise ShapeError(
            f"conditional has {len(branches)} branches but {len(ops) - 1} branch operands"
        )
    for comp, operand in zip(branches, ops[1:]):
        _one_parameter(comp, operand, "conditional branch")
    out = branches[0].root.shape
    for comp in branches[1:]:
        if not comp.root.shape.same_type(out):
            raise ShapeError(
                f"conditional branches return different shapes: {out} and {comp.root.shape}"
            )
    return _expect(declared, out, "conditional")


def _opt_barrier(ops, attrs, declared):
    return _expect(declared, ops[0], "opt-barrier")


def _tuple(ops, attrs, declared):
    return _expect(declared, TupleShape(tuple(ops)), "tuple")


def _gte(ops, attrs, declared):
    (t,) = ops
    index = attrs.get("index")
    if (
        not isinstance(t, TupleShape)
        or not isinstance(index, int)
        or not 0 <= index < len(t.elements)
    ):
        raise ShapeError(f"get-tuple-element index={index} is invalid for {t}")
    return _expect(declared, t.elements[index], "get-tuple-element")


def _calls(opcode: str, key: str) -> Rule:
    def rule(ops, attrs, declared):
        comp = attrs.get(key)
        if comp is None:
            raise ShapeError(f"{opcode} needs {key}=")
        params = [p.shape for p in comp.parameters]
        if len(params) != len(ops) or any(not p.same_type(o) for p, o in zip(params, ops)):
            raise ShapeError(f"{opcode} operands do not match the parameters of %{comp.name}")
        if opcode == "fusion" and attrs.get("kind") not in (
            "kLoop",
            "kInput",
            "kOutput",
            "kCustom",
        ):
            raise ShapeError(
                f"fusion kind must be kLoop|kInput|kOutput|kCustom, got {attrs.get('kind')!r}"
            )
        return _expect(declared, comp.root.shape, opcode)
    return rule


def _indexing(opcode: str, rule) -> Rule:
    def run(ops, attrs, declared):
        arrays = [_array(s, f"{opcode} operand") for s in ops]
        try:
            return _expect(declared, rule(arrays, attrs), opcode)
        except ix.IndexingShapeError as e:
            raise ShapeError(str(e)) from None
    return run


def _variadic_at_least(n: int, opcode: str, rule):
    def run(arrays, attrs):
        if len(arrays) < n:
            raise ix.IndexingShapeError(f"{opcode} needs at least {n} operands")
        return rule(arrays, attrs)
    return run


for _name, _op in OPS.items():
    if _op.category == "unary":
        SHAPE_RULES[_name] = _unary(_name)
    elif _op.category == "binary":
        SHAPE_RULES[_name] = _binary(_name)
SHAPE_RULES.update(
    {
        "convert": _convert,
        "bitcast-convert": _bitcast_convert,
        "sort": _sort,
        "custom-call": _custom_call,
        "select": _select,
        "clamp": _clamp,
        "parameter": _parameter,
        "constant": _constant,
        "iota": _iota,
        "broadcast": _broadcast,
        "reshape": _reshape("reshape"),
        "bitcast": _reshape("bitcast"),
        "transpose": _transpose,
        "slice": _slice,
        "concatenate": _concatenate,
        "pad": _pad,
        "reverse": _same_shape_with_dims("reverse"),
        "copy": _identity("copy"),
        "reduce": _reduce,
        "reduce-window": _reduce_window,
        "dot": _dot,
        "tuple": _tuple,
        "while": _while,
        "conditional": _conditional,
        "get-tuple-element": _gte,
        "opt-barrier": _opt_barrier,
        "call": _calls("call", "to_apply"),
        "fusion": _calls("fusion", "calls"),
        "gather": _indexing("gather", lambda a, attrs: ix.gather_shape(a[0], a[1], attrs)),
        "scatter": _indexing("scatter", lambda a, attrs: ix.scatter_shape(a[0], a[1], a[2], attrs)),
        "dynamic-slice": _indexing(
            "dynamic-slice",
            _variadic_at_least(
                1, "dynamic-slice", lambda a, attrs: ix.dynamic_slice_shape(a[0], a[1:], attrs)
            ),
        ),
        "dynamic-update-slice": _indexing(
            "dynamic-update-slice",
            _variadic_at_least(
                2,
                "dynamic-update-slice",
                lambda a, attrs: ix.dynamic_update_slice_shape(a[0], a[1], a[2:]),
            ),
        ),
    }
)


def _group_size(opcode: str, attrs) -> int | None:
    """The devices in each replica group (None: ``{}``, every device, a count the module's
    run decides). XLA's verifier rules: the flag needs a channel id and listed groups, and the
    groups of a collective that splits or gathers are of one size."""
    from .collectives import group_mode

    try:
        mode = group_mode(attrs)
    except ValueError as e:
        raise ShapeError(f"{opcode}: {e}") from None
    groups = attrs.get("replica_groups") or ()
    if mode == "flattened-id" and not groups:
        raise ShapeError(f"{opcode}: replica groups must be specified in flattened-id mode "
                         "(use_global_device_ids=true)")
    sizes = {len(g) for g in groups}
    if 0 in sizes:
        raise ShapeError(f"{opcode}: a replica group is empty")
    ids = [i for g in groups for i in g]
    if len(set(ids)) != len(ids) or any(i < 0 for i in ids):
        raise ShapeError(f"{opcode}: replica groups {groups} repeat an id or hold a negative one")
    if len(sizes) > 1 and opcode != "all-reduce":
        raise ShapeError(f"{opcode}: replica groups must be of one size, not {sorted(sizes)}")
    return max(sizes) if sizes else None


def _collective(opcode: str) -> Rule:
    def rule(ops, attrs, declared):
        if opcode == "all-to-all" and "dimensions" not in attrs:
            return _all_to_all_tuple(ops, attrs, declared)
        if len(ops) != 1:
            raise ShapeError(f"{opcode} takes 1 operand, got {len(ops)}")
        x = _array(ops[0], f"{opcode} operand")
        n = _group_size(opcode, attrs)
        if opcode == "all-reduce":
            comp = attrs.get("to_apply")
            scalar = Shape(x.dtype, ())
            if comp is None or len(comp.parameters) != 2 or any(
                    not p.shape.same_type(scalar) for p in comp.parameters):
                raise ShapeError(f"all-reduce needs a to_apply computation of two "
                                 f"{x.dtype.name}[] scalars")
            return _expect(declared, Shape(x.dtype, x.dims), opcode)
        dims = tuple(attrs.get("dimensions", ()))
        if len(dims) != 1 or not 0 <= dims[0] < x.rank:
            raise ShapeError(f"{opcode}: dimensions={{...}} must name one dimension of "
                             f"{x.to_text(False)}")
        d = dims[0]
        if opcode == "reduce-scatter" and attrs.get("to_apply") is None:
            raise ShapeError("reduce-scatter needs a to_apply computation")
        if n is None:  # every device: the declared shape says how many
            declared_array = _need_declared(declared, opcode)
            return _expect(declared, Shape(x.dtype, declared_array.dims), opcode)
        out = list(x.dims)
        if opcode == "all-gather":
            out[d] *= n
        elif out[d] % n:
            raise ShapeError(f"{opcode}: dimension {d} of {x.to_text(False)} does not split "
                             f"into {n} equal blocks (one per device of a group)")
        elif opcode == "reduce-scatter":
            out[d] //= n
        return _expect(declared, Shape(x.dtype, tuple(out)), opcode)
    return rule


def _all_to_all_tuple(ops, attrs, declared):
    """XLA's tuple form: one operand per device of a group (the block sent to it), a tuple of
    the blocks received, in group order."""
    arrays = [_array(s, "all-to-all operand") for s in ops]
    n = _group_size("all-to-all", attrs)
    if not arrays or (n is not None and len(arrays) != n):
        raise ShapeError(f"all-to-all (tuple form) takes one operand per device of a group "
                         f"({n}), got {len(arrays)}")
    if any(not a.same_type(arrays[0]) for a in arrays):
        raise ShapeError("all-to-all (tuple form) operands must have one shape")
    return _expect(declared, TupleShape(tuple(Shape(a.dtype, a.dims) for a in arrays)),
                   "all-to-all")


def _collective_permute(ops, attrs, declared):
    x = _array(ops[0], "collective-permute operand")
    pairs = tuple(attrs.get("source_target_pairs", ()))
    sources = [p[0] for p in pairs]
    targets = [p[1] for p in pairs]
    if len(set(sources)) != len(sources) or len(set(targets)) != len(targets):
        raise ShapeError(f"collective-permute: a source or a target repeats in {pairs}")
    if any(i < 0 for i in sources + targets):
        raise ShapeError(f"collective-permute: negative id in {pairs}")
    if attrs.get("channel_id") is None and "use_global_device_ids" in attrs:
        raise ShapeError("collective-permute: use_global_device_ids needs a channel_id")
    return _expect(declared, Shape(x.dtype, x.dims), "collective-permute")


def _device_id(opcode: str) -> Rule:
    def rule(ops, attrs, declared):
        return _expect(declared, Shape(dt.from_name("u32"), ()), opcode)
    return rule


SHAPE_RULES.update({
    "all-reduce": _collective("all-reduce"),
    "all-gather": _collective("all-gather"),
    "reduce-scatter": _collective("reduce-scatter"),
    "all-to-all": _collective("all-to-all"),
    "collective-permute": _collective_permute,
    "replica-id": _device_id("replica-id"),
    "partition-id": _device_id("partition-id"),
})


def unknown_attribute_message(opcode: str, name: str) -> str:
    """'reduce has no attribute 'dimnsions' (did you mean 'dimensions'?)'."""
    known = (
        [*OPS[opcode].attributes, *sorted(KEPT_VERBATIM)]
        if opcode in OPS
        else sorted(KEPT_VERBATIM)
    )
    close = difflib.get_close_matches(name, known, n=1)
    hint = (
        f" (did you mean '{close[0]}'?)"
        if close
        else f"; it takes {', '.join(OPS[opcode].attributes) or 'none of its own'}"
        if opcode in OPS
        else ""
    )
    return f"{opcode} has no attribute '{name}'{hint}"


def _check_declared(declared: AnyShape, opcode: str) -> None:
    """Dimensions are sizes: never negative (an iterative walk, however deep the tuple)."""
    if type(declared) is Shape:  # (the common case, without the walk)
        for d in declared.dims:
            if type(d) is not int or d < 0:
                raise ShapeError(f"{opcode}: result shape {declared.to_text(False)} has a "
                                 "negative dimension")
        return
    stack = [declared]
    while stack:
        s = stack.pop()
        if isinstance(s, TupleShape):
            stack.extend(s.elements)
        elif any(type(d) is not int or d < 0 for d in s.dims):
            raise ShapeError(f"{opcode}: result shape {s.to_text(False)} has a negative dimension")


def infer_shape(opcode: str, operand_shapes: Sequence[AnyShape], attrs: Mapping[str, Any],
                declared: AnyShape | None = None) -> AnyShape:
    op = opdef(opcode)
    if op.arity is not None and len(operand_shapes) != op.arity:
        raise ShapeError(f"{opcode} takes {op.arity} operand(s), got {len(operand_shapes)}")
    for name in attrs:
        if name not in op.attributes and name != RAW_ATTRIBUTES:
            raise ShapeError(unknown_attribute_message(opcode, name))
    for name, _ in attrs.get(RAW_ATTRIBUTES, ()):
        if name not in KEPT_VERBATIM:
            raise ShapeError(unknown_attribute_message(opcode, name))
    if declared is not None:
        _check_declared(declared, opcode)
    return SHAPE_RULES[opcode](operand_shapes, attrs, declared)


def element_count(shape: AnyShape) -> int:
    return (
        shape.size if isinstance(shape, Shape) else sum(math.prod(s.dims) for s in shape.leaves())
    )
