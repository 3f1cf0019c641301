"""Reading each message once, the flush policy, aflush and the transaction boundary."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest

from ctxslots import (
    FactStore,
    FlushError,
    FlushPolicy,
    FlushReport,
    Limits,
    MemoryFlusher,
    Message,
    OpenAIChatClient,
    StoreClosedError,
)
from ctxslots.flusher import ChatResult
from ctxslots.stores import BUILTIN_SLOTS
from ctxslots.testing import ScriptedChatServer, ScriptedReply

MESSAGES = [
    {"role": "user", "content": "My name is Grace Hopper."},
    {"role": "assistant", "content": "Nice to meet you, Grace."},
]
MORE = MESSAGES + [
    {"role": "user", "content": "I write COBOL at the Navy lab."},
    {"role": "assistant", "content": "Understood."},
]


def reply(*operations: dict) -> ScriptedReply:
    return ScriptedReply(json.dumps({"operations": list(operations)}))


def upsert(key: str, value: str, slot: str = "user") -> dict:
    return {"op": "upsert", "slot": slot, "key": key, "value": value, "confidence": 1.0, "tags": []}


def facts(store) -> list[tuple]:
    return [(f.slot, f.key, f.value) for f in store.facts()]


@pytest.fixture(name="chat")
def fixture_chat(store):
    """Start a scripted server; return ``(server, flusher)`` for a script."""
    servers = []

    def make(script, *, on=None, **options):
        server = ScriptedChatServer(script)
        servers.append(server)
        client = OpenAIChatClient(server.base_url, "scripted", max_retries=0, timeout=5)
        return server, MemoryFlusher(on or store, client, **options)

    yield make
    for server in servers:
        server.close()


def prompt_of(request) -> str:
    return request["messages"][0]["content"]


def test_same_messages_twice_call_no_model_and_change_nothing(chat, store):
    """A second flush of the same messages reports nothing new without a request."""
    server, flusher = chat([reply(upsert("name", "The user is Grace Hopper."))])
    flusher.flush(MESSAGES, conversation="c", force=True)
    before = facts(store)

    again = flusher.flush(MESSAGES, conversation="c", force=True)

    assert ("nothing_new", 0) == (again.status, again.attempts)
    assert 1 == len(server.requests)
    assert before == facts(store)
    assert 2 == flusher.messages_read("c")


def test_only_new_messages_are_sent(chat, store):
    """After more messages arrive, the next flush sends only those and records their span."""
    server, flusher = chat([reply(upsert("name", "The user is Grace Hopper.")),
                            reply(upsert("language", "Grace Hopper writes COBOL."))])
    flusher.flush(MESSAGES, conversation="c", force=True)

    report = flusher.flush(MORE, conversation="c", force=True)

    prompt = prompt_of(server.requests[1])
    assert "I write COBOL at the Navy lab." in prompt
    assert "My name is Grace Hopper." not in prompt
    assert "## Message 3 (user)" in prompt
    assert (3, 4, False) == (report.first, report.last, report.restarted)
    assert report.source.endswith("conv:c msgs:3-4")
    assert "The user is Grace Hopper." in prompt  # the known fact from the first flush


def test_a_conversation_kept_as_dicts_keeps_its_ids_and_is_not_read_again(chat, store):
    """Messages saved with to_dict() and read back with from_dict() are the same messages:
    the next flush sends only the new one."""
    server, flusher = chat([reply(), reply()])
    history = [Message("user", "My name is Grace Hopper.", id="m1"),
               Message("assistant", "Hello Grace.", id="m2")]
    flusher.flush(history, conversation="c", force=True)
    kept = json.loads(json.dumps([m.to_dict() for m in history]))
    reloaded = [Message.from_dict(d) for d in kept]

    report = flusher.flush([*reloaded, Message("user", "I write COBOL.", id="m3")],
                           conversation="c", force=True)

    assert history == reloaded
    assert (False, 3, 3) == (report.restarted, report.first, report.last)
    assert "My name is Grace Hopper." not in prompt_of(server.requests[1])
    assert all(set(m) == {"role", "content"} for m in server.requests[1]["messages"])


def test_changed_history_is_reported_and_read_again(chat, store):
    """When messages read before changed, the report says so and the flush starts over."""
    server, flusher = chat([reply(), reply()])
    flusher.flush(MORE, conversation="c", force=True)
    edited = [MORE[0], {"role": "assistant", "content": "Edited."}] + MORE[2:]

    report = flusher.flush(edited, conversation="c", force=True)

    assert report.restarted
    assert "changed since they were read" in report.warnings[0]
    assert report.warnings[0].endswith("reading the conversation again from the start")
    assert (1, 4) == (report.first, report.last)
    assert "## Message 1 (user)" in prompt_of(server.requests[1])


def test_a_changed_history_not_read_yet_says_the_next_flush_reads_it(chat, store):
    """A flush that finds the history changed but is not due, or finds no messages at
    all, reads nothing: it says the next flush that reads starts again (not that it is
    reading), asks no model, and the progress recorded stays."""
    server, flusher = chat([reply()], policy=FlushPolicy(every_n_turns=50, token_threshold=None))
    flusher.flush(MORE, conversation="c", force=True)
    edited = [MORE[0], {"role": "assistant", "content": "Edited."}] + MORE[2:]

    waiting = flusher.flush(edited, conversation="c")
    emptied = flusher.flush([], conversation="c")

    assert ("not_due", True) == (waiting.status, waiting.restarted)
    assert waiting.warnings[0].endswith(
        "the next flush that reads it starts again from the first message")
    assert ("nothing_new", True, "no messages to read") == (
        emptied.status, emptied.restarted, emptied.detail)
    assert "the next flush that reads it" in emptied.warnings[0]
    assert 1 == len(server.requests)
    assert 4 == flusher.messages_read("c")


def test_shorter_conversation_is_read_again(chat, store):
    """A conversation with fewer messages than were read restarts, saying why."""
    _, flusher = chat([reply(), reply()])
    flusher.flush(MORE, conversation="c", force=True)

    report = flusher.flush(MESSAGES, conversation="c", force=True)

    assert report.restarted and "fewer than the 4 read" in report.warnings[0]
    assert 2 == flusher.messages_read("c")


def test_conversations_are_tracked_apart(chat, store):
    """Progress is per conversation id."""
    server, flusher = chat([reply(), reply()])
    flusher.flush(MESSAGES, conversation="a", force=True)

    report = flusher.flush(MESSAGES, conversation="b", force=True)

    assert ("applied", 2) == (report.status, len(server.requests))


def test_message_ids_name_the_source(chat, store):
    """Messages with ids are recorded by id in each fact's source."""
    _, flusher = chat([reply(upsert("name", "The user is Grace Hopper."))])
    msgs = [Message("user", "My name is Grace Hopper.", id="m-17"),
            Message("assistant", "Hello Grace.", id="m-18")]

    report = flusher.flush(msgs, conversation="c", force=True)

    assert store.get_by_key("user", "name").source == f"flush:{report.flush_id} conv:c msgs:m-17-m-18"


def test_policy_not_due_sends_nothing(chat, store):
    """Without force, a flush before the policy's threshold changes nothing and says why."""
    server, flusher = chat([reply()], policy=FlushPolicy(every_n_turns=2, token_threshold=None))

    report = flusher.flush(MESSAGES, conversation="c")

    assert "not_due" == report.status
    assert "1 of 2 turns" in report.detail
    assert [] == server.requests
    assert 0 == flusher.messages_read("c")
    assert flusher.should_flush(MORE, conversation="c")
    assert "applied" == flusher.flush(MORE, conversation="c").status


def test_token_threshold_makes_a_flush_due():
    """Long unflushed text is due even in few turns; thresholds of None are off."""
    policy = FlushPolicy(every_n_turns=None, token_threshold=50)
    short = [Message("user", "Hi.")]
    long = [Message("user", "word " * 60)]

    assert not policy.should_flush(short)
    assert policy.should_flush(long)
    assert not FlushPolicy(every_n_turns=None, token_threshold=None).should_flush(long)
    assert not policy.should_flush([])
    assert "every threshold is off" == FlushPolicy(None, None).explain(long)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "3"])
def test_policy_rejects_bad_thresholds(bad):
    """Thresholds must be positive integers or None."""
    with pytest.raises(ValueError):
        FlushPolicy(every_n_turns=bad)


def test_aflush_runs_in_an_event_loop(chat, store):
    """aflush gives the same report as flush, from async code."""
    _, flusher = chat([reply(upsert("name", "The user is Grace Hopper."))])

    report = asyncio.run(flusher.aflush(MESSAGES, conversation="c", force=True))

    assert ["name"] == [c.fact.key for c in report.added]


def test_known_facts_are_capped_and_not_counted_as_accessed(chat, store):
    """At most max_known_facts are shown, numbered 1..N, and their access counts stay."""
    for i in range(30):
        store.upsert("user", f"fact.{i}", f"Grace Hopper fact number {i}.")
    server, flusher = chat([reply()], max_known_facts=12)

    report = flusher.flush(MESSAGES, conversation="c", force=True)

    assert list(range(1, 13)) == sorted(report.known_facts)
    assert "[12] user / fact." in prompt_of(server.requests[0])
    assert "[13]" not in prompt_of(server.requests[0])
    assert all(f.access_count == 0 for f in store.facts())


def test_failing_callback_rolls_back_everything(chat, store):
    """An error while applying rolls back every operation and the progress."""
    def stop(index, op):
        if index == 1:
            raise RuntimeError("disk on fire")

    _, flusher = chat([reply(upsert("a", "First."), upsert("b", "Second."))], on_operation=stop)

    with pytest.raises(FlushError, match="disk on fire") as info:
        flusher.flush(MESSAGES, conversation="c", force=True)

    assert [] == store.facts()
    assert 0 == flusher.messages_read("c")
    assert ("failed", "store") == (info.value.report.status, info.value.reason)


def test_a_store_closed_while_the_model_answers_fails_the_flush_saying_so(location):
    """A host closing the store while a flush waits for the model (shutting down) gets a
    FlushError whose reason says the store was closed, with the store's own error as its
    cause: a web handler can answer 503 rather than parse the message."""
    store = FactStore(location)

    class Closing:
        def complete(self, messages, *, json_schema=None, temperature=0.0):
            store.close()
            return ChatResult(text=json.dumps({"operations": [upsert("x", "Lost.")]}))

    with pytest.raises(FlushError) as info:
        MemoryFlusher(store, Closing()).flush(MESSAGES, conversation="c", force=True)

    assert "store_closed" == info.value.reason
    assert isinstance(info.value.__cause__, StoreClosedError)
    with FactStore(location) as reopened:
        assert [] == reopened.facts()
        assert reopened.flush_progress("c") is None


def test_a_flush_that_lost_the_race_changes_nothing(store):
    """When another flush of the conversation commits first, this one fails without writing."""
    other = MemoryFlusher(store, _Fixed("{\"operations\": []}"))

    class Racing:
        def complete(self, messages, *, json_schema=None, temperature=0.0):
            other.flush(MESSAGES, conversation="c", force=True)
            return ChatResult(text=json.dumps({"operations": [upsert("x", "Lost.")]}))

    flusher = MemoryFlusher(store, Racing())

    with pytest.raises(FlushError, match="finished first") as info:
        flusher.flush(MESSAGES, conversation="c", force=True)
    assert "conflict" == info.value.reason

    assert [] == store.facts()
    assert 2 == flusher.messages_read("c")


class _Fixed:
    """A client that always returns the same text."""

    def __init__(self, content: str) -> None:
        self.content = content

    def complete(self, messages, *, json_schema=None, temperature=0.0):
        return ChatResult(text=self.content)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"messages": "hello"}, "messages"),
        ({"messages": [42]}, "messages"),
        ({"conversation": ""}, "conversation"),
        ({"conversation": "x" * 201}, "conversation"),
        ({"scope": ""}, "scope"),
    ],
)
def test_malformed_arguments_raise_value_errors(store, kwargs, field):
    """Bad messages, conversation ids or scopes raise ValueError naming the field."""
    flusher = MemoryFlusher(store, _Fixed("{}"))
    args = {"messages": MESSAGES, "conversation": "c", **kwargs}

    with pytest.raises(ValueError) as info:
        flusher.flush(args.pop("messages"), force=True, **args)

    assert field == info.value.field


def test_configured_slots_are_the_only_writable_ones(chat, store, tmp_path, clock):
    """A plugin's slot can be written when configured; slots left out are rejected."""
    team_store = FactStore(tmp_path / "team.db", clock=clock,
                           limits=Limits(slots=(*BUILTIN_SLOTS, "team")))
    server, flusher = chat(
        [reply(upsert("oncall", "Grace Hopper is on call this week.", slot="team"),
               upsert("lesson", "Ask before paging.", slot="agent"))],
        on=team_store,
        slots={"user": "who the user is.", "team": "facts about the user's team."},
    )

    report = flusher.flush(MESSAGES, conversation="c", force=True)

    assert ["oncall"] == [c.fact.key for c in report.added]
    assert ("slot 'agent' is not one of this flush's slots (user, team); give the flusher the "
            "slots it may write: MemoryFlusher(slots=...), ctxslots flush --slot"
            ) == report.rejected[0].reason
    assert "- team: facts about the user's team." in prompt_of(server.requests[0])
    assert ["user", "project"] == list(MemoryFlusher(store, _Fixed("{}"), slots=["user", "project"]).slots)


def _waits_on_a_lock(location: str) -> bool:
    """Whether some session of the PostgreSQL database waits for an advisory lock."""
    import psycopg

    with psycopg.connect(location, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                           "AND NOT granted").fetchone()
        return bool(row and row[0])


def test_two_flushers_of_one_conversation_on_two_stores_apply_once(location):
    """Two processes' flushers (two stores on one file or database) flush one conversation
    at once: the one that commits second fails and changes nothing, on both engines. On
    PostgreSQL no progress row exists to lock yet: the second waits for the first all
    the same, then reads what it wrote."""
    import threading

    entered, release = threading.Event(), threading.Event()

    def hold(index: int, op: object) -> None:
        entered.set()
        assert release.wait(120), "the test never let the first flush go on"

    with ScriptedChatServer([reply(upsert("from.a", "Written by the first flush.")),
                             reply(upsert("from.b", "Written by the second flush."))]) as server, \
            FactStore(location) as first_store, FactStore(location) as second_store:
        def client() -> OpenAIChatClient:
            return OpenAIChatClient(server.base_url, "scripted", max_retries=0, timeout=60)

        first = MemoryFlusher(first_store, client(), on_operation=hold)
        second = MemoryFlusher(second_store, client())
        outcome: dict[str, object] = {}

        def run(name: str, flusher: MemoryFlusher) -> None:
            try:
                outcome[name] = flusher.flush(MESSAGES, conversation="c", force=True).status
            except FlushError as exc:
                outcome[name] = str(exc)

        one = threading.Thread(target=run, args=("first", first))
        one.start()
        assert entered.wait(120)  # inside its transaction, its operation not yet written
        two = threading.Thread(target=run, args=("second", second))
        two.start()
        assert server.wait_answered(2)
        if not location.startswith("postgresql"):
            release.set()  # SQLite's write lock holds the second until the first commits
        while not release.is_set():  # the second waits for the conversation, or is done
            two.join(0.05)
            if not two.is_alive() or _waits_on_a_lock(location):
                release.set()
        one.join(120)
        two.join(120)
        assert not one.is_alive() and not two.is_alive()
    assert "applied" == outcome["first"]
    assert "finished first" in str(outcome["second"])
    with FactStore(location) as store:
        assert ["from.a"] == [f.key for f in store.facts()]
        assert 2 == MemoryFlusher(store, client()).messages_read("c")


def _flushing(flusher: MemoryFlusher, messages: list[dict[str, str]], done: list[Any],
              failed: list[Any]) -> threading.Thread:
    """A started thread flushing ``messages`` of grace's conversation "c": its report goes to
    ``done`` and a FlushError to ``failed`` (the same list may take both)."""
    def flush() -> None:
        try:
            done.append(flusher.flush(messages, conversation="c", user="grace", force=True))
        except FlushError as exc:
            failed.append(exc)

    thread = threading.Thread(target=flush)
    thread.start()
    return thread


class _Gate:
    """A scripted answer's gate: ``arrived`` is set once the request is in, and the answer
    waits for ``go``."""

    def __init__(self) -> None:
        import threading

        self.arrived, self.go = threading.Event(), threading.Event()

    def wait(self) -> None:
        self.arrived.set()
        assert self.go.wait(120), "the test never let the answer go"


def test_a_flush_whose_user_is_erased_meanwhile_says_so_and_writes_nothing(location):
    """Another store erases the user while a later flush of their conversation waits for
    the model: the flush fails saying the conversation's progress was erased, not that
    another flush finished first (flushing again would write the erased memory back)."""

    gate = _Gate()
    second = reply(upsert("job", "The user writes COBOL at the Navy lab."))
    with ScriptedChatServer([reply(upsert("name", "The user is Grace Hopper.")),
                             ScriptedReply(second.content, gate=gate)]) as server, \
            FactStore(location) as store, FactStore(location) as other:
        client = OpenAIChatClient(server.base_url, "scripted", max_retries=0, timeout=60)
        flusher = MemoryFlusher(store, client)
        flusher.flush(MESSAGES, conversation="c", user="grace", force=True)
        failed: list[FlushError] = []
        thread = _flushing(flusher, MORE, [], failed)
        assert gate.arrived.wait(120)
        assert 1 == other.erase(user="grace").progress
        gate.go.set()
        thread.join(120)
        assert not thread.is_alive() and len(failed) == 1
        message = str(failed[0])
        assert "progress of 'c' was erased meanwhile" in message
        assert "finished first" not in message and "flush again" not in message
        assert "erased" == failed[0].reason
        assert [] == store.facts(user="grace")
        assert store.flush_progress("c", user="grace") is None


@pytest.mark.parametrize("erase", ["user", "reset"])
def test_a_first_flush_in_flight_writes_nothing_after_an_owner_is_erased(location, erase):
    """A conversation's first flush has no progress for an erasure to remove: another store
    erases the user (or everything) while it waits for the model, and the flush fails
    saying so and writes nothing, instead of writing the erased user's memory back. A
    fact deleted on its own meanwhile is no owner's erasure: a first flush still lands."""

    gate, later = _Gate(), _Gate()
    answer = reply(upsert("name", "The user is Grace Hopper."))
    with ScriptedChatServer([ScriptedReply(answer.content, gate=gate),
                             ScriptedReply(answer.content, gate=later)]) as server, \
            FactStore(location) as store, FactStore(location) as other:
        client = OpenAIChatClient(server.base_url, "scripted", max_retries=0, timeout=60)
        flusher = MemoryFlusher(store, client)
        failed: list[FlushError] = []
        reports: list[FlushReport] = []
        thread = _flushing(flusher, MESSAGES, reports, failed)
        assert gate.arrived.wait(120)
        before = other.owner_erasures()
        if erase == "user":
            other.erase(user="grace")
        else:
            other.reset()
        assert before + 1 == other.owner_erasures() == store.owner_erasures()
        gate.go.set()
        thread.join(120)
        assert not thread.is_alive() and len(failed) == 1
        message = str(failed[0])
        assert "erased while this first flush of 'c' waited for the model" in message
        assert ("failed", "erased") == (failed[0].report.status, failed[0].reason)
        assert [] == store.facts(user="grace")
        assert store.flush_progress("c", user="grace") is None
        # A single fact deleted while the next first flush waits is no owner's erasure.
        kept = other.add("user", "The user likes tea.", user="ada")
        thread = _flushing(flusher, MESSAGES, reports, failed)
        assert later.arrived.wait(120)
        other.delete(kept.id)
        later.go.set()
        thread.join(120)
        assert not thread.is_alive() and len(failed) == 1 and len(reports) == 1
        assert "applied" == reports[0].status
        assert ["The user is Grace Hopper."] == [f.value for f in store.facts(user="grace")]


@pytest.mark.parametrize("erase", [{"user": "alan"}, {"agent": "reviewer"},
                                   {"scope": "other-shop"}])
def test_a_first_flush_in_flight_lands_when_another_owner_is_erased(location, erase):
    """In a store serving many users, erasing another user (another agent, another
    workspace) while a user's first flush waits for the model is none of that flush's:
    it lands, where it failed as if its own user had been erased."""
    from ctxslots.stores.writes.erasure import owner_counter

    (kind, name), = erase.items()
    ours = {"user": "grace", "agent": "default", "scope": "shop"}[kind]
    assert owner_counter(kind, name) != owner_counter(kind, ours)
    gate = _Gate()
    answer = reply(upsert("name", "The user is Grace Hopper."),
                   upsert("deploy.day", "Deploys run on Fridays.", slot="project"))
    with ScriptedChatServer([ScriptedReply(answer.content, gate=gate)]) as server, \
            FactStore(location) as store, FactStore(location) as other:
        other.add("user", "Alan likes tea.", user="alan")
        other.add("agent", "Review the diff first.", agent="reviewer")
        other.upsert("project", "owner", "Alan owns the other shop.", scope="other-shop")
        client = OpenAIChatClient(server.base_url, "scripted", max_retries=0, timeout=60)
        flusher = MemoryFlusher(store, client)
        done: list[Any] = []

        def flush() -> None:
            try:
                done.append(flusher.flush(MESSAGES, conversation="c", user="grace",
                                          scope="shop", force=True).status)
            except FlushError as exc:
                done.append(str(exc))

        thread = threading.Thread(target=flush)
        thread.start()
        assert gate.arrived.wait(120)
        assert 1 == other.erase(**erase).facts
        gate.go.set()
        thread.join(120)
        assert not thread.is_alive()
        assert ["applied"] == done
        assert ["The user is Grace Hopper."] == [f.value for f in store.facts(user="grace")]
        assert ["Deploys run on Fridays."] == [f.value for f in store.facts(scope="shop")
                                               if f.slot == "project"]


def test_an_erasure_waits_for_a_first_flush_committing_and_erases_what_it_wrote(pg_url):
    """PostgreSQL: a user's erasure that begins while her first flush is inside its write
    transaction (past its check of the erasure count) waits for that flush to commit, then
    erases what it wrote: counting the erasure first reserves the count the flush holds."""
    import threading

    import psycopg

    inside, proceed = threading.Event(), threading.Event()

    def on_operation(_index: int, _operation: object) -> None:
        if not inside.is_set():
            inside.set()
            assert proceed.wait(120), "the test never let the flush go on"

    answer = reply(upsert("name", "The user is Grace Hopper."))
    with ScriptedChatServer([answer]) as server, FactStore(pg_url) as store, \
            FactStore(pg_url) as other, psycopg.connect(pg_url, autocommit=True) as watch:
        client = OpenAIChatClient(server.base_url, "scripted", max_retries=0, timeout=60)
        flusher = MemoryFlusher(store, client, on_operation=on_operation)
        reports: list[FlushReport] = []
        flushing = threading.Thread(target=lambda: reports.append(flusher.flush(
            MESSAGES, conversation="c", user="grace", force=True)))
        flushing.start()
        assert inside.wait(120)
        erasing = threading.Thread(target=lambda: other.erase(user="grace"))
        erasing.start()
        # The erasure is waiting for the flush's reservation: a session waiting on a lock.
        while not watch.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                                "current_database() AND wait_event_type = 'Lock'"
                                ).fetchone()[0]:
            assert erasing.is_alive()
            watch.execute("SELECT pg_sleep(0.01)")
        proceed.set()
        flushing.join(120)
        erasing.join(120)
        assert not flushing.is_alive() and not erasing.is_alive()
        assert "applied" == reports[0].status
        assert [] == store.facts(user="grace")
        assert 1 == store.owner_erasures()


def test_an_erasure_that_began_before_a_first_flush_commits_leaves_nothing_on_postgresql(
        pg_url):
    """PostgreSQL runs an erasure and a first flush side by side: an erasure that deleted
    the user's facts before the flush committed, but counted itself after, let the flush
    write the user's memory back. The erasure counts itself before it deletes, so the
    flush either commits first (and its facts are erased) or sees the count move."""
    import threading
    import time

    import psycopg

    from ctxslots.stores.postgres._schema import NAME_LOCK_CLASS
    from ctxslots.stores.writes.erasure import owner_counter

    def waiting(watch: psycopg.Connection, n: int) -> bool:
        """Whether ``n`` sessions wait for an advisory lock (within two minutes)."""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            found = watch.execute("SELECT count(*) FROM pg_stat_activity WHERE "
                                  "wait_event_type = 'Lock' AND wait_event = 'advisory'"
                                  ).fetchone()
            if found is not None and found[0] >= n:
                return True
        return False

    gate = _Gate()
    answer = reply(upsert("name", "The user is Grace Hopper."))
    with ScriptedChatServer([ScriptedReply(answer.content, gate=gate)]) as server, \
            FactStore(pg_url) as store, FactStore(pg_url) as other, \
            psycopg.connect(pg_url, autocommit=True) as watch, \
            psycopg.connect(pg_url) as holder:
        other.add("user", "The user likes tea.", user="grace")
        flusher = MemoryFlusher(store, OpenAIChatClient(server.base_url, "scripted",
                                                        max_retries=0, timeout=60))
        outcome: list[FlushReport | FlushError] = []
        flushing = _flushing(flusher, MESSAGES, outcome, outcome)
        assert gate.arrived.wait(120)
        # The user's count's lock is held elsewhere: the flush's check waits for it first...
        holder.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))",
                       (NAME_LOCK_CLASS, "meta\x1f" + owner_counter("user", "grace")))
        gate.go.set()
        assert waiting(watch, 1)
        # ...then the erasure, which gets it after the flush.
        erasing = threading.Thread(target=lambda: other.erase(user="grace"))
        erasing.start()
        assert waiting(watch, 2)
        holder.rollback()
        flushing.join(120)
        erasing.join(120)
        assert not flushing.is_alive() and not erasing.is_alive() and len(outcome) == 1
        assert [] == store.facts(user="grace") == other.facts(user="grace")


def test_an_erasure_that_began_before_a_later_flush_commits_leaves_nothing_on_postgresql(pg_url):
    """PostgreSQL: an erasure deleted the user's facts, then waited to delete her progress
    (its row held elsewhere); a later flush of her conversation read the progress still
    there, wrote her new memory and committed after the erasure. The flush now waits for
    an erasure under way before it reads its progress, and finds it erased."""
    import threading
    import time

    import psycopg

    def waiting(watch: psycopg.Connection, n: int) -> bool:
        """Whether ``n`` sessions wait for a lock (within two minutes)."""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            found = watch.execute("SELECT count(*) FROM pg_stat_activity WHERE "
                                  "wait_event_type = 'Lock'").fetchone()
            if found is not None and found[0] >= n:
                return True
        return False

    gate = _Gate()
    first = reply(upsert("name", "The user is Grace Hopper."))
    later = reply(upsert("job", "The user writes COBOL at the Navy lab."))
    with ScriptedChatServer([first, ScriptedReply(later.content, gate=gate)]) as server, \
            FactStore(pg_url) as store, FactStore(pg_url) as other, \
            psycopg.connect(pg_url, autocommit=True) as watch, \
            psycopg.connect(pg_url) as holder:
        flusher = MemoryFlusher(store, OpenAIChatClient(server.base_url, "scripted",
                                                        max_retries=0, timeout=60))
        assert "applied" == flusher.flush(MESSAGES, conversation="c", user="grace",
                                          force=True).status
        outcome: list[FlushReport | FlushError] = []
        flushing = _flushing(flusher, MORE, outcome, outcome)
        assert gate.arrived.wait(120)
        # The progress row is held elsewhere: the erasure deletes the facts, then waits...
        holder.execute("SELECT 1 FROM flush_progress WHERE user_id = 'grace' FOR UPDATE")
        erasing = threading.Thread(target=lambda: other.erase(user="grace"))
        erasing.start()
        assert waiting(watch, 1)
        # ...and the flush, let go, reaches the lock after it.
        gate.go.set()
        assert waiting(watch, 2)
        holder.rollback()
        flushing.join(120)
        erasing.join(120)
        assert not flushing.is_alive() and not erasing.is_alive() and len(outcome) == 1
        assert isinstance(outcome[0], FlushError)
        assert "was erased meanwhile" in str(outcome[0])
        assert [] == store.facts(user="grace") == other.facts(user="grace")
        assert store.flush_progress("c", user="grace") is None
