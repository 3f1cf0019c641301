"""Text a store takes is text both engines can keep: no NUL in a source or a reason (as in
a value). Refused with the field's name, on either engine, and nothing is written."""

from __future__ import annotations

import io
import json

import pytest

from ctxslots import ANY, InvalidFactError, InvalidImportError


def test_a_source_with_nul_is_refused_in_writes_and_reads(store):
    with pytest.raises(InvalidFactError, match="source must not contain NUL") as caught:
        store.add("agent", "Deploys run on Fridays.", source="web\x00page")
    assert caught.value.field == "source"
    with pytest.raises(InvalidFactError, match="source must not contain NUL"):
        store.upsert("user", "city", "Lisbon", source="\x00")
    with pytest.raises(InvalidFactError, match="source must not contain NUL"):
        store.facts(source="web\x00")
    with pytest.raises(InvalidFactError, match="source must not contain NUL"):
        store.search("deploys", source="web\x00", track_access=False)
    assert store.facts(slots=["agent", "user"], scope=ANY) == []


def test_a_reason_with_nul_is_refused_and_the_fact_stays(store):
    fact = store.add("agent", "Deploys run on Fridays.")
    with pytest.raises(InvalidFactError, match="reason must not contain NUL"):
        store.forget(fact.id, reason="moved\x00")
    assert store.get(fact.id).value == "Deploys run on Fridays."


def test_an_import_with_a_nul_source_names_its_line_and_writes_nothing(store):
    lines = [{"format": "ctxslots-facts", "version": 1},
             {"slot": "user", "value": "The user likes tea.", "source": "chat"},
             {"slot": "user", "value": "The user likes coffee.", "source": "chat\x00log"}]
    with pytest.raises(InvalidImportError, match="source") as caught:
        store.import_jsonl(io.StringIO("\n".join(json.dumps(r) for r in lines)))
    assert "line 3" in str(caught.value)
    assert store.facts() == []
