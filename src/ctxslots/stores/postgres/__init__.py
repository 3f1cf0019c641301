"""The PostgreSQL storage engine: psycopg 3 with a pool, tsvector/GIN with BM25, pgvector/HNSW.

Install with ``pip install 'ctxslots[postgres]'``. :class:`PostgresBackend`
implements :class:`~ctxslots.stores.backend.Backend`; ``FactStore`` selects it
for a ``postgresql://`` URL. See ``docs/postgres.md``. Importing this package
needs no driver; using :class:`PostgresBackend` needs psycopg and psycopg_pool.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._url import is_postgres_url, safe_location

if TYPE_CHECKING:
    from ._backend import PostgresBackend

__all__ = ["PostgresBackend", "is_postgres_url", "safe_location"]


def __getattr__(name: str) -> Any:
    if name == "PostgresBackend":
        try:
            from ._backend import PostgresBackend
        except ImportError as exc:
            from ...errors import StoreError

            raise StoreError(
                f"the PostgreSQL engine needs psycopg and psycopg_pool ({exc}): "
                "pip install 'ctxslots[postgres]'") from exc
        return PostgresBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
