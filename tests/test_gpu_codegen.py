"""GPU code generation without a GPU: PTX for every fusion kind, assembled by ptxas for sm_80
and sm_90 when ptxas is on the PATH. Execution is tested in test_gpu_runtime.py."""
import re
import shutil
import subprocess

import numpy as np
import pytest

import toolkit as tk
from toolkit.backends import BackendUnavailableError
from toolkit.backends.gpu import compile_ptx

import programs

PTXAS = shutil.which("ptxas")
needs_ptxas = pytest.mark.skipif(PTXAS is None, reason="ptxas (CUDA toolkit) is not on the PATH")

FUSION_KINDS = programs.FUSION_KINDS


def optimized(fn, *args):
    return tk.jit(fn, backend="interpreter").compiled(*args).optimized_hlo


def assemble(ptx: str, arch: str, tmp_path) -> None:
    path = tmp_path / f"kernel_{arch}.ptx"
    path.write_text(ptx)
    done = subprocess.run([PTXAS, f"-arch={arch}", str(path), "-o", str(tmp_path / "out.cubin")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("kind", sorted(FUSION_KINDS))
def test_every_fusion_kind_assembles(kind, arch, tmp_path):
    x = np.random.default_rng(0).standard_normal((64, 96)).astype(np.float32)
    program = compile_ptx(optimized(FUSION_KINDS[kind], x), arch)
    assert program.kernels and not program.unsupported, program.unsupported
    assert f".target {arch}" in program.ptx
    assemble(program.ptx, arch, tmp_path)


@needs_ptxas
@pytest.mark.parametrize("name", sorted(programs.make_cases(np.random.default_rng(0))))
def test_test_programs_assemble(name, tmp_path):
    fn, args = programs.make_cases(np.random.default_rng(0))[name]
    module = optimized(fn, *args)
    program = compile_ptx(module, "sm_90")
    assert not program.unsupported
    assemble(program.ptx, "sm_90", tmp_path)
    # loops and branches are driven from the host; the computations they run are GPU programs
    # of their own, and those must lower and assemble too
    from toolkit.backends.control import flat_module
    pending = [i for i in module.entry.instructions if i.opcode in ("while", "conditional")]
    while pending:
        inst = pending.pop()
        for k, comp in enumerate(inst.called_computations):
            inner = flat_module(comp, f"{inst.name}_{k}")
            body = compile_ptx(inner, "sm_90")
            pending.extend(
                i for i in inner.entry.instructions if i.opcode in ("while", "conditional")
            )
            assert not body.unsupported, body.unsupported
            if body.kernels:
                assemble(body.ptx, "sm_90", tmp_path)


ROW_REDUCTIONS = {  # (rows, row length): the mode each takes
    "warp per row": ((64, 96), "warp"),
    "block per row": ((1024, 50000), "block"),
    "rows split over blocks": ((4, 50000), "split"),
    "thread per row": ((300, 6), "thread"),
}
SHUFFLED_DTYPES = [np.float32, np.float64, np.int32, np.int64, np.bool_]


@needs_ptxas
@pytest.mark.parametrize("dtype", SHUFFLED_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("case", sorted(ROW_REDUCTIONS))
def test_cooperative_row_reductions_assemble_for_every_width(case, dtype, tmp_path):
    shape, mode = ROW_REDUCTIONS[case]
    x = np.ones(shape, dtype)
    # siblings + an extra output
    fn = (lambda v: (v.any(axis=-1), v.all(axis=-1))) if dtype == np.bool_ else \
        (lambda v: (v.sum(axis=-1, dtype=v.dtype), v.max(axis=-1), v * 2))
    program = compile_ptx(optimized(fn, x), "sm_80")
    assert not program.unsupported, program.unsupported
    reductions = [k for k in program.kernels if any(o.opcode == "reduce" for o in k.spec.outputs)]
    assert reductions and {k.mode for k in reductions} == {mode}
    assert ("shfl.sync.bfly.b32" in program.ptx) == (mode != "thread")
    assert ("bar.sync" in program.ptx and ".shared" in program.ptx) == (mode in ("block", "split"))
    assert ("atom.global.add" in program.ptx and "membar.gl" in program.ptx) == (mode == "split")
    assemble(program.ptx, "sm_80", tmp_path)


@needs_ptxas
@pytest.mark.parametrize("rows, mode", [(1024, "block"), (2, "split")])
@pytest.mark.parametrize("hlo_type", ["f16", "s8", "u16", "u64", "pred"])
def test_narrow_and_unsigned_shuffles_assemble(hlo_type, rows, mode, tmp_path):
    # types the NumPy frontend does not trace, as parsed HLO (what JAX prints) carries them
    module = tk.hlo.parse(f"""HloModule narrow
%add (a: {hlo_type}[], b: {hlo_type}[]) -> {hlo_type}[] {{
  %a = {hlo_type}[] parameter(0)
  %b = {hlo_type}[] parameter(1)
  ROOT %sum = {hlo_type}[] {"or" if hlo_type == "pred" else "add"}(%a, %b)
}}
ENTRY %main (x: {hlo_type}[{rows},50000]) -> {hlo_type}[{rows}] {{
  %x = {hlo_type}[{rows},50000] parameter(0)
  %zero = {hlo_type}[] constant({"false" if hlo_type == "pred" else 0})
  ROOT %r = {hlo_type}[{rows}] reduce(%x, %zero), dimensions={{1}}, to_apply=%add
}}""")
    program = compile_ptx(module, "sm_90")
    assert [k.mode for k in program.kernels] == [mode]
    assemble(program.ptx, "sm_90", tmp_path)


@needs_ptxas
@pytest.mark.parametrize("dtype", SHUFFLED_DTYPES, ids=lambda d: np.dtype(d).name)
def test_column_reductions_of_few_outputs_split_over_threads(dtype, tmp_path):
    x = np.ones((1 << 16, 16), dtype)
    fn = (lambda v: (v.any(axis=0), v.all(axis=0))) if dtype == np.bool_ else \
        (lambda v: (v.sum(axis=0, dtype=v.dtype), v.min(axis=0)))
    program = compile_ptx(optimized(fn, x), "sm_90")
    (kernel,) = program.kernels
    assert kernel.mode == "thread_split" and kernel.work_items == 16 * 256  # 256 pieces of 256 rows
    assert "atom.global.add" in program.ptx and "bar.sync" not in program.ptx
    assemble(program.ptx, "sm_90", tmp_path)
    # many outputs: a thread per output, as before
    assert (
        compile_ptx(optimized(fn, np.ones((4096, 1 << 16), dtype)), "sm_90").kernels[0].mode
        == "thread"
    )


def test_row_reduction_launches_a_warp_or_a_block_per_row():
    warp = compile_ptx(
        optimized(lambda x: x.sum(-1), np.ones((1000, 512), np.float32)), "sm_90"
    ).kernels[0]
    # 8 rows a block
    assert warp.mode == "warp" and warp.launch(sm_count=132) == ((125, 1, 1), (256, 1, 1))
    block = compile_ptx(
        optimized(lambda x: x.sum(-1), np.ones((1024, 8192), np.float32)), "sm_90"
    ).kernels[0]
    assert block.mode == "block" and block.launch(sm_count=132) == ((1024, 1, 1), (256, 1, 1))
    # a full reduction of 1M elements: 256 pieces of 4096, combined by the last block to finish
    split = compile_ptx(
        optimized(lambda x: x.sum(), np.ones(1 << 20, np.float32)), "sm_90"
    ).kernels[0]
    assert split.mode == "split" and split.work_items == 256
    assert split.launch(sm_count=132) == ((256, 1, 1), (256, 1, 1))


def test_loop_fusion_ptx_snippets():
    ptx = compile_ptx(optimized(lambda x: x * 3 + 1, np.ones(1000, np.float32)), "sm_80").ptx
    assert ".visible .entry loop_add_fusion(" in ptx
    for snippet in ("mov.u32", "%ctaid.x", "%ntid.x", "%tid.x", "%nctaid.x",  # grid-stride indexing
                    "ld.global.nc",  # inputs through the read-only data cache (invariant loads)
                    ".param .u64 .ptr .align 16",  # whole pool buffers: 16-byte aligned
                    "st.global"):
        assert snippet in ptx, snippet
    # mul then add, never contracted to fma: contraction changes rounding (toolkit does not allow
    # it)
    assert re.search(r"\bmul(\.rn)?\.f32", ptx) and re.search(r"\badd(\.rn)?\.f32", ptx)


def test_row_reduction_ptx_snippets():
    ptx = compile_ptx(
        optimized(lambda x: x.max(axis=-1), np.ones((32, 64), np.float32)), "sm_80"
    ).ptx
    assert ".visible .entry input_reduce_fusion(" in ptx and ".maxntid 256" in ptx
    assert "max.NaN.f32" in ptx  # NaN-propagating maximum, as XLA
    assert "ld.global" in ptx and ("st.global.b32" in ptx or "st.global.f32" in ptx)
    # a warp per row: five butterfly steps over the full warp (offsets 16, 8, 4, 2, 1)
    offsets = re.findall(r"shfl\.sync\.bfly\.b32\s+%r\d+, %r\d+, (\d+), 31, -1;", ptx)
    assert offsets == ["16", "8", "4", "2", "1"]


def test_float64_transcendentals_without_libdevice_are_reported_not_miscompiled(monkeypatch):
    from toolkit.backends.gpu.libdevice import find_libdevice
    monkeypatch.setenv("TOOLKIT_LIBDEVICE", "/nonexistent/libdevice.10.bc")
    find_libdevice.cache_clear()
    try:
        program = compile_ptx(optimized(lambda x: np.sin(x) + 1, np.ones(8, np.float64)), "sm_80")
    finally:
        find_libdevice.cache_clear()
    assert program.unsupported and "needs a math library call" in program.unsupported[0]
    assert "libdevice" in program.unsupported[0]


F64_MATH = lambda x: (  # noqa: E731
    np.exp(x) + np.tanh(x),
    np.arctan2(x, x + 1),
    np.abs(x) ** 1.5,
    np.log1p(np.abs(x)),
    np.sin(x) * np.cos(x),
    np.expm1(x),
    np.tan(x.astype(np.float32)),
    np.cbrt(x),
)


@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_float64_math_links_libdevice(arch, tmp_path):
    from toolkit.backends.gpu.libdevice import find_libdevice
    if find_libdevice() is None:
        pytest.skip(
            "libdevice (the CUDA toolkit's nvvm/libdevice/libdevice.10.bc) is not on this machine"
        )
    program = compile_ptx(optimized(F64_MATH, np.ones(8, np.float64)), arch)
    assert not program.unsupported, program.unsupported
    assert ".extern" not in program.ptx  # every __nv_* call resolved: linked, inlined or internal
    assert len(program.ptx) < 200_000  # the ~500 functions the kernels do not call are gone
    assemble(program.ptx, arch, tmp_path)


def test_launch_dimensions():
    program = compile_ptx(optimized(lambda x: x + 1, np.ones(1 << 22, np.float32)), "sm_80")
    (kernel,) = program.kernels
    assert kernel.work_items == 1 << 20  # four float32s a thread: one 16-byte load and store
    grid, block = kernel.launch(sm_count=132)
    # 8 blocks per SM; a grid-stride loop covers the rest
    assert block == (256, 1, 1) and grid == (1056, 1, 1)
    small = compile_ptx(optimized(lambda x: x + 1, np.ones(100, np.float32)), "sm_80").kernels[0]
    assert small.launch()[0] == (1, 1, 1)


def test_ptx_stage_on_any_backend_and_the_gpu_backend_says_what_is_missing():
    c = tk.jit(lambda x: x * 3, backend="interpreter").compiled(np.ones(4, np.float32))
    assert c.as_text("ptx").lstrip().startswith("//") and ".target sm_80" in c.as_text("ptx")
    assert ".target sm_90" in c.as_text("ptx:sm_90")
    from toolkit.backends.gpu.device import cupy_or_reason
    if cupy_or_reason()[1] is not None:
        with pytest.raises(BackendUnavailableError, match="backend 'gpu' cannot run here"):
            tk.jit(lambda x: x, backend="gpu")



def test_sass_stage_shows_machine_code_and_resource_usage():
    from toolkit.backends.gpu.sass import missing_tools
    c = tk.jit(lambda x: (x * 2).sum(-1), backend="interpreter").compiled(
        np.ones((64, 128), np.float32)
    )
    reason = missing_tools()
    if reason is not None:
        with pytest.raises(RuntimeError, match="stage 'sass' needs"):
            c.as_text("sass")
        pytest.skip(reason)
    text = c.as_text("sass:sm_90")
    assert text.startswith("// SASS for sm_90")
    assert re.search(r"Used \d+ registers", text)  # ptxas -v, per kernel
    assert "input_reduce_fusion" in text and "SHFL.BFLY" in text and "EXIT" in text


def test_empty_outputs_launch_no_work():
    # a kernel for an empty output used to claim one work item and store out of bounds
    program = compile_ptx(
        optimized(lambda x: (x * 2, x.sum(axis=0), x.sum(axis=1)), np.ones((5, 0), np.float32))
    )
    work = {k.name: k.work_items for k in program.kernels}
    # x*2 and the column sums are empty; 5 row sums of nothing
    assert sorted(work.values()) == [0, 0, 5], work


@pytest.mark.parametrize(
    "dtype, width", [(np.float32, 4), (np.float64, 2), (np.bool_, 16), (np.int32, 4)]
)
def test_loop_kernels_move_16_bytes_a_thread(dtype, width):
    x = np.ones((256, 64), dtype)
    program = compile_ptx(optimized(lambda a: (a * 2) if dtype != np.bool_ else ~a, x), "sm_90")
    (kernel,) = program.kernels
    assert kernel.work_items == x.size // width
    if dtype != np.bool_:
        assert re.search(r"ld\.global\.nc\.v[24]\.b(32|64)", program.ptx) and re.search(
            r"st\.global\.v[24]\.b(32|64)", program.ptx
        )
    # rows that no whole vector divides fall back to narrower items, never crossing a row
    odd = compile_ptx(
        optimized(lambda a: a * 2 if dtype != np.bool_ else ~a, np.ones((5, 6), dtype)), "sm_90"
    ).kernels[0]
    assert odd.work_items == 30 // min(width, 2)


@needs_ptxas
def test_float64_power_lowers_without_libdevice_and_assembles(tmp_path):
    """float64 power is toolkit's own two-part exp(y ln x) on the GPU too: no libdevice call,
    PTX that ptxas accepts."""
    x = np.linspace(0.1, 3.0, 256)
    program = compile_ptx(optimized(lambda a, b: np.power(a, b) * 2.0, x, -x), "sm_90")
    assert program.kernels and not program.unsupported, program.unsupported
    assert "__nv_pow" not in program.ptx
    assemble(program.ptx, "sm_90", tmp_path)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fmod_calls_libdevice_never_frem(dtype):
    """NVPTX expands frem as x - y*trunc(x/y), which is wrong for float64 (an H200 gave
    -4.8e-17 for fmod(1, 0.0004)): the GPU calls libdevice's exact fmod instead."""
    x = np.ones(4, dtype)
    program = compile_ptx(optimized(lambda x, y: np.fmod(x, y), x, x), "sm_90")
    assert "frem " not in program.llvm_ir and "loop_remainder_fusion" in program.llvm_ir


@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_a_program_of_many_sibling_reductions_assembles(arch, tmp_path):
    """Its kernels' parameters fit the GPU's parameter space (ptxas: "uses too much parameter
    space" before the fusion budget on operands and outputs)."""
    x = np.ones((8, 12), np.float32)
    cs = [np.full((8, 12), i, np.float32) for i in range(300)]  # 601 pointers unfused: 4.8 kB
    program = compile_ptx(optimized(lambda x, cs: [np.sum(x * c, axis=1) for c in cs], x, cs),
                          arch)
    assemble(program.ptx, arch, tmp_path)
