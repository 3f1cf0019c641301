"""A map from ids in an import file to ids in the store, at 16 bytes an entry.

An import has to remember every id of the file it has seen: to refuse a repeated
one, and to point ``superseded_by`` and links (which may name a later line) at
the id each fact got. A Python dict holds an entry in about 100 bytes, a million
in 100 MB; this map keeps sorted numpy arrays (and a small dict of recent
entries, merged in when it grows), so a million entries take 16 MB.
"""

from __future__ import annotations

import numpy as np

__all__ = ["IdMap"]


class IdMap:
    """``file id -> store id``: adding and looking up in logarithmic time."""

    #: Recent entries kept in a dict before they are merged into the arrays.
    BUFFER = 65_536

    def __init__(self) -> None:
        self._keys = np.zeros(0, dtype=np.int64)
        self._values = np.zeros(0, dtype=np.int64)
        self._recent: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._keys) + len(self._recent)

    def __contains__(self, key: int) -> bool:
        return self.get(key) is not None

    def get(self, key: int) -> int | None:
        """The store id of file id ``key``, or ``None``."""
        found = self._recent.get(key)
        if found is not None:
            return found
        at = int(np.searchsorted(self._keys, key))
        if at < len(self._keys) and int(self._keys[at]) == key:
            return int(self._values[at])
        return None

    def add(self, key: int, value: int) -> None:
        """Record ``key -> value`` (``key`` must not be there yet)."""
        self._recent[key] = value
        # Merge once the recent entries are many, and never more often than the
        # arrays grow by an eighth: linear time in all.
        if len(self._recent) >= max(self.BUFFER, len(self._keys) // 8):
            self._merge()

    def _merge(self) -> None:
        keys = np.fromiter(self._recent.keys(), dtype=np.int64, count=len(self._recent))
        values = np.fromiter(self._recent.values(), dtype=np.int64, count=len(self._recent))
        all_keys = np.concatenate([self._keys, keys])
        order = np.argsort(all_keys, kind="stable")
        self._keys = all_keys[order]
        self._values = np.concatenate([self._values, values])[order]
        self._recent = {}
