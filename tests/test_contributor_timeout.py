"""A contributor that does not answer in time is reported, and the turn goes on without it."""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import threading
import time
from collections.abc import Iterator

import pytest

from ctxslots import (
    AssemblyRequest,
    FactStore,
    InvalidRequestError,
    Item,
    PromptAssembler,
    Section,
    StaticContributor,
    hookimpl,
)

#: How long the tests let a hung contributor hold a turn: the turn must end after it.
TIMEOUT_S = 0.2
#: Ample time for a contributor that answers at once, however busy the machine.
AMPLE_S = 120.0

caller = contextvars.ContextVar("caller", default="nobody")


class Hung:
    """A plain contributor that waits until the test lets it go."""

    name = "hung"
    priority = 60
    sticky = False

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started = threading.Event()

    def contribute(self, request: AssemblyRequest) -> None:
        self.started.set()
        self.release.wait()


class AsyncHung:
    """An async contributor that never answers (until it is cancelled)."""

    name = "async_hung"
    priority = 65
    sticky = True

    def __init__(self) -> None:
        self.cancelled = False
        self.stopped = threading.Event()

    async def contribute(self, request: AssemblyRequest) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            self.stopped.set()
            raise


class Caller:
    """Shows the context variable the caller set."""

    name = "caller"
    priority = 50
    sticky = False

    def contribute(self, request: AssemblyRequest) -> object:
        from ctxslots import Item, Section

        return Section(title="Caller", items=(Item(text=f"asked by {caller.get()}"),))


@pytest.fixture(name="hung")
def fixture_hung() -> Iterator[Hung]:
    hung = Hung()
    yield hung
    hung.release.set()


def _errors(prompt: object) -> dict[str, str | None]:
    return {s.name: s.error for s in prompt.sections}  # type: ignore[attr-defined]


def test_a_hung_contributor_is_left_out_and_named_in_the_dump(hung):
    static = StaticContributor("notes", "Notes", ["Deploys run on Fridays."])
    assembler = PromptAssembler(None, contributors=[hung, static], contributor_timeout=TIMEOUT_S)
    prompt = assembler.assemble(AssemblyRequest("when do we deploy?"))
    assert prompt.text == "## Notes\n- Deploys run on Fridays.\n"
    assert hung.started.is_set()
    assert _errors(prompt) == {"hung": "TimeoutError: no section within 0.2 s", "notes": None}
    dumped = json.loads(prompt.dump("json"))
    section = next(s for s in dumped["sections"] if s["name"] == "hung")
    assert section["error"] == "TimeoutError: no section within 0.2 s"


def test_aassemble_cancels_an_async_one_and_leaves_a_plain_one_behind(hung):
    stuck = AsyncHung()
    static = StaticContributor("notes", "Notes", ["Deploys run on Fridays."])
    assembler = PromptAssembler(None, contributors=[hung, stuck, static],
                                contributor_timeout=TIMEOUT_S)
    result: list[object] = []
    # asyncio.run waits for its executor's threads when it ends: a hung plain contributor
    # must not be on one. The thread is joined with a bound only so that such a regression
    # fails instead of hanging the suite.
    runner = threading.Thread(
        target=lambda: result.append(asyncio.run(assembler.aassemble(
            AssemblyRequest("when do we deploy?")))), daemon=True)
    runner.start()
    runner.join(AMPLE_S)
    assert not runner.is_alive(), "asyncio.run did not return while a contributor hung"
    (prompt,) = result
    assert prompt.text == "## Notes\n- Deploys run on Fridays.\n"  # type: ignore[attr-defined]
    assert stuck.cancelled
    assert _errors(prompt) == {"async_hung": "TimeoutError: no section within 0.2 s",
                               "hung": "TimeoutError: no section within 0.2 s", "notes": None}


def test_contributors_that_answer_give_the_same_prompt_with_a_timeout(store):
    store.upsert("user", "name", "Dana")
    store.upsert("project", "deploy", "Deploys of shop-api run every Friday.", scope="shop-api")
    store.add("agent", "Run the billing tests twice: they are flaky.", scope="shop-api")
    request = AssemblyRequest("When do we deploy, and the billing tests?", scope="shop-api")
    plain = PromptAssembler(store).assemble(request, record_shown=False)
    timed = PromptAssembler(store, contributor_timeout=AMPLE_S)
    assert timed.assemble(request, record_shown=False).text == plain.text
    assert asyncio.run(timed.aassemble(request)).text == plain.text
    assert "Deploys of shop-api run every Friday." in plain.text


def test_a_timed_contributor_sees_the_callers_context_variables():
    token = caller.set("the agent loop")
    try:
        assembler = PromptAssembler(None, contributors=[Caller()], contributor_timeout=AMPLE_S)
        assert "asked by the agent loop" in assembler.assemble(AssemblyRequest("hi")).text
    finally:
        caller.reset(token)


def test_assemble_cancels_an_async_one_on_its_thread(caplog):
    stuck = AsyncHung()
    assembler = PromptAssembler(None, contributors=[stuck], contributor_timeout=TIMEOUT_S)
    with caplog.at_level(logging.WARNING, logger="ctxslots.assembler"):
        prompt = assembler.assemble(AssemblyRequest("hi"))
        assert _errors(prompt) == {"async_hung": "TimeoutError: no section within 0.2 s"}
        assert stuck.stopped.wait(AMPLE_S), "the coroutine went on running on its thread"
        for thread in threading.enumerate():
            if thread.name == "ctxslots-contributor":
                thread.join(AMPLE_S)
    # Said once, by the caller: the thread's own end of it is no second failure.
    assert [r.getMessage() for r in caplog.records] == [
        "contributor 'async_hung' gave no section within 0.2 s"]


class LateFailure:
    """A plain contributor that fails, or answers what is no section, once let go."""

    name = "late"
    priority = 60
    sticky = False

    def __init__(self, answer: object) -> None:
        self.answer = answer
        self.release = threading.Event()
        self.finished = threading.Event()

    def contribute(self, request: AssemblyRequest) -> object:
        self.release.wait()
        try:
            if isinstance(self.answer, Exception):
                raise self.answer
            return self.answer
        finally:
            self.finished.set()


@pytest.mark.parametrize("answer", [RuntimeError("the weather service is down"), 42])
def test_a_timed_out_contributor_is_said_once_whatever_it_does_later(caplog, answer):
    """A plain contributor reported as timed out that then fails, or returns what is no
    section, on its thread is not reported a second time: its answer is not used."""
    late = LateFailure(answer)
    assembler = PromptAssembler(None, contributors=[late], contributor_timeout=TIMEOUT_S)
    with caplog.at_level(logging.WARNING, logger="ctxslots.assembler"):
        prompt = assembler.assemble(AssemblyRequest("hi"))
        late.release.set()
        assert late.finished.wait(AMPLE_S)
        for thread in threading.enumerate():
            if thread.name == "ctxslots-contributor":
                thread.join(AMPLE_S)
    assert _errors(prompt) == {"late": "TimeoutError: no section within 0.2 s"}
    assert [r.getMessage() for r in caplog.records] == [
        "contributor 'late' gave no section within 0.2 s"]


def test_a_plain_contributors_awaitable_is_awaited_on_the_callers_loop():
    """A plain contribute() may hand back a coroutine that waits on the caller's loop (a
    shared client, a queue): with a timeout it is still awaited there, as without one."""
    from ctxslots import Item, Section

    async def turn(timeout: float | None) -> str:
        loop = asyncio.get_running_loop()

        class Shared:
            name = "shared"
            priority = 50
            sticky = False

            def contribute(self, request: AssemblyRequest) -> object:
                return self.answer()

            async def answer(self) -> Section:
                ready = loop.create_future()
                loop.call_soon_threadsafe(ready.set_result, "from the app's loop")
                where = "on" if asyncio.get_running_loop() is loop else "off"
                return Section(title="Shared", items=(Item(text=f"{await ready}, {where} it"),))

        assembler = PromptAssembler(None, contributors=[Shared()], contributor_timeout=timeout)
        prompt = await assembler.aassemble(AssemblyRequest("hi"))
        assert _errors(prompt) == {"shared": None}
        return prompt.text

    assert asyncio.run(turn(None)) == asyncio.run(turn(AMPLE_S)) == \
        "## Shared\n- from the app's loop, on it\n"


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), True, "2", [1], 1e10])
def test_a_timeout_that_is_not_a_positive_number_is_refused(bad):
    with pytest.raises(InvalidRequestError, match="contributor_timeout must be a positive"):
        PromptAssembler(None, contributor_timeout=bad)


def test_a_timeout_inside_the_stores_batch_still_gets_the_memory(store):
    """Inside a batch of the store the calling thread has open, the contributors run on
    this thread: on threads of their own (a timeout) or worker threads (aassemble) their
    searches waited for the batch to end, so every memory section timed out, and
    aassemble never returned."""
    store.upsert("project", "deploy", "Deploys of shop-api run every Friday.", scope="shop-api")
    request = AssemblyRequest("When do we deploy, and the billing tests?", scope="shop-api")
    timed = PromptAssembler(store, contributor_timeout=AMPLE_S)
    expected = timed.assemble(request, record_shown=False).text
    assert "Deploys of shop-api run every Friday." in expected

    async def in_batch() -> tuple[str, str]:
        with store.batch():
            store.add("agent", "Run the billing tests twice.", scope="shop-api")
            short = PromptAssembler(store, contributor_timeout=TIMEOUT_S)
            sync = short.assemble(request, record_shown=False)
            together = await asyncio.wait_for(short.aassemble(request), AMPLE_S)
            return sync.text, together.text

    sync, together = asyncio.run(in_batch())
    assert "Deploys of shop-api run every Friday." in sync
    assert "Run the billing tests twice." in sync   # the batch's own write is seen
    assert together == sync


class NotesLookup:
    """An async contributor that searches the store with ``asearch``, noting the thread."""

    name = "notes"
    priority = 50
    sticky = False

    def __init__(self, store: FactStore) -> None:
        self.store = store
        self.threads: list[int] = []

    async def contribute(self, request: AssemblyRequest) -> Section:
        self.threads.append(threading.get_ident())
        hits = await self.store.asearch("billing tests", scope="shop-api", relaxed=True)
        return Section("Notes", [Item(h.fact.value) for h in hits])


def test_aassemble_inside_the_stores_batch_awaits_an_async_contributor_on_its_loop(store):
    """Inside a batch, an async contributor that searches the store is awaited on the
    batch's own loop and thread: aassemble ran it on another thread's loop, whose search
    waited for the batch to end, which waited for aassemble (for ever on SQLite)."""
    notes = NotesLookup(store)
    assembler = PromptAssembler(store, contributors=[notes], contributor_timeout=TIMEOUT_S)
    request = AssemblyRequest("When do we run the billing tests?", scope="shop-api")
    answers: list[tuple[int, str]] = []

    async def in_batch() -> None:
        with store.batch():
            store.add("agent", "Run the billing tests twice.", scope="shop-api")
            prompt = await assembler.aassemble(request)
            answers.append((threading.get_ident(), prompt.text))

    turn = threading.Thread(target=asyncio.run, args=(in_batch(),), daemon=True)
    turn.start()
    turn.join(AMPLE_S)
    assert not turn.is_alive(), "aassemble inside the batch never returned"
    (thread, text), = answers
    assert "## Notes\n- Run the billing tests twice.\n" in text  # the batch's own write
    assert [thread] == notes.threads


class GivenUpOn:
    """An async contributor awaiting a lookup that another part of the program cancelled."""

    name = "given_up_on"
    priority = 55
    sticky = False

    async def contribute(self, request: AssemblyRequest) -> None:
        lookup = asyncio.get_running_loop().create_future()
        lookup.cancel()
        await lookup


@pytest.mark.parametrize("timeout", [None, AMPLE_S])
def test_a_contributors_own_cancelled_error_is_its_failure(timeout):
    """A CancelledError a contributor raises while nobody cancels the assembly is its
    failure, left out like any other: it went out of assemble (a sync call) and aassemble
    (a task nobody cancelled) as if the caller were cancelled, and with a timeout killed
    the contributor's thread, reported as a timeout once the time was up."""
    static = StaticContributor("notes", "Notes", ["Deploys run on Fridays."])
    assembler = PromptAssembler(None, contributors=[GivenUpOn(), static],
                                contributor_timeout=timeout)
    request = AssemblyRequest("hi")
    for prompt in (assembler.assemble(request), asyncio.run(assembler.aassemble(request))):
        assert {"given_up_on": "CancelledError", "notes": None} == _errors(prompt)
        assert "Deploys run on Fridays." in prompt.text


class Waiting(AsyncHung):
    """:class:`AsyncHung`, saying when it has begun to wait."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting = asyncio.Event()

    async def contribute(self, request: AssemblyRequest) -> None:
        self.waiting.set()
        await super().contribute(request)


@pytest.mark.parametrize("timeout", [None, AMPLE_S])
def test_cancelling_aassemble_cancels_its_contributors_and_raises(timeout):
    """The caller's cancel still goes through: aassemble raises CancelledError and the
    async contributor waiting in it is cancelled."""
    stuck = Waiting()
    assembler = PromptAssembler(None, contributors=[stuck], contributor_timeout=timeout)

    async def run() -> None:
        task = asyncio.ensure_future(assembler.aassemble(AssemblyRequest("hi")))
        await stuck.waiting.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(run())
    assert stuck.cancelled


class LoopHolder:
    """An async contributor that blocks its event loop (a blocking call in an ``async
    def``) for three times the timeout, then answers."""

    priority = 40
    sticky = False

    def __init__(self, name: str) -> None:
        self.name = name

    async def contribute(self, request: AssemblyRequest) -> object:
        from ctxslots import Item, Section

        until = time.monotonic() + 3 * TIMEOUT_S
        while time.monotonic() < until:  # blocking: the loop runs nothing meanwhile
            threading.Event().wait(until - time.monotonic())
        return Section(title="Held", items=(Item(text="the answer of the loop holder"),))


@pytest.mark.parametrize("name", ["holder", "zz_holder"])  # asked before or after the memory
def test_an_async_contributor_that_holds_the_loop_is_the_late_one(store, caplog, name):
    """aassemble: an async plugin contributor that blocks the loop past the timeout is
    reported late and its answer left out; the built-in memory sections, answering at once
    on their threads, are kept, not blamed for the time it held the loop."""
    store.upsert("user", "editor", "The user edits code in Helix.")
    store.upsert("project", "deploy", "Deploys of shop-api run every Friday.")

    class Holder:
        @hookimpl
        def register_contributors(self, register):
            register(LoopHolder(name))

    assembler = PromptAssembler(store, plugins=[Holder()], contributor_timeout=TIMEOUT_S)
    with caplog.at_level(logging.WARNING, logger="ctxslots.assembler"):
        prompt = asyncio.run(assembler.aassemble(AssemblyRequest("editor deploy shop-api")))
    assert _errors(prompt) == {name: "TimeoutError: no section within 0.2 s",
                               "user_memory": None, "project_memory": None,
                               "agent_memory": None}
    assert "- The user edits code in Helix.\n" in prompt.text
    assert "- Deploys of shop-api run every Friday.\n" in prompt.text
    assert "loop holder" not in prompt.text
    assert [r.getMessage() for r in caplog.records] == [
        f"contributor {name!r} gave no section within 0.2 s"]
