"""tk.shard_map over host devices (one thread each) with tk.lax's collectives, against JAX's
own results for the same programs (tests/data/jax_spmd, made by JAX's shard_map over 4 forced
host devices) and against NumPy written out by hand."""
import pathlib

import numpy as np
import pytest

import toolkit as tk

DATA = pathlib.Path(__file__).parent / "data" / "jax_spmd"


def _blocks(data, k, count=4):
    return [data[f"d{d}_arg{k}"] for d in range(count)]


def test_every_collective_is_jaxs_bit_for_bit():
    data = np.load(DATA / "every_collective.npz")
    mesh = tk.Mesh((4,), ("x",))

    def every_collective(a):  # tests/data/jax_spmd/generate.py's, in toolkit's names
        return (tk.lax.psum(a, "x"), tk.lax.all_gather(a, "x", tiled=True),
                tk.lax.psum_scatter(a, "x", tiled=True),
                tk.lax.ppermute(a, "x", [(0, 1), (1, 2), (2, 3)]),
                tk.lax.all_to_all(a, "x", 0, 0, tiled=True), tk.lax.pmax(a, "x"),
                tk.lax.axis_index("x").reshape(1))

    f = tk.shard_map(every_collective, mesh, in_specs=tk.P("x"), out_specs=(tk.P("x"),) * 7)
    outs = f(np.concatenate(_blocks(data, 0)))
    for k, got in enumerate(outs):
        want = np.concatenate([data[f"d{d}_out{k}"] for d in range(4)])
        assert got.dtype == want.dtype and got.shape == want.shape, k
        np.testing.assert_array_equal(got, want)


def test_a_2x2_mesh_reduces_and_gathers_over_its_axes_as_jax():
    data = np.load(DATA / "mesh_2x2.npz")
    mesh = tk.Mesh((2, 2), ("data", "model"))

    def mesh_2x2(a):
        return (tk.lax.psum(a, "model"), tk.lax.all_gather(a, "data", tiled=True),
                tk.lax.pmean(a, ("data", "model")),
                np.broadcast_to(tk.lax.axis_index("model") * 10 + tk.lax.axis_index("data"),
                                (1, 1)))

    spec = tk.P("data", "model")
    f = tk.shard_map(mesh_2x2, mesh, in_specs=spec, out_specs=(spec,) * 4)
    b = _blocks(data, 0)
    outs = f(np.block([[b[0], b[1]], [b[2], b[3]]]))
    for k, got in enumerate(outs):
        w = [data[f"d{d}_out{k}"] for d in range(4)]
        np.testing.assert_array_equal(got, np.block([[w[0], w[1]], [w[2], w[3]]]))


def test_megatron_row_parallel_linear_is_the_unsharded_product():
    data = np.load(DATA / "row_parallel_linear.npz")
    mesh = tk.Mesh((4,), ("x",))
    f = tk.shard_map(lambda x, w: tk.lax.psum(np.tanh(x @ w), "x"), mesh,
                     in_specs=(tk.P(None, "x"), tk.P("x", None)), out_specs=tk.P())
    x, w = np.concatenate(_blocks(data, 0), axis=1), np.concatenate(_blocks(data, 1), axis=0)
    got = f(x, w)
    np.testing.assert_allclose(got, data["d0_out0"], rtol=1e-6, atol=1e-6)
    # and what it computes in NumPy: the sum over devices of tanh of each device's partial dot
    want = sum(np.tanh(x[:, 4 * d:4 * d + 4] @ w[4 * d:4 * d + 4]) for d in range(4))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_untiled_forms_and_all_to_all_between_axes_match_numpy():
    mesh = tk.Mesh((4,), ("x",))
    x = np.arange(4 * 4 * 6, dtype=np.float64).reshape(16, 6)

    def f(a):  # a: (4, 6) per device
        stacked = tk.lax.all_gather(a, "x")  # (4, 4, 6): a new leading axis
        scattered = tk.lax.psum_scatter(a, "x", scatter_dimension=0)  # (6,): row d of the sum
        moved = tk.lax.all_to_all(a, "x", 0, 1, tiled=True)  # (1, 24)
        return stacked, scattered, moved

    stacked, scattered, moved = tk.shard_map(
        f, mesh, in_specs=tk.P("x"), out_specs=(tk.P("x"), tk.P("x"), tk.P("x")))(x)
    blocks = np.split(x, 4)
    np.testing.assert_array_equal(stacked, np.concatenate([np.stack(blocks)] * 4))
    total = sum(blocks)
    np.testing.assert_array_equal(scattered, total.reshape(-1))
    want = np.concatenate([np.concatenate([b[d:d + 1] for b in blocks], axis=1)
                           for d in range(4)])
    np.testing.assert_array_equal(moved, want)


def test_ppermute_along_one_axis_of_a_2d_mesh():
    mesh = tk.Mesh((2, 3), ("a", "b"))
    x = np.arange(6 * 2, dtype=np.int32).reshape(6, 2)
    f = tk.shard_map(lambda v: tk.lax.ppermute(v, "b", [(0, 1), (1, 2)]), mesh,
                     in_specs=tk.P(("a", "b")), out_specs=tk.P(("a", "b")))
    got = f(x)
    want = np.zeros_like(x)
    for a in range(2):
        for s, t in [(0, 1), (1, 2)]:
            want[a * 3 + t] = x[a * 3 + s]
    np.testing.assert_array_equal(got, want)


def test_a_program_without_collectives_runs_compiled_on_every_device():
    mesh = tk.Mesh((2,), ("x",))
    x = np.linspace(-2, 2, 64).reshape(8, 8)
    f = tk.shard_map(lambda v: np.tanh(v) * 2 + v.sum(axis=1, keepdims=True), mesh,
                     in_specs=tk.P("x"), out_specs=tk.P("x"), backend="cpu")
    want = np.concatenate([np.tanh(b) * 2 + b.sum(axis=1, keepdims=True)
                           for b in np.split(x, 2)])
    np.testing.assert_allclose(f(x), want, rtol=1e-15, atol=1e-15)


def test_broken_promises_and_bad_specs_are_errors_that_name_them():
    mesh = tk.Mesh((4,), ("x",))
    with pytest.raises(ValueError, match=r"out_specs P\(\) leaves out mesh axis 'x'.*devices 0 "
                                         "and 1 differ"):  # (without the typing: the values)
        tk.shard_map(lambda a: a * 2, mesh, in_specs=tk.P("x"), out_specs=tk.P(),
                     check_vma=False)(np.arange(8.))
    with pytest.raises(ValueError, match=r"dimension 0 of argument 0 of <lambda> \(shape "
                                         r"\(6,\)\) does not split into 4 equal blocks"):
        tk.shard_map(lambda a: a, mesh, in_specs=tk.P("x"), out_specs=tk.P("x"))(np.ones(6))
    with pytest.raises(ValueError, match="names axis 'y', which the mesh"):
        tk.shard_map(lambda a: a, mesh, in_specs=tk.P("y"), out_specs=tk.P("x"))(np.ones(8))
    with pytest.raises(NameError, match="unbound axis name: 'y'"):
        tk.shard_map(lambda a: tk.lax.psum(a, "y"), mesh, in_specs=tk.P("x"),
                     out_specs=tk.P())(np.ones(8))
    with pytest.raises(NameError, match="unbound axis name: 'x'"):
        tk.lax.psum(np.ones(3), "x")
    with pytest.raises(ValueError, match="numbered 0..3 row-major"):
        tk.Mesh(np.array([1, 0, 2, 3]), ("x",))


def test_the_compiled_program_shows_the_collectives_as_jax_lowers_them():
    """One replica group per combination of the other axes, ordered by the named axis, with a
    channel id and flattened device ids, as JAX lowers psum under SPMD."""
    from toolkit.frontend.collectives import mesh_context
    from toolkit.spmd import _compile

    mesh = tk.Mesh((2, 2), ("data", "model"))

    def over(axis):
        def traced(a):
            with mesh_context(mesh):
                return tk.lax.psum(a, axis)
        compiled, has_collectives = _compile(traced, [np.ones((2, 2), np.float32)], None)[:2]
        assert has_collectives
        return compiled.as_text(metadata=False)

    for axis, groups in (("model", "{{0,1},{2,3}}"), ("data", "{{0,2},{1,3}}")):
        assert (f"all-reduce(%a.2), channel_id=1, replica_groups={groups}, "
                "use_global_device_ids=true, to_apply=") in over(axis)


@pytest.mark.parametrize("backend", ["cpu", "gpu-simulated"])
def test_collectives_run_between_compiled_kernels(backend):
    """The kernels are compiled and each device's collectives meet the others' between them,
    on the device's thread (on the GPU, between copies to and from the host); the results are
    the interpreter's."""
    mesh = tk.Mesh((2, 2), ("data", "model"))

    def block(x, w):
        h = np.tanh(x @ w)
        return (tk.lax.psum(h, "model"), tk.lax.all_gather(h * 2, "data", tiled=True),
                tk.lax.ppermute(x, "model", [(0, 1), (1, 0)]) + tk.lax.axis_index("data"))

    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((8, 6)), rng.standard_normal((6, 4))
    specs = dict(in_specs=(tk.P("data", "model"), tk.P("model", None)),
                 out_specs=(tk.P("data", None), tk.P(None, "model"), tk.P("data", "model")))
    # (all_gather's result varies along the gathered axis, as JAX types it: the promise of
    # P(None, "model") is checked on the values, check_vma=False, as JAX would need too)
    compiled = tk.shard_map(block, mesh, backend=backend, check_vma=False, **specs)(x, w)
    interpreted = tk.shard_map(block, mesh, backend="interpreter", check_vma=False, **specs)(x, w)
    for got, want in zip(compiled, interpreted, strict=True):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-15, atol=1e-15)


@pytest.mark.parametrize("backend", ["cpu", "interpreter"])
def test_collectives_inside_a_loop_meet_once_per_trip(backend):
    mesh = tk.Mesh((4,), ("x",))
    f = tk.shard_map(lambda a: tk.lax.fori_loop(0, 3, lambda i, v: tk.lax.psum(v, "x") * 0.5, a),
                     mesh, in_specs=tk.P("x"), out_specs=tk.P("x"), backend=backend)
    x = np.arange(8.0)
    values = np.split(x, 4)
    for _ in range(3):
        values = [sum(values) * 0.5] * 4
    np.testing.assert_array_equal(f(x), np.concatenate(values))


def test_every_collective_is_profiled_with_nccl_tests_bandwidths(tmp_path):
    from toolkit.ir.collectives import bus_bandwidth_factor

    assert bus_bandwidth_factor("all-reduce", 4) == 1.5
    assert bus_bandwidth_factor("all-gather", 4) == bus_bandwidth_factor("all-to-all", 4) == 0.75
    assert bus_bandwidth_factor("collective-permute", 4) == 1.0
    mesh = tk.Mesh((4,), ("x",))
    f = tk.shard_map(lambda a: tk.lax.all_gather(tk.lax.psum(a, "x"), "x", tiled=True), mesh,
                     in_specs=tk.P("x"), out_specs=tk.P("x"), backend="cpu")
    x = np.ones(4 * 256, np.float32)
    f(x)
    with tk.profile() as prof:
        f(x)
    events = prof.collectives
    assert sorted((e.op, e.device) for e in events) == sorted(
        (op, d) for op in ("all-reduce", "all-gather") for d in range(4))
    for e in events:
        assert e.group == (0, 1, 2, 3) and e.function == "<lambda>"
        # nccl-tests' S: the all-reduce's buffer, the all-gather's whole result
        assert e.bytes == (256 * 4 if e.op == "all-reduce" else 4 * 256 * 4)
        assert e.busbw == pytest.approx(e.algbw * bus_bandwidth_factor(e.op, 4))
        assert e.wait >= 0 and e.duration > 0
    for op in ("all-reduce", "all-gather"):  # every device agrees on who came last
        assert len({e.last for e in events if e.op == op}) == 1
    text = prof.summary()
    assert "collectives: 8 device parts in 2 meetings" in text and "straggler: device" in text
    prof.to_chrome_trace(str(tmp_path / "trace.json"))
    import json

    spans = [e for e in json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
             if e.get("cat") == "collective"]
    assert len(spans) == 8 and {s["name"].split()[0] for s in spans} == {"all-reduce",
                                                                        "all-gather"}
    prof.save(str(tmp_path / "run.json"))
    assert len(tk.Profile.load(str(tmp_path / "run.json")).collectives) == 8


@pytest.mark.parametrize("check_vma", [True, False])
def test_data_parallel_gradients_are_the_full_batchs(check_vma):
    """Each device differentiates its slice's loss with respect to the replicated w. With JAX's
    typing (check_vma, the default) w is invariant, so its gradient is summed over the devices:
    the full batch's; pmean of an invariant value leaves it. Without it (pmap's semantics)
    each device has its slice's gradient, and pmean averages them."""
    mesh = tk.Mesh((4,), ("x",))
    rng = np.random.default_rng(0)
    w, x = rng.standard_normal((5, 3)), rng.standard_normal((8, 5))

    def step(w, x):
        loss, grad = tk.value_and_grad(lambda w, x: (np.tanh(x @ w) ** 2).sum())(w, x)
        return tk.lax.psum(loss, "x").reshape(1), tk.lax.pmean(grad, "x")

    loss, grad = tk.shard_map(step, mesh, in_specs=(tk.P(), tk.P("x")),
                              out_specs=(tk.P(), tk.P()), backend="cpu",
                              check_vma=check_vma)(w, x)
    t = np.tanh(x @ w)
    np.testing.assert_allclose(loss, [(t ** 2).sum()], rtol=1e-14)
    full = x.T @ (2 * t * (1 - t ** 2))
    np.testing.assert_allclose(grad, full if check_vma else full / 4, rtol=1e-13, atol=1e-15)


# JAX 0.10.2's results for these programs (shard_map over 4 forced host devices, float64,
# w = [1, 2], x = arange(8).reshape(4, 2) split by rows; xs = arange(8) split; the x of
# "scatter" is arange(32), replicated), with check_vma's default and with check_vma=False
_JAX_GRADS = {
    "grad of psum(loss), replicated w": ([384, 472], [0, 16, 128, 192, 448, 560, 960, 1120]),
    "grad of the local loss, replicated w": ([384, 472], [0, 4, 32, 48, 112, 140, 240, 280]),
    "grad of psum(loss), split x": ([4, 8, 16, 32, 28, 56, 40, 80],
                                    [16, 32, 64, 128, 112, 224, 160, 320]),
    "pmean of the local grad": ([384, 472], [96, 118] * 4),
    "grad of pmean(loss), replicated w": ([96, 118], [0, 4, 32, 48, 112, 140, 240, 280]),
    "through all_gather": ([0, 8, 16, 24, 32, 40, 48, 56], [0, 8, 16, 24, 32, 40, 48, 56]),
    "through psum_scatter": ([32 * k for k in range(32)], [8 * k for k in range(32)] * 4),
    "through ppermute and axis_index": ([0, 2, 8, 12, 24, 30, 0, 0],
                                        [0, 2, 8, 12, 24, 30, 0, 0]),
    "psum of a replicated scalar": ([44], [5, 9, 13, 17]),
}


@pytest.mark.parametrize("name", list(_JAX_GRADS))
@pytest.mark.parametrize("check_vma", [True, False])
def test_gradients_are_jaxs_with_and_without_varying_typing(name, check_vma):
    mesh = tk.Mesh((4,), ("d",))
    P, lax = tk.P, tk.lax
    w, x, xs = np.array([1.0, 2.0]), np.arange(8.0).reshape(4, 2), np.arange(8.0)

    def local(w, x):
        return np.sum((x @ w) ** 2)

    programs = {
        "grad of psum(loss), replicated w": (
            lambda w, x: tk.grad(lambda w: lax.psum(local(w, x), "d"))(w), (w, x), P()),
        "grad of the local loss, replicated w": (
            lambda w, x: tk.grad(local)(w, x), (w, x), P()),
        "grad of psum(loss), split x": (
            lambda w, x: tk.grad(lambda x: lax.psum(local(w, x), "d"))(x), (w, x), P("d")),
        "pmean of the local grad": (
            lambda w, x: lax.pmean(tk.grad(local)(w, x), "d"), (w, x), P()),
        "grad of pmean(loss), replicated w": (
            lambda w, x: tk.grad(lambda w: lax.pmean(local(w, x), "d"))(w), (w, x), P()),
        "through all_gather": (
            lambda x: tk.grad(lambda x: np.sum(lax.all_gather(x, "d", tiled=True) ** 2))(x),
            (xs,), P("d")),
        "through psum_scatter": (
            lambda x: tk.grad(lambda x: np.sum(lax.psum_scatter(x, "d", tiled=True) ** 2))(x),
            (np.arange(32.0),), P()),
        "through ppermute and axis_index": (
            lambda x: tk.grad(lambda x: np.sum(lax.ppermute(
                x, "d", [(0, 1), (1, 2), (2, 3), (3, 0)]) ** 2 * lax.axis_index("d")))(x),
            (xs,), P("d")),
        "psum of a replicated scalar": (
            lambda x: tk.grad(lambda w: np.sum(x * w) + lax.psum(w, "d"))(
                np.float64(2.0)).reshape(1), (xs,), P()),
    }
    fn, args, out_spec = programs[name]
    with_vma, without = _JAX_GRADS[name]
    in_specs = (P(), P("d")) if len(args) == 2 else (
        P() if name in ("through psum_scatter", "psum of a replicated scalar") else P("d"),)
    if name == "psum of a replicated scalar":
        in_specs = (P("d"),)
    if not check_vma and out_spec == P():  # devices differ without the typing: gather them
        out_spec = P("d")
    got = tk.shard_map(fn, mesh, in_specs=in_specs, out_specs=out_spec,
                       check_vma=check_vma)(*args)
    np.testing.assert_array_equal(got.ravel(), np.array(with_vma if check_vma else without,
                                                        float))


@pytest.mark.parametrize("check_vma", [True, False])
def test_derivatives_through_every_linear_collective(check_vma):
    """Per device, a collective is linear in every device's operand: the forward rule is the
    collective on the tangents (checked against finite differences of the whole SPMD
    program), the backward rule its transpose (the dot-product test <ct, J dx> = <J^T ct, dx>
    over all devices), with JAX's varying/invariant typing (psum transposes to the identity,
    cotangents of invariant values are summed) and without it (psum transposes to psum)."""
    mesh = tk.Mesh((4,), ("x",))
    rng = np.random.default_rng(1)

    def program(a):
        b = tk.lax.psum(a * a, "x")
        c = tk.lax.all_gather(np.sin(b), "x", tiled=True)
        d = tk.lax.psum_scatter(c, "x", tiled=True)
        e = tk.lax.all_to_all(d * a[:2].sum(), "x", 0, 0, tiled=True)
        return tk.lax.ppermute(e, "x", [(0, 1), (1, 2), (2, 3)]) * a

    def sharded(fn, n_args):
        return tk.shard_map(fn, mesh, in_specs=(tk.P("x"),) * n_args, out_specs=tk.P("x"),
                            backend="cpu", check_vma=check_vma)

    a, da = rng.standard_normal(32), rng.standard_normal(32)
    forward = sharded(program, 1)
    tangent = sharded(lambda a, da: tk.jvp(program, (a,), (da,))[1], 2)(a, da)
    eps = 1e-6
    numeric = (forward(a + eps * da) - forward(a - eps * da)) / (2 * eps)
    np.testing.assert_allclose(tangent, numeric, rtol=1e-6, atol=1e-7)
    ct = rng.standard_normal(32)
    pulled = sharded(lambda a, ct: tk.vjp(program, a)[1](ct)[0], 2)(a, ct)
    assert np.dot(ct, tangent) == pytest.approx(np.dot(pulled, da), rel=1e-12)


def test_pmax_has_no_derivative_and_says_so():
    mesh = tk.Mesh((2,), ("x",))
    f = tk.shard_map(lambda a: tk.grad(lambda v: tk.lax.pmax(v, "x").sum())(a), mesh,
                     in_specs=tk.P("x"), out_specs=tk.P("x"))
    with pytest.raises(Exception, match="all-reduce by 'maximum' .* has no derivative"):
        f(np.ones(4))


def test_vmap_inside_a_shard_map_batches_through_the_collectives():
    mesh = tk.Mesh((4,), ("x",))

    def per_example(a):  # a: (3,) per device and example
        return (tk.lax.psum(a * a, "x"), tk.lax.all_gather(a, "x", tiled=True),
                tk.lax.psum_scatter(np.tile(a, 4), "x", tiled=True),
                tk.lax.all_to_all(np.tile(a, 4), "x", 0, 0, tiled=True),
                tk.lax.ppermute(a, "x", [(0, 1), (1, 0)]))

    def loop(batch):  # the same, one example at a time
        return tuple(np.stack(rows) for rows in zip(*(per_example(batch[i])
                                                      for i in range(batch.shape[0]))))

    x = np.random.default_rng(2).standard_normal((5, 12))
    specs = dict(in_specs=tk.P(None, "x"), out_specs=(tk.P(None, "x"),) * 5, backend="cpu")
    batched = tk.shard_map(tk.vmap(per_example), mesh, **specs)(x)
    looped = tk.shard_map(loop, mesh, **specs)(x)
    for got, want in zip(batched, looped, strict=True):
        np.testing.assert_array_equal(got, want)


def test_a_function_that_writes_its_argument_in_place_is_refused():
    """Each device holds its own block: a write into an argument has no one array to land in
    (the devices would each write theirs into the caller's), so it is an error naming it."""
    mesh = tk.Mesh((4,), ("x",))

    def f(a, b):
        a[0] = a[0] + b.sum()
        return a * 1.0

    a = np.arange(8.0)
    with pytest.raises(ValueError, match=r"writes its argument\(s\) a in place"):
        tk.shard_map(f, mesh, in_specs=(tk.P(), tk.P("x")), out_specs=tk.P("x"))(a, a.copy())
    np.testing.assert_array_equal(a, np.arange(8.0))


def test_devices_take_their_share_of_blas_and_leave_the_callers_thread_as_it_was():
    """Each host device calls BLAS with its share of the cores; the calling thread, which is
    device 0, is left unset afterwards (OpenBLAS's default, which pinning it to the count in
    effect would not be: its later products would run slower)."""
    from toolkit.backends import blas_threads as bt
    from toolkit.backends.cpu.executor import _BUDGET

    seen = []
    with bt.blas_threads(1):
        seen.append(bt._LOCAL.n)
        with bt.blas_threads(2):
            seen.append(bt._LOCAL.n)
        seen.append(bt._LOCAL.n)
    assert seen == [1, 2, 1] and bt._LOCAL.n == 0
    mesh = tk.Mesh((2,), ("x",))
    f = tk.shard_map(lambda a, w: tk.lax.psum(a @ w, "x"), mesh,
                     in_specs=(tk.P(None, "x"), tk.P("x")), out_specs=tk.P())
    a, w = np.ones((4, 6)), np.ones((6, 3))
    np.testing.assert_array_equal(f(a, w), a @ w)
    assert getattr(bt._LOCAL, "n", 0) == 0 and getattr(_BUDGET, "n", None) is None


def test_an_output_whose_replication_the_typing_cannot_prove_is_refused_as_jax_refuses_it():
    """With check_vma=True (the default) an out_spec that leaves out an axis the output varies
    along is refused before anything runs, with JAX's message (JAX 0.10.2 refuses the same
    programs, checked by hand); a psum over the axis, or a value the typing
    proves the same on every device, is accepted."""
    mesh = tk.Mesh((2, 2), ("a", "b"))

    def doubled(x):
        return x * 2

    with pytest.raises(ValueError, match=(
            r"shard_map applied to the function 'doubled' was given out_specs which require "
            r"replication which can't be statically inferred given the mesh:\n\nThe mesh given "
            r"has shape \(2, 2\) with corresponding axis names \('a', 'b'\).\n\nout_specs is "
            r"P\('a', None\) which implies that the corresponding output value is replicated "
            r"across mesh axis 'b', but could not infer replication over any axes")):
        tk.shard_map(doubled, mesh, in_specs=tk.P("a", "b"), out_specs=tk.P("a", None))(
            np.ones((4, 4)))

    def two(x, y):
        return x * 2, tk.lax.psum(y, "b") + x.sum()  # the second varies along 'a' and 'b'

    with pytest.raises(ValueError, match=r"out_specs output 1 is P\('a', None\).*mesh axis 'b'"):
        tk.shard_map(two, mesh, in_specs=(tk.P("a", "b"), tk.P("a", "b")),
                     out_specs=(tk.P("a", "b"), tk.P("a", None)))(np.ones((4, 4)), np.ones((4, 4)))

    def half(x):  # varies along 'a' only: replication over 'b' is proven
        return tk.lax.psum(x, "b")

    with pytest.raises(ValueError, match=r"replicated across mesh axis 'a', but could only infer "
                                         r"replication over \['b'\]"):
        tk.shard_map(half, mesh, in_specs=tk.P("a", "b"), out_specs=tk.P())(np.ones((4, 4)))
    out = tk.shard_map(half, mesh, in_specs=tk.P("a", "b"), out_specs=tk.P("a", None))(
        np.arange(16.0).reshape(4, 4))
    np.testing.assert_array_equal(out, _psum_b(np.arange(16.0).reshape(4, 4)))
    constant = tk.shard_map(lambda x: np.float64(3.0) + 0 * tk.lax.psum(x.sum(), ("a", "b")),
                            mesh, in_specs=tk.P("a", "b"), out_specs=tk.P())(np.ones((4, 4)))
    assert float(constant) == 3.0


def _psum_b(x):
    """psum over 'b' of the blocks of a (2, 2) mesh's P('a', 'b') split, assembled as P('a')."""
    left, right = x[:, :2], x[:, 2:]
    return left + right
