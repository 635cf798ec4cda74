"""A least-recently-used mapping of fixed size, for caches that see new keys on every call.

Caches keyed by shapes or by scalar values meet a new key whenever a program's shapes or
scalars change (a dynamic batch size, a learning-rate schedule); a plain dict then grows for as
long as the process lives. This one forgets its least recently used entries instead.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, Optional, TypeVar

V = TypeVar("V")


class LRUCache(Generic[V]):
    """At most ``max_entries`` entries; ``get`` and ``put`` may be called from several threads."""

    def __init__(self, max_entries: int) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self.max_entries = max_entries
        self._data: OrderedDict[Hashable, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, default: Optional[V] = None) -> Optional[V]:
        """The value for ``key`` (now the most recently used), or ``default``; an unhashable key
        raises TypeError, as a dict does."""
        try:  # no lock: each OrderedDict call is atomic, and a hit is on every recorded op
            value = self._data[key]
        except KeyError:
            return default
        try:
            self._data.move_to_end(key)
        except KeyError:
            pass  # another thread evicted it meanwhile: the value is still right
        return value

    def put(self, key: Hashable, value: V) -> None:
        """Store ``value``, forgetting the least recently used entry past the bound."""
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            if len(self._data) > self.max_entries:
                self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)
