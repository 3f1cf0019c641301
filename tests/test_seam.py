"""The storage seam holds: SQL only in the engines, no part reaching into another's private state."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import ctxslots

SRC = Path(ctxslots.__file__).resolve().parent
ENGINES = (SRC / "stores" / "sqlite", SRC / "stores" / "postgres")
SQL = re.compile(r"\b(SELECT\s.+\sFROM|INSERT\s+(OR\s+\w+\s+)?INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|"
                 r"CREATE\s+(UNIQUE\s+|VIRTUAL\s+)?(TABLE|INDEX|TRIGGER)|DROP\s+TABLE|PRAGMA\s+\w+)\b",
                 re.IGNORECASE | re.DOTALL)


def _modules() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def test_no_sql_outside_the_storage_engines() -> None:
    """No string in a module outside stores/sqlite and stores/postgres is a SQL statement."""
    found = []
    for path in _modules():
        if any(engine in path.parents for engine in ENGINES):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and id(node) not in skip and SQL.search(node.value):
                found.append(f"{path.relative_to(SRC)}:{node.lineno}: {node.value[:60]!r}")
    assert [] == found


def test_no_module_touches_another_objects_private_attributes() -> None:
    """``x._name`` appears only as ``self._name`` or ``cls._name`` (ruff's SLF001 rule)."""
    found = []
    for path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        modules = {alias.asname or alias.name for node in ast.walk(tree)
                   if isinstance(node, ast.Import) for alias in node.names}
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") \
                    and not node.attr.startswith("__"):
                owner = node.value
                if isinstance(owner, ast.Name) and (owner.id in ("self", "cls")
                                                    or owner.id in modules):
                    continue  # own attributes, or a library module's (functools._CacheInfo)
                found.append(f"{path.relative_to(SRC)}:{node.lineno}: .{node.attr}")
    assert [] == found
