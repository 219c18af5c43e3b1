"""The C extensions; everything else is in pyproject.toml.

Both are optional: where no C compiler is present the install still works, and toolkit takes
the Python paths (ctypes for kernel calls, a tuple key for dispatch)."""
import numpy
from setuptools import Extension, setup

setup(
    ext_modules=[
        # a compiled kernel's call without ctypes' argument conversion (no NumPy headers)
        Extension("toolkit.backends.cpu._kernel_call",
                  ["toolkit/backends/cpu/_kernel_call.c"], optional=True),
        # a jitted function's cache-hit dispatch: NumPy's C API reads the arrays' signatures
        Extension("toolkit.jitting._plain_call", ["toolkit/jitting/_plain_call.c"],
                  include_dirs=[numpy.get_include()], optional=True),
    ],
)
