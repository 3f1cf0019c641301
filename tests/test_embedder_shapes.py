"""What an embedder's ``embed(texts)`` may return: any array-like of one row of
``dimension`` numbers per text; anything else is an error naming the embedder."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from ctxslots import FactStore, RankingPolicy
from ctxslots.errors import EmbedderError, InvalidArgumentError

FUSED = RankingPolicy(vector_weight=1.0)


class LetterEmbedder:
    """Letter counts of unit length, returned as ``shape`` says: ``"lists"`` (a list of
    lists of floats, as a plugin written without numpy would), ``"float64"``, or a
    wrong shape (``"row short"``, ``"column long"``, ``"words"``)."""

    dimension = 26

    def __init__(self, shape: str) -> None:
        self.shape = shape
        self.model_id = f"letters-{shape.replace(' ', '-')}"

    def embed(self, texts: Sequence[str]) -> Any:
        rows = []
        for text in texts:
            row = [0.0] * 26
            for ch in text.lower():
                if "a" <= ch <= "z":
                    row[ord(ch) - 97] += 1.0
            norm = sum(x * x for x in row) ** 0.5 or 1.0
            rows.append([x / norm for x in row])
        if self.shape == "float64":
            return np.array(rows, dtype=np.float64)
        if self.shape == "row short":
            return rows[1:]
        if self.shape == "column long":
            return [[*row, 0.0] for row in rows]
        if self.shape == "words":
            return ["not a vector"] * len(rows)
        return rows


@pytest.mark.parametrize("shape", ["lists", "float64"])
@pytest.mark.parametrize("writes", ["inline", "background"])
def test_an_embedder_may_return_any_array_like_of_the_right_shape(location, shape, writes):
    """Vectors returned as a list of lists (or float64) are written, searched and rebuilt
    like a float32 array's, with no warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with FactStore(location, embedder=LetterEmbedder(shape), ranking=FUSED,
                       vector_writes=writes) as store:
            store.add("project", "Dogs are welcome in the office.", scope="shop")
            store.add("project", "The build runs on Fridays.", scope="shop")
            store.wait_for_vectors()
            assert () == store.doctor().problems
            assert 2 == store.reindex(full=True)
            [hit, *_] = store.search("welcome dogs", scope="shop")

    assert "Dogs are welcome in the office." == hit.fact.value
    assert hit.trace.vector_rank == 1


@pytest.mark.parametrize(("shape", "said"), [
    ("row short", r"returned vectors of shape \(1, 26\) for 2 text\(s\)"),
    ("column long", r"returned vectors of shape \(2, 27\) for 2 text\(s\)"),
    ("words", r"returned list that is no array of numbers"),
])
def test_an_embedder_of_another_shape_is_an_error_naming_it(location, shape, said):
    """Rows too few, columns too many or no numbers: ``reindex`` raises an EmbedderError
    naming the embedder and what ``embed`` returns; a write keeps its facts without
    vectors and says so in a warning naming it too."""
    embedder = LetterEmbedder(shape)
    with FactStore(location, embedder=embedder, ranking=FUSED,
                   vector_writes="background") as store:
        with pytest.warns(RuntimeWarning, match=f"embedder {embedder.model_id} returned"):
            store.add("project", "Dogs are welcome in the office.", scope="shop")
            store.add("project", "The build runs on Fridays.", scope="shop")
            store.wait_for_vectors()
        assert 2 == store.stats()["facts"]
        with pytest.raises(EmbedderError, match=f"embedder {embedder.model_id} {said}.*; "
                           r"embed\(texts\) returns one row of 26 floats per text"):
            store.reindex()


@pytest.mark.parametrize(("facts", "said"), [(1, "1 fact has none"), (2, "2 facts have none")])
def test_the_warning_of_facts_left_without_vectors_counts_them_in_words(tmp_path, facts, said):
    """One fact an embedder of another shape could not embed: the warning read "1 fact
    have none"."""
    with FactStore(tmp_path / "m.db", embedder=LetterEmbedder("column long"), ranking=FUSED,
                   vector_writes="background") as store:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with store.batch():
                for n in range(facts):
                    store.add("project", f"Dogs are welcome in office {n}.", scope="shop")
            assert not store.wait_for_vectors()
    [message] = [str(w.message) for w in caught if "could not be written" in str(w.message)]
    assert f"; {said}: `ctxslots doctor` counts them" in message


class _EmbedOnly:
    """An embedder written with embed() alone, or with only one of its attributes."""

    def __init__(self, **attributes: Any) -> None:
        self.__dict__.update(attributes)

    def embed(self, texts: Sequence[str]) -> Any:
        return [[1.0, 0.0]] * len(texts)


class _Delegating:
    """A wrapper handing every attribute on to the embedder it wraps."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def embed(self, texts: Sequence[str]) -> Any:
        return self._inner.embed(texts)


@pytest.mark.parametrize(("attributes", "lacking"), [
    ({}, "model_id or dimension"), ({"dimension": 2}, "model_id"), ({"model_id": "m"}, "dimension"),
])
def test_an_embedder_without_its_name_or_dimension_is_refused_in_one_line(
        tmp_path, attributes, lacking):
    """An object with embed() but no model_id or dimension opened a store with a bare
    AttributeError; it is an InvalidArgumentError naming what it lacks, and nothing is
    created. A wrapper handing attributes on through __getattr__ still opens."""
    path = tmp_path / "m.db"
    with pytest.raises(InvalidArgumentError, match=f"_EmbedOnly has embed\\(\\) but no {lacking}: "
                       "an embedder object has model_id") as raised:
        FactStore(path, embedder=_EmbedOnly(**attributes))
    assert "embedder" == raised.value.field
    assert not path.exists()
    with FactStore(path, embedder=_Delegating(_EmbedOnly(model_id="m", dimension=2)),
                   ranking=FUSED) as store:
        store.add("user", "The user likes tea.")
        assert ["The user likes tea."] == [h.fact.value for h in store.search("tea")]
