"""``tk.lax`` control flow: loops and branches on traced values trace their functions once
(nested traces capturing the enclosing function's values) into HLO ``while``/``conditional``;
results match plain Python on every backend, and a traced trip count compiles once."""
import numpy as np
import pytest

import toolkit as tk
from toolkit.frontend.errors import UserTypeError

from test_gpu_emulated import DEVICE  # noqa: F401  (registers the gpu-emulated backend)

BACKENDS = ["interpreter", "cpu", "gpu-emulated"]


def run(fn, backend, *args):
    out = tk.jit(fn, backend=backend, on_recompile="ignore")(*args)
    return tk.device_get(out) if backend == "gpu-emulated" else out


def decay(x, n):
    def body(i, acc):
        return acc * 0.5 + x[i % x.shape[0]]  # x is captured from the enclosing function
    return tk.lax.fori_loop(0, n, body, np.zeros_like(x))


def decay_python(x, n):
    acc = np.zeros_like(x)
    for i in range(n):
        acc = acc * 0.5 + x[i % x.shape[0]]
    return acc


@pytest.mark.parametrize("backend", BACKENDS)
def test_fori_loop_with_a_traced_trip_count_compiles_once(backend):
    x = np.arange(4.0)
    jitted = tk.jit(decay, backend=backend)
    for n in (0, 1, 5, 9):
        got = jitted(x, n)
        np.testing.assert_array_equal(
            tk.device_get(got) if backend == "gpu-emulated" else got, decay_python(x, n)
        )
    assert len(jitted._cache) == 1
    assert "while(" in jitted.lower(x, 3).as_text()


@pytest.mark.parametrize("backend", BACKENDS)
def test_while_loop_on_a_pytree_state(backend):
    def halve_until_small(x):
        def cond(s):
            return s["value"] > 1e-3
        def body(s):
            return {"steps": s["steps"] + 1, "value": s["value"] * 0.5}
        return tk.lax.while_loop(cond, body, {"steps": 0, "value": np.abs(x).sum()})

    x = np.array([3.0, -4.0])
    got = run(halve_until_small, backend, x)
    steps, value = 0, 7.0
    while value > 1e-3:
        steps, value = steps + 1, value * 0.5
    assert int(got["steps"]) == steps and float(got["value"]) == value


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("k", [-3, 0, 1, 2, 5])
def test_cond_and_switch_take_one_branch(backend, k):
    def branches(x, k):
        total = x.sum()
        return (tk.lax.cond(k > 0, lambda a: (a * 2, a.max()), lambda a: (-a, a.min()), x),
                tk.lax.switch(k, [lambda a: a + 1, lambda a: a * total, lambda a: a - 1], x))

    x = np.arange(5.0)
    (c, m), s = run(branches, backend, x, k)
    want_c, want_m = (x * 2, x.max()) if k > 0 else (-x, x.min())
    # an index out of range is clamped, as JAX's
    want_s = [x + 1, x * x.sum(), x - 1][min(max(k, 0), 2)]
    np.testing.assert_array_equal(c, want_c)
    assert m == want_m
    np.testing.assert_array_equal(s, want_s)


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_nested_loops_capture_through_every_level(backend):
    def nested(x, n):
        scale = x.mean()

        def outer(i, acc):
            def inner(j, a):
                return a + scale * (i + j)  # scale: two levels out; i: one level out
            return tk.lax.fori_loop(0, 3, inner, acc)
        return tk.lax.fori_loop(0, n, outer, np.zeros_like(x))

    x = np.arange(4.0)
    want = np.zeros_like(x)
    for i in range(4):
        for j in range(3):
            want = want + x.mean() * (i + j)
    np.testing.assert_allclose(run(nested, backend, x, 4), want)


def test_outside_a_trace_they_run_as_python():
    assert tk.lax.fori_loop(0, 4, lambda i, v: v + i, 0) == 6
    assert tk.lax.while_loop(lambda v: v < 10, lambda v: v * 3, 1) == 27
    assert tk.lax.cond(False, lambda a: a + 1, lambda a: a - 1, 5) == 4
    assert tk.lax.switch(9, [lambda: "a", lambda: "b"]) == "b"


def test_a_data_check_inside_a_loop_raises_after_the_call():
    def f(x, i):
        return tk.lax.fori_loop(0, 3, lambda k, acc: acc + x[i], 0.0)

    jitted = tk.jit(f)
    assert float(jitted(np.arange(4.0), 2)) == 6.0
    with pytest.raises(IndexError, match="out of bounds"):
        jitted(np.arange(4.0), 7)


@pytest.mark.parametrize("fn, message", [
    (lambda x: tk.lax.fori_loop(0, 3, lambda i, v: v.astype(np.float32), x), "identical types"),
    (lambda x: tk.lax.cond(x.sum() > 0, lambda a: a, lambda a: a[:2], x), "identical types"),
    (lambda x: tk.lax.cond(x > 0, lambda a: a, lambda a: a, x), "must be a scalar"),
    (lambda x: tk.lax.while_loop(lambda v: v, lambda v: v, x), "boolean scalar"),
])
def test_mistakes_are_named(fn, message):
    with pytest.raises(UserTypeError, match=message):
        tk.jit(fn)(np.arange(3.0))


def test_xla_runs_the_traced_loop():
    pytest.importorskip("jax", reason="JAX not installed")
    from test_xla_acceptance import xla_run

    x = np.arange(4.0)
    text = tk.jit(decay).lower(x, 5).as_text()
    outs = xla_run(text, [x, np.int64(5)])
    np.testing.assert_array_equal(outs[0], decay_python(x, 5))
    assert not outs[1]  # the index check's flag


def test_loop_bodies_are_optimised_and_fused_like_the_entry():
    def f(x, n):
        return tk.lax.fori_loop(
            0, n, lambda i, acc: np.tanh(acc * 0.5 + x) * 2 + 1, np.zeros_like(x)
        )

    x = np.arange(4.0)
    compiled = tk.jit(f, backend="cpu").lower(x, 5).compile()
    module = compiled.optimized_hlo
    loop = next(i for i in module.entry.instructions if i.opcode == "while")
    body = loop.attrs["body"]
    assert any(i.opcode == "fusion" for i in body.instructions)  # tanh, *, + in one kernel
    assert not any(i.opcode == "tanh" for i in body.instructions)
    names = [c.name for c in module.computations]
    assert len(names) == len(set(names))  # fused computations renamed apart from the entry's
    assert any(d.consumer for d in compiled.fusion_decisions)
    want = np.zeros_like(x)
    for _ in range(5):
        want = np.tanh(want * 0.5 + x) * 2 + 1
    np.testing.assert_allclose(compiled(x, 5), want, rtol=1e-14)
    assert tk.hlo.parse(compiled.as_text()).to_text() == compiled.as_text()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("reverse", [False, True])
def test_scan_stacks_the_outputs_as_jax_does(backend, reverse):
    def rnn(xs, w):
        def step(h, x):
            h = np.tanh(h * 0.5 + x * w)
            return h, {"sum": h.sum(), "h": h}
        return tk.lax.scan(step, np.zeros(3), xs, reverse=reverse)

    xs = np.arange(12.0).reshape(4, 3) / 10
    w = np.array([1.0, -2.0, 3.0])
    h, ys = np.zeros(3), []
    for x in (xs[::-1] if reverse else xs):
        h = np.tanh(h * 0.5 + x * w)
        ys.append((h.sum(), h))
    if reverse:
        ys.reverse()
    got_h, got_ys = run(rnn, backend, xs, w)
    np.testing.assert_allclose(got_h, h, rtol=1e-14)
    np.testing.assert_allclose(got_ys["sum"], [s for s, _ in ys], rtol=1e-14)
    np.testing.assert_allclose(got_ys["h"], np.stack([v for _, v in ys]), rtol=1e-14)
    eager_h, eager_ys = tk.lax.scan(
        lambda c, x: (
            np.tanh(c * 0.5 + x * w),
            {"sum": np.tanh(c * 0.5 + x * w).sum(), "h": np.tanh(c * 0.5 + x * w)},
        ),
        np.zeros(3),
        xs,
        reverse=reverse,
    )
    np.testing.assert_allclose(eager_ys["h"], got_ys["h"], rtol=1e-14)


def test_scan_lengths_must_agree():
    with pytest.raises(UserTypeError, match="disagree"):
        tk.jit(lambda a, b: tk.lax.scan(lambda c, x: (c, c), 0.0, (a, b)))(np.ones(3), np.ones(4))


def test_the_profile_records_a_loops_trip_count():
    f = tk.jit(decay, backend="cpu")
    x = np.arange(4.0)
    with tk.profile() as prof:
        f(x, 7)
    (loop,) = [k for k in prof.kernels if "while" in k.name]
    assert loop.launch.startswith("trips=7, ") and loop.launch.endswith("µs/trip")


def test_scan_over_zero_elements():
    carry, ys = tk.jit(
        lambda xs: tk.lax.scan(lambda c, x: (c + x.sum(), (c * 2, x[None])), 1.5, xs)
    )(np.zeros((0, 3)))
    assert float(carry) == 1.5
    assert ys[0].shape == (0,) and ys[1].shape == (0, 1, 3)
    with pytest.raises(UserTypeError, match="zero elements outside a jitted function"):
        tk.lax.scan(lambda c, x: (c + x, c), 0.0, np.zeros(0))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_data_check_inside_a_branch_raises_only_when_that_branch_runs(backend):
    def f(x, i, p):
        return tk.lax.cond(p > 0, lambda a: a[i] * 2, lambda a: a[0] + 0.0, x)

    x = np.arange(4.0)
    assert run(f, backend, x, np.int64(2), 1.0) == 4.0
    assert run(f, backend, x, np.int64(9), -1.0) == 0.0  # the indexing branch did not run
    with pytest.raises(IndexError, match="out of bounds"):
        run(f, backend, x, np.int64(9), 1.0)
    g = lambda k, a, i: tk.lax.switch(k, [lambda v: v[i], lambda v: v[0] * 1.0, lambda v: v[-i]], a)  # noqa: E731
    assert run(g, backend, np.int64(2), x, np.int64(3)) == x[-3]
    with pytest.raises(IndexError):
        run(g, backend, np.int64(2), x, np.int64(5))


def test_scan_takes_jaxs_unroll_hint():
    def cumulative(x):
        return tk.lax.scan(lambda c, v: (c + v, c * v), np.float64(0.0), x, unroll=2)

    carry, ys = tk.jit(cumulative)(np.arange(4.0))
    assert carry == 6.0
    np.testing.assert_array_equal(ys, [0.0, 0.0, 2.0, 9.0])
    with pytest.raises(TypeError, match="unroll must be a non-negative int"):
        tk.jit(lambda x: tk.lax.scan(lambda c, v: (c, v), 0.0, x, unroll=-1))(np.arange(2.0))


def test_a_python_number_init_takes_the_type_the_body_returns_as_in_jax():
    x32 = np.ones(3, np.float32)
    total = tk.jit(lambda x: tk.lax.fori_loop(0, 3, lambda i, c: c + x.sum(), 0.0))(x32)
    assert total.dtype == np.float32 and total == 9.0
    until = tk.jit(lambda x: tk.lax.while_loop(lambda c: c < 10, lambda c: c + x[0], 0.0))(x32)
    assert until.dtype == np.float32 and until == 10.0
    carry, ys = tk.jit(lambda x: tk.lax.scan(lambda c, v: (c + v, c), 0, x))(
        np.arange(3, dtype=np.int8))
    assert carry.dtype == ys.dtype == np.int8
    np.testing.assert_array_equal(ys, [0, 0, 1])
    with pytest.raises(UserTypeError, match="identical types"):  # (a strong init keeps its type)
        tk.jit(lambda x: tk.lax.fori_loop(0, 3, lambda i, c: c + x.sum(), np.float32(0.0)))(
            np.ones(3))
