"""A process killed (SIGKILL) while applying a flush leaves all of it or none of it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import ctxslots
from _sql import raw
from ctxslots import FactStore
from ctxslots.testing import ScriptedChatServer, ScriptedReply

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX only")

OPERATIONS = 150
PAUSE_PER_OPERATION = 0.01  # applying takes about 1.5 s: the kill lands inside it

CHILD = """
import sys, time
from ctxslots import FactStore, MemoryFlusher, OpenAIChatClient

db, base_url, pause = sys.argv[1], sys.argv[2], float(sys.argv[3])

def progress(index, op):
    if index == 0:
        print("applying", flush=True)
    time.sleep(pause)

with FactStore(db) as store:
    client = OpenAIChatClient(base_url, "scripted", max_retries=0, timeout=30)
    flusher = MemoryFlusher(store, client, on_operation=progress)
    report = flusher.flush([{"role": "user", "content": "Remember all of these."}],
                           conversation="crash", scope="shop", force=True)
    print("committed", report.flush_id, flush=True)
    time.sleep(60)
"""


def _reply() -> str:
    ops = [{"op": "upsert", "slot": "project", "key": f"crash.{i}",
            "value": f"Crash fact number {i} of the shop.", "confidence": 0.8, "tags": ["crash"]}
           for i in range(OPERATIONS)]
    ops.append({"op": "upsert", "slot": "user", "key": "name", "value": "The user is Ada King.",
                "confidence": 1.0, "tags": []})
    ops.append({"op": "forget", "slot": "agent", "key": "ci.cache", "reason": "Fixed."})
    return json.dumps({"operations": ops})


def _child_env() -> dict[str, str]:
    src = str(Path(ctxslots.__file__).resolve().parents[1])
    return {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}


def _state(path: Path) -> dict:
    with FactStore(path, embedder=False) as store:
        conn = raw(store)
        return {
            "integrity": conn.scalar("PRAGMA integrity_check"),
            "crash_facts": conn.scalar("SELECT count(*) FROM facts WHERE key LIKE 'crash.%'"),
            "name": store.get_by_key("user", "name").value,
            "ci_cache_live": store.get_by_key("agent", "ci.cache") is not None,
            "progress": conn.scalar(
                "SELECT messages_read FROM flush_progress WHERE conversation = 'crash'"),
            "others": {f.value for f in store.facts(scope="shop") if not (f.key or "").startswith(
                ("crash.", "name", "ci.cache"))},
            "fts_rows": conn.scalar("SELECT count(*) FROM facts_fts WHERE facts_fts MATCH 'crash'"),
        }


@pytest.mark.parametrize("kill_after", [0.0, 0.2, 0.6, "commit"], ids=lambda d: f"kill-{d}")
def test_sigkill_while_applying_leaves_all_or_nothing(tmp_path, kill_after):
    """Killing the flushing process mid-transaction leaves none of the flush; after commit, all."""
    db = tmp_path / "memory.db"
    with FactStore(db) as store:
        store.upsert("user", "name", "The user is Ada Lovelace.")
        store.upsert("agent", "ci.cache", "The CI cache is cold on Mondays.")
        store.add("project", "The shop runs on Postgres 16.", scope="shop")
    with ScriptedChatServer([ScriptedReply(_reply())]) as server:
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(db), server.base_url, str(PAUSE_PER_OPERATION)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_child_env(),
        )
        try:
            wanted = "committed" if kill_after == "commit" else "applying"
            line = child.stdout.readline()
            while line and not line.startswith(wanted):
                line = child.stdout.readline()
            assert line.startswith(wanted), child.stderr.read()
            if kill_after != "commit":
                time.sleep(kill_after)
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=30)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
            child.stdout.close()
            child.stderr.close()
    assert -signal.SIGKILL == child.returncode

    state = _state(db)

    assert "ok" == state["integrity"]
    assert {"The shop runs on Postgres 16."} == state["others"]
    if kill_after == "commit":
        assert (OPERATIONS, OPERATIONS, "The user is Ada King.", False, 1) == (
            state["crash_facts"], state["fts_rows"], state["name"], state["ci_cache_live"],
            state["progress"])
    else:
        assert (0, 0, "The user is Ada Lovelace.", True, None) == (
            state["crash_facts"], state["fts_rows"], state["name"], state["ci_cache_live"],
            state["progress"])
