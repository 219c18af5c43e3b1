"""Row groups on the CPU: consecutive kernels over the same rows run block by block, with
values only the group reads kept in block-sized scratch. Which kernels may join (row
locality), that results match the interpreter whatever the block and thread split, and
what a profile shows."""
import numpy as np
import pytest
from hypothesis import given, settings

import toolkit as tk
from toolkit.backends.cpu import executor, row_groups
from toolkit.backends.llvm.row_locality import row_local_parameters
from toolkit.workloads import layernorm, softmax

import programs
from test_cpu_backend import assert_close, both
from test_random_programs import inputs_strategy, run_program, steps_strategy


@pytest.fixture
def always_group(monkeypatch):
    """Group whatever may be grouped, however small, in blocks of a few rows, on 2 threads."""
    monkeypatch.setattr(row_groups, "MIN_GROUP_BYTES", 0)
    monkeypatch.setattr(row_groups, "BLOCK_BYTES", 64)
    monkeypatch.setattr(executor, "PARALLEL_THRESHOLD", 0)
    monkeypatch.setenv("TOOLKIT_NUM_THREADS", "2")
    monkeypatch.setenv("TOOLKIT_CACHE_DIR", "off")


def steps_of(fn, *args):
    return tk.jit(fn, backend="cpu").lower(*args).compile()._executable.steps


def test_softmax_and_layernorm_become_one_group_with_their_temporaries_in_scratch():
    x = np.random.default_rng(0).standard_normal((4096, 1024)).astype(np.float32)
    g = np.ones(1024, np.float32)
    (group,) = steps_of(softmax(np), x)
    assert group.kind == "group" and len(group.extra["group"].members) == 3
    info = group.extra["group"]
    # 4 KB of x, exp and the output per row (+ 2 row statistics): 256 KB
    assert info.block_rows == 20
    # blocks (21 rows), rounded down to whole tiles of four rows
    assert len(info.scratch) == 3  # the row max, exp(x - max) and the row sums never reach memory
    (group,) = steps_of(layernorm(np), x, g, g)
    # mean, variance and its square root (computed once per row, not per element)
    assert group.kind == "group" and len(group.extra["group"].scratch) == 3


def test_small_programs_are_not_grouped():
    x = np.ones((16, 32), np.float32)  # 2 KB: in cache anyway
    assert all(s.kind != "group" for s in steps_of(softmax(np), x))


@pytest.mark.parametrize("fn, local_ranks", [
    # x, and its row maxima broadcast along the row
    (lambda x: x - x.max(-1, keepdims=True), [1, 2]),
    (lambda x: x[::-1] - x.max(-1, keepdims=True)[::-1], []),  # rows reversed: read elsewhere
    (lambda x: x.T + x, []),  # transposed as well: column i of the input is read for row i
    (lambda x: x * x.max(0), [2]),  # column maxima are read at every row; x only at its own
])
def test_row_locality(fn, local_ranks):
    from toolkit.backends.llvm.planning import plan_kernel
    c = tk.jit(fn, backend="interpreter").compiled(np.ones((64, 64), np.float32))
    last = [i for i in c.optimized_hlo.entry.instructions if i.opcode == "fusion"][-1]
    spec = plan_kernel(last)
    local = row_local_parameters(spec)
    assert (
        sorted(
            p.shape.rank
            for p in spec.computation.parameters
            if p.attrs["parameter_number"] in local
        )
        == local_ranks
    )


def test_kernels_reading_an_earlier_result_out_of_row_are_not_grouped(always_group):
    x = np.random.default_rng(1).standard_normal((64, 48)).astype(np.float32)
    fn = lambda a: np.exp(a - a.max(-1, keepdims=True))[::-1] * 2  # noqa: E731
    steps = steps_of(fn, x)
    assert all(
        s.kind != "group" or all("reverse" not in m.inst.name for m in s.extra["group"].members)
        for s in steps
    )
    assert_close(*both(fn, x), approx=True)


@pytest.mark.parametrize("name", sorted(programs.make_cases(np.random.default_rng(0))))
def test_programs_match_the_interpreter_when_grouped(name, always_group):
    fn, args = programs.make_cases(np.random.default_rng(0))[name]
    assert_close(*both(fn, *args), approx=True)


def test_softmax_grouped_matches_ungrouped_exactly(always_group, monkeypatch):
    x = np.random.default_rng(2).standard_normal((300, 77)).astype(np.float32)
    grouped = tk.jit(softmax(np), backend="cpu")
    assert any(s.kind == "group" for s in grouped.compiled(x)._executable.steps)
    monkeypatch.setattr(row_groups, "MIN_GROUP_BYTES", 1 << 62)
    plain = tk.jit(softmax(np), backend="cpu")
    np.testing.assert_array_equal(grouped(x), plain(x))


@settings(max_examples=30, deadline=None)
# float32 dots differ from the interpreter's
@given(steps=steps_strategy, data=inputs_strategy(np.float64))
# by an ulp, which sin(113.1) turns into 1e-3 relative
def test_random_programs_grouped(steps, data):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(row_groups, "MIN_GROUP_BYTES", 0)
        mp.setattr(row_groups, "BLOCK_BYTES", 64)
        mp.setattr(executor, "PARALLEL_THRESHOLD", 0)
        mp.setenv("TOOLKIT_NUM_THREADS", "2")
        mp.setenv("TOOLKIT_CACHE_DIR", "off")
        x, y = data
        assert_close(*both(lambda a, b: run_program(steps, a, b), x, y), approx=True)


def test_profile_shows_each_member_with_its_share_of_the_group(always_group):
    x = np.random.default_rng(3).standard_normal((256, 64)).astype(np.float32)
    f = tk.jit(softmax(np), backend="cpu")
    f(x)
    with tk.profile() as prof:
        out = f(x)
    kernels = prof.kernels
    assert len(kernels) == 3 and all("row group of 3" in k.launch for k in kernels)
    assert [k.start for k in kernels] == sorted(k.start for k in kernels)
    # the group ran as one compiled call (as unprofiled): its members' shares tile its time
    assert all("time split by bytes" in k.launch for k in kernels)
    for a, b in zip(kernels, kernels[1:]):
        assert b.start == pytest.approx(a.start + a.duration, abs=1e-12)
    np.testing.assert_allclose(out, tk.jit(softmax(np), backend="interpreter")(x), rtol=1e-6)


def test_groups_survive_the_persistent_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLKIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(row_groups, "MIN_GROUP_BYTES", 0)
    x = np.random.default_rng(4).standard_normal((128, 96)).astype(np.float32)
    first = tk.jit(softmax(np), backend="cpu").compiled(x)
    again = tk.jit(softmax(np), backend="cpu").compiled(x)
    assert again._executable.cache_status == "persistent_hit"
    assert (
        [s.kind for s in again._executable.steps]
        == [s.kind for s in first._executable.steps]
        == ["group"]
    )
    np.testing.assert_array_equal(first(x), again(x))


def test_kernels_over_no_rows_form_no_group_and_profile(always_group):
    """An empty slice's kernels (a triangular loop's first trip: ``L[0, :0] @ x[:0]``) run
    nothing: they formed a group of 0 rows, whose profiled run divided by its 0-row blocks."""
    def f(a, b):
        return softmax(np)(a[:0] + b[:0]), a * 3.0

    a, b = np.ones((4, 8)), np.ones((4, 8))
    with tk.profile():
        got = tk.jit(f, backend="cpu")(a, b)
    assert got[0].shape == (0, 8) and np.array_equal(got[1], a * 3.0)
    assert all(s.kind != "group" or s.extent for s in steps_of(f, a, b))


def test_kernels_over_a_few_rows_of_a_large_array_are_not_grouped():
    """What decides is the bytes the group's rows stream, not the size of the arrays it reads
    a window of: a triangular loop's kernels over a row slice of a 5 MB matrix made hundreds of
    groups of a few rows, each a Python step between native segments (trisolv at N=800: 65 ms
    where N=500 took 0.23 ms)."""
    big = np.random.default_rng(0).standard_normal((1200, 1200)).astype(np.float32)
    steps = steps_of(lambda a: softmax(np)(a[:3, :7]), big)
    assert not any(s.kind == "group" for s in steps)
    assert any(s.kind == "group" for s in steps_of(softmax(np), big))  # (all of it: grouped)


def test_window_copies_a_dot_reads_in_place_are_not_grouped(always_group):
    """``d[:, i] @ d[:, i:]``: the two slices are windows the dot reads in place (their kernels
    never run). Grouped by their 600 rows, they were copied after all, and each group was a
    Python step between native programs (npbench's covariance at 500x600: 0.37x NumPy)."""
    def covariance(d):
        cov = np.zeros((d.shape[1], d.shape[1]))
        for i in range(d.shape[1]):
            cov[i:, i] = cov[i, i:] = d[:, i] @ d[:, i:] / (d.shape[0] - 1.0)
        return cov

    d = np.random.default_rng(3).standard_normal((60, 12))
    steps = steps_of(covariance, d)
    grouped = [m for s in steps if s.kind == "group" for m in s.extra["group"].members]
    assert not any(m.inst.attrs["calls"].root.opcode in ("slice", "reshape") for m in grouped
                   if m.inst.opcode == "fusion")
    np.testing.assert_array_equal(tk.jit(covariance, backend="cpu")(d), covariance(d))
