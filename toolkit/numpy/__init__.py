"""``toolkit.numpy``: NumPy's API for traced code (``import toolkit.numpy as tnp``).

Inside a jitted function these trace into HLO; called on plain arrays outside one, they are
NumPy's own functions. Plain ``numpy`` calls on traced arrays trace too, through NumPy's
``__array_ufunc__``/``__array_function__`` protocols."""
from __future__ import annotations

import builtins as _builtins

import numpy as _np

from ..frontend import dispatch as _dispatch  # noqa: F401  (attaches the protocols)
# Each family registers its functions in the registry when imported; this is the one place
# that imports them all (the registry imports none of them). Where two register one function
# the later wins: NumPy 2's np.permute_dims is np.transpose, so joining's permute_dims serves
# np.transpose's __array_function__, not shape_functions' transpose (as it always has).
from ..frontend import ufuncs_math as _ufuncs_math  # noqa: F401
from ..frontend import (reductions as _reductions, selection as _selection,  # noqa: F401
                        array_basics as _array_basics)
from ..frontend import shape_functions as _shape_functions  # noqa: F401
from ..frontend import creation as _creation, linalg as _linalg  # noqa: F401
from ..frontend import indexing_functions as _indexing_functions  # noqa: F401
from ..frontend import joining as _joining, matrices as _matrices  # noqa: F401
from ..frontend import (scans as _scans, differences as _differences,  # noqa: F401
                        convolution as _convolution, searching as _searching)
from ..frontend import histograms as _histograms, sorting as _sorting  # noqa: F401
from ..frontend import (nan_reductions as _nan_reductions, statistics as _statistics,  # noqa: F401
                        comparisons as _comparisons, rounding as _rounding,
                        float_functions as _float_functions, polynomials as _polynomials)
from ..frontend import complex_numbers as _complex_numbers  # noqa: F401
from ..frontend import complex_math as _complex_math  # noqa: F401
from ..frontend import more_functions as _more_functions  # noqa: F401
from ..frontend import decompositions as _decompositions, fft as _fft  # noqa: F401
from ..frontend.registry import EXPORTS as _EXPORTS
from ..frontend.more_functions import STATIC_FUNCTIONS as _STATIC_FUNCTIONS
from ..frontend.decompositions import namespace as linalg  # noqa: F401 (tnp.linalg)
from ..frontend.fft import namespace as fft  # noqa: F401 (tnp.fft)
from ..frontend.ufuncs import UFUNCS as _UFUNCS, apply_ufunc as _apply_ufunc
from ..frontend.tracer import Tracer as _Tracer

bool_, int32, int64, float32, float64 = _np.bool_, _np.int32, _np.int64, _np.float32, _np.float64
pi, e, inf, nan, newaxis = _np.pi, _np.e, _np.inf, _np.nan, None
ndarray = _np.ndarray


def _ufunc_wrapper(ufunc: _np.ufunc):
    def fn(*args, **kwargs):
        if _builtins.any(isinstance(a, _Tracer) for a in args):
            return _apply_ufunc(ufunc, args, kwargs)
        return ufunc(*args, **kwargs)

    fn.__name__ = fn.__qualname__ = ufunc.__name__
    fn.__doc__ = f"Traced version of numpy.{ufunc.__name__}."
    return fn


for _ufunc in _UFUNCS:
    globals()[_ufunc.__name__] = _ufunc_wrapper(_ufunc)
for _alias, _value in vars(_np).items():  # NumPy 2's other names for them: acos, bitwise_not ...
    if isinstance(_value, _np.ufunc) and _value in _UFUNCS and not _alias.startswith("_"):
        globals().setdefault(_alias, globals()[_value.__name__])
globals().update(_EXPORTS)
for _name in _STATIC_FUNCTIONS:  # no array arguments: NumPy's own, constants in a trace
    globals()[_name] = getattr(_np, _name)
abs = globals()["absolute"]


def divmod(x1, x2):
    """Traced version of numpy.divmod: (x1 // x2, x1 % x2)."""
    return globals()["floor_divide"](x1, x2), globals()["remainder"](x1, x2)


true_divide = globals()["divide"]
mod = globals()["remainder"]
concat = globals()["concatenate"]
pow = globals()["power"]


def supported_ufuncs() -> list[str]:
    return sorted(u.__name__ for u in _UFUNCS)


def supported_functions() -> list[str]:
    return sorted(_EXPORTS)
