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


def gelu_cube(xp):
    """GELU written with ``x ** 3``, as many users write it (an integer power)."""
    def gelu_cube(x):
        return 0.5 * x * (1.0 + xp.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3)))
    return gelu_cube


def scalar_chain(xp):
    """A chain of scalar transcendentals broadcast into a large array: the chain must run once,
    not once per element of the consumer."""
    def scalar_chain(a, d):
        s = d[0]
        for _ in range(8):
            s = xp.tanh(s) * 1.5 + 0.25
        return a + s
    return scalar_chain


def gesummv(xp):
    """PolyBench's gesummv: y = alpha A x + beta B x (the scalars belong after the products)."""
    def gesummv(a, b, x):
        return 1.5 * a @ x + 1.2 * b @ x
    return gesummv


def arctan2_f64(xp):
    def arctan2_f64(a, b):
        return xp.arctan2(xp.sqrt(a), xp.sqrt(1.0 - a)) * b
    return arctan2_f64


def exp_f64(xp):
    def exp_f64(x):
        return xp.exp(x)
    return exp_f64


def colsum(xp):
    def colsum(x):
        return xp.sum(x, axis=0)
    return colsum


def jacobi_2d(xp):
    """PolyBench's jacobi-2d over 50 time steps as its NumPy version writes it: slice
    assignments into the two argument arrays, a Python loop the tracer unrolls into one program
    (toolkit writes the results back into the arguments, as NumPy does). JAX cannot write in
    place: its version returns the arrays (``.at[].set``), as JAX ports of PolyBench do."""
    jax_side = xp.__name__.startswith("jax")

    def stencil(src):
        return 0.2 * (
            src[1:-1, 1:-1] + src[1:-1, :-2] + src[1:-1, 2:] + src[2:, 1:-1] + src[:-2, 1:-1]
        )

    def jacobi_2d(a, b):
        for _ in range(50):
            if jax_side:
                b = b.at[1:-1, 1:-1].set(stencil(a))
                a = a.at[1:-1, 1:-1].set(stencil(b))
            else:
                b[1:-1, 1:-1] = stencil(a)
                a[1:-1, 1:-1] = stencil(b)
        return (a, b) if jax_side else None
    return jacobi_2d


def recursive_filter(xp):
    """A first-order recursive filter run along the columns of a work array, filled column by
    column in a Python loop (as the recursive filters of image processing, Deriche's among
    them, are written in NumPy): each column depends on the one before, so the loop cannot be
    vectorised away. JAX's version is what JAX users write: ``fori_loop`` over ``.at[].set``."""
    if xp.__name__.startswith("jax"):
        import jax

        def jax_filter(x, a, b):
            y = xp.zeros_like(x).at[:, 0].set(x[:, 0])

            def column(j, y):
                return y.at[:, j].set(a * x[:, j] + b * y[:, j - 1])
            return jax.lax.fori_loop(1, x.shape[1], column, y)
        return jax_filter

    def recursive_filter(x, a, b):
        y = xp.zeros_like(x)
        y[:, 0] = x[:, 0]
        for j in range(1, x.shape[1]):
            y[:, j] = a * x[:, j] + b * y[:, j - 1]
        return y
    return recursive_filter


def covariance(xp):
    """PolyBench's covariance: centre the columns, then (data.T @ data) / (n - 1)."""
    def covariance(data):
        centred = data - xp.mean(data, axis=0)
        return centred.T @ centred / (data.shape[0] - 1.0)
    return covariance


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


LR = 0.01


def train_step(xp):
    """A whole SGD step: value_and_grad of the MLP loss, then the update (jax.value_and_grad,
    tk.value_and_grad, or NumPy's hand-written backward pass)."""
    if xp.__name__.startswith("jax"):
        import jax
        value_and_grad = jax.value_and_grad(_mlp_loss(xp), argnums=(2, 3, 4))

        def jax_step(x, y, w1, b1, w2):
            value, (g1, gb, g2) = value_and_grad(x, y, w1, b1, w2)
            return value, w1 - LR * g1, b1 - LR * gb, w2 - LR * g2
        return jax_step
    grads = train_grads(xp)

    def train_step(x, y, w1, b1, w2):
        h = xp.tanh(x @ w1 + b1)
        value = xp.mean((h @ w2 - y) ** 2)
        d = (h @ w2 - y) * (2.0 / (x.shape[0] * w2.shape[1]))
        g_w2 = h.T @ d
        d_pre = (d @ w2.T) * (1.0 - h * h)
        return value, w1 - LR * (x.T @ d_pre), b1 - LR * d_pre.sum(axis=0), w2 - LR * g_w2
    _ = grads
    return train_step


def _toolkit_train_step():
    from .transformations import value_and_grad
    value_and_grad_fn = value_and_grad(_mlp_loss(np), argnums=(2, 3, 4))

    def toolkit_step(x, y, w1, b1, w2):
        value, (g1, gb, g2) = value_and_grad_fn(x, y, w1, b1, w2)
        return value, w1 - LR * g1, b1 - LR * gb, w2 - LR * g2
    return toolkit_step


def _rnn_loss(xp, scan):
    def loss(xs, w, u):
        def step(h, x):
            h = xp.tanh(h @ w + x @ u)
            return h, xp.sum(h)
        h, ys = scan(step, xp.zeros((xs.shape[1], w.shape[0]), xs.dtype), xs)
        return xp.sum(ys) + xp.sum(h * h)
    return loss


def rnn_grads(xp):
    """Gradients of an RNN over 256 steps with respect to its weights: a scan differentiated in
    reverse (jax.lax.scan, tk.lax.scan), or NumPy's backpropagation through time by hand."""
    if xp.__name__.startswith("jax"):
        import jax
        return jax.grad(_rnn_loss(xp, jax.lax.scan), argnums=(1, 2))

    def rnn_grads(xs, w, u):
        hs = [xp.zeros((xs.shape[1], w.shape[0]), xs.dtype)]
        for x in xs:
            hs.append(xp.tanh(hs[-1] @ w + x @ u))
        g_w, g_u = xp.zeros_like(w), xp.zeros_like(u)
        g_h = 2 * hs[-1]  # d/dh of sum(h * h) at the end
        for t in range(len(xs), 0, -1):
            g_h = g_h + 1.0  # d sum(h_t) (the scan's output for step t)
            g_pre = g_h * (1 - hs[t] * hs[t])
            g_w += hs[t - 1].T @ g_pre
            g_u += xs[t - 1].T @ g_pre
            g_h = g_pre @ w.T
        return g_w, g_u
    return rnn_grads


def _toolkit_rnn_grads():
    from .lax import scan
    from .transformations import grad
    return grad(_rnn_loss(np, scan), argnums=(1, 2))


def _example_loss(xp):
    def loss(w1, w2, x, y):
        return (xp.tanh(x @ w1) @ w2 - y) ** 2
    return loss


def per_example_grads(xp):
    """Per-example gradients of a small MLP (vmap of grad, in JAX and toolkit; NumPy by hand,
    batched with einsum)."""
    if xp.__name__.startswith("jax"):
        import jax
        return jax.vmap(jax.grad(_example_loss(xp), argnums=(0, 1)), in_axes=(None, None, 0, 0))

    def per_example_grads(w1, w2, x, y):
        h = xp.tanh(x @ w1)  # (batch, hidden)
        d = 2 * (h @ w2 - y)  # (batch,)
        g_w2 = d[:, None] * h
        g_pre = (d[:, None] * w2[None, :]) * (1 - h * h)
        return xp.einsum("bi,bj->bij", x, g_pre), g_w2
    return per_example_grads


def _toolkit_per_example_grads():
    from .transformations import grad, vmap
    return vmap(grad(_example_loss(np), argnums=(0, 1)), in_axes=(None, None, 0, 0))


def dot_chain(xp):
    def dot_chain(x, w):
        for _ in range(100):  # a Python loop: 100 small dots, each with its tanh
            x = xp.tanh(x @ w)
        return x
    return dot_chain


def gpt2_forward(xp, n_head: int = 12, python_scale: bool = False):
    """GPT-2's forward pass as people write it in NumPy: pre-LayerNorm blocks, attention one
    head at a time in a Python loop, a causal mask made with NumPy, the tanh GELU. Returns the
    final hidden states (the tied vocabulary projection is left out)."""
    def layernorm(x, g, b):
        mean = x.mean(axis=-1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
        return (x - mean) / xp.sqrt(var + 1e-5) * g + b

    def softmax(x):
        e = xp.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    def gelu(x):
        return 0.5 * x * (1.0 + xp.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3)))

    def gpt2_forward(x, layers, ln_f):
        n, d = x.shape
        hd = d // n_head
        mask = xp.asarray(np.triu(np.full((n, n), -1e10, np.float32), 1))
        for p in layers:
            h = layernorm(x, p["ln1_g"], p["ln1_b"])
            qkv = h @ p["w_qkv"] + p["b_qkv"]
            q, k, v = qkv[:, :d], qkv[:, d:2 * d], qkv[:, 2 * d:]
            heads = []
            for i in range(n_head):
                s = slice(i * hd, (i + 1) * hd)
                # np.sqrt(hd) is a NumPy float64 scalar: under NEP 50 it makes the scores, and
                # all after them, float64 (toolkit reports it); float(...) keeps float32
                scale = float(np.sqrt(hd)) if python_scale else np.sqrt(hd)
                att = q[:, s] @ k[:, s].T / scale + mask
                heads.append(softmax(att) @ v[:, s])
            x = x + xp.concatenate(heads, axis=1) @ p["w_proj"] + p["b_proj"]
            h = layernorm(x, p["ln2_g"], p["ln2_b"])
            x = x + gelu(h @ p["w_fc"] + p["b_fc"]) @ p["w_out"] + p["b_out"]
        return layernorm(x, ln_f["g"], ln_f["b"])
    return gpt2_forward


def gpt2_args(n_layer: int = 12, d: int = 768, n: int = 256):
    def make(rng):
        def w(*shape):
            return _f32(rng, *shape) * np.float32(0.02)

        def layer():
            return {"ln1_g": 1 + w(d), "ln1_b": w(d), "w_qkv": w(d, 3 * d), "b_qkv": w(3 * d),
                    "w_proj": w(d, d), "b_proj": w(d), "ln2_g": 1 + w(d), "ln2_b": w(d),
                    "w_fc": w(d, 4 * d), "b_fc": w(4 * d), "w_out": w(4 * d, d), "b_out": w(d)}
        return (_f32(rng, n, d), [layer() for _ in range(n_layer)], {"g": 1 + w(d), "b": w(d)})
    return make


def _gpt2_flops(n_layer: int = 12, d: int = 768, n: int = 256) -> float:
    return n_layer * (2.0 * n * d * 12 * d + 4.0 * n * n * d)


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
    # NumPy's and toolkit's version writes into its arguments and returns None
    in_place: bool = False
    batch_axis: int = 0  # the axis of the batch arguments that scaled() cuts

    def result(self, fn: Callable, args) -> object:
        """What one call computes: its return value, or for an in-place workload the arguments
        it wrote (JAX's version of one returns them instead)."""
        out = fn(*args)
        return tuple(args) if self.in_place and out is None else out

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
    Workload(
        "layernorm 4096x1024",
        layernorm,
        lambda r: (_f32(r, 4096, 1024), _f32(r, 1024), _f32(r, 1024)),
    ),
    Workload("sum 16M", total, lambda r: (_f32(r, 16 << 20),)),
    Workload("rowsum 4096x4096", rowsum, lambda r: (_f32(r, 4096, 4096),)),
    Workload("gelu x**3 2048x2048", gelu_cube, lambda r: (_f32(r, 2048, 2048),)),
    Workload(
        "scalar chain into 2000x2000 f64",
        scalar_chain,
        lambda r: (r.standard_normal((2000, 2000)), r.standard_normal(16)),
    ),
    Workload("colsum 4096x4096", colsum, lambda r: (_f32(r, 4096, 4096),)),
    Workload("exp f64 1M", exp_f64, lambda r: (r.standard_normal(1 << 20),)),
    Workload(
        "arctan2 f64 1M",
        arctan2_f64,
        lambda r: (r.random(1 << 20), r.standard_normal(1 << 20)),
        batch_args=(0, 1),
    ),
    Workload(
        "gesummv 2000 f64",
        gesummv,
        lambda r: (
            r.standard_normal((2000, 2000)),
            r.standard_normal((2000, 2000)),
            r.standard_normal(2000),
        ),
        flops=2.0 * 2 * 2000 * 2000,
        batch_args=(0, 1),
    ),
    Workload(
        "jacobi-2d 50 steps 512x512 f64",
        jacobi_2d,
        lambda r: (r.random((512, 512)), r.random((512, 512))),
        batch_args=(0, 1),
        in_place=True,
    ),
    Workload(
        "recursive filter by columns 256x1200",
        recursive_filter,
        lambda r: (r.standard_normal((256, 1200)), np.float64(0.5), np.float64(0.45)),
        batch_axis=1,  # scaled() keeps the rows and runs fewer columns
    ),
    Workload(
        "covariance 1024x512 f64",
        covariance,
        lambda r: (r.standard_normal((1024, 512)),),
        flops=2.0 * 1024 * 512 * 512,
    ),
    Workload(
        "mlp relu(x@W+b) 1024",
        mlp,
        lambda r: (_f32(r, 1024, 1024), _f32(r, 1024, 1024) * np.float32(0.03), _f32(r, 1024)),
        flops=2.0 * 1024**3,
    ),
    Workload(
        "train step grads 1024x512",
        train_grads,
        lambda r: (
            _f32(r, 1024, 512),
            _f32(r, 1024, 64),
            _f32(r, 512, 512) * np.float32(0.04),
            _f32(r, 512),
            _f32(r, 512, 64) * np.float32(0.04),
        ),
        flops=2.0 * 1024 * 512 * (512 * 3 + 64 * 3),
        toolkit=_toolkit_train_grads,
        batch_args=(0, 1),
    ),
    Workload(
        "train step 256x1024",
        train_step,
        lambda r: (
            _f32(r, 256, 1024),
            _f32(r, 256, 16),
            _f32(r, 1024, 1024) * np.float32(0.03),
            _f32(r, 1024),
            _f32(r, 1024, 16) * np.float32(0.03),
        ),
        flops=2.0 * 256 * 1024 * (1024 * 3 + 16 * 3),
        toolkit=_toolkit_train_step,
        batch_args=(0, 1),
    ),
    Workload(
        "rnn grads 256 steps",
        rnn_grads,
        lambda r: (
            _f32(r, 256, 32, 64),
            _f32(r, 128, 128) * np.float32(0.05),
            _f32(r, 64, 128) * np.float32(0.05),
        ),
        flops=2.0 * 3 * 256 * 32 * 128 * (128 + 64),
        toolkit=_toolkit_rnn_grads,
        batch_args=(),
    ),
    Workload(
        "per-example grads 512",
        per_example_grads,
        lambda r: (
            _f32(r, 32, 64) * np.float32(0.2),
            _f32(r, 64) * np.float32(0.2),
            _f32(r, 512, 32),
            _f32(r, 512),
        ),
        flops=2.0 * 3 * 512 * 32 * 64,
        toolkit=_toolkit_per_example_grads,
        batch_args=(2, 3),
    ),
)


def scaled(workload: Workload, scale: float) -> Workload:
    """The same workload on arrays ``scale`` times the size along the first axis (for demos)."""
    axis = workload.batch_axis

    def make_args(rng):
        full = workload.make_args(rng)
        n = max(1, int(full[0].shape[axis] * scale))
        return tuple(
            a[(slice(None),) * axis + (slice(0, n),)] if k in workload.batch_args else a
            for k, a in enumerate(full)
        )
    first = workload.make_args(np.random.default_rng(0))[0]  # named after what really runs
    shape = list(first.shape)
    shape[axis] = max(1, int(shape[axis] * scale))
    return Workload(
        f"{workload.name.rsplit(' ', 1)[0]} {_size_text(shape)}",
        workload.make,
        make_args,
        workload.flops * scale,
        workload.toolkit,
        workload.batch_args,
        workload.in_place,
        axis,
    )


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
DEMO = tuple(
    w
    for w in BENCHMARK
    if w.name
    in (
        "chain 4M",
        "gelu 4096x4096",
        "softmax 4096x1024",
        "layernorm 4096x1024",
        "sum 16M",
        "rowsum 4096x4096",
        "mlp relu(x@W+b) 1024",
    )
)


# Real programs made of many small operations, for the GPU benchmark (bench_gpu): launch-bound
# chains of dots and a transformer forward pass written the way people write it.
PROGRAMS: tuple[Workload, ...] = (
    Workload("dot chain 100x(64x64)", dot_chain,
             lambda r: (_f32(r, 64, 64), _f32(r, 64, 64) * np.float32(0.125)),
             flops=100 * 2.0 * 64 ** 3),
    Workload("gpt2 forward 12x768 seq256", gpt2_forward, gpt2_args(), flops=_gpt2_flops()),
)


def _gpt2_f32(xp):
    return gpt2_forward(xp, n_head=6, python_scale=True)


def _loop_programs() -> tuple[Workload, ...]:
    from .workloads_loops import loop_rows

    return tuple(Workload(name, make, make_args, flops=flops, batch_args=batch)
                 for name, make, make_args, flops, batch in loop_rows())


# Programs of many small operations for the CPU benchmark: Python loops over rows and columns
# (the kernels of public NumPy suites) and a float32 GPT-2 forward pass.
LOOP_PROGRAMS: tuple[Workload, ...] = (
    *_loop_programs(),
    Workload("gpt2 forward f32 6x384 seq128", _gpt2_f32, gpt2_args(6, 384, 128),
             flops=_gpt2_flops(6, 384, 128)),
)
