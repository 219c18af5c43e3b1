"""Test programs shared by golden-text, round-trip and XLA-acceptance tests."""
import numpy as np

import toolkit as tk

import toolkit.numpy as tnp


def add_one(x):
    return x + 1


def softmax(x):
    m = np.max(x, axis=-1, keepdims=True)
    e = tnp.exp(x - m)
    return e / e.sum(axis=-1, keepdims=True)


def layernorm(x, gamma, beta):
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5) * gamma + beta


def mlp_layer(x, w, b):
    return np.maximum(x @ w + b, 0.0)


def gelu(x):
    return 0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3)))


def integer_mix(a, b):
    return a // b, a % b, (a << 2) ^ b, np.maximum(a, b) * 3, -a


def shapes_mix(x):
    return (np.concatenate([x, x[:, ::-1]], axis=1), np.pad(x, ((1, 2), (0, 3))), x[1:3, ::2],
            x.T, x.reshape(2, -1)[None], np.flip(x, 0))


def reductions(x):
    return (
        x.sum(),
        x.max(axis=0),
        x.min(axis=1, keepdims=True),
        x.prod(axis=1),
        np.argmax(x, axis=1),
        x.std(),
    )


def dots(a, b, v):
    return a @ b, np.einsum("ij,jk->ki", a, b), a @ v, np.outer(v, v), np.tensordot(a, b, axes=1)


def batched(a, b):
    return np.matmul(a, b), np.einsum("bij,bjk->bik", a, b)


def selects(x, y):
    return np.where(x > y, x, y), np.clip(x, -0.5, 0.5), (x == y) | (x < 0), np.isfinite(x)


def conversions(x, i):
    return x.astype(np.int32), i.astype(np.float32) * x, (x > 0).astype(np.float64), i.astype(bool)


def creation(x):
    return (
        x + tnp.arange(x.shape[-1], dtype=np.float32),
        tnp.zeros_like(x),
        tnp.linspace(0.0, 1.0, 5),
        tnp.eye(3),
    )


def indexing(table, ids, i):
    """Reads: an embedding lookup (gather), a traced scalar index (dynamic-slice), mixed indices."""
    return (
        table[ids],
        table[i],
        table[ids[:2], 1:3],
        np.take_along_axis(table[:5], ids[:, None] % 3, axis=1),
    )


def scatters(table, ids, v):
    """Writes into a copy: x[idx] = v (scatter, last write wins), np.add.at (scatter-add), and a
    box of a basic index (dynamic-update-slice)."""
    out = table.copy()
    out[ids] = v
    np.add.at(out, ids, 1.0)
    out[1:3, :2] = -1.0
    return out


def sorting(x, keys):
    """HLO sort with NumPy's order (NaN last): values, a stable argsort of keys with ties (XLA's
    unstable sort may order ties otherwise than NumPy's default one), a lexsort, a nanmedian
    (a median reads NumPy's partition, a library call XLA cannot run; a nanmedian sorts)."""
    return (np.sort(x, axis=1), np.argsort(keys, kind="stable"), np.lexsort((x[0], keys)),
            np.nanmedian(x, axis=0))


def complex_numbers(z, w, x):
    """complex64: arithmetic (NumPy's Smith division), abs, exp/log/sqrt, the parts, a dot, a
    sum."""
    y = z * w + x * 1j
    return (
        y / w,
        np.abs(y),
        np.exp(z),
        np.sqrt(w),
        np.log(w),
        np.conj(y).real + y.imag,
        z @ w.T,
        y.sum(axis=1),
    )


def _mlp_loss(params, x, y):
    h = np.tanh(x @ params["w"] + params["b"])
    return np.mean((h - y) ** 2)


def mlp_grad(w, b, x, y):  # a training step's gradients: tk.grad of a pytree
    grads = tk.grad(_mlp_loss)({"w": w, "b": b}, x, y)
    return grads["w"], grads["b"]


def scan_grad(w, xs):  # reverse mode through a loop: stacked residuals, a reversed while
    def loss(w, xs):
        c, ys = tk.lax.scan(lambda c, x: (np.tanh(c * w + x), np.sum(c * x)), np.zeros_like(w), xs)
        return np.sum(ys) + np.sum(c)
    return tk.grad(loss, argnums=(0, 1))(w, xs)


def checkpoint_grad(w, x):  # call + opt-barrier: the backward pass recomputes the block
    block = tk.checkpoint(lambda v: np.sin(np.tanh(v @ w)))
    return tk.grad(lambda v: np.sum(block(block(v)) ** 2))(x)


def per_example(w, x, ids):  # vmap of grad with a batched gather
    return tk.vmap(tk.grad(lambda w, xi, i: np.sum(np.tanh(xi @ w)[i] ** 2)), in_axes=(None, 0, 0))(
        w, x, ids
    )


def c64(rng, *shape):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def i32(rng, *shape, low=-50, high=50):
    return rng.integers(low, high, shape).astype(np.int32)


def make_cases(rng):
    """name -> (function, arguments)."""
    nonzero = i32(rng, 4, 5, low=1, high=9) * np.where(rng.random((4, 5)) < 0.5, -1, 1).astype(
        np.int32
    )
    return {
        "add_one": (add_one, (f32(rng, 10, 10),)),
        "softmax": (softmax, (f32(rng, 8, 128),)),
        "layernorm": (layernorm, (f32(rng, 16, 64), f32(rng, 64), f32(rng, 64))),
        "mlp_layer": (mlp_layer, (f32(rng, 8, 32), f32(rng, 32, 16), f32(rng, 16))),
        "gelu": (gelu, (f32(rng, 4, 33),)),
        "integer_mix": (integer_mix, (i32(rng, 4, 5), nonzero)),
        "shapes_mix": (shapes_mix, (f32(rng, 4, 6),)),
        "reductions": (reductions, (f32(rng, 5, 7),)),
        "dots": (dots, (f32(rng, 4, 5), f32(rng, 5, 3), f32(rng, 5))),
        "batched": (batched, (f32(rng, 2, 3, 4), f32(rng, 2, 4, 5))),
        "selects": (selects, (f32(rng, 3, 4), f32(rng, 3, 4))),
        "conversions": (conversions, (f32(rng, 3, 4) * 10, i32(rng, 3, 4))),
        "creation": (creation, (f32(rng, 3, 4),)),
        "indexing": (indexing, (f32(rng, 6, 4), np.array([5, 0, -1, 2, 5], np.int32), np.int64(3))),
        "sorting": (
            sorting,
            (
                np.where(f32(rng, 4, 6) > 1.0, np.nan, f32(rng, 4, 6)).astype(np.float32),
                np.array([3, 1, 3, 0, 1, 2], np.int32),
            ),
        ),
        "scatters": (scatters, (f32(rng, 6, 4), np.array([5, 0, -1, 5], np.int64), f32(rng, 4, 4))),
        "complex_numbers": (complex_numbers, (c64(rng, 3, 5), c64(rng, 3, 5), f32(rng, 3, 5))),
        "mlp_grad": (mlp_grad, (f32(rng, 6, 4), f32(rng, 4), f32(rng, 8, 6), f32(rng, 8, 4))),
        "scan_grad": (scan_grad, (f32(rng, 4), f32(rng, 6, 4))),
        "checkpoint_grad": (checkpoint_grad, (f32(rng, 5, 5) * np.float32(0.3), f32(rng, 7, 5))),
        "per_example": (
            per_example,
            (f32(rng, 5, 3), f32(rng, 4, 5), np.array([0, 2, 1, 2], np.int32)),
        ),
    }


# One program per kind of kernel the backends emit (used by the GPU codegen and runtime tests)
FUSION_KINDS = {
    "kLoop": lambda x: np.tanh(x * 2 + 1),
    "kInput row": lambda x: x.sum(axis=-1),
    "kInput column": lambda x: x.max(axis=0),
    "full reduction": lambda x: x.sum(),
    "multi-output (softmax)": lambda x: (
        np.exp(x - x.max(-1, keepdims=True))
        / np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True)
    ),
    "sibling multi-output": lambda x: (x.sum(axis=1), (x * x).sum(axis=1)),
    "data movement": lambda x: (x.T * 2, np.concatenate([x, x[:, ::-1]], axis=1), np.pad(x, 1)),
    "integers": lambda x: (x.astype(np.int32) // 3, x.astype(np.int64) % 7, x > 0),
    "float32 math": lambda x: (
        np.log1p(np.abs(x)),
        np.expm1(x),
        np.sin(x),
        np.cos(x),
        np.abs(x) ** 1.5,
    ),
}
