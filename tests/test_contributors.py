"""The built-in contributors: the three memory slots and the fixed-lines contributor."""

from __future__ import annotations

import pytest

from _assembler_helpers import make_store
from ctxslots import (
    AgentMemoryContributor,
    AssemblyRequest,
    DropReason,
    InvalidRequestError,
    Item,
    Limits,
    MemoryContributor,
    ProjectMemoryContributor,
    Section,
    StaticContributor,
    UserMemoryContributor,
)
from ctxslots.contributors import check_contributor
from ctxslots.stores import BUILTIN_SLOTS


@pytest.fixture(name="mem")
def fixture_mem(tmp_path):
    """A store with facts in every slot, in two scopes and globally."""
    store = make_store(tmp_path / "mem.db", [
        ("user", None, "The user deploys from a Linux laptop."),
        ("user", None, "Another user deploys from a Mac and is never shown to this one.",
         "someone-else"),
        ("project", "shop", "Deploys of shop run on Friday."),
        ("project", "blog", "Deploys of blog run on push."),
        ("project", None, "Every project deploys through the shared CI."),
        ("agent", "shop", "Deploys of shop failed twice when the cache was cold."),
        ("agent", None, "Deploy logs are in /var/log/deploy."),
    ])
    yield store
    store.close()


def _values(section):
    return [item.text for item in section.items]


class _Store:
    """Any object with search() is accepted as a store."""

    def search(self, *args, **kwargs):
        return []


def test_defaults_follow_the_design():
    """User is sticky at 88 with a profile, project 80, agent 70; no item ceiling by default."""
    shapes = [(c.name, c.slot, c.priority, c.sticky, c.limit, c.profile_size)
              for c in (UserMemoryContributor(_Store()), ProjectMemoryContributor(_Store()),
                        AgentMemoryContributor(_Store()))]
    assert [("user_memory", "user", 88, True, None, 5),
            ("project_memory", "project", 80, False, None, 0),
            ("agent_memory", "agent", 70, False, None, 0)] == shapes


def test_user_slot_reads_global_facts_only(mem):
    """The user contributor searches global user facts, whatever the request's scope."""
    section = UserMemoryContributor(mem).contribute(AssemblyRequest("deploys", scope="shop"))
    assert ["The user deploys from a Linux laptop."] == _values(section)
    assert section.sticky and 88 == section.priority and "user_memory" == section.name


def test_project_slot_reads_its_scope_and_global_facts(mem):
    """The project contributor sees its scope and global facts, never another scope."""
    section = ProjectMemoryContributor(mem).contribute(AssemblyRequest("deploys", scope="shop"))
    assert {"Deploys of shop run on Friday.", "Every project deploys through the shared CI."} \
        == set(_values(section))
    blog = ProjectMemoryContributor(mem).contribute(AssemblyRequest("deploys", scope="blog"))
    assert "Deploys of shop run on Friday." not in _values(blog)


def test_agent_slot_is_scoped(mem):
    """The agent contributor reads its scope's lessons and global ones."""
    section = AgentMemoryContributor(mem).contribute(AssemblyRequest("deploys", scope="shop"))
    assert {"Deploys of shop failed twice when the cache was cold.",
            "Deploy logs are in /var/log/deploy."} == set(_values(section))


def test_items_carry_fact_key_and_trace(mem):
    """Each memory item carries its fact, a fact key and the store's retrieval trace."""
    section = ProjectMemoryContributor(mem).contribute(AssemblyRequest("deploys", scope="shop"))
    for rank, item in enumerate(section.items, start=1):
        assert f"fact:{item.fact.id}" == item.key
        assert rank == item.trace.rank
        assert item.text == item.fact.value


def test_nothing_found_offers_no_section(mem):
    """A message that matches nothing gives None, not an empty section."""
    assert ProjectMemoryContributor(mem).contribute(AssemblyRequest("zebra", scope="shop")) is None
    assert UserMemoryContributor(mem).contribute(AssemblyRequest("?!", scope="shop")) is None


def test_slot_limit_drops_are_visible(tmp_path):
    """Facts found beyond the limit are offered as dropped with reason slot_limit."""
    store = make_store(tmp_path / "many.db",
                       [("agent", None, f"Deploy lesson number {i}.") for i in range(9)])
    section = AgentMemoryContributor(store, limit=4, overfetch=3).contribute(
        AssemblyRequest("deploy lesson"))
    reasons = [item.dropped for item in section.items]
    assert [None] * 4 + [DropReason.SLOT_LIMIT] * 3 == reasons
    assert "beyond the limit of 4 per slot" == section.items[-1].detail
    store.close()


def test_a_limit_without_overfetch_says_the_section_stopped_at_it(tmp_path):
    """With ``overfetch=0`` no dropped item says why the section holds no more: its note
    names the limit, and the prompt's report says it as the section's ``stopped``."""
    from ctxslots import PromptAssembler

    store = make_store(tmp_path / "many.db",
                       [("agent", None, f"Deploy lesson number {i}.") for i in range(9)])
    contributor = AgentMemoryContributor(store, limit=4, overfetch=0)
    section = contributor.contribute(AssemblyRequest("deploy lesson"))
    assert [None] * 4 == [item.dropped for item in section.items]
    assert "offered its limit of 4 facts; more may match" == section.stop_note
    prompt = PromptAssembler(store, contributors=[contributor]).assemble(
        AssemblyRequest("deploy lesson"), record_shown=False)
    assert section.stop_note == prompt.sections[0].stopped
    store.close()


def test_threshold_drops_weak_hits(mem):
    """Hits scoring under min_score are offered as dropped with reason threshold."""
    section = ProjectMemoryContributor(mem, min_score=1e9).contribute(
        AssemblyRequest("deploys", scope="shop"))
    assert section.items
    assert {DropReason.THRESHOLD} == {item.dropped for item in section.items}


def test_searches_do_not_count_as_access(mem):
    """Contributing alone never counts a fact as shown to the model."""
    section = ProjectMemoryContributor(mem).contribute(AssemblyRequest("deploys", scope="shop"))
    for item in section.items:
        assert 0 == mem.get(item.fact.id).access_count


@pytest.mark.parametrize("kwargs", [
    {"limit": 0}, {"limit": "10"}, {"limit": True}, {"overfetch": -1},
    {"min_score": "high"}, {"slot": "Bad Slot"}, {"priority": 1.5},
])
def test_bad_settings_are_refused(mem, kwargs):
    """Malformed settings raise InvalidRequestError, a ValueError, naming the field."""
    with pytest.raises(InvalidRequestError) as info:
        AgentMemoryContributor(mem, **kwargs)
    assert isinstance(info.value, ValueError)
    assert next(iter(kwargs)) == info.value.field


def test_store_must_have_search():
    """A store without search() is refused up front."""
    with pytest.raises(InvalidRequestError, match="store must be a FactStore"):
        UserMemoryContributor(object())


def test_custom_slot_contributor(tmp_path):
    """A plugin slot gets its own contributor from MemoryContributor."""
    store = make_store(tmp_path / "s.db", [("style", None, "Prefer tabs in Makefiles.")],
                       limits=Limits(slots=(*BUILTIN_SLOTS, "style")))
    contributor = MemoryContributor(store, slot="style", name="style_memory",
                                    title="House style", priority=60)
    section = contributor.contribute(AssemblyRequest("makefiles tabs"))
    assert ["Prefer tabs in Makefiles."] == _values(section)
    store.close()


def test_static_contributor_offers_its_lines():
    """StaticContributor returns its lines as items, or None when it has none."""
    rules = StaticContributor("rules", "House rules", ["Be brief.", "Cite files."], priority=95,
                              sticky=True)
    section = rules.contribute(AssemblyRequest("hi"))
    assert Section(title="House rules", name="rules", priority=95, sticky=True,
                   items=(Item("Be brief."), Item("Cite files."))) == section
    assert StaticContributor("none", "Nothing", []).contribute(AssemblyRequest("hi")) is None


@pytest.mark.parametrize("args", [
    ("", "Title", ["x"]), ("name", "", ["x"]), ("name", "Title", "not a list"),
    ("name", "Title", [1, 2]),
])
def test_static_contributor_validates(args):
    """A StaticContributor with a blank name or title, or non-string lines, is refused."""
    with pytest.raises(InvalidRequestError):
        StaticContributor(*args)


def test_check_contributor_names_what_is_missing():
    """check_contributor explains which part of the contributor shape is wrong."""

    class NoPriority:
        name, priority, sticky = "x", "high", False

        def contribute(self, request):
            return None

    class NoContribute:
        name, priority, sticky = "x", 1, False

    with pytest.raises(InvalidRequestError, match="integer priority"):
        check_contributor(NoPriority())
    with pytest.raises(InvalidRequestError, match="contribute"):
        check_contributor(NoContribute())
    with pytest.raises(InvalidRequestError, match="name"):
        check_contributor(object())


@pytest.mark.parametrize("kwargs", [
    {"title": 3}, {"title": "T", "items": "not items"}, {"title": "T", "items": ["text"]},
    {"title": "T", "priority": "high"}, {"title": "T", "priority": True},
    {"title": "T", "sticky": 1}, {"title": "T", "intro": 5}, {"title": "T", "name": None},
])
def test_malformed_sections_are_refused(kwargs):
    """Section fields of the wrong type raise InvalidRequestError, a ValueError, naming the field."""
    with pytest.raises(InvalidRequestError) as info:
        Section(**kwargs)
    assert isinstance(info.value, ValueError)
    assert info.value.field in kwargs


@pytest.mark.parametrize("kwargs", [
    {"text": None}, {"text": "x", "key": 12}, {"text": "x", "dropped": "forgotten"},
    {"text": "x", "fact": "not a fact"}, {"text": "x", "detail": 1.5},
    {"text": "x", "trace": {"final": 1.0}}, {"text": "x", "profile": 1},
    {"text": b"bytes"}, {"text": "x", "key": True},
])
def test_malformed_items_are_refused(kwargs):
    """Item fields of the wrong type, or an unknown drop reason, raise InvalidRequestError."""
    with pytest.raises(InvalidRequestError) as info:
        Item(**kwargs)
    assert info.value.field in kwargs


def test_items_accept_subclasses_of_their_types():
    """A str subclass (a markup string, say) is a valid text, key and detail."""

    class Markup(str):
        pass

    item = Item(Markup("x"), key=Markup("k"), detail=Markup("d"))
    assert ("x", "k", "d") == (item.text, item.key, item.detail)


def test_drop_reasons_convert_from_their_names():
    """A drop reason may be given by its string value."""
    assert DropReason.SLOT_LIMIT == Item("x", dropped="slot_limit").dropped
