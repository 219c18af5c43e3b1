"""The cache of one jitted function's compiled segments, keyed by their exact structure."""
from __future__ import annotations

import threading
from collections import OrderedDict


class SegmentCache:
    """Compiled segments of one function by their exact structure, at most ``limit``.

    Bimodal insertion (a scan-resistant LRU, as CPU caches use): a hit makes a segment the
    most recently used; a new segment enters as the least recently used, except every
    ``_PROMOTED_EVERY``-th, which enters as the most. A call that runs more distinct segments
    than the limit (a loop that breaks on data every trip) then keeps most of them across
    calls, where plain LRU or FIFO order evicts each one just before it is needed again and
    recompiles every segment on every call; and a new set of segments still displaces an
    old one that is no longer used."""

    _PROMOTED_EVERY = 32

    def __init__(self, limit: int):
        self.limit = limit
        self._programs: OrderedDict = OrderedDict()  # least recently used first
        self._inserted = 0
        self._lock = threading.Lock()  # (a hit reorders: calls on several threads share it)

    def get(self, key: tuple):
        with self._lock:
            found = self._programs.get(key)
            if found is not None:
                self._programs.move_to_end(key)
            return found

    def put(self, key: tuple, entry) -> None:
        with self._lock:
            if key not in self._programs:
                while len(self._programs) >= self.limit:
                    self._programs.popitem(last=False)
            self._programs[key] = entry
            self._inserted += 1
            if self._inserted % self._PROMOTED_EVERY and len(self._programs) > 1:
                self._programs.move_to_end(key, last=False)

    def __len__(self) -> int:
        return len(self._programs)

    def clear(self) -> None:
        with self._lock:
            self._programs.clear()


class HashedKey:
    """A segment's exact key, hashed once: the cache looks it up, inserts it and reorders it,
    and a tuple hashes every nested tuple and shape again each time (each row of a sparse
    product is a new segment)."""

    __slots__ = ("key", "_hash")

    def __init__(self, key: tuple):
        self.key = key
        self._hash = hash(key)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other) -> bool:
        return isinstance(other, HashedKey) and self._hash == other._hash and self.key == other.key


__all__ = ["HashedKey", "SegmentCache"]
