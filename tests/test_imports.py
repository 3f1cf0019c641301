"""The parts of ctxslots import only what ../shared/DESIGN.md's table lets them know.

The import graph is read from the source with :mod:`ast`, so the checks hold
for imports inside functions and under ``if TYPE_CHECKING:`` too: a late import
or a type-only import is still a dependency of the design.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path

import attrs
import pytest

import ctxslots

PACKAGE_DIR = Path(ctxslots.__file__).parent

#: Top-level names of SQL drivers; only the storage engines may import them.
SQL_DRIVERS = frozenset({"apsw", "sqlite3", "sqlite_vec", "psycopg", "psycopg_pool", "pgvector"})

#: A string literal that is an SQL statement (or the start of one); keywords in capitals,
#: as every statement in the stores is written.
SQL_TEXT = re.compile(
    r"^\s*(SELECT\s.+\sFROM\s|INSERT\s+(OR\s+\w+\s+)?INTO\s|UPDATE\s+\w+\s+SET\s|DELETE\s+FROM\s|"
    r"CREATE\s+(VIRTUAL\s+|UNIQUE\s+)?(TABLE|INDEX|TRIGGER)\s|DROP\s+(TABLE|INDEX)\s|PRAGMA\s)",
    re.DOTALL,
)


@attrs.frozen
class Module:
    """One module of a package: its dotted name, file and what it imports.

    Attributes:
        name: Dotted module name (``ctxslots.stores.fact_store``).
        path: The source file.
        imports: Modules of the package it imports (resolved to existing modules).
        external: Top-level names of other distributions it imports.
        strings: Its string literals (docstrings included).
    """

    name: str
    path: Path
    imports: frozenset[str]
    external: frozenset[str]
    strings: tuple[str, ...]


def read_package(root: Path) -> dict[str, Module]:
    """Every module under the package directory ``root``, with its imports."""
    package = root.name
    files: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        files[".".join(parts)] = path

    def existing(name: str) -> str:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name

    modules = {}
    for name, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imports: set[str] = set()
        external: set[str] = set()
        strings = []
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".")
                    if path.name != "__init__.py":
                        base = base[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                # "from . import x" and "from .a import b" may name submodules.
                targets = [f"{target}.{alias.name}" if f"{target}.{alias.name}" in files else target
                           for alias in node.names]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                strings.append(node.value)
            for target in targets:
                if target.split(".")[0] == package:
                    resolved = existing(target)
                    if resolved and resolved != name:
                        imports.add(resolved)
                else:
                    external.add(target.split(".")[0])
        modules[name] = Module(name, path, frozenset(imports), frozenset(external), tuple(strings))
    return modules


def cycles(modules: dict[str, Module]) -> list[list[str]]:
    """The import circles: strongly connected components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(modules[v].imports):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for name in sorted(modules):
        if name not in index:
            visit(name)
    return found


def part_of(name: str) -> str:
    """The part of ctxslots a module belongs to (``stores``, ``model``, ``tokens``...)."""
    parts = name.split(".")
    if len(parts) == 1:
        return "__init__"
    part = parts[1]
    # The request is shared data of the model part, kept in its own module.
    return "model" if part == "request" else part


def _within(name: str, prefixes: Iterable[str]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


@attrs.frozen
class Rule:
    """What one part must not import, from DESIGN.md's table.

    Attributes:
        part: The part the rule is about.
        forbidden: Modules (with their submodules) of ctxslots it must not import.
        forbidden_external: Top-level names of other packages it must not import.
        only: When set, the only ctxslots modules it may import.
    """

    part: str
    forbidden: tuple[str, ...] = ()
    forbidden_external: frozenset[str] = frozenset()
    only: tuple[str, ...] | None = None

    def violations(self, modules: dict[str, Module]) -> list[str]:
        """Each forbidden import, as ``module -> target``."""
        found = []
        for module in modules.values():
            if part_of(module.name) != self.part:
                continue
            for target in sorted(module.imports):
                if part_of(target) == self.part:
                    continue
                if _within(target, self.forbidden) or (
                        self.only is not None and not _within(target, self.only)):
                    found.append(f"{module.name} -> {target}")
            found += [f"{module.name} -> {e}" for e in sorted(module.external & self.forbidden_external)]
        return found


def _c(*names: str) -> tuple[str, ...]:
    return tuple(f"ctxslots.{n}" for n in names)


#: The table of DESIGN.md ("must not know about"), as import rules.
RULES = (
    # Values know no SQL, pluggy, jinja2 or assembler. AssembledPrompt.dump() imports the
    # dump renderer when called; the renderer reads the dump's data, not the model.
    Rule("model", only=_c("errors", "prompts.dump", "_readable"),
         forbidden_external=SQL_DRIVERS | {"pluggy", "jinja2", "tiktoken"}),
    Rule("hookspecs", only=(), forbidden_external=SQL_DRIVERS | {"jinja2"}),
    Rule("errors", only=(), forbidden_external=SQL_DRIVERS | {"pluggy", "jinja2"}),
    Rule("stores", forbidden=_c("prompts", "tokens", "contributors", "assembler", "flusher",
                                "tools", "cli", "testing"),
         forbidden_external=frozenset({"jinja2", "tiktoken"})),
    Rule("contributors", forbidden=_c("assembler", "flusher", "tools", "cli"),
         forbidden_external=SQL_DRIVERS | {"jinja2"}),
    Rule("assembler", forbidden=_c("flusher", "tools", "cli"), forbidden_external=SQL_DRIVERS),
    # How facts are ranked is the store's business; extraction does not depend on assembly.
    Rule("flusher", forbidden=_c("assembler", "contributors", "tools", "cli", "stores.ranking",
                                 "stores.rerank", "ranking"),
         forbidden_external=SQL_DRIVERS),
    # Rendering only: no model, no stores, no plugins (English month names from
    # ctxslots._calendar, a leaf module like _readable).
    Rule("prompts", only=_c("errors", "_readable", "_calendar"),
         forbidden_external=SQL_DRIVERS | {"pluggy"}),
    # Tokens write their cache folder as every private folder is written (ctxslots._files).
    Rule("tokens", only=_c("errors", "_files"),
         forbidden_external=SQL_DRIVERS | {"jinja2", "pluggy"}),
    Rule("tools", forbidden=_c("assembler", "flusher", "cli"), forbidden_external=SQL_DRIVERS),
    Rule("cli", forbidden_external=SQL_DRIVERS),
)


@pytest.fixture(name="modules", scope="module")
def fixture_modules():
    return read_package(PACKAGE_DIR)


def test_the_graph_reader_sees_late_relative_package_and_type_only_imports(modules):
    """The reader resolves relative, late, ``from . import x`` and TYPE_CHECKING imports."""
    assert "ctxslots.contributors.base" in modules["ctxslots.assembler.assembler"].imports
    assert "ctxslots.prompts.dump" in modules["ctxslots.model.prompt"].imports  # inside dump()
    assert "ctxslots.cli.facts" in modules["ctxslots.cli"].imports  # from . import facts
    assert "ctxslots.request" in modules["ctxslots.contributors.memory"].imports  # TYPE_CHECKING
    assert "apsw" in modules["ctxslots.stores.sqlite._connection"].external


def test_the_checks_catch_a_circle_and_a_forbidden_import(tmp_path):
    """A package with a circle (one side a type-only import) and a model that imports the
    assembler fails both checks."""
    root = tmp_path / "ctxslots"
    (root / "assembler").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "model.py").write_text("def f():\n    from .assembler import run\n")
    (root / "assembler" / "__init__.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..model import f\nrun = 1\n")
    modules = read_package(root)
    assert [["ctxslots.assembler", "ctxslots.model"]] == cycles(modules)
    assert ["ctxslots.model -> ctxslots.assembler"] == RULES[0].violations(modules)


def test_no_import_circles(modules):
    """No module of ctxslots imports itself through others, even through a late or a
    type-only import."""
    assert [] == cycles(modules)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.part)
def test_parts_import_only_what_design_allows(modules, rule):
    """Each part imports none of what DESIGN.md's table says it must not know about."""
    assert {part_of(m) for m in modules} >= {rule.part}
    assert [] == rule.violations(modules)


def test_no_part_imports_another_parts_private_module(modules):
    """A module in a ``_private`` file of a part is imported only from inside that part."""
    found = []
    for module in modules.values():
        for target in module.imports:
            private = any(p.startswith("_") and not p.startswith("__") for p in target.split(".")[1:])
            top_level_helper = target.count(".") == 1  # ctxslots._http: shared by the package
            if private and not top_level_helper and part_of(target) != part_of(module.name):
                found.append(f"{module.name} -> {target}")
    assert [] == sorted(found)


#: The storage engines: the only modules that hold SQL.
ENGINES = ("ctxslots.stores.sqlite", "ctxslots.stores.postgres")


def _in_engine(name: str) -> bool:
    return any(name == e or name.startswith(e + ".") for e in ENGINES)


def test_sql_lives_only_in_the_storage_engines(modules):
    """No string literal outside ``stores/sqlite`` and ``stores/postgres`` is an SQL statement."""
    found = {m.name for m in modules.values() if not _in_engine(m.name)
             for s in m.strings if SQL_TEXT.match(s)}
    assert set() == found


def _foreign_private_attributes(path: Path) -> set[str]:
    """``obj._x`` reads in a file where ``obj`` is not self, cls or an imported module and
    ``_x`` is not an attribute that file defines."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    modules_bound = {(a.asname or a.name).split(".")[0] for n in ast.walk(tree)
                     if isinstance(n, ast.Import) for a in n.names}
    own = {t.attr for n in ast.walk(tree) if isinstance(n, (ast.Assign, ast.AnnAssign))
           for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
           if isinstance(t, ast.Attribute)}
    own |= {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    own |= {n.target.id for n in ast.walk(tree)
            if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    found = set()
    for n in ast.walk(tree):
        if (isinstance(n, ast.Attribute) and n.attr.startswith("_") and not n.attr.startswith("__")
                and n.attr not in own):
            base = ast.unparse(n.value)
            if base not in {"self", "cls"} and base.split(".")[0] not in modules_bound:
                found.add(f"{base}.{n.attr}")
    return found


def test_no_module_reaches_into_another_objects_private_state(modules):
    """No module reads another object's ``_x`` (ruff's SLF001 rule), the stores included."""
    found = {m.name: _foreign_private_attributes(m.path) for m in modules.values()}
    assert {} == {name: attributes for name, attributes in found.items() if attributes}


def test_the_private_state_check_sees_a_foreign_read(tmp_path):
    """Reading ``store._conn`` is caught; ``self._x`` and a module's own ``obj._x`` are not."""
    path = tmp_path / "m.py"
    path.write_text("class A:\n    _own: int = 0\n\n    def f(self, store, a):\n"
                    "        return store._conn, self._y, a._own\n")
    assert {"store._conn"} == _foreign_private_attributes(path)


def test_the_sql_pattern_matches_statements_and_not_prose():
    """The SQL check recognises statements and leaves ordinary sentences alone."""
    assert SQL_TEXT.match("SELECT id FROM facts WHERE slot = ?")
    assert SQL_TEXT.match("INSERT OR REPLACE INTO meta (k, v) VALUES (?, ?)")
    assert SQL_TEXT.match("  PRAGMA journal_mode")
    assert not SQL_TEXT.match("Select the facts you want from the list.")
    assert not SQL_TEXT.match("Update the value of a memory.")


@pytest.mark.parametrize(("old", "new", "names"), [
    ("ctxslots.model", "ctxslots.request", ["AssemblyRequest", "ContextBlock"]),
    ("ctxslots.tools", "ctxslots.errors", ["ArgumentError"]),
    ("ctxslots.plugins", "ctxslots.errors", ["PluginError"]),
    ("ctxslots.flusher", "ctxslots.errors", ["ReplyFormatError"]),
    ("ctxslots.stores", "ctxslots.errors", ["InvalidImportError"]),
])
def test_moved_names_still_import_from_their_old_homes(old, new, names):
    """A name that moved is the same object under its old import path."""
    import importlib

    before, after = importlib.import_module(old), importlib.import_module(new)
    assert [getattr(after, n) for n in names] == [getattr(before, n) for n in names]


def test_every_public_exception_lives_in_errors():
    """Every exception class ctxslots exports is defined in ctxslots.errors."""
    exported = [getattr(ctxslots, n) for n in ctxslots.__all__]
    errors = [e for e in exported if isinstance(e, type) and issubclass(e, BaseException)]
    assert errors and {"ctxslots.errors"} == {e.__module__ for e in errors}


def test_errors_lists_every_exception_it_defines():
    """``from ctxslots.errors import *`` gives every error the module defines, and its
    ``__all__`` names only what is there."""
    import ctxslots.errors

    defined = {name for name, value in vars(ctxslots.errors).items()
               if isinstance(value, type) and issubclass(value, BaseException)
               and value.__module__ == "ctxslots.errors"}
    star = set(ctxslots.errors.__all__)  # what "import *" gives
    assert "StoreFullError" in defined
    assert defined <= star, sorted(defined - star)
    assert all(hasattr(ctxslots.errors, name) for name in ctxslots.errors.__all__)
