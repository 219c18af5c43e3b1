"""``x.flat`` of a traced array: NumPy's flat iterator, read and written in C order.

``x.flat[k]`` reads element ``k`` of ``x`` as if it were 1-d, ``x.flat[k] = v`` writes it into
``x`` (through ``x``'s views, as any write), ``for v in x.flat`` visits every element, and
``x.flat = v`` fills ``x``. Each is an ordinary traced operation: a reshape, an indexing, a
write of the reshaped result back into ``x``."""
from __future__ import annotations

import numpy as np

from .errors import UnsupportedNumpyError
from .tracer import Tracer


class FlatIter:
    """What ``x.flat`` returns for a traced ``x``."""

    __slots__ = ("base",)

    def __init__(self, base: Tracer):
        self.base = base

    def _flattened(self) -> Tracer:
        from . import lax

        flat = lax.reshape(self.base, (self.base.size,))
        # (a new value, not a view: writes into it reach ``base`` only through __setitem__)
        return flat if flat is not self.base else Tracer(flat._trace, flat.inst, flat.weak_type)

    def __getitem__(self, key):
        return self._flattened()[key]

    def __setitem__(self, key, value) -> None:
        flat = self._flattened()
        flat[key] = value
        self.base[...] = flat.reshape(self.base.shape)

    def __iter__(self):
        flat = self._flattened()
        return (flat[k] for k in range(flat.shape[0]))

    def __len__(self) -> int:
        return self.base.size

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self._flattened(), dtype=dtype)

    def copy(self) -> Tracer:
        return self._flattened()

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.base.size,)


def get_flat(x: Tracer) -> FlatIter:
    return FlatIter(x)


def set_flat(x: Tracer, value) -> None:
    """``x.flat = value``: NumPy repeats a shorter value cyclically; a scalar or a value of
    ``x``'s size is supported."""
    size = int(np.size(value)) if not isinstance(value, Tracer) else value.size
    if size not in (1, x.size):
        raise UnsupportedNumpyError(
            f"x.flat = value with {size} values for {x.describe()}: NumPy repeats them "
            "cyclically, which toolkit does not trace; give one value or x.size of them")
    if size == 1:
        x[...] = value if not hasattr(value, "reshape") else value.reshape(())
    else:
        x[...] = value.reshape(x.shape) if isinstance(value, Tracer) else \
            np.asarray(value).reshape(x.shape)
