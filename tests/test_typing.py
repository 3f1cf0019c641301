"""The package type-checks under ``mypy --strict`` (the public API ships ``py.typed``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "ctxslots"


def test_mypy_strict_is_clean(tmp_path):
    """Every module of the package passes ``mypy --strict``."""
    pytest.importorskip("mypy")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path), str(SRC)],
        capture_output=True, text=True, timeout=600, check=False,
    )
    assert 0 == done.returncode, done.stdout + done.stderr
    assert "Success: no issues found" in done.stdout
