"""XLA's collectives in the IR (ir/collectives.py): parsed and printed in XLA's syntax, shapes
checked as XLA's verifier checks them, run on the reference interpreter with one thread per
device (tk.hlo.run_spmd), against XLA's documented examples, hand-written NumPy, and programs
that JAX's shard_map and XLA's SPMD partitioner compiled (tests/data/jax_spmd)."""
import pathlib
import time

import numpy as np
import pytest

import toolkit as tk
from toolkit.ir.collectives import CollectiveError, device_groups, iota_groups
from toolkit.ir.shape_inference import ShapeError
from toolkit.passes.cost_analysis import cost_analysis

DATA = pathlib.Path(__file__).parent / "data" / "jax_spmd"

ADD = """add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""


def _module(body: str, header: str = "", param: str = "f32[8]") -> tk.hlo.Module:
    return tk.hlo.parse(f"HloModule m{header}\n{ADD}ENTRY e {{\n  p = {param} parameter(0)\n"
                        f"{body}\n}}\n")


def _spmd(module, per_device, **counts):
    return tk.hlo.run_spmd(module, [[a] for a in per_device], **counts)


def test_every_collective_prints_as_it_parses():
    module = _module(
        "  ar = f32[8] all-reduce(p), replica_groups={{0,1},{2,3}}, to_apply=add\n"
        "  ag = f32[16] all-gather(p), channel_id=1, replica_groups=[2,2]<=[4], "
        "use_global_device_ids=true, dimensions={0}\n"
        "  rs = f32[4] reduce-scatter(p), channel_id=2, replica_groups={{0,1},{2,3}}, "
        "dimensions={0}, to_apply=add\n"
        "  a2a = f32[8] all-to-all(p), replica_groups={}, dimensions={0}\n"
        "  cp = f32[8] collective-permute(p), channel_id=3, source_target_pairs={{0,1},{1,0}}\n"
        "  r = u32[] replica-id()\n  q = u32[] partition-id()\n"
        "  ROOT t = (f32[8], f32[16], f32[4], f32[8], f32[8], u32[], u32[]) "
        "tuple(ar, ag, rs, a2a, cp, r, q)", ", replica_count=4")
    text = module.to_text(metadata=False)
    for line in (
        "%ar = f32[8]{0} all-reduce(%p), replica_groups={{0,1},{2,3}}, to_apply=%add",
        "%ag = f32[16]{0} all-gather(%p), channel_id=1, replica_groups={{0,1},{2,3}}, "
        "use_global_device_ids=true, dimensions={0}",
        "%rs = f32[4]{0} reduce-scatter(%p), channel_id=2, replica_groups={{0,1},{2,3}}, "
        "dimensions={0}, to_apply=%add",
        "%a2a = f32[8]{0} all-to-all(%p), replica_groups={}, dimensions={0}",
        "%cp = f32[8]{0} collective-permute(%p), channel_id=3, source_target_pairs={{0,1},{1,0}}",
        "%r = u32[] replica-id()", "%q = u32[] partition-id()",
    ):
        assert line in text, line
    assert tk.hlo.parse(text).to_text(metadata=False) == text


def test_iota_replica_groups_expand_as_xla_defines_them():
    assert iota_groups((2, 10), (20,)) == (tuple(range(10)), tuple(range(10, 20)))
    # [3,10]<=[6,5]T(1,0): 0..29 as 6x5, transposed to 5x6, read as 3 groups of 10
    groups = iota_groups((3, 10), (6, 5), (1, 0))
    assert groups[0] == (0, 5, 10, 15, 20, 25, 1, 6, 11, 16)
    assert sorted(i for g in groups for i in g) == list(range(30))
    with pytest.raises(tk.hlo.HloParseError, match="hold 8 ids but the iota has 6"):
        _module("  ROOT ar = f32[8] all-reduce(p), replica_groups=[2,4]<=[6], to_apply=add")


@pytest.mark.parametrize("body,message", [
    ("all-reduce(p), replica_groups={{0,1}}, use_global_device_ids=true, to_apply=add",
     "use_global_device_ids needs a channel_id"),
    ("all-reduce(p), channel_id=1, replica_groups={}, use_global_device_ids=true, to_apply=add",
     "replica groups must be specified in flattened-id mode"),
    ("reduce-scatter(p), replica_groups={{0,1},{2}}, dimensions={0}, to_apply=add",
     "must be of one size"),
    ("all-reduce(p), replica_groups={{0,1},{1,2}}, to_apply=add", "repeat an id"),
    ("collective-permute(p), source_target_pairs={{0,1},{2,1}}", "a source or a target repeats"),
])
def test_malformed_collectives_are_rejected_as_xla_rejects_them(body, message):
    with pytest.raises((tk.hlo.HloParseError, tk.hlo.VerificationError, ShapeError),
                       match=message):
        _module(f"  ROOT r = f32[8] {body}")


def test_shapes_grow_and_shrink_by_the_group_size():
    with pytest.raises(Exception, match=r"declared result f32\[8\] but operands give f32\[16\]"):
        _module("  ROOT r = f32[8] all-gather(p), replica_groups={{0,1}}, dimensions={0}")
    with pytest.raises(Exception, match="does not split into 3 equal blocks"):
        _module("  ROOT r = f32[2] reduce-scatter(p), replica_groups={{0,1,2}}, dimensions={0}, "
                "to_apply=add")


def test_xla_documented_examples():
    """operation_semantics.md: AllGather [1.0, 2.5] and [3.0, 5.25] -> both get the four
    values; ReduceScatter [1.0, 2.25] and [3.0, 5.25] -> [4.0] and [7.5]."""
    gather = _module("  ROOT r = f32[4] all-gather(p), replica_groups={}, dimensions={0}",
                     param="f32[2]")
    values = [np.array([1.0, 2.5], np.float32), np.array([3.0, 5.25], np.float32)]
    for (out,) in _spmd(gather, values, replicas=2):
        np.testing.assert_array_equal(out, [1.0, 2.5, 3.0, 5.25])
    scatter = _module("  ROOT r = f32[1] reduce-scatter(p), replica_groups={}, dimensions={0}, "
                      "to_apply=add", param="f32[2]")
    values = [np.array([1.0, 2.25], np.float32), np.array([3.0, 5.25], np.float32)]
    assert [out[0].tolist() for out in _spmd(scatter, values, replicas=2)] == [[4.0], [7.5]]


def test_every_collective_matches_numpy_on_four_devices():
    module = _module(
        "  ar = f32[8] all-reduce(p), replica_groups={{0,2},{1,3}}, to_apply=add\n"
        "  a2a = f32[8] all-to-all(p), replica_groups={}, dimensions={0}\n"
        "  cp = f32[8] collective-permute(p), source_target_pairs={{0,1},{1,2},{2,3}}\n"
        "  r = u32[] replica-id()\n"
        "  ROOT t = (f32[8], f32[8], f32[8], u32[]) tuple(ar, a2a, cp, r)")
    x = [np.arange(8, dtype=np.float32) * (d + 1) + d for d in range(4)]
    out = _spmd(module, x, replicas=4)
    for d, (ar, a2a, cp, r) in enumerate(out):
        np.testing.assert_array_equal(ar, x[d % 2] + x[d % 2 + 2])
        np.testing.assert_array_equal(a2a, np.concatenate([v[2 * d:2 * d + 2] for v in x]))
        np.testing.assert_array_equal(cp, x[d - 1] if d else np.zeros(8, np.float32))
        assert r == d and r.dtype == np.uint32


def test_group_modes_over_replicas_and_partitions():
    """2 replicas x 2 partitions (device = replica * 2 + partition)."""
    assert device_groups("all-reduce", {}, 2, 2) == [(0, 2), (1, 3)]  # cross-replica
    assert device_groups("all-reduce", {"channel_id": 1}, 2, 2) == [(0, 1), (2, 3)]
    assert device_groups("all-reduce", {"channel_id": 1, "use_global_device_ids": False,
                                        "replica_groups": ((0, 1),)}, 2, 2) == [(0, 1, 2, 3)]
    assert device_groups("all-reduce", {"channel_id": 1, "use_global_device_ids": True,
                                        "replica_groups": ((0, 3), (1, 2))}, 2, 2) == [
        (0, 3), (1, 2)]
    ids = _module("  r = u32[] replica-id()\n  q = u32[] partition-id()\n"
                  "  ROOT t = (u32[], u32[]) tuple(r, q)", ", replica_count=2, num_partitions=2")
    assert [(int(r), int(q)) for r, q in _spmd(ids, [np.zeros(8, np.float32)] * 4)] == [
        (0, 0), (0, 1), (1, 0), (1, 1)]


def test_a_device_that_never_arrives_is_an_error_naming_it():
    """A loop whose trip count is the replica id: device 3 reaches a fourth all-reduce no
    other device runs (XLA: it 'will wait forever'); here it stops after the timeout."""
    module = tk.hlo.parse("HloModule loop\n" + ADD + """
cond {
  s = (f32[8], u32[]) parameter(0)
  i = u32[] get-tuple-element(s), index=1
  r = u32[] replica-id()
  ROOT lt = pred[] compare(i, r), direction=LT
}
body {
  s = (f32[8], u32[]) parameter(0)
  x = f32[8] get-tuple-element(s), index=0
  i = u32[] get-tuple-element(s), index=1
  one = u32[] constant(1)
  j = u32[] add(i, one)
  y = f32[8] all-reduce(x), replica_groups={}, to_apply=add
  ROOT t = (f32[8], u32[]) tuple(y, j)
}
ENTRY e {
  p = f32[8] parameter(0)
  zero = u32[] constant(0)
  init = (f32[8], u32[]) tuple(p, zero)
  ROOT w = (f32[8], u32[]) while(init), condition=cond, body=body
}
""")
    start = time.monotonic()
    with pytest.raises(CollectiveError, match=r"all-reduce %y: device\(s\) \[0\] did not arrive "
                                              r"within 0.5 s"):
        _spmd(module, [np.ones(8, np.float32)] * 4, replicas=4, timeout=0.5)
    assert time.monotonic() - start < 10


def test_a_device_that_fails_stops_the_others_at_once(monkeypatch):
    from toolkit.ir import collectives, evaluator

    negate = evaluator.EVALUATORS["negate"]

    def failing(inst, args):
        if collectives._CONTEXT.device == 2:
            raise FloatingPointError("device 2's own failure")
        return negate(inst, args)

    monkeypatch.setitem(evaluator.EVALUATORS, "negate", failing)
    module = _module("  n = f32[8] negate(p)\n"
                     "  ROOT ar = f32[8] all-reduce(n), replica_groups={}, to_apply=add")
    start = time.monotonic()
    with pytest.raises(CollectiveError, match="device 2 failed: RuntimeError: .*device 2's own "
                                              "failure"):
        _spmd(module, [np.ones(8, np.float32)] * 4, replicas=4, timeout=30)
    assert time.monotonic() - start < 5  # not the 30 s timeout


def test_arguments_for_the_wrong_number_of_devices_are_refused():
    module = _module("  ROOT ar = f32[8] all-reduce(p), replica_groups={}, to_apply=add",
                     ", replica_count=4")
    with pytest.raises(ValueError, match=r"runs on 4 devices \(4 replica\(s\) x 1 partition"):
        _spmd(module, [np.ones(8, np.float32)] * 3)
    with pytest.raises(ValueError, match="its collectives combine their values: run it with "
                                         "tk.hlo.run_spmd"):
        tk.hlo.run(module, np.ones(8, np.float32))  # one device cannot run a 4-device program
    pairs = _module("  ROOT ar = f32[8] all-reduce(p), replica_groups={{0,1},{2,3}}, "
                    "to_apply=add")
    with pytest.raises(CollectiveError, match="replica group id 1 is not one of the 1 ids"):
        tk.hlo.run(pairs, np.ones(8, np.float32))


def test_cost_analysis_counts_xlas_collective_costs():
    module = _module("  ROOT ar = f32[8] all-reduce(p), replica_groups={}, to_apply=add")
    cost = cost_analysis(module)
    assert cost["flops"] == 8 and cost["bytes accessed"] == 64


@pytest.mark.parametrize("backend", ["cpu", "gpu-simulated"])
def test_compiling_backends_run_collectives_between_their_kernels(backend):
    module = _module("  n = f32[8] negate(p)\n"
                     "  ROOT ar = f32[8] all-reduce(n), replica_groups={}, to_apply=add")
    np.testing.assert_array_equal(tk.hlo.run(module, np.ones(8, np.float32), backend=backend)[0],
                                  -np.ones(8, np.float32))


@pytest.mark.parametrize("text", [
    "all-to-all(p), dimensions={0}",
    "all-reduce(p), to_apply=%add",
    "all-gather(p), dimensions={0}",
    "collective-permute(p), source_target_pairs={{0,1},{1,2},{2,3},{3,0}}",
    "reduce-scatter(p), dimensions={0}, to_apply=%add",
])
@pytest.mark.parametrize("n", [8, 32768])  # a small meeting (one device makes every result)
def test_results_written_into_buffers_that_are_the_operands_are_right(text, n):  # and a big one
    """A compiled program may hand a collective the buffer of its own operand for the result
    (the operand is dead after it). Every device's result is made before any is written, so
    no peer reads an operand already overwritten; and no device's result is another's."""
    import threading

    from toolkit.ir.collectives import DeviceRun, on_device
    from toolkit.ir.evaluator import collective_into

    size = 4 * n if "gather" in text else n // 4 if "scatter" in text else n
    grouped = "" if "permute" in text else \
        ", replica_groups={{0,1,2,3}}, use_global_device_ids=true"
    module = tk.hlo.parse(
        "HloModule m, num_partitions=4\n"
        "%add (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n"
        "  %b = f32[] parameter(1)\n  ROOT %s = f32[] add(%a, %b)\n}\n"
        f"ENTRY %e (p: f32[{n}]) -> f32[{size}] {{\n  %p = f32[{n}]{{0}} parameter(0)\n"
        f"  ROOT %c = f32[{size}]{{0}} {text.replace('(p)', '(%p)')}, channel_id=1{grouped}\n}}")
    inst = module.entry.root
    operands = [np.arange(n, dtype=np.float32) * (d + 1) for d in range(4)]
    want = [o[0] for o in tk.hlo.run_spmd(module, [[o.copy()] for o in operands])]
    run = DeviceRun(1, 4, timeout=10)
    got = [None] * 4
    def device(d):  # the result's buffer is (the start of) the device's own operand, if it fits
        with on_device(run, d):
            buffer = operands[d][:size] if size <= n else np.empty(inst.shape.dims, np.float32)
            got[d] = collective_into(inst, [operands[d]], buffer)
            assert got[d] is buffer
    threads = [threading.Thread(target=device, args=(d,)) for d in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for d in range(4):
        np.testing.assert_array_equal(got[d], want[d])
    got[0][...] = -1  # private: writing one device's result changes no other's
    assert all((got[d] != -1).all() for d in range(1, 4))


def _all_reduce_on_threads(n: int, dtype, reducer: str, groups: str, operands, buffers):
    """Every device's all-reduce result, run as the compiled programs run it (on threads, each
    writing into the buffer it is given)."""
    t = {np.float32: "f32", np.float64: "f64", np.int32: "s32"}[dtype]
    module = tk.hlo.parse(
        "HloModule m, num_partitions=4\n"
        f"%red (a: {t}[], b: {t}[]) -> {t}[] {{\n  %a = {t}[] parameter(0)\n"
        f"  %b = {t}[] parameter(1)\n  ROOT %s = {t}[] {reducer}(%a, %b)\n}}\n"
        f"ENTRY %e (p: {t}[{n}]) -> {t}[{n}] {{\n  %p = {t}[{n}]{{0}} parameter(0)\n"
        f"  ROOT %c = {t}[{n}]{{0}} all-reduce(%p), channel_id=1, replica_groups={groups}, "
        "use_global_device_ids=true, to_apply=%red\n}")
    got = _on_device_threads(module.entry.root, operands, buffers)
    for d in range(4):
        assert buffers[d] is None or got[d] is buffers[d]
    return got


def _on_device_threads(inst, operands, buffers):
    """The collective ``inst`` on 4 devices, one thread each, as the compiled programs run it:
    device d's operand ``operands[d]``, its result written into ``buffers[d]`` (None: a new
    array). Every device's result."""
    import threading

    from toolkit.ir.collectives import DeviceRun, on_device
    from toolkit.ir.evaluator import collective_into

    run = DeviceRun(1, 4, timeout=10)
    got = [None] * 4

    def device(d):
        with on_device(run, d):
            got[d] = collective_into(inst, [operands[d]], buffers[d])

    threads = [threading.Thread(target=device, args=(d,)) for d in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return got


@pytest.mark.parametrize("dtype,reducer", [(np.float32, "add"), (np.float64, "add"),
                                           (np.int32, "maximum"), (np.int32, "add")])
@pytest.mark.parametrize("where", ["new", "own operand", "own buffer"])
def test_a_large_all_reduce_shares_the_work_and_gives_numpys_bits(dtype, reducer, where,
                                                                  monkeypatch):
    """A large all-reduce on host devices is a reduce-scatter and an all-gather in shared
    memory: each device folds a chunk and writes it into every device's buffer. Each element
    is folded in group order, as one device folding everything would: NumPy's bits, for an
    odd length (unequal chunks, several cache blocks each) and groups of two."""
    from toolkit.ir import collectives

    chunks = []
    real = collectives._reduce_chunk
    monkeypatch.setattr(collectives, "_reduce_chunk", lambda *a: chunks.append(1) or real(*a))
    n = 3 * (collectives.CHUNK_BLOCK_BYTES // 4) + 7
    rng = np.random.default_rng(3)
    operands = [(rng.standard_normal(n) * 10.0 ** rng.integers(-6, 6, n)).astype(dtype)
                if dtype != np.int32 else rng.integers(-2 ** 31, 2 ** 31 - 1, n, dtype)
                for _ in range(4)]
    ufunc = {"add": np.add, "maximum": np.maximum}[reducer]
    for groups, members in (("{{0,1,2,3}}", [[0, 1, 2, 3]] * 4),
                            ("{{0,2},{1,3}}", [[0, 2], [1, 3], [0, 2], [1, 3]])):
        want = []
        for d in range(4):
            total = operands[members[d][0]].copy()
            for g in members[d][1:]:
                total = ufunc(total, operands[g]).astype(dtype)
            want.append(total)
        given = [o.copy() for o in operands]
        buffers = {"new": [None] * 4, "own operand": given,
                   "own buffer": [np.empty(n, dtype) for _ in range(4)]}[where]
        chunks.clear()
        with np.errstate(over="ignore"):
            got = _all_reduce_on_threads(n, dtype, reducer, groups, given, buffers)
        assert len(chunks) == 4  # every device took its chunk
        for d in range(4):
            assert got[d].dtype == dtype
            np.testing.assert_array_equal(got[d], want[d])
        got[0][...] = 0  # every device's result is its own
        assert all((got[d] != 0).any() for d in range(1, 4))


def test_buffers_that_overlap_a_peers_operand_are_not_chunked():
    """A device's buffer sharing memory with another device's operand would let one device's
    writes reach what a peer still reads: such a meeting is made the unchunked way, and its
    results are still right."""
    from toolkit.ir import collectives

    n = 100_000
    base = np.arange(2 * n, dtype=np.float64)
    operands = [base[:n], base[n:], np.ones(n), np.ones(n)]
    want = operands[0] + operands[1] + 1 + 1
    buffers = [base[n // 2: n // 2 + n], None, None, None]  # overlaps operands 0 and 1
    assert not collectives._chunkable(
        dict(enumerate(operands)), {0: buffers[0], 1: np.empty(n), 2: np.empty(n),
                                    3: np.empty(n)}, (0, 1, 2, 3))
    got = _all_reduce_on_threads(n, np.float64, "add", "{{0,1,2,3}}", operands, buffers)
    for d in range(4):
        np.testing.assert_array_equal(got[d], want)


@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("where", ["new", "own buffer"])
def test_a_large_all_gather_writes_each_block_once_into_every_buffer(dim, where, monkeypatch):
    """A large all-gather on host devices: each device writes its operand into its block of
    every device's buffer (no one concatenation that each device copies), along either
    dimension, for groups of four and of two."""
    from toolkit.ir import collectives

    shares = []
    real = collectives.DeviceRun._share
    monkeypatch.setattr(collectives.DeviceRun, "_share",
                        lambda self, *a: shares.append(1) or real(self, *a))
    shape = (300, 70)
    rng = np.random.default_rng(1)
    operands = [rng.standard_normal(shape) for _ in range(4)]
    for groups, members in (("{{0,1,2,3}}", [[0, 1, 2, 3]] * 4),
                            ("{{0,2},{1,3}}", [[0, 2], [1, 3], [0, 2], [1, 3]])):
        k = len(members[0])
        out_shape = (shape[0] * k, shape[1]) if dim == 0 else (shape[0], shape[1] * k)
        module = _four_device_module("all-gather", shape, out_shape, groups, dim)
        buffers = [None if where == "new" else np.empty(out_shape) for _ in range(4)]
        shares.clear()
        got = _on_device_threads(module.entry.root, operands, buffers)
        assert len(shares) == 4
        for d in range(4):
            want = np.concatenate([operands[g] for g in members[d]], axis=dim)
            np.testing.assert_array_equal(got[d], want)
            assert buffers[d] is None or got[d] is buffers[d]
        got[0][...] = 0
        assert all((got[d] != 0).any() for d in range(1, 4))


def _four_device_module(opcode: str, shape, out_shape, groups: str, dim: int):
    """One f64 2-D collective over 4 partitions, as HLO text parsed."""
    t = f"f64[{shape[0]},{shape[1]}]"
    o = f"f64[{out_shape[0]},{out_shape[1]}]"
    return tk.hlo.parse(
        "HloModule m, num_partitions=4\n"
        f"ENTRY %e (p: {t}) -> {o} {{\n  %p = {t}{{1,0}} parameter(0)\n"
        f"  ROOT %c = {o}{{1,0}} {opcode}(%p), channel_id=1, replica_groups={groups}, "
        f"dimensions={{{dim}}}, use_global_device_ids=true\n}}")


@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("where", ["new", "own buffer"])
def test_a_large_all_to_all_writes_each_block_once_into_its_receivers_buffer(dim, where,
                                                                            monkeypatch):
    """A large all-to-all on host devices: each device writes its operand's block k into the
    k-th device's buffer at its own place (no per-device concatenation of peers' blocks), for
    groups of four and of two, along either dimension."""
    from toolkit.ir import collectives

    writes = []
    real = collectives._exchange_blocks
    monkeypatch.setattr(collectives, "_exchange_blocks", lambda *a: writes.append(1) or real(*a))
    shape = (400, 60)
    rng = np.random.default_rng(4)
    operands = [rng.standard_normal(shape) for _ in range(4)]
    for groups, members in (("{{0,1,2,3}}", [[0, 1, 2, 3]] * 4),
                            ("{{0,2},{1,3}}", [[0, 2], [1, 3], [0, 2], [1, 3]])):
        module = _four_device_module("all-to-all", shape, shape, groups, dim)
        buffers = [None if where == "new" else np.empty(shape) for _ in range(4)]
        writes.clear()
        got = _on_device_threads(module.entry.root, operands, buffers)
        assert len(writes) == 4
        for d in range(4):
            group = members[d]
            k = group.index(d)
            want = np.concatenate([np.split(operands[g], len(group), axis=dim)[k] for g in group],
                                  axis=dim)
            np.testing.assert_array_equal(got[d], want)
            assert buffers[d] is None or got[d] is buffers[d]
