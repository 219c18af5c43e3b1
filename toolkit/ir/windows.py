"""``reduce-window``: XLA's windowed reduction, and the facts about its windows.

An output element folds its window of the operand, padded with the init value, in the
window's row-major order: ``init ⊕ w0 ⊕ w1 ⊕ ...`` (XLA's evaluator's order). A window is one
``WindowDim(size, stride, low, high)`` per dimension; XLA prints it as
``window={size=1x5 stride=1x2 pad=0_0x4_0}``, omitting ``stride`` and ``pad`` where all are 1
and 0. Base and window dilation (``lhs_dilate``, ``rhs_dilate``) are not modelled: the parser
names them.

A *prefix scan* is the window NumPy's ``cumsum`` makes: along one dimension of size n the
window covers the whole dimension, padded n - 1 in front (``window={size=n pad=n-1_0}``), and
every other dimension is a window of one. Output i then folds ``init`` n - 1 - i times and
then x[0] ... x[i]; where ``init ⊕ init == init`` (the reducer's identity, or any init of max,
min and the bitwise ops) that is ``init ⊕ x[0] ⊕ ... ⊕ x[i]``, a running fold in NumPy's own
sequential order (``np.add.accumulate``), so a kernel computes it in one pass, bit for bit."""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from .nodes import Instruction
from .ops import OPS, GroupOp, identity
from .queries import reducer_opcode


@dataclass(frozen=True)
class WindowDim:
    size: int
    stride: int = 1
    low: int = 0  # padding before the dimension (init values)
    high: int = 0


Window = tuple[WindowDim, ...]


def window_text(window: Window) -> str:
    """XLA's text: ``size=AxB`` always, ``stride=`` and ``pad=`` where any differs from 1 and 0."""
    parts = ["size=" + "x".join(str(w.size) for w in window)]
    if any(w.stride != 1 for w in window):
        parts.append("stride=" + "x".join(str(w.stride) for w in window))
    if any(w.low or w.high for w in window):
        parts.append("pad=" + "x".join(f"{w.low}_{w.high}" for w in window))
    return "{" + " ".join(parts) + "}"


def parse_window(text: str) -> Window:
    """``window_text``'s inverse (the braces stripped); ValueError names what is wrong."""
    fields: dict[str, list[str]] = {}
    for part in text.split():
        key, sep, value = part.partition("=")
        if not sep:
            raise ValueError(f"window field '{part}' is not key=value")
        if key in ("lhs_dilate", "rhs_dilate", "rhs_reversal"):
            raise ValueError(f"window {key} (dilation, reversal) is not supported")
        if key not in ("size", "stride", "pad"):
            raise ValueError(f"unknown window field '{key}' (size, stride, pad)")
        fields[key] = value.split("x")
    if "size" not in fields:
        raise ValueError("a window needs size=")
    sizes = [int(v) for v in fields["size"]]
    strides = [int(v) for v in fields.get("stride", ["1"] * len(sizes))]
    pads = [tuple(int(p) for p in v.split("_")) for v in fields.get("pad", ["0_0"] * len(sizes))]
    if len(strides) != len(sizes) or len(pads) != len(sizes) or any(len(p) != 2 for p in pads):
        raise ValueError("window size, stride and pad must name every dimension (lo_hi pads)")
    return tuple(WindowDim(s, st, lo, hi) for s, st, (lo, hi) in zip(sizes, strides, pads))


def window_output_dims(dims, window: Window) -> tuple[int, ...]:
    """XLA's reduce-window shape: (padded - size) // stride + 1 per dimension, 0 where the
    window does not fit."""
    out = []
    for d, w in zip(dims, window):
        padded = d + w.low + w.high
        out.append(0 if padded < w.size else (padded - w.size) // w.stride + 1)
    return tuple(out)


def check_window(dims, window: Window) -> str | None:
    """Why ``window`` is not a window of an operand of ``dims``, or None."""
    if len(window) != len(dims):
        return f"a window of {len(window)} dimensions for an operand of {len(dims)}"
    for k, w in enumerate(window):
        if w.size < 1 or w.stride < 1:
            return f"dimension {k}: window size and stride must be positive ({w})"
        if w.low < 0 or w.high < 0:
            return f"dimension {k}: negative padding is not supported ({w})"
    return None


def prefix_scan_window(dims, axis: int) -> Window:
    """The window of an inclusive scan along ``axis`` (NumPy's cumsum)."""
    n = dims[axis]
    return tuple(WindowDim(n, 1, n - 1, 0) if k == axis else WindowDim(1)
                 for k in range(len(dims)))


def scan_axis(window: Window, dims) -> int | None:
    """The axis a window scans (``prefix_scan_window``'s), or None. A window of one element
    everywhere (n = 1) is no scan: it copies."""
    axis = None
    for k, (d, w) in enumerate(zip(dims, window)):
        if w == WindowDim(1):
            continue
        if axis is not None or d < 2 or w != WindowDim(d, 1, d - 1, 0):
            return None
        axis = k
    return axis


def idempotent_init(opcode: str, init) -> bool:
    """``init ⊕ init == init`` bit for bit, so the padding a scan folds first is one init
    (xor's only for 0)."""
    value = np.asarray(init)
    if opcode in GroupOp.SELECTING_REDUCERS:  # (max(x, x) is x; and, or: computed below)
        return True
    with np.errstate(all="ignore"):
        twice = OPS[opcode].ufunc(value, value).astype(value.dtype)
    return twice.tobytes() == value.astype(value.dtype).tobytes()


def compiled_scan(inst: Instruction) -> tuple[int, str] | None:
    """(axis, reducer) where the reduce-window ``inst`` is a prefix scan a kernel runs in one
    pass: a single elementwise reducer, and an init that is a constant equal to its own fold
    (the reducer's identity, as toolkit's scans use), else None."""
    if inst.opcode != "reduce-window" or len(inst.operands) != 2:
        return None
    opcode = reducer_opcode(inst)
    operand, init = inst.operands
    axis = scan_axis(inst.attrs["window"], operand.shape.dims)
    if opcode not in GroupOp.REDUCERS or axis is None or init.opcode != "constant":
        return None
    if not idempotent_init(opcode, init.attrs["literal"]):  # (an identity always is)
        return None
    return axis, opcode


def starts_from_identity(inst: Instruction) -> bool:
    """Is the reduce-window ``inst``'s init a constant equal, bit for bit, to its reducer's
    exact identity (the init toolkit's scans use)?"""
    init, reducer = inst.operands[1], reducer_opcode(inst)
    if init.opcode != "constant" or reducer not in GroupOp.REDUCERS:
        return False
    literal = init.attrs["literal"]
    same = np.asarray(identity(reducer, literal.dtype), dtype=literal.dtype)
    return literal.reshape(()).tobytes() == same.tobytes()


def evaluate_reduce_window(x: np.ndarray, init: np.ndarray, window: Window, fold) -> np.ndarray:
    """The reference semantics. ``fold(acc, values)``: the reducer on arrays. A prefix scan
    whose init is its own fold is one running ``fold`` along its axis (``accumulate``);
    any other window folds its positions in row-major order over strided views of the padded
    operand, vectorised over the outputs."""
    init = np.asarray(init, dtype=x.dtype)
    out_dims = window_output_dims(x.shape, window)
    if 0 in out_dims:
        return np.empty(out_dims, dtype=x.dtype)
    padded = np.pad(x, [(w.low, w.high) for w in window], constant_values=init)
    acc = np.broadcast_to(init, out_dims)
    for offsets in itertools.product(*(range(w.size) for w in window)):
        view = padded[tuple(slice(o, o + (n - 1) * w.stride + 1, w.stride)
                            for o, n, w in zip(offsets, out_dims, window))]
        acc = fold(acc, view)
    return np.asarray(acc, dtype=x.dtype).reshape(out_dims)


def accumulate(x: np.ndarray, init: np.ndarray, axis: int, ufunc: np.ufunc) -> np.ndarray:
    """``init ⊕ x[0] ⊕ ... ⊕ x[i]`` for every i along ``axis``: NumPy's sequential accumulate
    with ``init`` folded in first (the prefix scan of an init that is its own fold)."""
    init = np.asarray(init, dtype=x.dtype)
    if x.shape[axis] == 0:
        return x.copy()
    head = np.broadcast_to(init, x.shape[:axis] + (1,) + x.shape[axis + 1:])
    with np.errstate(all="ignore"):
        running = ufunc.accumulate(np.concatenate([head, x], axis=axis), axis=axis,
                                   dtype=x.dtype)
    return np.take(running, range(1, x.shape[axis] + 1), axis=axis)


def in_bounds_counts(dims, window: Window) -> np.ndarray:
    """How many of each output's window positions fall on the operand rather than the padding
    (an int64 array of the output's shape). Separable: the product of each dimension's count."""
    out_dims = window_output_dims(dims, window)
    counts = np.ones(out_dims, dtype=np.int64)
    for k, (n, w, m) in enumerate(zip(dims, window, out_dims)):
        starts = np.arange(m) * w.stride - w.low  # each output's first operand index
        per = np.clip(np.minimum(starts + w.size, n) - np.maximum(starts, 0), 0, None)
        counts = counts * per.reshape([m if j == k else 1 for j in range(len(out_dims))])
    return counts
