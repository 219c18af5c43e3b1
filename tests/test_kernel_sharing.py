"""Kernels alike up to names are compiled once: an unrolled loop's trips share one function.
The structural key must tell apart everything that changes the code: constants, shapes,
layouts, attributes, the computations a kernel calls, which outputs it writes."""
import numpy as np
import pytest

import toolkit as tk
from toolkit.ir.structural import exact_key


def _entry(text: str):
    return tk.hlo.parse(f"HloModule m\n{text}").entry


ADD = (
    "%add (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n"
    "  ROOT %s = f32[] add(%a, %b)\n}\n"
)
MAX = (
    "%max (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n"
    "  ROOT %s = f32[] maximum(%a, %b)\n}\n"
)


def _reduce(reducer: str, names=("p", "z", "r")) -> str:
    p, z, r = names
    return (f"ENTRY e {{\n  %{p} = f32[4,8] parameter(0)\n  %{z} = f32[] constant(0)\n"
            f"  ROOT %{r} = f32[4] reduce(%{p}, %{z}), dimensions={{1}}, to_apply=%{reducer}\n}}\n")


def test_the_key_ignores_names_and_metadata():
    a = _entry(
        "ENTRY e {\n  %x = f32[8] parameter(0)\n  %c = f32[] constant(2)\n"
        "  %b = f32[8] broadcast(%c), dimensions={}\n"
        "  ROOT %m = f32[8] multiply(%x, %b)\n}\n"
    )
    b = _entry(
        'ENTRY other {\n  %p.7 = f32[8] parameter(0), metadata={op_name="w"}\n'
        '  %k.1 = f32[] constant(2)\n'
        "  %bb = f32[8] broadcast(%k.1), dimensions={}\n"
        "  ROOT %out.9 = f32[8] multiply(%p.7, %bb)\n}\n"
    )
    assert exact_key(a) == exact_key(b)
    renamed_reducer = ADD.replace("%add", "%sum.3")
    assert exact_key(_entry(ADD + _reduce("add"))) == \
        exact_key(_entry(renamed_reducer + _reduce("sum.3", ("q", "zero", "out"))))


@pytest.mark.parametrize(
    "changed",
    [
        (
            "ENTRY e {\n  %x = f32[8] parameter(0)\n  %c = f32[] constant(3)\n"
            "  %b = f32[8] broadcast(%c), dimensions={}\n  ROOT %m = f32[8] multiply(%x, %b)\n}\n"
        ),
        (
            "ENTRY e {\n  %x = f32[9] parameter(0)\n  %c = f32[] constant(2)\n"
            "  %b = f32[9] broadcast(%c), dimensions={}\n  ROOT %m = f32[9] multiply(%x, %b)\n}\n"
        ),
        (
            "ENTRY e {\n  %x = f64[8] parameter(0)\n  %c = f64[] constant(2)\n"
            "  %b = f64[8] broadcast(%c), dimensions={}\n  ROOT %m = f64[8] multiply(%x, %b)\n}\n"
        ),
        (
            "ENTRY e {\n  %x = f32[8] parameter(0)\n  %c = f32[] constant(2)\n"
            "  %b = f32[8] broadcast(%c), dimensions={}\n  ROOT %m = f32[8] add(%x, %b)\n}\n"
        ),
        (
            "ENTRY e {\n  %x = f32[8] parameter(0)\n  %c = f32[] constant(2)\n"
            "  %b = f32[8] broadcast(%c), dimensions={}\n  ROOT %m = f32[8] multiply(%b, %x)\n}\n"
        ),
    ],
    ids=["constant", "shape", "dtype", "opcode", "operand order"],
)
def test_the_key_sees_what_changes_the_code(changed):
    base = (
        "ENTRY e {\n  %x = f32[8] parameter(0)\n  %c = f32[] constant(2)\n"
        "  %b = f32[8] broadcast(%c), dimensions={}\n"
        "  ROOT %m = f32[8] multiply(%x, %b)\n}\n"
    )
    assert exact_key(_entry(base)) != exact_key(_entry(changed))


def test_the_key_sees_layouts_attributes_and_called_computations():
    t = (
        "ENTRY e {\n  %x = f32[4,8]{LAYOUT} parameter(0)\n"
        "  ROOT %t = f32[8,4] transpose(%x), dimensions={1,0}\n}\n"
    )
    assert exact_key(_entry(t.replace("LAYOUT", "1,0"))) != exact_key(
        _entry(t.replace("LAYOUT", "0,1"))
    )
    assert exact_key(_entry(ADD + _reduce("add"))) != exact_key(
        _entry(MAX + _reduce("max"))
    )
    other_dims = (
        (ADD + _reduce("add"))
        .replace("dimensions={1}", "dimensions={0}")
        .replace("f32[4] reduce", "f32[8] reduce")
    )
    assert exact_key(_entry(ADD + _reduce("add"))) != exact_key(_entry(other_dims))


def _steps(x):
    for _ in range(60):  # an unrolled loop: 60 fused kernels, all alike
        x = np.tanh(x[::-1] * 0.5) + x
    return x


def test_an_unrolled_loop_compiles_each_distinct_kernel_once(monkeypatch):
    monkeypatch.setenv("TOOLKIT_CACHE_DIR", "off")
    x = np.linspace(-2, 2, 1000, dtype=np.float32)
    jitted = tk.jit(_steps, backend="cpu")
    np.testing.assert_allclose(jitted(x), _steps(x), rtol=2e-6, atol=1e-6)
    compiled = jitted.lower(x).compile()
    kernels = [s for s in compiled._executable.steps if s.kind == "kernel"]
    assert len(kernels) >= 50  # each trip its own kernel in the program and in the profile
    assert compiled.as_text("llvm").count("define ") < 5  # but one function for them all


def test_kernels_that_differ_only_in_a_constant_are_not_shared(monkeypatch):
    monkeypatch.setenv("TOOLKIT_CACHE_DIR", "off")

    def steps(x):
        for k in range(6):
            x = np.tanh(x[::-1] * (0.5 + k)) + x
        return x

    x = np.linspace(-2, 2, 1000)
    np.testing.assert_allclose(tk.jit(steps, backend="cpu")(x), steps(x), rtol=1e-12, atol=1e-13)
    assert tk.jit(steps, backend="cpu").lower(x).compile().as_text("llvm").count("define ") >= 6


def test_shared_kernels_load_from_the_persistent_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLKIT_CACHE_DIR", str(tmp_path))
    x = np.linspace(-2, 2, 1000, dtype=np.float32)
    expected = _steps(x)
    first = tk.jit(_steps, backend="cpu")
    np.testing.assert_allclose(first(x), expected, rtol=2e-6, atol=1e-6)
    again = tk.jit(_steps, backend="cpu")  # a new function: compiled afresh, found on disk
    compiled = again.lower(x).compile()
    assert compiled._executable.cache_status == "persistent_hit"
    assert not compiled._executable.fallbacks  # every kernel found its (shared) function
    np.testing.assert_allclose(again(x), expected, rtol=2e-6, atol=1e-6)


def test_the_gpu_backend_emits_each_distinct_kernel_once():
    """The same sharing in PTX: one .entry for the trips of an unrolled loop, which ptxas
    assembles, and the GPU executor (simulated device) runs every trip through it."""
    import shutil
    import subprocess
    from toolkit.backends.gpu import compile_ptx
    x = np.linspace(-2, 2, 1000, dtype=np.float32)
    module = tk.jit(_steps, backend="interpreter").compiled(x).optimized_hlo
    program = compile_ptx(module, "sm_80")
    assert len(program.kernels) >= 50 and program.ptx.count(".entry") < 5
    assert len({k.symbol for k in program.kernels}) == program.ptx.count(".entry")
    if shutil.which("ptxas"):
        done = subprocess.run(
            ["ptxas", "-arch=sm_80", "-o", "/dev/null", "-"],
            input=program.ptx,
            text=True,
            capture_output=True,
        )
        assert done.returncode == 0, done.stderr
    got = tk.jit(_steps, backend="gpu-simulated")(x)
    np.testing.assert_allclose(np.asarray(got), _steps(x), rtol=2e-6, atol=1e-6)


def _tails_scaled(d):
    """Each trip's kernel divides a vector one element shorter than the last trip's: HLO
    unlike in shape, code alike (a kernel runs over [begin, end) given at run time)."""
    return tuple(d[:, i] @ d[:, i:] / (d.shape[0] - 1) for i in range(d.shape[1]))


def _assert_equal_tuples(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


def test_kernels_that_differ_only_in_their_outer_extent_compile_once(tmp_path, monkeypatch):
    import re

    monkeypatch.setenv("TOOLKIT_CACHE_DIR", str(tmp_path))
    d = np.random.default_rng(3).standard_normal((30, 40))
    first = tk.jit(_tails_scaled, backend="cpu")
    _assert_equal_tuples(first(d), _tails_scaled(d))
    llvm_ir = first.lower(d).compile().as_text("llvm")
    divides = re.findall(r'^define void @"?loop_divide_fusion', llvm_ir, re.M)
    aliases = re.findall(r'^@"?loop_divide_fusion[^ ]* = alias ', llvm_ir, re.M)
    # 40 divides of 40, 39, ... 1 elements: the rest aliases of one function per part (of
    # two here at most) and optimisation level (up to 16 elements: none; then for size)
    assert len(divides) + len(aliases) == 40 and len(divides) <= 4, (divides, aliases)
    # the persistent cache keeps the object: every kernel finds its symbol, aliases included
    again = tk.jit(_tails_scaled, backend="cpu")
    compiled = again.lower(d).compile()
    assert compiled._executable.cache_status == "persistent_hit"
    assert not compiled._executable.fallbacks
    _assert_equal_tuples(again(d), _tails_scaled(d))


def test_a_repeated_function_becomes_an_alias_in_the_text_llvm_compiles():
    """SharedCode writes a module as llvmlite does (it keeps the kept kernels' text), plus an
    alias per repeat; functions alike but for a constant stay two."""
    import ctypes

    from llvmlite import ir

    from toolkit.backends.cpu.compiler import compile_ir
    from toolkit.backends.llvm.shared_code import SharedCode

    module = ir.Module("m")
    module.add_named_metadata("toolkit.test", [ir.Constant(ir.IntType(32), 7)])
    sharing = SharedCode()
    double_ptr = ir.DoubleType().as_pointer()
    for k, value in enumerate((1.5, 2.5, 1.5)):
        fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [double_ptr]), f"k{k}")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        b.store(ir.Constant(ir.DoubleType(), value), fn.args[0])
        b.ret_void()
        assert sharing.share(module, [f"k{k}"]) == ("k0" if k == 2 else None)
    assert set(module.globals) == {"k0", "k1"} and sharing.shared == 1
    text = sharing.text(module)
    assert text == str(module) + '\n@"k2" = alias void (double*), void (double*)* @"k0"\n'
    machine = compile_ir(text)
    for name, want in (("k0", 1.5), ("k1", 2.5), ("k2", 1.5)):
        out = ctypes.c_double(0.0)
        ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_double))(machine.address(name))(
            ctypes.byref(out))
        assert out.value == want


def _index_round_trip(dims):
    """``f(out, linear)``: out = delinearize(linear), then linearize of that."""
    from llvmlite import ir

    from toolkit.backends.llvm.emitter import delinearize, linearize

    i64 = ir.IntType(64)
    module = ir.Module("index")
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [i64.as_pointer(), i64]), "f")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    out, linear = fn.args
    index = delinearize(b, linear, dims)
    for k, v in enumerate([*index, linearize(b, index, dims)]):
        b.store(v, b.gep(out, [ir.Constant(i64, k)]))
    b.ret_void()
    return str(module)


@pytest.mark.parametrize("dims", [(7,), (1,), (3, 1, 4), (1, 1, 5), (2, 3), (5, 1), (1,) * 3])
def test_indexing_without_the_outermost_extent_is_numpys_row_major_order(dims):
    """The emitters' index arithmetic, run: delinearize is np.unravel_index and linearize
    its inverse, for every element, and the code is the same whatever the outermost extent
    (of more than one element)."""
    import ctypes

    from toolkit.backends.cpu.compiler import compile_ir

    text = _index_round_trip(dims)
    outermost = next((k for k, d in enumerate(dims) if d != 1), None)
    if outermost is not None:
        longer = tuple(d + 3 if k == outermost else d for k, d in enumerate(dims))
        assert _index_round_trip(longer) == text
    machine = compile_ir(text)  # (kept: the code lives as long as its engine)
    call = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_int64), ctypes.c_int64)(
        machine.address("f"))
    got = (ctypes.c_int64 * (len(dims) + 1))()
    for element in range(int(np.prod(dims))):
        call(got, element)
        assert list(got) == [*np.unravel_index(element, dims), element]


def test_the_gpu_backend_emits_kernels_alike_in_code_once():
    """On the GPU the divides of ever shorter vectors launch one PTX entry (each with its own
    grid), which ptxas assembles, and the simulated device runs every one of them."""
    import shutil
    import subprocess

    from toolkit.backends.gpu import compile_ptx

    d = np.random.default_rng(3).standard_normal((30, 40))
    module = tk.jit(_tails_scaled, backend="interpreter").compiled(d).optimized_hlo
    program = compile_ptx(module, "sm_80")
    divides = [k for k in program.kernels if k.name.startswith("loop_divide_fusion")]
    # three entries: even lengths (two elements a thread), odd ones, and one element
    assert len(divides) == 40 and len({k.symbol for k in divides}) == 3
    assert len({(k.symbol, k.work_items) for k in divides}) == 40  # each its own grid
    assert len({k.symbol for k in program.kernels}) == program.ptx.count(".entry")
    if shutil.which("ptxas"):
        done = subprocess.run(["ptxas", "-arch=sm_80", "-o", "/dev/null", "-"],
                              input=program.ptx, text=True, capture_output=True)
        assert done.returncode == 0, done.stderr
    got = tk.jit(_tails_scaled, backend="gpu-simulated")(d)
    for g, w in zip(got, _tails_scaled(d), strict=True):  # (the device's dot: its own order)
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("dtype,starts", [("s32", (-3, 100)), ("u32", (4294967295, 2)),
                                          ("s64", (2, -9)), ("u8", (255, 0))])
def test_constant_start_indices_clamp_when_emitted_as_xla_says(dtype, starts):
    """A constant start is clamped by the emitter, not in the code (so the window's extent
    does not enter it): out-of-range and negative starts, of signed and unsigned types,
    clamp as the interpreter (XLA's semantics) does (the constants are fused into the kernels:
    the emitter sees them; the GPU's kernels share this indexing code)."""
    a, b = starts
    text = (
        "HloModule clamps\nENTRY e {\n  p = f32[6,8] parameter(0)\n  u = f32[2,3] parameter(1)\n"
        f"  i = {dtype}[] constant({a})\n  j = {dtype}[] constant({b})\n"
        "  s = f32[3,5] dynamic-slice(p, i, j), dynamic_slice_sizes={3,5}\n"
        "  d = f32[6,8] dynamic-update-slice(p, u, j, i)\n"
        "  ROOT t = (f32[3,5], f32[6,8]) tuple(s, d)\n}\n")
    module = tk.hlo.parse(text)
    rng = np.random.default_rng(2)
    args = rng.random((6, 8), np.float32), rng.random((2, 3), np.float32)
    want = tk.hlo.run(module, *args, backend="interpreter", pipeline="none")
    got = tk.hlo.run(module, *args, backend="cpu")
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


def _flipped_recurrence(r):
    """Durbin's recursion (PolyBench): every trip reads and updates ever longer windows, one of
    them flipped."""
    y = np.empty_like(r)
    alpha, beta = -r[0], 1.0
    y[0] = -r[0]
    for k in range(1, r.shape[0]):
        beta *= 1.0 - alpha * alpha
        alpha = -(r[k] + np.dot(np.flip(r[:k]), y[:k])) / beta
        y[:k] += alpha * np.flip(y[:k])
        y[k] = alpha
    return y


def test_flipped_windows_of_every_length_compile_once(monkeypatch):
    """``np.flip(y[:k])`` for every k: the simplifier makes a flipped window a window of the
    flipped array, so only its start varies from trip to trip; that start is an operand known
    to lie in range, so the code clamps nothing and names no extent. The 60 trips' kernels
    are a handful of functions, and the values are NumPy's bit for bit."""
    import re

    monkeypatch.setenv("TOOLKIT_CACHE_DIR", "off")
    r = np.random.default_rng(5).random(60) * 0.1
    compiled = tk.jit(_flipped_recurrence, backend="cpu").lower(r).compile()
    np.testing.assert_array_equal(compiled(r), _flipped_recurrence(r))
    llvm_ir = compiled.as_text("llvm")
    defined = re.findall(r'^define void @', llvm_ir, re.M)
    aliases = re.findall(r'^@"?\w[^ ]* = alias ', llvm_ir, re.M)
    # (about 200 kernels; before, each trip's flipped windows were functions of their own)
    assert len(aliases) >= 150 and len(defined) <= 40, (len(defined), len(aliases))


def test_a_start_past_the_end_still_clamps_where_another_kernel_alike_does_not():
    """Kernels alike up to their start operands: one start in range (no clamp in its code),
    one past the end (clamped, as XLA clamps it). They must not share code, and both compute
    what the interpreter does."""
    from toolkit.passes import offset_operands

    def window(start: int) -> str:
        return (f"  %i = s64[] constant({start})\n  %o = s64[] constant(0)\n"
                "  %d = f32[8,2]{1,0} dynamic-slice(%p, %o, %i), dynamic_slice_sizes={8,2}\n"
                "  ROOT %m = f32[8,2]{1,0} multiply(%d, %d)")
    comps, calls = [], []
    starts = (1, 7, 3, 100, -4)
    for k, start in enumerate(starts):
        comps.append(f"%f{k} (p: f32[8,8]) -> f32[8,2] {{\n  %p = f32[8,8]{{1,0}} parameter(0)\n"
                     f"{window(start)}\n}}\n")
        calls.append(f"  %r{k} = f32[8,2]{{1,0}} fusion(%x), kind=kLoop, calls=%f{k}")
    shape = ", ".join("f32[8,2]{1,0}" for _ in starts)
    results = ", ".join(f"%r{k}" for k in range(len(starts)))
    text = ("HloModule m\n" + "".join(comps) + "ENTRY %e (x: f32[8,8]) -> (" + shape + ") {\n"
            "  %x = f32[8,8]{1,0} parameter(0)\n" + "\n".join(calls) +
            f"\n  ROOT %t = ({shape}) tuple({results})\n}}\n")
    module, counts, _ = offset_operands.offset_operands(tk.hlo.parse(text))
    assert counts["fusions taking offsets as operands"] == len(starts)
    from toolkit.backends.llvm.planning import plan_kernel

    fusions = [i for i in module.entry.instructions if i.opcode == "fusion"]
    assert [bool(plan_kernel(f).starts_in_bounds) for f in fusions] == \
        [0 <= s <= 6 for s in starts]
    x = np.arange(64, dtype=np.float32).reshape(8, 8)
    want = tk.hlo.run(module, x, backend="interpreter", pipeline="none")
    got = tk.hlo.run(module, x, backend="cpu", pipeline="none")
    for start, w, g in zip(starts, want, got, strict=True):
        column = min(max(start, 0), 6)
        np.testing.assert_array_equal(w, x[:, column:column + 2] ** 2)
        np.testing.assert_array_equal(g, w)


def test_the_gpu_backend_launches_few_entries_for_flipped_windows():
    """The same on the GPU for the kernels that read the windows: a handful of entries, which
    ptxas assembles; the simulated device runs every trip's kernels as NumPy computes them.
    (The GPU writes ``y[:k]`` by a kernel over all of ``y``, whose test for the window names
    its length: one entry per length.)"""
    import shutil
    import subprocess

    from toolkit.backends.gpu import compile_ptx

    r = np.random.default_rng(5).random(40) * 0.1
    module = tk.jit(_flipped_recurrence, backend="interpreter").compiled(r).optimized_hlo
    program = compile_ptx(module, "sm_80")
    readers = [k for k in program.kernels if k.name.startswith(("loop_slice", "loop_add",
                                                                 "loop_multiply", "loop_reverse"))]
    assert len(readers) >= 80 and len({k.symbol for k in readers}) <= 8, \
        (len(readers), len({k.symbol for k in readers}))
    if shutil.which("ptxas"):
        done = subprocess.run(["ptxas", "-arch=sm_80", "-o", "/dev/null", "-"],
                              input=program.ptx, text=True, capture_output=True)
        assert done.returncode == 0, done.stderr
    got = tk.jit(_flipped_recurrence, backend="gpu-simulated")(r)
    np.testing.assert_allclose(np.asarray(got), _flipped_recurrence(r), rtol=1e-12, atol=1e-15)
