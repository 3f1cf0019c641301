"""The SQLite schema as it stands: the fact columns' stems, the FTS5 indexes and
their triggers, the change-log triggers, the indexes and the vector tables.

:mod:`._migrations` builds it step by step; ``doctor`` and ``rebuild`` recreate what is
derived from the facts from these definitions.
"""

from __future__ import annotations

from ..backend import CONTEXT_WEIGHT

__all__ = ["FTS_COLUMNS", "FTS_TOKENIZE", "IMPORTANCE", "IMPORTANT_INDEX", "IMPORTANT_WHERE",
           "INDEXES", "LOG_TRIGGERS", "OWNER_TERM", "VALUE_INDEXES", "derived_objects",
           "fts_objects", "fts_rank", "fts_secure_delete", "log_on_update", "owner_term",
           "vector_objects"]

#: FTS5 tokenizer of every text index: the indexed columns hold words already
#: folded and stemmed (:mod:`ctxslots.stores.stemming`), so it only splits them,
#: as PostgreSQL's ``simple`` does (BENCHMARKS.md, "One stemmer for both engines").
FTS_TOKENIZE = "unicode61 remove_diacritics 0"
#: The tokenizer of the indexes before ``m013`` (Porter stemming in FTS5).
_M001_FTS_TOKENIZE = "porter unicode61 remove_diacritics 2"


#: The generated column of ``facts`` and ``archive`` holding one word that says
#: whose a fact is (``m014``, see :func:`owner_term`): indexed with no weight, it
#: lets a search of one owner's facts match theirs alone instead of scoring every
#: owner's matches before the filter drops them (BENCHMARKS.md, "Many users in one store").
OWNER_TERM = ("owner_term TEXT GENERATED ALWAYS AS "
              "('o' || hex(user_id) || 'x' || hex(agent_id) || 'x' || hex(scope)) VIRTUAL")
#: The fact columns :data:`OWNER_TERM` is made of: a change to any of them changes it.
_OWNER_COLUMNS = ("user_id", "agent_id", "scope")

#: The columns of every FTS5 index, in order: the stems of a fact's key, value
#: and tags, those of its context (``m013``; see :func:`~ctxslots.stores.stemming.stems_of`) and its owner
#: term (``m014``).
FTS_COLUMNS = ("stems", "context_stems", "owner_term")
def owner_term(user_id: str, agent_id: str, scope: str) -> str:
    """The word :data:`OWNER_TERM` holds for a fact of these stored owners, as the
    index keeps it (FTS5 folds the hex digits to lower case)."""
    return f"o{user_id.encode().hex()}x{agent_id.encode().hex()}x{scope.encode().hex()}"


def fts_objects(table: str, columns: tuple[str, ...] = FTS_COLUMNS) -> list[tuple[str, str, str]]:
    """``(kind, name, sql)`` of the FTS5 index over ``columns`` of ``table``
    and the triggers that keep it in step."""
    tokenize = FTS_TOKENIZE if "stems" in columns else _M001_FTS_TOKENIZE
    fts = f"{table}_fts"
    names = ", ".join(columns)
    watched = ", ".join(dict.fromkeys(
        part for c in columns for part in (_OWNER_COLUMNS if c == "owner_term" else (c,))))
    new = ", ".join(f"new.{c}" for c in columns)
    old = ", ".join(f"old.{c}" for c in columns)
    return [
        ("table", fts, f"""CREATE VIRTUAL TABLE {fts} USING fts5(
        {names},
        content='{table}', content_rowid='id', tokenize='{tokenize}'
    )"""),
        ("trigger", f"{table}_ai", f"""CREATE TRIGGER {table}_ai AFTER INSERT ON {table} BEGIN
        INSERT INTO {fts}(rowid, {names})
        VALUES (new.id, {new});
    END"""),
        ("trigger", f"{table}_ad", f"""CREATE TRIGGER {table}_ad AFTER DELETE ON {table} BEGIN
        INSERT INTO {fts}({fts}, rowid, {names})
        VALUES ('delete', old.id, {old});
    END"""),
        # Only indexed columns: access tracking and scores must not rewrite the index.
        ("trigger", f"{table}_au", f"""CREATE TRIGGER {table}_au AFTER UPDATE OF {watched} ON {table} BEGIN
        INSERT INTO {fts}({fts}, rowid, {names})
        VALUES ('delete', old.id, {old});
        INSERT INTO {fts}(rowid, {names})
        VALUES (new.id, {new});
    END"""),
    ]


def fts_rank(table: str, columns: tuple[str, ...] = FTS_COLUMNS) -> str:
    """The statement that makes ``rank`` of ``table``'s FTS5 index BM25 with the
    context column at :data:`~ctxslots.stores.backend.CONTEXT_WEIGHT` and the
    owner term at nothing (a setting FTS5 keeps in the file)."""
    weights = ", ".join(repr(CONTEXT_WEIGHT) if c.startswith("context")
                        else "0.0" if c == "owner_term" else "1.0" for c in columns)
    fts = f"{table}_fts"
    return f"INSERT INTO {fts}({fts}, rank) VALUES ('rank', 'bm25({weights})')"


def fts_secure_delete(table: str) -> str:
    """The statement that makes ``table``'s FTS5 index remove a deleted row's words
    from its segments at once (instead of marking them deleted until a merge), so
    erased text leaves the file (a setting FTS5 keeps in the file)."""
    fts = f"{table}_fts"
    return f"INSERT INTO {fts}({fts}, rank) VALUES ('secure-delete', 1)"


def log_on_update(columns: str) -> str:
    """The trigger that logs a fact whose ``columns`` change."""
    return f"""CREATE TRIGGER facts_log_au AFTER UPDATE OF {columns} ON facts BEGIN
            INSERT INTO fact_log (fact_id) VALUES (new.id);
        END"""


#: The triggers that log changed facts for in-memory copies (``m006_fact_log``;
#: ``m011`` added ``context`` to the columns whose change is logged).
LOG_TRIGGERS: list[tuple[str, str, str]] = [
    ("trigger", "facts_log_ai", """CREATE TRIGGER facts_log_ai AFTER INSERT ON facts BEGIN
            INSERT INTO fact_log (fact_id) VALUES (new.id);
        END"""),
    ("trigger", "facts_log_ad", """CREATE TRIGGER facts_log_ad AFTER DELETE ON facts BEGIN
            INSERT INTO fact_log (fact_id) VALUES (old.id);
        END"""),
    ("trigger", "facts_log_au", log_on_update(
        "slot, scope, key, value, tags, context, expires_at, superseded_by")),
]

#: Which facts :meth:`SQLiteBackend.important` reads, and their order; the
#: partial index below holds exactly them, in that order, so reading the
#: first few walks a few index entries whatever the slot holds.
IMPORTANT_WHERE = "(key IS NOT NULL OR score > 0)"
IMPORTANCE = ("score DESC, access_count DESC, confidence DESC, key IS NULL, updated_at DESC, "
              "id")
IMPORTANT_INDEX = (f"CREATE INDEX facts_important ON facts(user_id, agent_id, slot, scope, "
                   f"{IMPORTANCE}) WHERE {IMPORTANT_WHERE}")

#: Free memories and archived facts by value: finding an identical one is a
#: search, not a scan of its slot and scope (``m010``). The whole value is
#: indexed: memories often share a long beginning ("The user wants ..."), and an
#: index of a prefix would scan every one that shares it.
VALUE_INDEXES: list[tuple[str, str, str]] = [
    ("index", "facts_free_value", ("CREATE INDEX facts_free_value ON facts(slot, scope, "
     "user_id, agent_id, value) WHERE key IS NULL")),
    ("index", "archive_value",
     "CREATE INDEX archive_value ON archive(slot, scope, user_id, agent_id, value)"),
]

#: The indexes of the current schema, each ``(kind, name, sql)``.
INDEXES: list[tuple[str, str, str]] = [
    ("index", "facts_owner_key", ("CREATE UNIQUE INDEX facts_owner_key ON facts(slot, scope, "
     "user_id, agent_id, key) WHERE key IS NOT NULL")),
    ("index", "facts_owners", "CREATE INDEX facts_owners ON facts(user_id, agent_id, slot, scope)"),
    ("index", "archive_owners",
     "CREATE INDEX archive_owners ON archive(user_id, agent_id, slot, scope)"),
    ("index", "fact_history_fact", "CREATE INDEX fact_history_fact ON fact_history(fact_id)"),
    ("index", "facts_superseded_by", ("CREATE INDEX facts_superseded_by ON facts(superseded_by) "
     "WHERE superseded_by IS NOT NULL")),
    ("index", "facts_created_at", "CREATE INDEX facts_created_at ON facts(created_at)"),
    ("index", "fact_links_b", "CREATE INDEX fact_links_b ON fact_links(b)"),
    ("index", "facts_observed_at", "CREATE INDEX facts_observed_at ON facts(observed_at, id)"),
    ("index", "vectors_owners",
     "CREATE INDEX vectors_owners ON vectors(user_id, agent_id, slot, scope)"),
    ("index", "facts_important", IMPORTANT_INDEX),
    *VALUE_INDEXES,
]


#: The vector table and its change log as the current schema has them (``m003``,
#: ``m008`` and ``m012`` made them): derived from the facts by the embedder, so a
#: missing one is recreated empty and ``reindex`` embeds the facts again.
VECTOR_TABLES: list[tuple[str, str, str]] = [
    ("table", "vectors", """CREATE TABLE vectors (
            fact_id INTEGER PRIMARY KEY,
            scope TEXT NOT NULL,
            slot TEXT NOT NULL,
            embedding BLOB NOT NULL,
            user_id TEXT NOT NULL DEFAULT '',
            agent_id TEXT NOT NULL DEFAULT ''
        )"""),
    ("table", "vector_log", """CREATE TABLE vector_log (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            fact_id INTEGER NOT NULL,
            op TEXT NOT NULL
        )"""),
]


def vector_objects() -> list[tuple[str, str, str]]:
    """The vector table, its change log and their indexes (see :data:`VECTOR_TABLES`)."""
    return [*VECTOR_TABLES, *(i for i in INDEXES if " ON vectors(" in i[2])]


def derived_objects() -> list[tuple[str, str, str]]:
    """Every object derived from the facts that ``rebuild`` can recreate: the FTS5
    tables, their triggers, the log triggers, the vector tables and the indexes."""
    return [*fts_objects("facts"), *fts_objects("archive"), *LOG_TRIGGERS, *VECTOR_TABLES,
            *INDEXES]
