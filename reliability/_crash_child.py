"""The writer a crash trial kills: ``python -m reliability._crash_child MODE DB LOG BASE_URL SEED``.

It prints ``ready`` once the store is open, then writes until it is killed, and
``acked`` once its first unit of work has been acknowledged.
Before each unit of work (a batch, some single writes, a flush) it appends an
``{"intent": n, "facts": [...], "atomic": bool}`` line to LOG (atomic: one
transaction); after the call that commits it
has returned, an ``{"ack": n}`` line. Each line is one ``write(2)`` on an
``O_APPEND`` descriptor, so a kill never leaves half of a line that matters.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from collections.abc import Callable
from typing import Any

from reliability.crash import FLUSH_SCOPE, flush_facts, flush_reply_ops, unit_facts

#: Stop on its own after this long, in case the parent is gone.
MAX_RUN_S = 120.0


def _logger(path: str) -> Callable[[dict[str, Any]], None]:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def log(entry: dict[str, Any]) -> None:
        os.write(fd, (json.dumps(entry) + "\n").encode("utf-8"))

    return log


def _write_unit(store: Any, facts: list[list[Any]], batched: bool) -> None:
    def one(slot: str, scope: str | None, key: str | None, value: str) -> None:
        if key is None:
            store.add(slot, value, scope=scope, tags=["crash"])
        else:
            store.upsert(slot, key, value, scope=scope, tags=["crash"])

    if batched:
        with store.batch():
            for fact in facts:
                one(*fact)
    else:
        for fact in facts:
            one(*fact)


def main(argv: list[str]) -> None:
    """Run the writer of one crash trial until killed."""
    from ctxslots import FactStore, MemoryFlusher, OpenAIChatClient

    mode, db, log_path, base_url, seed = argv
    rng = random.Random(f"child:{seed}")
    log = _logger(log_path)
    store = FactStore(db)
    flusher = None
    if mode == "flush":
        client = OpenAIChatClient(base_url, "scripted", max_retries=0, timeout=60)
        # A short pause per operation keeps the process inside the apply
        # transaction for a good share of its time.
        flusher = MemoryFlusher(store, client, prune=None,
                                on_operation=lambda index, op: time.sleep(0.002))
    print("ready", flush=True)
    messages: list[dict[str, str]] = []
    deadline = time.monotonic() + MAX_RUN_S
    n = 0
    while time.monotonic() < deadline:
        if mode == "flush":
            assert flusher is not None
            log({"intent": n, "facts": flush_facts(flush_reply_ops(n)), "atomic": True})
            messages.append({"role": "user", "content": f"Message {n}: remember the crash notes."})
            report = flusher.flush(messages, conversation="crash", scope=FLUSH_SCOPE, force=True)
            if report.status != "applied":
                raise SystemExit(f"flush {n} was not applied: {report.status} {report.error}")
        else:
            facts = unit_facts(n, rng, max_size=3 if mode == "reindex" else 25)
            batched = len(facts) > 1 and rng.random() < 0.7
            log({"intent": n, "facts": facts, "atomic": batched})
            _write_unit(store, facts, batched)
        log({"ack": n})
        if n == 0:
            print("acked", flush=True)
        if mode == "reindex":
            store.reindex()
        n += 1
    store.close()


if __name__ == "__main__":
    main(sys.argv[1:])
