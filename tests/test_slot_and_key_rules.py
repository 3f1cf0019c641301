"""One rule for slots and one for keys, the same through the store, the CLI, the tools and the flusher."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from ctxslots import (
    FactStore,
    InvalidArgumentError,
    InvalidFactError,
    Limits,
    MemoryFlusher,
    MemoryTools,
    OpenAIChatClient,
    PluginError,
    SlotOwners,
    hookimpl,
)
from ctxslots.cli import cli
from ctxslots.flusher import operations_schema
from ctxslots.plugins import known_slots, make_plugin_manager, slot_owners
from ctxslots.stores import KEY_PATTERN
from ctxslots.testing import ScriptedChatServer
from ctxslots.tools import openai_tools
from ctxslots.tools._spec import whole


def _cli(db_path, *args, env=None):
    return CliRunner().invoke(cli, ["--db", str(db_path), *args], prog_name="ctxslots",
                              catch_exceptions=False, env=env)


def test_a_mistyped_slot_is_refused_naming_the_known_ones(db_path):
    """``remember projects ...`` stores nothing and says which slots exist."""
    result = _cli(db_path, "remember", "projects", "Deploys run on Friday.")
    assert 1 == result.exit_code
    assert "Error: unknown slot 'projects' (known: user, project, agent)\n" == result.output
    with FactStore(db_path) as store:
        assert 0 == store.stats()["facts"]


@pytest.mark.parametrize("opt_in", [["--free-slots"], []], ids=["flag", "variable"])
def test_free_slots_are_an_opt_in(db_path, opt_in):
    """``--free-slots`` (or CTXSLOTS_FREE_SLOTS=1) accepts any well-formed slot name."""
    env = None if opt_in else {"CTXSLOTS_FREE_SLOTS": "1"}
    result = _cli(db_path, *opt_in, "remember", "notes", "A free-form note.", env=env)
    assert 0 == result.exit_code, result.output
    assert result.output.startswith("[id:1] notes A free-form note.")


def test_plugins_register_slots_and_malformed_or_taken_names_are_refused():
    """known_slots lists the built-ins first, then plugins' slots; a bad or taken name is a PluginError."""
    class Team:
        @hookimpl
        def register_slots(self, register):
            register("team", "Facts about the user's team.")

    assert ["user", "project", "agent", "team"] == list(known_slots(make_plugin_manager([Team()])))
    for bad in ("Team Notes", "user"):
        class Bad:
            @hookimpl
            def register_slots(self, register, _name=bad):
                register(_name, "Anything.")
        with pytest.raises(PluginError):
            known_slots(make_plugin_manager([Bad()]))


def test_the_cli_refuses_an_owner_the_slot_lacks_in_one_line(db_path):
    """remember user ... --scope: user facts belong to a user; nothing is stored."""
    result = _cli(db_path, "remember", "user", "Priya is on vacation until Dec 5.",
                  "--key", "vacation", "--scope", "atlas-api")
    assert result.exit_code == 1
    assert result.output == ("Error: user facts belong to a user, not to a workspace (scope): "
                             "leave out scope\n")
    with FactStore(db_path) as store:
        assert store.stats()["facts"] == 0


def test_a_store_given_the_plugin_slots_accepts_them(db_path):
    """Limits(slots=known_slots(pm)) makes a plugin's slot writable."""
    class Team:
        @hookimpl
        def register_slots(self, register):
            register("team", "Facts about the user's team.")

    limits = Limits(slots=tuple(known_slots(make_plugin_manager([Team()]))))
    with FactStore(db_path, limits=limits) as store:
        assert "team" == store.add("team", "Grace is on call.").slot


def test_a_plugin_slot_says_whose_facts_it_holds(db_path):
    """register(name, description, owners): a slot of users' facts keeps each user's
    apart, refuses a scope, and the built-ins keep their owners."""
    class Diary:
        @hookimpl
        def register_slots(self, register):
            register("diary", "What the user wrote down each day.", "user")

    owners = slot_owners(make_plugin_manager([Diary()]))
    assert owners["diary"] == SlotOwners(user=True, scope=False)
    assert (owners["user"].describe(), owners["project"].describe(),
            owners["agent"].describe()) == ("user", "scope", "agent+scope")
    limits = Limits(slots=tuple(owners), slot_owners=owners)
    with FactStore(db_path, limits=limits) as store:
        mine = store.add("diary", "Ran 5 km before work.", user="alice")
        store.add("diary", "Slept in.", user="bob")
        assert [f.id for f in store.facts(slots=["diary"], user="alice")] == [mine.id]
        with pytest.raises(InvalidFactError, match="diary facts belong to a user"):
            store.add("diary", "Not a workspace's.", scope="shop")


@pytest.mark.parametrize("owners", ["user+workspace", "", 7])
def test_a_plugin_slot_with_malformed_owners_is_a_plugin_error(owners):
    class Bad:
        @hookimpl
        def register_slots(self, register):
            register("diary", "Anything.", owners)

    with pytest.raises(PluginError, match="owners"):
        slot_owners(make_plugin_manager([Bad()]))


def test_the_tools_name_the_unknown_slot_and_the_known_ones(store):
    """A tool call with a mistyped slot answers an error in words, not a type complaint."""
    answer = MemoryTools(store).dispatch("memory_store", {"slot": "projects", "value": "x"})
    assert 'Error: unknown slot "projects" (known: user, project, agent)' == answer


def test_one_key_rule_for_the_cli_the_tools_and_the_flusher(db_path, tmp_path):
    """"Deploy Day" is a key everywhere; a key with a line break is refused everywhere."""
    assert 0 == _cli(db_path, "remember", "project", "Friday.", "--key", "Deploy Day").exit_code
    refused = _cli(db_path, "remember", "project", "Friday.", "--key", "two\nlines")
    assert 1 == refused.exit_code and "key" in refused.output

    with FactStore(db_path) as store:
        tools = MemoryTools(store)
        assert tools.dispatch("memory_store", {"slot": "user", "value": "Tea.", "key": "Drink Of Choice"}
                              ).startswith("Stored")
        assert tools.dispatch("memory_store", {"slot": "user", "value": "Tea.", "key": "a\nb"}
                              ).startswith("Error: 'key'")
        ops = [{"op": "upsert", "slot": "user", "key": key, "value": f"Value {n}.",
                "confidence": 1.0, "tags": []} for n, key in enumerate(["Home Town", "bad\tkey"])]
        with ScriptedChatServer([json.dumps({"operations": ops})]) as server:
            flusher = MemoryFlusher(store, OpenAIChatClient(server.base_url, "m", max_retries=0))
            report = flusher.flush([{"role": "user", "content": "I grew up in Leeds."}],
                                   conversation="c", force=True)
        assert ["Home Town"] == [c.fact.key for c in report.added]
        assert ["bad\tkey"] == [r.operation.key for r in report.rejected]
        assert {"Deploy Day", "Drink Of Choice", "Home Town"} == {
            f.key for f in store.facts(slots=["user", "project"])}


def test_the_schemas_carry_the_key_pattern():
    """The tools' schema (matching whole strings) and the flusher's reply schema hold the
    store's key pattern."""
    store_tool = next(t for t in openai_tools() if t["function"]["name"] == "memory_store")
    assert whole(KEY_PATTERN) == store_tool["function"]["parameters"]["properties"]["key"][
        "pattern"]
    upsert = operations_schema()["properties"]["operations"]["items"]["anyOf"][0]
    assert KEY_PATTERN == upsert["properties"]["key"]["pattern"]


def test_bad_arguments_raise_invalid_argument_error_still_caught_as_invalid_fact(store):
    """A bad query, limit or conversation raises InvalidArgumentError, which callers catching
    InvalidFactError (the former error) still catch."""
    flusher = MemoryFlusher(store, OpenAIChatClient("http://127.0.0.1:1/v1", "m"))
    for call, field in [(lambda: store.search(42), "query"), (lambda: store.search("x", limit=0), "limit"),
                        (lambda: flusher.flush([], conversation="a\nb"), "conversation")]:
        with pytest.raises(InvalidArgumentError) as info:
            call()
        assert field == info.value.field
        assert isinstance(info.value, InvalidFactError) and isinstance(info.value, ValueError)
    with pytest.raises(InvalidFactError) as fact_error:
        store.add("user", "   ")
    assert not isinstance(fact_error.value, InvalidArgumentError)


def test_a_key_or_owner_of_invisible_characters_alone_is_refused(location):
    """A key (or user) made only of format characters (a right-to-left mark, a zero-width
    space) is refused as an empty one is."""
    from ctxslots import FactStore, InvalidFactError

    with FactStore(location) as store:
        for key in ("\u200f", " \u200b "):
            with pytest.raises(InvalidFactError, match="visible character"):
                store.upsert("user", key, "Hidden.")
        with pytest.raises(InvalidFactError, match="visible character"):
            store.add("user", "Hidden.", user="\u200b")
