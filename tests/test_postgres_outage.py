"""PostgreSQL outages: a stopped server fails calls at once with the right advice, and the
first call after it is back works; a server out of connections says so; the pool stays quiet."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

psycopg = pytest.importorskip("psycopg")
pytest.importorskip("psycopg_pool")
pgserver = pytest.importorskip("pgserver")

from psycopg.conninfo import conninfo_to_dict

from _postgres import with_database, with_user
from ctxslots import ANY, FactStore, StoreError


@attrs.define
class StoppableServer:
    """A private pgserver a test stops and starts again: same data, same socket, same URL."""

    url: str
    handle: Any

    def _ctl(self, *args: str) -> None:
        pgserver.pg_ctl(list(args), pgdata=self.handle.pgdata, user=self.handle.system_user,
                        timeout=120)

    def stop(self, mode: str = "fast") -> None:
        """Stop it, closing every client's connection; returns once it is down (``smart``:
        once the last client left, refusing new ones meanwhile)."""
        self._ctl("-w", "-m", mode, "stop")

    def start(self) -> None:
        """Start it again; returns once it accepts connections."""
        socket_dir = conninfo_to_dict(self.url)["host"]
        self._ctl("-w", "-o", '-h ""', "-o", f"-k {socket_dir}", "-l", str(self.handle.log),
                  "start")

    def database(self, owner: str | None = None) -> str:
        """A new database (owned by ``owner``) with pgvector created in it."""
        name = f"outage_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}" + (f" OWNER {owner}" if owner else ""))
        url = with_database(self.url, name)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION vector")
        return url


@pytest.fixture(scope="module", name="server")
def fixture_server() -> Iterator[StoppableServer]:
    data = Path(tempfile.mkdtemp(prefix="ctxslots-pg-outage-"))
    handle = pgserver.get_server(str(data), cleanup_mode="delete")
    server = StoppableServer(str(handle.get_uri()), handle)
    try:
        yield server
    finally:
        # pgserver's cleanup stops only the server process it started itself, not one
        # started again here: stop whichever runs, then let it delete the folder.
        if _up(server.url):
            server.stop()
        handle.cleanup()


def _up(url: str) -> bool:
    try:
        psycopg.connect(url, connect_timeout=2).close()
    except psycopg.Error:
        return False
    return True


def test_a_stopped_server_fails_calls_at_once_and_the_first_call_after_works(server):
    """While the server is down every call raises a StoreError saying it does not answer
    (not "a larger pool"); the first call once it is back succeeds, writes included."""
    url = server.database()
    with FactStore(url) as store:
        kept = store.add("agent", "Deploys happen on Fridays.")
        assert [kept.id] == [h.fact.id for h in store.search("deploys")]
        server.stop()
        try:
            for call in (lambda: store.search("deploys"), lambda: store.get(kept.id),
                         lambda: store.add("agent", "Written while the server was down."),
                         lambda: store.search("fridays")):
                with pytest.raises(StoreError) as info:
                    call()
                message = str(info.value)
                assert "does not answer" in message and "as soon as it is back" in message
                assert "larger pool" not in message and "\n" not in message
        finally:
            server.start()
        assert [kept.id] == [h.fact.id for h in store.search("deploys")]  # the first call
        later = store.add("agent", "Written once the server was back.")
        assert store.get(later.id).value == "Written once the server was back."
        assert "Written while" not in {f.value for f in store.facts()}
        # Stopped and started between two calls: the next call works too.
        server.stop()
        server.start()
        assert [kept.id] == [h.fact.id for h in store.search("deploys")]


def test_the_inspector_answers_503_while_the_server_is_down(server):
    """``ctxslots ui`` over a server that stops: every page and change answers 503 with the
    store's error (not a bare 500), and once the server is back the pages answer again."""
    httpx = pytest.importorskip("httpx")
    from _inspector import serving

    url = server.database()
    with FactStore(url) as store:
        fact = store.add("agent", "Deploys happen on Fridays.").id
    with serving(url) as address, httpx.Client(timeout=120) as client:
        base = address.split("/?", 1)[0]
        assert 200 == client.get(address).status_code
        server.stop()
        try:
            for path in ("/", f"/fact/{fact}", "/health", "/timeline",
                         f"/why?fact={fact}&message=deploys"):
                page = client.get(base + path)
                assert 503 == page.status_code, path
                assert "does not answer" in page.text and 'id="error"' in page.text, path
            for action in ("reinforce", "edit", "forget"):
                page = client.post(f"{base}/fact/{fact}/{action}",
                                   data={"amount": "1", "value": "Deploys on Mondays."})
                assert 503 == page.status_code and "does not answer" in page.text, action
        finally:
            server.start()
        assert 200 == client.get(f"{base}/fact/{fact}").status_code
        assert 200 == client.get(base + "/health").status_code


def test_a_restart_during_a_transaction_fails_it_and_the_next_works(server):
    """The server stopping under an open write transaction: nothing of it is kept, and
    the next transaction once it is back commits."""
    url = server.database()
    with FactStore(url) as store:
        with pytest.raises(StoreError), store.batch():
            store.add("agent", "Half of a batch.")
            server.stop()
            store.add("agent", "The other half.")
        server.start()
        with store.batch():
            store.add("agent", "A whole batch.")
        assert ["A whole batch."] == [f.value for f in store.facts()]


def test_a_server_shutting_down_says_so_not_to_fix_the_host(server):
    """A smart shutdown waits for its last client, refusing new sessions meanwhile: opening
    says the server answered and takes no connections now, not that nothing answers at
    the URL's host and port."""
    url = server.database()
    FactStore(url).close()
    holder = psycopg.connect(url, autocommit=True)
    stopping = threading.Thread(target=server.stop, args=("smart",))
    stopping.start()
    try:
        while "shutting down" not in _refusal(url):  # the shutdown has begun
            time.sleep(0.05)
        with pytest.raises(StoreError) as info:
            FactStore(url, create=False)
    finally:
        holder.close()
        stopping.join()
        server.start()
    message = str(info.value)
    assert "answered but takes no connections now (the database system is shutting " \
           "down): try again once it is up" in message
    assert "host and port" not in message and "cannot reach" not in message


def _refusal(url: str) -> str:
    """Why the server refuses a new connection now ('' when it takes it)."""
    try:
        psycopg.connect(url, connect_timeout=2).close()
    except psycopg.Error as exc:
        return str(exc)
    return ""


def _limited(server: StoppableServer, limit: int) -> str:
    """A store's URL for a role allowed ``limit`` connections, its database ready."""
    role = f"limited_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN CONNECTION LIMIT {limit}")
    url = with_user(server.database(owner=role), role)
    FactStore(url).close()  # the schema, made while connections are free
    # A closed connection's server process leaves a moment later: wait until it has.
    with psycopg.connect(server.url, autocommit=True) as conn:
        while conn.execute("SELECT count(*) FROM pg_stat_activity WHERE usename = %s",
                           (role,)).fetchone()[0]:
            time.sleep(0.05)
    return url


def test_opening_with_no_free_connection_says_so(server):
    """Every connection the role may open is taken: opening says the server takes no more
    connections and what to do, not "cannot reach ... fix the host and port"."""
    url = _limited(server, 2)
    held = [psycopg.connect(url) for _ in range(2)]
    try:
        with pytest.raises(StoreError) as info:
            FactStore(url)
    finally:
        for conn in held:
            conn.close()
    message = str(info.value)
    assert "takes no more connections" in message and "max_connections" in message
    assert "fix the host" not in message


CHILD = textwrap.dedent("""
    import sys, threading
    from ctxslots import FactStore

    store = FactStore(sys.argv[1])
    store.add("agent", "Deploys happen on Fridays.")
    found, errors = [], []

    def searches():
        for _ in range(30):
            try:
                found.append(len(store.search("deploys")))
            except Exception as exc:
                errors.append(repr(exc))

    threads = [threading.Thread(target=searches) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    store.close()
    print(len(found), sum(found), len(errors))
""")


def test_a_pool_that_cannot_grow_stays_quiet(server):
    """Four threads on a pool of four where the role may open two connections: every search
    answers, and nothing is printed on stderr (the pool's reconnection warnings stay in
    logging)."""
    url = _limited(server, 2)
    done = subprocess.run([sys.executable, "-c", CHILD, url], capture_output=True, text=True,
                          timeout=600, check=False)
    assert 0 == done.returncode, done.stderr
    assert "120 120 0" == done.stdout.strip(), done.stderr
    assert "" == done.stderr, done.stderr


def test_the_outage_script_finds_nothing_lost(server, tmp_path):
    """``python -m reliability postgres-outage`` at small size: two writers, one stop;
    every acknowledged fact kept, every failed call the expected one, stderr empty, and
    both writers served again after the start."""
    root = Path(__file__).resolve().parents[1]
    if str(root) not in sys.path:  # the reliability scripts live beside tests/
        sys.path.insert(0, str(root))
    from reliability.postgres_outage import run_postgres_outage

    result = run_postgres_outage(server.database(), stop_server=server.stop,
                                 start_server=server.start, folder=tmp_path, workers=2,
                                 outages=1, down_s=1.0, warmup_s=0.5)
    assert [] == result.failures
    assert result.acked > 0 and 1 == len(result.recoveries)
    assert result.recoveries[0] != float("inf")  # each writer had a call succeed after it


def test_a_busy_pool_with_the_server_up_still_says_so(pg_url):
    """The server answers but every connection of the pool is held: after the timeout,
    the error names the pool (the one case where a larger pool is the advice)."""
    import threading

    from ctxslots.stores.postgres import PostgresBackend

    errors: list[str] = []

    def count() -> None:
        try:
            backend.counts()
        except StoreError as exc:
            errors.append(str(exc))

    with PostgresBackend(pg_url, pool_size=1, connect_timeout=2) as backend:
        with backend.transaction():  # this thread holds the only connection
            other = threading.Thread(target=count)
            other.start()
            other.join()
        assert 1 == len(errors) and "stayed busy" in errors[0] and "larger pool" in errors[0]
        assert backend.counts()["facts"] == 0  # the connection back: calls work


def test_a_connection_lost_under_a_write_lock_says_so(pg_url):
    """A connection dropped before a write's advisory lock (adding a free memory) fails
    with the lost-connection error a cursor's statement gives, and the next write works."""
    import psycopg

    with FactStore(pg_url) as store:
        with pytest.raises(StoreError, match="lost the connection"):
            with store.batch():
                store.add("agent", "Kept in the first half.")
                with psycopg.connect(pg_url, autocommit=True) as other:
                    other.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                  "WHERE datname = current_database() "
                                  "AND pid <> pg_backend_pid()")
                store.add("user", "Reserved after the connection was gone.")
        store.add("user", "Written once a connection is back.")
        assert ["Written once a connection is back."] == [f.value for f in store.facts()]


LOST_IN_A_BATCH = textwrap.dedent("""
    import sys, psycopg
    from ctxslots import FactStore, RankingPolicy, StoreError
    url = sys.argv[1]
    with FactStore(url, embedder="hash", ranking=RankingPolicy(vector_weight=1.0)) as store:
        for _ in range(5):  # psycopg's note comes as its pipeline is collected: not each time
            try:
                with store.batch():
                    store.add("agent", "First lesson of the batch.")
                    store.add("agent", "Second lesson of the batch.")
                    with psycopg.connect(url, autocommit=True) as other:
                        other.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                      "WHERE datname = current_database() "
                                      "AND pid <> pg_backend_pid()")
            except StoreError as exc:
                print("StoreError:", str(exc).split(" to ")[0])
        store.add("agent", "Written once a connection is back.")
        print(sorted(f.value for f in store.facts()))
""")


def test_a_batch_whose_connection_is_lost_prints_nothing_on_stderr(pg_url):
    """A batch's vectors are written together when it ends; its connection lost by then,
    the batch fails with the store's one error and nothing else is printed (psycopg's
    note of the pipeline it could not close stays in logging)."""
    done = subprocess.run([sys.executable, "-c", LOST_IN_A_BATCH, pg_url], capture_output=True,
                          text=True, timeout=600, check=False)
    assert 0 == done.returncode, done.stderr
    assert ["StoreError: lost the connection"] * 5 + [
        "['Written once a connection is back.']"] == done.stdout.splitlines()
    assert "" == done.stderr, done.stderr


@pytest.mark.parametrize("given", ["argument", "variable"])
def test_pool_size_lets_more_threads_hold_a_transaction_at_once(pg_url, monkeypatch, given):
    """``FactStore(pool_size=6)`` (or ``$CTXSLOTS_POOL_SIZE=6``): six threads each inside a
    batch at once, on six server connections (the default pool holds four)."""
    import threading

    import psycopg

    if given == "variable":
        monkeypatch.setenv("CTXSLOTS_POOL_SIZE", "6")
    inside = threading.Barrier(7)
    done = threading.Barrier(7)
    errors: list[BaseException] = []
    options = {"pool_size": 6} if given == "argument" else {}
    with FactStore(pg_url, **options) as store:
        def write(n: int) -> None:
            try:
                with store.batch():
                    # one user each: adding memories of one slot and owners takes turns
                    store.add("user", f"Fact {n} written inside a batch.", user=f"u{n}")
                    inside.wait(120)  # a bound for a broken run only: each waits for the rest
                    done.wait(120)
            except BaseException as exc:  # reported below
                errors.append(exc)
                inside.abort()
                done.abort()

        threads = [threading.Thread(target=write, args=(n,)) for n in range(6)]
        for thread in threads:
            thread.start()
        inside.wait(120)
        with psycopg.connect(pg_url) as conn:
            open_now = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                                    "current_database() AND pid <> pg_backend_pid() "
                                    "AND state = 'idle in transaction'").fetchone()[0]
        done.wait(120)
        for thread in threads:
            thread.join()
        assert [] == errors
        assert open_now == 6
        assert 6 == len(store.facts(slots=["user"], user=ANY))


def test_a_pool_size_out_of_range_is_refused(pg_url, db_path, monkeypatch):
    """A pool of no connection, a fraction or a word is refused in one line, on either
    engine for the argument (a SQLite store has one connection and takes any valid size)."""
    from ctxslots import InvalidArgumentError

    for bad in (0, 1001, 2.5, True, "8"):
        for location in (pg_url, str(db_path)):
            with pytest.raises(InvalidArgumentError, match="pool_size must be a whole number "
                                                           "from 1 to 1000"):
                FactStore(location, pool_size=bad)
    FactStore(str(db_path), pool_size=8).close()
    monkeypatch.setenv("CTXSLOTS_POOL_SIZE", "lots")
    with pytest.raises(StoreError, match="CTXSLOTS_POOL_SIZE must be a whole number from 1 to "
                                         "1000, not 'lots'"):
        FactStore(pg_url)


def test_a_standby_with_hot_standby_off_is_not_said_to_come_up(server):
    """A standby whose ``hot_standby`` is off refuses every session for as long as it is a
    standby: the message says what it is and to point the URL at the primary, not to try
    again once it is up."""
    import shutil

    primary = conninfo_to_dict(server.url)
    folder = Path(tempfile.mkdtemp(prefix="ctxslots-pg-standby-"))
    user = server.handle.system_user
    if user is not None:
        shutil.chown(folder, user)
    data = folder / "data"
    pgserver.pg_basebackup(["-h", primary["host"], "-U", primary["user"], "-D", str(data),
                            "-R"], user=user, timeout=120)
    with (data / "postgresql.conf").open("a") as conf:
        conf.write("\nhot_standby = off\n")
    pgserver.pg_ctl(["-w", "-o", '-h ""', "-o", f"-k {folder}", "-l", str(folder / "log"),
                     "start"], pgdata=data, user=user, timeout=120)
    url = f"postgresql://{primary['user']}@/{primary['dbname']}?host={folder}"
    try:
        with pytest.raises(StoreError) as info:
            FactStore(url, create=False)
    finally:
        pgserver.pg_ctl(["-w", "-m", "immediate", "stop"], pgdata=data, user=user, timeout=120)
        shutil.rmtree(folder, ignore_errors=True)
    message = str(info.value)
    assert message == (f"the PostgreSQL server at {info.value.path} is a standby that takes "
                       "no connections while it replays (its hot_standby is off): point the "
                       "URL at the primary, or turn hot_standby on")
