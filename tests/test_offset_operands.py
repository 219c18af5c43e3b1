"""Offsets as operands (passes/offset_operands.py): the fusions of an unrolled loop that differ
only in where they slice and write take those offsets as operands, so they compile to one
kernel, compute the very same bits, and still write their windows in place."""
import os
import pathlib
import shutil
import subprocess

import numpy as np
import pytest

import toolkit as tk
import toolkit.passes.loop_rolling as loop_rolling
import toolkit.passes.offset_operands as offset_operands
from toolkit.backends.gpu import compile_ptx
from toolkit.workloads import recursive_filter
from toolkit.workloads_loops import lu_no_pivoting, triangular_solve

GOLDEN = pathlib.Path(__file__).parent / "golden" / "recursive_filter.offsets.hlo"
UPDATE = os.environ.get("TOOLKIT_UPDATE_GOLDEN") == "1"
BACKENDS = ["cpu", "interpreter", "gpu-simulated"]
FILTER = recursive_filter(np)


@pytest.fixture(autouse=True)
def _no_disk_cache(monkeypatch):
    monkeypatch.setenv("TOOLKIT_CACHE_DIR", "off")
    # the unrolled fusions this pass shares code between: a loop the rolling pass would roll
    # back into a while (tests/test_loop_rolling.py) stays unrolled here
    monkeypatch.setattr(loop_rolling, "MIN_TRIPS", 10**9)


def _without_the_pass(monkeypatch):
    monkeypatch.setattr(offset_operands, "MIN_GROUP", 10**9)


def _filter_args(rows=32, columns=200):
    return np.random.default_rng(0).standard_normal((rows, columns)), 0.5, 0.45


def _compiled(fn, *args, backend="cpu"):
    return tk.jit(fn, backend=backend).lower(*args).compile()


def test_the_column_updates_of_a_recursive_filter_compile_into_one_kernel():
    args = _filter_args()
    compiled = _compiled(FILTER, *args)
    writes = [s for s in compiled.executable.steps if s.kind == "kernel"]
    assert len(writes) >= 200  # each column its own kernel call in the program and profile
    # one function for the first column, one for j = 1 (its fusion's parameters come in
    # another order), one for the other 198
    assert compiled.as_text("llvm").count("define ") <= 3
    assert np.array_equal(compiled(*args), FILTER(*args))


def test_without_the_pass_each_column_compiles_on_its_own(monkeypatch):
    _without_the_pass(monkeypatch)
    compiled = _compiled(FILTER, *_filter_args(columns=40))
    assert compiled.as_text("llvm").count("define ") >= 39


def test_the_shared_column_kernel_still_writes_each_column_in_place():
    """The update's start is an operand now, not a constant in the kernel; the buffer plan
    reads its value from the fusion's constant operand, sees that the column written (j) is
    not the column read (j - 1), and writes it in place: no copy of the whole array per
    column (what issue 27 fixed first)."""
    x, a, b = _filter_args(64, 40)
    compiled = _compiled(FILTER, x, a, b)
    assert compiled.as_text("llvm").count("define ") <= 3
    writes = [s for s in compiled.executable.steps
              if s.kind == "kernel" and s.extra["spec"].kind == "update_slice"]
    assert len(writes) == 39
    assert all(s.outputs[0] in s.inputs and s.work == 64 for s in writes)
    decisions = compiled.buffer_decisions
    assert len(decisions) == 39
    assert all(d.in_place and d.reason == "IN_PLACE" and d.bytes_copied == 0 for d in decisions)
    assert compiled.as_text("buffers").endswith(
        "39 in place, 0 copies inserted (0 B copied per run)")
    assert np.array_equal(compiled(x, a, b), FILTER(x, a, b))


def test_the_optimized_hlo_of_a_rewritten_fusion_reads_like_xla():
    """Golden text: the trips from j = 2 on slice x and y at operand offsets (one for column
    j of x and the column j written, one for the column j - 1 read) and write at one."""
    x, a, b = _filter_args(4, 5)
    text = tk.jit(FILTER, backend="interpreter").compiled(x, a, b).optimized_hlo.to_text(
        metadata=False)
    if UPDATE or not GOLDEN.exists():
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text()
    assert "dynamic-slice(%param_2, %constant.1, %offset_0), dynamic_slice_sizes={4,1}" in text
    assert "dynamic-update-slice(%param_3, %reshape.33, %constant.10, %offset_0)" in text
    # the text parses back and runs to the same bits
    (got,) = tk.hlo.run(tk.hlo.parse(text), x, a, b)
    assert np.array_equal(got, FILTER(x, a, b))


def test_every_rewritten_fusion_says_what_it_shares():
    compiled = _compiled(FILTER, *_filter_args(8, 12))
    shared = [d for d in compiled.fusion_decisions if d.reason == "OFFSETS_AS_OPERANDS"]
    assert len(shared) == 11  # j = 1 .. 11
    assert all(d.message.startswith("takes its offsets as operands: shares code with 10 alike "
                                    "kernels") for d in shared)
    assert {d.producer for d in shared} == {shared[0].consumer}
    rewrites = dict(next(e for e in compiled.pass_events if e.pass_name == "offset-operands")
                    .rewrites)
    assert rewrites["fusions taking offsets as operands"] == 11


def _lu_args(n=10):
    return (np.random.default_rng(3).random((n, n)) + n * np.eye(n),)


def _triangular_args(n=12):
    r = np.random.default_rng(1)
    return np.tril(r.random((n, n))) + n * np.eye(n), r.random(n)


PROGRAMS = {
    "recursive_filter": (FILTER, lambda: _filter_args(6, 30)),
    "lu": (lu_no_pivoting(np), _lu_args),
    "triangular": (triangular_solve(np), _triangular_args),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_unrolled_loops_compute_the_same_bits_with_and_without_the_pass(name, backend,
                                                                       monkeypatch):
    """The dynamic offsets change which code runs, never a bit of what the kernels compute; and
    the programs still compute NumPy's results (bit for bit on the CPU, where they did before:
    LU's products of a row and a column are not NumPy's BLAS dot, with or without the pass).
    The reference interpreter reduces a slice (a view) and a dynamic-slice (a copy) in NumPy's
    order for their layouts, which may differ in the last bit: it is held to NumPy's tolerance."""
    fn, make_args = PROGRAMS[name]
    args = make_args()
    got = np.asarray(tk.jit(fn, backend=backend)(*[np.copy(a) for a in args]))
    assert any(d.reason == "OFFSETS_AS_OPERANDS"
               for d in _compiled(fn, *args, backend=backend).fusion_decisions)
    _without_the_pass(monkeypatch)
    before = np.asarray(tk.jit(fn, backend=backend)(*[np.copy(a) for a in args]))
    want = fn(*[np.copy(a) for a in args])
    if backend != "interpreter":
        assert np.array_equal(got, before)
    if backend == "cpu" and name != "lu":
        assert np.array_equal(got, want)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_lu_kernels_collapse_to_about_one_per_size(monkeypatch):
    args = _lu_args(12)
    shared = _compiled(lu_no_pivoting(np), *args).as_text("llvm").count("define ")
    _without_the_pass(monkeypatch)
    alone = _compiled(lu_no_pivoting(np), *args).as_text("llvm").count("define ")
    assert shared * 5 < alone


def test_the_gpu_backend_emits_the_shared_kernel_once_and_ptxas_assembles_it():
    x, a, b = _filter_args(16, 40)
    module = tk.jit(FILTER, backend="interpreter").compiled(x, a, b).optimized_hlo
    program = compile_ptx(module, "sm_80")
    assert len(program.kernels) >= 40 and program.ptx.count(".entry") <= 3
    if shutil.which("ptxas"):
        done = subprocess.run(["ptxas", "-arch=sm_80", "-o", "/dev/null", "-"],
                              input=program.ptx, text=True, capture_output=True)
        assert done.returncode == 0, done.stderr


# ---- the key: what may differ, what may not --------------------------------------------------
def _module(*fusions: str) -> str:
    comps, calls = [], []
    for k, body in enumerate(fusions):
        comps.append(f"%f{k} (p: f32[8,8]) -> f32[8,2] {{\n  %p = f32[8,8]{{1,0}} parameter(0)\n"
                     f"{body}\n}}\n")
        calls.append(f"  %r{k} = f32[8,2]{{1,0}} fusion(%x), kind=kLoop, calls=%f{k}")
    names = ", ".join(f"%r{k}" for k in range(len(fusions)))
    shape = ", ".join("f32[8,2]{1,0}" for _ in fusions)
    return ("HloModule m\n" + "".join(comps) + "ENTRY %e (x: f32[8,8]) -> (" + shape + ") {\n"
            "  %x = f32[8,8]{1,0} parameter(0)\n" + "\n".join(calls) +
            f"\n  ROOT %t = ({shape}) tuple({names})\n}}\n")


def _slice(start: int, size: int = 2, stride: int = 1) -> str:
    return (f"  ROOT %s = f32[8,2]{{1,0}} slice(%p), "
            f"slice={{[0:8], [{start}:{start + size * stride - stride + 1}:{stride}]}}")


def _rewritten(text: str) -> int:
    module = tk.hlo.parse(text)
    _, counts, _ = offset_operands.offset_operands(module)
    return counts["fusions taking offsets as operands"]


def test_slices_at_other_offsets_share_and_other_sizes_or_strides_do_not():
    assert _rewritten(_module(_slice(0), _slice(3), _slice(6))) == 3
    assert _rewritten(_module(_slice(0), _slice(0))) == 0  # identical: shared already
    assert _rewritten(_module(_slice(0, stride=2), _slice(1, stride=2))) == 0
    other_size = "  %w = f32[8,3]{1,0} slice(%p), slice={[0:8], [1:4]}\n" \
                 "  ROOT %s = f32[8,2]{1,0} slice(%w), slice={[0:8], [0:2]}"
    assert _rewritten(_module(_slice(0), other_size)) == 0


def test_a_constant_used_as_a_value_keeps_its_value_in_the_key():
    def scaled(c: int) -> str:
        return (f"  %c = s32[] constant({c})\n  %f = f32[] convert(%c)\n"
                "  %b = f32[8,2]{1,0} broadcast(%f), dimensions={}\n"
                "  %s = f32[8,2]{1,0} slice(%p), slice={[0:8], [0:2]}\n"
                "  ROOT %m = f32[8,2]{1,0} multiply(%s, %b)")
    assert _rewritten(_module(scaled(2), scaled(3))) == 0


def test_clamped_constant_starts_clamp_the_same_as_operands():
    """A start index past the end clamps, constant or operand: the values are the same."""
    def update(start: int) -> str:
        return ("  %one = f32[] constant(1)\n"
                "  %z = f32[8,1]{1,0} broadcast(%one), dimensions={}\n"
                "  %s = f32[8,2]{1,0} slice(%p), slice={[0:8], [0:2]}\n"
                f"  %i = s64[] constant({start})\n  %o = s64[] constant(0)\n"
                "  ROOT %u = f32[8,2]{1,0} dynamic-update-slice(%s, %z, %o, %i)")
    text = _module(update(0), update(1), update(7))
    x = np.arange(64, dtype=np.float32).reshape(8, 8)
    assert _rewritten(text) == 3
    module = tk.hlo.parse(text)
    new, _, _ = offset_operands.offset_operands(module)
    for backend in ("cpu", "interpreter"):
        want = tk.hlo.run(module, x, backend=backend, pipeline="none")
        got = tk.hlo.run(new, x, backend=backend, pipeline="none")
        for w, g in zip(want, got, strict=True):
            assert np.array_equal(w, g)
        assert np.array_equal(got[2][:, 1], np.ones(8, np.float32))  # start 7 clamps to 1


def _row_prefixes(L):
    return tuple(L[i, :i + 1] * 2.0 + 1.0 for i in range(L.shape[0]))


def test_windows_of_every_length_take_their_offsets_as_operands(monkeypatch):
    """``L[i, :i + 1]`` for every row: fusions alike up to their offsets and extents (another
    length each trip) take their offsets as operands too. The row, a window of one element,
    becomes an operand; the extent enters no code, so the CPU compiles it once (the rest are
    aliases: backends/llvm/shared_code). The decisions say the kernels are alike up to
    extents, not that they share code."""
    import re

    monkeypatch.setenv("TOOLKIT_CACHE_DIR", "off")
    L = np.random.default_rng(4).random((24, 24))
    compiled = tk.jit(_row_prefixes, backend="cpu").lower(L).compile()
    for got, want in zip(compiled(L), _row_prefixes(L), strict=True):
        np.testing.assert_array_equal(got, want)
    lifted = [d for d in compiled.fusion_decisions if d.reason == "OFFSETS_AS_OPERANDS"]
    assert len(lifted) >= 22 and all(
        "alike up to offsets and extents with" in d.message for d in lifted)
    llvm_ir = compiled.as_text("llvm")
    defined = re.findall(r'^define void @"?loop_\w+_fusion', llvm_ir, re.M)
    aliases = re.findall(r'^@"?loop_\w+_fusion[^ ]* = alias ', llvm_ir, re.M)
    assert len(aliases) >= 18 and len(defined) <= 6, (len(defined), len(aliases))
