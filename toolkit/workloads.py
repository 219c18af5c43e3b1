"""The standard workloads: the demo compiles them and the benchmark times them.

Each is written once against an array namespace ``xp``: with NumPy it runs eagerly and traces
under ``tk.jit`` (plain ``np.*`` calls on traced arrays); with ``jax.numpy`` it is JAX's."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np


def chain(xp):
    def chain(x, a, b):
        return xp.tanh(x * a + b) * 0.5 + x
    return chain


def gelu(xp):
    def gelu(x):
        return 0.5 * x * (1.0 + xp.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))
    return gelu


def softmax(xp):
    def softmax(x):
        m = xp.max(x, axis=-1, keepdims=True)
        e = xp.exp(x - m)
        return e / xp.sum(e, axis=-1, keepdims=True)
    return softmax


def layernorm(xp):
    def layernorm(x, gamma, beta):
        mean = xp.mean(x, axis=-1, keepdims=True)
        centred = x - mean
        var = xp.mean(centred * centred, axis=-1, keepdims=True)
        return centred / xp.sqrt(var + 1e-5) * gamma + beta
    return layernorm


def total(xp):
    def total(x):
        return xp.sum(x)
    return total


def rowsum(xp):
    def rowsum(x):
        return xp.sum(x, axis=1)
    return rowsum


def mlp(xp):
    def mlp(x, w, b):
        return xp.maximum(x @ w + b, 0.0)
    return mlp


def _mlp_loss(xp):
    def loss(x, y, w1, b1, w2):
        return xp.mean((xp.tanh(x @ w1 + b1) @ w2 - y) ** 2)
    return loss


def train_grads(xp):
    """A training step's gradients: a two-layer MLP's loss, differentiated for (w1, b1, w2).
    JAX's side is ``jax.grad`` of the loss; toolkit's is ``tk.grad`` of the same NumPy loss
    (``Workload.toolkit``); NumPy (and CuPy), which have no autodiff, run the backward pass
    written out by hand, as NumPy users write it."""
    if xp.__name__.startswith("jax"):
        import jax
        return jax.grad(_mlp_loss(xp), argnums=(2, 3, 4))

    def train_grads(x, y, w1, b1, w2):
        h = xp.tanh(x @ w1 + b1)
        d = (h @ w2 - y) * (2.0 / (x.shape[0] * w2.shape[1]))
        g_w2 = h.T @ d
        d_pre = (d @ w2.T) * (1.0 - h * h)
        return x.T @ d_pre, d_pre.sum(axis=0), g_w2
    return train_grads


def _toolkit_train_grads():
    from .transformations import grad
    return grad(_mlp_loss(np), argnums=(2, 3, 4))


def _f32(rng, *shape):
    return rng.standard_normal(shape, dtype=np.float32)


@dataclass(frozen=True)
class Workload:
    name: str  # the benchmark row
    make: Callable  # xp -> the function
    make_args: Callable  # rng -> arguments
    flops: float = 0.0  # for rows measured in FLOP/s
    toolkit: Callable | None = None  # () -> toolkit's function, where it is not make(np) (tk.grad)
    batch_args: tuple[int, ...] = (0,)  # the arguments whose first axis is the batch (scaled())

    def args(self, seed: int = 0) -> tuple:
        return self.make_args(np.random.default_rng(seed))

    def toolkit_function(self) -> Callable:
        return self.toolkit() if self.toolkit is not None else self.make(np)


def _chain_args(n):
    return lambda r: (_f32(r, n), np.float32(1.5), np.float32(0.25))


BENCHMARK: tuple[Workload, ...] = (
    Workload("chain 1k", chain, _chain_args(1024)),
    Workload("chain 4M", chain, _chain_args(4 << 20)),
    Workload("chain 32M", chain, _chain_args(32 << 20)),
    Workload("gelu 4096x4096", gelu, lambda r: (_f32(r, 4096, 4096),)),
    Workload("softmax 4096x1024", softmax, lambda r: (_f32(r, 4096, 1024),)),
    Workload("layernorm 4096x1024", layernorm, lambda r: (_f32(r, 4096, 1024), _f32(r, 1024), _f32(r, 1024))),
    Workload("sum 16M", total, lambda r: (_f32(r, 16 << 20),)),
    Workload("rowsum 4096x4096", rowsum, lambda r: (_f32(r, 4096, 4096),)),
    Workload("mlp relu(x@W+b) 1024", mlp, lambda r: (_f32(r, 1024, 1024), _f32(r, 1024, 1024) * np.float32(0.03),
                                                     _f32(r, 1024)), flops=2.0 * 1024 ** 3),
    Workload("train step grads 1024x512", train_grads,
             lambda r: (_f32(r, 1024, 512), _f32(r, 1024, 64), _f32(r, 512, 512) * np.float32(0.04), _f32(r, 512),
                        _f32(r, 512, 64) * np.float32(0.04)),
             flops=2.0 * 1024 * 512 * (512 * 3 + 64 * 3), toolkit=_toolkit_train_grads, batch_args=(0, 1)),
)


def scaled(workload: Workload, scale: float) -> Workload:
    """The same workload on arrays ``scale`` times the size along the first axis (for demos)."""
    def make_args(rng):
        full = workload.make_args(rng)
        n = max(1, int(full[0].shape[0] * scale))
        return tuple(a[:n] if k in workload.batch_args else a for k, a in enumerate(full))
    first = workload.make_args(np.random.default_rng(0))[0]  # named after what really runs
    shape = (max(1, int(first.shape[0] * scale)),) + tuple(first.shape[1:])
    return Workload(f"{workload.name.rsplit(' ', 1)[0]} {_size_text(shape)}", workload.make, make_args,
                    workload.flops * scale, workload.toolkit, workload.batch_args)


def _size_text(shape) -> str:
    """'1024x4096' for matrices; '4M', '1k' for vectors, as the benchmark rows are named."""
    if len(shape) != 1:
        return "x".join(map(str, shape))
    n = shape[0]
    for unit, size in (("M", 1 << 20), ("k", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size}{unit}"
    return str(n)


# the demo's set: one of each kind, at a fraction of the benchmark's size
DEMO = tuple(w for w in BENCHMARK if w.name not in ("chain 1k", "chain 32M") and w.toolkit is None)
