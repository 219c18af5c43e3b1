"""The host's vector math library: glibc's libmvec, loaded into this process so that machine
code calling its vector variants (``backends/llvm/vector_math``) links, whether compiled now or
loaded from the persistent cache. ``TOOLKIT_VECTOR_MATH=0`` leaves it out (scalar libm calls)."""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os

import llvmlite.binding as llvm

from ...config import env_int
from ..llvm.vector_math import VectorMath

# the libm functions kernels call (one argument, or two for pow and atan2)
FUNCTIONS = {
    "sin": 1,
    "cos": 1,
    "tan": 1,
    "erf": 1,
    "cbrt": 1,
    "exp": 1,
    "log": 1,
    "expm1": 1,
    "log1p": 1,
    "tanh": 1,
    "sinh": 1,
    "cosh": 1,
    "pow": 2,
    "atan2": 2,
    "hypot": 2,
}


@functools.cache
def host_vector_math() -> VectorMath | None:
    if env_int("TOOLKIT_VECTOR_MATH", 1, 0, 1) == 0:
        return None
    path = ctypes.util.find_library("mvec")
    if path is None:
        return None
    try:
        library = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        if llvm.load_library_permanently(path) is not None:
            return None
    except (OSError, RuntimeError):
        return None
    features = llvm.get_host_cpu_features()
    isas = [("b", 128)]
    if features.get("avx2", False):
        isas.append(("d", 256))
    if features.get("avx512f", False):
        isas.append(("e", 512))
    symbols = set()
    for name, arguments in FUNCTIONS.items():
        for suffix, bits in (("", 64), ("f", 32)):
            for letter, register in isas:
                symbol = f"_ZGV{letter}N{register // bits}{'v' * arguments}_{name}{suffix}"
                if hasattr(library, symbol):
                    symbols.add(symbol)
    return (
        VectorMath(tuple(isas), frozenset(symbols), library=os.path.basename(path))
        if symbols
        else None
    )


def description() -> str:
    """What compiled code may call: part of the persistent cache's host description."""
    found = host_vector_math()
    return (
        "none"
        if found is None
        else f"{found.library} {''.join(isa for isa, _ in found.isas)} {len(found.functions)}"
    )
