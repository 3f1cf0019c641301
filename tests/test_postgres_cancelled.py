"""A statement the server cancels (its statement_timeout) is reported as such, not as a lost
connection, and the store keeps working."""

from __future__ import annotations

import pytest

from ctxslots import FactStore, StoreBusyError


def test_a_statement_cancelled_by_statement_timeout_says_so(pg_url):
    psycopg = pytest.importorskip("psycopg")
    with FactStore(pg_url, embedder=False) as store:
        store.add("agent", "A lesson about deploys.")
    joined = "&" if "?" in pg_url else "?"
    timed = f"{pg_url}{joined}options=-c%20statement_timeout%3D300"
    with FactStore(timed, embedder=False) as store, \
            psycopg.connect(pg_url, autocommit=True) as holder:
        with holder.transaction():
            holder.execute("LOCK TABLE facts IN ACCESS EXCLUSIVE MODE")
            with pytest.raises(StoreBusyError, match="cancelled a statement") as info:
                store.search("deploys", track_access=False)
        assert "lost the connection" not in str(info.value)
        assert "statement_timeout" in str(info.value)
        assert [h.fact.value for h in store.search("deploys", track_access=False)] == \
            ["A lesson about deploys."]
