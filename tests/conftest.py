import os

# Frontend, pass and profiler tests run on the interpreter (the oracle): LLVM compiles cost tens
# of milliseconds each. CPU-backend tests ask for backend="cpu" explicitly.
os.environ.setdefault("TOOLKIT_BACKEND", "interpreter")
# every pass's output verified before the next pass runs (outside tests: once, at the end)
os.environ.setdefault("TOOLKIT_VERIFY_PASSES", "each")

def _session_folder(prefix: str) -> str:
    """A fresh folder, removed when the process that made it exits (xdist's workers inherit
    the controller's through the environment and make none)."""
    import atexit
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, folder, True)
    return folder


# The persistent compilation cache goes to a fresh folder per test session, never ~/.cache.
if "TOOLKIT_CACHE_DIR" not in os.environ:
    os.environ["TOOLKIT_CACHE_DIR"] = _session_folder("toolkit-test-cache-")
# ... and its HMAC key to a fresh one outside it, never ~/.config.
if "TOOLKIT_CACHE_KEY_FILE" not in os.environ:
    os.environ["TOOLKIT_CACHE_KEY_FILE"] = os.path.join(
        _session_folder("toolkit-test-key-"), "cache-key")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

from toolkit.backends import Backend, register_backend  # noqa: E402
from toolkit.backends.gpu import compile_module as _compile_for_gpu  # noqa: E402

from simulated_gpu import SimulatedDevice  # noqa: E402

# The GPU executor on a simulated device (tests/simulated_gpu.py), so that any suite can run
# through it: TOOLKIT_BACKEND=gpu-simulated python -m pytest tests/test_ufuncs.py
SIMULATED_GPU = SimulatedDevice()
# TOOLKIT_TEST_GPU=real (python -m toolkit.device_check) runs those suites on the real device
# instead: the name stays, the device changes, and the tests that read the simulated device's
# counters skip themselves (simulated_only).
REAL_GPU = os.environ.get("TOOLKIT_TEST_GPU") == "real"
register_backend(Backend("gpu-simulated", "the GPU executor on a simulated device (tests)", -1,
                         (lambda module: _compile_for_gpu(module)) if REAL_GPU else
                         (lambda module: _compile_for_gpu(module, device=SIMULATED_GPU))))
simulated_only = pytest.mark.skipif(REAL_GPU, reason="reads the simulated device's counters")

# The default profile draws the same examples on every run, so CI passes or fails on the code,
# not on the draw; "thorough" explores with fresh random examples (HYPOTHESIS_PROFILE=thorough).
settings.register_profile("ci", max_examples=60, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=500, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_configure(config):
    np.seterr(all="ignore")


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
