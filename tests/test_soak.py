"""The soak script runs (its figures, over 10,000 calls and 1,000 compiles, are in the README)."""
import io

import toolkit.soak as soak


def test_the_soak_script_reports_every_phase():
    out = io.StringIO()
    phases = soak.run(calls=300, compiles=3, threads=3, backend="cpu", out=out)
    text = out.getvalue()
    assert len(phases) == 7 and "ERRORS" not in text
    assert "threads calling at once" in text and "B/compile" in text
    assert soak.rss_bytes() > 0


_COMPILES_STAY_FLAT = r"""
import json, sys
import numpy as np
import toolkit as tk
from toolkit.soak import rss_bytes, trim
from toolkit.backends.llvm.llvm_process import WORKER

g = tk.jit(lambda v: np.tanh(v) * 3.0 + v.sum(), on_recompile="ignore", backend="cpu")
n = 2
def compile_new_shapes(count):
    global n
    for _ in range(count):
        g(np.ones(n, np.float32))
        g.clear_cache()
        n += 1
compile_new_shapes(20)  # warm: the histories, the worker, the allocator's pools
trim()
before = rss_bytes()
compile_new_shapes(int(sys.argv[1]))
trim()
print(json.dumps({"per_compile": (rss_bytes() - before) / int(sys.argv[1]), "workers": WORKER.started}))
"""  # noqa: E501


def _compiles_growth(tmp_path, count: int, **env) -> dict:
    import json
    import os
    import subprocess
    import sys

    script = tmp_path / "flat.py"
    script.write_text(_COMPILES_STAY_FLAT)
    done = subprocess.run(
        [sys.executable, str(script), str(count)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TOOLKIT_CACHE_DIR": "off", "TOOLKIT_BACKEND": "cpu", **env},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_memory_stays_flat_across_compiles_of_new_shapes(tmp_path):
    """Issue 14's bound: after clear_cache() a compile of a new shape leaves at most ~30 KB
    behind (measured 0-1 KB). Without the LLVM worker process llvmlite leaks ~95 KB a compile
    (a PassInstrumentationCallbacks per pass builder): the second run shows the measurement
    sees that (if llvmlite fixes its leak, that run's bound is the one to drop)."""
    flat = _compiles_growth(tmp_path, 50)
    assert flat["per_compile"] <= 30 * 1024, flat
    assert flat["workers"] == 1, flat
    leaky = _compiles_growth(tmp_path, 25, TOOLKIT_LLVM_WORKER="0")
    assert leaky["workers"] == 0 and leaky["per_compile"] > 50 * 1024, leaky



def test_the_llvm_worker_is_replaced_and_compiles_match_in_process():
    """A worker answers with the same bytes this process would emit, is replaced after its
    quota, and a worker that cannot start leaves compiles in this process."""
    import time

    from toolkit.backends.cpu import compiler
    from toolkit.backends.llvm import llvm_worker
    from toolkit.backends.llvm.llvm_process import WorkerProcess, WorkerUnavailable

    ir_text = (
        "define void @k(ptr noalias %x, i64 %n) {\nentry:\n  br label %l\nl:\n"
        "  %i = phi i64 [0, %entry], [%j, %l]\n  %p = getelementptr double, ptr %x, i64 %i\n"
        "  %v = load double, ptr %p\n  %w = fmul double %v, 2.0\n  store double %w, ptr %p\n"
        "  %j = add i64 %i, 1\n  %c = icmp slt i64 %j, %n\n  br i1 %c, label %l, label %e\ne:\n"
        "  ret void\n}\n"
    )
    in_process = llvm_worker.optimize_and_emit(ir_text, compiler.target_machine())
    pool = WorkerProcess(compiles_per_worker=2)
    try:
        answers = []
        while len(answers) < 5:
            try:
                answers.append(pool.compile(ir_text))
            except WorkerUnavailable:  # starting: the caller compiles in-process meanwhile
                time.sleep(0.02)
        assert all(a[0] == in_process[0] and a[1] == in_process[1] for a in answers)
        assert pool.started == 3  # 2 compiles each
        parts = [ir_text, ir_text.replace("@k(", "@k2(")]
        while True:  # the second worker starts on the first parallel request
            try:
                together = pool.compile_parts(parts, 2)
                break
            except WorkerUnavailable:
                time.sleep(0.02)
        threads = [compiler._compile_part(text) for text in parts]
        assert [(t, c) for t, c, _, _ in together] == threads
        while True:
            try:
                pool.compile("this is not LLVM IR")
            except WorkerUnavailable:  # (a worker spent by the parts is being replaced)
                time.sleep(0.02)
                continue
            except RuntimeError as e:  # LLVM's error, raised here as an in-process compile would
                assert "error" in str(e).lower()
                break
            raise AssertionError("invalid IR compiled")
    finally:
        pool.shutdown()


def test_without_a_worker_compiles_run_in_this_process(monkeypatch):
    import numpy as np
    import toolkit as tk
    from toolkit.backends.llvm import llvm_process

    monkeypatch.setattr(llvm_process.sys, "executable", "/nonexistent/python")
    pool = llvm_process.WorkerProcess()
    monkeypatch.setattr(llvm_process, "WORKER", pool)
    from toolkit.backends.cpu import compiler
    monkeypatch.setattr(compiler, "WORKER", pool)
    f = tk.jit(lambda x: x * 3.0 + 1.0, backend="cpu")
    for n in (3, 4, 5):
        np.testing.assert_array_equal(f(np.ones(n)), np.full(n, 4.0))
    assert pool._broken and pool.started == 0


def test_a_forked_child_starts_its_own_llvm_worker():
    """A child of fork() must not write to its parent's worker pipe: it starts its own."""
    import os
    import numpy as np
    import pytest
    import toolkit as tk
    from toolkit.backends.llvm.llvm_process import WORKER

    if not hasattr(os, "fork"):
        pytest.skip("no fork() here")
    f = tk.jit(lambda x: x * 2.0 + 1.0, backend="cpu")
    for n in range(3, 8):  # the worker is up in the parent
        f(np.ones(n))
    parent_workers = list(WORKER._slots)
    pid = os.fork()
    if pid == 0:  # the child: compile new shapes, check, and leave without running pytest's exit
        code = 1
        try:
            ok = WORKER._slots == [] and all(
                np.array_equal(f(np.ones(n)), np.full(n, 3.0)) for n in range(20, 26))
            code = 0 if ok else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert WORKER._slots == parent_workers  # the parent's workers are untouched
    np.testing.assert_array_equal(f(np.ones(30)), np.full(30, 3.0))


_PTX_COMPILES_STAY_FLAT = r"""
import json, sys
import numpy as np
import toolkit as tk
from toolkit.soak import rss_bytes, trim
from toolkit.backends.gpu import compile_ptx
from toolkit.backends.llvm.llvm_process import WORKER

n = 2
def compile_new_shapes(count):
    global n
    for _ in range(count):
        module = tk.jit(lambda v: np.tanh(v) * 3.0 + v.sum(), backend="interpreter").lower(
            np.ones(n, np.float32)).compile().optimized_hlo
        compile_ptx(module)
        n += 1
compile_new_shapes(20)
trim()
before = rss_bytes()
compile_new_shapes(int(sys.argv[1]))
trim()
print(json.dumps({"per_compile": (rss_bytes() - before) / int(sys.argv[1]), "workers": WORKER.started}))
"""  # noqa: E501


def test_memory_stays_flat_across_ptx_compiles(tmp_path):
    """The GPU backend's PTX comes from the LLVM worker process too: compiles of new shapes
    leave this process flat; in-process they grow by llvmlite's ~95 KB a pass builder."""
    import json
    import os
    import subprocess
    import sys

    script = tmp_path / "flat_ptx.py"
    script.write_text(_PTX_COMPILES_STAY_FLAT)

    def growth(count, **env):
        done = subprocess.run(
            [sys.executable, str(script), str(count)],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "TOOLKIT_CACHE_DIR": "off", **env},
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    flat = growth(40)
    assert flat["per_compile"] <= 30 * 1024 and flat["workers"] == 1, flat
    leaky = growth(25, TOOLKIT_LLVM_WORKER="0")
    assert leaky["workers"] == 0 and leaky["per_compile"] > 50 * 1024, leaky


def test_ptx_from_the_worker_is_the_ptx_this_process_makes():
    """Byte for byte, with and without libdevice linked in."""
    import time

    import numpy as np
    import pytest
    import toolkit as tk
    from toolkit.backends.gpu import compile_ptx
    from toolkit.backends.gpu.codegen import ARCHES
    from toolkit.backends.gpu.libdevice import find_libdevice
    from toolkit.backends.llvm import llvm_worker
    from toolkit.backends.llvm.llvm_process import WorkerProcess, WorkerUnavailable

    programs = [(lambda v: np.tanh(v) * 2 + 1, np.float32, "")]
    library = find_libdevice()
    if library:
        # float64 sin: libdevice's __nv_sin
        programs.append((lambda v: np.sin(v) * 2, np.float64, library))
    pool = WorkerProcess()
    try:
        for fn, dtype, lib in programs:
            text = compile_ptx(
                tk.jit(fn, backend="interpreter").lower(np.ones(40, dtype)).compile().optimized_hlo
            ).source_ir
            target = llvm_worker.nvptx_target("sm_80", ARCHES["sm_80"], lib)
            here = llvm_worker.optimize_and_emit_ptx(text, "sm_80", ARCHES["sm_80"], lib)
            while True:
                try:
                    there = pool.compile(text, target=target)
                    break
                except WorkerUnavailable:
                    time.sleep(0.02)
            assert there[0] == here[0] and there[1] == here[1]
            assert b".entry" in there[1] and ("__nv_sin" not in there[1].decode() if lib else True)
    finally:
        pool.shutdown()
    if not library:
        pytest.skip("libdevice not found: the float64 case did not run")
