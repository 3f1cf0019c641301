"""The floors of the owners benchmark: one user's search, assembly and flush in hand-written SQL.

    hand = SqliteHand.open(path)             # or PostgresHand.open(url)
    hand.search(words, who, now, relaxed)    # what store.search(..., user=, scope=, agent=) reads
    hand.assemble(words, who, now, shown, relaxed, reads)  # one assembly's reads, write
    hand.write(ops, who, now)                # the writes of one flush, in one transaction

Each does what the store does for the same request, as its statements show
(an apsw exec trace on SQLite, ``log_statement = 'all'`` on PostgreSQL), with
what the store adds for its own bookkeeping left out:

- **search**: the best ``pool`` facts for the store's own words (after its query
  processing) among those the user sees (their facts and the shared ones of
  the scope and the global scope, live, not hidden by a newer near-duplicate),
  every column, ranked by BM25 (FTS5's on SQLite; on PostgreSQL the engine's
  BM25 statement typed out, ``benchmarks/_pg_hand.py``). As the store does, the
  SQLite match also asks for the owner terms of whom the user sees where their
  facts are a small share of a large store, and PostgreSQL reads each word's
  document count once in a large table; then the first ten counted as accessed in one
  transaction. Not done: ranking by decay and reinforcement (Python), the
  co-recall link and near-duplicate lookups, the statistics checks.
- **assemble**: the user's profile (their five most important keyed facts not hidden
  by a newer near-duplicate);
  for each slot whose section searched (one the budget left no room for does
  not), the same BM25 read with the filter of that slot (user facts: no scope;
  project facts: the scope; agent facts: the agent and the scope), as many rows
  deep as the section asked for (at least the pool), and a second read with
  every word of the message where the section ran out of matches with room left
  and searched relaxed (the benchmark notes both from the store's own assembly
  of the same request; where the store read a slot again deeper, the floor
  reads it once); then ``shown`` of the rows read counted as accessed in one
  transaction (the store's prompt showed that many). The token count of the
  final text is added by the benchmark.
- **write**: the flush's transaction: its progress read, then for each
  operation the live fact with that key read (locked on PostgreSQL), and
  either its old value written to history and the row updated, or a new row
  inserted; then the progress written. The full-text index follows through
  the engine's own triggers (SQLite) or generated column (PostgreSQL). Not
  done: the store's advisory lock per key (PostgreSQL), savepoints, and the
  re-reads of each written row.

On SQLite the floors write a row limit as ``LIMIT +?``, as the store does: with a
plain ``LIMIT ?`` under an ``ORDER BY``, SQLite plans the statement again on each run.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import apsw

from _people import AGENT
from _pg_hand import HandBM25
from ctxslots.stores.sanitize import to_match
from ctxslots.stores.sqlite._lexical import _OWNERS_MAX_SHARE as OWNERS_MAX_SHARE
from ctxslots.stores.sqlite._lexical import _OWNERS_MIN_ROWS as OWNERS_MIN_ROWS
from ctxslots.stores.sqlite._schema import owner_term
from ctxslots.stores.stemming import stem_text, stemmed_query

__all__ = ["Op", "PostgresHand", "SqliteHand", "Who"]

#: The candidates a store search reads from each leg (FactStore's default candidate_pool).
POOL = 100
#: Hits a search returns (and counts as accessed).
LIMIT = 10
#: The profile's size (UserMemoryContributor's profile_size).
PROFILE = 5
_BUSY_MS = 30_000

_COLUMNS = ("id, slot, scope, key, value, tags, source, confidence, score, created_at, "
            "updated_at, observed_at, last_accessed, access_count, expires_at, superseded_by, "
            "context, user_id, agent_id")
_IMPORTANCE = ("score DESC, access_count DESC, confidence DESC, key IS NULL, updated_at DESC, "
               "id")


@dataclass(frozen=True)
class Who:
    """Who asks: a user, the scope they work in, the agent answering."""

    user: str
    scope: str
    agent: str = AGENT


@dataclass(frozen=True)
class Op:
    """One upsert of a flush: a user fact's key and new value."""

    key: str
    value: str


def _slot_filters(who: Who) -> list[tuple[str, list[Any]]]:
    """For each memory slot: the condition on (user, agent, scope) its section reads."""
    return [("user", [who.user, "", who.agent, "", ""]),
            ("project", [who.user, "", who.agent, "", who.scope]),
            ("agent", [who.user, "", who.agent, "", who.scope])]


class _Requests:
    """A search and an assembly made of an engine's BM25 read, profile and access write."""

    def _bm25(self, words: Sequence[str], owners: list[Any], slot: str | None, now: float,
              depth: int = POOL) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def _touch(self, ids: Sequence[int], now: float) -> None:
        raise NotImplementedError

    def profile(self, who: Who, now: float) -> list[tuple[Any, ...]]:
        """The user's most important keyed or reinforced facts."""
        raise NotImplementedError

    def search(self, words: Sequence[str], who: Who, now: float,
               relaxed: Sequence[str] = ()) -> list[int]:
        """The ids of the best rows (for ``relaxed`` when none match ``words``, as the
        store's search looks for the common words then); the first ten counted as accessed."""
        owners = [who.user, "", who.agent, "", who.scope]
        rows = self._bm25(words, owners, None, now)
        if not rows and relaxed and list(relaxed) != list(words):
            rows = self._bm25(relaxed, owners, None, now)
        ids = [int(r[0]) for r in rows]
        self._touch(ids[:LIMIT], now)
        return ids

    def assemble(self, words: Sequence[str], who: Who, now: float, shown: int,
                 relaxed: Sequence[str], reads: Mapping[tuple[str, bool], int]) -> int:
        """The profile, the rows of each slot in ``reads`` as deep as ``reads[slot, False]``
        asked (and with the ``relaxed`` words where ``reads[slot, True]`` is), ``shown`` of
        them counted; how many rows were read."""
        rows = list(self.profile(who, now))
        for slot, owners in _slot_filters(who):
            if (slot, False) in reads:
                rows += self._bm25(words, owners, slot, now, max(POOL, reads[slot, False]))
            if (slot, True) in reads:
                rows += self._bm25(relaxed, owners, slot, now, max(POOL, reads[slot, True]))
        self._touch([int(r[0]) for r in rows[:shown]], now)
        return len(rows)


@dataclass
class SqliteHand(_Requests):
    """Raw SQL on a plain apsw connection to the store's file."""

    conn: apsw.Connection
    facts: int

    @classmethod
    def open(cls, path: str) -> SqliteHand:
        """A connection set up as the store sets up its own for writing."""
        conn = apsw.Connection(path)
        conn.set_busy_timeout(_BUSY_MS)
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA secure_delete=ON")
        conn.execute("CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, facts_fts, 'row')")
        return cls(conn, int(conn.execute("SELECT count(*) FROM facts").fetchone()[0]))

    def _owner_match(self, owners: list[Any]) -> str:
        """The match of the owner terms these owners see, where the store would ask for
        them (their facts a small share of a large store), else nothing."""
        user, no_user, agent, no_agent, scope = owners
        terms = [owner_term(*who) for who in itertools.product(
            (user, no_user), (agent, no_agent), (scope, "") if scope else ("",))]
        owned = sum(int(n) for (n,) in self.conn.execute(
            f"SELECT doc FROM temp.vocab WHERE term IN ({','.join('?' * len(terms))})", terms))
        if self.facts < OWNERS_MIN_ROWS or owned > self.facts * OWNERS_MAX_SHARE:
            return ""
        return f"owner_term : ({to_match(terms)}) AND "

    def _bm25(self, words: Sequence[str], owners: list[Any], slot: str | None, now: float,
              depth: int = POOL) -> list[tuple[Any, ...]]:
        stems = stemmed_query(words)  # the index holds stems
        if not stems:
            return []
        match = f"{self._owner_match(owners)}{{stems context_stems}} : ({to_match(stems)})"
        user, no_user, agent, no_agent, scope = owners
        scopes = "f.scope = ''" if not scope else "f.scope IN (?, '')"
        sql = (f"SELECT f.*, facts_fts.rank FROM facts_fts JOIN facts AS f "
               f"ON f.id = facts_fts.rowid WHERE facts_fts MATCH ? "
               f"AND f.user_id IN (?, ?) AND f.agent_id IN (?, ?) "
               f"{'AND f.slot = ? ' if slot else ''}AND {scopes} "
               f"AND f.superseded_by IS NULL AND (f.expires_at IS NULL OR f.expires_at > ?) "
               f"ORDER BY facts_fts.rank, f.id LIMIT +?")
        params = [match, user, no_user, agent, no_agent, *([slot] if slot else []),
                  *([scope] if scope else []), now, depth]
        return self.conn.execute(sql, params).fetchall()

    def _touch(self, ids: Sequence[int], now: float) -> None:
        if not ids:
            return
        with self.conn:
            self.conn.execute(
                f"UPDATE facts SET access_count = access_count + 1, last_accessed = ? "
                f"WHERE id IN ({','.join('?' * len(ids))})", (now, *ids))

    def profile(self, who: Who, now: float) -> list[tuple[Any, ...]]:
        """The user's most important keyed or reinforced facts."""
        return self.conn.execute(
            f"SELECT {_COLUMNS} FROM facts WHERE user_id = ? AND agent_id = '' AND slot = 'user' "
            f"AND scope = '' AND (expires_at IS NULL OR expires_at > ?) "
            f"AND superseded_by IS NULL "
            f"AND (key IS NOT NULL OR score > 0) ORDER BY {_IMPORTANCE} LIMIT +?",
            (who.user, now, PROFILE)).fetchall()

    def write(self, ops: Sequence[Op], who: Who, now: float) -> None:
        """One flush's writes in one transaction."""
        conn = self.conn
        conversation = f"conversation-{who.user}"
        with conn:
            conn.execute("SELECT messages_read, fingerprint FROM flush_progress "
                         "WHERE user_id = ? AND agent_id = ? AND conversation = ?",
                         (who.user, who.agent, conversation)).fetchall()
            for op in ops:
                old = conn.execute(
                    f"SELECT {_COLUMNS} FROM facts WHERE slot = 'user' AND scope = '' "
                    f"AND user_id = ? AND agent_id = '' AND key = ? "
                    f"AND (expires_at IS NULL OR expires_at > ?)",
                    (who.user, op.key, now)).fetchone()
                if old is not None:
                    conn.execute(
                        "INSERT INTO fact_history (fact_id, slot, scope, key, value, tags, "
                        "source, confidence, valid_from, valid_to) VALUES (?,?,?,?,?,?,?,?,?,?)",
                        (old[0], old[1], old[2], old[3], old[4], old[5], old[6], old[7],
                         old[10], now))
                    # The index holds the stems: they change with the value.
                    conn.execute("UPDATE facts SET value = ?, stems = ?, source = 'flush', "
                                 "updated_at = ?, observed_at = ? WHERE id = ?",
                                 (op.value, stem_text(op.key, op.value, old[5]), now, now,
                                  old[0]))
                else:
                    conn.execute(
                        "INSERT INTO facts (slot, scope, key, value, tags, source, confidence, "
                        "score, created_at, updated_at, observed_at, access_count, user_id, "
                        "agent_id, stems) VALUES ('user', '', ?, ?, '', 'flush', 1.0, 0.0, ?, ?, "
                        "?, 0, ?, '', ?)", (op.key, op.value, now, now, now, who.user,
                                           stem_text(op.key, op.value, "")))
            conn.execute("INSERT OR REPLACE INTO flush_progress (user_id, agent_id, "
                         "conversation, messages_read, fingerprint, updated_at) "
                         "VALUES (?, ?, ?, ?, ?, ?)",
                         (who.user, who.agent, conversation, 10, "hand", now))

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()


@dataclass
class PostgresHand(_Requests):
    """Raw SQL on a plain psycopg connection: the engine's BM25 statement typed out
    (``benchmarks/_pg_hand.py``), the table's N and mean length read once."""

    conn: Any
    bm25: HandBM25

    @classmethod
    def open(cls, url: str) -> PostgresHand:
        """An autocommit connection (transactions opened where the store opens them)."""
        import psycopg

        conn = psycopg.connect(url, autocommit=True)
        return cls(conn, HandBM25.open(conn))

    def _bm25(self, words: Sequence[str], owners: list[Any], slot: str | None, now: float,
              depth: int = POOL) -> list[tuple[Any, ...]]:
        user, no_user, agent, no_agent, scope = owners
        return self.bm25.rows(words, [user, no_user], [agent, no_agent],
                              [scope, ""] if scope else [""], now, depth, slot=slot,
                              columns=", ".join(f"f.{c.strip()}" for c in _COLUMNS.split(",")))

    def _touch(self, ids: Sequence[int], now: float) -> None:
        if ids:  # one statement, committed on its own, as the store counts them
            self.conn.execute("UPDATE facts SET access_count = access_count + 1, "
                              "last_accessed = %s WHERE id = ANY(%s)", (now, list(ids)))

    def profile(self, who: Who, now: float) -> list[tuple[Any, ...]]:
        """The user's most important keyed or reinforced facts."""
        return self.conn.execute(
            f"SELECT {_COLUMNS} FROM facts WHERE user_id = %s AND agent_id = '' "
            f"AND slot = 'user' AND scope = '' AND (expires_at IS NULL OR expires_at > %s) "
            f"AND superseded_by IS NULL "
            f"AND (key IS NOT NULL OR score > 0) ORDER BY {_IMPORTANCE} LIMIT %s",
            (who.user, now, PROFILE)).fetchall()

    def write(self, ops: Sequence[Op], who: Who, now: float) -> None:
        """One flush's writes in one transaction."""
        conn = self.conn
        conversation = f"conversation-{who.user}"
        with conn.transaction():
            conn.execute("SELECT messages_read, fingerprint FROM flush_progress "
                         "WHERE user_id = %s AND agent_id = %s AND conversation = %s",
                         (who.user, who.agent, conversation)).fetchall()
            for op in ops:
                old = conn.execute(
                    f"SELECT {_COLUMNS} FROM facts WHERE scope = '' AND user_id = %s "
                    f"AND agent_id = '' AND slot = 'user' AND key = %s "
                    f"AND (expires_at IS NULL OR expires_at > %s) FOR UPDATE",
                    (who.user, op.key, now)).fetchone()
                if old is not None:
                    conn.execute(
                        "INSERT INTO fact_history (fact_id, slot, scope, key, value, tags, "
                        "source, confidence, valid_from, valid_to, user_id) "
                        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                        (old[0], old[1], old[2], old[3], old[4], old[5], old[6], old[7],
                         old[10], now, who.user))
                    # The tsvectors are made from the stems: they change with the value.
                    conn.execute("UPDATE facts SET value = %s, stems = %s, source = 'flush', "
                                 "updated_at = %s, observed_at = %s WHERE id = %s AND scope = '' "
                                 "AND user_id = %s",
                                 (op.value, stem_text(op.key, op.value, old[5]), now, now, old[0],
                                  who.user))
                else:
                    conn.execute(
                        "INSERT INTO facts (slot, scope, key, value, tags, source, confidence, "
                        "score, created_at, updated_at, observed_at, access_count, user_id, "
                        "agent_id, stems) VALUES ('user', '', %s, %s, '', 'flush', 1.0, 0.0, %s, "
                        "%s, %s, 0, %s, '', %s) ON CONFLICT (scope, user_id, agent_id, slot, key) "
                        "WHERE key IS NOT NULL DO NOTHING",
                        (op.key, op.value, now, now, now, who.user,
                         stem_text(op.key, op.value, "")))
            conn.execute(
                "INSERT INTO flush_progress (user_id, agent_id, conversation, messages_read, "
                "fingerprint, updated_at) VALUES (%s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (user_id, agent_id, conversation) DO UPDATE SET "
                "messages_read = excluded.messages_read, fingerprint = excluded.fingerprint, "
                "updated_at = excluded.updated_at",
                (who.user, who.agent, conversation, 10, "hand", now))

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()
