"""The library routines ``custom-call`` names (``custom_call_target="numpy.linalg.inv"``):
for each, its result shapes and what it computes, NumPy's LAPACK-backed routine itself. On
the CPU they run as library calls, as XLA:CPU calls LAPACK for JAX's linalg; errors are
NumPy's (LinAlgError for a singular matrix, at run time). Matrices are the last two
dimensions; leading dimensions batch, as in np.linalg."""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .shapes import Shape


@functools.lru_cache(maxsize=512)
def _parsed(options: str):
    import json
    return json.loads(options)


def json_options(options: str) -> dict:
    """A routine's JSON options, parsed once per text (each call runs them again); a copy, so
    that no caller changes the cached one."""
    return dict(_parsed(options))


@dataclass(frozen=True)
class Target:
    results: Callable  # (operand shapes, options) -> list of result Shapes
    run: Callable  # (operand arrays, options) -> list of arrays
    flops: Callable  # (operand shapes) -> estimated flops, for cost analysis
    matrices: bool = True  # np.linalg's: the operands are (batches of) matrices
    # NumPy's routine may raise for some values (LinAlgError: a singular matrix, no
    # convergence): the compiled program raises it after the call, where a user's ``except``
    # around the line no longer sees it (frontend.lax.custom_call runs it at a break there)
    raises: bool = False


def _n(s: Shape) -> int:
    return s.dims[-1] if s.rank else 1


def _batch(s: Shape) -> int:
    return math.prod(s.dims[:-2])


def _same(ops, opts):
    return [Shape(ops[0].dtype, ops[0].dims)]


def _qr(ops, opts):
    s = ops[0]
    m, n = s.dims[-2:]
    k = min(m, n)
    complete = opts == "complete"
    q = s.with_dims(s.dims[:-2] + (m, m if complete else k))
    r = s.with_dims(s.dims[:-2] + (m if complete else k, n))
    return [q, r]


def _real(s: Shape) -> Shape:
    """``s`` with the real type of its elements: singular values, a Hermitian matrix's
    eigenvalues and a log-determinant's magnitude are real for complex matrices too."""
    return s.with_dtype(s.dtype.component) if s.dtype.is_complex else s


def _svd(ops, opts):
    s = ops[0]
    m, n = s.dims[-2:]
    k = min(m, n)
    full = opts == "full"
    u = s.with_dims(s.dims[:-2] + (m, m if full else k))
    vh = s.with_dims(s.dims[:-2] + (n if full else k, n))
    return [u, _real(s.with_dims(s.dims[:-2] + (k,))), vh]


def _cube(ops) -> float:
    return float(_batch(ops[0]) * _n(ops[0]) ** 3)


def _inverse_or_nan(a: np.ndarray) -> np.ndarray:
    """np.linalg.inv of each matrix, NaNs for one that is singular (the rest still inverted)."""
    try:
        return np.linalg.inv(a)
    except np.linalg.LinAlgError:
        out = np.empty(a.shape, np.result_type(a.dtype, np.float64) if a.dtype.kind != "f"
                       and a.dtype.kind != "c" else a.dtype)
        flat_in, flat_out = a.reshape(-1, *a.shape[-2:]), out.reshape(-1, *a.shape[-2:])
        for k in range(flat_in.shape[0]):
            try:
                flat_out[k] = np.linalg.inv(flat_in[k])
            except np.linalg.LinAlgError:
                flat_out[k] = np.nan
        return out


TARGETS: dict[str, Target] = {
    "numpy.linalg.inv": Target(
        _same, lambda a, o: [np.linalg.inv(a[0])], lambda ops: 2 * _cube(ops), raises=True
    ),
    "numpy.linalg.solve": Target(
        lambda ops, o: [Shape(ops[0].dtype, ops[1].dims)],
        lambda a, o: [np.linalg.solve(a[0], a[1])],
        lambda ops: _cube(ops),
        raises=True,
    ),
    "numpy.linalg.cholesky": Target(
        _same, lambda a, o: [np.linalg.cholesky(a[0])], lambda ops: _cube(ops) / 3, raises=True
    ),
    # np.linalg.cond's inverse (NumPy calls its inv gufunc with errors ignored): a matrix that
    # cannot be inverted gives NaNs, which cond makes inf, instead of LinAlgError
    "numpy.linalg.inv_or_nan": Target(
        _same, lambda a, o: [_inverse_or_nan(a[0])], lambda ops: 2 * _cube(ops)
    ),
    "numpy.linalg.det": Target(
        lambda ops, o: [ops[0].with_dims(ops[0].dims[:-2])],
        lambda a, o: [np.asarray(np.linalg.det(a[0]))],
        lambda ops: _cube(ops) * 2 / 3,
    ),
    "numpy.linalg.slogdet": Target(
        lambda ops, o: [ops[0].with_dims(ops[0].dims[:-2]),
                        _real(ops[0].with_dims(ops[0].dims[:-2]))],
        lambda a, o: [np.asarray(v) for v in np.linalg.slogdet(a[0])],
        lambda ops: _cube(ops) * 2 / 3,
    ),
    "numpy.linalg.qr": Target(
        _qr,
        lambda a, o: list(np.linalg.qr(a[0], mode=o or "reduced")),
        lambda ops: 4 * _cube(ops) / 3,
    ),
    "numpy.linalg.eigh": Target(
        lambda ops, o: [_real(ops[0].with_dims(ops[0].dims[:-1])),
                        Shape(ops[0].dtype, ops[0].dims)],
        lambda a, o: list(np.linalg.eigh(a[0], UPLO=o or "L")),
        lambda ops: 9 * _cube(ops),
        raises=True,
    ),
    "numpy.linalg.eigvalsh": Target(
        lambda ops, o: [_real(ops[0].with_dims(ops[0].dims[:-1]))],
        lambda a, o: [np.linalg.eigvalsh(a[0], UPLO=o or "L")],
        lambda ops: 4 * _cube(ops),
        raises=True,
    ),
    "numpy.linalg.svd": Target(
        _svd,
        lambda a, o: list(np.linalg.svd(a[0], full_matrices=o == "full")),
        lambda ops: 12 * _cube(ops),
        raises=True,
    ),
    "numpy.linalg.svdvals": Target(
        lambda ops, o: [_real(ops[0].with_dims(ops[0].dims[:-2] + (min(ops[0].dims[-2:]),)))],
        lambda a, o: [np.linalg.svd(a[0], compute_uv=False)],
        lambda ops: 4 * _cube(ops),
        raises=True,
    ),
    "numpy.linalg.pinv": Target(
        lambda ops, o: [ops[0].with_dims(ops[0].dims[:-2] + ops[0].dims[-2:][::-1])],
        lambda a, o: [np.linalg.pinv(a[0])],
        lambda ops: 12 * _cube(ops),
        raises=True,
    ),
}


# ---- np.fft: NumPy's pocketfft, options as JSON {"fn", "s", "axes", "norm"} ----------------------
_FFT_KINDS = {  # function -> (transform kind, dimensions: 1, 2 or None for n)
    "fft": ("c2c", 1),
    "ifft": ("c2c", 1),
    "fft2": ("c2c", 2),
    "ifft2": ("c2c", 2),
    "fftn": ("c2c", None),
    "ifftn": ("c2c", None),
    "rfft": ("r2c", 1),
    "rfft2": ("r2c", 2),
    "rfftn": ("r2c", None),
    "ihfft": ("r2c", 1),
    "irfft": ("c2r", 1),
    "irfft2": ("c2r", 2),
    "irfftn": ("c2r", None),
    "hfft": ("c2r", 1),
}


def fft_options(fn: str, s, axes, norm) -> str:
    import json
    return json.dumps(
        {
            "fn": fn,
            "s": None if s is None else [int(v) for v in s],
            "axes": [int(a) for a in axes],
            "norm": norm,
        },
        separators=(",", ":"),
    )


def _fft_results(ops, options):
    import json

    from .dtypes import from_numpy
    o = json.loads(options)
    kind, _ = _FFT_KINDS[o["fn"]]
    x = ops[0]
    dims = list(x.dims)
    axes, s = o["axes"], o["s"]
    for k, ax in enumerate(axes):
        n = s[k] if s is not None else dims[ax]
        last = k == len(axes) - 1
        if kind == "r2c" and last:
            dims[ax] = n // 2 + 1
        elif kind == "c2r" and last:
            dims[ax] = s[k] if s is not None else 2 * (dims[ax] - 1)
        else:
            dims[ax] = n
    single = x.dtype.numpy in (np.dtype(np.float16), np.dtype(np.float32),
                               np.dtype(np.complex64))
    dtype = (
        (np.float32 if single else np.float64)
        if kind == "c2r"
        else (np.complex64 if single else np.complex128)
    )
    if x.dtype.numpy == np.float16 and o["fn"] in ("irfft", "hfft"):
        dtype = np.float16  # (NumPy's one-axis real results of float16 input stay float16)
    return [Shape(from_numpy(np.dtype(dtype)), tuple(dims))]


def _fft_run(args, options):
    o = json_options(options)
    fn = getattr(np.fft, o["fn"])
    _, rank = _FFT_KINDS[o["fn"]]
    if rank == 1:
        return [
            fn(args[0], n=None if o["s"] is None else o["s"][0], axis=o["axes"][0], norm=o["norm"])
        ]
    return [fn(args[0], s=o["s"], axes=o["axes"], norm=o["norm"])]


def _fft_flops(ops) -> float:
    n = max(math.prod(ops[0].dims), 1)
    return 5.0 * n * math.log2(max(n, 2))


for _fn in _FFT_KINDS:
    TARGETS[f"numpy.fft.{_fn}"] = Target(_fft_results, _fft_run, _fft_flops, matrices=False)


# ---- np.partition, np.argpartition: NumPy's introselect, options as JSON {"kth", "axis"} -------
# (its own routine, not a sort: the order it leaves outside the kth positions, and the sign of a
# zero tied with another, are NumPy's; np.percentile and np.median read the kth positions)
def partition_options(kth, axis: int) -> str:
    import json
    return json.dumps({"kth": [int(k) for k in kth], "axis": int(axis)}, separators=(",", ":"))


def _partition_checked(ops, options) -> tuple[Shape, list[int], int]:
    """The operand, kth and axis; ValueError (the shape rule's ShapeError) where they do not fit."""
    import json
    try:
        o = json.loads(options)
        kth, axis = [int(k) for k in o["kth"]], int(o["axis"])
    except (ValueError, KeyError, TypeError):
        raise ValueError(f'partition needs backend_config={{"kth": [...], "axis": d}}, got '
                         f"{options!r}") from None
    x = ops[0]
    if len(ops) != 1 or not -x.rank <= axis < max(x.rank, 1) or x.rank == 0:
        raise ValueError(f"partition of {[o.to_text(False) for o in ops]} along axis {axis}")
    n = x.dims[axis]
    for k in kth:
        if not -n <= k < n:
            raise ValueError(f"kth(={k}) out of bounds ({n})")
    return x, kth, axis


def _partition_results(ops, options):
    return [_partition_checked(ops, options)[0]]


def _argpartition_results(ops, options):
    from .dtypes import S64
    x = _partition_checked(ops, options)[0]
    return [Shape(S64, x.dims)]


def _partition_flops(ops) -> float:  # introselect: a few passes over each line
    return 3.0 * math.prod(ops[0].dims)


def _partition_run(fn):
    def run(args, options):
        o = json_options(options)
        return [fn(args[0], o["kth"], axis=o["axis"])]
    return run


TARGETS["numpy.partition"] = Target(_partition_results, _partition_run(np.partition),
                                    _partition_flops, matrices=False)
TARGETS["numpy.argpartition"] = Target(_argpartition_results, _partition_run(np.argpartition),
                                       _partition_flops, matrices=False)


# ---- np.interp: NumPy's own routine (its search from the last position, its rules for infinite
# slopes and repeated samples), operands x, xp, fp, left, right; options {"period"} -----------
def interp_options(period) -> str:
    import json
    return json.dumps({"period": None if period is None else float(period)})


def _interp_results(ops, options):
    if len(ops) != 5:
        raise ValueError(f"interp takes x, xp, fp, left and right, got {len(ops)} operands")
    x, xp, fp, left, right = ops
    if xp.rank != 1 or fp.rank != 1 or xp.dims != fp.dims or xp.dims[0] == 0:
        raise ValueError(f"interp needs samples xp and fp of one same non-zero length, got "
                         f"{xp.to_text(False)} and {fp.to_text(False)}")
    if left.rank or right.rank or left.dtype != fp.dtype or right.dtype != fp.dtype:
        raise ValueError("interp's left and right are scalars of fp's type")
    if fp.dtype.numpy not in (np.dtype(np.float64), np.dtype(np.complex128)) or any(
            o.dtype.numpy != np.float64 for o in (x, xp)):
        raise ValueError("interp reads float64 x and xp, and float64 or complex128 fp")
    return [Shape(fp.dtype, x.dims)]


def _interp_run(args, options):
    x, xp, fp, left, right = args
    period = json_options(options)["period"]
    return [np.asarray(np.interp(x, xp, fp, left=left[()], right=right[()], period=period))]


def _interp_flops(ops) -> float:  # a binary search per point, and the line through it
    return math.prod(ops[0].dims) * (math.log2(max(ops[1].dims[0], 2)) + 4)


TARGETS["numpy.interp"] = Target(_interp_results, _interp_run, _interp_flops, matrices=False)


def target(name: str) -> Target:
    try:
        return TARGETS[name]
    except KeyError:
        raise KeyError(f"custom-call target '{name}' is not one toolkit knows "
                       f"(known: {', '.join(sorted(TARGETS))})") from None


def evaluate(name: str, options: str, args) -> list[np.ndarray]:
    return [np.asarray(r) for r in target(name).run(list(args), options)]
