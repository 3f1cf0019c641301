"""The long property-based run: the fuzz tests with many examples each, timed.

It runs pytest in a subprocess with ``CTXSLOTS_FUZZ_EXAMPLES`` set, reads the
JUnit XML report and returns one row per test: outcome and seconds.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import attrs

from ._table import format_table

__all__ = ["FUZZ_TESTS", "FuzzResult", "FuzzTest", "run_fuzz"]

_ROOT = Path(__file__).resolve().parents[1]

#: The test files whose example counts follow ``CTXSLOTS_FUZZ_EXAMPLES``.
FUZZ_TESTS = ("tests/test_reliability_fuzz.py", "tests/test_sanitize.py")


@attrs.frozen
class FuzzTest:
    """One test of the run.

    Attributes:
        name: The test's id within its file.
        file: The test file.
        outcome: ``passed``, ``failed``, ``skipped``, ``xfailed`` or ``error``.
        seconds: How long it took.
        message: The failure or skip message, if any.
    """

    name: str
    file: str
    outcome: str
    seconds: float
    message: str = ""


@attrs.frozen
class FuzzResult:
    """A fuzz run.

    Attributes:
        examples: ``CTXSLOTS_FUZZ_EXAMPLES`` of the run.
        tests: One entry per test.
        wall_s: Seconds the run took.
        returncode: pytest's exit status.
        output: The tail of pytest's output.
    """

    examples: int
    tests: tuple[FuzzTest, ...]
    wall_s: float
    returncode: int
    output: str

    @property
    def failures(self) -> list[str]:
        """One line per failed test; pytest's output when it failed otherwise."""
        out = [f"{t.name}: {t.outcome}: {t.message}" for t in self.tests
               if t.outcome in ("failed", "error")]
        if self.returncode != 0 and not out:
            out.append(f"pytest exited with status {self.returncode}: {self.output[-1000:]}")
        return out

    @property
    def ok(self) -> bool:
        """Whether pytest passed (expected failures count as passing)."""
        return not self.failures

    def table(self) -> str:
        """One row per test function (parametrized cases together), as markdown."""
        groups: dict[tuple[str, str], list[FuzzTest]] = {}
        for t in self.tests:
            groups.setdefault((t.file.rsplit("/", 1)[-1], t.name.split("[")[0]), []).append(t)
        rows = []
        for (file, name), cases in groups.items():
            outcomes = Counter(c.outcome for c in cases)
            rows.append((file, name, ", ".join(f"{n} {o}" for o, n in sorted(outcomes.items())),
                         sum(c.seconds for c in cases)))
        return (format_table(["file", "test", "outcome", "seconds"], rows)
                + f"\n\n{len(self.tests)} tests at {self.examples} examples per property test "
                  f"in {self.wall_s:.1f} s (pytest exit status {self.returncode})")


def _outcome(case: ET.Element) -> tuple[str, str]:
    for tag in ("failure", "error"):
        found = case.find(tag)
        if found is not None:
            return ("failed" if tag == "failure" else "error"), found.get("message", "")[:200]
    skipped = case.find("skipped")
    if skipped is not None:
        kind = "xfailed" if skipped.get("type") == "pytest.xfail" else "skipped"
        return kind, skipped.get("message", "")[:200]
    return "passed", ""


def run_fuzz(*, examples: int = 10_000, files: Sequence[str] = FUZZ_TESTS,
             extra_args: Sequence[str] = ()) -> FuzzResult:
    """Run the property tests of ``files`` with ``examples`` examples each.

    :raises ValueError: ``examples`` is below 1.
    """
    if examples < 1:
        raise ValueError(f"examples must be at least 1, not {examples}")
    env = {**os.environ, "CTXSLOTS_FUZZ_EXAMPLES": str(examples)}
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "junit.xml"
        started = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
             f"--junitxml={report}", *files, *extra_args],
            cwd=_ROOT, env=env, capture_output=True, text=True, check=False,
        )
        wall = time.perf_counter() - started
        tests = []
        if report.exists():
            for case in ET.parse(report).getroot().iter("testcase"):
                outcome, message = _outcome(case)
                tests.append(FuzzTest(name=case.get("name", ""),
                                      file=case.get("classname", "").replace(".", "/") + ".py",
                                      outcome=outcome, seconds=float(case.get("time", 0.0)),
                                      message=message))
    return FuzzResult(examples=examples, tests=tuple(tests), wall_s=wall,
                      returncode=proc.returncode, output=(proc.stdout + proc.stderr)[-4000:])
