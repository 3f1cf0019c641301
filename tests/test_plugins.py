"""Plugins: hook specs, registration checks, entry points and the installed example plugin."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import inspect
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import attrs
import pluggy
import pytest
from click.testing import CliRunner

from _assembler_helpers import make_store
from _installed_plugin import install_plugin
from _machine_lock import machine_lock
from ctxslots import (
    AssemblyRequest,
    FactStore,
    PromptAssembler,
    StaticContributor,
    hookimpl,
    hookspecs,
)
from ctxslots.cli import cli
from ctxslots.errors import InvalidArgumentError, InvalidRequestError
from ctxslots.plugins import (
    PluginError,
    collect,
    embedder_factories,
    load_plugins,
    make_plugin_manager,
    reranker_from_plugins,
    slot_owners,
)

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "ctxslots-example-plugin"
DIST = "ctxslots-example-plugin"


@attrs.frozen
class ExamplePlugin:
    """The example plugin as installed for this test run.

    Attributes:
        dist: Its distribution (entry points, version).
        path: The folder it is installed in: on ``sys.path`` here, and to put on the
            ``PYTHONPATH`` of a child process.
    """

    dist: importlib.metadata.Distribution
    path: Path

    def env(self, **extra: str) -> dict[str, str]:
        """This process's environment with the plugin's folder on ``PYTHONPATH``."""
        paths = [str(self.path), str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]
        return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p), **extra}


def _install_into(target: Path) -> None:
    """pip-install the example plugin into the folder ``target`` (a --target install: no
    environment is changed). Done once per test run, whichever worker comes first."""
    if (target / ".installed").exists():
        return
    isolation = [] if importlib.util.find_spec("hatchling") is None else ["--no-build-isolation"]
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                           "--no-compile", "--target", str(target), *isolation, str(EXAMPLE)],
                          check=False, capture_output=True, text=True, timeout=600)
    assert 0 == proc.returncode, proc.stderr[-3000:]
    (target / ".installed").touch()


@pytest.fixture(scope="module", name="example_plugin")
def fixture_example_plugin(tmp_path_factory):
    """The example plugin, pip-installed from examples/ into a folder of this test run, never
    into the environment running the tests: the folder is on sys.path while this module's
    tests run (children get it through :meth:`ExamplePlugin.env`), then taken off again, so
    a test of another file run after them in the same process never meets the plugin."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    target = shared / "example-plugin"
    with machine_lock(f"example-plugin-{shared.name}"):
        target.mkdir(exist_ok=True)
        _install_into(target)
    sys.path.insert(0, str(target))
    importlib.invalidate_caches()
    try:
        yield ExamplePlugin(importlib.metadata.distribution(DIST), target)
    finally:
        sys.path.remove(str(target))
        for name in [m for m in sys.modules if m.split(".")[0] == "ctxslots_example_plugin"]:
            del sys.modules[name]
        importlib.invalidate_caches()


@pytest.fixture(name="store")
def fixture_store(tmp_path):
    """A store with one project fact about the canary."""
    store = make_store(tmp_path / "p.db", [("project", None, "The canary dashboard is in Grafana.")])
    yield store
    store.close()


def test_example_plugin_contributes_through_its_entry_point(example_plugin, store, monkeypatch):
    """The installed example plugin's section arrives through its ctxslots entry point."""
    monkeypatch.setenv("CTXSLOTS_LOAD_PLUGINS", "example_glossary")
    assert ["example_glossary"] == [ep.name for ep in example_plugin.dist.entry_points
                                    if ep.group == "ctxslots"]
    pm = make_plugin_manager()
    assert ["example_glossary"] == load_plugins(pm)
    assert ["example_glossary"] == load_plugins(pm)  # loading again changes nothing
    assert "glossary" in collect(pm, "register_contributors", store=None)

    assembler = PromptAssembler(store, load_entry_points=True)
    prompt = assembler.assemble(AssemblyRequest("why is the canary red during the freeze?"))
    assert ("## Glossary\n"
            "- The canary is the 5% deploy that runs for 30 minutes before the full rollout.\n"
            "- The freeze stops all deploys from Friday 15:00 to Monday 09:00.\n") in prompt.text
    assert "kept" == prompt.section("glossary").status
    assert "Upper" == assembler.environment.filters["upper_first"]("upper")


def test_the_example_plugin_stays_out_of_this_environment(example_plugin):
    """Installed for the tests, the example plugin is in a folder of the test run only: a
    fresh interpreter of this environment, without that folder, does not find it."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    script = ("import importlib.metadata as m, sys\n"
              "try:\n    m.distribution(sys.argv[1])\nexcept m.PackageNotFoundError:\n"
              "    print('absent')\nelse:\n    print('installed')")
    proc = subprocess.run([sys.executable, "-c", script, DIST], check=False, capture_output=True,
                          text=True, env=env, timeout=120)
    assert "absent" == proc.stdout.strip(), proc.stderr
    assert example_plugin.path in [Path(p) for p in sys.path]


def test_entry_points_load_only_when_asked(example_plugin, store, monkeypatch):
    """Without load_entry_points, or with an allow-list that leaves it out, the plugin stays out."""
    monkeypatch.delenv("CTXSLOTS_LOAD_PLUGINS", raising=False)
    request = AssemblyRequest("what is the canary?")
    assert "glossary" not in [s.name for s in PromptAssembler(store).assemble(request).sections]
    for allow in ("", "some_other_plugin"):
        monkeypatch.setenv("CTXSLOTS_LOAD_PLUGINS", allow)
        prompt = PromptAssembler(store, load_entry_points=True).assemble(request)
        assert "glossary" not in [s.name for s in prompt.sections]


def test_importing_ctxslots_loads_no_entry_point(example_plugin):
    """A fresh process imports ctxslots and builds an assembler without loading any plugin."""
    script = ("import sys, ctxslots; ctxslots.PromptAssembler(None); "
              "loaded_before = 'ctxslots_example_plugin' in sys.modules; "
              "ctxslots.PromptAssembler(None, load_entry_points=True); "
              "print(loaded_before, 'ctxslots_example_plugin' in sys.modules)")
    env = {k: v for k, v in example_plugin.env().items() if k != "CTXSLOTS_LOAD_PLUGINS"}
    proc = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True,
                          text=True, env=env, timeout=120)
    assert "False True" == proc.stdout.strip(), proc.stderr


def test_cli_loads_entry_points(example_plugin, tmp_path, monkeypatch):
    """ctxslots assemble includes the installed plugin's section."""
    monkeypatch.setenv("CTXSLOTS_LOAD_PLUGINS", "example_glossary")
    FactStore(tmp_path / "c.db").close()
    result = CliRunner().invoke(cli, ["--db", str(tmp_path / "c.db"), "assemble",
                                      "where is the runbook?"], catch_exceptions=False)
    assert "## Glossary\n- Runbooks live in docs/runbooks/, one file per alert.\n" == result.output


def test_misspelled_hook_is_refused():
    """A hook implementation with a misspelled name fails loudly (pm.check_pending)."""

    class Typo:
        @hookimpl
        def register_contributor(self, register):
            register(StaticContributor("x", "X", ["x"]))

    with pytest.raises(PluginError, match="register_contributor") as info:
        PromptAssembler(None, plugins=[Typo()])
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value.__cause__, pluggy.PluginValidationError)


def test_unknown_hook_argument_is_refused():
    """A hook implementation asking for an argument the spec lacks is refused."""

    class Extra:
        @hookimpl
        def register_contributors(self, register, database):
            pass

    with pytest.raises(PluginError, match="database"):
        make_plugin_manager([Extra()])


def test_duplicate_contributor_names_name_both_plugins():
    """Two plugins registering the same contributor name are refused, naming both."""

    class One:
        @hookimpl
        def register_contributors(self, register):
            register(StaticContributor("user_memory", "Mine", ["x"]))

    class NoFacts:
        def search(self, *args, **kwargs):
            return []

    with pytest.raises(PluginError, match="already registered by ctxslots.contributors.builtin"):
        PromptAssembler(NoFacts(), plugins=[One()])


def test_contributors_receive_the_store(store):
    """register_contributors gets the assembler's store; the built-ins are the three memory slots."""
    received = []

    class Spy:
        @hookimpl
        def register_contributors(self, register, store):
            received.append(store)

    assembler = PromptAssembler(store, plugins=[Spy()])
    assert [store] == received
    assert ["agent_memory", "project_memory", "user_memory"] == \
        sorted(c.name for c in assembler.contributors)
    assert [] == list(PromptAssembler(None).contributors)


def _hookspecs():
    return {name: fn for name, fn in vars(hookspecs).items()
            if inspect.isfunction(fn) and hasattr(fn, "ctxslots_spec")}


def test_every_hook_is_documented_with_its_signature():
    """docs/plugins.md has a heading with each hook's exact signature, and no stale ones."""
    docs = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
    documented = dict(re.findall(r"^### (\w+)\(([^)]*)\)$", docs, flags=re.MULTILINE))
    specs = _hookspecs()
    assert specs, "no hook specs found"
    for name, fn in specs.items():
        assert name in documented, f"{name} is not documented in docs/plugins.md"
        assert ", ".join(inspect.signature(fn).parameters) == documented[name]
    assert set(specs) == set(documented)


def _traced_hooks(text: str) -> set[str]:
    """The hooks a CTXSLOTS_TRACE_PLUGINS trace shows called."""
    return set(re.findall(r"^\s*(\w+) \[hook\]$", text, flags=re.MULTILINE))


def test_every_hook_is_called_where_its_job_happens(example_plugin, tmp_path, monkeypatch):
    """With the example plugin (one use of every hook) installed, the ctxslots command calls
    every documented hook through pluggy: the trace shows each, and each one's work is seen."""
    monkeypatch.setenv("CTXSLOTS_LOAD_PLUGINS", "example_glossary")
    monkeypatch.setenv("CTXSLOTS_TRACE_PLUGINS", "1")
    db = str(tmp_path / "h.db")
    conversation = tmp_path / "chat.jsonl"
    conversation.write_text('{"role": "user", "content": "The canary runs for 30 minutes."}\n')
    runner = CliRunner()
    traces = ""
    outputs = []
    for args in (["--embedder", "letters", "remember", "project", "Deploys wait for the checklist."],
                 ["--embedder", "letters", "remember", "project", "The canary is watched."],
                 ["--embedder", "letters", "search", "deploys canary"],
                 ["--embedder", "letters", "remember", "glossary",
                  "A dark launch deploys code that no user sees yet."],
                 ["--embedder", "letters", "assemble", "deploys canary", "--dump", "json"],
                 ["flush", "--client", "example-offline", str(conversation), "--json"]):
        result = runner.invoke(cli, ["--db", db, *args], catch_exceptions=False)
        assert 0 == result.exit_code, result.output
        traces += result.stderr
        outputs.append(result.stdout)
    assert set(_hookspecs()) == _traced_hooks(traces)
    # each hook's work: the plugin's embedder made the vectors, its reranker put the fact naming
    # a glossary term first, its slot took a fact that its memory section shows, its client
    # answered the flush, its contributor and filter ran.
    assert "[id:2]" in outputs[2].splitlines()[0]
    dump = json.loads(outputs[4])
    assert "glossary" in [s["name"] for s in dump["sections"]]
    project = next(s for s in dump["sections"] if s["name"] == "project_memory")
    assert "The canary is watched." == project["items"][0]["text"]
    terms = next(s for s in dump["sections"] if s["name"] == "glossary_memory")
    assert ["A dark launch deploys code that no user sees yet."] == [
        i["text"] for i in terms["items"] if i["decision"] == "kept"]
    assert "example-offline" == json.loads(outputs[5])["model"]
    from ctxslots_example_plugin import LetterEmbedder

    from ctxslots import FactStore
    with FactStore(db, embedder=LetterEmbedder()) as store:
        assert "letters:v1" == store.embedder.model_id and 3 == len(list(store.facts()))


def test_mcp_server_reranks_through_the_plugins(example_plugin, tmp_path):
    """The MCP server's memory_query goes through the plugins' rerank_hits (traced on stderr)."""
    import anyio
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    db = tmp_path / "m.db"
    with make_store(db, [("project", None, "Deploys wait for the checklist."),
                         ("project", None, "The canary deploys are watched.")]):
        pass
    env = example_plugin.env(CTXSLOTS_LOAD_PLUGINS="example_glossary", CTXSLOTS_TRACE_PLUGINS="1")
    errlog = (tmp_path / "stderr.txt").open("w")

    async def query() -> str:
        params = StdioServerParameters(command=sys.executable, env=env,
                                       args=["-m", "ctxslots", "--db", str(db), "mcp"])
        async with stdio_client(params, errlog=errlog) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("memory_query", {"query": "deploys checklist"})
        return "".join(block.text for block in result.content)

    text = anyio.run(query)
    errlog.close()
    assert "rerank_hits" in _traced_hooks((tmp_path / "stderr.txt").read_text())
    assert "canary" in text.splitlines()[1]                 # the glossary term first


def test_no_hook_is_called_around_pluggy():
    """No module calls a hook implementation's function directly (that would skip tracing)."""
    offenders = [str(path) for path in (ROOT / "src" / "ctxslots").rglob("*.py")
                 if "impl.function(" in path.read_text(encoding="utf-8")]
    assert [] == offenders


def test_plugins_command_lists_plugins_and_their_hooks(example_plugin, monkeypatch):
    """ctxslots plugins names the built-ins and the installed plugin, with the hooks of each."""
    monkeypatch.setenv("CTXSLOTS_LOAD_PLUGINS", "example_glossary")
    result = CliRunner().invoke(cli, ["plugins"], catch_exceptions=False)
    assert result.output.splitlines() == [
        "ctxslots.contributors.builtin (built-in): register_contributors, register_slots",
        "ctxslots.flusher.builtin (built-in): register_llm_clients",
        "ctxslots.stores.embedders.builtin (built-in): register_embedders",
        ("example_glossary (0.1.0): prepare_jinja2_environment, register_contributors, "
         "register_embedders, register_llm_clients, register_slots, rerank_hits"),
    ]
    listed = json.loads(CliRunner().invoke(cli, ["plugins", "--json"]).output)
    assert {"name": "example_glossary", "builtin": False, "version": "0.1.0",
            "hooks": ["prepare_jinja2_environment", "register_contributors", "register_embedders",
                      "register_llm_clients", "register_slots", "rerank_hits"]} == listed[-1]
    assert set(_hookspecs()) == set(listed[-1]["hooks"])  # one use of every hook


def test_unknown_llm_client_names_the_registered_ones(tmp_path):
    """flush --client with a name nobody registered is one error line listing the known ones."""
    conversation = tmp_path / "c.jsonl"
    conversation.write_text('{"role": "user", "content": "hi"}\n')
    result = CliRunner().invoke(cli, ["--db", str(tmp_path / "u.db"), "flush", "--client", "nope",
                                      str(conversation)])
    assert 1 == result.exit_code
    assert "Error: unknown LLM client 'nope'; registered: openai\n" == result.output


def _broken_plugin(folder: Path) -> Path:
    """A distribution on ``folder`` whose ``ctxslots`` entry point fails to import."""
    return install_plugin(
        folder, "broken", 'raise RuntimeError("the plugin needs a package that is not installed")\n')


def test_a_plugin_that_fails_to_import_is_a_plugin_error_naming_it(tmp_path, monkeypatch):
    """An installed plugin whose module raises on import: load_plugins raises PluginError
    naming the plugin, and every command prints that one line (no traceback); with
    CTXSLOTS_LOAD_PLUGINS leaving it out, the commands work."""
    folder = _broken_plugin(tmp_path / "site")
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delenv("CTXSLOTS_LOAD_PLUGINS")  # the tests' default loads none
    importlib.invalidate_caches()
    with pytest.raises(PluginError, match=r"plugin broken \(ctxslots_broken_mod\) failed to "
                       r"load: RuntimeError: the plugin needs a package") as raised:
        load_plugins(make_plugin_manager())
    assert "broken" == raised.value.plugin
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), str(ROOT / "src")])}
    env.pop("CTXSLOTS_LOAD_PLUGINS", None)
    db = str(tmp_path / "m.db")
    for command in (["plugins"], ["search", "anything"]):
        done = subprocess.run([sys.executable, "-m", "ctxslots", "--db", db, *command],
                              capture_output=True, text=True, timeout=300, env=env, check=False)
        assert 1 == done.returncode
        assert 1 == len(done.stderr.splitlines()), done.stderr
        assert "Error: plugin broken (ctxslots_broken_mod) failed to load" in done.stderr
    done = subprocess.run([sys.executable, "-m", "ctxslots", "--db", db, "plugins"],
                          capture_output=True, text=True, timeout=300, check=False,
                          env={**env, "CTXSLOTS_LOAD_PLUGINS": ""})
    assert 0 == done.returncode, done.stderr


def test_a_registration_hook_that_raises_or_returns_is_a_plugin_error_naming_it(store):
    """A register_contributors hook that raises, or returns its contributors instead of
    registering them, stops the assembler with a PluginError naming the plugin."""
    class Raises:
        @hookimpl
        def register_contributors(self, register, store):
            raise ZeroDivisionError("division by zero")

    class Returns:
        @hookimpl
        def register_contributors(self, register, store):
            return [StaticContributor("rules", "Rules", ["Be brief."])]

    for plugin, said in ((Raises(), "failed: ZeroDivisionError"), (Returns(), "returned a value")):
        with pytest.raises(PluginError, match=said) as raised:
            PromptAssembler(store, plugins=[plugin])
        assert raised.value.plugin and raised.value.plugin in str(raised.value)


def test_an_object_registered_under_another_name_than_its_own_is_refused(store):
    """register("b_tickets", contributor_named_tickets) would pass the duplicate check and
    clash at assembly; it is a PluginError naming the plugin and both names."""
    class Alias:
        @hookimpl
        def register_contributors(self, register, store):
            register("b_tickets", StaticContributor("tickets", "Tickets", ["SHOP-1"]))

    with pytest.raises(PluginError, match="registered 'tickets' as 'b_tickets'") as raised:
        PromptAssembler(store, plugins=[Alias()])
    assert raised.value.plugin


@pytest.mark.parametrize(("value", "traced"), [("1", True), ("yes", True), ("0", False),
                                               ("false", False), (" off ", False), ("", False)])
def test_the_plugin_trace_is_off_for_a_false_word(value, traced, monkeypatch, capsys):
    """``CTXSLOTS_TRACE_PLUGINS=0`` (or false, no, off, empty) leaves the trace off, as
    ``CTXSLOTS_FREE_SLOTS`` reads such words: any value at all turned it on."""
    monkeypatch.setenv("CTXSLOTS_TRACE_PLUGINS", value)
    pm = make_plugin_manager(entry_points=False)
    collect(pm, "register_embedders")
    assert traced == ("register_embedders [hook]" in capsys.readouterr().err)


def test_a_plugin_given_in_code_and_installed_too_is_registered_once(tmp_path, monkeypatch):
    """A plugin module passed in plugins= that is also installed (its entry point loaded),
    or passed twice, is one plugin: its section comes once, no PluginError."""
    folder = install_plugin(tmp_path / "site", "twice", (
        "from ctxslots import Item, Section, hookimpl\n\n\n"
        "class Glossary:\n    name = 'glossary'\n    priority = 60\n    sticky = False\n\n"
        "    def contribute(self, request):\n"
        "        return Section(title='Glossary', items=[Item('SLA: service level agreement')])\n"
        "\n\n@hookimpl\ndef register_contributors(register):\n    register(Glossary())\n"))
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("CTXSLOTS_LOAD_PLUGINS", "twice")
    importlib.invalidate_caches()
    module = importlib.import_module("ctxslots_twice_mod")
    expected = "## Glossary\n- SLA: service level agreement\n"
    for assembler in (PromptAssembler(None, plugins=[module], load_entry_points=True),
                      PromptAssembler(None, plugins=[module, module])):
        assert expected == assembler.assemble(AssemblyRequest("what is an SLA?")).text
    pm = make_plugin_manager([module])
    assert ["twice"] == load_plugins(pm)


def test_a_plugin_manager_without_ctxslots_hook_specs_is_refused_saying_how_to_make_one(
        tmp_path, monkeypatch):
    """A bare ``pluggy.PluginManager("ctxslots")`` (what a reader makes for the ``pm`` the
    plugin functions take) made PromptAssembler and slot_owners fail with AttributeError
    ('HookRelay' object has no attribute 'rerank_hits'), and load_plugins blame an
    installed plugin for an 'unknown hook'; each now says the manager lacks ctxslots' hook
    specs and names make_plugin_manager, and one made by it works."""
    folder = install_plugin(tmp_path / "site", "specs", (
        "from ctxslots import hookimpl\n\n\n@hookimpl\n"
        "def prepare_jinja2_environment(env):\n    env.filters['shout'] = str.upper\n"))
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("CTXSLOTS_LOAD_PLUGINS", "specs")
    importlib.invalidate_caches()
    with FactStore(tmp_path / "m.db") as store:
        store.upsert("user", "editor", "The user edits code in Helix.")
        for bare in (pluggy.PluginManager("ctxslots"), pluggy.PluginManager("myapp")):
            with pytest.raises(InvalidRequestError, match=r"no spec for the ctxslots hook .*"
                               r"make_plugin_manager\(\)") as raised:
                PromptAssembler(store, plugin_manager=bare)
            assert "plugin_manager" == raised.value.field
            for call in (load_plugins, slot_owners, embedder_factories,
                         reranker_from_plugins):
                with pytest.raises(InvalidArgumentError, match="make_plugin_manager"):
                    call(bare)
        pm = make_plugin_manager()
        assert ["specs"] == load_plugins(pm)
        assert {"user", "project", "agent"} == set(slot_owners(pm))
        prompt = PromptAssembler(store, plugin_manager=pm,
                                 templates={"item.md.j2": "- {{ item.text | shout }}\n"}
                                 ).assemble(AssemblyRequest("hi"))
        assert "- THE USER EDITS CODE IN HELIX.\n" in prompt.text


def test_the_demo_uses_the_installed_plugins_as_every_command_does(tmp_path, monkeypatch):
    """``ctxslots demo`` made its own assembler and stores without the command's plugins:
    an installed plugin's contributor, slot and reranker were missing from the demo while
    ``ctxslots assemble`` used them. The demo's prompt now holds the plugin's sticky
    section, its search is reranked, and its dump lists the plugin slot's section."""
    folder = install_plugin(tmp_path / "site", "house", (
        "from ctxslots import Item, MemoryContributor, Section, hookimpl\n\n\n"
        "class HouseRules:\n    name = 'house_rules'\n    priority = 95\n    sticky = True\n\n"
        "    def contribute(self, request):\n"
        "        return Section(title='House rules', items=[Item('Answer in British English.')])\n"
        "\n\n@hookimpl\ndef register_contributors(register, store):\n"
        "    register(HouseRules())\n"
        "    if store is not None and 'style' in store.limits.slots:\n"
        "        register(MemoryContributor(store, slot='style', name='style_memory',\n"
        "                                   title='Style', priority=60))\n"
        "\n\n@hookimpl\ndef register_slots(register):\n"
        "    register('style', 'How the team writes code.')\n"
        "\n\n@hookimpl\ndef rerank_hits(query, hits):\n    return list(reversed(hits))\n"))
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("CTXSLOTS_LOAD_PLUGINS", "house")
    importlib.invalidate_caches()
    result = CliRunner().invoke(cli, ["demo", "--db-dir", str(tmp_path / "demo")],
                                catch_exceptions=False)
    assert 0 == result.exit_code, result.output
    prompt = result.output.split("Assembled prompt", 1)[1].split("):\n\n", 1)[1]
    assert prompt.startswith("## House rules\n- Answer in British English.\n")
    searched = result.output.split("Search (scope shop-api)", 1)[1].split("\n\n")[1]
    assert "moved here from #" in searched.splitlines()[1]
    assert "| style_memory | 60 |" in result.output
