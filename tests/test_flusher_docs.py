"""The Python examples in docs/flushing.md run as written."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_flushing_doc_examples_run(tmp_path, monkeypatch):
    """Every python block of docs/flushing.md runs, in order, in one namespace."""
    monkeypatch.chdir(tmp_path)
    text = (DOCS / "flushing.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```python\n(.*?)^```$", text, flags=re.MULTILINE | re.DOTALL)
    assert blocks
    namespace: dict = {"__name__": "docs_flushing"}
    for block in blocks:
        exec(compile(block, "flushing.md", "exec"), namespace)  # noqa: S102
