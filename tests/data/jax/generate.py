"""Regenerates the JAX-printed HLO test data in this folder (needs jax: pip install ".[bench]").

    python tests/data/jax/generate.py

For each program: <name>.hlo (``jax.jit(f).lower(*args).as_text(dialect="hlo")``),
<name>.npz (inputs ``arg0..`` and outputs ``out0..``), and <name>.cost.json (XLA's
``cost_analysis()`` of the lowered program). Tests only read these files."""
import json
import os
import re

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(42)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


@jax.jit
def _inner(x):
    return jnp.sin(x) * 2.0


PROGRAMS = {
    "softmax": (lambda x: jax.nn.softmax(x, axis=-1), [f32(8, 128)]),
    "layernorm": (
        lambda x, g, b: (
            (x - x.mean(-1, keepdims=True)) / jnp.sqrt(x.var(-1, keepdims=True) + 1e-5) * g + b
        ),
        [f32(16, 64), f32(64), f32(64)],
    ),
    "mlp": (lambda x, w, b: jax.nn.relu(x @ w + b), [f32(8, 32), f32(32, 16), f32(16)]),
    "gelu": (
        lambda x: 0.5 * x * (1 + jnp.tanh(0.7978845608 * (x + 0.044715 * x**3))),
        [f32(4, 33)],
    ),
    "erf_logistic": (
        lambda x: (jax.lax.erf(x), jax.nn.sigmoid(x), jnp.log1p(jnp.abs(x)), jnp.expm1(x)),
        [f32(5, 7)],
    ),
    "argmax": (lambda x: (jnp.argmax(x, axis=1), jnp.argmin(x, axis=0)), [f32(6, 9)]),
    "int_ops": (
        lambda a, b: (a // b, a % b, a * b, jnp.maximum(a, b), a << 2, a >> 1, a & b, a ^ b, ~a),
        [
            rng.integers(-100, 100, (4, 5)).astype(np.int32),
            rng.integers(1, 9, (4, 5)).astype(np.int32) * np.array([1, -1, 1, -1, 1], np.int32),
        ],
    ),
    "int64_f64": (
        lambda a, x: (a * 3_000_000_000 + 7, x * 1e-300 + 2.5, a.astype(jnp.float64) + x),
        [rng.integers(-1000, 1000, (3, 4)).astype(np.int64), rng.standard_normal((3, 4))],
    ),
    "nested_call": (lambda x: _inner(x) + _inner(x * 3.0), [f32(4, 4)]),
    "shapes": (
        lambda x: (
            jnp.concatenate([x, x[:, ::-1]], axis=1),
            jnp.pad(x, ((1, 2), (0, 3))),
            x[1:3, ::2],
            x.T,
            jnp.flip(x, 0),
            x.reshape(2, -1),
        ),
        [f32(4, 6)],
    ),
    "batched_dot": (
        lambda a, b: (jnp.einsum("bij,bjk->bik", a, b), jnp.einsum("ij,j->i", a[0], b[0, :, 0])),
        [f32(3, 4, 5), f32(3, 5, 2)],
    ),
    "compare_select": (
        lambda x, y: (jnp.where(x > y, x, y), jnp.clip(x, -0.5, 0.5), x == y, jnp.isfinite(x)),
        [f32(3, 3), f32(3, 3)],
    ),
    "iota_reduce": (
        lambda x: (jnp.arange(12).reshape(3, 4) * x, x.prod(axis=0), x.min(), x.max(axis=1)),
        [f32(3, 4)],
    ),
    "bool_ops": (
        lambda x: (jnp.any(x > 0.5, axis=1), jnp.all(x > -3), jnp.logical_not(x > 0)),
        [f32(4, 5)],
    ),
    "rounding": (
        lambda x: (
            jnp.floor(x * 3),
            jnp.ceil(x * 3),
            jnp.round(x * 3),
            jnp.sign(x),
            jnp.rint(x * 2.5),
        ),
        [f32(4, 6)],
    ),
}


def main():
    for name, (fn, args) in PROGRAMS.items():
        lowered = jax.jit(fn).lower(*args)
        text = lowered.as_text(dialect="hlo")
        text = re.sub(r'source_file="[^"]*"', 'source_file="generate.py"', text)
        outs = jax.jit(fn)(*args)
        outs = outs if isinstance(outs, tuple) else (outs,)
        with open(os.path.join(HERE, f"{name}.hlo"), "w") as f:
            f.write(text)
        np.savez(os.path.join(HERE, f"{name}.npz"),
                 **{f"arg{i}": np.asarray(a) for i, a in enumerate(args)},
                 **{f"out{i}": np.asarray(o) for i, o in enumerate(outs)})
        cost = lowered.cost_analysis()
        with open(os.path.join(HERE, f"{name}.cost.json"), "w") as f:
            json.dump({k: float(v) for k, v in sorted(cost.items())}, f, indent=1)
        print(f"{name}: {text.count(chr(10))} lines, {len(outs)} outputs")
    with open(os.path.join(HERE, "VERSION"), "w") as f:
        f.write(
            f"jax {jax.__version__}, jaxlib "
            f"{jax.lib.__version__ if hasattr(jax.lib, '__version__') else ''}\n"
        )


if __name__ == "__main__":
    main()
