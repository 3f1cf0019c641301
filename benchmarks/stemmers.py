"""One stemmer for SQLite and PostgreSQL: what each way of getting there costs.

    python benchmarks/stemmers.py                         # 20,000 facts, a private PostgreSQL
    python benchmarks/stemmers.py --facts 100000 --url postgresql://...
    python benchmarks/stemmers.py --agreement conversations-dev.json
    python benchmarks/stemmers.py --store ../main/src --store src   # the store, before and after

Before migrations ``m013`` (SQLite) and ``m005`` (PostgreSQL), SQLite indexed
with FTS5's ``porter`` tokenizer and PostgreSQL with the ``english``
configuration (Snowball English), so "deploys" was "deploi" on one and "deploy"
on the other and the same query found different facts; the store now stems in
Python (:mod:`ctxslots.stores.stemming`, the "pre-stemmed" rows, which call it).
Each way of making them agree is measured on the facts of ``benchmarks/_corpus.py``:

- ``sqlite porter``: today's index (``porter unicode61``), the floor;
- ``sqlite snowball tokenizer``: FTS5 with a tokenizer written in Python and
  registered through apsw: unicode61's words, each stemmed by Snowball English
  (PyStemmer); every connection must register it before it touches the index;
- ``sqlite pre-stemmed``: each value stemmed once in Python (the same words and
  stemmer), stored beside it, and that column indexed with plain ``unicode61``;
- ``postgres english``: today's tsvector (the store's ``ctxslots_english``
  configuration: Snowball English, stop words kept, punctuation made spaces first);
- ``postgres pre-stemmed``: the stored stemmed text indexed with ``simple``.

For each: facts written per second (one transaction, index included, the
stemming included where Python does it), the p50 of 200 generated queries
(the sanitized words OR-ed, ``LIMIT 100``), and how many queries find the same
candidate set as ``sqlite pre-stemmed``. ``--agreement PATH`` instead counts, over
the words of a conversation file, how often Porter and Snowball stem a word
differently. Needs ``PyStemmer`` (not a dependency of ctxslots); timings depend
on the machine: the script prints the load average beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import apsw
import apsw.fts5
import Stemmer  # type: ignore[import-not-found]

from _corpus import generate_facts, generate_queries
from _inputs import positive_int, read_conversations
from ctxslots.stores.sanitize import query_tokens
from ctxslots.stores.stemming import stem_text, stemmed_query

_WORD = re.compile(r"[^\W_]+")
#: The PostgreSQL options: label, text search configuration, the column indexed.
_PG_OPTIONS = (("postgres english", "ctxslots_english", "value"),
               ("postgres pre-stemmed", "simple", "stems"))
#: The store's configuration (stores/postgres/_schema.py), made in the benchmark's database.
_PG_SETUP = """
    CREATE TEXT SEARCH DICTIONARY ctxslots_stem (TEMPLATE = snowball, Language = english);
    CREATE TEXT SEARCH CONFIGURATION ctxslots_english (COPY = english);
    ALTER TEXT SEARCH CONFIGURATION ctxslots_english
        ALTER MAPPING REPLACE english_stem WITH ctxslots_stem"""
_PUNCTUATION = ("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
                "\u2018\u2019\u201c\u201d\u2013\u2014\u2026\u00ab\u00bb")
_STEMMER = Stemmer.Stemmer("english")


def stemmed_text(text: str) -> str:
    """``text`` as the store's index holds it (:func:`ctxslots.stores.stemming.stem_text`)."""
    return stem_text(text)


def _snowball_factory(con: Any, args: list[str]) -> Any:
    return apsw.fts5.TransformTokenizer(lambda token: _STEMMER.stemWord(token))(con, args)


def _sqlite(path: Path, tokenizer: str, column: str) -> apsw.Connection:
    conn = apsw.Connection(str(path))
    conn.register_fts5_tokenizer("snowball", _snowball_factory)
    conn.execute("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL")
    conn.execute(f"""CREATE TABLE facts (id INTEGER PRIMARY KEY, value TEXT, stems TEXT);
        CREATE VIRTUAL TABLE facts_fts USING fts5({column}, content='facts',
            content_rowid='id', tokenize='{tokenizer}');
        CREATE TRIGGER facts_ai AFTER INSERT ON facts BEGIN
            INSERT INTO facts_fts(rowid, {column}) VALUES (new.id, new.{column}); END""")
    return conn


def sqlite_option(label: str, tokenizer: str, column: str, values: list[str],
                  queries: list[list[str]], folder: Path) -> tuple[str, float, float,
                                                                   list[set[int]]]:
    """Write ``values`` and run ``queries`` on one SQLite layout."""
    conn = _sqlite(folder / f"{label.replace(' ', '-')}.db", tokenizer, column)
    start = time.perf_counter()
    with conn:
        if column == "stems":
            conn.executemany("INSERT INTO facts (value, stems) VALUES (?, ?)",
                             ((v, stemmed_text(v)) for v in values))
        else:
            conn.executemany("INSERT INTO facts (value) VALUES (?)", ((v,) for v in values))
    rate = len(values) / (time.perf_counter() - start)
    times, found = [], []
    for words in queries:
        start = time.perf_counter()
        if column == "stems":
            words = stemmed_query(words)
        match = " OR ".join(f'"{w}"' for w in words)
        rows = conn.execute("SELECT rowid FROM facts_fts WHERE facts_fts MATCH ? ORDER BY rank "
                            "LIMIT 100", (match,)).fetchall() if match else []
        times.append(time.perf_counter() - start)
        found.append({int(r[0]) for r in rows})
    conn.close()
    return label, rate, statistics.median(times) * 1000, found


def postgres_options(url: str, values: list[str], queries: list[list[str]]
                     ) -> list[tuple[str, float, float, list[set[int]]]]:
    """Write ``values`` and run ``queries`` with ``english`` and with pre-stemmed ``simple``."""
    import psycopg

    out = []
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(_PG_SETUP)
    for label, config, column in _PG_OPTIONS:
        table = f"facts_{config}"
        marks = "'" + _PUNCTUATION.replace("'", "''") + "'"
        text = (f"translate(coalesce({column}, ''), {marks}, '{' ' * len(_PUNCTUATION)}')"
                if column == "value" else f"coalesce({column}, '')")
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {table}")
            conn.execute(f"CREATE TABLE {table} (id bigserial PRIMARY KEY, value text, "
                         f"stems text, tsv tsvector GENERATED ALWAYS AS "
                         f"(to_tsvector('{config}', {text})) STORED)")
            conn.execute(f"CREATE INDEX {table}_tsv ON {table} USING gin (tsv)")
            start = time.perf_counter()
            with conn.transaction(), conn.cursor() as cur:
                if column == "stems":
                    cur.executemany(f"INSERT INTO {table} (value, stems) VALUES (%s, %s)",
                                    [(v, stemmed_text(v)) for v in values])
                else:
                    cur.executemany(f"INSERT INTO {table} (value) VALUES (%s)",
                                    [(v,) for v in values])
            rate = len(values) / (time.perf_counter() - start)
            conn.execute(f"ANALYZE {table}")
            times, found = [], []
            for words in queries:
                start = time.perf_counter()
                if column == "stems":
                    words = stemmed_query(words)
                terms = " | ".join(f"'{w}'" for w in words if "'" not in w)
                rows = conn.execute(
                    f"SELECT id FROM {table} WHERE tsv @@ to_tsquery('{config}', %s) "
                    f"ORDER BY ts_rank(tsv, to_tsquery('{config}', %s)) DESC, id LIMIT 100",
                    (terms, terms)).fetchall() if terms else []
                times.append(time.perf_counter() - start)
                found.append({int(r[0]) for r in rows})
            out.append((label, rate, statistics.median(times) * 1000, found))
    return out


def matching_sets(url: str | None, values: list[str], queries: list[list[str]]
                  ) -> dict[str, list[set[int]]]:
    """Every fact each option's index finds for each query (no LIMIT): the candidate sets."""
    out: dict[str, list[set[int]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, tokenizer, column in (("sqlite porter", "porter unicode61", "value"),
                                         ("sqlite snowball tokenizer", "snowball unicode61",
                                          "value"),
                                         ("sqlite pre-stemmed", "unicode61", "stems")):
            conn = _sqlite(Path(tmp) / "m.db", tokenizer, column)
            with conn:
                conn.executemany("INSERT INTO facts (value, stems) VALUES (?, ?)",
                                 ((v, stemmed_text(v)) for v in values))
            sets = []
            for words in queries:
                if column == "stems":
                    words = stemmed_query(words)
                match = " OR ".join(f'"{w}"' for w in words)
                sets.append({int(r[0]) for r in conn.execute(
                    "SELECT rowid FROM facts_fts WHERE facts_fts MATCH ?", (match,))}
                    if match else set())
            out[label] = sets
            conn.close()
            Path(tmp, "m.db").unlink()
    if url is not None:
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            for label, config, column in _PG_OPTIONS:
                sets = []
                for words in queries:
                    if column == "stems":
                        words = stemmed_query(words)
                    terms = " | ".join(f"'{w}'" for w in words if "'" not in w)
                    sets.append({int(r[0]) for r in conn.execute(
                        f"SELECT id FROM facts_{config} WHERE tsv @@ to_tsquery('{config}', %s)",
                        (terms,))} if terms else set())
                out[label] = sets
    return out


def agreement(path: Path) -> None:
    """How often Porter (FTS5) and Snowball English (PyStemmer) stem the words of a
    conversation file differently."""
    conn = apsw.Connection(":memory:")
    porter = conn.fts5_tokenizer("porter", ["unicode61"])
    words: dict[str, int] = {}
    for sample in read_conversations(path):
        for key, turns in sample["conversation"].items():
            if key.startswith("session_") and isinstance(turns, list):
                for turn in turns:
                    for w in _WORD.findall(turn["text"]):
                        words[w.casefold()] = words.get(w.casefold(), 0) + 1
    differ = [(w, n) for w, n in words.items()
              if [t[2] for t in porter(w.encode(), apsw.FTS5_TOKENIZE_DOCUMENT, None)]
              != [_STEMMER.stemWord(w)]]
    total = sum(words.values())
    print(f"{len(words):,} distinct words ({total:,} in all): Porter and Snowball differ on "
          f"{len(differ):,} distinct words ({sum(n for _, n in differ) / total:.1%} of all "
          "words)")
    for word, n in sorted(differ, key=lambda p: -p[1])[:15]:
        stem = porter(word.encode(), apsw.FTS5_TOKENIZE_DOCUMENT, None)[0][2]
        print(f"  {word:<14} {n:>6}  porter {stem:<12} snowball {_STEMMER.stemWord(word)}")


def _print(rows: Iterable[tuple[str, float, float, list[set[int]]]],
           sets: dict[str, list[set[int]]], floor: tuple[float, float]) -> None:
    reference = sets.get("sqlite pre-stemmed")
    print(f"{'option':<28} {'writes/s':>10} {'/ floor':>8} {'query p50':>10} {'/ floor':>8}"
          "  same candidates as sqlite pre-stemmed")
    for label, rate, p50, _ in rows:
        same = "-"
        if reference is not None and label in sets:
            equal = sum(a == b for a, b in zip(sets[label], reference, strict=True))
            same = f"{equal} of {len(reference)}"
        print(f"{label:<28} {rate:>10,.0f} {rate / floor[0]:>7.2f}x {p50:>8.2f} ms "
              f"{p50 / floor[1]:>7.2f}x  {same}")


def store_rows(sources: list[str], facts: int, folder: Path,
               fresh: Any) -> list[tuple[str, float, float, float]]:
    """``(label, writes/s, search p50 ms, mean hits)`` of the store of each source tree,
    on SQLite and (when ``fresh`` makes databases) PostgreSQL."""
    import subprocess

    script = str(Path(__file__).resolve().parent / "_store_timing.py")
    out = []
    for n, src in enumerate(sources):
        places = [("sqlite", str(folder / f"store-{n}.db"))]
        if fresh is not None:
            places.append(("postgres", fresh(f"ctxslots_stemmers_store_{n}")))
        for engine, location in places:
            done = subprocess.run([sys.executable, script, src, location, str(facts), "200"],
                                  check=True, capture_output=True, text=True)
            found = json.loads(done.stdout.strip().splitlines()[-1])
            out.append((f"store {engine}, {src}", found["rate"], found["p50_ms"],
                        found["hits"]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", type=positive_int, default=20000)
    parser.add_argument("--url", help="a PostgreSQL server (default: a private pgserver)")
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--store", action="append", default=[], metavar="SRC",
                        help="also time the store of this src folder (repeatable)")
    parser.add_argument("--agreement", type=Path, metavar="PATH",
                        help="only count words stemmed differently in a conversation file")
    args = parser.parse_args()
    if args.agreement:
        agreement(args.agreement)
        return
    if args.url and not args.no_postgres:
        from _pg import reachable

        reachable(args.url)  # before the SQLite options are timed
    values = [f.value for f in generate_facts(args.facts)]
    queries = [query_tokens(q) for q in generate_queries(200)]
    print(f"{len(values):,} facts, {len(queries)} queries; load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    rows = []
    stores: list[tuple[str, float, float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, tokenizer, column in (("sqlite porter", "porter unicode61", "value"),
                                         ("sqlite snowball tokenizer", "snowball unicode61",
                                          "value"),
                                         ("sqlite pre-stemmed", "unicode61", "stems")):
            rows.append(sqlite_option(label, tokenizer, column, values, queries, Path(tmp)))
        url = None
        if not args.no_postgres:
            sys.path.insert(0, str(Path(__file__).resolve().parent))
            from _pg import server

            with server(args.url) as fresh:
                url = fresh("ctxslots_stemmers")
                rows += postgres_options(url, values, queries)
                sets = matching_sets(url, values, queries)
                stores = store_rows(args.store, args.facts, Path(tmp), fresh)
        else:
            sets = matching_sets(None, values, queries)
            stores = store_rows(args.store, args.facts, Path(tmp), None)
    floor = (rows[0][1], rows[0][2])
    _print(rows, sets, floor)
    for label, rate, p50, hits in stores:
        print(f"{label:<28} {rate:>10,.0f} {rate / floor[0]:>7.2f}x {p50:>8.2f} ms "
              f"{p50 / floor[1]:>7.2f}x  (FactStore.search, {hits:.1f} hits)")
    print("load average after: " + " ".join(f"{x:.1f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
