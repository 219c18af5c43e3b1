"""toolkit: an XLA-style compiler for NumPy code that shows every decision and cost.

    import toolkit as tk
    import toolkit.numpy as tnp

    @tk.jit
    def f(x):
        return tnp.tanh(x) * 2
"""
from . import hlo, numpy
from .api import Compiled, JitFunction, Lowered, jit
from .backends import backend_names
from .frontend.errors import ToolkitError

__version__ = "0.1.0"
__all__ = ["jit", "hlo", "numpy", "Lowered", "Compiled", "JitFunction", "ToolkitError",
           "backend_names", "__version__"]
