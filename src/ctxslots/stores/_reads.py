"""The reading half of FactStore: facts by id, key, time order and filter."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import FactNotFoundError, InvalidFactError
from ..model import Fact
from ._legs import COLUMNS as _COLUMNS
from ._legs import placeholders as _placeholders
from ._validate import Limits

if TYPE_CHECKING:
    from ._sqlite import Connection

__all__ = ["ReadsMixin"]

_LIVE = "(expires_at IS NULL OR expires_at > ?)"


_MAX_ID = 2**63 - 1


def check_id(fact_id: object) -> int:
    """Return ``fact_id`` if it is an integer SQLite can hold (not a bool); raise InvalidFactError otherwise."""
    if isinstance(fact_id, bool) or not isinstance(fact_id, int):
        raise InvalidFactError(f"fact id must be an integer, not {fact_id!r}", field="id", value=fact_id)
    if not -_MAX_ID - 1 <= fact_id <= _MAX_ID:
        raise InvalidFactError(f"fact id {fact_id} is out of range (at most {_MAX_ID})",
                               field="id", value=fact_id)
    return fact_id


def slot_clause(limits: Limits, slots: Sequence[str] | str, alias: str = "") -> tuple[str, list[str]]:
    """``slot IN (?, ...)`` for ``slots`` (a name or a list), with the checked names.

    :raises InvalidFactError: A slot is malformed, or the list is empty.
    """
    names = [slots] if isinstance(slots, str) else list(slots)
    checked = [limits.slot(s) for s in names]
    if not checked:
        raise InvalidFactError("slots must name at least one slot", field="slots", value=slots)
    return f"{alias}slot IN ({_placeholders(len(checked))})", checked


class ReadsMixin:
    """Reads of :class:`~ctxslots.stores.fact_store.FactStore` that show nothing to a model."""

    _conn: Connection
    limits: Limits
    clock: Callable[[], float]

    def get(self, fact_id: int, *, include_archive: bool = False) -> Fact | None:
        """Return the live fact with this id, or ``None`` (expired facts are not live).

        Reading by id is not shown to a model by itself, so it does not count as
        an access.
        """
        fact_id = check_id(fact_id)
        rows = self._conn.rows(
            f"SELECT {_COLUMNS} FROM facts WHERE id = ? AND {_LIVE}", (fact_id, self.clock())
        )
        if rows:
            return Fact.from_row(rows[0])
        if include_archive:
            rows = self._conn.rows(f"SELECT {_COLUMNS} FROM archive WHERE id = ?", (fact_id,))
            if rows:
                return Fact.from_row(rows[0], archived=True)
        return None

    def get_by_key(self, slot: str, key: str, *, scope: str | None = None) -> Fact | None:
        """Return the live fact with this slot, scope and key, or ``None``."""
        rows = self._conn.rows(
            f"SELECT {_COLUMNS} FROM facts WHERE slot = ? AND scope = ? AND key = ? AND {_LIVE}",
            (self.limits.slot(slot), self.limits.scope(scope), self.limits.key(key), self.clock()),
        )
        return Fact.from_row(rows[0]) if rows else None

    def history(self, fact_id: int) -> list[Fact]:
        """Earlier values of a keyed fact, oldest first, as facts with the same id.

        Each returned fact's ``updated_at`` is when that value was written.
        """
        fact_id = check_id(fact_id)
        rows = self._conn.rows(
            "SELECT fact_id AS id, slot, scope, key, value, tags, source, confidence, "
            "0.0 AS score, valid_from AS created_at, valid_from AS updated_at, "
            "NULL AS last_accessed, 0 AS access_count, valid_to AS expires_at, "
            "NULL AS superseded_by "
            "FROM fact_history WHERE fact_id = ? ORDER BY valid_to, id",
            (fact_id,),
        )
        return [Fact.from_row(row) for row in rows]

    def timeline(
        self, fact_id: int, *, before: int = 5, after: int = 5, scope: str | None = None
    ) -> list[Fact]:
        """A live fact and the live facts written just before and after it, oldest first.

        Only facts visible from ``scope`` (that scope and global facts) are
        considered, so a timeline never shows another scope's facts.

        :param before: How many earlier facts (0 to 100).
        :param after: How many later facts (0 to 100).
        :raises FactNotFoundError: No live fact with this id is visible from ``scope``.
        :raises InvalidFactError: ``before`` or ``after`` is out of range.
        """
        fact_id = check_id(fact_id)
        counts = []
        for name, count in (("before", before), ("after", after)):
            if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= 100:
                raise InvalidFactError(f"{name} must be an integer from 0 to 100, not {count!r}",
                                       field=name, value=count)
            counts.append(count)
        where, params = self._filters(None, scope)
        anchor = self._conn.rows(
            f"SELECT {_COLUMNS} FROM facts WHERE id = ? AND {where}", (fact_id, *params)
        )
        if not anchor:
            raise FactNotFoundError(fact_id)
        at = (anchor[0]["created_at"], fact_id)
        earlier = self._conn.rows(
            f"SELECT {_COLUMNS} FROM facts WHERE {where} AND (created_at, id) < (?, ?) "
            "ORDER BY created_at DESC, id DESC LIMIT ?", (*params, *at, counts[0]),
        )
        later = self._conn.rows(
            f"SELECT {_COLUMNS} FROM facts WHERE {where} AND (created_at, id) > (?, ?) "
            "ORDER BY created_at, id LIMIT ?", (*params, *at, counts[1]),
        )
        rows = [*reversed(earlier), anchor[0], *later]
        return [Fact.from_row(row) for row in rows]

    def facts(
        self, *, slots: Sequence[str] | None = None, scope: str | None = None,
        include_expired: bool = False,
    ) -> list[Fact]:
        """Every live fact of the given slots in ``scope`` (and global ones), by id."""
        where, params = self._filters(slots, scope, include_expired=include_expired)
        rows = self._conn.rows(f"SELECT {_COLUMNS} FROM facts WHERE {where} ORDER BY id", params)
        return [Fact.from_row(row) for row in rows]

    def _filters(
        self, slots: Sequence[str] | None, scope: str | None, *, now: float | None = None,
        alias: str = "", include_expired: bool = False, include_superseded: bool = True,
    ) -> tuple[str, list[Any]]:
        scope_value = self.limits.scope(scope)
        clauses = [f"{alias}scope IN (?, '')"]
        params: list[Any] = [scope_value]
        if slots is not None:
            clause, checked = slot_clause(self.limits, slots, alias)
            clauses.append(clause)
            params.extend(checked)
        if not include_superseded:
            clauses.append(f"{alias}superseded_by IS NULL")
        if not include_expired:
            clauses.append(f"({alias}expires_at IS NULL OR {alias}expires_at > ?)")
            params.append(self.clock() if now is None else now)
        return " AND ".join(clauses), params

    def _fetch(self, fact_id: int) -> Fact:
        rows = self._conn.rows(f"SELECT {_COLUMNS} FROM facts WHERE id = ?", (fact_id,))
        if not rows:
            raise FactNotFoundError(fact_id)
        return Fact.from_row(rows[0])
