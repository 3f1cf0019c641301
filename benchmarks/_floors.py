"""The floors of a SQLite store's searches: the same work as the store, in raw SQL.

A floor gets the words the store itself searches (``FactStore.query_words``:
sanitized, stop words and common words left out), applies the same filters
in the same join (the default user's and agent's facts and the shared ones,
scope and global facts, live, not hidden by a newer near-duplicate, and the
slot when the store searches one slot), orders by the
same ``rank`` (FTS5's BM25 with the store's column weights, kept in the
file) with the same tie-break, and reads every column of the rows it returns.
It runs on its own plain ``apsw`` connection: no wrapper, no ranking, no
objects, no access write.

    floor = FtsFloor.open(path)
    rows = floor.rows(store.query_words(query), scope="repo-alpha", now=time.time(), limit=10,
                      relaxed=store.query_words(query, relaxed=True))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apsw

from ctxslots.stores.owners import DEFAULT_AGENT, DEFAULT_USER
from ctxslots.stores.sanitize import to_match
from ctxslots.stores.stemming import stemmed_query

__all__ = ["FtsFloor", "visible"]

_BUSY_TIMEOUT_MS = 30_000

# ``LIMIT +?`` as the store writes it: a plain ``LIMIT ?`` under an ``ORDER BY`` makes
# SQLite plan the statement again on each run.
_SQL = (
    "SELECT f.*, facts_fts.rank FROM facts_fts JOIN facts AS f ON f.id = facts_fts.rowid "
    "WHERE facts_fts MATCH ? AND f.user_id IN (?, '') AND f.agent_id IN (?, '') {slot}"
    "AND f.scope IN ({scopes}) AND f.superseded_by IS NULL "
    "AND (f.expires_at IS NULL OR f.expires_at > ?) ORDER BY facts_fts.rank, f.id LIMIT +?"
)


def visible(scope: str | None) -> tuple[str, ...]:
    """The stored scopes a search in ``scope`` sees: that scope and the global one (``''``)."""
    return ("",) if not scope else (scope, "")


@dataclass
class FtsFloor:
    """Raw FTS5 queries on a store file, doing what its words-only search does."""

    conn: apsw.Connection

    @classmethod
    def open(cls, path: str | Path) -> FtsFloor:
        """A plain connection to the store file at ``path``."""
        conn = apsw.Connection(str(path))
        conn.set_busy_timeout(_BUSY_TIMEOUT_MS)
        return cls(conn)

    def rows(self, words: Sequence[str], *, scope: str | None, now: float, limit: int,
             slot: str | None = None, relaxed: Sequence[str] = ()) -> list[tuple[Any, ...]]:
        """The best ``limit`` facts matching any of ``words``, every column, best first;
        when none match, those matching ``relaxed`` (the query's words with the common
        ones kept, as ``FactStore.search`` looks for them then)."""
        found = self._rows(words, scope=scope, now=now, limit=limit, slot=slot)
        if found or not relaxed or list(relaxed) == list(words):
            return found
        return self._rows(relaxed, scope=scope, now=now, limit=limit, slot=slot)

    def _rows(self, words: Sequence[str], *, scope: str | None, now: float, limit: int,
              slot: str | None) -> list[tuple[Any, ...]]:
        stems = stemmed_query(words)  # the index holds stems (stores/stemming.py)
        if not stems:
            return []
        # Words in the text columns, as the store matches them (not the owner term).
        match = f"{{stems context_stems}} : ({to_match(stems)})"
        scopes = visible(scope)
        sql = _SQL.format(scopes=", ".join("?" * len(scopes)),
                          slot="AND f.slot = ? " if slot else "")
        params: list[Any] = [match, DEFAULT_USER, DEFAULT_AGENT, *([slot] if slot else []),
                             *scopes, now, limit]
        return self.conn.execute(sql, params).fetchall()

    def ids(self, words: Sequence[str], *, scope: str | None, now: float, limit: int,
            slot: str | None = None, relaxed: Sequence[str] = ()) -> list[int]:
        """The ids of :meth:`rows`, best first."""
        return [int(row[0]) for row in self.rows(words, scope=scope, now=now, limit=limit,
                                                 slot=slot, relaxed=relaxed)]

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()
