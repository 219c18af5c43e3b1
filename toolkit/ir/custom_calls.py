"""The library routines ``custom-call`` names (``custom_call_target="numpy.linalg.inv"``):
for each, its result shapes and what it computes, NumPy's LAPACK-backed routine itself. On
the CPU they run as library calls, as XLA:CPU calls LAPACK for JAX's linalg; errors are
NumPy's (LinAlgError for a singular matrix, at run time). Matrices are the last two
dimensions; leading dimensions batch, as in np.linalg."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .shapes import Shape


@dataclass(frozen=True)
class Target:
    results: Callable  # (operand shapes, options) -> list of result Shapes
    run: Callable  # (operand arrays, options) -> list of arrays
    flops: Callable  # (operand shapes) -> estimated flops, for cost analysis


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


def _svd(ops, opts):
    s = ops[0]
    m, n = s.dims[-2:]
    k = min(m, n)
    full = opts == "full"
    u = s.with_dims(s.dims[:-2] + (m, m if full else k))
    vh = s.with_dims(s.dims[:-2] + (n if full else k, n))
    return [u, s.with_dims(s.dims[:-2] + (k,)), vh]


def _cube(ops) -> float:
    return float(_batch(ops[0]) * _n(ops[0]) ** 3)


TARGETS: dict[str, Target] = {
    "numpy.linalg.inv": Target(_same, lambda a, o: [np.linalg.inv(a[0])], lambda ops: 2 * _cube(ops)),
    "numpy.linalg.solve": Target(lambda ops, o: [Shape(ops[0].dtype, ops[1].dims)],
                                 lambda a, o: [np.linalg.solve(a[0], a[1])], lambda ops: _cube(ops)),
    "numpy.linalg.cholesky": Target(_same, lambda a, o: [np.linalg.cholesky(a[0])], lambda ops: _cube(ops) / 3),
    "numpy.linalg.det": Target(lambda ops, o: [ops[0].with_dims(ops[0].dims[:-2])],
                               lambda a, o: [np.asarray(np.linalg.det(a[0]))], lambda ops: _cube(ops) * 2 / 3),
    "numpy.linalg.slogdet": Target(lambda ops, o: [ops[0].with_dims(ops[0].dims[:-2])] * 2,
                                   lambda a, o: [np.asarray(v) for v in np.linalg.slogdet(a[0])],
                                   lambda ops: _cube(ops) * 2 / 3),
    "numpy.linalg.qr": Target(_qr, lambda a, o: list(np.linalg.qr(a[0], mode=o or "reduced")),
                              lambda ops: 4 * _cube(ops) / 3),
    "numpy.linalg.eigh": Target(lambda ops, o: [ops[0].with_dims(ops[0].dims[:-1]), Shape(ops[0].dtype, ops[0].dims)],
                                lambda a, o: list(np.linalg.eigh(a[0], UPLO=o or "L")), lambda ops: 9 * _cube(ops)),
    "numpy.linalg.eigvalsh": Target(lambda ops, o: [ops[0].with_dims(ops[0].dims[:-1])],
                                    lambda a, o: [np.linalg.eigvalsh(a[0], UPLO=o or "L")], lambda ops: 4 * _cube(ops)),
    "numpy.linalg.svd": Target(_svd, lambda a, o: list(np.linalg.svd(a[0], full_matrices=o == "full")),
                               lambda ops: 12 * _cube(ops)),
    "numpy.linalg.svdvals": Target(lambda ops, o: [ops[0].with_dims(ops[0].dims[:-2] + (min(ops[0].dims[-2:]),))],
                                   lambda a, o: [np.linalg.svd(a[0], compute_uv=False)], lambda ops: 4 * _cube(ops)),
    "numpy.linalg.pinv": Target(lambda ops, o: [ops[0].with_dims(ops[0].dims[:-2] + ops[0].dims[-2:][::-1])],
                                lambda a, o: [np.linalg.pinv(a[0])], lambda ops: 12 * _cube(ops)),
}


def target(name: str) -> Target:
    try:
        return TARGETS[name]
    except KeyError:
        raise KeyError(f"custom-call target '{name}' is not one toolkit knows "
                       f"(known: {', '.join(sorted(TARGETS))})") from None


def evaluate(name: str, options: str, args) -> list[np.ndarray]:
    return [np.asarray(r) for r in target(name).run(list(args), options)]
