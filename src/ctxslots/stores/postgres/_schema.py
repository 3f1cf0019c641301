"""The PostgreSQL schema: versioned migrations applied once, under an advisory lock.

``schema_migrations`` records every migration applied (version, name, time).
Opening a store takes a transaction-scoped advisory lock before it reads that
table and applies what is missing, all in one transaction, so many hosts can
start at once: the first applies the migrations, the others wait for it and
then find nothing to do. A crash leaves the schema as it was before.

Every table that holds facts carries the ``scope`` and ``user_id`` columns, and
every primary or unique key includes both, so the store can be split by user or
by scope (Citus ``create_distributed_table('facts', 'user_id')``, see
``docs/postgres.md``).
``store_meta``, ``flush_progress`` and ``schema_migrations`` are small
store-wide tables (Citus reference tables).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import errors as pgerrors
from psycopg import sql

from ...errors import StoreError
from ..owners import DEFAULT_AGENT, DEFAULT_USER
from ..stemming import stems_of
from ._sql import relation_exists

__all__ = [
    "LOCK_CLASS",
    "MIGRATIONS",
    "NAME_LOCK_CLASS",
    "OWNER_TERM",
    "SCHEMA_VERSION",
    "TS_CONFIG",
    "migrate",
    "schema_version",
]

#: Advisory lock class of the migration lock (``pg_advisory_xact_lock(class, 0)``).
LOCK_CLASS = 0x63747873
#: Advisory lock class of reserved names (store settings).
NAME_LOCK_CLASS = 0x63747874

#: The text search configuration of every tsvector: ``simple`` (lower-cased
#: words, nothing stemmed or left out), as the indexed columns hold words already
#: folded and stemmed in Python (``m005``, :mod:`ctxslots.stores.stemming`), the
#: words SQLite's index holds.
TS_CONFIG = "simple"
#: The configuration before ``m005``: Snowball English in PostgreSQL, stop words kept.
_M001_TS_CONFIG = "ctxslots_english"

#: The index a vector search reads its visible rows through (the vector table is
#: made when an embedder is bound; see :mod:`._vectors`).
OWNERS_VECTOR_INDEX = ("CREATE INDEX fact_vectors_owners ON fact_vectors "
                       "(user_id, agent_id, slot, scope)")

#: ASCII and common unicode punctuation become spaces before parsing, so that
#: PostgreSQL's parser splits ``src/api.py``, ``a@b.com`` or ``w0.k3`` into the
#: words the query tokenizer (and SQLite's unicode61) sees, not one lexeme.
_PUNCTUATION = ("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
                "\u2018\u2019\u201c\u201d\u2013\u2014\u2026\u00ab\u00bb")


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def text_vector(text: str) -> str:
    """The SQL expression of the tsvector of the SQL text expression ``text``."""
    spaces = " " * len(_PUNCTUATION)
    return (f"to_tsvector('{_M001_TS_CONFIG}'::regconfig, "
            f"translate({text}, {_literal(_PUNCTUATION)}, {_literal(spaces)}))")


def document_expression(key: str, value: str, tags: str, context: str | None = None) -> str:
    """The SQL expression of a fact's tsvector from its key, value and tags
    columns (and its context column, when named)."""
    text = f"coalesce({key}, '') || ' ' || {value} || ' ' || {tags}"
    if context is not None:
        text += f" || ' ' || coalesce({context}, '')"
    return text_vector(text)


_DOC = document_expression("key", "value", "tags")

_FACT_COLUMNS = f"""
    slot text NOT NULL,
    scope text NOT NULL DEFAULT '',
    key text,
    value text NOT NULL,
    tags text NOT NULL DEFAULT '',
    source text,
    confidence double precision NOT NULL DEFAULT 1.0,
    score double precision NOT NULL DEFAULT 0.0,
    created_at double precision NOT NULL,
    updated_at double precision NOT NULL,
    observed_at double precision NOT NULL,
    last_accessed double precision,
    access_count bigint NOT NULL DEFAULT 0,
    expires_at double precision,
    superseded_by bigint,
    search tsvector GENERATED ALWAYS AS ({_DOC}) STORED,
    doc_len integer GENERATED ALWAYS AS (ctxslots_doc_len({_DOC})) STORED
"""


def m001_initial(conn: psycopg.Connection[Any]) -> None:
    """Facts, archive, history, links, flush progress and settings, with their indexes.

    (The ``vector`` extension is created before any migration runs.) Ids
    come from the sequence ``fact_ids`` and are never reused: an archived
    fact keeps its id, and an imported id moves the sequence past it.
    """
    conn.execute(f"""
        CREATE TEXT SEARCH DICTIONARY ctxslots_stem (TEMPLATE = snowball, Language = english);
        CREATE TEXT SEARCH CONFIGURATION {_M001_TS_CONFIG} (COPY = english);
        ALTER TEXT SEARCH CONFIGURATION {_M001_TS_CONFIG}
            ALTER MAPPING REPLACE english_stem WITH ctxslots_stem;
        -- Tokens in a document (BM25's length): its tsvector's positions.
        CREATE FUNCTION ctxslots_doc_len(doc tsvector) RETURNS integer
            LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
            AS 'SELECT coalesce(sum(cardinality(positions)), 0)::integer
                FROM pg_catalog.unnest(doc)';
        CREATE SEQUENCE fact_ids AS bigint;

        CREATE TABLE facts (
            id bigint NOT NULL DEFAULT nextval('fact_ids'),
            {_FACT_COLUMNS},
            PRIMARY KEY (id, scope)
        );
        CREATE UNIQUE INDEX facts_key ON facts (scope, slot, key) WHERE key IS NOT NULL;
        CREATE INDEX facts_scope_slot ON facts (scope, slot);
        CREATE INDEX facts_scope_time ON facts (scope, observed_at, id);
        CREATE INDEX facts_superseded_by ON facts (superseded_by)
            WHERE superseded_by IS NOT NULL;
        CREATE INDEX facts_search ON facts USING gin (search);

        CREATE TABLE archive (
            id bigint NOT NULL,
            {_FACT_COLUMNS},
            archived_at double precision NOT NULL,
            reason text,
            PRIMARY KEY (id, scope)
        );
        CREATE INDEX archive_search ON archive USING gin (search);
        CREATE INDEX archive_scope_slot ON archive (scope, slot);

        CREATE TABLE fact_history (
            id bigint GENERATED BY DEFAULT AS IDENTITY,
            fact_id bigint NOT NULL,
            slot text NOT NULL,
            scope text NOT NULL,
            key text,
            value text NOT NULL,
            tags text NOT NULL,
            source text,
            confidence double precision NOT NULL,
            valid_from double precision NOT NULL,
            valid_to double precision NOT NULL,
            PRIMARY KEY (id, scope)
        );
        CREATE INDEX fact_history_fact ON fact_history (fact_id, valid_to);

        -- A link's scope is the scope of its first fact.
        CREATE TABLE fact_links (
            scope text NOT NULL,
            a bigint NOT NULL,
            b bigint NOT NULL,
            strength double precision NOT NULL,
            updated_at double precision NOT NULL,
            PRIMARY KEY (scope, a, b)
        );
        CREATE INDEX fact_links_a ON fact_links (a);
        CREATE INDEX fact_links_b ON fact_links (b);

        CREATE TABLE flush_progress (
            conversation text PRIMARY KEY,
            messages_read integer NOT NULL,
            fingerprint text NOT NULL,
            updated_at double precision NOT NULL
        );
        CREATE TABLE store_meta (name text PRIMARY KEY, value text NOT NULL);
    """)


def m002_value_lookup(conn: psycopg.Connection[Any]) -> None:
    """Free memories and archived facts indexed by the hash of their value, so an
    identical one is found by a search instead of a scan of its scope and slot (an
    import of a million memories checks each in constant time)."""
    conn.execute("""
        CREATE INDEX facts_free_value ON facts (scope, slot, md5(value)) WHERE key IS NULL;
        CREATE INDEX archive_value ON archive (scope, slot, md5(value));
    """)


def m003_context(conn: psycopg.Connection[Any]) -> None:
    """A memory's context: words that find it without being part of it.

    ``search`` (and the length BM25 reads) now cover the context too, and
    ``context_search`` holds the context's own words, so the lexical leg can
    count them at ``CONTEXT_WEIGHT``. The generated columns are made again
    (PostgreSQL 16 cannot change a generated expression), with their indexes.
    """
    doc = document_expression("key", "value", "tags", "context")
    context = text_vector("coalesce(context, '')")
    for table in ("facts", "archive"):
        conn.execute(f"""
            ALTER TABLE {table} ADD COLUMN context text;
            ALTER TABLE {table} DROP COLUMN doc_len, DROP COLUMN search;
            ALTER TABLE {table}
                ADD COLUMN search tsvector GENERATED ALWAYS AS ({doc}) STORED,
                ADD COLUMN context_search tsvector GENERATED ALWAYS AS ({context}) STORED,
                ADD COLUMN doc_len integer GENERATED ALWAYS AS (ctxslots_doc_len({doc})) STORED;
            CREATE INDEX {table}_search ON {table} USING gin (search);
        """)


def m004_owners(conn: psycopg.Connection[Any]) -> None:
    """Owners: the user and the agent each fact belongs to (see :mod:`ctxslots.stores.owners`).

    ``facts``, ``archive`` and the vector table get ``user_id`` and ``agent_id``
    (``''``: none); history and links get ``user_id``. The facts a store held
    are its default user's (slot ``user``) and default agent's (slot ``agent``),
    the rest shared as before. Every primary and unique key includes ``scope``
    and ``user_id``, so a deployment can split the store by either (a Citus
    distribution column, or a database per tenant) with no schema change; the
    indexes a search reads lead with the owners. Flush progress is kept per user
    and agent.
    """
    users = (DEFAULT_USER, DEFAULT_AGENT)
    conn.execute("""
        ALTER TABLE facts ADD COLUMN user_id text NOT NULL DEFAULT '',
                          ADD COLUMN agent_id text NOT NULL DEFAULT '';
        ALTER TABLE archive ADD COLUMN user_id text NOT NULL DEFAULT '',
                            ADD COLUMN agent_id text NOT NULL DEFAULT '';
        ALTER TABLE fact_history ADD COLUMN user_id text NOT NULL DEFAULT '';
        ALTER TABLE fact_links ADD COLUMN user_id text NOT NULL DEFAULT '';
    """)
    for table in ("facts", "archive"):
        conn.execute(f"UPDATE {table} SET user_id = %s WHERE slot = 'user'", (users[0],))
        conn.execute(f"UPDATE {table} SET agent_id = %s WHERE slot = 'agent'", (users[1],))
    conn.execute("""
        UPDATE fact_history h SET user_id = o.user_id
            FROM (SELECT id, user_id FROM facts UNION ALL SELECT id, user_id FROM archive) o
            WHERE o.id = h.fact_id AND o.user_id <> '';
        UPDATE fact_links l SET user_id = o.user_id
            FROM (SELECT id, user_id FROM facts UNION ALL SELECT id, user_id FROM archive) o
            WHERE o.id = l.a AND o.user_id <> '';
        ALTER TABLE facts DROP CONSTRAINT facts_pkey, ADD PRIMARY KEY (id, scope, user_id);
        ALTER TABLE archive DROP CONSTRAINT archive_pkey, ADD PRIMARY KEY (id, scope, user_id);
        ALTER TABLE fact_history DROP CONSTRAINT fact_history_pkey,
            ADD PRIMARY KEY (id, scope, user_id);
        ALTER TABLE fact_links DROP CONSTRAINT fact_links_pkey,
            ADD PRIMARY KEY (scope, user_id, a, b);
        DROP INDEX facts_key;
        CREATE UNIQUE INDEX facts_key ON facts (scope, user_id, agent_id, slot, key)
            WHERE key IS NOT NULL;
        DROP INDEX facts_scope_slot;
        CREATE INDEX facts_owners ON facts (user_id, agent_id, slot, scope);
        DROP INDEX archive_scope_slot;
        CREATE INDEX archive_owners ON archive (user_id, agent_id, slot, scope);
        DROP INDEX facts_free_value;
        CREATE INDEX facts_free_value ON facts (scope, user_id, agent_id, slot, md5(value))
            WHERE key IS NULL;
        DROP INDEX archive_value;
        CREATE INDEX archive_value ON archive (scope, user_id, agent_id, slot, md5(value));
        ALTER TABLE flush_progress ADD COLUMN user_id text NOT NULL DEFAULT '',
                                   ADD COLUMN agent_id text NOT NULL DEFAULT '';
    """)
    conn.execute("UPDATE flush_progress SET user_id = %s, agent_id = %s", users)
    conn.execute("""
        ALTER TABLE flush_progress DROP CONSTRAINT flush_progress_pkey,
            ADD PRIMARY KEY (user_id, agent_id, conversation);
    """)
    if relation_exists(conn, "fact_vectors"):
        conn.execute("""
            ALTER TABLE fact_vectors ADD COLUMN user_id text NOT NULL DEFAULT '',
                                     ADD COLUMN agent_id text NOT NULL DEFAULT '';
            UPDATE fact_vectors v SET user_id = f.user_id, agent_id = f.agent_id
                FROM facts f WHERE f.id = v.fact_id;
            ALTER TABLE fact_vectors DROP CONSTRAINT fact_vectors_pkey,
                ADD PRIMARY KEY (fact_id, scope, user_id);
            DROP INDEX fact_vectors_scope_slot;
        """)
        conn.execute(OWNERS_VECTOR_INDEX)


#: Rows stemmed per statement while ``m005`` fills the stems.
_FILL_BATCH = 5000


def m005_stems(conn: psycopg.Connection[Any]) -> None:
    """One stemmer for both engines: the tsvectors are made from stems made in Python.

    ``facts`` and ``archive`` get ``stems`` (the key, value and tags stemmed,
    see :mod:`ctxslots.stores.stemming`) and ``context_stems``, filled from
    every row; ``search``, ``context_search`` and ``doc_len`` are made again
    from them with the ``simple`` configuration (PostgreSQL's parser and
    Snowball found other words than SQLite: ``café`` never met ``cafe``, and
    how the parser splits depends on the server's locale), with their indexes.
    """
    both = "stems || ' ' || coalesce(context_stems, '')"
    doc = f"to_tsvector('{TS_CONFIG}'::regconfig, {both})"
    context = f"to_tsvector('{TS_CONFIG}'::regconfig, coalesce(context_stems, ''))"
    for table in ("facts", "archive"):
        # The old tsvectors go first, so filling the stems does not make them again.
        conn.execute(f"""
            ALTER TABLE {table} DROP COLUMN doc_len, DROP COLUMN context_search,
                DROP COLUMN search,
                ADD COLUMN stems text NOT NULL DEFAULT '', ADD COLUMN context_stems text""")
        last = -1
        while rows := conn.execute(
                f"SELECT id, key, value, tags, context FROM {table} WHERE id > %s "
                "ORDER BY id LIMIT %s", (last, _FILL_BATCH)).fetchall():
            stems = [stems_of(key, value, tags, ctx) for _, key, value, tags, ctx in rows]
            conn.execute(
                f"UPDATE {table} t SET stems = v.s, context_stems = v.c "
                "FROM unnest(%s::bigint[], %s::text[], %s::text[]) AS v(id, s, c) "
                "WHERE t.id = v.id",
                ([r[0] for r in rows], [s for s, _ in stems], [c for _, c in stems]))
            last = int(rows[-1][0])
        conn.execute(f"""
            ALTER TABLE {table}
                ADD COLUMN search tsvector GENERATED ALWAYS AS ({doc}) STORED,
                ADD COLUMN context_search tsvector GENERATED ALWAYS AS ({context}) STORED,
                ADD COLUMN doc_len integer GENERATED ALWAYS AS (ctxslots_doc_len({doc})) STORED;
            CREATE INDEX {table}_search ON {table} USING gin (search);
        """)


#: The SQL expression of a row's owner term: one word made of its user, agent and
#: scope (their md5, a fixed length within the 2 KB PostgreSQL indexes of a word;
#: the separator is a control character, which owner names never hold).
OWNER_TERM = "'o' || md5(user_id || chr(1) || agent_id || chr(1) || scope)"


def m006_owner_term(conn: psycopg.Connection[Any]) -> None:
    """An owner term in ``search``: a search of one owner's facts reads theirs from the index.

    ``search`` of ``facts`` and ``archive`` is made again with the row's owner
    term (:data:`OWNER_TERM`) after its words, with its GIN index; ``doc_len``
    and ``context_search`` do not change. A search among many owners matches
    the words and the owner terms it sees in one index scan, instead of reading
    every owner's matches and filtering them.
    """
    both = "stems || ' ' || coalesce(context_stems, '')"
    doc = f"to_tsvector('{TS_CONFIG}'::regconfig, {both} || ' ' || {OWNER_TERM})"
    for table in ("facts", "archive"):
        conn.execute(f"""
            ALTER TABLE {table} DROP COLUMN search;
            ALTER TABLE {table} ADD COLUMN search tsvector GENERATED ALWAYS AS ({doc}) STORED;
            CREATE INDEX {table}_search ON {table} USING gin (search);
        """)


#: Kilobytes of new entries the full-text indexes hold unsorted before merging them
#: (PostgreSQL's default is 4,096): every search reads the whole list, so under steady
#: writes a large one made searches up to three times slower until a vacuum.
PENDING_LIST_KB = 256


def m007_pending_list(conn: psycopg.Connection[Any]) -> None:
    """The full-text indexes merge their pending entries every :data:`PENDING_LIST_KB`
    kilobytes: a search's time stays near what it is after a vacuum however many writes
    came since, for a little more time a write."""
    for table in ("facts", "archive"):
        conn.execute(f"ALTER INDEX {table}_search SET (gin_pending_list_limit = {PENDING_LIST_KB})")


def m008_script_stems(conn: psycopg.Connection[Any]) -> None:
    """Stems made again for text outside ASCII: Han, kana and Hangul runs indexed as
    their characters and pairs, Indic vowel signs and kana voicing marks kept (see
    :mod:`ctxslots.stores.stemming`); ``search`` and the rest follow as generated
    columns. Only rows holding a character outside printable ASCII can change."""
    for table in ("facts", "archive"):
        last = -1
        while rows := conn.execute(
                f"SELECT id, key, value, tags, context, stems, context_stems FROM {table} "
                "WHERE id > %s AND (coalesce(key, '') || value || tags || coalesce(context, '')) "
                "~ '[^ -~]' ORDER BY id LIMIT %s", (last, _FILL_BATCH)).fetchall():
            changed = [(r[0], *made) for r in rows
                       if (made := stems_of(r[1], r[2], r[3], r[4])) != (r[5], r[6])]
            if changed:
                conn.execute(
                    f"UPDATE {table} t SET stems = v.s, context_stems = v.c "
                    "FROM unnest(%s::bigint[], %s::text[], %s::text[]) AS v(id, s, c) "
                    "WHERE t.id = v.id",
                    ([c[0] for c in changed], [c[1] for c in changed], [c[2] for c in changed]))
            last = int(rows[-1][0])


def m009_text_changes(conn: psycopg.Connection[Any]) -> None:
    """A sequence, ``fact_text_changes``, that moves with every statement adding or
    removing facts or changing their words (an insert, a delete, a move to the archive, a
    new value): it tells a process its BM25 statistics are stale, whichever process wrote
    (an import keeping its ids does not move ``fact_ids``). A sequence, not a row, so
    writers never wait for each other. The trigger moves it and
    ``ctxslots_text_changes()`` reads it with the rights of the store's owner, so a role
    granted only the tables and ``fact_ids`` works as before; both name the sequence by
    its schema and search only that schema (then ``pg_temp``), so no temporary object of
    the caller's stands in for it, and only the trigger runs the first."""
    schema = str(conn.execute("SELECT current_schema()").fetchone()[0])  # type: ignore[index]
    where = sql.Identifier(schema)
    counter = sql.Literal(f"{where.as_string(conn)}.fact_text_changes")
    conn.execute(sql.SQL("""
        CREATE SEQUENCE {where}.fact_text_changes AS bigint;
        CREATE FUNCTION {where}.ctxslots_text_changed() RETURNS trigger LANGUAGE plpgsql
            SECURITY DEFINER SET search_path = {where}, pg_temp AS $$
            BEGIN PERFORM pg_catalog.nextval({counter}); RETURN NULL; END $$;
        REVOKE EXECUTE ON FUNCTION {where}.ctxslots_text_changed() FROM PUBLIC;
        CREATE FUNCTION {where}.ctxslots_text_changes() RETURNS bigint LANGUAGE sql STABLE
            SECURITY DEFINER SET search_path = {where}, pg_temp AS $$
            SELECT CASE WHEN is_called THEN last_value ELSE 0 END
            FROM {where}.fact_text_changes $$;
        CREATE TRIGGER facts_text_changed
            AFTER INSERT OR DELETE OR TRUNCATE OR UPDATE OF stems, context_stems ON facts
            FOR EACH STATEMENT EXECUTE FUNCTION {where}.ctxslots_text_changed();
    """).format(where=where, counter=counter))


def m010_history_observed_at(conn: psycopg.Connection[Any]) -> None:
    """When each earlier value was said or observed, apart from when it was written.

    A value replaced before holds none (``NULL``) and reads as its ``valid_from``:
    adding a column with no default rewrites no row.
    """
    conn.execute("ALTER TABLE fact_history ADD COLUMN observed_at double precision")


def m011_owners_key(conn: psycopg.Connection[Any]) -> None:
    """The owners' index ends with the key and the value's hash, so a lookup of facts by
    their owners and key, or by their owners and value, walks it to the fact.

    Whether a fact is stored is asked for a batch at once (an import), as a join on
    the owners and the key (or the value). The planner counts the owner columns as
    independent and expects one row per owners, so it may walk ``facts_owners``
    instead of ``facts_key`` or ``facts_free_value``; without the key and value in
    that index each lookup then read every fact of those owners (an import of one
    user's 50,000 facts took half an hour). Now any of these indexes finds the fact
    at once, and a read of the owners alone walks it as before.

    The new index is built before the old one is dropped: building takes a lock that lets
    reads go on (writes wait), where dropping first would lock the table against every
    read until the build commits.
    """
    conn.execute("""
        CREATE INDEX facts_owners_keyed
            ON facts (user_id, agent_id, slot, scope, key, md5(value));
        DROP INDEX facts_owners;
        ALTER INDEX facts_owners_keyed RENAME TO facts_owners;
    """)


#: Every migration, in the order applied. Append only; never reorder or edit.
MIGRATIONS: tuple[Callable[[psycopg.Connection[Any]], None], ...] = (
    m001_initial, m002_value_lookup, m003_context, m004_owners, m005_stems, m006_owner_term,
    m007_pending_list, m008_script_stems, m009_text_changes, m010_history_observed_at,
    m011_owners_key)

#: The schema version this code writes.
SCHEMA_VERSION = len(MIGRATIONS)


def schema_version(conn: psycopg.Connection[Any]) -> int:
    """The number of migrations applied to the database (0 for a new one)."""
    if not relation_exists(conn, "schema_migrations"):
        return 0
    found = conn.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()
    return int(found[0]) if found else 0


def _newer(where: str, version: int) -> StoreError:
    return StoreError(
        f"the database at {where} has schema version {version}, newer than the "
        f"{SCHEMA_VERSION} this ctxslots understands: upgrade ctxslots", path=where)


def migrate(conn: psycopg.Connection[Any], where: str, *, target: int = SCHEMA_VERSION
            ) -> list[str]:
    """Apply the missing migrations up to ``target`` in one transaction under the
    migration lock.

    Returns the names applied (empty when another host applied them first).

    :raises StoreError: The schema is newer than this code, or the role may
        not create what the schema needs; nothing is written.
    """
    current = schema_version(conn)
    if current > SCHEMA_VERSION:
        raise _newer(where, current)
    if current >= target:
        return []
    applied: list[str] = []
    try:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s, 0)", (LOCK_CLASS,))
            # Re-read under the lock: another host may have migrated meanwhile.
            current = schema_version(conn)
            if current > SCHEMA_VERSION:
                raise _newer(where, current)
            # pgvector first: without it nothing else is worth creating.
            found = conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'")
            if found.fetchone() is None:
                conn.execute("CREATE EXTENSION vector")
            conn.execute("""CREATE TABLE IF NOT EXISTS schema_migrations (
                version integer PRIMARY KEY, name text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now())""")
            for number in range(current, target):
                step = MIGRATIONS[number]
                step(conn)
                conn.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                             (number + 1, step.__name__))
                applied.append(step.__name__)
    except pgerrors.InsufficientPrivilege as exc:
        raise _privilege_error(conn, where, exc) from exc
    return applied


def _privilege_error(conn: psycopg.Connection[Any], where: str,
                     exc: pgerrors.InsufficientPrivilege) -> StoreError:
    user = conn.info.user
    db = conn.info.dbname
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else "permission denied"
    if "extension" in detail:
        return StoreError(
            f"the database {db!r} at {where} does not have the vector extension and role "
            f"{user!r} may not create it: have an administrator run CREATE EXTENSION vector "
            f"in database {db!r} (nothing was written)", path=where)
    return StoreError(
        f"role {user!r} may not create the ctxslots tables in database {db!r} at {where} "
        f"({detail}): grant it CREATE on the schema, or open the store once as the "
        "database owner (nothing was written)", path=where)
