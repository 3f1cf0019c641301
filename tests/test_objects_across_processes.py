"""What a store hands back, carried across processes, copies and sets: errors pickle whole,
values hash as they compare, a prompt's repr stays short, a store refuses to pickle
saying what to do, and a chat client used before a fork opens connections of its own."""

from __future__ import annotations

import copy
import multiprocessing
import pickle
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from ctxslots import (
    ANY,
    AssemblyRequest,
    FactStore,
    FlushReport,
    InvalidFactError,
    Limits,
    Message,
    OpenAIChatClient,
    PromptAssembler,
    PrunePolicy,
    RankingPolicy,
    TokenCounter,
    errors,
)
from ctxslots.stores import ImportIssue
from ctxslots.stores.embedders import EmbedderChoice
from ctxslots.testing import ScriptedChatServer, ScriptedReply

#: Seconds a child process is given before it is taken for hung.
HUNG_AFTER = 120

ERRORS = [
    errors.StoreError("the store is gone", path="/tmp/memory.db"),
    errors.StoreBusyError("busy", path="/tmp/memory.db", waited=1.5, holder="process 42"),
    errors.DuplicateKeyError("user", "shop-api", "editor", path="/tmp/memory.db"),
    errors.InvalidFactError("value must be a non-empty string", field="value", value=""),
    errors.InvalidArgumentError("limit must be >= 1", field="limit", value=0),
    errors.InvalidImportError(ImportIssue(line=3, message="not JSON", field="json", value="{")),
    errors.InvalidRequestError("budget must be >= 1", field="budget", value=0),
    errors.EncodingError("unknown encoding", encoding="o300k"),
    errors.PluginError("duplicate name", plugin="mine"),
    errors.FactNotFoundError(12),
    errors.TemplateError("missing", template="item.md.j2"),
    errors.LLMClientError("HTTP 500", status=500, body="oops"),
    errors.ReplyFormatError("no JSON object", raw="{"),
    errors.EmbedderError("HTTP 422", model_id="m", status=422, body="no", refused_input=True),
    errors.EmbedderSpecError("unknown kind", spec="nope:"),
    errors.IntegrationUnavailableError("ctxslots.integrations.langgraph", "langgraph"),
    errors.MemoryUnavailableError("the store is closed", step="assembling the context"),
]


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__)
def test_every_error_pickles_and_copies_with_its_message_and_attributes(error):
    """Errors whose ``__init__`` takes other arguments than their message failed to
    unpickle (``missing 1 required keyword-only argument: 'field'``) and to deepcopy, and
    ``FactNotFoundError`` came back as "no fact with id no fact with id 12"."""
    for again in (pickle.loads(pickle.dumps(error)), copy.deepcopy(error)):
        assert type(again) is type(error)
        assert str(error) == str(again)
        assert error.args == again.args
        assert vars(error) == vars(again)


def test_an_error_keeps_its_notes_and_the_module_an_import_error_names():
    """What Exception itself keeps beside its attributes comes back too: the notes added
    to it, and the ``name`` of an :class:`ImportError`."""
    error = errors.IntegrationUnavailableError("ctxslots.integrations.langgraph", "langgraph")
    error.name = "langgraph"
    error.add_note("while assembling the context")
    for again in (pickle.loads(pickle.dumps(error)), copy.deepcopy(error)):
        assert "langgraph" == again.name == again.extra
        assert ["while assembling the context"] == again.__notes__


def _add(location: str, value: str) -> int:
    with FactStore(location) as store:
        return store.add("agent", value).id


def test_an_error_raised_in_a_worker_process_reaches_the_parent_as_itself(db_path):
    """A worker's refused write came back as ``BrokenProcessPool`` (a ``multiprocessing.Pool``
    hung): the pool could not unpickle the ``InvalidFactError``."""
    FactStore(db_path).close()
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(1, mp_context=context) as pool:
        assert 1 == pool.submit(_add, str(db_path), "Deploys run on Fridays.").result(HUNG_AFTER)
        refused = pool.submit(_add, str(db_path), "")
        with pytest.raises(InvalidFactError) as caught:
            refused.result(HUNG_AFTER)
    assert "value" == caught.value.field
    assert "" == caught.value.value


def _tag(location: str, tags: int) -> int:
    with FactStore(location, limits=Limits(max_tags=2)) as store:
        return store.add("agent", "Deploys run on Fridays.",
                         tags=(f"tag{n}" for n in range(tags))).id


def test_an_error_whose_offending_value_does_not_pickle_reaches_the_parent_as_itself(db_path):
    """Too many tags given as a generator: the worker's ``InvalidFactError`` held the
    generator as its value, and the parent got ``TypeError: cannot pickle 'generator'
    object`` instead of the error. The value now travels as its repr; a copy keeps it."""
    FactStore(db_path).close()
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=context) as pool:
        refused = pool.submit(_tag, str(db_path), 5)
        with pytest.raises(InvalidFactError) as caught:
            refused.result(HUNG_AFTER)
    assert "5 tags, over the limit of 2" == str(caught.value)
    assert "tags" == caught.value.field
    assert caught.value.value.startswith("<generator object")
    generator = (n for n in range(3))
    error = InvalidFactError("tags must be strings", field="tags", value=generator)
    assert copy.copy(error).value is generator
    assert repr(generator) == pickle.loads(pickle.dumps(error)).value


def test_frozen_values_holding_mappings_hash_as_they_compare(db_path):
    """A hit, a prompt and the policies raised ``TypeError: unhashable type: 'dict'`` from
    the hash their frozen classes declare (a dict field: a trace's ``extra``, the decay
    days, the slot caps and owners, a flush's known facts, a word match's stems, a chat
    reply's raw body, an embedder choice's factories, a scripted reply's headers)."""
    with FactStore(db_path) as store:
        store.add("agent", "The billing tests are flaky under load.")
        hits = store.search("flaky billing tests")
        prompt = PromptAssembler(store).assemble(AssemblyRequest("flaky billing tests?"))
        match = store.match_words(hits[0].fact.id, "flaky billing tests")
    report = FlushReport(status="applied", conversation="c", flush_id="f", known_facts={1: 7})
    with ScriptedChatServer(["Noted."]) as server:
        client = OpenAIChatClient(server.base_url, "scripted")
        reply = client.complete([Message("user", "hi")])
        client.close()
    values = [hits[0], hits[0].trace, prompt, RankingPolicy(), Limits(), PrunePolicy(), report,
              match, reply, EmbedderChoice("hashing"), ScriptedReply("hi", headers={"A": "1"})]
    for value in values:
        twin = copy.deepcopy(value)
        assert twin == value
        assert hash(twin) == hash(value)
    assert 1 == len({hits[0], copy.deepcopy(hits[0])})


def test_a_prompt_repr_shows_what_became_of_each_section_not_every_item(tmp_path: Path):
    """The repr of a prompt of a large budget held every item offered with its fact and
    trace: over a megabyte for one notebook cell."""
    with FactStore(tmp_path / "memory.db") as store:
        with store.batch():
            for i in range(300):
                store.add("agent", f"Billing retry note {i}: " + "details " * 40)
        prompt = PromptAssembler(store).assemble(AssemblyRequest("billing retry", budget=50_000))
    kept = len(prompt.section("agent_memory").items)
    assert kept > 100
    shown = repr(prompt)
    assert len(shown) < 2000
    assert f"<agent_memory: kept, {kept} of {kept} items, " in shown
    assert f"... ({len(prompt.text)} characters)" in shown
    assert shown.startswith("AssembledPrompt(text='## ")


def test_a_store_refuses_to_be_pickled_saying_what_to_do(location):
    """Pickling a store (a process pool's argument) failed with ``cannot pickle
    'apsw.Connection' object``, ``'weakref.ReferenceType' object`` (PostgreSQL) or
    ``'_Held' object`` (closed)."""
    store = FactStore(location)
    try:
        for attempt in (pickle.dumps, copy.deepcopy, pickle.dumps):
            with pytest.raises(TypeError, match=r"^a FactStore cannot be pickled or copied .*"
                                                r"open FactStore\(.*\) in the other process"):
                attempt(store)
            store.close()
    finally:
        store.close()


def test_a_chat_client_pickles_after_it_was_used():
    """A client pickled before its first request, but not after (``cannot pickle
    '_thread.RLock' object``): a notebook that tried it first could not hand it on."""
    with ScriptedChatServer(["first", "second"]) as server:
        client = OpenAIChatClient(server.base_url, "scripted", api_key="sk-test")
        assert "first" == client.complete([Message("user", "hi")]).text
        again = pickle.loads(pickle.dumps(client))
        assert again == client
        assert "second" == again.complete([Message("user", "hi")]).text
        assert server.request_headers[1]["Authorization"] == "Bearer sk-test"
        client.close()
        again.close()


def _child_asks(client: OpenAIChatClient, answers: multiprocessing.Queue) -> None:
    answers.put(client.complete([Message("user", "from the child")]).text)


def test_a_chat_client_used_before_a_fork_opens_a_connection_of_its_own_in_the_child():
    """A forked child sent its requests on the parent's kept-alive connection: two
    children at once read each other's replies or none (``Server disconnected without
    sending a response``)."""
    context = multiprocessing.get_context("fork")
    with ScriptedChatServer(["parent", "child", "parent again"]) as server:
        client = OpenAIChatClient(server.base_url, "scripted", max_retries=0)
        assert "parent" == client.complete([Message("user", "hi")]).text
        answers = context.Queue()
        child = context.Process(target=_child_asks, args=(client, answers))
        child.start()
        assert "child" == answers.get(timeout=HUNG_AFTER)
        child.join(HUNG_AFTER)
        assert 0 == child.exitcode
        assert "parent again" == client.complete([Message("user", "again")]).text
        parent_port, child_port, parent_again_port = (port for _, port in server.peers)
        assert child_port != parent_port
        assert parent_again_port == parent_port
        client.close()


def test_any_stays_any_through_pickle_and_copies(db_path):
    """A pickled or copied ``ANY`` was an equal string but not ``ANY``: the store took it
    for the owner named ``*`` and listed nothing (a pool job's arguments, a deep copy)."""
    with FactStore(db_path) as store:
        store.upsert("user", "editor", "Alice uses Helix.", user="alice")
        store.upsert("user", "editor", "Bob uses Vim.", user="bob")
        for again in (pickle.loads(pickle.dumps(ANY)), copy.deepcopy(ANY), copy.copy(ANY),
                      pickle.loads(pickle.dumps({"user": ANY}))["user"]):
            assert again is ANY
            assert ["Alice uses Helix.", "Bob uses Vim."] == sorted(
                f.value for f in store.facts(user=again))


def _count(counter: TokenCounter, text: str) -> int:
    return counter.count(text)


def test_a_token_counter_goes_to_a_worker_process():
    """A counter failed to pickle (``Can't pickle <functools._lru_cache_wrapper ...>: it's
    not the same object``), so a process pool could not be handed one."""
    counter = TokenCounter("cl100k_base", cache_size=10, build_after=0.0)
    expected = counter.count("The billing tests are flaky under load.")
    again = pickle.loads(pickle.dumps(counter))
    assert again == counter
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(1, mp_context=context) as pool:
        counted = pool.submit(_count, counter, "The billing tests are flaky under load.")
        assert expected == counted.result(HUNG_AFTER)
