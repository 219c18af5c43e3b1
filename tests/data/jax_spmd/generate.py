"""Regenerates the JAX SPMD programs in this folder (needs jax: pip install ".[bench]"):

    python tests/data/jax_spmd/generate.py

Each program is a ``shard_map`` over 4 host devices (XLA's forced host device count), compiled
by XLA: <name>.hlo is the per-device program XLA's SPMD partitioner and CPU compiler made
(``jax.jit(f).lower(*args).compile().as_text()``: all-reduce, all-gather, reduce-scatter,
collective-permute, tuple all-to-all, partition-id), and <name>.npz holds each device's
inputs (``d<device>_arg<k>``) and outputs (``d<device>_out<k>``), device = partition id.
Tests only read these files."""
import os

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

try:
    from jax import shard_map  # noqa: E402
except ImportError:  # older JAX
    from jax.experimental.shard_map import shard_map  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(7)
DEVICES = np.array(jax.devices()[:4])


def every_collective(a):
    return (jax.lax.psum(a, "x"), jax.lax.all_gather(a, "x", tiled=True),
            jax.lax.psum_scatter(a, "x", tiled=True),
            jax.lax.ppermute(a, "x", [(0, 1), (1, 2), (2, 3)]),
            jax.lax.all_to_all(a, "x", 0, 0, tiled=True), jax.lax.pmax(a, "x"),
            jnp.broadcast_to(jax.lax.axis_index("x"), (1,)))


def mesh_2x2(a):
    return (jax.lax.psum(a, "model"), jax.lax.all_gather(a, "data", tiled=True),
            jax.lax.pmean(a, ("data", "model")),
            jnp.broadcast_to(jax.lax.axis_index("model") * 10 + jax.lax.axis_index("data"),
                             (1, 1)))


def row_parallel_linear(x, w):  # Megatron's RowParallelLinear: a local dot, then psum
    return jax.lax.psum(jnp.tanh(x @ w), "x")


PROGRAMS = {
    "every_collective": (every_collective, ("x",), (4,), (P("x"),),
                         [rng.standard_normal(32).astype(np.float32)], 7),
    "mesh_2x2": (mesh_2x2, ("data", "model"), (2, 2), (P("data", "model"),),
                 [rng.standard_normal((4, 6)).astype(np.float32)], 4),
    "row_parallel_linear": (row_parallel_linear, ("x",), (4,), (P(None, "x"), P("x", None)),
                            [rng.standard_normal((8, 16)).astype(np.float32),
                             rng.standard_normal((16, 5)).astype(np.float32)], 1),
}


def main():
    for name, (fn, axes, shape, in_specs, args, n_out) in PROGRAMS.items():
        mesh = Mesh(DEVICES.reshape(shape), axes)
        out_specs = tuple(P(*axes) if len(axes) > 1 else P(axes[0]) for _ in range(n_out))
        if name == "row_parallel_linear":
            out_specs = P()
        f = jax.jit(shard_map(fn, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                              check_vma=False) if "check_vma" in shard_map.__code__.co_varnames
                    else shard_map(fn, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                                   check_rep=False))
        placed = [jax.device_put(a, NamedSharding(mesh, s)) for a, s in zip(args, in_specs)]
        compiled = f.lower(*placed).compile()
        outs = f(*placed)
        outs = outs if isinstance(outs, tuple) else (outs,)
        arrays = {}
        for d, device in enumerate(DEVICES):
            for k, a in enumerate(placed):
                (shard,) = [s for s in a.addressable_shards if s.device == device]
                arrays[f"d{d}_arg{k}"] = np.asarray(shard.data)
            for k, o in enumerate(outs):
                (shard,) = [s for s in o.addressable_shards if s.device == device]
                arrays[f"d{d}_out{k}"] = np.asarray(shard.data)
        with open(os.path.join(HERE, f"{name}.hlo"), "w") as fh:
            fh.write(compiled.as_text())
        np.savez(os.path.join(HERE, f"{name}.npz"), **arrays)
    with open(os.path.join(HERE, "VERSION"), "w") as fh:
        fh.write(f"jax {jax.__version__}, jaxlib {jax.lib.__version__}\n")


if __name__ == "__main__":
    main()
