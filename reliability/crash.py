"""A writer process killed with SIGKILL at a random moment leaves a sound store.

Each trial starts ``python -m reliability._crash_child`` in one of three modes,
waits for it to be writing (with ``after_ack``, for its first acknowledged unit),
sleeps a seeded random delay and kills it:

- ``batch``: batches of upserts and adds (``store.batch()``), and runs of
  single writes;
- ``flush``: :class:`~ctxslots.MemoryFlusher` flushes against a
  :class:`~ctxslots.testing.ScriptedChatServer`, each applying 15 operations
  with a short pause per operation;
- ``reindex``: a small unit of writes, then ``store.reindex()`` over the
  4,000-fact store it started from, again and again.

Then the parent reopens the file and checks: ``PRAGMA integrity_check`` is
``ok`` on a raw connection; ``store.doctor()`` is clean, or clean after one
``store.reindex()`` (the trial records which); every unit the child
acknowledged is there with its exact values; a unit written in one transaction
is there whole or not at all, and single writes only as a prefix; no fact
appears that the child never meant to write, and none of the seed facts of a
``reindex`` trial is missing; each written fact (the first 40, and 10 seed
facts) is found by a search for its own token; after a flush, the conversation's read position
matches the flushes present.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import attrs

from ctxslots.stores.sqlite import open_connection

from ._table import format_table

__all__ = ["MODES", "CrashResult", "CrashTrial", "run_crash", "run_trial"]

#: The kinds of work a trial kills.
MODES = ("batch", "flush", "reindex")

#: The scope flushes and project facts are written to.
FLUSH_SCOPE = "crash"

#: Operations in each scripted flush reply.
FLUSH_OPERATIONS = 15

#: Facts in the store a ``reindex`` trial starts from.
REINDEX_FACTS = 4000

#: Facts checked by search per trial (the first ones, in order).
SEARCH_CHECKS = 40

_SLOTS = ("user", "project", "agent")
_ROOT = Path(__file__).resolve().parents[1]


def _scope_of(slot: str) -> str | None:
    return None if slot == "user" else FLUSH_SCOPE


def unit_facts(n: int, rng: random.Random, *, max_size: int) -> list[list[Any]]:
    """The facts of the child's ``n``-th unit of work: ``[slot, scope, key, value]`` each.

    Every value holds a token of its own (``tk{n}x{j}``) for the search check;
    keys are never reused, so each acknowledged value is the final one.
    """
    out: list[list[Any]] = []
    for j in range(rng.randint(1, max_size)):
        slot = rng.choice(_SLOTS)
        key = f"u{n}.{j}" if rng.random() < 0.6 else None
        out.append([slot, _scope_of(slot), key,
                    f"Crash unit {n} fact {j} holds token tk{n}x{j} for the check."])
    return out


def flush_reply_ops(n: int) -> list[dict[str, Any]]:
    """The operations of the ``n``-th scripted flush reply."""
    return [{"op": "upsert", "slot": _SLOTS[j % 3], "key": f"f{n}.{j}",
             "value": f"Flush {n} operation {j} holds token tf{n}x{j} for the check.",
             "confidence": 0.9, "tags": ["crash"]} for j in range(FLUSH_OPERATIONS)]


def flush_facts(ops: list[dict[str, Any]]) -> list[list[Any]]:
    """What a flush of ``ops`` writes, as ``[slot, scope, key, value]`` facts.

    The flusher's default scoped slots are ``project`` only.
    """
    return [[op["slot"], FLUSH_SCOPE if op["slot"] == "project" else None, op["key"], op["value"]]
            for op in ops]


def _flush_reply(n: int) -> str:
    return json.dumps({"operations": flush_reply_ops(n)})


@attrs.frozen
class CrashTrial:
    """One killed writer and what its store looked like afterwards.

    Attributes:
        number: The trial's number.
        mode: ``batch``, ``flush`` or ``reindex``.
        delay_s: How long after ``ready`` the kill was sent.
        units: Units of work the child started.
        acked: Units the child acknowledged (all checked present).
        facts_checked: Acknowledged facts checked for their exact value.
        in_flight: What became of the unit being written at the kill:
            ``"committed"``, ``"rolled back"``, ``"partial prefix"`` (single
            writes only) or ``"none"``.
        doctor: ``"clean"``, or ``"clean after reindex (...)"`` with what the
            first doctor found.
        failures: Every check that failed.
    """

    number: int
    mode: str
    delay_s: float
    units: int
    acked: int
    facts_checked: int
    in_flight: str
    doctor: str
    failures: tuple[str, ...]


@attrs.frozen
class CrashResult:
    """Every trial of a crash run.

    Attributes:
        trials: The trials, in order.
        wall_s: Seconds the whole run took.
    """

    trials: tuple[CrashTrial, ...]
    wall_s: float

    @property
    def failures(self) -> list[str]:
        """Every failed check, prefixed with its trial."""
        return [f"trial {t.number} ({t.mode}): {f}" for t in self.trials for f in t.failures]

    @property
    def ok(self) -> bool:
        """Whether every trial passed."""
        return not self.failures

    def table(self) -> str:
        """A summary per mode, as markdown."""
        rows = []
        for mode in MODES:
            ts = [t for t in self.trials if t.mode == mode]
            if not ts:
                continue
            rows.append((
                mode, len(ts), sum(t.acked for t in ts), sum(t.facts_checked for t in ts),
                sum(t.in_flight == "committed" for t in ts),
                sum(t.in_flight == "rolled back" for t in ts),
                sum(t.in_flight == "partial prefix" for t in ts),
                sum(t.doctor == "clean" for t in ts),
                sum(t.doctor != "clean" for t in ts),
                sum(bool(t.failures) for t in ts),
            ))
        headers = ["mode", "trials", "acked units", "acked facts checked",
                   "in-flight committed", "in-flight rolled back", "in-flight prefix",
                   "doctor clean",
                   "clean after reindex", "failed trials"]
        return (format_table(headers, rows)
                + f"\n\n{len(self.trials)} trials in {self.wall_s:.1f} s")


def _env() -> dict[str, str]:
    import ctxslots

    paths = [str(_ROOT), str(Path(ctxslots.__file__).resolve().parents[1])]
    old = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths + ([old] if old else []))}


def _reindex_template(folder: Path) -> Path:
    """A store of :data:`REINDEX_FACTS` facts, written once per run and copied per trial."""
    from ctxslots import FactStore

    path = folder / "reindex-template.db"
    if not path.exists():
        with FactStore(path) as store:
            with store.batch():
                for i in range(REINDEX_FACTS):
                    slot = _SLOTS[i % 3]
                    store.add(slot, f"Seed fact {i} holds token rs{i}x for the check.",
                              scope=_scope_of(slot))
            open_connection(store.path, migrate=False).execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    return path


def _kill_after_ready(cmd: list[str], delay: float, stderr_path: Path,
                      after_ack: bool = False) -> tuple[bool, str]:
    """Start ``cmd``, wait for ``ready`` (and, with ``after_ack``, for ``acked``: its first
    unit committed), sleep ``delay``, SIGKILL it.

    Returns whether the kill hit a live process, and the child's stderr.
    """
    with stderr_path.open("w") as err:
        child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=_env(),
                                 cwd=_ROOT)
        try:
            assert child.stdout is not None
            wanted = ["ready", "acked"] if after_ack else ["ready"]
            seen = [child.stdout.readline().strip() for _ in wanted]
            if seen == wanted:
                time.sleep(delay)
            alive = child.poll() is None
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=60)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
            if child.stdout is not None:
                child.stdout.close()
    return alive and child.returncode == -signal.SIGKILL, stderr_path.read_text()


def _read_log(path: Path) -> tuple[dict[int, dict[str, Any]], set[int]]:
    intents: dict[int, dict[str, Any]] = {}
    acks: set[int] = set()
    if not path.exists():
        return intents, acks
    for line in path.read_text().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # only a line cut by the kill can be unreadable
        if "intent" in entry:
            intents[int(entry["intent"])] = entry
        elif "ack" in entry:
            acks.add(int(entry["ack"]))
    return intents, acks


def run_trial(number: int, mode: str, delay: float, folder: Path, *, seed: int = 0,
              after_ack: bool = False) -> CrashTrial:
    """Run one crash trial in ``folder`` (created) and check the store it leaves.

    :param after_ack: Count ``delay`` from the child's first acknowledged unit, not from
        its start: the kill then lands after some work was committed, however loaded
        the machine is.
    """
    from ctxslots.testing import ScriptedChatServer

    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    folder.mkdir(parents=True, exist_ok=True)
    db, log = folder / f"trial-{number}.db", folder / f"trial-{number}.log"
    for stale in (db, log, Path(f"{db}-wal"), Path(f"{db}-shm")):
        stale.unlink(missing_ok=True)
    if mode == "reindex":
        shutil.copyfile(_reindex_template(folder.parent), db)
    cmd = [sys.executable, "-m", "reliability._crash_child", mode, str(db), str(log)]
    if mode == "flush":
        with ScriptedChatServer([_flush_reply(n) for n in range(500)]) as server:
            killed, stderr = _kill_after_ready(cmd + [server.base_url, f"{seed}:{number}"], delay,
                                               folder / f"trial-{number}.err", after_ack)
    else:
        killed, stderr = _kill_after_ready(cmd + ["-", f"{seed}:{number}"], delay,
                                           folder / f"trial-{number}.err", after_ack)
    failures: list[str] = []
    if not killed:
        failures.append("the child was not running when killed: "
                        + (stderr.strip().splitlines() or ["(no stderr)"])[-1])
    intents, acks = _read_log(log)
    return _check(number, mode, delay, db, intents, acks, failures)


def _check(number: int, mode: str, delay: float, db: Path, intents: dict[int, dict[str, Any]],
           acks: set[int], failures: list[str]) -> CrashTrial:
    import apsw

    from ctxslots import FactStore

    raw = apsw.Connection(str(db))
    try:
        integrity = "\n".join(str(r[0]) for r in raw.execute("PRAGMA integrity_check"))
    finally:
        raw.close()
    if integrity != "ok":
        failures.append(f"integrity_check: {integrity}")
    with FactStore(db) as store:
        first = store.doctor()
        doctor = "clean"
        if not first.ok:
            store.reindex()
            again = store.doctor()
            doctor = f"clean after reindex ({'; '.join(first.problems)})"
            if not again.ok:
                failures.append(f"doctor after reindex: {'; '.join(again.problems)}")
        rows = open_connection(store.path, migrate=False).rows("SELECT id, slot, scope, key, value FROM facts")
        progress = open_connection(store.path, migrate=False).scalar(
            "SELECT messages_read FROM flush_progress WHERE conversation = 'crash'")
        present = {(r["slot"], r["scope"] or None, r["key"], r["value"]): int(r["id"]) for r in rows}
        in_flight, checked, written = _check_units(intents, acks, present, failures)
        expected = sum(len(u["facts"]) for u in intents.values()) + (
            REINDEX_FACTS if mode == "reindex" else 0)
        seeds = sum(1 for slot, scope, key, value in present if value.startswith("Seed fact "))
        if mode == "reindex" and seeds != REINDEX_FACTS:
            failures.append(f"{REINDEX_FACTS - seeds} of the {REINDEX_FACTS} seed facts are missing")
        phantoms = len(present) - written - seeds
        if phantoms:
            failures.append(f"{phantoms} facts no unit wrote (of {expected} meant)")
        if mode == "flush":
            applied = sum(1 for u in intents.values()
                          if all(tuple(f) in present for f in u["facts"]))
            if (progress or 0) != applied:
                failures.append(f"flush progress says {progress} messages read, "
                                f"{applied} flushes are present")
        _check_search(store, intents, present, failures)
    return CrashTrial(number=number, mode=mode, delay_s=delay, units=len(intents), acked=len(acks),
                      facts_checked=checked, in_flight=in_flight, doctor=doctor,
                      failures=tuple(failures))


def _check_units(intents: dict[int, dict[str, Any]], acks: set[int],
                 present: dict[tuple[Any, ...], int], failures: list[str]) -> tuple[str, int, int]:
    """Check acknowledged and in-flight units; return (in-flight outcome, facts checked, written)."""
    in_flight, checked, written = "none", 0, 0
    last = max(intents, default=None)
    for n, unit in sorted(intents.items()):
        facts = [tuple(f) for f in unit["facts"]]
        found = [f in present for f in facts]
        written += sum(found)
        if n in acks:
            checked += len(facts)
            missing = [f for f, ok in zip(facts, found) if not ok]
            if missing:
                failures.append(f"unit {n} was acknowledged but {len(missing)} of its facts are "
                                f"missing, e.g. {missing[0]}")
            continue
        if n != last:
            failures.append(f"unit {n} is neither acknowledged nor the last one")
        if unit["atomic"]:
            if any(found) and not all(found):
                failures.append(f"unit {n} (one transaction) is partly there: "
                                f"{sum(found)} of {len(facts)} facts")
            in_flight = "committed" if all(found) else "rolled back"
        else:
            prefix = found == sorted(found, reverse=True)
            if not prefix:
                failures.append(f"unit {n} (single writes) is there out of order: {found}")
            in_flight = ("committed" if all(found) else "rolled back" if not any(found)
                         else "partial prefix")
    return in_flight, checked, written


def _check_search(store: Any, intents: dict[int, dict[str, Any]], present: dict[tuple[Any, ...], int],
                  failures: list[str]) -> None:
    """Each written fact (the first :data:`SEARCH_CHECKS`) is found by its own token."""
    facts = [tuple(f) for _, u in sorted(intents.items()) for f in u["facts"] if tuple(f) in present]
    facts = facts[:SEARCH_CHECKS] + [f for f in present if f[3].startswith("Seed fact ")][:10]
    for slot, scope, key, value in facts:
        token = value.split("token ")[1].split()[0]
        hits = store.search(token, scope=scope, track_access=False)
        if present[(slot, scope, key, value)] not in {h.fact.id for h in hits}:
            failures.append(f"search for {token} does not find its fact")


def run_crash(folder: Path, *, trials: int = 50, seed: int = 0, modes: tuple[str, ...] = MODES,
              max_delay: float = 1.0) -> CrashResult:
    """Run ``trials`` crash trials, cycling through ``modes``, in ``folder``.

    The delay before each kill is drawn from ``random.Random(seed)``, uniform
    from 0.02 s to ``max_delay``.
    """
    if trials < 1:
        raise ValueError(f"trials must be at least 1, not {trials}")
    rng = random.Random(f"crash:{seed}")
    started = time.perf_counter()
    done = []
    for number in range(trials):
        mode = modes[number % len(modes)]
        delay = round(rng.uniform(0.02, max_delay), 3)
        done.append(run_trial(number, mode, delay, folder / f"trial-{number}", seed=seed))
    return CrashResult(trials=tuple(done), wall_s=time.perf_counter() - started)
