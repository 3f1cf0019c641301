"""Erasure on each engine: delete a fact, erase an owner, reset; nothing of them is left."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from _sql import stored_rows
from ctxslots import (
    ANY,
    ErasureReport,
    FactNotFoundError,
    FactStore,
    InvalidArgumentError,
    InvalidFactError,
)
from ctxslots.cli import cli


def _linked_pair(store: FactStore, **owners: Any) -> tuple[int, int]:
    """Two facts returned together and reinforced: linked to each other."""
    a = store.add("agent", "Staging deploys need the VPN turned on first.", **owners)
    b = store.add("agent", "The VPN profile for staging deploys lives in the vault.", **owners)
    assert {h.fact.id for h in store.search("staging deploys VPN", **owners)} == {a.id, b.id}
    store.reinforce(a.id, **owners)
    assert store.links(a.id) == {b.id: 1.0}
    return a.id, b.id


def _everything_of(store: FactStore, engine: Any, fact_id: int) -> list[Any]:
    """Every stored trace of ``fact_id``: its row, archived row, earlier values, vector
    and links, read by a second engine on the same store."""
    rows = [r for r in stored_rows(store) if r[1] == fact_id]
    backend = engine(store)
    return [*rows, *backend.history(fact_id), *backend.vectors_of([fact_id]).items(),
            *backend.links_of(fact_id).items()]


def test_delete_removes_a_fact_with_its_history_vector_and_links(store, engine):
    a, b = _linked_pair(store)
    store.update(a, value="Staging deploys need the VPN and a fresh token.")
    store.wait_for_vectors()
    assert len(store.history(a)) == 1
    report = store.delete(a)
    assert isinstance(report, ErasureReport)
    assert (report.facts, report.archived, report.history, report.links) == (1, 0, 1, 1)
    assert report.vectors == (1 if store.keeps_vectors else 0)
    assert report.summary().startswith(f"erased fact {a}: 1 fact, 0 archived facts, "
                                       "1 history entry")
    assert store.get(a, include_archive=True) is None
    assert store.history(a) == [] and store.links(b) == {}
    assert _everything_of(store, engine, a) == []
    assert store.get(b).id == b
    with pytest.raises(FactNotFoundError):
        store.delete(a)


def test_delete_removes_an_archived_fact(store):
    fact = store.add("project", "The old billing cron ran at midnight.", scope="shop")
    store.forget(fact.id, reason="moved to the new scheduler")
    report = store.delete(fact.id)
    assert (report.facts, report.archived) == (0, 1)
    assert store.get(fact.id, include_archive=True) is None


def test_delete_of_another_users_fact_is_not_found_and_removes_nothing(store):
    mine = store.upsert("user", "editor", "Alice uses Helix.", user="alice")
    before = stored_rows(store)
    with pytest.raises(FactNotFoundError):
        store.delete(mine.id, user="bob")
    assert stored_rows(store) == before
    assert store.delete(mine.id, user="alice").facts == 1


@pytest.mark.parametrize("bad", [0, -1, 2**64, "7", 1.5, None, True])
def test_delete_of_a_malformed_id_is_a_clear_error(store, bad):
    store.add("agent", "Kept whatever the id.")
    before = stored_rows(store)
    with pytest.raises((InvalidFactError, FactNotFoundError)):
        store.delete(bad)
    assert stored_rows(store) == before


def test_erase_a_user_leaves_other_users_and_shared_facts(store, engine):
    alice = [store.upsert("user", "editor", "Alice uses Helix.", user="alice").id,
             store.add("user", "Alice is on call on Fridays.", user="alice").id]
    bob = store.upsert("user", "editor", "Bob uses Emacs.", user="bob")
    shared = store.add("project", "The shop deploys on Fridays.", scope="shop")
    store.upsert("user", "editor", "Alice uses Helix and Vim.", user="alice")  # history
    store.forget(alice[1])                                                      # archived
    with store.batch():
        store.record_flush_progress("chat-1", 4, "f" * 16, user="alice")
        store.record_flush_progress("chat-1", 2, "b" * 16, user="bob")
    report = store.erase(user="alice")
    assert (report.facts, report.archived, report.history, report.progress) == (1, 1, 1, 1)
    assert report.erased == "user alice"
    assert store.facts(user="alice", slots=["user"]) == []
    assert [f.id for f in store.facts(user="bob", slots=["user"])] == [bob.id]
    assert store.get(shared.id).value == "The shop deploys on Fridays."
    assert store.flush_progress("chat-1", user="alice") is None
    assert store.flush_progress("chat-1", user="bob") is not None
    for fact_id in alice:
        assert _everything_of(store, engine, fact_id) == []


def test_erase_a_scope_leaves_the_users_own_facts(store, engine):
    mine = store.upsert("user", "editor", "Alice uses Helix.", user="alice")
    gone = [store.add("project", "The shop deploys on Fridays.", scope="shop").id,
            store.add("agent", "Shop builds need the cache warmed.", scope="shop").id]
    other = store.add("project", "The blog deploys on Mondays.", scope="blog")
    report = store.erase(scope="shop")
    assert report.facts == 2 and report.progress == 0
    assert {f.id for f in store.facts(scope="shop", user="alice")} == {mine.id}
    assert store.get(other.id).scope == "blog"
    for fact_id in gone:
        assert _everything_of(store, engine, fact_id) == []


def test_erase_a_scope_leaves_the_facts_a_user_owns_in_it(location, clock, engine):
    """A slot owned by a user within a workspace holds the user's own facts: erasing the
    workspace takes its shared facts and leaves those, which erasing the user takes."""
    from ctxslots import Limits
    from ctxslots.stores.owners import BUILTIN_SLOT_OWNERS

    owners = {**BUILTIN_SLOT_OWNERS, "notes": "user+scope"}
    limits = Limits(slots=tuple(owners), slot_owners=owners)
    with FactStore(location, clock=clock, limits=limits) as store:
        mine = store.add("notes", "Alice keeps her shop notes in a private file.",
                         user="alice", scope="shop")
        gone = store.add("project", "The shop deploys on Fridays.", scope="shop")
        report = store.erase(scope="shop")
        assert report.facts == 1
        assert _everything_of(store, engine, gone.id) == []
        assert [f.id for f in store.facts(slots=["notes"], user="alice", scope="shop")] \
            == [mine.id]
        assert store.erase(user="alice").facts == 1
        assert _everything_of(store, engine, mine.id) == []


def test_erase_an_agent(store, engine):
    a, b = _linked_pair(store, agent="builder")
    kept = store.add("agent", "Reviewer lessons stay.", agent="reviewer")
    report = store.erase(agent="builder")
    assert (report.facts, report.links) == (2, 1)
    assert [f.id for f in store.facts(slots=["agent"], agent="reviewer")] == [kept.id]
    assert _everything_of(store, engine, a) == [] and _everything_of(store, engine, b) == []


@pytest.mark.parametrize("owners", [{}, {"user": "a", "scope": "b"}, {"user": ""},
                                    {"agent": "x" * 500}])
def test_erase_names_exactly_one_wellformed_owner(store, owners):
    store.add("agent", "Kept when the erasure is refused.")
    before = stored_rows(store)
    with pytest.raises((InvalidArgumentError, InvalidFactError)):
        store.erase(**owners)
    assert stored_rows(store) == before


def test_reset_empties_the_store_and_it_stays_usable(store):
    _linked_pair(store)
    store.upsert("user", "editor", "Alice uses Helix.", user="alice")
    with store.batch():
        store.record_flush_progress("chat-1", 4, "f" * 16)
    report = store.reset()
    assert report.erased == "everything" and report.facts == 3 and report.progress == 1
    assert stored_rows(store) == [] and store.flush_progress("chat-1") is None
    again = store.add("agent", "Staging deploys need the VPN.")
    store.wait_for_vectors()
    assert [h.fact.id for h in store.search("staging vpn")] == [again.id]


def test_an_erased_fact_leaves_the_searches_of_a_store_with_its_copies_loaded(db_path, clock):
    """A second store with the in-memory copies loaded stops finding what another erased."""
    with FactStore(db_path, clock=clock, lexical_cache=True) as reader, \
            FactStore(db_path, clock=clock) as writer:
        gone = writer.add("agent", "Zanzibar mirrors sync at dawn.")
        writer.wait_for_vectors()
        assert reader.load_lexical_cache() and reader.load_vector_cache()
        assert [h.fact.id for h in reader.search("zanzibar mirrors")] == [gone.id]
        writer.delete(gone.id)
        assert reader.search("zanzibar mirrors") == []
        kept = writer.add("agent", "Quixotic cron entries sync at noon.")
        writer.wait_for_vectors()
        writer.reset()
        assert reader.search("quixotic cron") == []
        assert kept.id not in {h.fact.id for h in reader.search("sync", limit=50)}


def test_the_vector_copy_of_a_long_lived_store_lets_go_of_erased_users(db_path, clock):
    """A long-lived store's in-memory vector copy holds a block per user: once each user
    is erased, their blocks go (it held every erased user's rows, dead, for good)."""
    from ctxslots import RankingPolicy

    fused = {"embedder": "hash", "ranking": RankingPolicy(vector_weight=1.0)}
    with FactStore(db_path, clock=clock, **fused) as reader, \
            FactStore(db_path, clock=clock, **fused) as writer:
        for n in range(30):
            writer.add("user", f"User {n} drinks coffee in Lisbon.", user=f"u{n}")
        assert reader.load_vector_cache()
        assert 30 == reader.cache_status().vector_rows
        for n in range(30):
            writer.erase(user=f"u{n}")
        assert [] == reader.search("coffee Lisbon", user="u1")
        assert 0 == reader.cache_status().vector_rows


def test_the_copies_of_a_long_lived_store_keep_nothing_of_an_erased_fact(db_path, clock):
    """Once another store erased a user and deleted a fact, a long-lived store's in-memory
    copies hold none of their words, the user's name or their vectors (the lexical copy
    kept every erased row's words and owner for good, the vector copy its vector)."""
    import numpy as np

    from ctxslots import RankingPolicy

    fused = {"embedder": "hash", "ranking": RankingPolicy(vector_weight=1.0)}
    with FactStore(db_path, clock=clock, lexical_cache=True, **fused) as reader, \
            FactStore(db_path, clock=clock, **fused) as writer:
        for n in range(20):
            writer.add("user", f"Bob drinks coffee number {n}.", user="bob")
        writer.add("user", "Quetzalcoatline is Alice's secret nickname.", user="alice")
        gone = writer.add("user", "Bob's zanzibarian passcode opens the shed.", user="bob")
        writer.wait_for_vectors()
        assert reader.load_lexical_cache() and reader.load_vector_cache()
        assert reader.search("quetzalcoatline", user="alice")
        writer.erase(user="alice")
        writer.delete(gone.id)
        assert reader.search("quetzalcoatline zanzibarian", user=ANY) == []
        lexical = reader._core.backend._lexical.copy
        held = {stem for stem in lexical._postings if stem.startswith(("quetzal", "zanzibar"))}
        assert held == set()
        assert [key for key in lexical._codes if "alice" in key] == []
        vectors = reader._core.backend._vectors.copy
        dead = [block.mat[:block.n][~block.alive[:block.n]] for block in vectors._blocks.values()]
        assert sum(len(rows) for rows in dead) == 1  # Bob's deleted fact, in his block
        assert not any(np.isfinite(rows).any() for rows in dead)
        assert len(reader.search("coffee", user="bob", limit=50)) == 20


def test_the_lexical_copy_keeps_no_earlier_words_of_an_erased_users_edited_fact(db_path,
                                                                               clock):
    """A long-lived store's lexical copy took in a fact, then its new value, and another
    store erased the user: the copy holds neither value's words (the rows the edit left
    dead kept the earlier value's words for good)."""
    with FactStore(db_path, clock=clock, lexical_cache=True) as reader, \
            FactStore(db_path, clock=clock) as writer:
        for n in range(20):
            writer.add("user", f"Bob drinks coffee number {n}.", user="bob")
        writer.upsert("user", "passcode", "Alice's zanzibarian passcode opens the shed.",
                      user="alice")
        assert reader.load_lexical_cache()
        assert reader.search("zanzibarian", user="alice")
        writer.upsert("user", "passcode", "Alice's quetzalcoatline passcode is new.",
                      user="alice")
        assert [] == reader.search("zanzibarian", user="alice")
        writer.erase(user="alice")
        assert [] == reader.search("quetzalcoatline zanzibarian passcode alice", user=ANY)
        lexical = reader._core.backend._lexical.copy
        assert lexical is not None and lexical.live == 20
        held = {stem for stem in lexical._postings
                if stem.startswith(("zanzibar", "quetzal", "passcod", "alic", "shed"))}
        assert held == set()
        assert len(reader.search("coffee", user="bob", limit=50)) == 20


# -- nothing of the erased text is left ----------------------------------------


def _write_marked(store: FactStore, marker: str, **owners: Any) -> list[int]:
    """The marker in every place a fact's text goes: value, key, tags, context, source,
    an earlier value, an archived fact."""
    fact = store.upsert("user", f"k{marker}", f"First {marker} value.", tags=[f"t{marker}"],
                        context=f"asked about {marker}", source=f"chat-{marker}", **owners)
    store.upsert("user", f"k{marker}", f"Second {marker} value.", tags=[f"t{marker}"],
                 **owners)
    gone = store.add("user", f"Archived {marker} memory.", **owners)
    store.forget(gone.id, reason=f"because {marker}")
    store.search(f"{marker} value", **owners)
    return [fact.id, gone.id]


def _files(db: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in db.parent.glob(db.name + "*")}


@pytest.mark.parametrize("erase", ["delete", "user", "reset"])
def test_erased_text_leaves_no_byte_in_the_sqlite_file(db_path, clock, erase):
    """A unique marker written into a fact, its history and the archive is found in the
    file; once erased, no byte of it is left in the database, its WAL or FTS5's tables."""
    marker = secrets.token_hex(8)
    with FactStore(db_path, clock=clock, embedder=False) as store:
        store.upsert("user", "kept", "Kept facts stay readable.")
        ids = _write_marked(store, marker, user="alice")
        assert any(marker.encode() in data for data in _files(db_path).values())
        if erase == "delete":
            for fact_id in ids:
                store.delete(fact_id)
        elif erase == "user":
            store.erase(user="alice")
        else:
            store.reset()
        # still open: the WAL and the file as another process would copy them now
        left = {name: data for name, data in _files(db_path).items()
                if marker.encode() in data or marker.encode("utf-16-le") in data}
        assert left == {}
        terms = {r[0] for r in store_rows(db_path, "SELECT term FROM facts_vocab")}
        assert not {t for t in terms if marker in t}
    if erase != "reset":
        with FactStore(db_path, clock=clock, embedder=False) as store:
            assert store.get_by_key("user", "kept").value == "Kept facts stay readable."


def store_rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` on a separate connection to ``db`` (a vocabulary table made for it)."""
    from ctxslots.stores.sqlite import open_connection

    conn = open_connection(db, migrate=False)
    try:
        conn.execute("CREATE VIRTUAL TABLE temp.facts_vocab USING fts5vocab(main, facts_fts, row)")
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def test_erased_rows_are_gone_from_every_postgresql_table(pg_url, clock):
    """On PostgreSQL the marker is in no row of any table of the store once erased."""
    psycopg = pytest.importorskip("psycopg")
    marker = secrets.token_hex(8)
    with FactStore(pg_url, clock=clock) as store:
        _write_marked(store, marker, user="alice")
        store.wait_for_vectors()
        assert _pg_rows_with(psycopg, pg_url, marker)
        store.erase(user="alice")
        assert _pg_rows_with(psycopg, pg_url, marker) == {}


def _pg_rows_with(psycopg: Any, url: str, marker: str) -> dict[str, int]:
    """Rows holding ``marker`` in any column, per table of the public schema."""
    found = {}
    with psycopg.connect(url, autocommit=True) as conn:
        for (table,) in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public'").fetchall():
            n = conn.execute(f'SELECT count(*) FROM "{table}" t WHERE t::text LIKE %s',
                             (f"%{marker}%",)).fetchone()[0]
            if n:
                found[table] = n
    return found


# -- the command line -----------------------------------------------------------


def _cli(db: Path, *argv: str, input: str | None = None) -> Any:
    return CliRunner().invoke(cli, ["--db", str(db), *argv], input=input,
                              env={"CTXSLOTS_EMBEDDER": None})


def test_cli_erase_asks_before_erasing_and_prints_the_report(db_path):
    with FactStore(db_path) as store:
        store.upsert("user", "editor", "Alice uses Helix.", user="alice")
        store.upsert("user", "editor", "Bob uses Emacs.", user="bob")
    refused = _cli(db_path, "erase", "--user", "alice", input="n\n")
    assert refused.exit_code == 1 and "nothing erased" in refused.output
    with FactStore(db_path) as store:
        assert len(store.facts(user="alice", slots=["user"])) == 1
    done = _cli(db_path, "erase", "--user", "alice", "--yes")
    assert done.exit_code == 0, done.output
    assert done.output.strip() == ("erased user alice: 1 fact, 0 archived facts, "
                                   "0 history entries, 0 vectors, 0 links, 0 flush records")
    with FactStore(db_path) as store:
        assert store.facts(user="alice", slots=["user"]) == []
        assert len(store.facts(user="bob", slots=["user"])) == 1


def test_cli_delete_and_reset(db_path):
    with FactStore(db_path) as store:
        fact = store.add("agent", "Staging deploys need the VPN.")
        store.add("agent", "The blog deploys on Mondays.")
    deleted = _cli(db_path, "delete", str(fact.id), "--yes")
    assert deleted.exit_code == 0 and deleted.output.startswith(f"erased fact {fact.id}: 1 fact")
    missing = _cli(db_path, "delete", str(fact.id), "--yes")
    assert missing.exit_code == 1 and len(missing.output.strip().splitlines()) == 1
    assert _cli(db_path, "reset", input="y\n").output.splitlines()[-1].startswith(
        "erased everything: 1 fact")
    with FactStore(db_path) as store:
        assert store.facts() == []


@pytest.mark.parametrize("argv", [["erase"], ["erase", "--user", "a", "--scope", "b"],
                                  ["delete", "x"], ["erase", "--user", ""]])
def test_cli_erasure_with_bad_arguments_is_one_line(db_path, argv):
    with FactStore(db_path) as store:
        store.add("agent", "Kept.")
    result = _cli(db_path, *argv, "--yes")
    assert result.exit_code in (1, 2) and "Traceback" not in result.output
    with FactStore(db_path) as store:
        assert len(store.facts()) == 1


def test_deleting_a_survivor_shows_the_near_duplicates_it_hid_again(store):
    old = store.add("user", "The user prefers dark mode in every editor.")
    new = store.add("user", "The user prefers dark mode in every editor!")
    assert [s.fact_id for s in store.consolidate().superseded] == [old.id]
    assert [h.fact.id for h in store.search("dark mode editor")] == [new.id]
    report = store.delete(new.id)
    assert report.unhidden == 1
    assert report.summary().endswith("; 1 hidden near-duplicate shown again")
    assert store.get(old.id).superseded_by is None
    assert [h.fact.id for h in store.search("dark mode editor")] == [old.id]
    assert store.doctor().problems == ()


def test_erasing_a_user_counts_no_near_duplicate_it_erased_as_shown_again(store, clock):
    """A survivor with a low id hides a near-duplicate written after hundreds of other
    facts: erasing the user takes both, and the report shows none again."""
    survivor = store.upsert("user", "mode", "The user prefers dark mode in every editor.",
                            user="alice")
    with store.batch():
        for n in range(450):
            store.add("user", f"Note {n} on topic{n} and subject{n * 7}.", user="alice")
    clock.advance(seconds=10)
    twin = store.add("user", "The user prefers dark mode in every editor!", user="alice")
    clock.advance(seconds=10)
    store.upsert("user", "mode", "The user prefers dark mode, in every editor.", user="alice")
    assert [(s.fact_id, s.by) for s in store.consolidate(fact_ids=[survivor.id]).superseded] \
        == [(twin.id, survivor.id)]
    report = store.erase(user="alice")
    assert (report.facts, report.unhidden) == (452, 0)
    assert report.summary().endswith("0 flush records")


def test_doctor_finds_facts_hidden_by_a_missing_fact_and_reindex_shows_them(store, engine):
    """A store an older release erased a survivor of: its near-duplicate stays hidden by
    an id that exists nowhere; doctor names it and reindex shows it again."""
    kept = store.add("user", "The user prefers dark mode in every editor.")
    backend = engine(store)
    with backend.transaction():
        backend.set_superseded([(kept.id, 999_999)])
    assert store.search("dark mode editor") == []
    problems = store.doctor().problems
    assert any("hidden by a near-duplicate that no longer exists" in p and str(kept.id) in p
               for p in problems)
    store.reindex()
    assert store.get(kept.id).superseded_by is None
    assert [h.fact.id for h in store.search("dark mode editor")] == [kept.id]
    assert store.doctor().problems == ()


def test_an_erasure_inside_a_batch_empties_the_log_once_the_batch_commits(db_path, clock):
    """Inside ``store.batch()`` the log cannot be emptied (the transaction is open); once
    the batch commits, no byte of the erased text is in the file or its log."""
    marker = secrets.token_hex(8)
    with FactStore(db_path, clock=clock, embedder=False) as store:
        store.upsert("user", "kept", "Kept facts stay readable.")
        _write_marked(store, marker, user="alice")
        with store.batch():
            report = store.erase(user="alice")
            store.add("user", "Written in the same batch.")
        assert (report.facts, report.archived, report.history) == (1, 1, 1)
        left = {name for name, data in _files(db_path).items()
                if marker.encode() in data or marker.encode("utf-16-le") in data}
        assert left == set()
        assert len(store.facts()) == 2


def test_a_batch_that_fails_after_an_erasure_and_a_search_leaves_the_copies_in_step(
        db_path, clock):
    """A long-lived store with its copies loaded erases a user inside a batch, searches
    there (nothing of the user), and the batch fails: the facts are back and found, and
    so is a fact written later (the copies had taken in the erasure that never was, and
    skipped the writes numbered as the rolled-back ones had been)."""
    from ctxslots import RankingPolicy

    fused = {"embedder": "hash", "ranking": RankingPolicy(vector_weight=1.0)}
    with FactStore(db_path, clock=clock, lexical_cache=True, **fused) as store:
        kept = store.add("user", "Alice takes zephyrine tea.", user="alice")
        store.add("user", "Bob takes coffee.", user="bob")
        store.wait_for_vectors()
        assert store.load_lexical_cache() and store.load_vector_cache()
        with pytest.raises(RuntimeError), store.batch():
            store.erase(user="alice")
            assert store.search("zephyrine tea", user="alice") == []
            raise RuntimeError("the batch fails")
        assert [kept.id] == [h.fact.id for h in store.search("zephyrine tea", user="alice")]
        later = store.add("user", "Alice takes zephyrine tea at noon too.", user="alice")
        store.wait_for_vectors()
        hits = store.search("zephyrine tea", user="alice")
        assert {kept.id, later.id} == {h.fact.id for h in hits}
        assert all(h.trace.bm25 is not None and h.trace.cosine is not None for h in hits)
        status = store.cache_status()
        assert (status.lexical_live, status.vector_rows) == (3, 3)


def test_a_batch_that_fails_after_an_erasure_keeps_the_facts(db_path, clock):
    with FactStore(db_path, clock=clock, embedder=False) as store:
        fact = store.add("user", "Alice's allergy is on file.", user="alice")
        with pytest.raises(RuntimeError, match="stop"), store.batch():
            store.erase(user="alice")
            raise RuntimeError("stop")
        assert store.get(fact.id).value == "Alice's allergy is on file."
        assert store.erase(user="alice").facts == 1


def test_erasing_an_agent_drops_its_flush_progress_and_no_other(store):
    with store.batch():
        store.record_flush_progress("chat-1", 4, "f" * 16, agent="builder")
        store.record_flush_progress("chat-1", 2, "b" * 16, agent="reviewer")
    report = store.erase(agent="builder")
    assert report.progress == 1
    assert store.flush_progress("chat-1", agent="builder") is None
    assert store.flush_progress("chat-1", agent="reviewer") == (2, "b" * 16)


def test_deleting_either_fact_of_a_linked_pair_removes_the_link(store, engine):
    a, b = _linked_pair(store)
    report = store.delete(b)
    assert report.links == 1
    assert store.links(a) == {}
    assert _everything_of(store, engine, b) == []


def test_deleting_a_survivor_shows_an_archived_near_duplicate_it_hid_again(store):
    """A hidden near-duplicate forgotten later keeps its mark in the archive; with its
    survivor erased, nothing stands for it and the mark goes."""
    old = store.add("user", "The user prefers dark mode in every editor.")
    new = store.add("user", "The user prefers dark mode in every editor!")
    assert [s.fact_id for s in store.consolidate().superseded] == [old.id]
    store.forget(old.id, reason="kept by its near-duplicate")
    assert store.get(old.id, include_archive=True).superseded_by == new.id
    report = store.delete(new.id)
    assert report.unhidden == 1
    assert store.get(old.id, include_archive=True).superseded_by is None
    assert store.doctor().problems == ()
