"""The numbers of RankingPolicy, Limits and QueryPolicy are checked when a policy is made."""

from __future__ import annotations

import math
from typing import Any

import pytest

from ctxslots import FactStore, InvalidArgumentError, Limits, QueryPolicy, RankingPolicy

BAD_RANKING = [
    {"decay_days": {"agent": 0}},
    {"decay_days": {"agent": -1.0}},
    {"decay_days": {"agent": math.nan}},
    {"decay_days": {"agent": "30"}},
    {"decay_days": None},
    {"default_decay_days": 0},
    {"default_decay_days": -365.0},
    {"default_decay_days": math.inf},
    {"reinforcement_weight": math.nan},
    {"reinforcement_weight": 1e6},
    {"reinforcement_weight": -0.2},
    {"lexical_weight": math.inf},
    {"vector_weight": "1"},
    {"rrf_k": math.inf},
    {"min_cosine": math.nan},
    {"min_cosine": 2.0},
    {"vector_only_min_cosine": "0.2"},
    {"fusion": "best"},
    {"period_boost": True},
    {"common_word_boost": math.nan},
    {"common_word_share": 0.0},
    {"common_subject_boost": -1.0},
    {"episode_weight": 1.0},
    {"link_min_strength": 0.0},
    {"link_weight": None},
]


@pytest.mark.parametrize("fields", BAD_RANKING, ids=repr)
def test_a_ranking_value_out_of_range_is_refused_naming_the_field(fields: dict[str, Any]) -> None:
    """A ranking value that failed every later search (division by zero, overflow, NaN
    scores) or turned the order upside down is an InvalidArgumentError, a ValueError,
    naming the field."""
    (name,) = fields
    with pytest.raises(InvalidArgumentError, match=name) as info:
        RankingPolicy(**fields)
    assert isinstance(info.value, ValueError)
    assert name == info.value.field


@pytest.mark.parametrize("fields", [
    {"max_value_bytes": -1}, {"max_value_bytes": "4096"}, {"max_context_bytes": 0},
    {"max_key_chars": None}, {"max_scope_chars": 1.5}, {"max_tags": -1}, {"max_tag_chars": 0},
    {"max_batch": math.nan}, {"max_import_line_chars": True}, {"strict_slots": "no"},
    {"slots": 5}, {"slots": ["User Facts"]}, {"slot_owners": ["user"]},
    {"secrets": "hide"},
], ids=repr)
def test_a_limit_out_of_range_is_refused_naming_the_field(fields: dict[str, Any]) -> None:
    """A limit under 1, not a whole number, or a slot no slot may be is refused when the
    limits are made, not by every write after (a TypeError, or "over the limit of -1")."""
    (name,) = fields
    with pytest.raises(InvalidArgumentError, match=name) as info:
        Limits(**fields)
    assert name == info.value.field


@pytest.mark.parametrize("fields", [
    {"min_token_length": "2"}, {"max_tokens": 1.5}, {"max_doc_share": None},
    {"common_min_facts": -1}, {"max_query_share": math.nan},
], ids=repr)
def test_a_query_policy_value_out_of_range_is_refused(fields: dict[str, Any]) -> None:
    """The query policy's numbers are refused as the other policies' are."""
    (name,) = fields
    with pytest.raises(InvalidArgumentError, match=name):
        QueryPolicy(**fields)


def test_the_defaults_and_the_edges_of_each_range_are_kept() -> None:
    """The defaults and each range's ends stay valid."""
    assert 0.2 == RankingPolicy().reinforcement_weight
    edges = RankingPolicy(decay_days={}, default_decay_days=None, reinforcement_weight=0.0,
                          lexical_weight=0.0, vector_weight=0.0, min_cosine=-1.0,
                          vector_only_min_cosine=1.0, episode_weight=0.0,
                          link_min_strength=None)
    assert (-1.0, 1.0, None) == (edges.min_cosine, edges.vector_only_min_cosine,
                                 edges.link_min_strength)
    assert ("user", "my-notes_2") == Limits(max_tags=0, slots=("user", "my-notes_2")).slots
    assert 1.0 == QueryPolicy(common_min_facts=0, max_doc_share=1.0).max_doc_share


@pytest.mark.parametrize("option", ["ranking", "limits", "query_policy"])
def test_a_store_given_something_else_as_a_policy_says_so_and_makes_no_file(
        tmp_path: Any, option: str) -> None:
    """A store given a number or a mapping where a policy belongs refuses it by name before
    making the file (it raised AttributeError from deep inside)."""
    path = tmp_path / "memory.db"
    with pytest.raises(InvalidArgumentError, match=option):
        FactStore(path, **{option: {"vector_weight": 1.0}})
    assert not path.exists()


@pytest.mark.parametrize("score", [math.nan, math.inf, "3", None])
def test_a_prune_policy_protect_score_that_is_no_number_is_refused(score: Any) -> None:
    """A protecting score that is not a finite number is refused when the policy is made:
    NaN protected no reinforced fact from pruning, without a word."""
    from ctxslots import CtxslotsError, PrunePolicy

    with pytest.raises(CtxslotsError, match="protect_score") as info:
        PrunePolicy(protect_score=score)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("fields", [{"every_n_turns": 0}, {"token_threshold": "2000"}], ids=repr)
def test_a_flush_policy_threshold_out_of_range_is_a_ctxslots_error(fields: dict[str, Any]) -> None:
    """A flush threshold out of range is an InvalidArgumentError (still a ValueError)."""
    from ctxslots import FlushPolicy

    (name,) = fields
    with pytest.raises(InvalidArgumentError, match=name):
        FlushPolicy(**fields)


def test_one_text_names_one_slot_wherever_slots_are_named(tmp_path) -> None:
    """Limits, searches, the agent tools and the flusher read a bare text as one slot name
    (one rule: the limits took it letter by letter, then refused it)."""
    from ctxslots import FactStore, MemoryFlusher, MemoryTools, OpenAIChatClient

    assert ("user",) == Limits(slots="user").slots
    with FactStore(tmp_path / "m.db") as store:
        store.add("user", "The user edits code in Helix.")
        store.add("agent", "Helix came up in a review.")
        assert ["user"] == [h.fact.slot for h in store.search("Helix", slots="user")]
        assert ("user",) == MemoryTools(store, slots="user").slots
        client = OpenAIChatClient("http://127.0.0.1:9/v1", "m")  # never called
        assert ["user"] == list(MemoryFlusher(store, client, slots="user").slots)
