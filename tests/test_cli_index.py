"""ctxslots doctor, reindex and the --embedder option."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from ctxslots import FactStore
from ctxslots.cli import cli
from ctxslots.errors import EmbedderSpecError


def run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_doctor_ok_on_a_healthy_store(db_path):
    """doctor exits 0 and says ok on a fresh store with facts."""
    assert 0 == run("--db", str(db_path), "remember", "agent", "Use ripgrep.").exit_code
    result = run("--db", str(db_path), "doctor")
    assert 0 == result.exit_code
    assert result.output.strip().endswith("ok")


def test_switching_embedder_then_doctor_and_reindex(db_path):
    """Vectors another embedder built make doctor fail (exit 1, JSON says stale); reindex repairs it."""
    from ctxslots import FactStore, RankingPolicy

    with FactStore(db_path, ranking=RankingPolicy(vector_weight=1.0)) as store:  # keeps vectors
        store.add("agent", "Use ripgrep for code search.")
    result = run("--db", str(db_path), "--embedder", "hash:128", "doctor", "--json")
    assert 0 == result.exit_code  # words-only search reads no vectors: nothing is stale
    with pytest.warns(RuntimeWarning, match="built by hash-v1-384"), \
            FactStore(db_path, embedder="hash:128", ranking=RankingPolicy(vector_weight=1.0)) as store:
        report = store.doctor()
        assert report.vectors.stale and not report.ok
        assert 1 == store.reindex()
        assert store.doctor().ok

    result = run("--db", str(db_path), "reindex")
    assert 0 == result.exit_code and "full-text index rebuilt, 0 facts embedded" in result.output


def test_bad_embedder_spec_is_one_line(db_path):
    """An unknown embedder kind prints one error line and exits non-zero."""
    result = CliRunner().invoke(cli, ["--db", str(db_path), "--embedder", "nope:x", "stats"])
    assert 0 != result.exit_code
    assert "Traceback" not in result.output
    assert 1 == sum(line.startswith("Error: ") for line in result.output.splitlines())


@pytest.mark.parametrize("where", ["option", "variable"])
def test_a_bad_embedder_spec_leaves_no_new_store_behind(tmp_path, monkeypatch, where):
    """A write to a new store with an unknown embedder kind is refused before the store is
    made: no file is left for the next run, which bound it to whatever embedder it had."""
    db = tmp_path / "new.db"
    args = ["--db", str(db), "remember", "agent", "A fact never written."]
    if where == "option":
        args = ["--embedder", "nope:x", *args]
    else:
        monkeypatch.setenv("CTXSLOTS_EMBEDDER", "nope:x")
    result = CliRunner().invoke(cli, args)
    assert 1 == result.exit_code
    assert result.output.startswith("Error: unknown embedder kind 'nope'"), result.output
    assert [] == list(tmp_path.iterdir())
    with pytest.raises(EmbedderSpecError, match="unknown embedder kind"):
        FactStore(db, embedder="nope:x")
    assert [] == list(tmp_path.iterdir())
