"""A vocabulary's ranks as an on-disk hash table, read in one go and never parsed.

Counting a prompt looks up a few thousand byte strings, but a dictionary of
``o200k_base`` holds 200,000 of them and takes about 0.1 s to build from the
bundled file, most of what a one-shot command spends counting. A
:class:`RankTable` answers the same lookups from one file read whole:
65,536 buckets by CRC-32 of the token, each listing its tokens with their
ranks, in rank order.

The table is derived from the bundled vocabulary (itself checked against its
official SHA-256) on first use and kept in the user cache directory
(``$CTXSLOTS_CACHE_DIR``; set it empty for no file). The derivation is
deterministic, so each load checks the file against the SHA-256 it must have
(:data:`TABLE_SHA256`, which the tests rebuild): a damaged or altered file is
rebuilt, never used. Without a writable cache directory the caller keeps the
dictionary.
"""

from __future__ import annotations

import array
import contextlib
import hashlib
import os
import sys
import tempfile
import zlib
from collections.abc import Mapping
from pathlib import Path

import platformdirs

from .._files import make_private_dirs

__all__ = ["CACHE_ENV", "TABLE_SHA256", "RankTable", "build_table", "cache_dir", "load_table"]

#: Environment variable naming the cache directory (empty: keep no file).
CACHE_ENV = "CTXSLOTS_CACHE_DIR"
_MAGIC = b"ctxslots rank table 1\n"
_BUCKETS = 1 << 16
_ENTRY = 5  # one byte of length, four of rank, then the token's bytes
#: The SHA-256 of each encoding's table, as :func:`build_table` makes it.
TABLE_SHA256 = {
    "cl100k_base": "19758c0d963416c2f82f236afe011b91f6d2e4a612c53cdac8417c3919f58e8c",
    "o200k_base": "8fdc2ec60c9acfdcbb03ec62ea50e208fd620755e58d3700d4e71ef73fd05b86",
}


def cache_dir() -> Path | None:
    """Where tables are kept: ``$CTXSLOTS_CACHE_DIR``, else the user cache directory;
    ``None`` when the variable is set empty, or when there is no home directory to
    find (no ``HOME`` and a user with no account entry, as in a container run as an
    arbitrary user id)."""
    env = os.environ.get(CACHE_ENV)
    if env is not None:
        return Path(env).expanduser() if env.strip() else None
    try:
        folder = Path(platformdirs.user_cache_dir("ctxslots", appauthor=False))
    except RuntimeError:  # platformdirs found no home directory
        return None
    return folder if folder.is_absolute() else None


def build_table(ranks: Mapping[bytes, int]) -> bytes:
    """The table file of ``ranks``: magic, bucket offsets, then each bucket's entries."""
    buckets: list[list[bytes]] = [[] for _ in range(_BUCKETS)]
    for token, rank in sorted(ranks.items(), key=lambda item: item[1]):
        entry = bytes([len(token)]) + rank.to_bytes(4, "little") + token
        buckets[zlib.crc32(token) & (_BUCKETS - 1)].append(entry)
    offsets = array.array("I", [0] * (_BUCKETS + 1))
    position = 0
    for number, bucket in enumerate(buckets):
        offsets[number] = position
        position += sum(len(entry) for entry in bucket)
    offsets[_BUCKETS] = position
    if sys.byteorder == "big":
        offsets.byteswap()
    return _MAGIC + offsets.tobytes() + b"".join(b"".join(bucket) for bucket in buckets)


class RankTable:
    """Rank lookups in a table file's bytes (``get`` and ``in``, like a dictionary).

    :param data: The whole file, as :func:`build_table` made it.
    """

    def __init__(self, data: bytes) -> None:
        head = len(_MAGIC)
        offsets = array.array("I")
        offsets.frombytes(data[head:head + 4 * (_BUCKETS + 1)])
        if sys.byteorder == "big":
            offsets.byteswap()
        self._offsets = offsets
        self._entries = data[head + 4 * (_BUCKETS + 1):]

    def get(self, token: bytes, default: int = -1, /) -> int:
        """The rank of ``token``, or ``default`` when it is no token."""
        bucket = zlib.crc32(token) & (_BUCKETS - 1)
        position, end = self._offsets[bucket], self._offsets[bucket + 1]
        entries, size = self._entries, len(token)
        while position < end:
            length = entries[position]
            if length == size and entries[position + _ENTRY:position + _ENTRY + size] == token:
                return int.from_bytes(entries[position + 1:position + _ENTRY], "little")
            position += _ENTRY + length
        return default

    def __contains__(self, token: object) -> bool:
        return isinstance(token, bytes) and self.get(token) >= 0


def load_table(name: str, source_sha256: str, ranks: Mapping[bytes, int] | None = None
               ) -> RankTable | None:
    """The table of encoding ``name`` from the cache directory, built there first when
    missing or not as it must be (from ``ranks``, which must then be given).

    Returns ``None`` when there is no cache directory, the file cannot be
    written, or it is missing and ``ranks`` was not given.
    """
    folder = cache_dir()
    expected = TABLE_SHA256.get(name)
    if folder is None or not expected:
        return None
    path = folder / f"{name}-{source_sha256[:16]}.ranks"
    try:
        data = path.read_bytes()
    except OSError:
        data = b""
    if hashlib.sha256(data).hexdigest() == expected:
        return RankTable(data)
    if ranks is None:
        return None
    data = build_table(ranks)
    if hashlib.sha256(data).hexdigest() != expected:
        return None  # another derivation than the one checked: keep the dictionary
    try:
        make_private_dirs(folder)
        handle, temporary = tempfile.mkstemp(dir=folder, prefix=f".{name}-", suffix=".tmp")
    except OSError:
        return None
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(temporary, path)  # atomic: a process reading it sees all of it or none
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        return None
    return RankTable(data)
