"""Round trips the PostgreSQL engine leaves out: an idle pooled connection the server said
nothing to is lent without one (and one whose session the server ended is replaced), a
nested block leaves its savepoint for the next block to release in the message that takes
its own, a write transaction opens in one message, and a search sends no transaction
around its statements, whose plans it keeps where they serve any parameters."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

psycopg = pytest.importorskip("psycopg")
pytest.importorskip("psycopg_pool")

from ctxslots import StoreError
from ctxslots.stores.postgres._connections import Connections
from ctxslots.stores.postgres._session import Session


def _pool(url: str) -> Connections:
    return Connections(url, max_size=1, timeout=10.0, configure=lambda conn: None)


def _traced_borrow(connections: Connections, conn: psycopg.Connection, trace: Path
                   ) -> tuple[bool, int]:
    """Borrow with libpq tracing what ``conn`` sends and receives: whether ``conn`` was
    lent, and the server process of the one lent (asked once the trace is off)."""
    with trace.open("w") as out:
        conn.pgconn.trace(out.fileno())
        try:
            with connections.borrow() as lent:
                conn.pgconn.untrace()
                return lent is conn, lent.execute("SELECT pg_backend_pid()").fetchone()[0]
        finally:
            if not conn.closed:
                conn.pgconn.untrace()


def test_an_idle_connection_the_server_said_nothing_to_is_lent_without_a_round_trip(
        pg_url, tmp_path):
    """Lent again after a query, a healthy connection sends and reads nothing on the way."""
    connections = _pool(pg_url)
    try:
        with connections.borrow() as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        # The trace records each message: it does see a check that goes to the server.
        checked = tmp_path / "checked"
        with checked.open("w") as out:
            conn.pgconn.trace(out.fileno())
            conn.execute("")
            conn.pgconn.untrace()
        assert "Query" in checked.read_text()

        trace = tmp_path / "borrow"
        assert _traced_borrow(connections, conn, trace) == (True, conn.info.backend_pid)
        assert trace.read_text() == ""
    finally:
        connections.close()


def test_a_connection_whose_session_the_server_ended_is_replaced(pg_url, tmp_path):
    """The server ended the pooled connection's session while it sat idle: the borrow reads
    why, and lends a connection to a new server process instead."""
    connections = _pool(pg_url)
    try:
        with connections.borrow() as conn:
            old = conn.info.backend_pid
        with psycopg.connect(pg_url, autocommit=True) as admin:
            assert admin.execute("SELECT pg_terminate_backend(%s)", (old,)).fetchone() == (True,)
            # The server process says why and leaves a moment later: wait until it has.
            while admin.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s",
                                (old,)).fetchone() != (0,):
                time.sleep(0.05)
        trace = tmp_path / "borrow"
        same, pid = _traced_borrow(connections, conn, trace)
        assert "terminating connection" in trace.read_text()  # what the check read
        assert not same and pid != old
    finally:
        connections.close()


def test_a_nested_block_costs_one_round_trip(pg_url, tmp_path):
    """Inside a transaction, a nested block that ends leaves its savepoint, and the next block
    at its depth releases it in the message that takes its own: one message a block, not a
    SAVEPOINT and a RELEASE. A block that raises is rolled back to its savepoint."""
    session = Session("test", _pool(pg_url))
    trace = tmp_path / "nested"
    try:
        with session.transaction(), session.conn() as conn:
            conn.execute("CREATE TEMP TABLE t (n int) ON COMMIT DROP")
            with trace.open("w") as out:
                conn.pgconn.trace(out.fileno())
                for n in range(3):
                    with session.transaction():
                        conn.execute("INSERT INTO t VALUES (%s)", (n,))
                with pytest.raises(RuntimeError), session.transaction():
                    conn.execute("INSERT INTO t VALUES (99)")
                    raise RuntimeError("undone")
                with session.transaction(), session.transaction():
                    conn.execute("INSERT INTO t VALUES (3)")
                conn.pgconn.untrace()
            assert [(n,) for n in range(4)] == conn.execute("SELECT n FROM t ORDER BY n").fetchall()
    finally:
        session.close()
    again = "RELEASE SAVEPOINT ctxslots_1; SAVEPOINT ctxslots_1"
    assert ["SAVEPOINT ctxslots_1", again, again, again, "ROLLBACK TO SAVEPOINT ctxslots_1",
            again, "SAVEPOINT ctxslots_2"] == _savepoint_messages(trace)


def _savepoint_messages(trace: Path) -> list[str]:
    """What each frontend message said about savepoints, in order (libpq's trace format)."""
    return [line.split("\t")[-1].strip(' "').replace('"', "")
            for line in trace.read_text().splitlines()
            if "\tF\t" in line and "SAVEPOINT" in line]


def test_a_transaction_without_savepoints_takes_none_inside(pg_url, tmp_path):
    """Blocks inside a transaction with ``savepoints=False`` send no savepoint; nested in
    a transaction, such a block takes one for itself, and rolls back to it when one of
    its blocks fails, though the failure was caught."""
    session = Session("test", _pool(pg_url))
    trace = tmp_path / "unsaved"
    try:
        with session.conn() as conn:
            pass
        with trace.open("w") as out:
            conn.pgconn.trace(out.fileno())  # the pool's one connection, lent again below
            try:
                with session.transaction(savepoints=False), session.conn() as conn:
                    conn.execute("CREATE TEMP TABLE u (n int) ON COMMIT DROP")
                    for n in range(3):
                        with session.transaction(), session.conn() as inner:
                            inner.execute("INSERT INTO u VALUES (%s)", (n,))
                    kept = conn.execute("SELECT count(*) FROM u").fetchone()
                with session.transaction(), session.conn() as conn:
                    conn.execute("CREATE TEMP TABLE v (n int) ON COMMIT DROP")
                    conn.execute("INSERT INTO v VALUES (1)")
                    with pytest.raises(StoreError, match="nothing in the batch"):
                        with session.transaction(savepoints=False):
                            with session.transaction(), session.conn() as inner:
                                inner.execute("INSERT INTO v VALUES (2)")
                            with pytest.raises(RuntimeError), session.transaction():
                                raise RuntimeError("caught")
                    left = conn.execute("SELECT n FROM v").fetchall()
            finally:
                conn.pgconn.untrace()
    finally:
        session.close()
    assert (3,) == kept and [(1,)] == left
    assert ["SAVEPOINT ctxslots_1", "ROLLBACK TO SAVEPOINT ctxslots_1"] == _savepoint_messages(
        trace)


def test_a_flush_takes_no_savepoints(pg_url, tmp_path, monkeypatch):
    """A flush fails whole on any error, so its writes take no savepoint, and a key is
    read without a reservation (its row, if any, is locked by the read): its messages
    are a begin, the counts of erasures of its owners (the resets', its user's and its
    agent's; no workspace here) each read under its reservation (an advisory lock: an
    erasure under way ends first, one not begun waits for the flush and then erases what
    it wrote), the conversation's reservation (another advisory lock: a second
    flush of it waits) and progress read, each key's read and write, the progress write and
    the commit."""
    from ctxslots import FactStore, MemoryFlusher, OpenAIChatClient
    from ctxslots.testing import ScriptedChatServer, ScriptedReply

    operations = [{"op": "upsert", "slot": "user", "key": key, "value": value,
                   "confidence": 0.9, "tags": []}
                  for key, value in (("city", "Ada lives in Lyon."),
                                     ("town", "Ada grew up in Arles."))]
    traced = _Traced(monkeypatch, tmp_path)
    server = ScriptedChatServer([ScriptedReply(json.dumps({"operations": operations}))])
    try:
        with FactStore(pg_url) as store:
            store.upsert("user", "city", "Ada lives in Nice.", user="ada")
            flusher = MemoryFlusher(store, OpenAIChatClient(server.base_url, "scripted",
                                                            max_retries=0, timeout=5))
            reports = []
            sent = traced.sent_while(lambda: reports.append(flusher.flush(
                [{"role": "user", "content": "I moved to Lyon; I grew up in Arles."}],
                conversation="c1", user="ada", force=True)))
            assert "applied" == reports[0].status
            assert {"Ada lives in Lyon.", "Ada grew up in Arles."} == {
                f.value for f in store.facts(user="ada")}
    finally:
        server.close()
    assert sent and not [s for s in sent if "SAVEPOINT" in s]
    begin = sent.index("BEGIN")
    locks = [n for n, s in enumerate(sent) if "pg_advisory" in s]
    progress = [n for n, s in enumerate(sent) if n > begin and s.startswith("SELECT messages_read")]
    assert 4 == len(locks) and 1 == len(progress) and begin < locks[0] and locks == sorted(locks)
    assert locks[-1] < progress[0]
    assert sent[locks[0] + 1].startswith("SELECT value FROM store_meta")
    assert 2 == len([s for s in sent if s.startswith("SELECT id,") and "key = $" in s])


def _parsed(trace: Path) -> list[tuple[str, str]]:
    """Each statement a libpq trace shows parsed (its name, ``""`` when unnamed, and its
    text) or sent as a simple query (``("Query", text)``), in order."""
    out = []
    for line in trace.read_text().splitlines():
        fields = line.split("\t")
        if len(fields) > 4 and fields[1] == "F" and fields[3] == "Parse":
            found = re.match(r'"([^"]*)" "(.*)" \d', "\t".join(fields[4:]).strip())
            assert found, line
            out.append((found[1], found[2]))
        elif len(fields) > 4 and fields[1] == "F" and fields[3] == "Query":
            out.append(("Query", "\t".join(fields[4:]).strip(' "')))
    return out


def test_only_a_write_transaction_prepares_statements_run_often(pg_url, tmp_path):
    """A write transaction opens with one message and prepares a statement on its sixth
    run; outside one, a statement run as often is planned for its parameters each time
    unless it asks to be prepared. A transaction that raises is rolled back and leaves the
    connection as it was."""
    from ctxslots.stores.postgres._session import READ_PREPARE_THRESHOLD, plan_settings

    session = Session("test", Connections(pg_url, max_size=1, timeout=10.0,
                                          configure=plan_settings))
    trace = tmp_path / "plans"

    def run(sql: str, *, prepare: bool | None = None) -> None:
        with session.conn() as conn:
            for n in range(8):
                assert (n,) == conn.execute(sql, (n,), prepare=prepare).fetchone()

    try:
        with session.conn() as lent:
            assert ("auto",) == lent.execute("SHOW plan_cache_mode").fetchone()
        with trace.open("w") as out:
            lent.pgconn.trace(out.fileno())  # one connection in the pool: lent each time
            try:
                run("SELECT %s::int AS outside")
                run("SELECT %s::int AS asked", prepare=True)
                with session.transaction():
                    run("SELECT %s::int AS inside")
            finally:
                lent.pgconn.untrace()
        parsed = _parsed(trace)
        names = {text.split(" AS ")[-1]: [] for _, text in parsed if " AS " in text}
        for name, text in parsed:
            if " AS " in text:
                names[text.split(" AS ")[-1]].append(name)
        assert [""] * 8 == names["outside"]
        assert 1 == len(names["asked"]) and names["asked"][0]  # prepared at once, then run
        assert [""] * 5 == names["inside"][:5] and 6 == len(names["inside"]) \
            and names["inside"][5]
        assert [("Query", "BEGIN"), ("Query", "COMMIT")] == [p for p in parsed if p[0] == "Query"]
        with pytest.raises(RuntimeError), session.transaction(), session.conn() as conn:
            conn.execute("CREATE TABLE undone (n int)")
            raise RuntimeError("undone")
        with session.conn() as conn:
            assert psycopg.pq.TransactionStatus.IDLE == conn.pgconn.transaction_status
            assert READ_PREPARE_THRESHOLD == conn.prepare_threshold
            assert (None,) == conn.execute("SELECT to_regclass('undone')").fetchone()
    finally:
        session.close()


class _Traced:
    """The statements a FactStore on PostgreSQL sends: each connection its pool opens is
    noted, and :meth:`sent_while` traces them all through libpq for one action."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
        from ctxslots.stores.postgres import PostgresBackend

        self.conns: list[psycopg.Connection] = []
        self.folder = folder
        configure = PostgresBackend._configure

        def noting(backend: PostgresBackend, conn: psycopg.Connection) -> None:
            configure(backend, conn)
            self.conns.append(conn)

        monkeypatch.setattr(PostgresBackend, "_configure", noting)

    def sent_while(self, action) -> list[str]:
        """The text of each statement sent while ``action`` ran (simple or extended)."""
        return [text for _, text in self.messages_while(action, ("Query", "Parse"))]

    def parsed_while(self, action) -> list[tuple[str, str]]:
        """Each statement parsed while ``action`` ran (extended protocol): its name
        (``""`` for an unnamed statement, planned for its parameters) and its text."""
        return self.messages_while(action, ("Parse",))

    def messages_while(self, action, kinds: tuple[str, ...]) -> list[tuple[str, str]]:
        path = self.folder / f"trace-{len(list(self.folder.iterdir()))}"
        with path.open("w") as out:
            for conn in self.conns:
                conn.pgconn.trace(out.fileno())
            try:
                action()
            finally:
                for conn in self.conns:
                    if not conn.closed:
                        conn.pgconn.untrace()
        # A record starts with its timestamp and direction; a statement's own line breaks
        # continue it on the next lines.
        records: list[str] = []
        for line in path.read_text().splitlines():
            if "\tF\t" in line or "\tB\t" in line or not records:
                records.append(line)
            else:
                records[-1] += " " + line
        out: list[tuple[str, str]] = []
        for record in records:
            fields = record.split("\t")
            if len(fields) < 4 or fields[1] != "F" or fields[3] not in kinds:
                continue
            body = "\t".join(fields[4:]).strip()
            if fields[3] == "Parse":  # "name" "text" parameter types...
                found = re.match(r'"([^"]*)" "(.*)" \d', body, re.DOTALL)
                assert found, body
                out.append((found[1], " ".join(found[2].split())))
            else:
                out.append(("", " ".join(body.strip(' "').split())))
        return out


def test_a_search_sends_three_statements_and_keeps_their_plans(pg_url, tmp_path, monkeypatch):
    """Outside a batch, a search sends no transaction around its statements: the match,
    one statement for the hits' links and near-duplicate counts, and one for their access
    count, in a transaction of its own that waits a moment at most for a lock (an
    import's), sent at once. Run often, the last two keep their plans. Inside a batch it
    joins the batch."""
    from ctxslots import FactStore

    traced = _Traced(monkeypatch, tmp_path)
    with FactStore(pg_url) as store:
        fact = store.add("agent", "The deploy runs on Fridays.")
        first = traced.messages_while(lambda: store.search("deploy"), ("Query", "Parse"))
        sent = [text for _, text in first]
        assert [s for s in sent if s.startswith(("BEGIN", "COMMIT", "SAVEPOINT"))] \
            == ["BEGIN", "COMMIT"]
        assert sent[-4] == "BEGIN" and sent[-1] == "COMMIT"
        assert sent[-3].startswith("SELECT set_config('lock_timeout'")
        first = [m for m in first if not m[1].startswith(("BEGIN", "COMMIT", "SELECT set_"))]
        sent = [text for _, text in first]
        match = [n for n, s in enumerate(sent) if "q AS MATERIALIZED" in s]
        around = [n for n, s in enumerate(sent) if "fact_links" in s]
        counts = [n for n, s in enumerate(sent) if s.startswith("UPDATE facts")
                  and "access_count" in s]
        # Planning may read the table's statistics first; then the three, in order.
        assert 1 == len(match) == len(around) == len(counts)
        assert match[0] < around[0] < counts[0] == len(sent) - 1
        # The hits' links and what they hide: one statement asks both.
        assert "superseded_by = ANY" in sent[around[0]]
        assert 1 == store.get(fact.id).access_count
        # Those two are prepared on their first run, and never parsed again.
        assert first[around[0]][0] and first[counts[0]][0]
        again = traced.parsed_while(lambda: [store.search("deploy") for _ in range(5)])
        assert 5 == len([text for _, text in again if "q AS MATERIALIZED" in text])
        assert not [text for _, text in again
                    if "fact_links" in text or text.startswith("UPDATE facts")]
        assert 6 == store.get(fact.id).access_count

        # A message with nothing to look for reads nothing.
        assert [] == traced.sent_while(lambda: store.search("the of and"))

        def in_batch() -> None:
            with store.batch():
                store.search("deploy")
                store.add("agent", "The release train leaves on Mondays.")

        sent = traced.sent_while(in_batch)
        assert 1 == sum(s.startswith("BEGIN") for s in sent)
        assert 7 == store.get(fact.id).access_count


def test_a_search_plans_before_it_holds_a_connection(pg_url, monkeypatch):
    """A search first waits for the vectors its store's own writes still owe, which the
    background writer writes on a connection of the pool; only then does it hold one for
    its transaction, so searches holding every connection can never starve that writer."""
    from ctxslots import FactStore, RankingPolicy
    from ctxslots.stores.postgres import PostgresBackend

    events: list[str] = []
    put_vectors, reading = PostgresBackend.put_vectors, PostgresBackend.reading

    def noted_put(backend, rows, vectors) -> None:
        put_vectors(backend, rows, vectors)
        events.append("vectors written")

    def noted_reading(backend):
        events.append("search holds a connection")
        return reading(backend)

    monkeypatch.setattr(PostgresBackend, "put_vectors", noted_put)
    monkeypatch.setattr(PostgresBackend, "reading", noted_reading)
    with FactStore(pg_url, embedder="hash", vector_writes="background",
                   ranking=RankingPolicy(vector_weight=1.0)) as store:
        store.add("agent", "The deploy runs on Fridays.")
        store.wait_for_vectors()
        events.clear()
        store.add("agent", "The deploy window opens at nine.")
        assert store.search("deploy window")
        assert ["vectors written", "search holds a connection"] == events[:2]


def test_a_search_that_raises_leaves_its_connection_idle(pg_url, tmp_path, monkeypatch):
    """A search whose boost fails inside its transaction rolls it back: the error is the
    store's, no access is counted, and the connections go on planning reads for their
    own parameters, idle, with nothing held."""
    from ctxslots import FactStore
    from ctxslots.errors import InvalidFactError
    from ctxslots.stores.postgres._session import READ_PREPARE_THRESHOLD

    traced = _Traced(monkeypatch, tmp_path)
    with FactStore(pg_url) as store:
        fact = store.add("agent", "The deploy runs on Fridays.")
        with pytest.raises(InvalidFactError, match="boost"):
            store.search("deploy", boost=lambda _fact: -1.0)
        assert 0 == store.get(fact.id).access_count
        for conn in traced.conns:
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
            assert READ_PREPARE_THRESHOLD == conn.prepare_threshold
        assert [fact.id] == [h.fact.id for h in store.search("deploy")]
        assert 1 == store.get(fact.id).access_count


def test_a_search_keeps_the_plan_of_an_owners_match_alone(pg_url, tmp_path, monkeypatch):
    """Run often, a search's BM25 statement is prepared, and keeps its plan, when it
    matches the owner terms of a small share of the store and filters by owners alone;
    filtered by the time a memory was said as well, it is planned for its parameters
    each time."""
    from ctxslots import FactStore
    from ctxslots.stores.postgres import _lexical

    monkeypatch.setattr(_lexical, "_EXACT_BELOW", 0)  # this small table counts as large
    traced = _Traced(monkeypatch, tmp_path)
    with FactStore(pg_url, embedder=False) as store:
        with store.batch():
            for user in [f"user{n}" for n in range(10)]:
                for n in range(10):
                    store.add("user", f"{user} deploys staging build {n}.", user=user)

        def searches(**filters) -> None:
            for _ in range(8):
                assert store.search("staging deploys", user="user3", **filters)

        def bm25_names(parsed: list[tuple[str, str]]) -> list[str]:
            bm25 = [(name, text) for name, text in parsed if "q AS MATERIALIZED" in text]
            assert all("md5(o.u" in text for _, text in bm25)  # the owner terms matched
            return [name for name, _ in bm25]

        owners_alone = bm25_names(traced.parsed_while(searches))
        assert owners_alone and any(name for name in owners_alone)
        said = bm25_names(traced.parsed_while(lambda: searches(said_after=0.0)))
        assert 8 == len(said) and not any(said)


def test_a_fact_read_by_owners_and_key_or_value_names_empty_owners_as_literals(
        pg_url, tmp_path, monkeypatch):
    """Inside a write transaction, where statements keep their plans, a read of one fact by
    its owners and key (an upsert's) or value (an add's) is prepared when run often, with
    the owners a fact leaves empty written as literals (so that the plan kept knows how
    common they are) and the others, quotes and all, sent as parameters."""
    from ctxslots import FactStore

    traced = _Traced(monkeypatch, tmp_path)
    with FactStore(pg_url) as store:
        def writes(**owners: str) -> None:
            with store.batch():
                for n in range(8):  # psycopg prepares a statement on its sixth run
                    store.upsert("user" if "user" in owners else "agent", f"k{n}",
                                 f"Ada likes colour {n}.", **owners)
                    store.add("user" if "user" in owners else "agent",
                              f"Ada once saw bird {n}.", **owners)

        users = traced.parsed_while(lambda: writes(user="o'hara"))
        agents = traced.parsed_while(lambda: writes(agent="o'hara", scope="atlas"))
        assert 16 == len(store.facts(slots=["user"], user="o'hara"))
        assert 16 == len(store.facts(slots=["agent"], agent="o'hara", scope="atlas"))

    for parsed, literals, named in ((users, ("scope = ''", "agent_id = ''"), ("user_id = $",)),
                                    (agents, ("user_id = ''",), ("scope = $", "agent_id = $"))):
        by_key = [(name, text) for name, text in parsed
                  if "key = $" in text and text.startswith("SELECT")]
        by_value = [(name, text) for name, text in parsed if "md5(value) = md5($" in text]
        for reads in (by_key, by_value):
            assert 6 == len(reads)  # parsed five times, then prepared once
            assert [""] * 5 == [name for name, _ in reads[:5]] and reads[5][0]
            assert all(part in text for _, text in reads for part in literals + named)
            assert "o'hara" not in " ".join(text for _, text in reads)


def test_the_profile_read_keeps_a_plan_that_reads_only_its_owners_rows(
        pg_url, tmp_path, monkeypatch):
    """The profile's read (``important``) names each combination of owners, slot and
    scope in full, so the plan it keeps reads the owners' index for exactly those rows:
    it is prepared on its first run, in a batch or not. The timeline's reads, which
    filter by lists of owners, are never prepared: a plan kept for any owners would read
    every fact of the scopes asked."""
    from ctxslots import FactStore

    traced = _Traced(monkeypatch, tmp_path)
    # No embedder: no vector writer borrows a connection while the reads run.
    with FactStore(pg_url, embedder=False) as store:
        fact = store.upsert("user", "city", "Ada lives in Nice.", user="ada")
        with store.batch():  # a table large enough that PostgreSQL walks its indexes
            for n in range(3000):
                store.upsert("user", f"note-{n}", f"User {n % 60} noted item {n}.",
                             user=f"user-{n % 60}")
                if n % 10 == 0:
                    store.upsert("project", f"rule-{n}", f"Rule {n} of the team.",
                                 scope=f"team-{n % 20}")

        def reads() -> None:
            for _ in range(3):
                assert [fact.id] == [f.id for f in store.important(
                    "user", user="ada", agent="bot", scope="shop")]
            with store.batch():
                for _ in range(8):  # psycopg prepares a statement on its sixth run
                    assert [fact.id] == [f.id for f in store.important(
                        "user", user="ada", agent="bot", scope="shop")]
                    assert [fact.id] == [f.id for f in store.timeline(fact.id, user="ada")]

        parsed = traced.parsed_while(reads)
    profile = [(name, text) for name, text in parsed if "ORDER BY score DESC" in text]
    timeline = [name for name, text in parsed if "(observed_at, id)" in text]
    assert 1 == len(profile) and profile[0][0]  # parsed once, as a named statement
    assert 16 == len(timeline) and {""} == set(timeline)
    # The plan PostgreSQL keeps for any values: each combination is one walk of the
    # owners' index on its whole key, and nothing else reads the table.
    with psycopg.connect(pg_url, autocommit=True) as conn:
        if conn.info.server_version < 160000:
            pytest.skip("EXPLAIN (GENERIC_PLAN) needs PostgreSQL 16")
        conn.execute("ANALYZE facts")
        plan = "\n".join(row[0] for row in conn.execute(
            "EXPLAIN (GENERIC_PLAN) " + profile[0][1]).fetchall())
    walks = re.findall(r"Index Scan on facts_owners.*\n\s*Index Cond: (.*)", plan)
    assert 8 == len(walks), plan  # user or none, agent or none, the scope or global
    for cond in walks:
        for column in ("user_id", "agent_id", "slot", "scope"):
            assert f"({column} = $" in cond, plan
    assert "Seq Scan" not in plan


def test_a_replaced_value_is_recorded_in_the_statement_that_replaces_it(
        pg_url, tmp_path, monkeypatch):
    """An upsert that replaces a value writes its history row and the new value in one
    statement; the history holds the old value."""
    from ctxslots import FactStore

    traced = _Traced(monkeypatch, tmp_path)
    with FactStore(pg_url) as store:
        store.upsert("user", "city", "Ada lives in Nice.", user="ada")
        sent = traced.sent_while(
            lambda: store.upsert("user", "city", "Ada lives in Lyon.", user="ada"))
        history = [s for s in sent if "fact_history" in s]
        assert 1 == len(history) and "UPDATE facts" in history[0]
        fact = store.get_by_key("user", "city", user="ada")
        assert "Ada lives in Lyon." == fact.value
        assert ["Ada lives in Nice."] == [v.value for v in store.history(fact.id)]


def test_a_flush_reads_each_key_once_whether_or_not_it_is_stored(pg_url, tmp_path, monkeypatch):
    """Inside a batch, a key read and then written is read once, stored or not (the
    reservation keeps other writers of the key out): the write's own read is the same."""
    from ctxslots import FactStore

    traced = _Traced(monkeypatch, tmp_path)
    with FactStore(pg_url) as store:
        store.upsert("user", "city", "Ada lives in Nice.", user="ada")

        def flush() -> None:
            with store.batch():
                for key, value in (("city", "Ada lives in Lyon."), ("town", "Ada grew up in Arles.")):
                    store.get_by_key("user", key, user="ada")
                    store.upsert("user", key, value, user="ada")

        sent = traced.sent_while(flush)
        reads = [s for s in sent if s.startswith("SELECT id,") and "key = $" in s]
        assert 2 == len(reads)
        assert "Ada grew up in Arles." == store.get_by_key("user", "town", user="ada").value


def test_an_assembly_counts_every_sections_facts_in_one_statement(pg_url, tmp_path, monkeypatch):
    """Three sections show facts; their access counts are one statement (one commit), not
    one each."""
    from ctxslots import AssemblyRequest, FactStore, PromptAssembler

    traced = _Traced(monkeypatch, tmp_path)
    with FactStore(pg_url, access_writes="inline") as store:
        ids = [store.upsert("user", "editor", "The user deploys from Helix.").id,
               store.add("project", "Deploys of shop-api run on Fridays.", scope="shop").id,
               store.add("agent", "The last deploy of shop-api took nine minutes.",
                         scope="shop").id]
        assembler = PromptAssembler(store)
        request = AssemblyRequest("deploy shop-api", scope="shop", budget=800)
        messages = traced.messages_while(lambda: assembler.assemble(request), ("Parse", "Bind"))
        # The statement is parsed once under a name; each run of it binds that name.
        names = [name for name, text in messages
                 if text.startswith("UPDATE facts") and "access_count" in text]
        assert 1 == len(names) and names[0]
        runs = [text for name, text in messages if not name and text.startswith(f'{names[0]}"')]
        assert 1 == len(runs)
        assert "{" + ",".join(map(str, sorted(ids))) + "}" in runs[0]
        assert [1, 1, 1] == [store.get(i).access_count for i in ids]


def test_a_large_import_has_the_planner_count_the_tables_again(pg_url):
    """An import of 1,000 facts or more ends with ANALYZE, so the next one is planned for
    the table it wrote (planned from the counts before, a second import of 10,000 facts
    took 10 s instead of 0.6 s); a small one leaves that to autovacuum."""
    import io
    import json

    import psycopg

    from ctxslots import FactStore

    def analyzed() -> bool:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            return conn.execute("SELECT last_analyze IS NOT NULL FROM pg_stat_user_tables "
                                "WHERE relname = 'facts'").fetchone()[0]

    def records(n: int, name: str) -> io.StringIO:
        lines = [json.dumps({"format": "ctxslots-facts", "version": 1})] + [
            json.dumps({"slot": "agent", "value": f"{name} lesson {i} about deploys."})
            for i in range(n)]
        return io.StringIO("\n".join(lines) + "\n")

    with FactStore(pg_url, embedder=False) as store:
        assert 10 == store.import_jsonl(records(10, "Small")).added
        assert not analyzed()
        assert 1000 == store.import_jsonl(records(1000, "Large")).added
        assert analyzed()
