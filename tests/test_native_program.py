"""Runs of small kernels and plain matrix products execute as one native call per run
(toolkit/backends/cpu/native_program.py), with exactly the numbers of step-by-step dispatch."""
import numpy as np
import pytest

import toolkit as tk
from toolkit.backends.cpu.executor import native_run_steps
from toolkit.workloads import dot_chain

import programs

pytestmark = pytest.mark.skipif(native_run_steps is None,
                                reason="the C extension (_kernel_call) was built without run_steps")


def _run(fn, args, monkeypatch, native: bool):
    monkeypatch.setenv("TOOLKIT_NATIVE_PROGRAM", "1" if native else "0")
    f = tk.jit(lambda *a: fn(*a), backend="cpu")
    out = f(*args)
    return out, f.compiled(*args)._executable


@pytest.mark.parametrize("name", sorted(programs.make_cases(np.random.default_rng(0))))
def test_native_segments_give_the_numbers_of_step_by_step_dispatch(name, monkeypatch):
    fn, args = programs.make_cases(np.random.default_rng(0))[name]
    got, _ = _run(fn, args, monkeypatch, True)
    want, exe = _run(fn, args, monkeypatch, False)
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    assert all(program is None for program, *_ in exe.segments)


def test_a_chain_of_small_dots_is_one_native_call(monkeypatch):
    x = np.random.default_rng(0).standard_normal((16, 16), dtype=np.float32)
    w = x * np.float32(0.1)
    got, exe = _run(dot_chain(np), (x, w), monkeypatch, True)
    ((program, steps, *_),) = exe.segments
    assert program is not None and len(steps) == 200
    want, _ = _run(dot_chain(np), (x, w), monkeypatch, False)
    np.testing.assert_array_equal(got, want)
    again = tk.jit(dot_chain(np), backend="cpu")
    for _ in range(3):  # later calls reuse the plan, and fresh results every call
        first, second = again(x, w), again(x, w)
        assert first is not second
        np.testing.assert_array_equal(first, want)


def test_host_steps_split_the_native_runs(monkeypatch):
    def f(x, w):
        y = np.tanh(x @ w) @ w
        z = np.sort(y, axis=1)  # a host routine between two native runs
        return np.exp(z @ w) @ w

    x = np.random.default_rng(1).standard_normal((8, 8))
    got, exe = _run(f, (x, x * 0.1), monkeypatch, True)
    kinds = [(program is not None, len(steps)) for program, steps, *_ in exe.segments]
    assert kinds[0][0] and not kinds[1][0] and kinds[2][0], kinds
    np.testing.assert_allclose(got, f(x, x * 0.1), rtol=1e-12)


def test_profiled_runs_still_time_every_kernel(monkeypatch):
    x = np.random.default_rng(2).standard_normal((16, 16), dtype=np.float32)
    f = tk.jit(dot_chain(np), backend="cpu")
    f(x, x)
    with tk.profile() as prof:
        f(x, x)
    assert len(prof.kernels) == 200


def test_a_program_that_is_one_native_call_runs_from_its_own_buffers_on_every_thread():
    """A program whose steps are one native segment runs straight from its arguments (no
    table of every slot): fresh outputs each call, the caller's array for an argument it
    writes in place, temporaries of its own on each thread, and a non-contiguous argument
    made contiguous first. Many threads at once give each its own right result."""
    import threading

    def f(x, y):
        t = np.tanh(x) @ y  # a temporary between the kernel and the dot
        return t + 1.0, (t * 2.0).sum()

    jf = tk.jit(f, backend="cpu")
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((16, 16)) for _ in range(8)]
    y = rng.standard_normal((16, 16))
    jf(xs[0], y)
    exe = jf.compiled(xs[0], y)._executable
    assert exe._one_program is not None
    first = jf(xs[0], y)
    again = jf(xs[0], y)
    assert first[0] is not again[0]  # fresh outputs
    np.testing.assert_allclose(first[0], f(xs[0], y)[0], rtol=1e-12)
    strided = np.asfortranarray(xs[1])
    np.testing.assert_allclose(jf(strided, y)[0], f(xs[1], y)[0], rtol=1e-12)
    got, errors = {}, []

    def worker(k):
        try:
            for _ in range(50):
                got[k] = jf(xs[k], y)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for k in range(8):
        want = f(xs[k], y)
        np.testing.assert_allclose(got[k][0], want[0], rtol=1e-12)
        np.testing.assert_allclose(got[k][1], want[1], rtol=1e-12)


def test_an_argument_written_in_place_is_written_as_numpy_writes_it():
    def f(a, b):
        a[1:3] = np.tanh(a[1:3]) * 2.0 + b[:2] @ b[:, 0]
        return a * 1.0

    jf = tk.jit(f, backend="cpu")
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(6), rng.standard_normal((4, 4))
    want_a = a.copy()
    want = f(want_a, b)
    for _ in range(2):  # the compiling call and a cache hit
        given = a.copy()
        out = jf(given, b)
        np.testing.assert_allclose(out, want, rtol=1e-12)
        np.testing.assert_allclose(given, want_a, rtol=1e-12)


def _covariance_by_columns(data):  # (test_loop_rolling's, with a value read after the loops:
    # a traced helper must live in the module _run traces, where np's buffers are traced)
    m = data.shape[1]
    data = data - data.mean(axis=0)
    cov = np.zeros((m, m), dtype=data.dtype)
    for i in range(m):
        for j in range(i, m):
            cov[i, j] = np.sum(data[:, i] * data[:, j]) / (data.shape[0] - 1)
            cov[j, i] = cov[i, j]
    return cov, data[0] * 2


def _filter_and_reuse(x):
    y = x * 1.0  # a buffer the function makes, filled by a loop that rolls
    for j in range(1, x.shape[1]):
        y[:, j] = 0.5 * x[:, j] + 0.45 * y[:, j - 1]
    return y + x, x[:, ::-1] * 0.5  # the loop's inputs read again after it


@pytest.mark.parametrize("fn, shape", [(_covariance_by_columns, (20, 24)),
                                       (_filter_and_reuse, (6, 300))])
def test_rolled_loops_run_inside_the_native_program_with_step_by_steps_numbers(
        fn, shape, monkeypatch):
    """A while loop with a native driver is one op of the native program (no trip through
    Python per loop): a triangular nest rolls into one loop per row, and all of them, their
    state run in place, copied or only read, give the bits of Python-driven dispatch."""
    import toolkit.passes.loop_rolling as loop_rolling

    monkeypatch.setattr(loop_rolling, "SHORT_LOOPS_FROM", 0)
    x = np.random.default_rng(3).standard_normal(shape)
    got, exe = _run(fn, (x,), monkeypatch, True)
    native_loops = [s for program, steps, *_ in exe.segments if program is not None
                    for s in steps if s.kind == "control"]
    assert native_loops, [(p is not None, [s.kind for s in st]) for p, st, *_ in exe.segments]
    want, exe_python = _run(fn, (x,), monkeypatch, False)
    assert all(program is None for program, *_ in exe_python.segments)
    for g, w, n in zip(got, want, fn(x.copy())):
        np.testing.assert_array_equal(g, w)
        np.testing.assert_allclose(g, n, rtol=1e-12, atol=1e-12)
    again = tk.jit(fn, backend="cpu")
    for _ in range(3):  # each call its own buffers and its own loop arenas
        for g, w in zip(again(x), want):
            np.testing.assert_array_equal(g, w)


def test_a_profiled_call_runs_the_program_it_times_and_computes_the_same_bits():
    """Under tk.profile() the native segments run as they do unprofiled, each op timed inside
    the one call: dots still read their slices' windows in place (NumPy's bits: a copy read
    with another leading dimension makes OpenBLAS sum in another order), the slices nobody
    needs do not run, and so do not appear; a loop inside the program reports its trips."""
    from toolkit.workloads_loops import covariance_by_columns

    data = np.random.default_rng(4).standard_normal((300, 40))
    f = tk.jit(covariance_by_columns(np), backend="cpu")
    unprofiled = f(data)
    with tk.profile() as prof:
        profiled = f(data)
    want = covariance_by_columns(np)(data)
    np.testing.assert_array_equal(unprofiled, want)
    np.testing.assert_array_equal(profiled, want)
    exe = f.lower(data).compile()._executable
    ran = [s.inst.name for program, steps, _, _, op_steps in exe.segments
           for s in (op_steps if program is not None else steps)]
    assert sorted(e.name for e in prof.kernels) == sorted(ran)
    from toolkit.backends.cpu.dot_views import window_of

    skipped = [s for s in exe.steps if s.inst.name not in set(ran)]  # windows read in place
    assert skipped and all(window_of(s, exe._slot_types) is not None for s in skipped), skipped
    assert all(e.duration >= 0 for e in prof.kernels)


def test_a_loop_inside_a_native_program_reports_its_trips_when_profiled(monkeypatch):
    import toolkit.passes.loop_rolling as loop_rolling

    monkeypatch.setattr(loop_rolling, "SHORT_LOOPS_FROM", 0)
    x = np.random.default_rng(3).standard_normal((6, 300))
    f = tk.jit(_filter_and_reuse, backend="cpu")
    f(x)
    with tk.profile() as prof:
        got = f(x)
    for g, w in zip(got, _filter_and_reuse(x.copy())):
        np.testing.assert_allclose(g, w, rtol=1e-12)
    loops = [e for e in prof.kernels if e.launch.startswith("trips=")]
    assert loops and all(", native" in e.launch for e in loops), [e.launch for e in prof.kernels]
    assert sum(int(e.launch.split(",")[0][6:]) for e in loops) >= 290, [e.launch for e in loops]


def test_a_build_that_times_no_op_still_profiles_the_program_it_runs(monkeypatch):
    """An extension built before run_steps took a times buffer: the profiled call still runs
    the native program (NumPy's bits), its time split evenly over the ops."""
    from toolkit.backends.cpu import executor
    from toolkit.workloads_loops import covariance_by_columns

    monkeypatch.setattr(executor, "_NATIVE_TIMED", False)
    data = np.random.default_rng(4).standard_normal((300, 40))
    f = tk.jit(covariance_by_columns(np), backend="cpu")
    f(data)
    with tk.profile() as prof:
        profiled = f(data)
    np.testing.assert_array_equal(profiled, covariance_by_columns(np)(data))
    assert prof.kernels and any("time split evenly" in e.launch for e in prof.kernels)


def _diagonal_trace(a):
    """A scalar accumulated over a Python loop, then broadcast: kernels given dozens of offsets
    as operands (offset_operands), more buffers than the dispatcher calls directly."""
    trace = 0.0
    for i in range(a.shape[0]):
        trace += np.tanh(a[i, i])
    return a + trace


def test_kernels_of_many_buffers_run_in_the_native_program_through_their_packed_entry(
        monkeypatch):
    from toolkit.backends.cpu.executor import native_kernel_pointers
    if native_kernel_pointers <= 16:
        pytest.skip("an older build of the C extension calls at most 16 buffers")
    a = np.random.default_rng(3).random((300, 300))
    got, exe = _run(_diagonal_trace, (a,), monkeypatch, True)
    wide = [s for s in exe.steps if s.kind == "kernel" and len(s.inputs) + len(s.outputs) > 16]
    assert wide and all(s.packed_address for s in wide)
    ((program, steps, *_),) = exe.segments  # every step, the wide ones too, in one native call
    assert program is not None and len(steps) == len(exe.steps)
    want, _ = _run(_diagonal_trace, (a,), monkeypatch, False)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, _diagonal_trace(a), rtol=1e-13)


@pytest.mark.parametrize("fn, shapes", [
    (lambda a, y: a @ y, ((120, 120), (120,))),  # gemv
    (lambda a, y: y @ a, ((120, 120), (120,))),  # gemv, transposed
    (lambda a, b: a @ b, ((60, 70), (70, 50))),  # gemm
    (lambda a, b: a[0] @ b[:, 0], ((60, 70), (70, 50))),  # a dot product
])
def test_a_lone_matrix_product_is_a_one_op_native_program(fn, shapes):
    """A program of one BLAS call runs as a native program of one op: from Python, NumPy's
    matmul into the output cost 4.5 µs more than the gemv itself."""
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s) for s in shapes]
    f = tk.jit(fn, backend="cpu")
    np.testing.assert_array_equal(f(*args), fn(*args))
    ((program, steps, *_),) = f.compiled(*args)._executable.segments
    assert program is not None and [s.kind for s in steps] == ["dot"]
