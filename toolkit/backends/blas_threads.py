"""How many threads the BLAS that NumPy bundles (OpenBLAS) uses for calls from this thread.

Host devices of an SPMD run are threads of one process calling BLAS at once. Each OpenBLAS
call would start its own team of as many threads as cores, so two devices on two cores run
four busy threads that spin waiting for each other: a 256x512x512 float32 product measured
16.7 ms for two concurrent calls, against 4.3 ms with one BLAS thread per calling thread
(OpenBLAS's ``openblas_set_num_threads_local``, 0.3.27 and later). Where the library or the
symbol is missing, nothing changes."""
from __future__ import annotations

import ctypes
import glob
import os
import threading

_LOCK = threading.Lock()
_SETTER: list = []  # [the C function, or None]


def _setter():
    with _LOCK:
        if not _SETTER:
            _SETTER.append(_find())
        return _SETTER[0]


def _find():
    import numpy as np

    folder = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")
    for path in sorted(glob.glob(os.path.join(folder, "libscipy_openblas*.so*"))):
        try:
            fn = ctypes.CDLL(path).openblas_set_num_threads_local
        except (OSError, AttributeError):
            continue
        fn.restype, fn.argtypes = ctypes.c_int, [ctypes.c_int]
        return fn
    return None


_LOCAL = threading.local()  # the count this module set for the thread (0: none, the default)


class blas_threads:
    """Within it, this thread's BLAS calls use ``n`` threads; after it, what they used before.
    (``openblas_set_num_threads_local`` returns the count in effect, not whether one was set:
    restoring it would pin the thread to it, slower than leaving it unset, which is 0.)"""

    def __init__(self, n: int):
        self.n = max(1, int(n))
        self.previous = 0

    def __enter__(self):
        fn = _setter()
        if fn is not None:
            self.previous = getattr(_LOCAL, "n", 0)
            fn(self.n)
            _LOCAL.n = self.n
        return self

    def __exit__(self, *exc):
        fn = _setter()
        if fn is not None:
            fn(self.previous)
            _LOCAL.n = self.previous
        return False
