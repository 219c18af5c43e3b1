"""The standard workloads: the demo compiles them and the benchmark times them.

Each is plain NumPy-style code (``np.*`` calls on traced arrays) so the same function runs
eagerly with NumPy and traced under ``tk.jit``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np


def chain(x, a, b):
    return np.tanh(x * a + b) * 0.5 + x


def gelu(x):
    return 0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


def softmax(x):
    m = np.max(x, axis=-1, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=-1, keepdims=True)


def layernorm(x, gamma, beta):
    mean = np.mean(x, axis=-1, keepdims=True)
    centred = x - mean
    var = np.mean(centred * centred, axis=-1, keepdims=True)
    return centred / np.sqrt(var + 1e-5) * gamma + beta


def total(x):
    return np.sum(x)


def rowsum(x):
    return np.sum(x, axis=1)


def mlp(x, w, b):
    return np.maximum(x @ w + b, 0.0)


@dataclass(frozen=True)
class Workload:
    name: str
    fn: Callable
    make_args: Callable[[np.random.Generator, float], tuple]  # (rng, scale) -> args
    description: str


def _f32(rng, *shape):
    return rng.standard_normal(shape, dtype=np.float32)


def _n(base: int, scale: float) -> int:
    return max(1, int(base * scale))


WORKLOADS: tuple[Workload, ...] = (
    Workload("chain", chain, lambda r, s: (_f32(r, _n(4 << 20, s)), np.float32(1.5), np.float32(0.25)),
             "tanh(x*a+b)*0.5+x on 4M f32"),
    Workload("gelu", gelu, lambda r, s: (_f32(r, _n(4096, s), 4096),), "GELU (tanh form) on 4096x4096"),
    Workload("softmax", softmax, lambda r, s: (_f32(r, _n(4096, s), 1024),), "softmax over the last axis of 4096x1024"),
    Workload("layernorm", layernorm,
             lambda r, s: (_f32(r, _n(4096, s), 1024), _f32(r, 1024), _f32(r, 1024)),
             "layernorm over the last axis of 4096x1024"),
    Workload("sum", total, lambda r, s: (_f32(r, _n(16 << 20, s)),), "sum of 16M f32"),
    Workload("rowsum", rowsum, lambda r, s: (_f32(r, _n(4096, s), 4096),), "row sums of 4096x4096"),
    Workload("mlp", mlp, lambda r, s: (_f32(r, _n(1024, s), 1024), _f32(r, 1024, 1024) * np.float32(0.03),
                                       _f32(r, 1024)), "relu(x@W+b), 1024^3"),
)
