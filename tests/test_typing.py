"""The package type-checks under ``mypy --strict`` (the public API ships ``py.typed``)."""

from __future__ import annotations

import inspect
import io
import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

import ctxslots

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "ctxslots"


def test_mypy_strict_is_clean():
    """Every module of the package passes ``mypy --strict``.

    mypy reads the checkout's ``pyproject.toml`` and keeps its usual incremental
    cache in the checkout's ``.mypy_cache`` (what ``mypy --strict src`` run by hand
    uses): a first run checks everything (10 to 20 seconds on a 2-core machine),
    later runs only what changed.
    """
    pytest.importorskip("mypy")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--config-file", str(ROOT / "pyproject.toml"),
         "--cache-dir", str(ROOT / ".mypy_cache"), str(SRC)],
        capture_output=True, text=True, timeout=600, check=False,
    )
    assert 0 == done.returncode, done.stdout + done.stderr
    assert "Success: no issues found" in done.stdout


def _mypy_strict(tmp_path: Path, program: str) -> subprocess.CompletedProcess[str]:
    """``mypy --strict`` on ``program``, importing ctxslots from this checkout's sources."""
    path = tmp_path / "user_program.py"
    path.write_text(program)
    env = {**os.environ, "MYPYPATH": str(SRC.parent)}
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--config-file", str(ROOT / "pyproject.toml"),
         "--cache-dir", str(ROOT / ".mypy_cache"), str(path)],
        capture_output=True, text=True, timeout=600, check=False, env=env, cwd=tmp_path,
    )


#: Contributors written three ways, each given where a Contributor is expected.
CONTRIBUTORS_PROGRAM = '''
import attrs

from ctxslots import AssemblyRequest, Contributor, Item, Section, StaticContributor


class HouseRules:
    name = "house_rules"
    priority = 95
    sticky = True

    def contribute(self, request: AssemblyRequest) -> Section:
        return Section(title="House rules", items=[Item("Answer in British English.")])


@attrs.frozen
class Glossary:
    name: str = "glossary"
    priority: int = 40
    sticky: bool = False

    async def contribute(self, request: AssemblyRequest) -> Section | None:
        return None


contributors: list[Contributor] = [
    HouseRules(), Glossary(), StaticContributor("persona", "Persona", ["Be brief."]),
]
'''


def test_contributors_of_frozen_classes_type_check_as_contributors(tmp_path):
    """A frozen class (the shipped ``StaticContributor`` is one) is a ``Contributor``
    to a type checker too, as it is at run time."""
    pytest.importorskip("mypy")
    done = _mypy_strict(tmp_path, CONTRIBUTORS_PROGRAM)
    contributors = runpy.run_path(str(tmp_path / "user_program.py"))["contributors"]
    assert isinstance(contributors, list) and len(contributors) == 3
    assert all(isinstance(c, ctxslots.Contributor) for c in contributors)
    assert 0 == done.returncode, done.stdout + done.stderr
    assert "Success: no issues found" in done.stdout


#: docs/integrations.md's graph, typed: the memory nodes added to a TypedDict state's graph.
LANGGRAPH_PROGRAM = '''
from langgraph.graph import END, START, MessagesState, StateGraph

from ctxslots import FactStore
from ctxslots.integrations import Memory
from ctxslots.integrations.langgraph import CtxslotsStore, context_node, flush_node


class State(MessagesState):
    memory_context: str


def build(store: FactStore, memory: Memory) -> None:
    builder = StateGraph(State)
    builder.add_node("recall", context_node(memory))
    builder.add_node("flush", flush_node(memory))
    builder.add_edge(START, "recall")
    builder.add_edge("recall", "flush")
    builder.add_edge("flush", END)
    builder.compile(store=CtxslotsStore(store))
'''


def test_the_langgraph_nodes_type_check_as_graph_nodes(tmp_path):
    """``builder.add_node("recall", context_node(memory))`` passes ``mypy --strict``:
    LangGraph wants a node's input to be a state type, which ``Mapping`` is not."""
    pytest.importorskip("mypy")
    pytest.importorskip("langgraph")
    done = _mypy_strict(tmp_path, LANGGRAPH_PROGRAM)
    assert 0 == done.returncode, done.stdout + done.stderr
    assert "Success: no issues found" in done.stdout


#: A pydantic-ai program reading the capability's pieces into typed helpers.
PYDANTIC_AI_PROGRAM = '''
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.toolsets import FunctionToolset

from ctxslots.integrations.pydantic_ai import MemoryCapability


def tools_of(capability: MemoryCapability) -> FunctionToolset[Any]:
    return capability.get_toolset()


def instructions_of(capability: MemoryCapability
                    ) -> Callable[[RunContext[Any]], Awaitable[str]]:
    return capability.get_instructions()
'''


def test_the_pydantic_ai_capability_gives_typed_pieces(tmp_path):
    """``MemoryCapability.get_toolset()`` and ``get_instructions()`` are typed as what they
    return (a ``FunctionToolset`` and an instructions function), not ``Any``, which
    ``mypy --strict`` refuses to return from a typed function."""
    pytest.importorskip("mypy")
    pytest.importorskip("pydantic_ai")
    from pydantic_ai.toolsets import FunctionToolset

    from ctxslots.integrations import Memory
    from ctxslots.integrations.pydantic_ai import MemoryCapability

    with ctxslots.FactStore(tmp_path / "memory.db") as store:
        capability = MemoryCapability(Memory(store))
        assert isinstance(capability.get_toolset(), FunctionToolset)
        assert inspect.iscoroutinefunction(capability.get_instructions())
    done = _mypy_strict(tmp_path, PYDANTIC_AI_PROGRAM)
    assert 0 == done.returncode, done.stdout + done.stderr
    assert "Success: no issues found" in done.stdout


#: A backup through docs/transfer.md's exports, typed as the docs say they return.
TRANSFER_PROGRAM = '''
import io
from pathlib import Path

from ctxslots import FactStore


def backup(store: FactStore, folder: Path) -> list[Path]:
    (folder / "MEMORY.md").write_text(store.export_markdown(slots=["user"]))
    store.export_jsonl(io.StringIO(), include_archive=False)
    return store.export_markdown(folder / "by-slot", scope="shop")
'''


def test_the_exports_are_typed_as_they_return(tmp_path):
    """``export_markdown()`` is a text and ``export_markdown(directory)`` a list of paths
    to ``mypy --strict`` as at run time, and a misspelt option of an export or import is
    a type error, as it is a ``TypeError`` at run time."""
    pytest.importorskip("mypy")
    with ctxslots.FactStore(tmp_path / "memory.db") as store:
        store.upsert("user", "editor", "The user edits code in Helix.")
        assert isinstance(store.export_markdown(), str)
        paths = store.export_markdown(tmp_path / "by-slot")
        assert [tmp_path / "by-slot" / "user.md"] == paths
        with pytest.raises(TypeError, match="include_archve"):
            store.export_jsonl(io.StringIO(), include_archve=False)
    done = _mypy_strict(tmp_path, TRANSFER_PROGRAM)
    assert 0 == done.returncode, done.stdout + done.stderr
    misspelt = TRANSFER_PROGRAM.replace("include_archive=", "include_archve=")
    done = _mypy_strict(tmp_path, misspelt)
    assert 'Unexpected keyword argument "include_archve"' in done.stdout, done.stdout


#: Times given as docs/storage.md says: a datetime or Unix seconds.
TIMES_PROGRAM = '''
import datetime as dt

from ctxslots import FactStore


def backfill(store: FactStore) -> None:
    said = dt.datetime(2024, 5, 1, tzinfo=dt.UTC)
    store.add("agent", "The deploy broke twice.", observed_at=said)
    store.upsert("user", "city", "The user lives in Lisbon.", observed_at=1714521600.0,
                 expires_at=dt.datetime(2999, 1, 1, tzinfo=dt.UTC))
    store.search("deploy", now=said, said_after=0, said_before=said)
    store.facts(said_after=said)
    store.important("user", now=said)
'''


def test_times_are_typed_as_what_the_store_accepts(tmp_path):
    """A time passed to a write, a search or a read is a datetime or Unix seconds to
    ``mypy --strict``, as at run time: a date string, refused at run time, is a type
    error too."""
    pytest.importorskip("mypy")
    with ctxslots.FactStore(tmp_path / "memory.db") as store:
        with pytest.raises(ctxslots.InvalidFactError, match="observed_at must be a datetime"):
            store.add("agent", "The deploy broke twice.", observed_at="2024-05-01")
        assert [] == store.facts()
    done = _mypy_strict(tmp_path, TIMES_PROGRAM)
    assert 0 == done.returncode, done.stdout + done.stderr
    dated = TIMES_PROGRAM.replace("observed_at=said", 'observed_at="2024-05-01"')
    done = _mypy_strict(tmp_path, dated)
    assert 'incompatible type "str"; expected "datetime | float | None"' in done.stdout, \
        done.stdout


#: A turn built from the pieces docs/assembler.md and docs/plugins.md name.
REQUEST_PROGRAM = '''
import datetime as dt

from ctxslots import AssemblyRequest, ContextBlock, Item, PromptAssembler, Section
from ctxslots import StaticContributor


def turn(assembler: PromptAssembler) -> str:
    request = AssemblyRequest("When do we deploy?", now=dt.datetime(2024, 5, 1, tzinfo=dt.UTC),
                              extra=[ContextBlock("Open file", "deploy.sh"), ("Notes", "Fri")])
    return assembler.assemble(request).text


rules = Section(title="Rules", items=[Item("Be brief.")])
assembler = PromptAssembler(None, contributors=[StaticContributor("rules", "Rules", ["x"])])
'''

#: Each a call the request, section or assembler refuses at run time.
REFUSED = {
    'now=dt.datetime(2024, 5, 1, tzinfo=dt.UTC)': 'now="2024-05-01"',
    '("Notes", "Fri")': '("Notes", "Fri", "more")',
    'items=[Item("Be brief.")]': 'items=["Be brief."]',
    'contributors=[StaticContributor("rules", "Rules", ["x"])]':
        'contributors=StaticContributor("rules", "Rules", ["x"])',
}


def test_a_turns_pieces_are_typed_as_what_they_accept(tmp_path):
    """``AssemblyRequest(now=, extra=)``, ``Section(items=)`` and
    ``PromptAssembler(contributors=)`` are typed as what they accept: each call the run
    time refuses is a ``mypy --strict`` error too."""
    pytest.importorskip("mypy")
    with pytest.raises(ctxslots.InvalidRequestError, match="now must be a datetime"):
        ctxslots.AssemblyRequest("hi", now="2024-05-01")
    with pytest.raises(ctxslots.InvalidRequestError, match="title, text"):
        ctxslots.AssemblyRequest("hi", extra=[("Notes", "Fri", "more")])
    with pytest.raises(ctxslots.InvalidRequestError, match="section items must be Item"):
        ctxslots.Section(title="Rules", items=["Be brief."])
    with pytest.raises(ctxslots.InvalidRequestError, match="contributors must be a list"):
        ctxslots.PromptAssembler(None, contributors=ctxslots.StaticContributor("r", "R", ["x"]))
    done = _mypy_strict(tmp_path, REQUEST_PROGRAM)
    assert 0 == done.returncode, done.stdout + done.stderr
    for good, bad in REFUSED.items():
        assert good in REQUEST_PROGRAM
        done = _mypy_strict(tmp_path, REQUEST_PROGRAM.replace(good, bad))
        assert 1 == done.returncode and "error:" in done.stdout, (bad, done.stdout)



#: docs/integrations.md's Memory calls, typed: the scoped slots as a set, a list or one name.
MEMORY_PROGRAM = '''
from ctxslots import FactStore
from ctxslots.integrations import Memory


def memories(store: FactStore) -> list[Memory]:
    return [Memory(store, scoped_slots={"project", "agent"}),
            Memory(store, scoped_slots=["project"]), Memory(store, scoped_slots="agent")]
'''


def test_a_memorys_scoped_slots_are_typed_as_what_it_accepts(tmp_path):
    """``Memory(store, scoped_slots={"project", "agent"})``, as the docs write it, passes
    ``mypy --strict`` (a set, a list or one slot name, as ``MemoryTools`` takes them), and
    each is the set of slots it names at run time."""
    pytest.importorskip("mypy")
    done = _mypy_strict(tmp_path, MEMORY_PROGRAM)
    assert 0 == done.returncode, done.stdout + done.stderr
    with ctxslots.FactStore(":memory:") as store:
        made = runpy.run_path(str(tmp_path / "user_program.py"))["memories"](store)
        assert [{"project", "agent"}, {"project"}, {"agent"}] == [m.scoped_slots for m in made]

#: An async agent loop through the store's async methods.
ASYNC_PROGRAM = '''
from ctxslots import FactStore, Hit


async def loop(store: FactStore) -> list[Hit]:
    await store.aadd("agent", "Rerun flaky tests once.", scope="shop")
    await store.aupsert("user", "editor", "The user edits code in Helix.", tags=["tools"])
    return await store.asearch("flaky", scope="shop", limit=3)
'''


@pytest.mark.parametrize("name", ["asearch", "aadd", "aupsert", "aupdate", "aforget"])
def test_the_async_methods_take_their_twins_arguments(name):
    """Each async method names the arguments of its blocking twin, with the same defaults
    and types."""
    twin = getattr(ctxslots.FactStore, name[1:])
    ours = inspect.signature(getattr(ctxslots.FactStore, name), eval_str=True)
    theirs = inspect.signature(twin, eval_str=True)
    assert list(theirs.parameters.values()) == list(ours.parameters.values())


def test_a_misspelt_argument_of_an_async_method_is_a_type_error(tmp_path):
    """``aadd(..., scop=...)`` and ``asearch(..., limt=...)`` are ``mypy --strict``
    errors, as they are ``TypeError`` at run time."""
    pytest.importorskip("mypy")
    done = _mypy_strict(tmp_path, ASYNC_PROGRAM)
    assert 0 == done.returncode, done.stdout + done.stderr
    misspelt = ASYNC_PROGRAM.replace('scope="shop")\n', 'scop="shop")\n').replace(
        "limit=3", "limt=3")
    done = _mypy_strict(tmp_path, misspelt)
    assert 'Unexpected keyword argument "scop" for "aadd"' in done.stdout, done.stdout
    assert 'Unexpected keyword argument "limt" for "asearch"' in done.stdout, done.stdout


#: A flusher's model written as docs/plugins.md describes one: ``complete`` alone.
CLIENT_PROGRAM = '''
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ctxslots import FactStore, MemoryFlusher, Message
from ctxslots.flusher import ChatResult


class CannedClient:
    def complete(self, messages: Sequence[Message], *,
                 json_schema: Mapping[str, Any] | None = None,
                 temperature: float = 0.0) -> ChatResult:
        return ChatResult(json.dumps({"operations": [
            {"op": "upsert", "slot": "user", "key": "city",
             "value": "The user lives in Lisbon.", "confidence": 0.9, "tags": []}]}))


def flusher_of(store: FactStore) -> MemoryFlusher:
    return MemoryFlusher(store, CannedClient())
'''


def test_a_client_with_complete_alone_is_a_flushers_model(tmp_path):
    """A client with ``complete`` and no ``name`` flushes (the report names no model) and
    passes ``mypy --strict`` where the flusher wants an ``LLMClient``."""
    pytest.importorskip("mypy")
    done = _mypy_strict(tmp_path, CLIENT_PROGRAM)
    assert 0 == done.returncode, done.stdout + done.stderr
    program = runpy.run_path(str(tmp_path / "user_program.py"))
    with ctxslots.FactStore(tmp_path / "memory.db") as store:
        report = program["flusher_of"](store).flush(
            [ctxslots.Message("user", "I moved to Lisbon.")], force=True)
        assert ("applied", None) == (report.status, report.model)
        assert "The user lives in Lisbon." == store.get_by_key("user", "city").value


#: A store double written to the SearchableStore protocol, recording what it is asked.
DOUBLE_PROGRAM = '''
from collections.abc import Iterable, Sequence
from typing import Any

from ctxslots import Hit, SearchableStore


class NoMemory:
    def __init__(self) -> None:
        self.asked: list[tuple[str | None, str | None]] = []

    def search(self, query: str, *, slots: Sequence[str] | None = None,
               scope: str | None = None, limit: int = 10, track_access: bool = True,
               now: Any = None, user: str | None = None, agent: str | None = None
               ) -> list[Hit]:
        self.asked.append((user, agent))
        return []

    def touch(self, fact_ids: Iterable[int]) -> int:
        return 0


store: SearchableStore = NoMemory()
'''


def test_the_searchable_store_protocol_names_the_owners_an_assembly_passes(tmp_path):
    """The memory contributors pass a request's ``user`` and ``agent`` to the store's
    ``search``: a double written to ``SearchableStore`` takes them (and one without them
    is a type error, as it is a ``TypeError`` in every memory section at run time)."""
    pytest.importorskip("mypy")
    done = _mypy_strict(tmp_path, DOUBLE_PROGRAM)
    assert 0 == done.returncode, done.stdout + done.stderr
    double = runpy.run_path(str(tmp_path / "user_program.py"))["store"]
    prompt = ctxslots.PromptAssembler(double).assemble(
        ctxslots.AssemblyRequest("hi", user="alice", agent="helper"))
    assert not [s.name for s in prompt.sections if s.error], prompt.dump("markdown")
    assert double.asked and {("alice", "helper")} == set(double.asked)
    ownerless = DOUBLE_PROGRAM.replace(", user: str | None = None, agent: str | None = None", "")
    done = _mypy_strict(tmp_path, ownerless.replace("(user, agent)", "(None, None)"))
    assert 'expression has type "NoMemory", variable has type "SearchableStore"' \
        in done.stdout, done.stdout


#: A store opened the ways docs/storage.md names, its path used as the text it is.
STORE_PATH_PROGRAM = '''
from pathlib import Path

from ctxslots import FactStore


def where(store: FactStore) -> str:
    return store.path.removesuffix(".db")


for given in (Path("memory.db"), "memory.db", None):
    with FactStore(given) as store:
        print(where(store))
'''


def test_a_stores_path_is_typed_as_the_text_it_holds(tmp_path, monkeypatch):
    """``FactStore.path`` takes a path, a URL or None, and holds the location it names as
    a str at run time: typed ``str | PathLike | None``, a typed caller had to narrow it
    before using it as text; it now type-checks as the str it is."""
    pytest.importorskip("mypy")
    monkeypatch.setenv("CTXSLOTS_DB", str(tmp_path / "default.db"))
    with ctxslots.FactStore(tmp_path / "memory.db") as store:
        assert str(tmp_path / "memory.db") == store.path
    with ctxslots.FactStore() as store:
        assert str(tmp_path / "default.db") == store.path
    done = _mypy_strict(tmp_path, STORE_PATH_PROGRAM)
    assert 0 == done.returncode, done.stdout + done.stderr
