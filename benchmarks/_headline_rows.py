"""The rows of the headline table, read from each benchmark's record (``--json``).

One function per benchmark turns its :class:`~_record.Record` into table rows:
what was measured, the value, and the ratio to its floor with the spread.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from _record import Record

__all__ = ["Row", "rows_of"]


@dataclass(frozen=True)
class Row:
    """One line of the headline table."""

    figure: str
    measured: str
    ratio: str = ""
    run: int = 0

    def numbered(self, run: int) -> Row:
        """This row, made by run ``run``."""
        return replace(self, run=run)

    def markdown(self) -> str:
        """The row as a markdown table line."""
        return f"| {self.figure} | {self.measured} | {self.ratio} | {self.run} |"


def _ratio(figure: dict[str, float], what: str = "") -> str:
    text = f"**{figure['median']:.2f}x** ({figure['p10']:.2f}x-{figure['p90']:.2f}x)"
    return f"{text} {what}".rstrip()


def _size(n: str) -> str:
    value = int(n)
    if value >= 1_000_000:
        return f"{value / 1_000_000:g}M"
    return f"{value / 1000:g}k" if value >= 1000 else f"{value:,}"


def store_search(record: Record) -> list[Row]:
    """Words-only search and the lexical copy against raw FTS5 doing the same work."""
    out = []
    for n, f in record.figures.items():
        out.append(Row(f"store search, words only, {_size(n)} facts", f"{f['search p50']:.2f} ms "
                       f"p50", _ratio(f["search / fts"], "of raw FTS5")))
        out.append(Row(f"store search, lexical copy (`lexical_cache=True`), {_size(n)} facts",
                       f"{f['cached p50']:.2f} ms p50", _ratio(f["cached / fts"], "of raw FTS5")))
    return out


def assemble(record: Record) -> list[Row]:
    """Warm assembly, default and with the lexical copy, against its floor."""
    f = record.figures
    n = _size(str(f["facts"]))
    return [Row(f"warm assembly, {n} facts", f"{f['assemble p50']:.2f} ms p50",
                _ratio(f["assemble / floor"], "of its floor")),
            Row(f"warm assembly with the lexical copy, {n} facts",
                f"{f['assemble cached p50']:.2f} ms p50",
                _ratio(f["assemble cached / floor"], "of its floor"))]


def cold_commands(record: Record) -> list[Row]:
    """A cold ``assemble`` against a cold ``stats``."""
    f = record.figures
    return [Row(f"cold `ctxslots assemble` ({f['store']})",
                f"{f['assemble wall p50 s']:.2f} s wall p50",
                _ratio(f["assemble / stats wall"], "of cold `stats`"))]


def writes(record: Record) -> list[Row]:
    """One-at-a-time writes with MiniLM in the background against a batch; or, words only,
    a batch against raw INSERTs."""
    f = record.figures
    if f["model"] == "none":
        raw = f["floor: raw INSERT of batch"]
        return [Row(f"writes, default store, a batch of {f['round']:,}",
                    f"{f['batch facts/s']:,.0f} facts/s",
                    f"**{raw['median']:.2f}x** ({raw['p10']:.2f}x-{raw['p90']:.2f}x) the time "
                    "of raw INSERTs")]
    share = f["one by one, background of batch"]
    return [Row("one-at-a-time writes with MiniLM (background vectors)",
                f"{f['one by one, background facts/s']:.0f} facts/s",
                f"**{share['median']:.0%}** ({share['p10']:.0%}-{share['p90']:.0%}) of a batch")]


def file_size(record: Record) -> list[Row]:
    """Bytes a fact of the default store, against a bare table with its FTS5 index."""
    out = []
    for n, f in record.figures.items():
        count = int(n)
        parts = ", ".join(f"`{name}` {size / count:.0f}" for name, size in f["objects"].items())
        out.append(Row(f"default store file, {_size(n)} facts (bytes a fact: {parts})",
                       f"{f['file'] / count:.0f} B/fact",
                       f"{f['file'] / f['floor']:.2f}x a bare table + FTS5 (exact)"))
    return out


def postgres_search(record: Record) -> list[Row]:
    """The PostgreSQL engine's BM25 and the store's search against hand SQL."""
    out = []
    for n, f in record.figures.items():
        if n == "writes":
            continue
        out.append(Row(f"PostgreSQL engine BM25, {_size(n)} facts", f"{f['engine p50']:.2f} ms "
                       "p50", _ratio(f["engine / hand SQL"], "of hand SQL (context join "
                                                               "included)")))
        out.append(Row(f"PostgreSQL `FactStore.search`, {_size(n)} facts",
                       f"{f['search p50']:.2f} ms p50",
                       _ratio(f["search / hand SQL, 10 rows"], "of hand SQL, 10 rows")))
    return out


def mem0_compare(record: Record) -> list[Row]:
    """The store share of a MiniLM search, ctxslots against mem0, and against its floors."""
    out = []
    version = record.figures.get("mem0")
    for n, f in record.figures.items():
        if not isinstance(f, dict):
            continue
        mem0 = f"mem0 {version}, vector known p50"
        how = " (mem0 loaded through its batch path)" if f.get("mem0 batch path") else ""
        if mem0 in f:
            out.append(Row(f"MiniLM search store share, mem0 {version} / ctxslots, "
                           f"{_size(n)} facts{how}",
                           f"{f[mem0]:.2f} ms / {f['ctxslots, vector known p50']:.2f} ms",
                           _ratio(f["store share, mem0 / ctxslots"])))
        out.append(Row(f"ctxslots MiniLM search store share, {_size(n)} facts",
                       f"{f['ctxslots, vector known p50']:.2f} ms p50",
                       _ratio(f["ctxslots store share / its floors (fts + numpy)"],
                              "of raw FTS5 + numpy scan")))
    return out


_ROWS: dict[str, Callable[[Record], list[Row]]] = {
    "store_search": store_search, "assemble": assemble, "cold_commands": cold_commands,
    "writes": writes, "file_size": file_size, "postgres_search": postgres_search,
    "mem0_compare": mem0_compare,
}


def rows_of(record: Record) -> list[Row]:
    """The headline rows of a benchmark's record."""
    make = _ROWS.get(record.benchmark)
    if make is None:
        return [Row(record.benchmark, "no headline rows for this benchmark")]
    return make(record)
