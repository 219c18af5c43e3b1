"""The CPU backend against the reference interpreter: every op over dtypes and awkward shapes,
every fusion kind, random programs, threads, dots, inspection, memory, fallbacks."""
import gc
import pathlib
import re
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import toolkit as tk
from toolkit.backends.cpu import compile_module
from toolkit.backends.reference.interpreter import EVALUATORS
from toolkit.passes.pipeline import make_pipeline

import programs
from backend_checks import assert_close, check_every_binary_ufunc, check_every_unary_ufunc
from helpers import sweep_examples
from test_random_programs import inputs_strategy, run_program, steps_strategy

def both(fn, *args):
    cpu = tk.jit(fn, backend="cpu", on_recompile="ignore")(*args)
    ref = tk.jit(fn, backend="interpreter", on_recompile="ignore")(*args)
    return cpu, ref


@settings(max_examples=sweep_examples(12), deadline=None)
@given(data=st.data())
def test_every_unary_ufunc_matches_the_interpreter(data):
    check_every_unary_ufunc(data, both)


@settings(max_examples=sweep_examples(12), deadline=None)
@given(data=st.data())
def test_every_binary_ufunc_matches_the_interpreter(data):
    check_every_binary_ufunc(data, both)


@pytest.mark.parametrize("name", sorted(programs.make_cases(np.random.default_rng(0))))
def test_programs_match_the_interpreter(name):
    fn, args = programs.make_cases(np.random.default_rng(0))[name]
    assert_close(*both(fn, *args), approx=True)


@pytest.mark.parametrize(
    "shape", [(0,), (1,), (0, 5), (5, 0), (1, 1), (3, 17), (7, 33), (1, 1023), (2, 3, 65)]
)
def test_awkward_shapes_for_every_fusion_kind(shape):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    fns = [lambda a: np.tanh(a * 2 + 1),  # kLoop
           lambda a: np.exp(a - a.max(-1, keepdims=True)) if a.shape[-1] else a,  # kInput row
           lambda a: a.sum(axis=0),  # column reduction
           lambda a: (a.sum(axis=-1), (a * a).sum(axis=-1)),  # sibling multi-output
           lambda a: a.sum()]  # full reduction
    for fn in fns:
        assert_close(*both(fn, x), approx=True)


def test_non_contiguous_inputs():
    base = np.arange(48, dtype=np.float32).reshape(6, 8)
    for view in (base.T, base[::2, 1::3], base[:, ::-1]):
        assert_close(*both(lambda a: a * 2 + 1, view))


def test_threaded_and_single_threaded_results_are_identical(monkeypatch):
    x = np.random.default_rng(2).standard_normal((512, 1024)).astype(np.float32)
    fn = lambda a: (np.tanh(a) * 2, a.sum(axis=1), a.max(), np.exp(a - a.max(-1, keepdims=True)))  # noqa: E731
    c = tk.jit(fn, backend="cpu").lower(x).compile()
    exe = c._executable
    monkeypatch.setattr(exe, "threads", 1)
    single = c(x)
    monkeypatch.setattr(exe, "threads", 4)
    multi = c(x)
    for s, m in zip(single, multi):
        np.testing.assert_array_equal(s, m)  # row splits never reorder a row's sum
    y = np.random.default_rng(3).standard_normal(1 << 20).astype(np.float32)
    total = tk.jit(lambda a: a.sum(), backend="cpu").lower(y).compile()
    monkeypatch.setattr(total._executable, "threads", 1)
    one = total(y)
    monkeypatch.setattr(total._executable, "threads", 4)
    four = total(y)
    np.testing.assert_allclose(one, four, rtol=1e-5)  # partial sums: a documented reassociation
    np.testing.assert_allclose(four, y.astype(np.float64).sum(), rtol=1e-4)


COLUMN_CASES = [
    ((4096, 1024), (0,), np.float32),
    ((1027, 1100), (0,), np.float64),
    ((13, 2000), (0,), np.float32),
    ((0, 3000), (0,), np.float32),
    ((7, 1), (0,), np.float64),
    ((6, 5, 1500), (0, 1), np.float32),
    ((300, 40, 30), (0,), np.float64),
    ((999, 2048), (0,), np.int32),
    ((50, 1200), (0,), np.complex64),
]


@pytest.mark.parametrize("shape, axes, dtype", COLUMN_CASES)
@pytest.mark.parametrize("threads", [1, 3])
def test_column_reductions_equal_numpys_bit_for_bit(shape, axes, dtype, threads, monkeypatch):
    """Sums over leading axes add each column's elements in NumPy's order (row after row, a
    pass of eight rows at a time, no reassociation), whether threads split the columns or not:
    the results are NumPy's exactly, and so are max, min and a fused elementwise producer's."""
    from toolkit.backends.cpu import executor

    monkeypatch.setattr(executor, "PARALLEL_THRESHOLD", 0)
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(shape) * 10.0 ** rng.integers(-6, 7, shape)).astype(dtype)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * x[::-1]
    fns = [lambda a: a.sum(axis=axes), lambda a: (a * 2 - 1).sum(axis=axes)]
    if np.dtype(dtype).kind != "c":
        fns += [
            lambda a: a.max(axis=axes) if a.size else a.sum(axis=axes),
            lambda a: a.min(axis=axes) if a.size else a.sum(axis=axes),
        ]
    for fn in fns:
        c = tk.jit(fn, backend="cpu", on_recompile="ignore").lower(x).compile()
        monkeypatch.setattr(c._executable, "threads", threads)
        got, want = c(x), fn(x)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_column_sums_split_their_columns_over_threads_and_narrow_ones_do_not():
    from toolkit.backends.llvm.planning import plan_kernel

    def spec_of(shape):
        c = (
            tk.jit(lambda a: a.sum(axis=0), backend="cpu", on_recompile="ignore")
            .lower(np.ones(shape, np.float32))
            .compile()
        )
        (reduce,) = [
            i for i in c.optimized_hlo.entry.instructions if i.opcode in ("reduce", "fusion")
        ]
        return plan_kernel(reduce)

    wide, narrow = spec_of((4096, 2048)), spec_of((4096, 8))
    assert (wide.kind, wide.split_dim, wide.extent) == ("general", 1, 2048)
    assert narrow.extent is None  # 32 output bytes: threads would share every cache line


@pytest.mark.parametrize("shape", [(1027, 77), (10, 5000), (3, 37, 100), (9, 3), (4099, 2, 33)])
def test_row_reductions_do_not_depend_on_the_thread_split(shape, monkeypatch):
    """Rows are reduced four at a time; wherever a split or the end of the rows leaves a tile
    short, its spare slots repeat a row, and where the loop also stores (an extra output), the
    vectoriser's overlap check runs such a tile in order. Splits fall on whole tiles, so a
    row's sum is the same on 1, 2, 3 or 4 threads."""
    from toolkit.backends.cpu import executor

    monkeypatch.setattr(executor, "PARALLEL_THRESHOLD", 0)
    x = np.random.default_rng(8).standard_normal(shape).astype(np.float32)
    def fn(a):  # the exp is an extra output of its sum's kernel: stores in the row loop
        e = np.exp(a - a.max(-1, keepdims=True))
        s = e.sum(-1, keepdims=True)
        return e / s, s, (a * a).sum(-1)
    c = tk.jit(fn, backend="cpu", on_recompile="ignore").lower(x).compile()
    results = []
    for threads in (1, 2, 3, 4):
        monkeypatch.setattr(c._executable, "threads", threads)
        results.append(c(x))
    for other in results[1:]:
        for a, b in zip(results[0], other):
            np.testing.assert_array_equal(a, b)
    for got, want in zip(results[0], fn(x)):
        np.testing.assert_allclose(got, want, rtol=2e-6)


def _tanh_chain(v):
    for i in range(6):
        v = np.tanh(v) * (1.0 + 0.01 * i)
    return v


@pytest.mark.parametrize("n", [0, 1, 15, 16, 17, 31, 33, 1000, 4099])
def test_long_loop_bodies_fold_their_tail_and_short_ones_do_not(n):
    """A long body is vectorised with a masked tail (no scalar copy of the body) and two
    vectors in flight; every length, including those shorter than one vector, gives the
    interpreter's results."""
    x = np.random.default_rng(9).standard_normal(n).astype(np.float32)
    long_body = tk.jit(_tanh_chain, backend="cpu", on_recompile="ignore").lower(x).compile()
    short_body = (
        tk.jit(lambda v: v * 2 + 1, backend="cpu", on_recompile="ignore").lower(x).compile()
    )
    if n > 1:  # (one element: no index varies, no vector loop)
        # the tail: masked, in the vector loop
        assert "@llvm.masked.store" in long_body.as_text("llvm")
        # unmasked, a scalar remainder
        assert "@llvm.masked.store" not in short_body.as_text("llvm")
    assert_close(
        long_body(x),
        tk.jit(_tanh_chain, backend="interpreter", on_recompile="ignore")(x),
        approx=True,
    )
    np.testing.assert_array_equal(short_body(x), x * 2 + 1)


def test_long_loop_bodies_over_large_arrays_keep_two_vectors_in_flight():
    """Worth its compile time only where the array is large: one masked vector per iteration
    below INTERLEAVE_ELEMENTS, two above."""
    from toolkit.backends.llvm.loops import INTERLEAVE_ELEMENTS

    stores = []
    for n in (INTERLEAVE_ELEMENTS, INTERLEAVE_ELEMENTS + 1):
        x = np.linspace(-3, 3, n, dtype=np.float32)
        c = tk.jit(_tanh_chain, backend="cpu", on_recompile="ignore").lower(x).compile()
        stores.append(c.as_text("llvm").count("call void @llvm.masked.store"))
        assert_close(
            c(x), tk.jit(_tanh_chain, backend="interpreter", on_recompile="ignore")(x), approx=True
        )
    assert stores == [1, 2]


@settings(max_examples=30, deadline=None)
@given(steps=steps_strategy, data=inputs_strategy(np.float64))
def test_random_programs_match_the_interpreter(steps, data):
    x, y = data
    assert_close(*both(lambda a, b: run_program(steps, a, b), x, y), approx=True)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_dots_are_library_calls(dtype):
    rng = np.random.default_rng(4)
    a = (rng.standard_normal((2, 3, 4)) * 4).astype(dtype)
    b = (rng.standard_normal((2, 4, 5)) * 4).astype(dtype)
    fn = lambda x, y: (x @ y, np.einsum("bij,bkj->bik", x, x), np.tensordot(x, y, axes=([2], [1])))  # noqa: E731
    assert_close(*both(fn, a, b), approx=True)
    c = tk.jit(fn, backend="cpu").lower(a, b).compile()
    assert all(s.kind in ("dot", "kernel") for s in c._executable.steps)
    assert sum(s.kind == "dot" for s in c._executable.steps) == 3


def test_general_reducers_fall_back_to_the_interpreter():
    text = (pathlib.Path(__file__).parent / "data" / "jax" / "argmax.hlo").read_text()
    # inlines JAX's calls
    module = make_pipeline("default", EVALUATORS).run(tk.hlo.parse(text)).module
    exe = compile_module(module)
    assert exe.fallbacks and all("reducer" in f for f in exe.fallbacks)  # variadic argmax reducers
    x = np.random.default_rng(5).standard_normal((6, 9)).astype(np.float32)
    np.testing.assert_array_equal(exe([x])[0], np.argmax(x, axis=1))
    np.testing.assert_array_equal(
        tk.hlo.run(tk.hlo.parse(text), x, backend="cpu")[1], np.argmin(x, axis=0)
    )


def test_inspection_stages():
    c = tk.jit(lambda x: np.tanh(x) + 1, backend="cpu").lower(np.ones(1024, np.float32)).compile()
    llvm = c.as_text("llvm")
    assert (
        "define void @loop_add_fusion" in llvm and "<16 x float>" in llvm or "<8 x float>" in llvm
    )
    asm = c.as_text("asm")
    assert "loop_add_fusion:" in asm and ("zmm" in asm or "ymm" in asm)
    with pytest.raises(ValueError, match="not available on the interpreter backend"):
        tk.jit(lambda x: x, backend="interpreter").lower(np.ones(2)).compile().as_text("llvm")


def test_a_long_complex_loop_kernel_is_vectorised():
    """Rounds of a Mandelbrot iteration fused into one kernel of a long body over complex
    elements: loop-vectorised (no tail folding, which LLVM cannot do for their interleaved
    real and imaginary parts: the loop stayed scalar, 5x slower), and NumPy's numbers."""
    def rounds(z, c):
        for _ in range(4):
            z = np.where(abs(z) < 2.0, z * z + c, z)
        return z

    rng = np.random.default_rng(7)
    c = (rng.uniform(-2, 1, (40, 50)) + 1j * rng.uniform(-1, 1, (40, 50)))
    compiled = tk.jit(rounds, backend="cpu").lower(np.zeros_like(c), c).compile()
    assert [k.opcode for k in compiled.optimized_hlo.entry.instructions].count("fusion") == 1
    assert "predicate.enable" not in compiled.as_text("llvm")
    assert re.search(r"v\w+pd\s.*%[yz]mm", compiled.as_text("asm"))
    np.testing.assert_array_equal(compiled(np.zeros_like(c), c), rounds(np.zeros_like(c), c))


def test_profile_records_cpu_kernels_and_compile_phases():
    f = tk.jit(lambda x: (np.tanh(x) * 2).sum(axis=1), backend="cpu")
    x = np.ones((256, 1024), np.float32)
    with tk.profile() as prof:
        f(x)
        f(x)
    (compile_event,) = prof.compiles
    assert [p.name for p in compile_event.phases] == [
        "trace",
        "passes",
        "llvm_ir",
        "llvm_optimize",
        "machine_code",
    ]
    kernels = prof.kernels
    assert len(kernels) == 2 and all(k.backend == "cpu" for k in kernels)
    assert kernels[0].launch.startswith("threads=") and kernels[0].transcendentals == x.size


def test_no_memory_growth_over_10000_cached_calls():
    f = tk.jit(lambda x: x * 2 + 1, backend="cpu")
    x = np.ones(16, np.float32)
    for _ in range(200):
        f(x)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for _ in range(10_000):
        f(x)
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    growth = sum(s.size_diff for s in after.compare_to(before, "filename"))
    assert growth < 64 * 1024, growth


def test_results_do_not_alias_inputs_or_each_other():
    x = np.ones(8, np.float32)
    a, b, c = tk.jit(lambda v: (v * 1, v * 1, v), backend="cpu")(x)
    a[0] = 5
    assert x[0] == 1 and b[0] == 1
    assert b is not c and c is x  # (the argument handed back is the caller's, as in NumPy)


def test_persistent_cache_hit_corruption_and_foreign_entries(tmp_path, monkeypatch):
    from toolkit.backends import disk_cache

    monkeypatch.setenv("TOOLKIT_CACHE_DIR", str(tmp_path))
    x = np.linspace(-2, 2, 4096).astype(np.float32)

    def fn(v):
        return np.tanh(v) * 3 + 1

    def compile_fresh():
        with tk.profile() as prof:
            out = tk.jit(fn, backend="cpu")(x)  # a new wrapper: nothing cached in memory
        return out, prof.compiles[-1]

    first, event = compile_fresh()
    assert event.cache == "miss" and not event.persistent_cache_hit
    (entry,) = list(tmp_path.rglob("*.o"))
    second, event = compile_fresh()
    assert event.cache == "persistent_hit" and event.persistent_cache_hit
    assert [p.name for p in event.phases][-1] == "cache_load"
    np.testing.assert_array_equal(first, second)

    data = entry.read_bytes()
    entry.write_bytes(data[:-7] + b"garbage")  # a corrupted payload: rebuilt, never run
    third, event = compile_fresh()
    assert event.cache == "miss (unauthenticated cache entry rebuilt)"
    np.testing.assert_array_equal(first, third)
    assert compile_fresh()[1].cache == "persistent_hit"  # the rebuilt entry is good

    header_end = entry.read_bytes().index(b"\n", len(disk_cache.MAGIC))
    payload = entry.read_bytes()[header_end + 1:]
    forged = disk_cache.MAGIC + b'{"key": "someone-else", "hmac": "x", "size": 1}\n' + payload
    entry.write_bytes(forged)
    assert compile_fresh()[1].cache == "miss (foreign cache entry rebuilt)"


def test_persistent_cache_key_changes_with_versions(monkeypatch):
    from toolkit.backends import disk_cache

    host = {"triple": "x86_64", "cpu": "znver4", "features": "+avx2"}
    base = disk_cache.cache_key("HloModule m", host)
    assert base == disk_cache.cache_key("HloModule m", dict(host))
    assert base != disk_cache.cache_key("HloModule m2", host)
    assert base != disk_cache.cache_key("HloModule m", {**host, "features": "+avx512f"})
    monkeypatch.setattr(disk_cache, "_codegen_fingerprint", lambda kind="cpu": "an-edited-emitter")
    assert base != disk_cache.cache_key("HloModule m", host, "gpu")  # each kind its own
    assert base != disk_cache.cache_key("HloModule m", host)
    monkeypatch.setattr(disk_cache, "_versions",
                        lambda kind="cpu": {"toolkit": "9.9", "llvmlite": "0.50.0"})
    assert base != disk_cache.cache_key("HloModule m", host)


def test_persistent_cache_can_be_turned_off(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLKIT_CACHE_DIR", "off")
    tk.jit(lambda v: v * 7, backend="cpu")(np.ones(8, np.float32))
    assert not list(tmp_path.rglob("*.o"))


@pytest.mark.parametrize("backend", ["reference", "cpu"])
@pytest.mark.parametrize("ufunc", [np.sign, np.maximum, np.minimum], ids=lambda u: u.__name__)
def test_signed_zeros_and_nans_match_numpy(ufunc, backend):
    # NumPy: sign(-0.0) is +0.0; maximum/minimum of an equal pair (+0.0, -0.0) give the second
    a = np.array([-0.0, 0.0, -0.0, 0.0, np.nan, 1.0, 2.0, -np.inf], np.float32)
    b = np.array([0.0, -0.0, -0.0, 0.0, 1.0, np.nan, 1.0, np.inf], np.float32)
    args = (a,) if ufunc.nin == 1 else (a, b)
    got, expected = tk.jit(ufunc, backend=backend)(*args), ufunc(*args)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))


@pytest.mark.parametrize("shape, axis", [((1 << 22,), None), ((4, 1 << 20), -1)])
def test_float32_sums_are_as_accurate_as_numpys(shape, axis):
    # one long vectorised accumulation was 3e-4 off on 16M normal values; blocks summed into a
    # float64 running total stay within a few ulp of the exact sum, as NumPy's pairwise sum
    x = np.random.default_rng(6).standard_normal(shape).astype(np.float32) + np.float32(0.1)
    exact = x.astype(np.float64).sum(axis=axis)
    got = tk.jit(lambda v: v.sum(axis=axis), backend="cpu")(x)
    ours = np.max(np.abs(got - exact) / np.abs(exact))
    numpys = np.max(np.abs(x.sum(axis=axis) - exact) / np.abs(exact))
    assert ours <= max(2 * numpys, 5e-8), (ours, numpys)  # the old accumulation: 3e-7
    # the -0.0/+0.0 rules hold: an all -0.0 row with the +0.0 init sums to +0.0, as in XLA
    zeros = np.full(5000, -0.0, np.float32)
    assert not np.signbit(tk.jit(lambda v: v.sum(), backend="cpu")(zeros))


def test_a_full_reduction_with_an_extra_output_is_never_split_over_threads(monkeypatch):
    """Its partial sums would race into one output: it runs on one thread however much work
    it has (a hypothesis example found it with the threshold at 0)."""
    from toolkit.backends.cpu import executor

    monkeypatch.setattr(executor, "PARALLEL_THRESHOLD", 0)
    monkeypatch.setenv("TOOLKIT_NUM_THREADS", "2")
    monkeypatch.setenv("TOOLKIT_CACHE_DIR", "off")
    # exp: an extra output of the sum
    f = tk.jit(lambda b: (-np.exp(b), np.exp(b).sum()), backend="cpu")
    b = np.zeros(1000)
    e, total = f(b)
    assert total == 1000.0 and (e == -1.0).all()


def test_ir_and_assembly_of_a_persistent_cache_hit_are_regenerated(tmp_path, monkeypatch):
    """After a kernel restart the machine code comes from disk; its IR views still show the
    program (the emitters are deterministic), marked as regenerated."""
    monkeypatch.setenv("TOOLKIT_CACHE_DIR", str(tmp_path))
    x = np.linspace(-2, 2, 512).astype(np.float32)

    def fn(v):
        return np.tanh(v) * 3 + v.sum()

    fresh = tk.jit(fn, backend="cpu").lower(x).compile()
    again = tk.jit(fn, backend="cpu").lower(x).compile()  # a new wrapper: the disk cache answers
    assert again._executable.cache_status == "persistent_hit"
    llvm_text, asm = again.as_text("llvm"), again.as_text("asm")
    assert llvm_text.startswith(
        "; regenerated: this machine code was loaded from the persistent compilation cache"
    )
    assert llvm_text.split("\n", 1)[1] == fresh.as_text("llvm")
    assert asm == fresh.as_text("asm") and "ret" in asm


# ---- parallel code generation ---------------------------------------------------------------
def test_kernels_compile_in_parallel_parts_and_link_across_them(monkeypatch, tmp_path):
    """Dealt out to three modules (three threads), the kernels link into one engine: row-group
    drivers call members defined in other parts, the packed objects round-trip through the
    persistent cache, and the results are the interpreter's."""
    import toolkit.backends.cpu as cpu
    from toolkit.backends.cpu import compiler, row_groups

    monkeypatch.setattr(cpu, "_part_count", lambda kernels: 3)
    monkeypatch.setattr(row_groups, "MIN_GROUP_BYTES", 0)
    monkeypatch.setenv("TOOLKIT_CACHE_DIR", str(tmp_path))

    def program(x, y):
        for k in range(6):  # softmax rows (a row group), then a few independent kernels
            e = np.exp(x - x.max(axis=-1, keepdims=True))
            x = e / e.sum(axis=-1, keepdims=True) + y * k
        return x, np.tanh(y).sum(), (x.T @ x)[0]

    x = np.random.default_rng(0).standard_normal((64, 32)).astype(np.float32)
    y = np.random.default_rng(1).standard_normal((64, 32)).astype(np.float32)
    compiled = tk.jit(program, backend="cpu").lower(x, y).compile()
    machine = compiled._executable.machine_code
    assert len(machine.parts) == 3 and "; ---- part 3 of 3" in compiled.as_text("llvm")
    assert any(s.kind == "group" for s in compiled._executable.steps)
    assert (
        compiler.unpack_objects(machine.object_code)
        and len(compiler.unpack_objects(machine.object_code)) == 3
    )
    # a driver calls another part's kernel
    assert any("declare void @" in part for part in machine.parts)
    assert compiled.as_text("asm").count("rowgroup_") >= 1
    assert_close(compiled(x, y), tk.jit(program, backend="interpreter")(x, y), approx=True)
    again = tk.jit(program, backend="cpu").lower(x, y).compile()  # from the persistent cache
    assert again._executable.cache_status == "persistent_hit"
    assert_close(again(x, y), compiled(x, y))


def test_a_packed_object_of_the_wrong_length_is_refused():
    from toolkit.backends.cpu import compiler

    packed = compiler.pack_objects([b"abc", b"de"])
    assert compiler.unpack_objects(packed) == [b"abc", b"de"]
    with pytest.raises(ValueError):
        compiler.unpack_objects(packed[:-1])
    assert compiler.unpack_objects(b"\x7fELF...") == [b"\x7fELF..."]


def test_the_dispatch_fast_path_is_exact():
    """A cache-hit call of a one-kernel program goes straight to the C kernel call (when pip
    built it); new shapes and dtypes still recompile, and odd arguments take the general path."""
    from toolkit.backends.cpu import executor

    f = tk.jit(lambda v: v * 2 + 1, backend="cpu", on_recompile="ignore")
    x = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(f(x), x * 2 + 1)
    if executor._native_call is not None:
        assert f.compiled(x).plain_run is not None
    read_only = x.copy()
    read_only.flags.writeable = False
    np.testing.assert_array_equal(f(read_only), x * 2 + 1)
    wide = np.arange(16, dtype=np.float32)
    np.testing.assert_array_equal(f(wide[::2]), wide[::2] * 2 + 1)  # not contiguous: copied first
    np.testing.assert_array_equal(f(np.arange(8.0)), np.arange(8.0) * 2 + 1)  # float64: a recompile
    assert f.recompile_count == 1
    assert f(x) is not f(x)  # a fresh result each call
    np.testing.assert_array_equal(f(np.float32(3)), np.float32(7))


def test_the_dispatch_fast_path_takes_numpy_scalars_and_any_argument_order():
    """A kernel that reads its arguments in another order than they are passed (``x * a + b``
    reads ``a`` first) and NumPy scalar arguments both take the fast path, with the results the
    general path gives: every argument lands on the kernel's parameter that reads it."""
    from toolkit.backends.cpu import executor

    fn = lambda x, a, b: np.tanh(x * a + b) * np.float32(0.5) + x  # noqa: E731
    f = tk.jit(fn, backend="cpu")
    x = np.linspace(-2, 2, 37, dtype=np.float32)
    for a, b in [(np.float32(1.5), np.float32(0.25)), (np.float32(-3.0), np.float32(2.0))]:
        got = f(x, a, b)
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, f.compiled(x, a, b)._executable(
            [x, np.asarray(a), np.asarray(b)])[0])  # the general path
        np.testing.assert_allclose(got, fn(x, a, b), rtol=1e-6, atol=1e-6)
    if executor._native_call is not None:
        assert f.compiled(x, a, b).plain_run is not None
    g = tk.jit(lambda s, v: v - s, backend="cpu")  # the scalar first, read second
    np.testing.assert_array_equal(g(np.float64(1.0), np.arange(4.0)), np.arange(4.0) - 1.0)
    assert f.recompile_count == 0


def test_the_c_kernel_call_is_built_where_a_compiler_is():
    """pip builds backends/cpu/_kernel_call.c (an optional extension); where a C compiler is
    present the dispatch fast path must find it, also when the tests run from a checkout."""
    import shutil
    from importlib import metadata

    from toolkit.backends.cpu import executor

    if not any(shutil.which(cc) for cc in ("cc", "gcc", "clang")):
        pytest.skip("no C compiler: the ctypes path is used")
    try:
        metadata.distribution("toolkit")
    except metadata.PackageNotFoundError:
        pytest.skip("toolkit is not installed (pip install .): nothing was built")
    assert executor._native_call is not None


def test_float64_to_float16_rounds_as_numpy_does_at_every_tie():
    """No x86 instruction converts float64 to float16; LLVM's call to __truncdfhf2 jumped to
    address 0 (the process died). The kernel rounds to float32 to odd, then to float16: every
    float16 value, every midpoint between neighbours and the doubles either side of it, the
    subnormals, overflow to inf, NaN and the signs of zero come out as NumPy's."""
    # +0 .. 65504
    halves = np.arange(0, 0x7C00, dtype=np.uint16).view(np.float16).astype(np.float64)
    mids = (halves[:-1] + halves[1:]) / 2  # exact in float64
    x = np.concatenate(
        [
            halves,
            mids,
            np.nextafter(mids, 0),
            np.nextafter(mids, np.inf),
            [65504.0, 65519.99, 65520.0, 1e300, 5.960464477539063e-08 / 2, 1e-300, np.inf, np.nan],
        ]
    )
    x = np.concatenate([x, -x])
    got = tk.jit(lambda v: v.astype(np.float16), backend="cpu")(x)
    want = x.astype(np.float16)
    np.testing.assert_array_equal(
        got.view(np.uint16)[~np.isnan(want)], want.view(np.uint16)[~np.isnan(want)]
    )
    assert np.isnan(got[np.isnan(want)]).all()
    # and inside a fused kernel, float64 math rounded to half at the end
    y = np.linspace(-3, 3, 1001)
    np.testing.assert_array_equal(
        tk.jit(lambda v: (np.exp(v) * 3).astype(np.float16), backend="cpu")(y),
        (tk.jit(lambda v: np.exp(v) * 3, backend="cpu")(y)).astype(np.float16),
    )


@pytest.mark.parametrize("backend", ["cpu", "gpu-simulated"])
def test_a_concatenation_reads_one_operand_per_element_along_the_last_axis(backend):
    """Along the innermost axis each element branches to the one operand that holds it (as
    XLA's elemental emitter does); along an outer axis every operand is read at a clamped index
    and one is selected (those reads vectorise). Both give NumPy's values, empty operands and
    bool elements included."""
    rng = np.random.default_rng(2)
    parts = [rng.standard_normal((5, n)) for n in (3, 0, 4, 1)]
    last = tk.jit(lambda *p: np.concatenate(p, axis=1) * 2.0, backend=backend)
    np.testing.assert_array_equal(last(*parts), np.concatenate(parts, axis=1) * 2.0)
    rows = [rng.standard_normal((n, 3)) for n in (2, 0, 5)]
    outer = tk.jit(lambda *p: np.concatenate(p, axis=0) * 2.0, backend=backend)
    np.testing.assert_array_equal(outer(*rows), np.concatenate(rows, axis=0) * 2.0)
    flags = [rng.random(n) > 0.5 for n in (4, 3)]
    both = tk.jit(lambda a, b: np.concatenate([a, b]) ^ True, backend=backend)
    np.testing.assert_array_equal(both(*flags), np.concatenate(flags) ^ True)


@pytest.mark.parametrize("dtype", [np.float32, np.int16, np.bool_])
def test_a_reshape_of_an_argument_is_a_contiguous_copy_with_numpys_values(dtype):
    """Row-major, element k of a reshape is element k of its operand's buffer: the kernel
    reads it at the linear index (no division or remainder per element, so LLVM sees a
    contiguous copy and vectorises it), for any regrouping of the dimensions."""
    x = (np.arange(2 * 3 * 5 * 7) % 5).astype(dtype).reshape(2, 3, 5, 7)

    def regroup(x):
        return x.reshape(6, 35), x.reshape(7, 30).T

    compiled = tk.jit(regroup, backend="cpu").lower(x).compile()
    for got, want in zip(compiled(x), regroup(x)):
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype
    kernel = next(part for part in compiled.as_text("llvm").split("\ndefine ")
                  if "reshape" in part.split("(")[0])
    assert "udiv" not in kernel and "urem" not in kernel, kernel


F16_REDUCE = """HloModule m
combine {
  a = f16[] parameter(0)
  b = f16[] parameter(1)
  ROOT c = f16[] %s(a, b)
}
ENTRY e {
  x = f16[%s] parameter(0)
  z = f16[] constant(%s)
  ROOT r = f16[%s] reduce(x, z), dimensions={%s}, to_apply=combine
}
"""


@pytest.mark.parametrize("backend", ["cpu", "gpu-simulated"])
@pytest.mark.parametrize("op, ufunc, init", [("add", np.add, 0), ("multiply", np.multiply, 1),
                                             ("maximum", np.maximum, "-inf")])
@pytest.mark.parametrize("dims, axis", [((5000,), "0"), ((7, 300), "1"), ((300, 7), "0"),
                                        ((40, 3, 50), "0,2"), ((6, 40, 50), "1,2")])
def test_float16_reductions_accumulate_in_float32_as_numpy_does(backend, op, ufunc, init, dims,
                                                                axis):
    """NumPy's half loops reduce in float32 and round once. A float16 reduce written as HLO
    text (the frontend widens its own sums) used to crash the CPU backend (the float64 block
    total rounded to half called a compiler-rt routine JIT code does not have) and summed with a
    float16 accumulator."""
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(dims) * (0.02 if op == "multiply" else 1) + (op == "multiply"))
    x = x.astype(np.float16)
    axes = tuple(int(a) for a in axis.split(","))
    kept = [d for k, d in enumerate(dims) if k not in axes]
    module = tk.hlo.parse(F16_REDUCE % (op, ",".join(map(str, dims)), init,
                                        ",".join(map(str, kept)), axis))
    got = tk.hlo.run(module, x, backend=backend)[0]
    want = ufunc.reduce(x, axis=axes)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, want)


@pytest.mark.skipif(__import__("platform").machine().lower() not in ("x86_64", "amd64"),
                    reason="x86-64 tuning")
def test_indexed_loads_are_scalar_loads_not_vector_gathers(monkeypatch):
    """x86's vgather is slow on Intel server CPUs since the Gather Data Sampling microcode:
    ``x[idx] * 2`` took twice NumPy's time with it, less than NumPy's without. The host
    tuning (``llvm_worker.X86_TUNING``, also in the persistent cache's host key) keeps
    LLVM's vectoriser from gathering; the results are NumPy's either way."""
    from toolkit.backends.cpu.compiler import host_description
    from toolkit.backends.llvm import llvm_worker

    monkeypatch.setenv("TOOLKIT_CACHE_DIR", "off")
    assert host_description()["features"].endswith(llvm_worker.X86_TUNING)
    x = np.random.default_rng(0).standard_normal(1000)
    idx = np.random.default_rng(1).integers(-1000, 1000, 5000)
    c = tk.jit(lambda x, idx: x[idx] * 2, backend="cpu").lower(x, idx).compile()
    assert "llvm.masked.gather" not in c.as_text("llvm")
    np.testing.assert_array_equal(c(x, idx), x[idx] * 2)
