"""An in-memory copy of the lexical index: BM25 over numpy postings, kept consistent with the file.

FTS5 scores every row that matches any word of an OR-query, so a query with an
everyday word costs milliseconds per hundred thousand facts. This cache holds,
for each stem of the index (the stored stems), the rows that contain it and how
often, and scores a query with FTS5's BM25 formula (k1 = 1.2, b = 0.75, every
column weighted 1) in numpy. The file stays the source of truth: triggers append
every changed fact id to ``fact_log`` (migration ``m006_fact_log``), and each
search first applies what the log recorded since the last one, or reloads in
full when it fell behind the trimmed log.

Rows are never removed from the arrays: a changed fact's old row is marked dead
and a new row is appended, and the whole cache is rebuilt when more than half of
its rows are dead. A fact gone from the file (erased, deleted, archived) also
leaves the postings, and so do the words and the owners no live fact holds any
more (an edited fact's earlier words too): an erased user's words and name do not
stay in a long-running process.

The first load reads every fact (about 2 s per 100,000 facts), so a store loads
it on a background thread with its own connection (:mod:`._loader`), and
searches use FTS5 until it is ready.
"""

from __future__ import annotations

import math
import re
from array import array
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np

from ..backend import CONTEXT_WEIGHT, FactFilter
from ..stemming import stemmed_query
from ._connection import Connection
from ._loader import row_chunks
from ._vector_cache import log_bounds

__all__ = ["LexicalCache", "build_lexical_cache", "trim_fact_log"]

#: The columns a copy reads of each fact.
_COLUMNS = ("id, slot, scope, user_id, agent_id, stems, context_stems, expires_at, "
            "superseded_by")
K1 = 1.2
B = 0.75
#: Capitals a stem written before stems were folded after decomposing may hold
#: (``Hello`` from ``𝐇𝐞𝐥𝐥𝐨``): FTS5 indexes them in lower case, and so does the copy.
_CAPITALS = re.compile("[A-Z]+")
#: Log entries kept after a trim; a cache further behind than this reloads.
LOG_KEEP = 50_000


def trim_fact_log(conn: Connection) -> None:
    """Drop old log entries once the log holds twice :data:`LOG_KEEP` (inside a write)."""
    low, high = log_bounds(conn, "fact_log")
    if low is not None and high is not None and int(high) - int(low) > 2 * LOG_KEEP:
        conn.execute("DELETE FROM fact_log WHERE seq <= ?", (int(high) - LOG_KEEP,))


class _Grow:
    """A numpy array that grows by doubling."""

    def __init__(self, dtype: Any, fill: Any = 0) -> None:
        self.data = np.full(1024, fill, dtype)
        self.fill = fill

    def put(self, index: int, value: Any) -> None:
        if index >= len(self.data):
            grown = np.full(max(index + 1, 2 * len(self.data)), self.fill, self.data.dtype)
            grown[: len(self.data)] = self.data
            self.data = grown
        self.data[index] = value


def _any_equal(values: np.ndarray, codes: Sequence[int]) -> np.ndarray:
    if len(codes) > 8:
        return np.isin(values, codes)
    out: np.ndarray = values == codes[0]
    for code in codes[1:]:
        out |= values == code
    return out


#: A row's state: replaced or deleted, superseded by a near-duplicate, or shown.
_DEAD, _HIDDEN, _SHOWN = 0, 1, 2


@attrs.define
class LexicalCache:
    """BM25 postings of the live facts, in memory.

    Attributes:
        rows_loaded: Rows appended since the last full load (live and dead).
    """

    _postings: dict[str, tuple[array[int], array[float]]] = attrs.Factory(dict)
    _df: dict[str, int] = attrs.Factory(dict)
    _row_of: dict[int, int] = attrs.Factory(dict)
    _ids: _Grow = attrs.Factory(lambda: _Grow(np.int64))
    _length: _Grow = attrs.Factory(lambda: _Grow(np.float32))
    # What a search filters on, packed small, since a search reads it at every
    # matching row: the code of its (slot, scope, user, agent), whether the row is _DEAD,
    # _HIDDEN (superseded) or _SHOWN, and its expiry (read only while some
    # live row has one).
    _group: _Grow = attrs.Factory(lambda: _Grow(np.int32, -1))
    _state: _Grow = attrs.Factory(lambda: _Grow(np.uint8, 0))
    _expires: _Grow = attrs.Factory(lambda: _Grow(np.float64, np.inf))
    _expiring: int = 0
    _stems_of: dict[int, dict[str, float]] = attrs.Factory(dict)
    _codes: dict[tuple[str, str, str, str], int] = attrs.Factory(dict)
    # Live rows of each code, and the next code (a code dropped is never handed out again).
    _code_rows: dict[int, int] = attrs.Factory(dict)
    _next_code: int = 0
    rows_loaded: int = 0
    _live: int = 0
    _tokens: float = 0.0
    _seq: int = -1
    _norm: np.ndarray | None = None
    _last: tuple[tuple[str, ...], np.ndarray, np.ndarray, np.ndarray] | None = None

    # -- keeping in step with the file ------------------------------------

    def sync(self, conn: Connection, *, cancelled: Callable[[], bool] | None = None) -> None:
        """Apply the facts changed since the last sync, or reload everything.

        :param cancelled: For a load on a background thread: checked between
            small chunks of a full reload, which also let other threads run
            between them; when it returns true the reload stops, leaving the
            cache empty.
        """
        low, high = log_bounds(conn, "fact_log")
        top = int(high or 0)
        behind = low is not None and self._seq < int(low) - 1
        if self._seq < 0 or behind or (self.rows_loaded > 1000 and
                                       self._live < self.rows_loaded // 2):
            self._reload(conn, top, cancelled)
            return
        if top <= self._seq:
            return
        changed = [int(r[0]) for r in conn.execute(
            "SELECT DISTINCT fact_id FROM fact_log WHERE seq > ?", (self._seq,)).fetchall()]
        removed = {fact_id: self._remove(fact_id) for fact_id in changed}
        for start in range(0, len(changed), 500):
            chunk = changed[start:start + 500]
            self._add_rows(conn.execute(
                f"SELECT {_COLUMNS} FROM facts WHERE id IN ({','.join('?' * len(chunk))})",
                chunk).fetchall())
        old = [(fact_id in self._row_of, row) for fact_id, row in removed.items()
               if row is not None]
        self._purge([row for changed, row in old if not changed],
                    [row for changed, row in old if changed])
        self._seq = top

    def _reload(self, conn: Connection, top: int, cancelled: Callable[[], bool] | None) -> None:
        self._clear()
        rows = conn.execute(f"SELECT {_COLUMNS} FROM facts")
        for chunk in row_chunks(rows, cancelled, background_size=20):
            self._add_rows(chunk)
        if cancelled is not None and cancelled():
            self._clear()
            return
        self._seq = top

    def _clear(self) -> None:
        fresh = LexicalCache()
        for field in attrs.fields(LexicalCache):
            setattr(self, field.name, getattr(fresh, field.name))

    @property
    def live(self) -> int:
        """Rows of live facts (one per fact the copy holds)."""
        return self._live

    def _code(self, slot: str, scope: str, user_id: str, agent_id: str) -> int:
        key = (slot, scope, user_id, agent_id)
        code = self._codes.get(key)
        if code is None:
            code = self._codes[key] = self._next_code
            self._next_code += 1
        self._code_rows[code] = self._code_rows.get(code, 0) + 1
        return code

    def _add_rows(self, rows: Sequence[Any]) -> None:
        for (fact_id, slot, scope, user_id, agent_id, stems, context_stems, expires_at,
             superseded_by) in rows:
            # FTS5's bm25 weighs a word's occurrences by its column's weight;
            # the length of a fact counts every token once, its owner term included.
            counts: dict[str, float] = {}
            length = 1
            for column, weight in ((stems, 1.0), (context_stems, CONTEXT_WEIGHT)):
                if column:
                    if _CAPITALS.search(column):
                        column = _CAPITALS.sub(lambda m: m.group().lower(), column)
                    for stem in column.split():
                        counts[stem] = counts.get(stem, 0.0) + weight
                        length += 1
            row = self.rows_loaded
            self.rows_loaded += 1
            self._row_of[int(fact_id)] = row
            self._stems_of[row] = counts
            self._ids.put(row, fact_id)
            self._length.put(row, length)
            self._group.put(row, self._code(slot, scope, user_id, agent_id))
            self._state.put(row, _SHOWN if superseded_by is None else _HIDDEN)
            self._expires.put(row, np.inf if expires_at is None else expires_at)
            self._expiring += expires_at is not None
            self._live += 1
            self._tokens += length
            self._norm = None
            for stem, count in counts.items():
                rows_of, counts_of = self._postings.setdefault(stem, (array("i"), array("f")))
                rows_of.append(row)
                counts_of.append(count)
                self._df[stem] = self._df.get(stem, 0) + 1

    def _remove(self, fact_id: int) -> tuple[int, dict[str, float]] | None:
        """Mark the row of ``fact_id`` dead; return it and its stems (``None``: none held)."""
        row = self._row_of.pop(fact_id, None)
        if row is None:
            return None
        self._state.data[row] = _DEAD
        self._code_rows[int(self._group.data[row])] -= 1
        if self._expires.data[row] != np.inf:
            self._expiring -= 1
        counts = self._stems_of.pop(row)
        self._live -= 1
        self._tokens -= float(self._length.data[row])
        self._norm = None
        for stem in counts:
            self._df[stem] -= 1
        return row, counts

    def _purge(self, gone: Sequence[tuple[int, dict[str, float]]],
               changed: Sequence[tuple[int, dict[str, float]]] = ()) -> None:
        """Take the dead rows of facts gone from the file out of their stems' postings,
        with each stem and each owner group no live row holds any more, the stems of
        the rows ``changed`` (edited facts) left dead too: an edited fact's earlier
        words would outlast its erasure in the rows its edits left."""
        if not gone and not changed:
            return
        dead = np.zeros(self.rows_loaded, bool)
        dead[[row for row, _ in gone]] = True
        of_gone = {stem for _, counts in gone for stem in counts}
        for stem in of_gone.union(*(counts for _, counts in changed)):
            if not self._df[stem]:  # no live fact holds the word: the copy forgets it
                del self._postings[stem]
                del self._df[stem]
                continue
            if stem not in of_gone:
                continue
            rows_of, counts_of = self._postings[stem]
            held = np.frombuffer(rows_of, np.int32)
            keep = ~dead[held]
            kept_rows, kept_counts = array("i"), array("f")
            kept_rows.frombytes(held[keep].tobytes())
            kept_counts.frombytes(np.frombuffer(counts_of, np.float32)[keep].tobytes())
            self._postings[stem] = (kept_rows, kept_counts)
        unused = {code for code, n in self._code_rows.items() if n == 0}
        if unused:
            self._codes = {key: code for key, code in self._codes.items()
                           if code not in unused}
            for code in unused:
                del self._code_rows[code]
        self._last = None

    # -- searching --------------------------------------------------------

    def _scored(self, tokens: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """BM25 of every row (0 where no stem matches) and the rows that match,
        ascending; the last query's are kept, as an assembly searches every
        memory slot with the same words. Stems are summed in sorted order, so
        scores do not depend on the process's string hashing."""
        stems = tuple(sorted(stemmed_query(tokens)))
        memo = self._last
        if memo is not None and memo[0] == stems and memo[1] is self._norm:
            return memo[2], memo[3]
        n = self.rows_loaded
        total = float(self._live)
        if self._norm is None or len(self._norm) != n:
            # In float64, as FTS5 computes: float32 lengths would keep a float32 norm,
            # whose rounding (a relative 2e-8) outweighs the ties of equal scores.
            lengths = self._length.data[:n].astype(np.float64)
            self._norm = K1 * (1.0 - B + B * lengths / max(self._tokens / total, 1e-9))
        norm = self._norm
        scores = np.zeros(n, np.float64)
        for stem in stems:
            posting = self._postings.get(stem)
            if posting is None or not self._df.get(stem):
                continue
            rows = np.frombuffer(posting[0], np.int32)
            counts = np.frombuffer(posting[1], np.float32).astype(np.float64)
            df = self._df[stem]
            idf = max(1e-6, math.log((total - df + 0.5) / (df + 0.5)))
            scores[rows] += idf * counts * (K1 + 1.0) / (counts + norm[rows])
        hit = np.flatnonzero(scores > 0)  # through a boolean mask: 6x faster than on floats
        # Every change to the rows drops _norm, so the memo lasts as long as it.
        self._last = (stems, norm, scores, hit)
        return scores, hit

    def search(self, tokens: Sequence[str], flt: FactFilter, *, now: float, pool: int
               ) -> list[tuple[int, float]]:
        """``(fact_id, bm25)`` of the best ``pool`` rows ``flt`` sees (by slot, owners,
        expiry at ``now`` and near-duplicates; its tags, source and times are not
        held here), best first.

        ``bm25`` is negative like FTS5's ``rank`` (more negative is better).
        """
        if self._live == 0:
            return []
        scores, hit = self._scored(tokens)
        # Filters on the matching rows only: far fewer than all rows.
        groups = self._groups(flt)
        if not groups:
            return []
        keep = self._state.data[hit] >= (_HIDDEN if flt.include_superseded else _SHOWN)
        keep &= _any_equal(self._group.data[hit], groups)
        if self._expiring:
            keep &= self._expires.data[hit] > now
        hit = hit[keep]
        if not len(hit):
            return []
        take = min(pool, len(hit))
        cut = scores[hit[np.argpartition(-scores[hit], take - 1)[take - 1]]]
        top = hit[scores[hit] >= cut]  # every row tied at the cut, so ties go to the lower id
        ids = self._ids.data[top]
        order = np.lexsort((ids, -scores[top]))[:take]
        return [(int(ids[i]), -float(scores[top][i])) for i in order]

    def _groups(self, flt: FactFilter) -> list[int]:
        """The codes of the (slot, scope, user, agent) groups ``flt`` sees."""
        return _groups_of(self._codes, flt)


def _groups_of(codes: dict[tuple[str, str, str, str], int], flt: FactFilter) -> list[int]:
    wanted = [None if v is None else set(v) for v in (flt.slots, flt.scopes, flt.users,
                                                       flt.agents)]
    return [code for key, code in codes.items()
            if all(w is None or part in w for part, w in zip(key, wanted, strict=True))]


def build_lexical_cache(conn: Connection, cancelled: Callable[[], bool]) -> LexicalCache:
    """A full copy of the lexical index read through ``conn`` (for a background load)."""
    cache = LexicalCache()
    cache.sync(conn, cancelled=cancelled)
    return cache
