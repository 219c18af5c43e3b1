"""The loop-heavy benchmark programs (toolkit/workloads_loops.py and the float32 GPT-2)
compute NumPy's results on the CPU backend and the simulated GPU, at small sizes, and their
JAX versions compute the same where JAX is installed."""
import numpy as np
import pytest

import toolkit as tk
from toolkit.workloads import LOOP_PROGRAMS, Workload, gpt2_args

R = np.random.default_rng
SMALL_ARGS = {  # each program at a size that compiles in a second
    "covariance": lambda: (R(0).standard_normal((30, 10)),),
    "triangular": lambda: (np.tril(R(1).random((12, 12))) + 12 * np.eye(12), R(2).random(12)),
    "lu": lambda: (R(3).random((6, 6)) + 6 * np.eye(6),),
    "syrk": lambda: (R(4).random((10, 10)), R(5).random((10, 6)), 1.5, 1.2),
    "stacked": lambda: (R(6).standard_normal((3, 4, 8), dtype=np.float32),
                        R(7).standard_normal((8, 8), dtype=np.float32)),
    "gpt2": lambda: gpt2_args(2, 24, 8)(R(8)),
}
SMALL = {w.name: Workload(w.name, w.make, lambda r, k=k: SMALL_ARGS[k]())
         for w in LOOP_PROGRAMS for k in SMALL_ARGS if w.name.startswith(k)}
assert len(SMALL) == len(LOOP_PROGRAMS)


@pytest.mark.parametrize("backend", ["cpu", "gpu-simulated"])
@pytest.mark.parametrize("name", sorted(SMALL))
def test_loop_programs_compute_numpys_results(name, backend):
    w = SMALL[name]
    args = w.args()
    want = w.make(np)(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    got = tk.jit(w.make(np), backend=backend)(*[a.copy() if isinstance(a, np.ndarray) else a
                                               for a in args])
    rtol = 1e-4 if np.asarray(want).dtype == np.float32 else 1e-10
    np.testing.assert_allclose(np.asarray(got), want, rtol=rtol,
                               atol=rtol * np.abs(want).max())


@pytest.mark.parametrize("name", sorted(SMALL))
def test_jax_versions_compute_the_same(name):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    w = SMALL[name]
    args = w.args()
    want = w.make(np)(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    with jax.enable_x64(True):
        got = jax.jit(w.make(jnp))(*args)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
