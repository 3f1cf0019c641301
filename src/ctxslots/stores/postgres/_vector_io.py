"""pgvector's ``vector`` type in psycopg's binary format, without the pgvector package.

The binary form is a 16-bit dimension, 16 unused bits, then the float32
components, all in network byte order (pgvector's ``vector_send``).
"""

from __future__ import annotations

import struct
from typing import Any

import attrs
import numpy as np
import psycopg
from psycopg.adapt import Buffer, Dumper, Loader
from psycopg.pq import Format

__all__ = ["Vector", "register_vector"]

_HEADER = struct.Struct(">HH")


@attrs.frozen
class Vector:
    """A query parameter sent as a pgvector ``vector``.

    Attributes:
        values: The components (any float array; sent as float32).
    """

    values: np.ndarray


def _dumper(oid: int) -> type[Dumper]:
    class VectorDumper(Dumper):
        format = Format.BINARY

        def dump(self, obj: Any) -> bytes:
            values = np.ascontiguousarray(obj.values, dtype=">f4").ravel()
            return _HEADER.pack(len(values), 0) + values.tobytes()

    VectorDumper.oid = oid
    return VectorDumper


class _VectorLoader(Loader):
    format = Format.BINARY

    def load(self, data: Buffer) -> np.ndarray:
        dim, _ = _HEADER.unpack_from(data)
        return np.frombuffer(bytes(data), dtype=">f4", count=dim, offset=_HEADER.size).astype(
            np.float32)


def register_vector(conn: psycopg.Connection[Any], oid: int) -> None:
    """Send :class:`Vector` parameters; read ``vector`` columns (in binary) as arrays."""
    conn.adapters.register_dumper(Vector, _dumper(oid))
    conn.adapters.register_loader(oid, _VectorLoader)
