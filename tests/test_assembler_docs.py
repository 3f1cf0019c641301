"""The Python examples in the assembler and plugin docs run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"


@pytest.mark.parametrize("name", ["assembler.md", "plugins.md"])
def test_doc_examples_run(name, tmp_path, monkeypatch):
    """Every python block of the page runs, in order, in one namespace."""
    monkeypatch.chdir(tmp_path)
    blocks = re.findall(r"^```python\n(.*?)^```$", (DOCS / name).read_text(encoding="utf-8"),
                        flags=re.MULTILINE | re.DOTALL)
    assert blocks
    namespace: dict = {"__name__": f"docs_{name}"}
    preamble = "from ctxslots import hookimpl\n" if name == "plugins.md" else ""
    for block in blocks:
        exec(compile(preamble + block, f"{name}", "exec"), namespace)  # noqa: S102
