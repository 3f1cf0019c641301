"""Schema migrations: named functions applied once, in order.

The schema version is ``PRAGMA user_version``: version N means the first N
migrations in :data:`MIGRATIONS` have been applied. Each migration runs in its
own write transaction together with the version bump, so a crash leaves the
file at version N or N + 1, never in between.

The ``facts`` table is the source of truth; the FTS5 indexes are derived from
it by triggers and can be rebuilt at any time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import StoreError

if TYPE_CHECKING:
    # Only a type: _sqlite imports this module to migrate a store it opens.
    from ._sqlite import Connection

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "migrate", "schema_version"]

#: FTS5 tokenizer for every text index: Porter stemming over unicode61
#: (case- and diacritic-insensitive). Stemming was the largest single gain in
#: lexical recall measured on conversational memory (see BENCHMARKS.md).
FTS_TOKENIZE = "porter unicode61 remove_diacritics 2"

_FACT_COLUMNS = """
    slot TEXT NOT NULL,
    scope TEXT NOT NULL DEFAULT '',
    key TEXT,
    value TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '',
    source TEXT,
    confidence REAL NOT NULL DEFAULT 1.0,
    score REAL NOT NULL DEFAULT 0.0,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    last_accessed REAL,
    access_count INTEGER NOT NULL DEFAULT 0,
    expires_at REAL
"""


def _fts_with_triggers(table: str) -> str:
    """FTS5 external-content index over key, value and tags of ``table``."""
    fts = f"{table}_fts"
    return f"""
    CREATE VIRTUAL TABLE {fts} USING fts5(
        key, value, tags,
        content='{table}', content_rowid='id', tokenize='{FTS_TOKENIZE}'
    );
    CREATE TRIGGER {table}_ai AFTER INSERT ON {table} BEGIN
        INSERT INTO {fts}(rowid, key, value, tags)
        VALUES (new.id, new.key, new.value, new.tags);
    END;
    CREATE TRIGGER {table}_ad AFTER DELETE ON {table} BEGIN
        INSERT INTO {fts}({fts}, rowid, key, value, tags)
        VALUES ('delete', old.id, old.key, old.value, old.tags);
    END;
    -- Only indexed columns: access tracking and scores must not rewrite the index.
    CREATE TRIGGER {table}_au AFTER UPDATE OF key, value, tags ON {table} BEGIN
        INSERT INTO {fts}({fts}, rowid, key, value, tags)
        VALUES ('delete', old.id, old.key, old.value, old.tags);
        INSERT INTO {fts}(rowid, key, value, tags)
        VALUES (new.id, new.key, new.value, new.tags);
    END;
    """


def m001_facts(conn: Connection) -> None:
    """Facts with their FTS index, the history of replaced values, the archive."""
    conn.execute(
        f"""
        -- AUTOINCREMENT: ids are never reused, so an archived fact keeps its id.
        CREATE TABLE facts (id INTEGER PRIMARY KEY AUTOINCREMENT, {_FACT_COLUMNS});
        CREATE UNIQUE INDEX facts_slot_scope_key ON facts(slot, scope, key)
            WHERE key IS NOT NULL;
        CREATE INDEX facts_slot_scope ON facts(slot, scope);
        {_fts_with_triggers("facts")}

        CREATE TABLE fact_history (
            id INTEGER PRIMARY KEY,
            fact_id INTEGER NOT NULL,
            slot TEXT NOT NULL,
            scope TEXT NOT NULL,
            key TEXT,
            value TEXT NOT NULL,
            tags TEXT NOT NULL,
            source TEXT,
            confidence REAL NOT NULL,
            valid_from REAL NOT NULL,
            valid_to REAL NOT NULL
        );
        CREATE INDEX fact_history_fact ON fact_history(fact_id);

        CREATE TABLE archive (
            id INTEGER PRIMARY KEY, {_FACT_COLUMNS},
            archived_at REAL NOT NULL,
            reason TEXT
        );
        {_fts_with_triggers("archive")}
        """
    )


def m002_meta(conn: Connection) -> None:
    """Store-wide settings and per-conversation flush progress."""
    conn.execute(
        """
        CREATE TABLE store_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE flush_progress (
            conversation TEXT PRIMARY KEY,
            messages_read INTEGER NOT NULL,
            fingerprint TEXT NOT NULL,
            updated_at REAL NOT NULL
        );
        """
    )


def m003_vector_log(conn: Connection) -> None:
    """The change log that keeps in-memory vector caches consistent with the file.

    The ``vec0`` table itself is created when the first embedder is bound,
    because its dimension comes from the embedder.
    """
    conn.execute(
        """
        CREATE TABLE vector_log (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            fact_id INTEGER NOT NULL,
            op TEXT NOT NULL
        );
        """
    )


def m004_superseded(conn: Connection) -> None:
    """Near-duplicate marking, and an index for reading facts in time order.

    ``superseded_by`` names the newer near-duplicate that hides a fact from
    search (``NULL``: not superseded). The archive gets the same column so a
    fact moves there with all its fields.
    """
    conn.execute(
        """
        ALTER TABLE facts ADD COLUMN superseded_by INTEGER;
        ALTER TABLE archive ADD COLUMN superseded_by INTEGER;
        CREATE INDEX facts_superseded_by ON facts(superseded_by) WHERE superseded_by IS NOT NULL;
        CREATE INDEX facts_created_at ON facts(created_at);
        """
    )


def m005_links(conn: Connection) -> None:
    """Co-recall links: pairs of facts returned together and then reinforced.

    Each pair is stored once, ``a < b``; ``strength`` counts the reinforcements.
    """
    conn.execute(
        """
        CREATE TABLE fact_links (
            a INTEGER NOT NULL,
            b INTEGER NOT NULL,
            strength REAL NOT NULL,
            updated_at REAL NOT NULL,
            PRIMARY KEY (a, b)
        ) WITHOUT ROWID;
        CREATE INDEX fact_links_b ON fact_links(b);
        """
    )


def m006_fact_log(conn: Connection) -> None:
    """The change log that keeps in-memory lexical indexes consistent with the file.

    Triggers append the id of every fact inserted, deleted, or changed in a
    column a search filters or scores on; access counts and scores are not logged.
    """
    conn.execute(
        """
        CREATE TABLE fact_log (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            fact_id INTEGER NOT NULL
        );
        CREATE TRIGGER facts_log_ai AFTER INSERT ON facts BEGIN
            INSERT INTO fact_log (fact_id) VALUES (new.id);
        END;
        CREATE TRIGGER facts_log_ad AFTER DELETE ON facts BEGIN
            INSERT INTO fact_log (fact_id) VALUES (old.id);
        END;
        CREATE TRIGGER facts_log_au AFTER UPDATE OF slot, scope, key, value, tags, expires_at,
                superseded_by ON facts BEGIN
            INSERT INTO fact_log (fact_id) VALUES (new.id);
        END;
        """
    )


#: Every migration, in the order applied. Append only; never reorder or edit.
MIGRATIONS: tuple[Callable[[Connection], None], ...] = (
    m001_facts, m002_meta, m003_vector_log, m004_superseded, m005_links,
    m006_fact_log)

#: The schema version this code writes.
SCHEMA_VERSION = len(MIGRATIONS)


def schema_version(conn: Connection) -> int:
    """The migration count recorded in the database file."""
    return int(conn.scalar("PRAGMA user_version"))


def migrate(conn: Connection, *, target: int = SCHEMA_VERSION) -> list[str]:
    """Apply pending migrations up to ``target``; return the names applied.

    :raises StoreError: The file was written by a newer ctxslots.
    """
    applied: list[str] = []
    current = schema_version(conn)
    if current > SCHEMA_VERSION:
        raise StoreError(
            f"{conn.path} has schema version {current}, newer than the {SCHEMA_VERSION} "
            "this ctxslots understands; upgrade ctxslots",
            path=conn.path,
        )
    for number in range(current, target):
        step = MIGRATIONS[number]
        with conn.write():
            # Re-read inside the lock: another process may have migrated meanwhile.
            if schema_version(conn) > number:
                continue
            step(conn)
            conn.execute(f"PRAGMA user_version = {number + 1}")
        applied.append(step.__name__)
    return applied
