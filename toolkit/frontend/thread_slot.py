"""A value bound per thread for the extent of a ``with``: what a shard_map's tracing knows
(its mesh, its values' typing) while the traced function runs, on that thread only."""
from __future__ import annotations

import contextlib
import threading


class ThreadSlot:
    def __init__(self):
        self._local = threading.local()

    def get(self):
        return getattr(self._local, "value", None)

    @contextlib.contextmanager
    def bound(self, value):
        saved = self.get()
        self._local.value = value
        try:
            yield value
        finally:
            self._local.value = saved
