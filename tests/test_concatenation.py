"""Concatenations of Python lists of arrays (``np.stack(frames)``, ``np.concatenate(chunks)``):
NumPy's results exactly, on every backend, however many arrays the list holds.

A kernel whose result is a concatenation writes each operand by a loop of its own (no
per-element search for the operand); an inner concatenation searches its operands by
bisection; a concatenation of more operands than a kernel takes is a tree of concatenations
(``passes/concatenate_splitting.py``); a kernel of more buffers than ctypes passes is called
through its packed entry."""
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import toolkit as tk
from toolkit.passes import concatenate_splitting

from helpers import sweep_examples
from test_gpu_codegen import assemble, needs_ptxas

LISTS = [
    ("concatenate", lambda xs: np.concatenate(xs)),
    ("stack", lambda xs: np.stack(xs)),
    ("stack columns", lambda xs: np.stack(xs, axis=1)),
    ("hstack of columns", lambda xs: np.hstack([x.reshape(-1, 1) for x in xs])),
    ("sines concatenated", lambda xs: np.concatenate([np.sin(x) * k for k, x in enumerate(xs)])),
]


def _arrays(n: int, length: int = 6, dtype=np.float64, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(length) * 100).astype(dtype) for _ in range(n)]


def _check(fn, xs, backend: str, exact: bool = True) -> None:
    got = tk.device_get(tk.jit(fn, backend=backend, on_recompile="ignore")(xs))
    want = fn(xs)
    assert got.dtype == want.dtype and got.shape == want.shape
    if exact:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-12)


@pytest.mark.parametrize("name, fn", LISTS, ids=[n for n, _ in LISTS])
@pytest.mark.parametrize("n", [1, 2, 5, 33, 100])
@pytest.mark.parametrize("backend", ["cpu", "interpreter"])
def test_a_list_of_arrays_concatenates_as_numpy_does(name, fn, n, backend):
    _check(fn, _arrays(n), backend, exact=not name.startswith("sines"))


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint64, np.float16, np.float32,
                                   np.complex128])
def test_every_dtype_is_copied_bit_for_bit(dtype):
    xs = _arrays(40, 5, dtype)
    xs[3] = np.array([-0.0, np.nan, np.inf, -np.inf, 1.0]).astype(dtype) if np.dtype(
        dtype).kind in "fc" else xs[3]
    for _, fn in LISTS[:4]:
        got = tk.jit(fn, backend="cpu", on_recompile="ignore")(xs)
        want = fn(xs)
        assert got.dtype == want.dtype
        # (bit for bit: -0.0 stays -0.0, the NaN's payload is the NaN's)
        assert got.tobytes() == want.tobytes()


def test_empty_arrays_in_the_list_take_no_room():
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal(k % 3) for k in range(50)]  # lengths 0, 1, 2, ...
    _check(lambda xs: np.concatenate(xs), xs, "cpu")
    rows = [rng.standard_normal((k % 2, 3)) for k in range(40)]
    _check(lambda xs: np.concatenate(xs), rows, "cpu")
    _check(lambda xs: np.concatenate(xs, axis=1), [r.T for r in rows], "cpu")


@pytest.mark.parametrize("threads", [1, 3])
def test_threads_split_a_concatenation_at_any_row(threads, monkeypatch):
    """Split over rows, each thread writes the part of each operand its rows hold, whether the
    concatenation runs along the rows (operands of uneven lengths, boundaries inside a
    thread's range) or across them."""
    from toolkit.backends.cpu import executor

    monkeypatch.setattr(executor, "PARALLEL_THRESHOLD", 0)
    rng = np.random.default_rng(2)
    rows = [rng.standard_normal((k, 7)) for k in (5, 1, 9, 0, 13, 2)]
    cols = [rng.standard_normal((29, k)) for k in (5, 1, 9, 0, 13, 2)]
    for fn, xs in [(lambda xs: np.concatenate(xs), rows),
                   (lambda xs: np.concatenate(xs, axis=1), cols),
                   (lambda xs: np.concatenate([x * 2 for x in xs], axis=1), cols)]:
        c = tk.jit(fn, backend="cpu", on_recompile="ignore").lower(xs).compile()
        monkeypatch.setattr(c._executable, "threads", threads)
        np.testing.assert_array_equal(c(xs), fn(xs))


def _concatenates(compiled) -> list[int]:
    """How many operands each concatenate of the optimised HLO takes."""
    counts = []
    for line in str(compiled.optimized_hlo).splitlines():
        if " concatenate(" in line:
            counts.append(line.split(" concatenate(")[1].split(")")[0].count("%"))
    return counts


def test_a_wide_concatenation_is_a_tree_of_kernel_sized_ones():
    xs = _arrays(1100, 4)
    f = tk.jit(lambda xs: np.stack(xs), backend="cpu")
    c = f.lower(xs).compile()
    widths = _concatenates(c)
    # 1,100 operands: 35 concatenations of 31-32, one of 35, one of 2 at the top
    assert max(widths) <= 32 and sum(widths) == 1100 + 35 + 2, widths
    reasons = [d for d in c.fusion_decisions if d.reason == "CONCATENATE_SPLIT"]
    assert len(reasons) == 1 and "1100 operands" in reasons[0].message
    np.testing.assert_array_equal(c(xs), np.stack(xs))


def test_without_the_split_the_concatenation_is_one_instruction(monkeypatch):
    """(The test above fails without the pass.)"""
    from toolkit.passes import pipeline

    monkeypatch.setattr(pipeline, "split_wide_concatenates",
                        lambda module, fanout: (module, pipeline.Counter(), []))
    xs = _arrays(40, 4)
    c = tk.jit(lambda xs: np.stack(xs), backend="interpreter").lower(xs).compile()
    assert _concatenates(c) == [40]


def test_balanced_groups_keep_order_and_sizes_within_one():
    items = list(range(100))
    groups = concatenate_splitting._balanced_groups(items, 32)
    assert [len(g) for g in groups] == [25, 25, 25, 25]
    assert sum(groups, []) == items
    assert concatenate_splitting._balanced_groups(list(range(33)), 32) == [
        list(range(17)), list(range(17, 33))]
    with pytest.raises(ValueError, match="fanout of at least 2"):
        concatenate_splitting.split_wide_concatenates(None, 1)


def _emitted_llvm(fn, args, monkeypatch) -> str:
    """The kernels' LLVM IR as the emitter wrote it (before LLVM's optimisation)."""
    import toolkit.backends.cpu as cpu

    texts = []
    compile_parts = cpu.compile_ir_parts
    monkeypatch.setattr(cpu, "compile_ir_parts", lambda parts: (
        texts.extend(parts), compile_parts(parts))[1])
    monkeypatch.setenv("TOOLKIT_CACHE_DIR", "off")
    tk.jit(fn, backend="cpu", on_recompile="ignore").lower(args).compile()
    return "\n".join(texts)


def test_a_concatenation_kernel_writes_each_operand_by_a_loop_of_its_own(monkeypatch):
    xs = _arrays(6, 64)
    root = _emitted_llvm(lambda xs: np.concatenate([x * 2 for x in xs]), xs, monkeypatch)
    assert "concat." not in root  # no search for the operand
    assert root.count("d0.body") >= 6 * 2  # a loop per operand (its header, its exit branch)
    # read inside a reduction, the operand is searched for by bisection: 5 comparisons for 6
    inner = _emitted_llvm(
        lambda xs: np.concatenate([x * 2 for x in xs]).reshape(6, 64).sum(axis=1), xs,
        monkeypatch)
    assert inner.count("icmp slt i64 %") >= 5 and "concat.done" in inner
    # (each of the 5 comparisons branches to two blocks; the leaves are its 6 operands)
    assert len(re.findall(r'^"?concat\.[\d.]+"?:', inner, re.M)) == 2 * 5


@settings(max_examples=sweep_examples(25), deadline=None)
@given(data=st.data())
def test_random_lists_concatenate_as_numpy_does(data):
    rank = data.draw(st.integers(1, 3), "rank")
    axis = data.draw(st.integers(0, rank - 1), "axis")
    n = data.draw(st.integers(1, 40), "n")
    dims = data.draw(st.lists(st.integers(0, 3), min_size=rank, max_size=rank), "dims")
    lengths = data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n), "lengths")
    dtype = data.draw(st.sampled_from([np.int32, np.float32, np.float64]), "dtype")
    rng = np.random.default_rng(n)
    xs = []
    for k in lengths:
        shape = list(dims)
        shape[axis] = k
        xs.append((rng.standard_normal(shape) * 50).astype(dtype))
    scale = data.draw(st.booleans(), "scaled")
    # reversed: the concatenation is read inside the kernel (its operand found by bisection)
    reverse = data.draw(st.booleans(), "reversed")

    def fn(xs):
        out = np.concatenate([x * 3 if scale else x for x in xs], axis=axis)
        return out[..., ::-1] if reverse else out

    for backend in ("cpu", "interpreter"):
        _check(fn, xs, backend)


@pytest.mark.parametrize("name, fn", LISTS, ids=[n for n, _ in LISTS])
@pytest.mark.parametrize("n", [5, 100])
def test_a_list_of_arrays_concatenates_on_the_simulated_gpu(name, fn, n):
    _check(fn, _arrays(n), "gpu-simulated", exact=not name.startswith("sines"))


def test_a_kernel_of_more_buffers_than_ctypes_passes_runs_through_its_packed_entry(
        monkeypatch):
    """ctypes calls functions of at most 1,024 arguments: a kernel of more buffers is called
    with its pointers in one array (before, a concatenation of 1,200 arrays failed to compile:
    "_argtypes_ has too many arguments (1203)"). Forced here at 8 buffers."""
    from toolkit.backends.cpu import native

    monkeypatch.setattr(native, "CTYPES_MAX_POINTERS", 8)
    monkeypatch.setenv("TOOLKIT_NATIVE_CALL", "0")
    xs = _arrays(20, 16)

    def fn(xs):
        return sum(np.sin(x) * k for k, x in enumerate(xs))

    c = tk.jit(fn, backend="cpu").lower(xs).compile()
    (kernel,) = [s for s in c._executable.steps if s.kind == "kernel"]
    assert kernel.packed_address and len(kernel.inputs) == 20
    out = np.empty(16)
    kernel.fn(*[x.ctypes.data for x in xs], out.ctypes.data, 0, 16)
    np.testing.assert_allclose(out, fn(xs), rtol=1e-13)
    with pytest.raises(ValueError, match="no packed entry"):
        native.ctypes_function(kernel.address, 21)


@needs_ptxas
def test_a_list_of_1200_arrays_assembles_for_the_gpu_and_runs_on_the_simulated_device(
        tmp_path):
    """One kernel of 1,201 pointers was past a GPU kernel's parameter space (ptxas: "uses too
    much parameter space (0x2590 bytes, 0x1100 max)"), and took 35 s to compile."""
    xs = _arrays(1200, 8)
    fn = tk.jit(lambda xs: np.stack(xs, axis=1), backend="gpu-simulated")
    assemble(fn.lower(xs).compile().as_text("ptx"), "sm_90", tmp_path)
    np.testing.assert_array_equal(tk.device_get(fn(xs)), np.stack(xs, axis=1))
