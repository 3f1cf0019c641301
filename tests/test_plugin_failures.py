"""A plugin that fails is named: its hooks that raise or return what they should not, its
contributors of the wrong shape, and its sections that cannot be made."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import ctxslots
from _installed_plugin import install_plugin
from ctxslots import (
    AssemblyRequest,
    FactStore,
    Item,
    PromptAssembler,
    Section,
    StaticContributor,
    hookimpl,
)
from ctxslots.errors import InvalidRequestError
from ctxslots.plugins import PluginError, make_plugin_manager, slot_owners

#: Where the ctxslots this test imported lives, for a child process to import the same.
SRC = Path(ctxslots.__file__).resolve().parents[1]


def _installed(folder: Path, source: str) -> dict[str, str]:
    """The environment of a child process in which ``source`` is the module of the
    installed plugin ``bad`` (an entry point of a distribution on ``folder``), the only
    plugin loaded."""
    install_plugin(folder, "bad",
                   "from ctxslots import Item, Section, hookimpl\n" + textwrap.dedent(source))
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), str(SRC)]),
            "CTXSLOTS_LOAD_PLUGINS": "bad"}


def _store(folder: Path) -> str:
    """A store of one fact in ``folder``, for the command to open."""
    path = folder / "m.db"
    with FactStore(path) as store:
        store.add("project", "The shop deploys on Friday.")
    return str(path)


def _ctxslots(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ctxslots", *args], capture_output=True,
                          text=True, timeout=300, env=env, check=False)


SLOTS_RAISE = """
@hookimpl
def register_slots(register):
    raise RuntimeError("the slots config is missing")
"""

JINJA_RAISE = """
@hookimpl
def prepare_jinja2_environment(env):
    raise RuntimeError("the filters cannot be set up")
"""

PRIORITY_STR = """
class Glossary:
    name = "glossary"
    priority = "high"
    sticky = False

    def contribute(self, request):
        return None


@hookimpl
def register_contributors(register):
    register(Glossary())
"""


@pytest.mark.parametrize(("source", "said"), [
    (SLOTS_RAISE, ("Error: register_slots of plugin bad failed: RuntimeError: the slots "
                   "config is missing")),
    (JINJA_RAISE, ("Error: prepare_jinja2_environment of plugin bad failed: RuntimeError: "
                   "the filters cannot be set up")),
    (PRIORITY_STR, ("Error: plugin bad registered a bad contributor: contributor 'glossary' "
                    "needs an integer priority from -1000000 to 1000000, not 'high'")),
], ids=["register_slots", "prepare_jinja2_environment", "priority"])
def test_a_failing_plugin_hook_is_one_error_line_naming_the_plugin(tmp_path, source, said):
    """An installed plugin whose register_slots or prepare_jinja2_environment raises, or
    whose contributor has a priority that is no integer: ``ctxslots assemble`` prints
    one line naming the plugin, no traceback, and exits 1."""
    env = _installed(tmp_path / "site", source)
    done = _ctxslots(env, "--db", _store(tmp_path), "assemble", "how do I deploy?")
    assert (1, [said]) == (done.returncode, done.stderr.splitlines())


def test_a_register_slots_hook_that_raises_or_returns_is_a_plugin_error_naming_it():
    """A register_slots hook that raises, or returns its slots instead of registering
    them (which was ignored), is a PluginError naming the plugin."""
    class Raises:
        @hookimpl
        def register_slots(self, register):
            raise RuntimeError("the slots config is missing")

    class Returns:
        @hookimpl
        def register_slots(self, register):
            return [("diary", "What the user wrote in their diary.", "user")]

    for plugin, said in ((Raises(), ("register_slots of plugin .* failed: RuntimeError: the "
                                     "slots config is missing")),
                         (Returns(), "register_slots of plugin .* returned a value")):
        with pytest.raises(PluginError, match=said) as raised:
            slot_owners(make_plugin_manager([plugin]))
        assert raised.value.plugin and raised.value.plugin in str(raised.value)


def test_a_prepare_jinja2_environment_hook_that_raises_is_a_plugin_error_naming_it():
    """An implementation that raises stops the assembler with a PluginError naming its
    plugin; another plugin's implementation is still called when none raises."""
    class Raises:
        @hookimpl
        def prepare_jinja2_environment(self, env):
            raise RuntimeError("the filters cannot be set up")

    class Shouts:
        @hookimpl
        def prepare_jinja2_environment(self, env):
            env.filters["shout"] = str.upper

    with pytest.raises(PluginError, match="prepare_jinja2_environment of plugin .* failed: "
                       "RuntimeError: the filters cannot be set up") as raised:
        PromptAssembler(None, plugins=[Shouts(), Raises()])
    assert raised.value.plugin and raised.value.plugin in str(raised.value)
    assert "LOUD" == PromptAssembler(None, plugins=[Shouts()]).environment.filters["shout"]("loud")


class _Shaped:
    """A contributor with the given attributes."""

    def __init__(self, **attributes: object) -> None:
        self.name = "glossary"
        self.priority = 50
        self.sticky = False
        self.contribute = lambda request: None
        self.__dict__.update(attributes)


@pytest.mark.parametrize(("attributes", "said"), [
    ({"priority": "high"}, "needs an integer priority from -1000000 to 1000000, not 'high'"),
    ({"priority": 95.5}, "needs an integer priority from -1000000 to 1000000, not 95.5"),
    ({"priority": 10**40}, "needs an integer priority from -1000000 to 1000000, not 1000"),
    ({"priority": -10**6 - 1}, "needs an integer priority from -1000000 to 1000000, not -1000001"),
    ({"sticky": "yes"}, "needs sticky = True or False"),
    ({"contribute": None}, r"has no contribute\(request\) method"),
])
def test_a_plugin_contributor_of_the_wrong_shape_is_a_plugin_error_naming_the_plugin(
        attributes, said):
    """A registered contributor with a bad priority (not an int, or outside ±10**6, the
    range MemoryContributor keeps to), sticky or contribute is a PluginError naming the
    plugin and the contributor; given in contributors=, an InvalidRequestError."""
    contributor = _Shaped(**attributes)

    class Glossary:
        @hookimpl
        def register_contributors(self, register):
            register(contributor)

    plugin = Glossary()
    with pytest.raises(PluginError, match=f"registered a bad contributor: contributor "
                       f"'glossary' {said}") as raised:
        PromptAssembler(None, plugins=[plugin])
    assert raised.value.plugin and f"plugin {raised.value.plugin} " in str(raised.value)
    with pytest.raises(InvalidRequestError, match=said):
        PromptAssembler(None, contributors=[contributor])


def test_any_contributor_keeps_to_the_priority_range():
    """Priorities of ±10**6 are taken; one past them is refused, as MemoryContributor does."""
    for priority in (10**6, -10**6):
        assert priority == StaticContributor("rules", "Rules", ["Be brief."],
                                             priority=priority).priority
    with pytest.raises(InvalidRequestError, match="from -1000000 to 1000000, not 1000001"):
        StaticContributor("rules", "Rules", ["Be brief."], priority=10**6 + 1)


class _Failing:
    """Contributors whose sections cannot be made, each its own way."""

    sticky = False
    priority = 50

    def __init__(self, name: str) -> None:
        self.name = name

    def contribute(self, request: AssemblyRequest) -> object:
        if self.name == "raises":
            raise RuntimeError("the service is down")
        if self.name == "wrong_type":
            return "a glossary"
        if self.name == "wrong_name":
            return Section(title="Impostor", name="someone_else", items=[Item("x")])
        return Section(title="Glossary", item_template="broken.md.j2", items=[Item("SLA")])


FAILING = ("raises", "wrong_type", "wrong_name", "broken_template")


@pytest.mark.parametrize("run", ["assemble", "aassemble"])
def test_every_failed_section_is_one_warning_naming_its_contributor(caplog, run):
    """A contributor that raises, returns no Section, returns another's section or whose
    template fails: one warning each, naming it and the error its dump section shows."""
    assembler = PromptAssembler(None, contributors=[_Failing(n) for n in FAILING],
                                templates={"broken.md.j2": "{{ no_such_variable }}"})
    request = AssemblyRequest("hello", budget=2000)
    with caplog.at_level(logging.WARNING, logger="ctxslots.assembler"):
        if run == "assemble":
            prompt = assembler.assemble(request)
        else:
            prompt = asyncio.run(assembler.aassemble(request))

    errors = {s.name: s.error for s in prompt.sections}
    assert set(FAILING) == {n for n, e in errors.items() if e}
    warned = sorted(r.getMessage() + (f": {type(r.exc_info[1]).__name__}: {r.exc_info[1]}"
                                      if r.exc_info else "") for r in caplog.records)
    assert sorted(f"contributor {n!r} failed: {errors[n]}" for n in FAILING) == warned


WRONG_SECTIONS = """
class WrongType:
    name = "wrong_type"
    priority = 50
    sticky = False

    def contribute(self, request):
        return "a glossary"


class BrokenTemplate:
    name = "broken_template"
    priority = 50
    sticky = False

    def contribute(self, request):
        return Section(title="Glossary", item_template="broken.md.j2", items=[Item("SLA")])


@hookimpl
def register_contributors(register):
    register(WrongType())
    register(BrokenTemplate())


@hookimpl
def prepare_jinja2_environment(env):
    import jinja2
    env.loader = jinja2.ChoiceLoader(
        [env.loader, jinja2.DictLoader({"broken.md.j2": "{{ no_such_variable }}"})])
"""


def test_the_command_warns_of_every_failed_section(tmp_path):
    """``ctxslots assemble`` prints one warning line per failed section, also for a
    contributor that returns no Section or whose template fails, and still succeeds."""
    env = _installed(tmp_path / "site", WRONG_SECTIONS)
    done = _ctxslots(env, "--db", _store(tmp_path), "assemble", "how do I deploy?")
    assert 0 == done.returncode, done.stderr
    assert sorted([
        ("warning: contributor 'broken_template' failed: template 'broken.md.j2' failed: "
         "UndefinedError: 'no_such_variable' is undefined"),
        ("warning: contributor 'wrong_type' failed: TypeError: contribute() returned str, "
         "expected Section or None"),
    ]) == sorted(done.stderr.splitlines())


class _CancelledUnder:
    """An async contributor whose awaited call is cancelled by someone else (a shared
    client's pending request cancelled), so asyncio.CancelledError comes out of it."""

    name = "remote"
    priority = 60
    sticky = False

    async def contribute(self, request: AssemblyRequest) -> Section:
        loop = asyncio.get_running_loop()
        pending = loop.create_future()
        loop.call_soon(pending.cancel)
        await pending
        return Section(title="Remote", items=[Item("never shown")])


class _PlainCancelled:
    """A plain contributor out of which asyncio.CancelledError comes."""

    name = "plain_remote"
    priority = 55
    sticky = False

    def contribute(self, request: AssemblyRequest) -> Section:
        raise asyncio.CancelledError


@pytest.mark.parametrize("timeout", [None, 120.0])
@pytest.mark.parametrize("run", ["assemble", "aassemble"])
def test_a_contributor_out_of_which_cancelled_error_comes_is_a_failed_section(run, timeout):
    """A CancelledError the assembly did not ask for (something a contributor awaited was
    cancelled) is that contributor's failure: its section is an error, the others stay,
    and the turn neither raises nor waits out the timeout."""
    class Remote:
        @hookimpl
        def register_contributors(self, register):
            register(_CancelledUnder())
            register(_PlainCancelled())
            register(StaticContributor("rules", "Rules", ["Answer briefly."]))

    assembler = PromptAssembler(None, plugins=[Remote()], contributor_timeout=timeout)
    request = AssemblyRequest("hello")
    prompt = (assembler.assemble(request) if run == "assemble"
              else asyncio.run(assembler.aassemble(request)))
    assert prompt.text == "## Rules\n- Answer briefly.\n"
    assert {s.name: s.error for s in prompt.sections} == {
        "remote": "CancelledError", "plain_remote": "CancelledError", "rules": None}



@pytest.mark.parametrize("reason", ["budget", "header_does_not_fit", "contributor_error"])
def test_an_item_offered_dropped_for_the_assemblers_reason_is_the_contributors_error(reason):
    """A contributor may offer items dropped for slot_limit, threshold or duplicate; one
    offered dropped for the budget (or a header that did not fit, or an error) would make
    the dump say the budget left it out of a prompt with room to spare. Its section is an
    error naming the reason, and the other sections stay."""
    class Says:
        name, priority, sticky = "gloss", 50, False

        def contribute(self, request: AssemblyRequest) -> Section:
            return Section(title="Gloss", items=[Item("SLA: service level agreement"),
                                                 Item("RTO: recovery time", dropped=reason)])

    rules = StaticContributor("rules", "Rules", ["Answer briefly."])
    prompt = PromptAssembler(None, contributors=[Says(), rules]).assemble(
        AssemblyRequest("hello", budget=2000))
    assert prompt.text == "## Rules\n- Answer briefly.\n"
    errors = {s.name: s.error for s in prompt.sections}
    assert errors == {"gloss": ("InvalidRequestError: an item is offered dropped for "
                                "slot_limit, threshold or duplicate, not " + reason
                                + " (the assembler's to decide)"), "rules": None}
    for allowed in ("slot_limit", "threshold", "duplicate"):
        assert allowed == Item("RTO", dropped=allowed).dropped.value
