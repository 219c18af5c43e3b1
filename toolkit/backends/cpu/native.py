"""The C fast paths (``_kernel_call.c``) and what the loaded build can do: a kernel call without
ctypes, a natively driven loop, a whole program of kernel calls and BLAS products (run_steps),
kernels split over native helper threads; and the ctypes call that serves where they do not.
Each fact is read from the build, so an older one (or none) falls back to what it offers."""
from __future__ import annotations

import ctypes
import os


def _load_native_module():
    """The C fast paths (``_kernel_call.c``: a kernel call, a natively driven loop), which pip
    builds where a compiler is present: beside this module, or, when toolkit runs from a source
    checkout (the tests), the one the installed distribution of the same sources carries. None
    without either: ctypes, and loops driven from Python."""
    try:
        from . import _kernel_call
        return _kernel_call
    except ImportError:
        pass
    try:
        from importlib import machinery, metadata, util

        # every installed copy (a checkout's own egg-info lists the C source, not the build)
        for dist in metadata.distributions(name="toolkit"):
            for file in dist.files or ():
                if file.name.startswith("_kernel_call") and str(file).endswith(
                    tuple(machinery.EXTENSION_SUFFIXES)
                ):
                    spec = util.spec_from_file_location(
                        f"{__package__}._kernel_call", file.locate()
                    )
                    module = util.module_from_spec(spec)
                    spec.loader.exec_module(module)
                    return module
    except Exception:  # noqa: BLE001 - no distribution, an unloadable file: the ctypes path
        return None
    return None


_native = None if os.environ.get("TOOLKIT_NATIVE_CALL") == "0" else _load_native_module()
_native_call = getattr(_native, "call", None)
# (an older build has none: loops run from Python)
native_run_loop = getattr(_native, "run_loop", None)
native_run_steps = getattr(_native, "run_steps", None)
# how many of run_ops' op codes the build knows (0 kernel ... 4 gemv): a build before the count
# knows the four that came with run_steps, and would read a later op as a copy
native_op_codes = getattr(_native, "OP_CODES", 4 if native_run_steps is not None else 0)
_NATIVE_TIMED = getattr(_native, "TIMED", 0) == 1  # run_steps times each op (a profiled call)
# the most buffers a kernel op of run_steps may name (past 16, through the packed entry); an
# older build calls at most 16
native_kernel_pointers = getattr(_native, "KERNEL_POINTERS", 16)
native_split = native_op_codes >= 10  # the build runs op 9, split kernels (run_split)
# how many BLAS element types its BLAS ops know: float32 and float64, and since BLAS_TYPES
# complex64 and complex128 too (an older build read the type as "float64 or not")
native_blas_types = getattr(_native, "BLAS_TYPES", 2)


# ctypes calls a function of at most 1,024 arguments (CTYPES_MAX_ARGCOUNT); a kernel's are its
# buffers and its row range
CTYPES_MAX_POINTERS = 1024 - 2


def ctypes_function(address: int, n_pointers: int, packed_address: int = 0):
    """The kernel at ``address`` callable from Python as ``fn(*pointers, start, end)``. A kernel
    of more buffers than ctypes can pass (a concatenation of a list of 1,200 arrays) is called
    through its packed entry (``kernels.packed_symbol``), its pointers in one array."""
    if n_pointers <= CTYPES_MAX_POINTERS:
        proto = ctypes.CFUNCTYPE(
            None, *([ctypes.c_void_p] * n_pointers), ctypes.c_int64, ctypes.c_int64
        )
        return proto(address)
    if not packed_address:
        raise ValueError(
            f"a kernel of {n_pointers} buffers has no packed entry to call it through "
            f"(ctypes passes at most {CTYPES_MAX_POINTERS})"
        )
    packed = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)(
        packed_address
    )
    table_type = ctypes.c_void_p * n_pointers

    def call(*arguments):
        *pointers, start, end = arguments
        packed(table_type(*pointers), start, end)

    return call
