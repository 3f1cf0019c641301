"""Policies and options refuse values they cannot work with when they are built, with
InvalidArgumentError naming the field, instead of failing (or ranking wrongly) later."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ctxslots import (
    CtxslotsError,
    FactStore,
    FlushPolicy,
    InvalidArgumentError,
    Limits,
    OpenAIChatClient,
    PrunePolicy,
    QueryPolicy,
    RankingPolicy,
)

NAN, INF = float("nan"), float("inf")

REFUSED: list[tuple[type, dict[str, Any], str]] = [
    (RankingPolicy, {"decay_days": {"agent": 0}}, "decay_days"),
    (RankingPolicy, {"decay_days": {"agent": -30}}, "decay_days"),
    (RankingPolicy, {"decay_days": {"agent": NAN}}, "decay_days"),
    (RankingPolicy, {"decay_days": {"agent": "30"}}, "decay_days"),
    (RankingPolicy, {"decay_days": None}, "decay_days"),
    (RankingPolicy, {"decay_days": ["agent"]}, "decay_days"),
    (RankingPolicy, {"default_decay_days": 0}, "default_decay_days"),
    (RankingPolicy, {"reinforcement_weight": NAN}, "reinforcement_weight"),
    (RankingPolicy, {"reinforcement_weight": INF}, "reinforcement_weight"),
    (RankingPolicy, {"reinforcement_weight": 100.0}, "reinforcement_weight"),
    (RankingPolicy, {"reinforcement_weight": "0.2"}, "reinforcement_weight"),
    (RankingPolicy, {"min_cosine": NAN}, "min_cosine"),
    (RankingPolicy, {"vector_only_min_cosine": 2.0}, "vector_only_min_cosine"),
    (RankingPolicy, {"lexical_weight": INF}, "lexical_weight"),
    (RankingPolicy, {"rrf_k": "60"}, "rrf_k"),
    (RankingPolicy, {"fusion": "max"}, "fusion"),
    (RankingPolicy, {"link_weight": INF}, "link_weight"),
    (QueryPolicy, {"min_token_length": "2"}, "min_token_length"),
    (QueryPolicy, {"max_tokens": None}, "max_tokens"),
    (QueryPolicy, {"max_doc_share": NAN}, "max_doc_share"),
    (QueryPolicy, {"stop_words": "the"}, "stop_words"),
    (QueryPolicy, {"stop_words": None}, "stop_words"),
    (Limits, {"max_value_bytes": "4096"}, "max_value_bytes"),
    (Limits, {"max_value_bytes": 0}, "max_value_bytes"),
    (Limits, {"max_tags": None}, "max_tags"),
    (Limits, {"max_key_chars": NAN}, "max_key_chars"),
    (Limits, {"max_batch": 0}, "max_batch"),
    (Limits, {"strict_slots": "no"}, "strict_slots"),
    (Limits, {"slots": None}, "slots"),
    (Limits, {"slot_owners": None}, "slot_owners"),
    (Limits, {"secrets": "hide"}, "secrets"),
    (PrunePolicy, {"slot_caps": None}, "slot_caps"),
    (PrunePolicy, {"protect_score": NAN}, "protect_score"),
    (PrunePolicy, {"headroom": 1}, "headroom"),
    (PrunePolicy, {"headroom": 5}, "headroom"),
    (PrunePolicy, {"headroom": INF}, "headroom"),
    (FlushPolicy, {"every_n_turns": 0}, "every_n_turns"),
    (FlushPolicy, {"token_threshold": "2000"}, "token_threshold"),
    (FlushPolicy, {"encoding": "p50k_base"}, "encoding"),
    (FlushPolicy, {"encoding": None}, "encoding"),
]


@pytest.mark.parametrize(("kind", "options", "field"), REFUSED,
                         ids=[f"{k.__name__}-{f}-{i}" for i, (k, _, f) in enumerate(REFUSED)])
def test_policy_refuses_value(kind: type, options: dict[str, Any], field: str) -> None:
    """A value the policy cannot work with raises InvalidArgumentError naming the field."""
    with pytest.raises(InvalidArgumentError) as raised:
        kind(**options)
    assert field == raised.value.field
    assert field in str(raised.value)


@pytest.mark.parametrize("options", [{"max_tokens": 0}, {"response_format": "xml"}])
def test_chat_client_refuses_option(options: dict[str, Any]) -> None:
    """The chat client's options are refused with InvalidArgumentError too."""
    with pytest.raises(InvalidArgumentError) as raised:
        OpenAIChatClient("http://127.0.0.1:9/v1", "m", **options)
    assert next(iter(options)) == raised.value.field


def test_refused_value_is_still_a_value_error() -> None:
    """Code that caught ValueError from a policy keeps catching it, and CtxslotsError catches it."""
    with pytest.raises(ValueError):
        RankingPolicy(rrf_k=0)
    with pytest.raises(CtxslotsError):
        QueryPolicy(min_token_length=0)


def test_edge_values_rank(db_path: Path) -> None:
    """Values at the edges of what is allowed build a policy that searches."""
    policy = RankingPolicy(decay_days={"agent": 0.001, "user": None}, default_decay_days=None,
                           reinforcement_weight=20.0, min_cosine=-1.0, lexical_weight=1.0)
    with FactStore(db_path, ranking=policy,
                   query_policy=QueryPolicy(stop_words=frozenset({"the"}))) as store:
        fact = store.add("agent", "The deploy runs on Friday.")
        store.reinforce(fact.id)
        assert [fact.id] == [hit.fact.id for hit in store.search("deploy")]
