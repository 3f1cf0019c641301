"""The package type-checks under ``mypy --strict`` (the public API ships ``py.typed``)."""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

import ctxslots

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "ctxslots"


def test_mypy_strict_is_clean():
    """Every module of the package passes ``mypy --strict``.

    mypy reads the checkout's ``pyproject.toml`` and keeps its usual incremental
    cache in the checkout's ``.mypy_cache`` (what ``mypy --strict src`` run by hand
    uses): a first run checks everything (10 to 20 seconds on a 2-core machine),
    later runs only what changed.
    """
    pytest.importorskip("mypy")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--config-file", str(ROOT / "pyproject.toml"),
         "--cache-dir", str(ROOT / ".mypy_cache"), str(SRC)],
        capture_output=True, text=True, timeout=600, check=False,
    )
    assert 0 == done.returncode, done.stdout + done.stderr
    assert "Success: no issues found" in done.stdout


def _mypy_strict(tmp_path: Path, program: str) -> subprocess.CompletedProcess[str]:
    """``mypy --strict`` on ``program``, importing ctxslots from this checkout's sources."""
    path = tmp_path / "user_program.py"
    path.write_text(program)
    env = {**os.environ, "MYPYPATH": str(SRC.parent)}
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--config-file", str(ROOT / "pyproject.toml"),
         "--cache-dir", str(ROOT / ".mypy_cache"), str(path)],
        capture_output=True, text=True, timeout=600, check=False, env=env, cwd=tmp_path,
    )


#: Contributors written three ways, each given where a Contributor is expected.
CONTRIBUTORS_PROGRAM = '''
import attrs

from ctxslots import AssemblyRequest, Contributor, Item, Section, StaticContributor


class HouseRules:
    name = "house_rules"
    priority = 95
    sticky = True

    def contribute(self, request: AssemblyRequest) -> Section:
        return Section(title="House rules", items=[Item("Answer in British English.")])


@attrs.frozen
class Glossary:
    name: str = "glossary"
    priority: int = 40
    sticky: bool = False

    async def contribute(self, request: AssemblyRequest) -> Section | None:
        return None


contributors: list[Contributor] = [
    HouseRules(), Glossary(), StaticContributor("persona", "Persona", ["Be brief."]),
]
'''


def test_contributors_of_frozen_classes_type_check_as_contributors(tmp_path):
    """A frozen class (the shipped ``StaticContributor`` is one) is a ``Contributor``
    to a type checker too, as it is at run time."""
    pytest.importorskip("mypy")
    done = _mypy_strict(tmp_path, CONTRIBUTORS_PROGRAM)
    contributors = runpy.run_path(str(tmp_path / "user_program.py"))["contributors"]
    assert isinstance(contributors, list) and len(contributors) == 3
    assert all(isinstance(c, ctxslots.Contributor) for c in contributors)
    assert 0 == done.returncode, done.stdout + done.stderr
    assert "Success: no issues found" in done.stdout
