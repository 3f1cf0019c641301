"""A real ``ctxslots ui`` process for the inspector's tests, and the demo's facts."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from ctxslots import FactStore

TOKEN = "inspector-test-token-0123456789"

#: A value whose markup a page must show as text, never run.
HOSTILE = ("Ada's note <script>window.ran = 1; alert(1)</script>"
           "<img src=x onerror=\"alert(2)\"> & \"quotes\"")


def demo_facts(store: FactStore) -> dict[str, int]:
    """Facts of two users, an agent's lessons and two scopes; their ids by name."""
    return {
        "name": store.upsert("user", "name", "The user is called Ada and prefers short answers.",
                             user="ada").id,
        "bob": store.upsert("user", "name", "The user is called Bob.", user="bob").id,
        "deploy": store.upsert("project", "deploy.day", "Deploys of shop-api run every Friday "
                               "after the 15:00 freeze.", scope="shop-api",
                               tags=["release"]).id,
        "tests": store.upsert("project", "tests.command", "Run the shop-api tests with "
                              "`pytest -x services/billing`.", scope="shop-api").id,
        "blog": store.upsert("project", "deploy.day", "The blog deploys on every push.",
                             scope="blog").id,
        "flaky": store.add("agent", "test_refund_retry in services/billing is flaky under load; "
                           "rerun it once.", scope="shop-api", agent="coder").id,
        "english": store.add("agent", "Answer in British English when the user writes it.",
                             agent="coder").id,
        "hostile": store.add("project", HOSTILE, scope="shop-api").id,
    }


@contextmanager
def serving(location: str, *args: str, token: str = TOKEN) -> Iterator[str]:
    """``ctxslots ui`` over ``location`` on a free loopback port; the address it printed
    (with the token), once it listens."""
    env = {**os.environ, "CTXSLOTS_UI_TOKEN": token}
    proc = subprocess.Popen([sys.executable, "-m", "ctxslots", "--db", location, "ui",
                             "--port", "0", *args], stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert line.startswith("Inspector at http://127.0.0.1:"), line + proc.stderr.read()
        yield line.split(" at ", 1)[1].strip()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        if proc.stderr is not None:
            proc.stderr.close()
