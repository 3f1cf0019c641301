"""Imports that scale: linear time, memory that does not grow with the file, vectors a batch at
a time, any number of Markdown bullets, linear tag parsing, progress, all or nothing."""

from __future__ import annotations

import io
import json
import time
import tracemalloc
from collections.abc import Callable, Sequence

import numpy as np
import pytest

from _sql import raw, stored_rows
from ctxslots import FactStore, InvalidFactError, Limits
from ctxslots.errors import InvalidImportError
from ctxslots.stores.ranking import RankingPolicy
from ctxslots.stores.transfer.markdown_memory import parse_markdown

HEADER = json.dumps({"format": "ctxslots-facts", "version": 1})


#: Memories often begin alike: every test value shares its first 100 characters.
PREAMBLE = "The user mentioned, in one of many conversations about the same long-running " \
           "project and its habits: "


def memories(count: int, start: int = 0, **fields: object) -> str:
    """An export file of ``count`` free agent memories that differ only after a long preamble."""
    lines = [HEADER] + [json.dumps({"slot": "agent", "value": f"{PREAMBLE}memory {n}, "
                                    f"something different each time, number {n * 7}.",
                                    **fields}) for n in range(start, start + count)]
    return "\n".join(lines) + "\n"


def import_seconds(store: FactStore, text: str) -> float:
    """Wall time of one import of ``text``."""
    started = time.perf_counter()
    store.import_jsonl(io.StringIO(text))
    return time.perf_counter() - started


def test_free_memories_import_in_linear_time(tmp_path):
    """Four times the memories take at most about four times as long (it took sixteen: each was
    compared with every value of its slot), into a store that already holds as many, though
    every value shares its first 100 characters."""
    per_fact = []
    for n in (3_000, 12_000):
        with FactStore(tmp_path / f"{n}.db") as store:
            store.import_jsonl(io.StringIO(memories(n, start=10**6)))  # the store is not empty
            per_fact.append(import_seconds(store, memories(n)) / n)
            assert 2 * n == store.stats()["facts"]
    assert per_fact[1] < 2.5 * per_fact[0], per_fact


def test_the_duplicate_check_reads_an_index(db_path):
    """Finding a free memory by value searches the value index on SQLite, one by one or in batches."""
    with FactStore(db_path) as store:
        store.add("agent", "Indexed.")
    conn = raw(store)
    plan = conn.execute(
        "EXPLAIN QUERY PLAN SELECT id FROM facts WHERE slot = ? AND scope = ? AND user_id = ? "
        "AND agent_id = ? AND key IS NULL AND value = ? ORDER BY id LIMIT 1",
        ("agent", "", "", "default", "x")).fetchall()
    conn.close()
    used = "facts_free_value (slot=? AND scope=? AND user_id=? AND agent_id=? AND value=?)"
    assert f"USING COVERING INDEX {used}" in str(plan) or f"USING INDEX {used}" in str(plan)


def test_memory_does_not_grow_with_the_file(db_path):
    """Python's peak allocation importing 8,000 memories is about that of 2,000 (the file was
    parsed whole before: four times the memory)."""
    peaks = []
    for n in (2_000, 8_000):
        path = db_path.parent / f"{n}.jsonl"
        path.write_text(memories(n, start=n))
        with FactStore(db_path) as store, path.open(encoding="utf-8") as fp:
            tracemalloc.start()
            before = tracemalloc.get_traced_memory()[0]
            store.import_jsonl(fp)
            peaks.append(tracemalloc.get_traced_memory()[1] - before)
            tracemalloc.stop()
    assert peaks[1] < 1.5 * peaks[0], peaks


class CountingEmbedder:
    """A deterministic embedder that records how many texts each call embeds."""

    model_id = "counting-test"
    dimension = 8

    def __init__(self) -> None:
        self.calls: list[int] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(len(texts))
        rows = np.ones((len(texts), self.dimension), dtype=np.float32)
        rows[:, 0] = [len(t) for t in texts]
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_vectors_are_embedded_a_batch_at_a_time(engine, location, clock):
    """With a model, 2,500 imported memories are embedded at most 1,000 at a time (all of an
    import went into one array before: 990 MB at 100,000 facts), and each gets its vector."""
    embedder = CountingEmbedder()
    with FactStore(location, clock=clock, embedder=embedder, vector_writes="inline",
                   ranking=RankingPolicy(vector_weight=1.0)) as store:
        embedder.calls.clear()
        report = store.import_jsonl(io.StringIO(memories(2_500)))
        assert 2_500 == report.added
        assert 2_500 == sum(embedder.calls) and max(embedder.calls) <= 1_000
        assert 2_500 == engine(store).vector_state().vectors
        assert store.doctor().ok


def test_a_markdown_file_of_more_than_ten_thousand_bullets_is_imported(store, tmp_path):
    """12,000 bullets (a file of 10,001 used to be refused whole) all land, read line by line."""
    path = tmp_path / "agent.md"
    path.write_text("# agent\n\n" + "".join(f"- Bullet number {n}.\n" for n in range(12_000)))
    seen: list[int] = []
    report = store.import_markdown(path, slot="agent", progress=seen.append)
    assert 12_000 == report.added == store.stats()["facts"]
    assert seen == sorted(seen) and 12_000 == seen[-1]


def _cpu_seconds(work: Callable[[], object]) -> float:
    started = time.process_time()
    work()
    return time.process_time() - started


def _parse_tags(count: int) -> None:
    line = "- A value " + " ".join(f"`#tag{n}`" for n in range(count))
    bullet = parse_markdown(line, slot="agent").bullets[0]
    assert count == len(bullet.tags) and "A value" == bullet.value


def _refuse_tags(count: int) -> None:
    with pytest.raises(InvalidFactError) as caught:
        Limits().tags([f"t{n}" for n in range(count)])
    assert f"{count} tags" in str(caught.value)


@pytest.mark.parametrize("work", [_parse_tags, _refuse_tags], ids=["parse", "refuse"])
def test_tag_parsing_and_tag_checks_take_linear_time(work):
    """Four times the tags cost well under sixteen times the CPU time: a 1.25 MB line of
    125,000 tags parses, and 100,000 tags are refused as too many, in linear time (the
    quadratic code took 36 s and 103 s). CPU time, so a busy machine does not skew it."""
    small = _cpu_seconds(lambda: work(25_000))
    large = _cpu_seconds(lambda: work(100_000))
    assert large < 9 * max(small, 0.01)


def _import_heading(store: FactStore, spaces: int) -> None:
    text = "# agent\n\n## Build" + " " * spaces + "and test ##\n- Run the smoke test first.\n"
    report = store.import_markdown(text, slot="agent")
    assert 1 == report.added


def test_a_heading_with_a_long_run_of_spaces_is_read_in_linear_time(store):
    """Four times the spaces inside a heading cost well under sixteen times the CPU time
    (they cost sixteen: a line of 40,000 spaces took 17 s, so a pasted file of one long
    heading held the import for hours), and the heading is still read as a tag without its
    closing run of '#'."""
    small = _cpu_seconds(lambda: _import_heading(store, 10_000))
    store.reset()
    large = _cpu_seconds(lambda: _import_heading(store, 40_000))
    assert large < 9 * max(small, 0.02), (small, large)
    assert [("build-and-test",)] == [f.tags for f in store.facts()]


def test_progress_is_reported_a_batch_at_a_time(store):
    """The progress callback sees the records handled after every thousand, and at the end."""
    seen: list[int] = []
    store.import_jsonl(io.StringIO(memories(2_500)), progress=seen.append)
    assert [1_000, 2_000, 2_500] == seen


def test_a_bad_last_line_writes_nothing_and_counts_every_bad_line(store):
    """All or nothing: 2,999 good records and bad lines at the end write nothing, and the error
    names the first bad line and counts the others."""
    text = memories(2_999) + '{"slot": "agent"}\n' + "not json\n"
    with pytest.raises(InvalidImportError) as caught:
        store.import_jsonl(io.StringIO(text))
    assert 3_001 == caught.value.line and "and 1 more invalid line" in str(caught.value)
    assert [] == stored_rows(store)


def test_duplicates_are_found_within_a_batch_across_batches_and_in_the_store(store):
    """The same memory twice in a batch, in two batches, and already stored: written once."""
    store.add("agent", f"{PREAMBLE}memory 5, something different each time, number 35.")
    text = memories(2_500) + "\n".join(
        json.dumps({"slot": "agent", "value": v}) for v in (
            f"{PREAMBLE}memory 7, something different each time, number 49.",
            f"{PREAMBLE}memory 2100, something different each time, number 14700.")) + "\n"
    report = store.import_jsonl(io.StringIO(text))
    assert (2_499, 3) == (report.added, report.skipped_duplicates)
    assert 2_500 == store.stats()["facts"]


@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "free"])
def test_stored_facts_are_looked_up_by_owners_and_key_or_value_on_postgres(pg_url, keyed):
    """On PostgreSQL the batch duplicate check reads one index entry per fact, even walking
    the owners' index (which the planner may choose): that index ended with the owners, and
    each lookup read every fact of those owners (an import of one user's 50,000 facts took
    half an hour)."""
    psycopg = pytest.importorskip("psycopg")
    from ctxslots.stores.postgres._rows import find_existing

    def key(n: int) -> str | None:
        return f"note-{n}" if keyed else None

    lines = [HEADER] + [json.dumps({"slot": "user", "user": "ada", "key": key(n),
                                    "value": f"Ada noted item {n}."}) for n in range(2_000)]
    with FactStore(pg_url, embedder=False) as store:
        store.import_jsonl(io.StringIO("\n".join(lines) + "\n"))
    items = [("user", "", "ada", "", key(n), f"Ada noted item {n}.")
             for n in range(0, 2_000, 20)]
    with psycopg.connect(pg_url) as conn:
        conn.execute("ANALYZE facts")
        # Only the owners' index is left to the planner, as it chose during imports.
        conn.execute("DROP INDEX facts_key, facts_free_value")
        conn.execute("SET LOCAL enable_seqscan = off")
        conn.execute("SET LOCAL enable_bitmapscan = off")
        found = find_existing(conn, items, archived=False)
        read = conn.execute("SELECT pg_stat_get_xact_tuples_returned("
                            "'facts_owners'::regclass)").fetchone()
        conn.rollback()
    assert all(found)
    assert read is not None and read[0] <= 2 * len(items), read
