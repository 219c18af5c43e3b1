"""Backends: the registry and the reference interpreter; native backends plug in here."""
from . import reference  # noqa: F401  (registers the interpreter)
from . import cpu  # noqa: F401  (registers the CPU backend)
from . import gpu  # noqa: F401  (registers the GPU backend: PTX generation; no runtime yet)
from .base import (Backend, BackendUnavailableError, Executable, KernelInfo, ResultPlacement,
                   RunContext, backend_names, get_backend, register_backend)

__all__ = ["Backend", "BackendUnavailableError", "Executable", "KernelInfo", "ResultPlacement",
           "RunContext", "backend_names", "get_backend", "register_backend"]
