"""Differentiated and vectorised programs compiled by every backend agree with the interpreter:
the CPU backend (loops as host-driven compiled bodies that write their state in place) and the
GPU executor's host emulation."""
import numpy as np
import pytest

import toolkit as tk
from test_gpu_emulated import DEVICE  # noqa: F401  (registers the gpu-emulated backend)

BACKENDS = ["cpu", "gpu-emulated"]
RNG = np.random.default_rng(11)


def mlp_loss(params, x, y):
    h = np.tanh(x @ params["w1"] + params["b1"])
    out = h @ params["w2"]
    return np.mean((out - y) ** 2)


def rnn_loss(w, xs):
    def step(h, x):
        h = np.tanh(h * w + x)
        return h, np.sum(h ** 2)
    h, ys = tk.lax.scan(step, np.zeros(xs.shape[1]), xs)
    return np.sum(ys) + np.sum(h)


def branchy(x):
    a = tk.lax.cond(np.sum(x) > 0, lambda v: np.sin(v) * 2, lambda v: v ** 3, x)
    return np.sum(tk.lax.fori_loop(0, 4, lambda i, v: v * 0.9 + a, a))


def swapping(x):
    a, b = tk.lax.fori_loop(0, 3, lambda i, s: (s[1] * 2.0, s[0] + 1.0), (x, x * 0.5))
    return np.sum(a * b)


PARAMS = {
    "w1": RNG.standard_normal((6, 8)),
    "b1": RNG.standard_normal(8),
    "w2": RNG.standard_normal((8, 2)),
}
X, Y = RNG.standard_normal((16, 6)), RNG.standard_normal((16, 2))
XS = RNG.standard_normal((20, 5))

def remat_loss(w, x):
    block = tk.checkpoint(lambda v: np.sin(np.tanh(v @ w)))
    return np.sum(block(block(x)) ** 2)


CASES = {
    "checkpoint_grad": (
        tk.grad(remat_loss),
        (RNG.standard_normal((5, 5)) / 3, RNG.standard_normal((7, 5))),
    ),
    "mlp_grad": (tk.grad(mlp_loss), (PARAMS, X, Y)),
    "rnn_grad": (tk.grad(rnn_loss, argnums=(0, 1)), (RNG.standard_normal(5), XS)),
    "branchy_grad": (tk.grad(branchy), (RNG.standard_normal(4),)),
    "swapping_grad": (tk.grad(swapping), (RNG.standard_normal(3),)),
    "per_example": (tk.vmap(tk.grad(mlp_loss), in_axes=(None, 0, 0)), (PARAMS, X, Y)),
    "vmap_while": (
        tk.vmap(lambda s: tk.lax.while_loop(lambda v: v < 10.0, lambda v: v * 3.0, s)),
        (np.array([0.5, 2.0, 11.0]),),
    ),
    "vmap_gather_scatter": (tk.vmap(lambda x, i: _write(x, i)), (XS[:4], np.array([0, 4, 2, 1]))),
    "jvp_while": (
        lambda x: tk.jvp(
            lambda v: tk.lax.while_loop(lambda s: s[0] < 5.0, lambda s: s * 1.5, v),
            (x,),
            (x * 0 + 1,),
        ),
        (np.array([1.0, 2.0]),),
    ),
}


def _write(x, i):
    y = x.copy()
    y[i] = x[i] * 3 + x[0]
    return y


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_transformed_programs_agree_across_backends(name, backend):
    fn, args = CASES[name]
    want = tk.jit(fn, backend="interpreter")(*args)
    got = tk.jit(fn, backend=backend)(*args)
    if backend == "gpu-emulated":
        got = tk.device_get(got)
    for g, w in zip(_leaves(got), _leaves(want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-12, atol=1e-12)


def _leaves(tree):
    from toolkit.frontend.pytree import flatten
    return flatten(tree)[0]


def test_gpu_loops_run_their_bodies_as_compiled_gpu_programs():
    f = tk.jit(
        lambda x: tk.lax.fori_loop(0, 7, lambda i, v: v * 1.5 + 1, x), backend="gpu-emulated"
    )
    x = np.ones(4)
    compiled = f.compiled(x)
    assert not compiled._executable.fallbacks  # no interpreter fallback: the loop is a control step
    assert [s.kind for s in compiled._executable.steps if s.inst.opcode == "while"] == ["control"]
    with tk.profile() as prof:
        out = tk.device_get(f(x))
    want = np.ones(4)
    for _ in range(7):
        want = want * 1.5 + 1
    np.testing.assert_allclose(out, want)
    assert [k.launch.split(",")[0] for k in prof.kernels if k.name.startswith("while")] == [
        "trips=7"
    ]
