"""tk.distributed over real MPI processes: ``mpiexec -n 4`` (MPICH from PyPI) runs a
shard_map whose collectives are MPI calls; every rank's results equal the one-process run's,
and a rank that fails or never arrives ends the job with a message naming a rank, never a hang."""
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

import toolkit as tk

pytest.importorskip("mpi4py", reason="tk.distributed needs mpi4py: pip install mpi4py mpich")
MPIEXEC = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or shutil.which("mpiexec")
pytestmark = pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (pip install mpich)")
ROOT = pathlib.Path(__file__).resolve().parents[1]

# every collective on one array (the MPI job's program and the one-process run share it)
EVERY_COLLECTIVE = '''def f(a):
    return (tk.lax.psum(-a, "x"), tk.lax.all_gather(np.tanh(a), "x", tiled=True),
            tk.lax.psum_scatter(a, "x", tiled=True),
            tk.lax.ppermute(a, "x", [(i, (i + 1) % size) for i in range(size)]),
            tk.lax.all_to_all(a, "x", 0, 0, tiled=True), tk.lax.pmax(a, "x"),
            tk.lax.axis_index("x").reshape(1))
'''

PROGRAM = '''
import json, sys
import numpy as np
import toolkit as tk

rank, size = tk.distributed.initialize(timeout=float(sys.argv[3]))
mode, backend = sys.argv[1], sys.argv[2]
if mode == "fail" and rank == 2:  # this rank's own error while it runs its device
    from toolkit.ir import evaluator

    def failing(inst, args):
        raise FloatingPointError("rank 2's own failure")
    evaluator.EVALUATORS["negate"] = failing
if mode == "slow" and rank == 3:  # reaches the collective long after the timeout
    import time
    from toolkit.ir import evaluator

    negate = evaluator.EVALUATORS["negate"]

    def slow(inst, args):
        time.sleep(20)
        return negate(inst, args)
    evaluator.EVALUATORS["negate"] = slow
if mode == "absent" and rank == 3:
    sys.exit(0)  # never reaches the collective the others wait in
mesh = tk.Mesh((size,), ("x",))


{every_collective}

x = np.arange(8 * size, dtype=np.float64) * 0.5
outs = tk.shard_map(f, mesh, in_specs=tk.P("x"), out_specs=(tk.P("x"),) * 7, backend=backend)(x)
with open(f"{sys.argv[4]}/rank{rank}.json", "w") as out:  # (stdout lines interleave)
    json.dump({"rank": rank, "outs": [o.tolist() for o in outs]}, out)
'''
PROGRAM = PROGRAM.replace("{every_collective}", EVERY_COLLECTIVE)


def _job(tmp_path, source: str, *args, timeout=120):
    """``source`` run by ``mpiexec -n 4`` (its arguments: ``args``, then ``tmp_path``)."""
    script = tmp_path / "program.py"
    script.write_text(source)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HYDRA_LAUNCHER": "fork",
           "MPIEXEC_TIMEOUT": str(timeout), "OMPI_ALLOW_RUN_AS_ROOT": "1",
           "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "TOOLKIT_CACHE_DIR": str(tmp_path / "cache")}
    return subprocess.run([MPIEXEC, "-n", "4", sys.executable, str(script), *args,
                           str(tmp_path)], env=env, capture_output=True, text=True,
                          timeout=timeout + 30)


def _mpiexec(tmp_path, *args, timeout=120):
    return _job(tmp_path, PROGRAM, *args, timeout=timeout)


def _one_process():
    mesh = tk.Mesh((4,), ("x",))
    scope = {"tk": tk, "np": np, "size": 4}
    exec(EVERY_COLLECTIVE, scope)  # noqa: S102 - the MPI program's own function
    f = scope["f"]

    x = np.arange(32, dtype=np.float64) * 0.5
    return tk.shard_map(f, mesh, in_specs=tk.P("x"), out_specs=(tk.P("x"),) * 7,
                        backend="cpu")(x)


def test_four_mpi_processes_compute_what_four_threads_do(tmp_path):
    proc = _mpiexec(tmp_path, "ok", "cpu", "30")
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(4)]
    assert sorted(r["rank"] for r in results) == [0, 1, 2, 3]
    want = _one_process()
    for r in results:  # every rank holds the whole output (small integers: exact sums)
        for got, w in zip(r["outs"], want, strict=True):
            np.testing.assert_array_equal(np.array(got), w)


@pytest.mark.parametrize("mode,message", [
    ("fail", r"rank 2 of 4: failed while running device 2: .*rank 2's own failure"),
    # (caught where the ranks first meet: agreeing on the program, before any collective)
    ("absent", r"shard_map f: not every rank reached the call within 2 s"),
    ("slow", r"all-reduce %.*: not every process of group \[0, 1, 2, 3\] arrived within 2 s"),
])
def test_a_failed_or_absent_rank_ends_the_job_saying_why(tmp_path, mode, message):
    start = time.monotonic()
    proc = _mpiexec(tmp_path, mode, "interpreter", "2")
    assert proc.returncode != 0
    import re

    assert re.search(message, proc.stderr), proc.stderr[-3000:]
    assert time.monotonic() - start < 60  # the timeout and the abort, not MPIEXEC_TIMEOUT


MISMATCH = '''
import sys
import numpy as np
import toolkit as tk

rank, size = tk.distributed.initialize(timeout=5)
mesh = tk.Mesh((size,), ("x",))
n = 12 if (sys.argv[1] == "shape" and rank == 3) else 8


def f(a):
    if sys.argv[1] == "branch" and tk.distributed.process_index() == 1:
        return tk.lax.psum(a * 2, "x")
    return tk.lax.psum(a, "x")


tk.shard_map(f, mesh, in_specs=tk.P("x"), out_specs=tk.P(), backend="cpu")(np.ones(n * size))
'''


@pytest.mark.parametrize("mode,message", [
    ("shape", r"ranks \[3\] differ from rank 0\): rank 3 was called with argument 0: "
              r"float64\[48\] where rank 0 was called with argument 0: float64\[32\]"),
    ("branch", r"ranks \[1\] differ from rank 0\): rank 1 traced another program from the same "
               r"arguments"),
])
def test_ranks_that_compiled_different_programs_are_named(tmp_path, mode, message):
    proc = _job(tmp_path, MISMATCH, mode)
    assert proc.returncode != 0
    import re

    assert re.search(message, proc.stderr), proc.stderr[-3000:]


PROFILED = '''
import json, sys, time
import numpy as np
import toolkit as tk
from toolkit.ir import evaluator

rank, size = tk.distributed.initialize(timeout=30)
if rank == 2:  # the straggler: 0.3 s late at the all-reduce
    negate = evaluator.EVALUATORS["negate"]

    def slow(inst, args):
        time.sleep(0.3)
        return negate(inst, args)
    evaluator.EVALUATORS["negate"] = slow
mesh = tk.Mesh((size,), ("x",))
f = tk.shard_map(lambda a: tk.lax.psum(-a, "x"), mesh, in_specs=tk.P("x"), out_specs=tk.P(),
                 backend="interpreter")
f(np.ones(4 * size))
with tk.profile() as prof:
    f(np.ones(4 * size))
merged = tk.distributed.merge_profiles(prof)
assert (merged is None) == (rank != 0)
if rank == 0:
    json.dump({"lasts": sorted({e.last for e in merged.collectives}),
               "waits": {e.device: e.wait for e in merged.collectives},
               "lanes": sorted({k.device for k in merged.kernels}),
               "summary": merged.summary()}, open(sys.argv[1], "w"))
'''


def test_merged_profiles_name_the_straggler_and_its_cost(tmp_path):
    out = tmp_path / "merged.json"
    proc = _job(tmp_path, PROFILED, str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    merged = json.loads(out.read_text())
    assert merged["lasts"] == [2]
    waits = {int(k): v for k, v in merged["waits"].items()}
    assert waits[2] == 0.0 and all(0.2 < waits[r] < 1.0 for r in (0, 1, 3)), waits
    assert {lane.split("/")[0] for lane in merged["lanes"]} == {"rank0", "rank1", "rank2",
                                                                  "rank3"}
    assert "straggler: device 2 arrived last at 1 of 1 meetings" in merged["summary"]


SHARDED = '''
import json, sys
import numpy as np
import toolkit as tk

rank, size = tk.distributed.initialize(timeout=60)
mesh = tk.Mesh((size,), ("model",))
S = lambda *axes: tk.NamedSharding(mesh, tk.P(*axes))
rng = np.random.default_rng(3)  # the same arguments on every rank, as a jax.jit caller's
x, w1, w2 = rng.standard_normal((4, 8)), rng.standard_normal((8, 12)), rng.standard_normal((12, 8))


def mlp(x, w1, w2):
    return np.maximum(x @ w1, 0) @ w2, (x * 2).sum(axis=0)


f = tk.jit(mlp, in_shardings=(S(None, "model"), S(None, "model"), S("model")))
y, s = f(x, w1, w2)
with open(f"{sys.argv[1]}/rank{rank}.json", "w") as out:
    json.dump({"y": y.tolist(), "s": s.tolist(), "collectives": f.lower(x, w1, w2).collectives()},
              out)
'''


def test_jit_with_shardings_runs_over_mpi_ranks(tmp_path):
    """tk.jit(in_shardings=) under tk.distributed: each rank runs its device's partitioned
    program, the all-reduces are MPI calls, and every rank gets the whole results."""
    proc = _job(tmp_path, SHARDED)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rng = np.random.default_rng(3)
    x, w1, w2 = rng.standard_normal((4, 8)), rng.standard_normal((8, 12)), rng.standard_normal(
        (12, 8))
    for rank in range(4):
        got = json.loads((tmp_path / f"rank{rank}.json").read_text())
        np.testing.assert_allclose(got["y"], np.maximum(x @ w1, 0) @ w2, rtol=1e-12)
        np.testing.assert_allclose(got["s"], (x * 2).sum(axis=0), rtol=1e-12)
        # x's columns split: the first dot's contraction is all-reduced, the second's too
        assert [c.split(" ")[0] for c in got["collectives"]].count("all-reduce") >= 1


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_initialize_keeps_freed_memory_for_reuse():
    """Under MPI, buffers come from the heap and freed ones are reused (glibc's mallopt), so a
    collective's receive buffer is not freshly mapped pages every call. In a subprocess: the
    setting is the whole process's."""
    code = ("from toolkit import distributed; import sys; "
            "sys.exit(0 if distributed._keep_freed_memory() else 3)")
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ,
                                                              "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0


def test_an_aborting_rank_waits_until_mpiexec_has_read_its_message():
    """MPI_Abort makes the launcher kill every process; the message saying why must have left
    the rank's stderr pipe by then (CI once saw a failed job with an empty stderr)."""
    import threading

    from toolkit.distributed import _wait_until_read

    read_end, write_end = os.pipe()
    with os.fdopen(write_end, "w") as stream, os.fdopen(read_end, "rb", buffering=0) as reader:
        stream.write("toolkit: rank 2 of 4: why\n")
        stream.flush()
        start = time.monotonic()
        _wait_until_read(stream, limit_s=0.2)  # nobody reads: gives up at the limit
        assert 0.2 <= time.monotonic() - start < 1.0
        # (the clock starts before the reader's timer, so the wait measured covers its 0.1 s:
        # taken after it, CI once measured 0.097 s; the timer's own wait may end a hair early)
        start = time.monotonic()
        threading.Timer(0.1, reader.read, (4096,)).start()
        _wait_until_read(stream, limit_s=5.0)  # returns once the reader has taken it
        assert 0.09 <= time.monotonic() - start < 2.0
