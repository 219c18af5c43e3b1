"""Loops driven from native code (``backends/cpu/native_loop.py``): the same results as the
loop driven from Python, bit for bit, on every kind of state and step; loops it cannot run
(a step split over threads, a library call, a dot NumPy would not send to gemm) stay in Python."""
import os
import subprocess
import sys

import numpy as np
import pytest

import toolkit as tk
from toolkit.backends.cpu import executor
from toolkit.backends.cpu.native_loop import blas_gemm

pytestmark = pytest.mark.skipif(
    executor.native_run_loop is None, reason="the C extension was not built here"
)
RNG = np.random.default_rng(3)


def _drivers(fn, *args):
    compiled = tk.jit(fn, backend="cpu").lower(*args).compile()
    return [s.extra["run"].driver for s in compiled._executable.steps if s.kind == "control"]


def _rnn_loss(xs, w, u):
    def step(h, x):
        h = np.tanh(h @ w + x @ u)
        return h, np.sum(h)
    h, ys = tk.lax.scan(step, np.zeros((xs.shape[1], w.shape[0]), xs.dtype), xs)
    return np.sum(ys) + np.sum(h * h)


def _fori_in_place(a, n):
    def body(i, a):  # one element written a trip: the state is updated in place
        b = a * 1
        b[i] = a[i - 1] * 0.5 + 1.0
        return b
    return tk.lax.fori_loop(1, n, body, a)


def _swap_state(x, y):  # each element comes back from a temporary, copied into its buffer
    return tk.lax.fori_loop(
        0, 5, lambda i, s: (s[0] @ s[1].T * 0.1 + i, np.tanh(s[1]) + s[0][:, :1]), (x, y)
    )


def _nested(x):  # the inner loop is one op of the outer body's native program (run_while)
    def row(i, x):
        return tk.lax.fori_loop(0, 3 + i, lambda k, y: np.sin(y) * 0.9 + k, x)
    return tk.lax.fori_loop(0, 4, row, x)


def _data_dependent(x):
    return tk.lax.while_loop(lambda v: np.sum(v) < 100.0, lambda v: v * 1.7 + 0.1, x)


CASES = {
    "rnn gradients f32": (
        tk.grad(_rnn_loss, argnums=(1, 2)),
        (
            RNG.standard_normal((12, 4, 5)).astype(np.float32),
            (RNG.standard_normal((6, 6)) * 0.3).astype(np.float32),
            (RNG.standard_normal((5, 6)) * 0.3).astype(np.float32),
        ),
    ),
    "rnn gradients f64": (
        tk.grad(_rnn_loss, argnums=(0, 1, 2)),
        (
            RNG.standard_normal((9, 3, 5)),
            RNG.standard_normal((6, 6)) * 0.3,
            RNG.standard_normal((5, 6)) * 0.3,
        ),
    ),
    "zero trips": (_data_dependent, (np.array([50.0, 60.0]),)),
    "window writes": (lambda a: _fori_in_place(a, 7), (RNG.standard_normal(8),)),
    "state from temporaries": (
        _swap_state,
        (RNG.standard_normal((4, 4)), RNG.standard_normal((4, 4))),
    ),
    "trip count from the data": (_data_dependent, (np.array([0.5, 1.0, 2.0]),)),
    "a loop inside the body": (_nested, (np.linspace(-1.0, 1.0, 6),)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_native_loops_match_the_python_driven_loop_bit_for_bit(name, monkeypatch):
    fn, args = CASES[name]
    assert set(_drivers(fn, *args)) == {"native"}
    native = tk.jit(fn, backend="cpu")(*args)
    monkeypatch.setenv("TOOLKIT_NATIVE_LOOP", "0")
    assert set(_drivers(fn, *args)) == {"python"}
    python = tk.jit(fn, backend="cpu")(*args)
    for got, want in zip(np.atleast_1d(native) if not isinstance(native, tuple) else native,
                         np.atleast_1d(python) if not isinstance(python, tuple) else python):
        np.testing.assert_array_equal(got, want)


def test_the_profile_shows_the_trip_count_and_the_native_driver():
    x = np.array([0.5, 1.0, 2.0])
    with tk.profile() as prof:
        tk.jit(_data_dependent, backend="cpu")(x)
    (launch,) = [k.launch for k in prof.kernels if k.name.startswith("while")]
    # the profile says how it ran
    assert launch.startswith("trips=7, native, ") and launch.endswith("µs/trip")


def test_loops_with_steps_it_cannot_run_stay_in_python():
    big = np.ones(1 << 21)  # kernels over 2M elements split over threads: natively too
    assert _drivers(lambda v: tk.lax.fori_loop(0, 3, lambda i, s: s * 1.5 + 1.0, v), big) == \
        (["native"] if executor.native_split or executor.num_threads() == 1 else ["python"])
    same = np.ones((4, 3))  # x.T @ x: NumPy's matmul calls syrk for one buffer, not gemm
    assert _drivers(
        lambda v: tk.lax.fori_loop(0, 3, lambda i, s: s + np.sum(s.T @ s), v), same
    ) == ["python"]
    sort = np.array([3.0, 1.0, 2.0])
    assert _drivers(lambda v: tk.lax.fori_loop(0, 2, lambda i, s: np.sort(s) * 2.0, v), sort) == [
        "python"
    ]


def test_numpys_blas_is_found():
    blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
    if blas.get("name") != "scipy-openblas":  # (another BLAS: loops with dots run from Python)
        pytest.skip(f"NumPy is built with {blas.get('name')}, not the OpenBLAS its wheels bundle")
    gemm = blas_gemm()
    types = ("float32", "float64", "complex64", "complex128")  # NumPy's four BLAS types
    assert gemm is not None and set(gemm) == {*types, *(
        (t, routine) for t in types for routine in ("gemm", "dot", "gemv"))}


def test_without_the_native_driver_loops_run_from_python():
    code = (
        "import numpy as np, toolkit as tk; f = tk.jit(lambda v: tk.lax.fori_loop(0, 3, lambda i, "
        "s: s * 2.0, v), backend='cpu');"
        "c = f.lower(np.ones(3)).compile(); print([s.extra['run'].driver for s in "
        "c._executable.steps"
        " if s.kind == 'control'], f(np.ones(3)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "TOOLKIT_NATIVE_LOOP": "0"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout.strip() == "['python'] [8. 8. 8.]", done.stderr[-1500:]


def test_native_loops_run_concurrently_from_several_threads():
    """run_loop releases the GIL: two threads in the same compiled loop each get their own
    state and temporaries."""
    import threading
    fn, args = CASES["rnn gradients f64"]
    jitted = tk.jit(fn, backend="cpu")
    expected = jitted(*args)
    results, errors = [None] * 4, []

    def work(k):
        try:
            for _ in range(5):
                results[k] = jitted(*args)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for got in results:
        for g, e in zip(got, expected):
            np.testing.assert_array_equal(g, e)
