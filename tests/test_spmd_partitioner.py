"""tk.jit(in_shardings=, out_shardings=): XLA-style SPMD partitioning of programs written for
whole arrays, run over host devices. Every result is checked against NumPy on the whole
arrays; the collectives inserted are checked against what XLA's partitioner inserts for the
same program and shardings (JAX 0.10.2, 4 forced host devices: one all-reduce for the
Megatron MLP, two for the data-parallel step, which XLA then combines into one)."""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import toolkit as tk
from toolkit.ir.ops import OPS
from toolkit.passes.shardings import MeshShape, PartitionError, replicated, xla_sharding
from toolkit.passes.spmd_rules import RULES

rng = np.random.default_rng(0)


def _mesh(*shape_names):
    shape = tuple(n for n, _ in shape_names)
    return tk.Mesh(shape, tuple(a for _, a in shape_names))


def _sharding(mesh):
    return lambda *axes: tk.NamedSharding(mesh, tk.P(*axes))


def _opcodes(lowered):
    return [c.split(" ")[0] for c in lowered.collectives()]


def test_every_op_has_a_partitioning_rule():
    assert set(RULES) == set(OPS)


def test_megatron_mlp_inserts_one_all_reduce_as_xla():
    mesh = _mesh((4, "model"))
    S = _sharding(mesh)

    def mlp(x, w1, b1, w2):
        return np.maximum(x @ w1 + b1, 0) @ w2

    args = [rng.standard_normal(s).astype(np.float32) for s in [(8, 16), (16, 32), (32,),
                                                                 (32, 16)]]
    f = tk.jit(mlp, in_shardings=(S(), S(None, "model"), S("model"), S("model", None)),
               out_shardings=S())
    lowered = f.lower(*args)
    assert lowered.collectives() == ["all-reduce f32[8,16] over {{0,1,2,3}}"]
    text = lowered.as_text(metadata=False)
    # the column-parallel half runs on the devices' blocks with no communication
    assert "f32[8,8]{1,0} dot(%x" in text and "all-gather" not in text
    assert "sharding={devices=[1,4]<=[4]}" in text and "sharding={devices=[4,1]<=[4]}" in text
    np.testing.assert_allclose(f(*args), mlp(*args), rtol=2e-5, atol=2e-5)
    (decision,) = lowered.decisions
    assert decision.collective == "all-reduce" and "contracting" in decision.message
    assert decision.location.endswith(".py:" + str(mlp.__code__.co_firstlineno + 1))


def test_data_parallel_training_step_all_reduces_the_gradient_and_loss():
    mesh = _mesh((4, "data"))
    S = _sharding(mesh)

    def loss(w, x, y):
        return np.mean((np.tanh(x @ w) - y) ** 2)

    def step(w, x, y):
        return w - 0.1 * tk.grad(loss)(w, x, y), loss(w, x, y)

    w, x, y = rng.standard_normal((8, 3)), rng.standard_normal((32, 8)), rng.standard_normal(
        (32, 3))
    f = tk.jit(step, in_shardings=(S(), S("data"), S("data")), out_shardings=(S(), S()))
    lowered = f.lower(w, x, y)
    assert sorted(lowered.collectives()) == ["all-reduce f64[8,3] over {{0,1,2,3}}",
                                             "all-reduce f64[] over {{0,1,2,3}}"]
    (w1, l1), (w2, l2) = f(w, x, y), tk.jit(step)(w, x, y)
    np.testing.assert_allclose(w1, w2, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(l1, l2, rtol=1e-13)
    assert "reduce over dimension(s) [0] split over 'data'" in lowered.report()


def test_column_parallel_output_stays_split_and_is_assembled_whole():
    mesh = _mesh((2, "model"))
    S = _sharding(mesh)
    x, w = rng.standard_normal((4, 6)), rng.standard_normal((6, 8))
    f = tk.jit(lambda x, w: np.tanh(x @ w), in_shardings=(S(), S(None, "model")))
    lowered = f.lower(x, w)
    assert lowered.collectives() == [] and lowered.out_specs == (((), ("model",)),)
    # (a block's product is another BLAS call than the whole one: the last bit may differ, and
    # a small result after cancellation shows it relatively)
    np.testing.assert_allclose(f(x, w), np.tanh(x @ w), rtol=1e-14, atol=1e-14)


def test_a_2x2_mesh_splits_data_and_model_at_once():
    mesh = _mesh((2, "data"), (2, "model"))
    S = _sharding(mesh)

    def layer(x, w1, w2):
        return (np.maximum(x @ w1, 0) @ w2).sum(axis=1)

    x, w1, w2 = (rng.standard_normal(s) for s in [(8, 4), (4, 6), (6, 4)])
    f = tk.jit(layer, in_shardings=(S("data"), S(None, "model"), S("model")), out_shardings=S())
    lowered = f.lower(x, w1, w2)
    groups = [c.split(" over ")[1] for c in lowered.collectives()]
    # the matmul's partial sums meet along 'model' (devices {0,1} and {2,3}); the batch's
    # blocks are gathered along 'data' for the replicated result
    assert "{{0,1},{2,3}}" in groups and "{{0,2},{1,3}}" in groups
    np.testing.assert_allclose(f(x, w1, w2), layer(x, w1, w2), rtol=1e-13)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.float32])
def test_integer_and_max_reductions_are_bit_equal(dtype):
    mesh = _mesh((4, "x"))
    S = _sharding(mesh)
    a = rng.integers(0, 100, (8, 6)).astype(dtype)

    def f(a):
        return a.sum(axis=0), a.max(axis=0), a.min(), (a * 3).sum(axis=1)

    got = tk.jit(f, in_shardings=S("x"))(a)
    for g, w in zip(got, f(a)):
        assert g.dtype == w.dtype and g.shape == w.shape
        if np.issubdtype(dtype, np.integer):
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-6)


def test_negative_zero_sums_keep_numpys_sign():
    mesh = _mesh((4, "x"))
    a = np.full(8, -0.0)
    got = tk.jit(lambda a: a.sum(), in_shardings=tk.NamedSharding(mesh, tk.P("x")))(a)
    assert got == 0 and np.signbit(got) == np.signbit(np.sum(a))


def test_reshape_keeps_a_major_split_and_gathers_a_minor_one():
    mesh = _mesh((2, "x"))
    S = _sharding(mesh)
    a = rng.standard_normal((4, 3, 5))
    major = tk.jit(lambda a: (a.reshape(12, 5) * 2), in_shardings=S("x"))
    assert major.lower(a).collectives() == []
    np.testing.assert_array_equal(major(a), a.reshape(12, 5) * 2)
    minor = tk.jit(lambda a: (a.reshape(4, 15) + 1), in_shardings=S(None, None, None))
    np.testing.assert_array_equal(minor(a), a.reshape(4, 15) + 1)
    b = rng.standard_normal((4, 6))
    split_minor = tk.jit(lambda b: b.reshape(24) + 1, in_shardings=S(None, "x"))
    assert _opcodes(split_minor.lower(b)) == ["all-gather"]
    np.testing.assert_array_equal(split_minor(b), b.reshape(24) + 1)


def test_ops_without_a_split_rule_run_on_gathered_operands_and_say_so():
    mesh = _mesh((4, "x"))
    S = _sharding(mesh)
    a = rng.standard_normal((8, 3))
    idx = np.array([7, 0, 3, 3])

    def f(a, idx):
        return np.sort(a, axis=0), np.cumsum(a, axis=0), a[idx], np.sort(a, axis=1)

    sharded = tk.jit(f, in_shardings=(S("x"), S()))
    for g, w in zip(sharded(a, idx), f(a, idx)):
        np.testing.assert_allclose(g, w, rtol=1e-14)
    lowered = sharded.lower(a, idx)
    # a is gathered once, though the sort, the scan (a reduce-window along the split axis) and
    # the gather want it whole, and the report says why
    text = lowered.as_text(metadata=False)
    assert text.count("all-gather(%a.") == 1 and text.count("all-gather(") == 1
    report = lowered.report()
    assert re.search(r"%sort\.\d+ \(", report) and "is gathered (replicated is needed)" in report


def test_transposes_slices_and_concatenation_keep_untouched_splits():
    mesh = _mesh((2, "x"))
    S = _sharding(mesh)
    a = rng.standard_normal((6, 4))

    def f(a):
        return np.concatenate([a[:, 1:], a[:, :1]], axis=1).T * 2, np.pad(a, ((0, 0), (1, 2)))

    sharded = tk.jit(f, in_shardings=S("x"))
    assert sharded.lower(a).collectives() == []
    for g, w in zip(sharded(a), f(a)):
        np.testing.assert_array_equal(g, w)


def test_out_shardings_split_a_replicated_result_by_slicing_locally():
    """The output's sharding is carried back to the ops that make it (XLA's propagation): the
    whole argument is sliced and exp runs on each device's block, not on the whole array."""
    mesh = _mesh((4, "x"))
    S = _sharding(mesh)
    a = rng.standard_normal((8, 3))
    f = tk.jit(lambda a: np.exp(a) * 2 + a.T.sum(), in_shardings=S(), out_shardings=S("x"))
    lowered = f.lower(a)
    text = lowered.as_text(metadata=False)
    assert lowered.collectives() == [] and "dynamic-slice" in text
    assert "f64[2,3]{1,0} exponential(" in text and "f64[8,3]{1,0} exponential(" not in text
    np.testing.assert_allclose(f(a), np.exp(a) * 2 + a.T.sum(), rtol=1e-15)


def test_pytrees_of_parameters_take_pytrees_of_shardings():
    mesh = _mesh((2, "model"))
    S = _sharding(mesh)
    params = {"w1": rng.standard_normal((4, 6)), "w2": rng.standard_normal((6, 4))}
    x = rng.standard_normal((3, 4))

    def f(params, x):
        return {"y": np.tanh(x @ params["w1"]) @ params["w2"]}

    sharded = tk.jit(f, in_shardings=({"w1": S(None, "model"), "w2": S("model")}, S()))
    np.testing.assert_allclose(sharded(params, x)["y"], f(params, x)["y"], rtol=1e-13)


def test_bad_shardings_name_the_argument_the_axis_and_the_dimension():
    mesh = _mesh((4, "x"))
    S = _sharding(mesh)
    with pytest.raises(PartitionError, match=r"argument .*dimension 0 .*f64\[6,2\].* 4 equal"):
        tk.jit(lambda a: a + 1, in_shardings=S("x"))(np.ones((6, 2)))
    with pytest.raises(PartitionError, match="axis 'y', which the mesh"):
        tk.jit(lambda a: a + 1, in_shardings=S("y"))(np.ones((4, 2)))
    with pytest.raises(PartitionError, match="names 3 dimensions of a 2-d array"):
        tk.jit(lambda a: a + 1, in_shardings=S("x", None, None))(np.ones((4, 2)))
    with pytest.raises(ValueError, match="in_shardings has 1 entries for 2"):
        tk.jit(lambda a, b: a + b, in_shardings=(S("x"),))(np.ones(4), np.ones(4))
    other = _sharding(_mesh((2, "x")))
    with pytest.raises(ValueError, match="more than one mesh"):
        tk.jit(lambda a, b: a + b, in_shardings=(S("x"), other()))


def test_a_program_with_collectives_is_not_partitioned_again():
    mesh = _mesh((2, "x"))
    inner = tk.shard_map(lambda a: tk.lax.psum(a, "x"), mesh, in_specs=tk.P("x"),
                         out_specs=tk.P())
    with pytest.raises(Exception):
        tk.jit(inner, in_shardings=tk.NamedSharding(mesh, tk.P("x")))(np.ones(4))


def test_xla_sharding_text():
    mesh = MeshShape(("data", "model"), (2, 4))
    assert xla_sharding(replicated(2), mesh) == "{replicated}"
    assert xla_sharding((("data",), ("model",)), mesh) == "{devices=[2,4]<=[8]}"
    assert xla_sharding((("model",), ("data",)), mesh) == "{devices=[4,2]<=[2,4]T(1,0)}"
    assert xla_sharding((("data",), ()), mesh) == \
        "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"
    assert xla_sharding(((), ("data",)), mesh) == \
        "{devices=[1,2,4]<=[8] last_tile_dim_replicate}"


# ----------------------------------------------------------------------- random programs
_UNARY = [np.tanh, np.exp, np.negative, np.abs]
_MESHES = [((4,), ("x",)), ((2, 2), ("x", "y")), ((2,), ("x",))]


@st.composite
def _programs(draw):
    mesh_shape, names = draw(st.sampled_from(_MESHES))
    mesh = tk.Mesh(mesh_shape, names)
    rows, cols, inner = 4 * draw(st.integers(1, 2)), 4, 4 * draw(st.integers(1, 2))
    axes = [None, *names]

    def spec(ndim):
        chosen = [draw(st.sampled_from(axes)) for _ in range(ndim)]
        for d in range(ndim):  # an axis once
            if chosen[d] is not None and chosen[d] in chosen[:d]:
                chosen[d] = None
        return tk.P(*chosen)

    steps = draw(st.lists(st.sampled_from(["unary", "add_row", "dot", "sum0", "sum1", "T",
                                           "max1", "reshape", "slice", "concat", "pad",
                                           "where", "cumsum", "sort", "flip", "int"]),
                          min_size=1, max_size=6))
    unaries = [draw(st.sampled_from(_UNARY)) for _ in steps]
    specs = (spec(2), spec(1), spec(2))
    out_spec = draw(st.sampled_from([None, "replicated", "first"]))
    return mesh, (rows, cols, inner), steps, unaries, specs, out_spec


def _run_steps(a, row, w, steps, unaries):
    for step, unary in zip(steps, unaries):
        if a.ndim == 1:
            a = a[:, None] * np.ones((1, 4))
        if step == "unary":
            a = unary(a)
        elif step == "add_row" and a.shape[1] == row.shape[0]:
            a = a + row
        elif step == "dot" and a.shape[1] == w.shape[0]:
            a = a @ w
        elif step == "sum0":
            a = a.sum(axis=0)
        elif step == "sum1":
            a = a.sum(axis=1)
        elif step == "max1":
            a = a.max(axis=1, keepdims=True) - a
        elif step == "T":
            a = a.T
        elif step == "reshape" and a.size % 4 == 0:
            a = a.reshape(-1, 4) * 0.5
        elif step == "slice":
            a = a[1:, ::2]
        elif step == "concat":
            a = np.concatenate([a, a[:, :1] * 2], axis=1)
        elif step == "pad":
            a = np.pad(a, ((0, 0), (1, 2)), constant_values=0.5)
        elif step == "where":
            a = np.where(a > 0, a, -a * 0.5)
        elif step == "cumsum":
            a = np.cumsum(a, axis=0)
        elif step == "sort":
            a = np.sort(a, axis=1)
        elif step == "flip":
            a = a[::-1]
        elif step == "int":
            a = (a * 4).astype(np.int64) // 3 * 1.5
    return a


@settings(max_examples=25, deadline=None)
@given(_programs())
def test_random_programs_equal_numpy_under_random_shardings(program):
    mesh, (rows, cols, inner), steps, unaries, specs, out_spec = program
    a = rng.standard_normal((rows, cols))
    row = rng.standard_normal(cols)
    w = rng.standard_normal((cols, inner))

    def f(a, row, w):
        return _run_steps(a, row, w, steps, unaries)

    want = f(a, row, w)
    outs = {None: None, "replicated": tk.NamedSharding(mesh, tk.P()),
            "first": tk.NamedSharding(mesh, tk.P(mesh.axis_names[0]))}
    out = outs[out_spec]
    if out is not None and out_spec == "first" and (want.ndim == 0 or want.shape[0] %
                                                     mesh.shape[mesh.axis_names[0]]):
        out = None
    shardings = tuple(tk.NamedSharding(mesh, s) for s in specs)
    try:
        got = tk.jit(f, in_shardings=shardings, out_shardings=out, backend="interpreter")(
            a, row, w)
    except PartitionError as e:  # only an indivisible split may refuse
        assert "equal blocks" in str(e)
        return
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def _all_reduces(compiled_program):
    return [i for i in compiled_program.optimized_hlo.entry.instructions
            if i.opcode == "all-reduce"]


def test_independent_all_reduces_meet_once_as_xlas_combiner_makes_them():
    mesh = _mesh((4, "data"))
    S = _sharding(mesh)

    def loss(w, b, x, y):
        return np.mean((np.tanh(x @ w + b) - y) ** 2)

    def step(w, b, x, y):
        gw, gb = tk.grad(loss, argnums=(0, 1))(w, b, x, y)
        return w - 0.1 * gw, b - 0.1 * gb, loss(w, b, x, y)

    w, b = rng.standard_normal((8, 3)), rng.standard_normal(3)
    x, y = rng.standard_normal((32, 8)), rng.standard_normal((32, 3))
    f = tk.jit(step, in_shardings=(S(), S(), S("data"), S("data")))
    got = f(w, b, x, y)
    assert len(f.lower(w, b, x, y).collectives()) == 3  # the partitioner's: gw, gb, the loss
    (compiled,) = [entry[1] for entry in f._programs.values()]
    (combined,) = _all_reduces(compiled)  # one meeting: 24 + 3 + 1 elements
    assert combined.shape.dims == (28,)
    (decision,) = [d for d in compiled.fusion_decisions if d.reason == "ALL_REDUCES_COMBINED"]
    assert "3 all-reduces" in decision.message
    for g, want in zip(got, tk.jit(step)(w, b, x, y)):
        np.testing.assert_allclose(g, want, rtol=1e-13, atol=1e-15)


def test_dependent_or_differently_grouped_all_reduces_stay_apart():
    mesh = _mesh((2, "data"), (2, "model"))

    def f(a):
        twice = tk.lax.psum(tk.lax.psum(a, "data") * 2, "data")  # the second reads the first
        return twice, tk.lax.psum(a, "model"), tk.lax.psum(a.astype(np.float32), "data")

    g = tk.shard_map(f, mesh, in_specs=tk.P("data", "model"),
                     out_specs=(tk.P(None, "model"), tk.P("data"), tk.P(None, "model")))
    a = rng.standard_normal((4, 4))
    got = g(a)
    (compiled,) = g.compiled_programs()
    # float64 over 'data' (twice: one depends on the other), over 'model', float32 over 'data'
    assert len(_all_reduces(compiled)) == 4
    blocks = a.reshape(2, 2, 2, 2).transpose(0, 2, 1, 3)  # [data, model, rows, cols]
    np.testing.assert_allclose(got[0], np.concatenate(list(blocks.sum(0) * 2 * 2), axis=1))
    np.testing.assert_allclose(got[2], np.concatenate(list(blocks.sum(0)), axis=1), rtol=1e-6)


def test_arguments_written_in_place_are_written_once_with_numpys_values():
    """A function that writes its argument, replicated or split: the caller's array receives
    the whole new value once, as NumPy's call leaves it (each device's program gets its own
    copy of an argument it may write in place)."""
    mesh = _mesh((4, "x"))
    S = _sharding(mesh)

    def f(a, b):  # (writes a donated argument's window in place: XLA's must-alias)
        a[0] = a[0] + b.sum()
        a[1] = a[0] * 2
        return a[2:].sum()

    for spec in (S(), S("x")):
        a, want_a = np.arange(8.0), np.arange(8.0)
        want = f(want_a, np.ones(4))
        got = tk.jit(f, in_shardings=(spec, S("x")))(a, np.ones(4))
        assert got == want
        np.testing.assert_array_equal(a, want_a)


@pytest.mark.parametrize("backend", ["cpu", "interpreter", "gpu-simulated"])
def test_partitioned_programs_run_on_every_backend(backend):
    """The per-device program is compiled by the backend asked for (on the GPU its collectives
    run on the host between copies); the results are NumPy's."""
    mesh = _mesh((2, "data"), (2, "model"))
    S = _sharding(mesh)

    def layer(x, w1, w2):
        h = np.maximum(x @ w1, 0) @ w2
        return h, (h * h).mean()

    x, w1, w2 = (rng.standard_normal(s) for s in [(8, 4), (4, 6), (6, 4)])
    f = tk.jit(layer, in_shardings=(S("data"), S(None, "model"), S("model")), backend=backend)
    for got, want in zip(f(x, w1, w2), layer(x, w1, w2)):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-13, atol=1e-15)


def test_jit_options_the_partitioned_path_lacks_are_errors_and_cache_size_is_kept():
    mesh = _mesh((2, "x"))
    S = _sharding(mesh)
    for option in (dict(dump_passes="fusion"), dict(on_recompile="error"),
                   dict(max_recompiles=0)):
        with pytest.raises(NotImplementedError, match=f"{next(iter(option))} with in_shardings"):
            tk.jit(lambda a: a + 1, in_shardings=S("x"), **option)
    f = tk.jit(lambda a: a + 1, in_shardings=S("x"), cache_size=1)
    for n in (2, 4, 2):
        np.testing.assert_array_equal(f(np.ones(n)), np.full(n, 2.0))
    assert len(f._programs) == 1
