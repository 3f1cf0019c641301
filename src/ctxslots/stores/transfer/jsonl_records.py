"""The JSONL export format, record by record: rows to JSON objects and back.

Pure functions, no SQL: :mod:`ctxslots.stores.transfer.jsonl` reads and writes the
tables. Every field of a record is checked here, with the store's
:class:`~ctxslots.stores.Limits` for the fields a write would check.
"""

from __future__ import annotations

import base64
import datetime as dt
import math
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from ..._readable import TIME_RANGE, shown_moment
from ...errors import InvalidFactError
from ..backend import MAX_COUNT
from ..writes.limits import LONE_SURROGATE, MAX_TIMESTAMP, TIME_DIGITS, Limits

__all__ = [
    "FORMAT",
    "VERSION",
    "HistoryEntry",
    "ImportOwners",
    "ParsedFact",
    "check_header",
    "header",
    "import_owners",
    "parse_record",
    "record_from_row",
]

#: The ``format`` field of the header line.
FORMAT = "ctxslots-facts"
#: The format version this code writes and reads.
VERSION = 1

_FACT_FIELDS = frozenset({
    "id", "slot", "scope", "key", "value", "tags", "source", "confidence", "score",
    "created_at", "updated_at", "observed_at", "last_accessed", "access_count", "expires_at",
    "superseded_by", "context", "vector", "archived", "archived_at", "reason", "history", "links",
    "user", "agent",
})
_HISTORY_FIELDS = frozenset({"value", "tags", "source", "confidence", "valid_from", "valid_to",
                             "observed_at"})
_LINK_FIELDS = frozenset({"to", "strength", "updated_at"})


def header(exported_at: float) -> dict[str, Any]:
    """The first line of an export."""
    stamp = dt.datetime.fromtimestamp(exported_at, tz=dt.UTC).isoformat()
    return {"format": FORMAT, "version": VERSION, "exported_at": stamp}


def check_header(data: Any) -> None:
    """Raise :class:`InvalidFactError` unless ``data`` is a header this code reads."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise InvalidFactError(
            f'expected the header {{"format": "{FORMAT}", "version": {VERSION}, ...}} first',
            field="format", value=data)
    version = data.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise InvalidFactError(f"header version must be a positive integer, not {version!r}",
                               field="version", value=version)
    if version > VERSION:
        raise InvalidFactError(
            f"format version {version} is newer than the {VERSION} this ctxslots reads; "
            "upgrade ctxslots", field="version", value=version)


def _tags(text: str | None) -> list[str]:
    return [t for t in (text or "").split("\n") if t]


def encode_vector(model_id: str, vector: np.ndarray) -> dict[str, Any]:
    """A stored vector as export data: the embedder's model id, the dimension, and the
    float32 values, little-endian, in base64."""
    data = np.asarray(vector, dtype="<f4")
    return {"model": model_id, "dimension": int(data.shape[0]),
            "data": base64.b64encode(data.tobytes()).decode("ascii")}


def _vector(record: Mapping[str, Any]) -> tuple[str, np.ndarray] | None:
    value = record.get("vector")
    if value is None:
        return None
    if not isinstance(value, Mapping) or set(value) != {"model", "dimension", "data"}:
        raise _bad("vector", "vector must be {model, dimension, data} or null", value)
    model, dim, data = value["model"], value["dimension"], value["data"]
    if not isinstance(model, str) or not model or isinstance(dim, bool) \
            or not isinstance(dim, int) or not 1 <= dim <= 16000 or not isinstance(data, str):
        raise _bad("vector", "vector needs a model id, a dimension from 1 to 16000 and base64 "
                   "data", value)
    try:
        raw = base64.b64decode(data, validate=True)
    except ValueError:
        raise _bad("vector", "vector data is not base64", value) from None
    # Counted before reading: bytes that are no whole number of float32 values are refused
    # as the vector they fail to be, not as unreadable JSON.
    array = np.frombuffer(raw, dtype="<f4") if len(raw) == 4 * dim else None
    if array is None or not np.all(np.isfinite(array)):
        raise _bad("vector", f"vector data must hold {dim} finite float32 values", value)
    if not array.any():
        raise _bad("vector", "vector data is all zeros, a vector with no direction that no "
                   "search can use: leave \"vector\" out to have the value embedded", value)
    # Stored at unit length whatever its scale (a huge or denormal vector too).
    return model, array.astype(np.float32)


def record_from_row(
    row: Mapping[str, Any], *, archived: bool, history: Sequence[Mapping[str, Any]] | None,
    links: Sequence[Mapping[str, Any]] = (), vector: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One fact row (from ``facts`` or ``archive``) as an export record.

    Timestamps stay Unix seconds (floats), so a round trip is exact.
    ``history`` rows come from ``fact_history``, oldest first; ``None`` leaves
    the ``history`` field out. ``links`` are the ``fact_links`` rows whose
    lower id is this fact's, by the other id.
    """
    record: dict[str, Any] = {
        "id": int(row["id"]),
        "slot": row["slot"],
        "scope": row["scope"] or None,
        "key": row["key"],
        "value": row["value"],
        "tags": _tags(row["tags"]),
        "source": row["source"],
        "confidence": float(row["confidence"]),
        "score": float(row["score"]),
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
        "observed_at": row.get("observed_at", row["created_at"]),
        "last_accessed": row["last_accessed"],
        "access_count": int(row["access_count"]),
        "expires_at": row["expires_at"],
        "superseded_by": row["superseded_by"],
        "archived": archived,
        "archived_at": row["archived_at"] if archived else None,
        "reason": row["reason"] if archived else None,
    }
    # Written only when there is one: older readers know no such field.
    for field, column in (("context", "context"), ("user", "user_id"), ("agent", "agent_id")):
        if row.get(column):
            record[field] = row[column]
    if history is not None:
        record["history"] = [
            {"value": h["value"], "tags": _tags(h["tags"]), "source": h["source"],
             "confidence": float(h["confidence"]), "valid_from": h["valid_from"],
             "valid_to": h["valid_to"],
             # A value replaced before said times were kept was said when written.
             "observed_at": h["valid_from"] if h.get("observed_at") is None
             else h["observed_at"]}
            for h in history
        ]
    record["links"] = [{"to": int(k["b"]), "strength": float(k["strength"]),
                        "updated_at": k["updated_at"]} for k in links]
    if vector is not None:
        record["vector"] = vector
    return record


@attrs.frozen
class HistoryEntry:
    """One earlier value of an imported fact, checked.

    Attributes:
        value: The earlier value.
        tags: Its tags, in stored form (one per line).
        source: Its source.
        confidence: Its confidence.
        valid_from: When it was written (Unix seconds).
        valid_to: When it was replaced (Unix seconds).
        observed_at: When it was said or observed (Unix seconds), or ``None``
            when the record does not say (an export before it was written).
    """

    value: str
    tags: str
    source: str | None
    confidence: float
    valid_from: float
    valid_to: float
    observed_at: float | None = None


@attrs.frozen
class ParsedFact:
    """One fact record, checked and in stored form (scope ``""`` for global).

    Attributes:
        line: The line it was read from.
        id: The id it had in the exporting store, or ``None``.
        row: Column name to stored value, for ``facts`` (and ``archive``).
        archived: Whether it goes to the archive.
        history: Its earlier values, oldest first.
        links: Co-recall links to other facts of the file, as ``(their id in
            the file, strength, updated_at)``.
        vector: ``(model id, vector)`` when the file carries the fact's vector
            (left out when a secret was redacted from the value it embeds).
        redacted: The kinds of credential the store's secret policy replaced
            in its value or earlier values.
    """

    line: int
    id: int | None
    row: dict[str, Any]
    archived: bool
    history: tuple[HistoryEntry, ...]
    links: tuple[tuple[int, float, float], ...] = ()
    vector: tuple[str, np.ndarray] | None = None
    redacted: tuple[str, ...] = ()


#: The largest id or count SQLite stores (a signed 64-bit integer).
_MAX_INT = 2**63 - 1


def _bad(field: str, message: str, value: Any) -> InvalidFactError:
    return InvalidFactError(message, field=field, value=value)


def _finite(value: Any) -> float | None:
    """``value`` as a finite float, or ``None`` when it is no number or out of range."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer with hundreds of digits
        return None
    return number if math.isfinite(number) else None


def _label(record: Mapping[str, Any], field: str) -> str | None:
    """A free-text label (``source``, ``reason``): null or at most 1,000 characters of text."""
    value = record.get(field)
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > 1000 or LONE_SURROGATE.search(value) \
            or "\x00" in value:
        raise _bad(field, f"{field} must be null or text of at most 1000 characters, "
                   "without NUL", value)
    return value


def _timestamp(data: Mapping[str, Any], field: str, *, default: Any = None) -> float | None:
    """Unix seconds or an ISO 8601 string (naive means UTC) as Unix seconds."""
    value = data.get(field, default)
    if value is None:
        return None
    if isinstance(value, str):
        text = value[:-1] + "+00:00" if value.endswith(("Z", "z")) else value
        try:
            when = dt.datetime.fromisoformat(text)
        except ValueError:
            raise _bad(field, f"{field} must be Unix seconds or an ISO 8601 time, not {value!r}",
                       value) from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.UTC)
        number: float | None = when.timestamp()
        shown = shown_moment(when)
    else:
        number = _finite(value)
        if number is None:
            raise _bad(field, f"{field} must be Unix seconds or an ISO 8601 time, not {value!r}",
                       value)
        shown = repr(value)
    # Every stored time must turn back into a datetime when read.
    if number is None or not 0.0 <= number <= MAX_TIMESTAMP:
        raise _bad(field, f"{field} must be a time between 1970 and the year 9999 "
                   f"({TIME_RANGE}), not {shown}", value)
    return round(number, TIME_DIGITS)  # as every time a store is given


def _required_timestamp(data: Mapping[str, Any], field: str, default: float | None) -> float:
    value = _timestamp(data, field, default=default)
    if value is None:
        raise _bad(field, f"{field} is required", None)
    return value


def _fact_id(data: Mapping[str, Any], field: str) -> int | None:
    value = data.get(field)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= _MAX_INT:
        raise _bad(field, f"{field} must be an integer from 1 to {_MAX_INT} or null, "
                   f"not {value!r}", value)
    return value


def _confidence(limits: Limits, record: Mapping[str, Any]) -> float:
    value = record.get("confidence", 1.0)
    if _finite(value) is None:
        raise _bad("confidence", f"confidence must be a number from 0 to 1, not {value!r}", value)
    return limits.confidence(value)


def _tag_list(limits: Limits, value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, list):
        raise _bad("tags", f"tags must be a list of strings, not {type(value).__name__}", value)
    return limits.tags(value)


def _object(value: Any, what: str, allowed: frozenset[str]) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise _bad(what, f"{what} must be a JSON object, not {type(value).__name__}", value)
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise _bad(unknown[0], f"unknown field{'s' if len(unknown) > 1 else ''} in {what}: "
                   + ", ".join(repr(u) for u in unknown), value)
    return value


def _history(limits: Limits, value: Any, redacted: list[str]) -> tuple[HistoryEntry, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise _bad("history", "history must be a list of objects", value)
    entries = []
    for item in value:
        entry = _object(item, "a history entry", _HISTORY_FIELDS)
        earlier, secrets = limits.screen(entry.get("value"))
        redacted += secrets
        valid_from = _required_timestamp(entry, "valid_from", None)
        valid_to = _required_timestamp(entry, "valid_to", None)
        if valid_to < valid_from:
            raise _bad("valid_to", f"a history entry's valid_to ({entry['valid_to']!r}) is "
                       f"before its valid_from ({entry['valid_from']!r})", entry["valid_to"])
        entries.append(HistoryEntry(
            value=earlier,
            tags=_tag_list(limits, entry.get("tags")),
            source=_label(entry, "source"),
            confidence=_confidence(limits, entry),
            valid_from=valid_from,
            valid_to=valid_to,
            observed_at=_timestamp(entry, "observed_at"),
        ))
    return tuple(entries)


def _links(value: Any) -> tuple[tuple[int, float, float], ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise _bad("links", "links must be a list of objects", value)
    links = []
    for item in value:
        link = _object(item, "a link", _LINK_FIELDS)
        to = _fact_id(link, "to")
        strength = link.get("strength")
        if to is None:
            raise _bad("to", "a link needs the id it points to", link)
        number = _finite(strength)
        if number is None or not 0 < number <= MAX_COUNT:
            raise _bad("strength", f"link strength must be a number above 0 and at most "
                       f"2**53, not {strength!r}", strength)
        links.append((to, number, _required_timestamp(link, "updated_at", None)))
    return tuple(links)


@attrs.frozen
class ImportOwners:
    """Whose facts an import writes.

    Attributes:
        default_user: The user of a user fact whose record names none.
        default_agent: The agent of an agent fact whose record names none.
        user: The user of every user fact, whatever its record says (``None``:
            the record's own).
        agent: The agent of every agent fact, as ``user``.
    """

    default_user: str
    default_agent: str
    user: str | None = None
    agent: str | None = None

    def of(self, limits: Limits, slot: str, record: Mapping[str, Any]) -> tuple[str, str, str]:
        """The stored ``(user, agent, scope)`` of a record of ``slot``.

        A user fact's scope is kept: releases before owners stored user facts in a
        scope, and their exports hold them so (such facts open unchanged).

        :raises InvalidFactError: The record names an owner its slot does not have.
        """
        owners = limits.owners_of(slot)
        user = self.user if self.user is not None and owners.user else record.get("user")
        agent = self.agent if self.agent is not None and owners.agent else record.get("agent")
        return import_owners(limits, slot, user=user, agent=agent, scope=record.get("scope"),
                             default_user=self.default_user, default_agent=self.default_agent)


def import_owners(limits: Limits, slot: str, *, user: object, agent: object, scope: object,
                  default_user: str, default_agent: str) -> tuple[str, str, str]:
    """The stored ``(user, agent, scope)`` of an imported fact of ``slot``, as
    :meth:`Limits.write_owners` gives them, except that a user fact's scope is kept:
    releases before owners stored user facts in a scope, and their exports (JSONL
    records, Markdown files under ``scopes/``) hold them so.

    :raises InvalidFactError: An owner is named that ``slot`` does not have, or is
        malformed.
    """
    owners = limits.owners_of(slot)
    if slot not in limits.slot_owners and slot not in limits.slots:  # a plugin's, without it
        for kind, given in (("user", user), ("agent", agent)):
            if given is not None:
                raise InvalidFactError(
                    f"{slot} is a slot no plugin here registers, so its facts belong to no "
                    f"{kind} ({kind} {given!r} given): install the plugin that registers "
                    f"{slot} (it says whose its facts are), then import again",
                    field=kind, value=given)
    legacy = scope is not None and owners.user and not owners.scope
    stored = limits.write_owners(slot, user=user, agent=agent, scope=None if legacy else scope,
                                 default_user=default_user, default_agent=default_agent)
    return (stored[0], stored[1], limits.scope(scope)) if legacy else stored


def _slot(limits: Limits, slot: object) -> str:
    """The record's slot, checked; an unknown one says what makes it known."""
    try:
        return limits.slot(slot)
    except InvalidFactError as exc:
        if not limits.strict_slots or not isinstance(slot, str):
            raise
        attrs.evolve(limits, strict_slots=False).slot(slot)  # a malformed name says so
        raise InvalidFactError(f"{exc}: a plugin's slot? install the plugin that registers "
                               "it, then import again", field="slot", value=slot) from None


def parse_record(data: Any, *, line: int, limits: Limits, now: float,
                 owners: ImportOwners) -> ParsedFact:
    """Check one decoded JSON line and return it in stored form.

    Missing optional fields take the defaults a new fact gets (``created_at``:
    ``now``; the owners ``owners`` gives). Unknown fields are errors, so a
    misspelled field is never lost silently.

    :raises InvalidFactError: The record is malformed; ``field`` names the field.
    """
    record = _object(data, "a fact record", _FACT_FIELDS)
    archived = record.get("archived", False)
    if not isinstance(archived, bool):
        raise _bad("archived", f"archived must be true or false, not {archived!r}", archived)
    key = record.get("key")
    score = _finite(record.get("score", 0.0))
    if score is None or not -MAX_COUNT <= score <= MAX_COUNT:
        raise _bad("score", f"score must be a number from -2**53 to 2**53, not "
                   f"{record['score']!r}", record["score"])
    count = record.get("access_count", 0)
    if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= MAX_COUNT:
        raise _bad("access_count", f"access_count must be an integer from 0 to 2**53, "
                   f"not {count!r}", count)
    created = _required_timestamp(record, "created_at", now)
    updated = _required_timestamp(record, "updated_at", created)
    if updated < created:
        raise _bad("updated_at", f"updated_at ({record['updated_at']!r}) is before created_at "
                   f"({record.get('created_at')!r})", record["updated_at"])
    fact_id, superseded_by = _fact_id(record, "id"), _fact_id(record, "superseded_by")
    if superseded_by is not None and superseded_by == fact_id:
        raise _bad("superseded_by", f"superseded_by names the fact itself (id {fact_id}): "
                   "a fact superseded by itself is hidden from every search", superseded_by)
    slot = _slot(limits, record.get("slot"))
    user_id, agent_id, scope = owners.of(limits, slot, record)
    key = None if key is None else limits.key(key)
    value, secrets = limits.screen(record.get("value"))
    context, context_secrets = limits.context(record.get("context"))
    redacted = list(dict.fromkeys((*secrets, *context_secrets)))
    row: dict[str, Any] = {
        "slot": slot,
        "scope": scope,
        "user_id": user_id,
        "agent_id": agent_id,
        "key": key,
        "value": value,
        "tags": _tag_list(limits, record.get("tags")),
        "source": _label(record, "source"),
        "confidence": _confidence(limits, record),
        "score": score,
        "created_at": created,
        "updated_at": updated,
        "observed_at": _required_timestamp(record, "observed_at", created),
        "last_accessed": _timestamp(record, "last_accessed"),
        "access_count": count,
        "expires_at": _timestamp(record, "expires_at"),
        "superseded_by": superseded_by,
        "context": context,
    }
    reason = _label(record, "reason")
    if archived:
        row["archived_at"] = _required_timestamp(record, "archived_at", now)
        row["reason"] = reason
    elif record.get("archived_at") is not None or reason is not None:
        raise _bad("archived_at", "archived_at and reason are only for archived facts",
                   record.get("archived_at", reason))
    history = _history(limits, record.get("history"), redacted)
    return ParsedFact(line=line, id=fact_id, row=row, archived=archived,
                      history=history, links=_links(record.get("links")),
                      vector=None if secrets else _vector(record), redacted=tuple(redacted))
