"""libdevice: NVIDIA's math library as LLVM bitcode (``__nv_exp``, ``__nv_log1p``, ...),
linked into a GPU module for the functions toolkit has no own code for (float64
transcendentals; float32 tan, cbrt, atan2). Accuracy is NVIDIA's: the CUDA Math API lists
each function's maximum ulp error (exp, log, sin, cos, tanh, pow: 1-2 ulp in float64).

It comes with the CUDA toolkit (``nvvm/libdevice/libdevice.10.bc``) and with the PyPI
package of nvcc; without it those functions run on the host, and the profile shows it."""
from __future__ import annotations

import functools
import glob
import os
import shutil
import sys


_NAME = os.path.join("nvvm", "libdevice", "libdevice.10.bc")


@functools.cache
def find_libdevice() -> str | None:
    """The path of libdevice.10.bc: $TOOLKIT_LIBDEVICE, $CUDA_HOME/$CUDA_PATH, nvcc's toolkit,
    /usr/local/cuda, or a pip-installed nvcc (nvidia-cuda-nvcc); None if none has it."""
    explicit = os.environ.get("TOOLKIT_LIBDEVICE")
    if explicit:
        return explicit if os.path.isfile(explicit) else None
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        roots.append(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))))
    roots.append("/usr/local/cuda")
    for root in filter(None, roots):
        path = os.path.join(root, _NAME)
        if os.path.isfile(path):
            return path
    for site in sys.path:
        found = sorted(glob.glob(os.path.join(site, "nvidia", "*", _NAME)))
        if found:
            return found[-1]
    return None


def needs_libdevice(module_text: str) -> bool:
    return "__nv_" in module_text
