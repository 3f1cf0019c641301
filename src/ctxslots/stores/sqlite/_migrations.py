"""Schema migrations: named functions applied once, in order.

The schema version is ``PRAGMA user_version``: version N means the first N
migrations in :data:`MIGRATIONS` have been applied. Each migration runs in its
own write transaction together with the version bump, so a crash leaves the
file at version N or N + 1, never in between.

The ``facts`` table is the source of truth; the FTS5 indexes are derived from
it by triggers and can be rebuilt at any time (:mod:`._schema` holds the current
definitions).
"""

from __future__ import annotations

from collections.abc import Callable

from ...errors import StoreError
from ..owners import DEFAULT_AGENT, DEFAULT_USER
from ..stemming import stems_of
from ._connection import Connection
from ._schema import (
    IMPORTANCE,
    IMPORTANT_WHERE,
    INDEXES,
    LOG_TRIGGERS,
    OWNER_TERM,
    fts_objects,
    fts_rank,
    fts_secure_delete,
    log_on_update,
)

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "migrate", "refuse_newer", "schema_version"]

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

#: The columns ``m013`` indexed (its objects are rebuilt by ``m014``).
_M013_FTS_COLUMNS = ("stems", "context_stems")
#: The columns ``m011`` indexed (with Porter stemming; its objects are rebuilt by ``m013``).
_M011_FTS_COLUMNS = ("key", "value", "tags", "context")
#: The columns ``m001`` indexed (its objects are rebuilt by ``m011``).
_M001_FTS_COLUMNS = ("key", "value", "tags")


def _fts_with_triggers(table: str) -> str:
    return "".join(f"{sql};\n" for _, _, sql in fts_objects(table, _M001_FTS_COLUMNS))


_M006_LOG_ON_UPDATE = log_on_update("slot, scope, key, value, tags, expires_at, superseded_by")

_M009_IMPORTANT_INDEX = (f"CREATE INDEX facts_important ON facts(slot, scope, {IMPORTANCE}) "
                         f"WHERE {IMPORTANT_WHERE}")

_M010_VALUE_INDEXES = (
    "CREATE INDEX facts_free_value ON facts(slot, scope, value) WHERE key IS NULL",
    "CREATE INDEX archive_value ON archive(slot, scope, value)",
)


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
        """
    )
    for _, name, sql in LOG_TRIGGERS:
        conn.execute(_M006_LOG_ON_UPDATE if name == "facts_log_au" else sql)


def m007_observed_at(conn: Connection) -> None:
    """When a memory was said or observed, apart from when it was written.

    Existing facts were observed when they were written.
    """
    conn.execute(
        """
        ALTER TABLE facts ADD COLUMN observed_at REAL;
        ALTER TABLE archive ADD COLUMN observed_at REAL;
        UPDATE facts SET observed_at = created_at;
        UPDATE archive SET observed_at = created_at;
        CREATE INDEX facts_observed_at ON facts(observed_at, id);
        """
    )


def m008_vector_table(conn: Connection) -> None:
    """Vectors in an ordinary table, indexed by scope and slot.

    The ``vec0`` table this replaces was partitioned by scope, and a ``vec0``
    partition allocates a whole chunk (about 1.6 MB at 384 dimensions) however
    few rows it holds, so every scope cost that much. A plain table costs what
    its rows cost; a search reads its scopes' rows through the index and
    measures them with sqlite-vec's distance function. Vectors already stored
    are kept.
    """
    conn.execute(
        """
        CREATE TABLE vectors (
            fact_id INTEGER PRIMARY KEY,
            scope TEXT NOT NULL,
            slot TEXT NOT NULL,
            embedding BLOB NOT NULL
        );
        CREATE INDEX vectors_scope_slot ON vectors(scope, slot);
        """
    )
    if conn.scalar("SELECT 1 FROM sqlite_master WHERE name = 'fact_vectors'") is not None:
        if conn.vec_version is None:
            raise StoreError(
                f"{conn.path} holds a vec0 vector table; open it with sqlite-vec loaded to "
                "migrate it", path=conn.path)
        conn.execute("INSERT INTO vectors (fact_id, scope, slot, embedding) "
                     "SELECT fact_id, scope, slot, embedding FROM fact_vectors")
        conn.execute("DROP TABLE fact_vectors")


def m009_important(conn: Connection) -> None:
    """An index of the keyed and reinforced facts by importance, for the user profile.

    Without it, reading a slot's five most important facts sorted every fact
    of the slot (17 ms at 20,000 user facts, on every prompt assembly).
    """
    conn.execute(_M009_IMPORTANT_INDEX)


def m010_value_lookup(conn: Connection) -> None:
    """Indexes of free memories and archived facts by value.

    An identical free memory was found by reading every value of its slot and
    scope, so adding (and importing) memories took time in the square of their
    number: 10,000 took 7.3 s, 20,000 27 s.
    """
    for sql in _M010_VALUE_INDEXES:
        conn.execute(sql)


def m011_context(conn: Connection) -> None:
    """A memory's context: words that find it without being part of it.

    ``facts`` and ``archive`` get the column; both FTS5 indexes are made again
    with it as a fourth column, weighted by ``CONTEXT_WEIGHT`` in ``rank``,
    and refilled; a change of context is logged for the in-memory copies.
    """
    conn.execute("ALTER TABLE facts ADD COLUMN context TEXT; "
                 "ALTER TABLE archive ADD COLUMN context TEXT; "
                 "DROP TRIGGER IF EXISTS facts_log_au;")
    for table in ("facts", "archive"):
        for kind, name, _ in fts_objects(table, _M001_FTS_COLUMNS):
            conn.execute(f"DROP {kind.upper()} IF EXISTS {name}")
        for _, _, sql in fts_objects(table, _M011_FTS_COLUMNS):
            conn.execute(sql)
        conn.execute(fts_rank(table, _M011_FTS_COLUMNS))
        conn.execute(f"INSERT INTO {table}_fts({table}_fts) VALUES ('rebuild')")
    conn.execute(LOG_TRIGGERS[-1][2])


def m012_owners(conn: Connection) -> None:
    """Owners: the user and the agent each fact belongs to (see :mod:`ctxslots.stores.owners`).

    ``facts``, ``archive`` and ``vectors`` get ``user_id`` and ``agent_id`` (``""``:
    none); the facts a store held are its default user's (slot ``user``) and
    default agent's (slot ``agent``), the rest shared as before. Every key and
    index a search reads includes the owners; flush progress is kept per user
    and agent. The FTS5 indexes remove a deleted row's words at once
    (``secure-delete``), so an erased fact leaves no word of it in the file.
    """
    for table in ("facts", "archive", "vectors"):
        conn.execute(f"ALTER TABLE {table} ADD COLUMN user_id TEXT NOT NULL DEFAULT ''; "
                     f"ALTER TABLE {table} ADD COLUMN agent_id TEXT NOT NULL DEFAULT ''")
    for table in ("facts", "archive"):
        conn.execute(f"UPDATE {table} SET user_id = ? WHERE slot = 'user'", (DEFAULT_USER,))
        conn.execute(f"UPDATE {table} SET agent_id = ? WHERE slot = 'agent'", (DEFAULT_AGENT,))
    conn.execute("UPDATE vectors SET (user_id, agent_id) = "
                 "(SELECT user_id, agent_id FROM facts WHERE facts.id = vectors.fact_id)"
                 " WHERE fact_id IN (SELECT id FROM facts)")
    conn.execute(
        """
        DROP INDEX facts_slot_scope_key;
        DROP INDEX facts_slot_scope;
        DROP INDEX facts_important;
        DROP INDEX facts_free_value;
        DROP INDEX archive_value;
        DROP INDEX vectors_scope_slot;
        ALTER TABLE flush_progress RENAME TO flush_progress_m011;
        CREATE TABLE flush_progress (
            user_id TEXT NOT NULL,
            agent_id TEXT NOT NULL,
            conversation TEXT NOT NULL,
            messages_read INTEGER NOT NULL,
            fingerprint TEXT NOT NULL,
            updated_at REAL NOT NULL,
            PRIMARY KEY (user_id, agent_id, conversation)
        ) WITHOUT ROWID;
        """)
    conn.execute("INSERT INTO flush_progress SELECT ?, ?, conversation, messages_read, "
                 "fingerprint, updated_at FROM flush_progress_m011", (DEFAULT_USER, DEFAULT_AGENT))
    conn.execute("DROP TABLE flush_progress_m011")
    for name in ("facts_owner_key", "facts_owners", "archive_owners", "facts_important",
                 "facts_free_value", "archive_value", "vectors_owners"):
        conn.execute(next(sql for _, n, sql in INDEXES if n == name))
    for table in ("facts", "archive"):
        conn.execute(fts_secure_delete(table))


def m013_stems(conn: Connection) -> None:
    """One stemmer for both engines: the FTS5 indexes hold stems made in Python.

    ``facts`` and ``archive`` get ``stems`` (the key, value and tags stemmed,
    see :mod:`ctxslots.stores.stemming`) and ``context_stems``, filled from
    every row; both FTS5 indexes are made again over them with a tokenizer that
    only splits (Porter stemming in FTS5 made ``deploys`` ``deploi`` where
    PostgreSQL's Snowball made it ``deploy``), and refilled.
    """
    for table in ("facts", "archive"):
        for kind, name, _ in fts_objects(table, _M011_FTS_COLUMNS):
            conn.execute(f"DROP {kind.upper()} IF EXISTS {name}")
        conn.execute(f"ALTER TABLE {table} ADD COLUMN stems TEXT NOT NULL DEFAULT ''; "
                     f"ALTER TABLE {table} ADD COLUMN context_stems TEXT")
        last = -1
        while rows := conn.execute(f"SELECT id, key, value, tags, context FROM {table} "
                                   "WHERE id > ? ORDER BY id LIMIT 5000", (last,)).fetchall():
            conn.executemany(f"UPDATE {table} SET stems = ?, context_stems = ? WHERE id = ?",
                             [(*stems_of(key, value, tags, context), fact_id)
                              for fact_id, key, value, tags, context in rows])
            last = int(rows[-1][0])
        for _, _, sql in fts_objects(table, _M013_FTS_COLUMNS):
            conn.execute(sql)
        conn.execute(fts_rank(table, _M013_FTS_COLUMNS))
        conn.execute(fts_secure_delete(table))
        conn.execute(f"INSERT INTO {table}_fts({table}_fts) VALUES ('rebuild')")


def m014_owner_term(conn: Connection) -> None:
    """An owner term in the FTS5 indexes: a search of one owner's facts matches theirs alone.

    ``facts`` and ``archive`` get ``owner_term``, a generated column holding one
    word made of the fact's user, agent and scope; both FTS5 indexes are made
    again with it as a third column of no weight in ``rank``, and refilled.
    """
    for table in ("facts", "archive"):
        for kind, name, _ in fts_objects(table, _M013_FTS_COLUMNS):
            conn.execute(f"DROP {kind.upper()} IF EXISTS {name}")
        conn.execute(f"ALTER TABLE {table} ADD COLUMN {OWNER_TERM}")
        for _, _, sql in fts_objects(table):
            conn.execute(sql)
        conn.execute(fts_rank(table))
        conn.execute(fts_secure_delete(table))
        conn.execute(f"INSERT INTO {table}_fts({table}_fts) VALUES ('rebuild')")


def m015_script_stems(conn: Connection) -> None:
    """Stems made again for text outside ASCII: Han, kana and Hangul runs indexed as
    their characters and pairs, Indic vowel signs and kana voicing marks kept (see
    :mod:`ctxslots.stores.stemming`). Only rows holding a character outside printable
    ASCII can change; the index follows each update through its triggers."""
    for table in ("facts", "archive"):
        last = -1
        while rows := conn.execute(
                f"SELECT id, key, value, tags, context, stems, context_stems FROM {table} "
                "WHERE id > ? AND (coalesce(key, '') || value || tags || coalesce(context, '')) "
                "GLOB '*[^ -~]*' ORDER BY id LIMIT 5000", (last,)).fetchall():
            changed = [(*made, fact_id) for fact_id, key, value, tags, context, *stored in rows
                       if (made := stems_of(key, value, tags, context)) != tuple(stored)]
            conn.executemany(f"UPDATE {table} SET stems = ?, context_stems = ? WHERE id = ?",
                             changed)
            last = int(rows[-1][0])


def m016_history_observed_at(conn: Connection) -> None:
    """When each earlier value was said or observed, apart from when it was written.

    A value replaced before holds none (``NULL``) and reads as its ``valid_from``:
    no row is rewritten.
    """
    conn.execute("ALTER TABLE fact_history ADD COLUMN observed_at REAL")


#: Every migration, in the order applied. Append only; never reorder or edit.
MIGRATIONS: tuple[Callable[[Connection], None], ...] = (
    m001_facts, m002_meta, m003_vector_log, m004_superseded, m005_links,
    m006_fact_log, m007_observed_at, m008_vector_table, m009_important,
    m010_value_lookup, m011_context, m012_owners, m013_stems, m014_owner_term,
    m015_script_stems, m016_history_observed_at)

#: The schema version this code writes.
SCHEMA_VERSION = len(MIGRATIONS)


def schema_version(conn: Connection) -> int:
    """The migration count recorded in the database file."""
    return int(conn.scalar("PRAGMA user_version"))


def refuse_newer(conn: Connection) -> int:
    """The file's schema version, when this code can read it.

    :raises StoreError: The file was written by a newer ctxslots.
    """
    current = schema_version(conn)
    if current > SCHEMA_VERSION:
        raise StoreError(
            f"{conn.path} has schema version {current}, newer than the {SCHEMA_VERSION} "
            "this ctxslots understands; upgrade ctxslots",
            path=conn.path,
        )
    return current


def migrate(conn: Connection, *, target: int = SCHEMA_VERSION) -> list[str]:
    """Apply pending migrations up to ``target``; return the names applied.

    :raises StoreError: The file was written by a newer ctxslots.
    """
    applied: list[str] = []
    current = refuse_newer(conn)
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
