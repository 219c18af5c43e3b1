"""toolkit: an XLA-style compiler for NumPy code that shows every decision and cost.

    import toolkit as tk
    import toolkit.numpy as tnp

    @tk.jit
    def f(x):
        return tnp.tanh(x) * 2

    with tk.profile() as prof:
        f(x)
    print(prof.summary())
"""
from . import hlo, lax, numpy
from .api import GraphBreakReport, JitFunction, ScalarListWarning, explain, explain_recompiles, jit
from .frontend.scalar_lists import ScalarListError
from .stages import Compiled, Lowered
from .transformations import checkpoint, grad, jvp, remat, value_and_grad, vjp, vmap
from .frontend.collectives import Mesh, P
from .spmd import shard_map
from .sharding import NamedSharding
from . import distributed
from .backends import backend_names
from .backends.gpu import DeviceArray, device_get, device_put
from .jitting import device_arrays as _device_arrays  # noqa: F401 - NumPy on device arrays
from .jitting.promotions import PromotionWarning
from .frontend.errors import ToolkitError
from .profiler import Profile, profile
from .profiler.compare import compare
from .runtime.history import RecompileError, RecompileWarning

from .version import __version__  # noqa: E402

from .profiler.debug import install_from_environment as _debug_from_environment  # noqa: E402
from .profiler.recorder import RECORDER as _RECORDER  # noqa: E402

_debug_from_environment(_RECORDER)
__all__ = [
    "Mesh",
    "P",
    "shard_map",
    "NamedSharding",
    "distributed",
    "PromotionWarning",
    "jit",
    "grad",
    "value_and_grad",
    "jvp",
    "vjp",
    "vmap",
    "checkpoint",
    "remat",
    "ScalarListWarning",
    "ScalarListError",
    "hlo",
    "lax",
    "numpy",
    "Lowered",
    "Compiled",
    "JitFunction",
    "ToolkitError",
    "backend_names",
    "DeviceArray",
    "device_get",
    "device_put",
    "profile",
    "Profile",
    "explain_recompiles",
    "explain",
    "GraphBreakReport",
    "RecompileError",
    "RecompileWarning",
    "compare",
    "plot",
    "roofline",
    "__version__",
]


def load_ipython_extension(ipython) -> None:
    """``%load_ext toolkit``: the magics (%%xla, %xla_profile, %xla_hlo, %xla_recompiles)."""
    from .notebook import load_ipython_extension as load  # the entry point IPython asks for

    load(ipython)


def __getattr__(name: str):
    # matplotlib is imported only when a plot is asked for, never by ``import toolkit``
    import importlib

    if name in ("plot", "roofline"):
        return importlib.import_module("toolkit.plots" if name == "plot" else "toolkit.roofline")
    raise AttributeError(f"module 'toolkit' has no attribute {name!r}")
