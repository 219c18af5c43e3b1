"""The GPU backend: PTX from the shared LLVM lowering (NVPTX). Compiling and checking PTX
needs no GPU; running it needs CuPy and an NVIDIA device (not part of this build yet)."""
from __future__ import annotations

from ..base import Backend, register_backend
from .codegen import ARCHES, compile_ptx


def _available() -> str | None:
    try:
        import cupy  # noqa: F401
    except ImportError:
        return ("CuPy is not installed (pip install 'toolkit[gpu]'); PTX can still be generated "
                "with Compiled.as_text('ptx')")
    return ("the GPU runtime (CuPy kernel launch, device arrays, transfers) is not part of this "
            "build yet; PTX generation is: Compiled.as_text('ptx')")


def _compile(module):
    raise RuntimeError(_available())


register_backend(Backend("gpu", "NVIDIA GPUs through PTX and CuPy", 20, _compile, _available))

__all__ = ["ARCHES", "compile_ptx"]
