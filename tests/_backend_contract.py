"""Fixtures and helpers of the backend contract tests (tests/test_backend_contract*.py).

``opener`` is parametrised over the engines: ``sqlite`` (skipped until
``ctxslots.stores.sqlite`` exists) and ``postgresql`` (the session's real server,
a fresh database per test).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

__all__ = ["NOW", "add", "fixture_backend", "fixture_mixed", "fixture_opener", "make_row", "unit"]

NOW = 1_800_000_000.0
Opener = Callable[[], Any]


def make_row(value: str = "A plain memory.", **fields: Any) -> dict[str, Any]:
    """A fact row with every column but ``id``; ``fields`` override the defaults."""
    row: dict[str, Any] = {
        "slot": "agent", "scope": "", "key": None, "value": value, "tags": "",
        "source": None, "confidence": 1.0, "score": 0.0, "created_at": NOW,
        "updated_at": NOW, "observed_at": NOW, "last_accessed": None, "access_count": 0,
        "expires_at": None, "superseded_by": None, "context": None, "user_id": "",
        "agent_id": "",
    }
    row.update(fields)
    return row


@pytest.fixture(name="opener", params=["sqlite", "postgresql"])
def fixture_opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Opens another backend instance on one fresh store of the engine (own connections)."""
    opened: list[Any] = []
    if request.param == "sqlite":
        sqlite = pytest.importorskip("ctxslots.stores.sqlite")
        path = tmp_path / "memory.db"

        def open_sqlite() -> Any:
            backend = sqlite.SQLiteBackend(path)
            opened.append(backend)
            return backend

        yield open_sqlite
    else:
        url = request.getfixturevalue("pg_url")
        from ctxslots.stores.postgres import PostgresBackend

        def open_postgres() -> Any:
            backend = PostgresBackend(url, pool_size=2)
            opened.append(backend)
            return backend

        yield open_postgres
    for backend in opened:
        backend.close()


@pytest.fixture(name="backend")
def fixture_backend(opener: Opener) -> Any:
    """One backend on a fresh store."""
    return opener()


def add(backend: Any, value: str = "A plain memory.", **fields: Any) -> int:
    """Insert one fact in its own transaction; its id."""
    with backend.transaction():
        return int(backend.insert(make_row(value, **fields)))


def unit(*values: float) -> np.ndarray:
    """A normalised float32 vector."""
    v = np.array(values, dtype=np.float32)
    return v / np.linalg.norm(v)


@pytest.fixture(name="mixed")
def fixture_mixed(backend: Any) -> dict[str, int]:
    """Facts in two scopes and the global one, two slots, one expired, one superseded."""
    ids = {}
    with backend.transaction():
        ids["global"] = backend.insert(make_row("Global.", slot="user", observed_at=NOW - 30))
        ids["w1"] = backend.insert(make_row("In w1.", scope="w1", observed_at=NOW - 10))
        ids["w2"] = backend.insert(make_row("In w2.", scope="w2", observed_at=NOW - 20))
        ids["expired"] = backend.insert(make_row("Gone.", scope="w1", expires_at=NOW - 1,
                                                 observed_at=NOW - 5))
        ids["old"] = backend.insert(make_row("Older copy.", scope="w1", observed_at=NOW - 40))
        backend.set_superseded([(ids["old"], ids["w1"])])
    return ids
