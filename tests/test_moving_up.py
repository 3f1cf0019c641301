"""Moving a store from a SQLite file to PostgreSQL: export | import keeps ids, history, archive and links;
the target embeds the vectors again."""

from __future__ import annotations

import io
import json

from click.testing import CliRunner

from ctxslots import FactStore, RankingPolicy
from ctxslots.cli import cli


def _records(text: str) -> list[dict]:
    """The fact records of an export, without the header's time."""
    return [json.loads(line) for line in text.splitlines()[1:]]


def test_export_to_postgres_keeps_everything(engine, db_path, pg_url, clock):
    """`ctxslots --db file export | ctxslots --db postgresql://... import -` moves every fact as it was."""
    with FactStore(db_path, clock=clock, ranking=RankingPolicy(vector_weight=1.0)) as store:
        name = store.upsert("user", "name", "The user is Ada.")
        store.upsert("user", "name", "The user is Ada King.")  # history
        deploy = store.add("project", "Deploys run on Fridays.", scope="shop")
        note = store.add("agent", "Rerun the flaky refund test once.", scope="shop")
        gone = store.add("agent", "The old CI runner is slow.")
        store.forget(gone.id, reason="replaced")
        store.search("deploys fridays refund", scope="shop")
        store.reinforce(deploy.id)  # a co-recall link between deploy and note
    runner = CliRunner()
    exported = runner.invoke(cli, ["--db", str(db_path), "export"])
    assert 0 == exported.exit_code
    imported = runner.invoke(cli, ["--db", pg_url, "import", "-"], input=exported.output)
    assert 0 == imported.exit_code, imported.output
    with FactStore(pg_url, clock=clock, ranking=RankingPolicy(vector_weight=1.0)) as moved:
        assert "postgresql" == moved.engine
        again = io.StringIO()
        moved.export_jsonl(again)
        assert _records(exported.output) == _records(again.getvalue())
        assert ["The user is Ada."] == [f.value for f in moved.history(name.id)]
        assert "replaced" == engine(moved).get_archived(gone.id)["reason"]
        assert {note.id: 1.0} == engine(moved).links_of(deploy.id)
        # The target searches by words only and keeps none of the file's vectors: it
        # embeds its live facts once when opened with a vector leg.
        assert ["3 facts have no vector: run `ctxslots reindex` to embed them (only them)"] == list(moved.doctor().problems)
        assert 3 == moved.reindex()
        assert moved.doctor().ok
        assert note.id in {h.fact.id for h in moved.search("flaky refund", scope="shop")}


def test_vectors_move_with_the_facts_when_the_embedder_is_the_same(engine, db_path, pg_url, clock):
    """An export carries each live fact's vector; a store with the same embedder takes it as it is."""
    from ctxslots.stores.embedders import HashingEmbedder

    calls = []

    class Counting(HashingEmbedder):
        def embed(self, texts):
            calls.extend(texts)
            return super().embed(texts)

    fused = RankingPolicy(vector_weight=1.0)
    with FactStore(db_path, clock=clock, ranking=fused) as store:
        facts = [store.add("agent", f"Release note {i} about the billing queue.") for i in range(5)]
        buffer = io.StringIO()
        store.export_jsonl(buffer)
        before = engine(store).vectors_of([f.id for f in facts])
    assert all("vector" in r for r in _records(buffer.getvalue()))
    with FactStore(pg_url, clock=clock, ranking=fused, embedder=Counting()) as moved:
        moved.import_jsonl(io.StringIO(buffer.getvalue()))
        assert [] == calls  # nothing embedded again
        after = engine(moved).vectors_of([f.id for f in facts])
        assert all((before[i] == after[i]).all() for i in before)
        assert moved.doctor().ok
    with FactStore(db_path.with_name("other.db"), clock=clock, ranking=fused,
                   embedder=HashingEmbedder(dimension=64)) as other:
        other.import_jsonl(io.StringIO(buffer.getvalue()))  # another embedder: embedded again
        assert other.doctor().ok and 5 == len(engine(other).vectors_of([f.id for f in facts]))


def test_an_import_says_how_many_vectors_of_the_file_it_did_not_keep(db_path, pg_url, clock):
    """A store built with a model exports its vectors; `import -` into a store opened
    without that embedder stored none of them and said nothing, so searches by meaning
    were gone without a word. The report counts them, names their model and says how
    to keep them; a store opened with that embedder keeps them all and says nothing."""
    from ctxslots.stores.embedders import HashingEmbedder

    fused = RankingPolicy(vector_weight=1.0)
    with FactStore(db_path, clock=clock, ranking=fused,
                   embedder=HashingEmbedder(dimension=64)) as store:
        for i in range(5):
            store.add("agent", f"Release note {i} about the billing queue.")
        store.forget(store.add("agent", "An archived note has no vector.").id)
        buffer = io.StringIO()
        store.export_jsonl(buffer)
    text = buffer.getvalue()
    assert 5 == sum("vector" in r for r in _records(text))
    imported = CliRunner().invoke(cli, ["--db", pg_url, "import", "-"], input=text)
    assert 0 == imported.exit_code, imported.output
    assert ("imported 5 facts, 1 archived, 0 history entries; skipped 0 duplicates; 5 vectors "
            "of hash-v1-64 not kept: this store does not search with that model (import into "
            "a store opened with its embedder, --embedder hash:64 or embedder=, to keep "
            "them)\n") == imported.output
    report = json.loads(CliRunner().invoke(
        cli, ["--db", pg_url, "import", "-", "--json"], input=text).output)
    assert (0, 6) == (report["vectors_not_kept"], report["skipped_duplicates"])
    with FactStore(db_path.with_name("other.db"), clock=clock, ranking=fused,
                   embedder=HashingEmbedder(dimension=32)) as other:
        again = other.import_jsonl(io.StringIO(text))  # embedded again by its own model
        assert (5, "hash-v1-64") == (again.vectors_not_kept, again.vector_model)
        assert other.doctor().ok
    with FactStore(db_path.with_name("same.db"), clock=clock, ranking=fused,
                   embedder=HashingEmbedder(dimension=64)) as same:
        kept = same.import_jsonl(io.StringIO(text))
        assert (5, 0, None) == (kept.added, kept.vectors_not_kept, kept.vector_model)
        assert "not kept" not in kept.summary()
