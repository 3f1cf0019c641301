"""MemoryFlusher with owners: each user's conversation writes that user's facts, shows
the model only what that user sees, and keeps its own read position."""

from __future__ import annotations

import io
import json

import pytest

from ctxslots import ANY, InvalidArgumentError, InvalidFactError, MemoryFlusher, OpenAIChatClient
from ctxslots.testing import ScriptedChatServer, ScriptedReply

TALK = [{"role": "user", "content": "I moved to Lisbon and the shop now deploys on Mondays."}]


def _reply(*operations: dict) -> ScriptedReply:
    return ScriptedReply(json.dumps({"operations": list(operations)}))


def _upsert(slot: str, key: str, value: str) -> dict:
    return {"op": "upsert", "slot": slot, "key": key, "value": value, "confidence": 0.9,
            "tags": []}


@pytest.fixture(name="flusher_for")
def fixture_flusher_for(store):
    """``flusher_for(script)``: a flusher on ``store`` whose model answers ``script``."""
    servers: list[ScriptedChatServer] = []

    def make(script: list[ScriptedReply], **options: object):
        server = ScriptedChatServer(script)
        servers.append(server)
        client = OpenAIChatClient(server.base_url, "scripted", max_retries=0, timeout=30)
        return server, MemoryFlusher(store, client, **options)

    yield make
    for server in servers:
        server.close()


def test_each_users_flush_writes_their_own_facts(store, flusher_for):
    store.upsert("user", "city", "Bob lives in Porto.", user="bob")
    store.upsert("user", "city", "Alice lives in Berlin.", user="alice")
    server, flusher = flusher_for([_reply(
        _upsert("user", "city", "Alice lives in Lisbon."),
        _upsert("project", "deploy.day", "The shop deploys on Mondays."),
        _upsert("agent", "greeting", "Greet Alice in Portuguese."))])
    report = flusher.flush(TALK, conversation="c1", scope="shop", user="alice",
                           agent="concierge", force=True)
    assert report.status == "applied" and (report.user, report.agent) == ("alice", "concierge")
    assert [c.kind for c in report.updated] == ["updated"]
    assert store.get_by_key("user", "city", user="alice").value == "Alice lives in Lisbon."
    assert store.get_by_key("user", "city", user="bob").value == "Bob lives in Porto."
    project = store.get_by_key("project", "deploy.day", scope="shop")
    assert (project.user, project.agent) == (None, None)
    lesson = store.get_by_key("agent", "greeting", agent="concierge")
    assert (lesson.agent, lesson.scope) == ("concierge", None)
    prompt = server.requests[0]["messages"][0]["content"]
    assert "Alice lives in Berlin." in prompt and "Bob lives in Porto." not in prompt


def test_a_shared_fact_keeps_none_of_the_users_words_and_erasure_leaves_none(
        store, flusher_for):
    """A flush for alice writes her fact with its context and conversation, and a
    workspace fact with neither (a fact others share keeps nothing of what she said);
    erasing alice then leaves no word of hers and no name of her conversation."""
    server, flusher = flusher_for([_reply(
        {**_upsert("user", "city", "Alice lives in Lisbon."), "messages": [1]},
        {**_upsert("project", "deploy.day", "The shop deploys on Mondays."), "messages": [1]})])
    report = flusher.flush(TALK, conversation="chat-of-alice", scope="shop", user="alice",
                           force=True)
    assert report.status == "applied"
    own = store.get_by_key("user", "city", user="alice")
    assert "I moved to Lisbon" in own.context and "conv:chat-of-alice" in own.source
    shared = store.get_by_key("project", "deploy.day", scope="shop")
    assert shared.context is None
    assert shared.source.startswith(f"flush:{report.flush_id} ") and "chat-of-alice" not in \
        shared.source
    store.erase(user="alice")
    left = [(f.value, f.context, f.source) for f in store.facts(user=ANY, scope=ANY)]
    assert left == [("The shop deploys on Mondays.", None, shared.source)]


def test_a_shared_fact_keeps_no_id_of_the_users_messages(store, flusher_for):
    """Message ids (a chat's, which may name the user or lead back to her messages) go
    into the source of her own facts; a fact others share counts the messages by position,
    so erasing her leaves none of her ids behind."""
    talk = [{**TALK[0], "id": "alice-msg-0041"},
            {"role": "assistant", "content": "Noted.", "id": "alice-msg-0042"}]
    _, flusher = flusher_for([_reply(
        _upsert("user", "city", "Alice lives in Lisbon."),
        _upsert("project", "deploy.day", "The shop deploys on Mondays."),
        _upsert("agent", "greeting", "Greet in Portuguese."),
        {"op": "forget", "slot": "project", "key": "deploy.old", "reason": "moved on"})])
    old = store.upsert("project", "deploy.old", "The shop deploys on Fridays.", scope="shop")
    report = flusher.flush(talk, conversation="chat-of-alice", scope="shop", user="alice",
                           agent="concierge", force=True)
    assert report.status == "applied"
    own = store.get_by_key("user", "city", user="alice")
    assert own.source.endswith("msgs:alice-msg-0041-alice-msg-0042")
    shared = [store.get_by_key("project", "deploy.day", scope="shop"),
              store.get_by_key("agent", "greeting", agent="concierge")]
    assert [f.source for f in shared] == [f"flush:{report.flush_id} msgs:1-2"] * 2
    store.erase(user="alice")
    out = io.StringIO()
    store.export_jsonl(out)
    assert "alice" not in out.getvalue()
    assert store.get(old.id, include_archive=True).archived


def test_read_positions_are_kept_per_user(store, flusher_for):
    _, flusher = flusher_for([_reply(_upsert("user", "city", "Alice lives in Lisbon.")),
                              _reply(_upsert("user", "city", "Bob lives in Lisbon."))])
    flusher.flush(TALK, conversation="c1", user="alice", force=True)
    assert flusher.messages_read("c1", user="alice") == 1
    assert flusher.messages_read("c1", user="bob") == 0
    assert flusher.unflushed(TALK, conversation="c1", user="bob") != []
    again = flusher.flush(TALK, conversation="c1", user="alice", force=True)
    assert again.status == "nothing_new"
    bobs = flusher.flush(TALK, conversation="c1", user="bob", force=True)
    assert bobs.status == "applied"
    assert store.get_by_key("user", "city", user="bob").value == "Bob lives in Lisbon."


def test_a_malformed_owner_is_refused_before_the_model_is_called(store, flusher_for):
    server, flusher = flusher_for([_reply()])
    for owners in ({"user": ""}, {"agent": 7}, {"user": "a\nb"}, {"user": ANY},
                   {"agent": ANY}, {"scope": ANY}):
        with pytest.raises(InvalidFactError):
            flusher.flush(TALK, conversation="c1", force=True, **owners)
    assert server.requests == []
    assert [] == store.facts(user=ANY, agent=ANY, scope=ANY)


def test_a_scoped_slot_must_belong_to_a_workspace(store, flusher_for):
    with pytest.raises(InvalidArgumentError, match="user facts do not belong to a workspace"):
        flusher_for([], scoped_slots={"project", "user"})


def test_a_users_flush_prunes_only_what_it_wrote_to(store, clock, flusher_for):
    """Bob is over the user cap; Alice's flush archives none of his facts (his own next
    flush, or a prune of the whole store, does), and her report names none of them."""
    from ctxslots.stores import PrunePolicy

    bob = [store.add("user", f"Bob note number {i}.", user="bob").id for i in range(6)]
    alice = [store.add("user", f"Alice note number {i}.", user="alice").id for i in range(5)]
    clock.advance(days=30)                                # no longer protected as new
    policy = PrunePolicy(slot_caps={"user": 5}, headroom=0.0)
    _, flusher = flusher_for([_reply(_upsert("user", "city", "Alice lives in Lisbon.")),
                              _reply(_upsert("user", "city", "Bob lives in Porto."))],
                             prune=policy)
    report = flusher.flush(TALK, conversation="a", user="alice", force=True)
    assert report.status == "applied"
    assert [f.id for f in store.facts(user="bob", slots=["user"])] == bob
    assert len(report.pruned) == 1 and report.pruned[0] in alice
    report = flusher.flush(TALK, conversation="b", user="bob", force=True)
    assert len(report.pruned) == 2 and set(report.pruned) <= set(bob)
    assert len(store.facts(user="alice", slots=["user"])) == 5


def test_prune_of_some_facts_checks_only_their_slots_and_owners(store, clock):
    from ctxslots.stores import PrunePolicy

    bob = [store.add("user", f"Bob note number {i}.", user="bob").id for i in range(3)]
    alice = store.add("user", "Alice note.", user="alice")
    clock.advance(days=30)
    policy = PrunePolicy(slot_caps={"user": 2}, headroom=0.0)
    assert store.prune(policy, fact_ids=[alice.id], dry_run=True).moved == ()
    assert store.prune(policy, fact_ids=[], dry_run=True).moved == ()
    assert [m.fact.id for m in store.prune(policy, fact_ids=[bob[0]]).moved] == [bob[0]]
    with pytest.raises(InvalidFactError, match="fact id must be an integer"):
        store.prune(policy, fact_ids=["one"])


def test_a_fact_the_model_was_shown_is_the_one_its_slot_and_key_change(store, flusher_for):
    """A flush in workspace shop shows a global project fact and the helper's lesson kept
    for shop (as the agent tools write it). The model changes one and forgets the other
    by slot and key, as the prompt tells it: those facts change, no second copy is
    written under the flush's own owners, and the next prompt holds no contradiction."""
    from ctxslots import AssemblyRequest, PromptAssembler

    day = store.upsert("project", "deploy.day", "Deploys run every Friday.")
    lesson = store.upsert("agent", "billing.tests", "The billing tests are flaky; rerun once.",
                          agent="helper", scope="shop")
    ci = store.upsert("agent", "ci.cache", "The CI cache is cold on Mondays.", agent="helper",
                      scope="shop")
    server, flusher = flusher_for([_reply(
        _upsert("project", "deploy.day", "Deploys run every Thursday."),
        _upsert("agent", "billing.tests", "The billing tests are fixed; no rerun needed."),
        {"op": "forget", "slot": "agent", "key": "ci.cache", "reason": "The cache is warm."})])
    talk = [{"role": "user", "content": "We deploy on Thursdays now, the billing tests are "
                                        "fixed and the CI cache stays warm."}]
    report = flusher.flush(talk, conversation="c1", scope="shop", user="alice",
                           agent="helper", force=True)
    shown = server.requests[0]["messages"][0]["content"]
    assert "Deploys run every Friday." in shown and "rerun once" in shown
    assert {day.id, lesson.id} == {c.fact.id for c in report.updated}
    assert [ci.id] == [c.fact.id for c in report.forgotten]
    assert "Deploys run every Thursday." == store.get(day.id).value
    assert store.get(day.id).scope is None
    assert ("helper", "shop") == (store.get(lesson.id).agent, store.get(lesson.id).scope)
    assert store.get(ci.id) is None
    everything = store.facts(user=ANY, agent=ANY, scope=ANY)
    assert 2 == len(everything)
    prompt = PromptAssembler(store).assemble(AssemblyRequest(
        "when do we deploy, and do the billing tests need a rerun?", scope="shop",
        user="alice", agent="helper")).text
    assert "Friday" not in prompt and "rerun once" not in prompt
    assert "Thursday" in prompt and "no rerun needed" in prompt


def test_the_flushs_own_fact_wins_over_a_shared_one_with_the_same_key(store, flusher_for):
    """Where the workspace and the global scope both hold project/deploy.day, the flush
    changes the workspace's own, and the global one stays."""
    shared = store.upsert("project", "deploy.day", "Deploys run every Friday.")
    own = store.upsert("project", "deploy.day", "The shop deploys every Friday.", scope="shop")
    _, flusher = flusher_for([_reply(
        _upsert("project", "deploy.day", "The shop deploys every Thursday."))])
    report = flusher.flush(TALK, conversation="c1", scope="shop", force=True)
    assert [own.id] == [c.fact.id for c in report.updated]
    assert "Deploys run every Friday." == store.get(shared.id).value


def test_the_flushs_own_fact_wins_even_when_the_shared_one_was_shown_first(store, flusher_for):
    """The model is shown the global project/deploy.day first (it matches the talk) and the
    workspace's own later: its change by slot and key still goes to the workspace's own."""
    shared = store.upsert("project", "deploy.day", "Lisbon deploys moved to Mondays.")
    own = store.upsert("project", "deploy.day", "Releases happen every Friday.", scope="shop")
    server, flusher = flusher_for([_reply(
        _upsert("project", "deploy.day", "The shop deploys every Monday."))])
    report = flusher.flush(TALK, conversation="c1", scope="shop", force=True)
    shown = server.requests[0]["messages"][0]["content"]
    assert shown.index(shared.value) < shown.index(own.value)
    assert [own.id] == [c.fact.id for c in report.updated]
    assert "The shop deploys every Monday." == store.get(own.id).value
    assert "Lisbon deploys moved to Mondays." == store.get(shared.id).value
