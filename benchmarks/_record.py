"""Where a figure came from: the command, the date, the commit and the load, kept with it.

A benchmark given ``--json PATH`` writes its figures there as a :class:`Record`,
which ``benchmarks/headline.py`` reads to write the headline table of
BENCHMARKS.md: every figure there carries the record's provenance.
"""

from __future__ import annotations

import datetime as dt
import json
import shlex
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from _timing import Load

__all__ = ["ROOT", "Record", "command_line", "commit"]

ROOT = Path(__file__).resolve().parents[1]


def commit() -> str:
    """The checkout's short commit, with ``+changes`` when files differ from it."""
    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                              check=False)
        return done.stdout.strip() if done.returncode == 0 else ""

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    changed = git("status", "--porcelain", "--untracked-files=no", "--", "src", "benchmarks")
    return f"{head}+changes" if changed else head


def command_line(argv: list[str] | None = None) -> str:
    """This process's command, as typed from the repository's root."""
    args = list(sys.argv if argv is None else argv)
    script = Path(args[0]).resolve()
    if script.is_relative_to(ROOT):
        args[0] = str(script.relative_to(ROOT))
    return "python " + shlex.join(args)


@dataclass
class Record:
    """A benchmark's figures and where they came from.

    Attributes:
        benchmark: The script's name (``store_search``).
        command: The command that produced the figures.
        date: When the run started (UTC, ISO 8601).
        commit: The code's commit (see :func:`commit`).
        load: The load average at start and end (1, 5 and 15 minutes).
        figures: What the benchmark measured, by name.
    """

    benchmark: str
    command: str = field(default_factory=command_line)
    date: str = field(default_factory=lambda: dt.datetime.now(dt.UTC)
                      .isoformat(timespec="seconds"))
    commit: str = field(default_factory=commit)
    load: dict[str, list[float]] = field(default_factory=dict)
    figures: dict[str, Any] = field(default_factory=dict)

    def add_load(self, load: Load) -> None:
        """Widen the recorded load to include ``load`` (the first start, the last end)."""
        self.load.setdefault("start", list(load.start))
        self.load["end"] = list(load.end)

    def write(self, path: Path | None) -> None:
        """Write the record as JSON to ``path`` (nothing when ``None``)."""
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(asdict(self), indent=1) + "\n")

    @classmethod
    def read(cls, path: Path) -> Record:
        """A record written by :meth:`write`."""
        return cls(**json.loads(path.read_text()))
