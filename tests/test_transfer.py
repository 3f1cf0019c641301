
"""Export and import of facts (JSONL and Markdown) between real store files."""

from __future__ import annotations

import io
import json
import os
import re
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _sql import engine_of
from ctxslots import ANY, FactStore, InvalidFactError, Limits
from ctxslots.errors import InvalidImportError
from ctxslots.stores.transfer.markdown_memory import parse_markdown, render_bullet, render_file

UNICODE = "Emoji 🎉👩‍💻, RTL مرحبا بالعالم, CJK 漢字かな, combining e\u0301 n\u0303"
MARKDOWN_VALUE = "# Not a heading\n- not a bullet\n\n```python\nprint('fenced')\n```\n* star"
TRICKY_VALUES = [
    "**looks**: like a key",
    "ends with a code span `#notatag`",
    "ends with the marker <!---->",
    "---",
    "  leading spaces stay",
    "line one\n\n  indented line three\n\ttabbed line four",
    "separators\u2028inside\u2029one line",
]


def _export(store: FactStore, **options) -> list[dict]:
    buffer = io.StringIO()
    store.export_jsonl(buffer, **options)
    return [json.loads(line) for line in buffer.getvalue().splitlines()]


def _jsonl(records: list[dict]) -> io.StringIO:
    return io.StringIO("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))


def _links_by_value(store: FactStore) -> set[tuple[frozenset[str], float]]:
    values = {f.id: f.value for f in store.facts(include_expired=True)}
    with engine_of(store) as backend:
        links = list(backend.all_links())
    return {(frozenset((values.get(a), values.get(b))), strength) for a, b, strength, _ in links}


def _table_counts(store: FactStore) -> tuple[int, ...]:
    with engine_of(store) as backend:
        counts = backend.counts()
        return (counts["facts"], counts["archived"], counts["history"],
                len(list(backend.all_links())))


@pytest.fixture(name="rich")
def fixture_rich(store, clock):
    """A store holding every kind of field: keys, history, scopes, scores, archive, links."""
    editor = store.upsert("user", "editor", "The user edits code in Helix.", tags=["tools"],
                          source="cli", confidence=0.8)
    clock.advance(days=1)
    store.upsert("user", "editor", "The user edits code in Neovim.", tags=["tools", "Editor Pref"])
    clock.advance(days=1)
    store.upsert("user", "editor", "The user edits code in Zed.", tags=["tools"])
    store.add("user", UNICODE, tags=["unicode"])
    store.add("user", MARKDOWN_VALUE, tags=["markdown", "a`b tick", "with space"])
    for value in TRICKY_VALUES:
        store.add("agent", value)
    store.upsert("project", "deploy.day", "Deploys run on Friday.", scope="repo/alpha")
    store.add("project", "Staging deploys need the VPN turned on first.", scope="repo/alpha")
    store.add("project", "The VPN profile lives in the ops vault.", scope="repo/alpha")
    store.add("project", "Beta uses pnpm, never npm.", scope="beta", tags=["js"])
    lesson = store.add("agent", "The CI cache is cold on Mondays.", source="flush:1")
    store.reinforce(lesson.id)
    store.reinforce(lesson.id)
    store.demote(editor.id)
    store.add("agent", "Tokens from the sandbox expire hourly.", expires_at=clock.now + 3600)
    store.add("agent", "This reminder has already expired.", expires_at=clock.now + 60)
    clock.advance(seconds=120)
    hits = store.search("staging deploys VPN profile", scope="repo/alpha")
    store.reinforce(hits[0].fact.id)                         # links the two VPN facts
    store.search("which editor does the user use")
    gone = store.add("agent", "The old build server is build-01.")
    store.forget(gone.id, reason="decommissioned")
    store.add("agent", "the user prefers dark mode in every editor")
    clock.advance(seconds=5)
    store.add("agent", "The user prefers dark mode in every editor!")
    store.consolidate()
    return store


# -- JSONL ---------------------------------------------------------------------


def test_jsonl_round_trip_is_lossless(rich, tmp_path, clock):
    """export -> import into an empty store -> export gives the same records, ids included."""
    before = _export(rich)
    with FactStore(tmp_path / "copy.db", clock=clock) as copy:
        report = copy.import_jsonl(_jsonl(before))
        after = _export(copy)
        assert before[1:] == after[1:]
        assert (report.added, report.archived, report.renumbered) == (len(before) - 2, 1, 0)
        assert 2 == report.history_entries
        assert _table_counts(rich) == _table_counts(copy)
        assert _links_by_value(rich) == _links_by_value(copy) != set()
        assert copy.doctor().ok, copy.doctor().problems
        hits = copy.search("edits code in Zed")
        assert "The user edits code in Zed." == hits[0].fact.value
        assert ["The user edits code in Helix.", "The user edits code in Neovim."] == [
            f.value for f in copy.history(hits[0].fact.id)]


def test_export_keeps_every_kind_of_field(rich):
    """Scores, access counts, expiry, archive, history, scopes, links and superseding are exported."""
    records = {r["value"]: r for r in _export(rich)[1:]}
    assert 2 * 3.0 == records["The CI cache is cold on Mondays."]["score"]
    editor = records["The user edits code in Zed."]
    assert (-1.0, 1, "editor") == (editor["score"], editor["access_count"], editor["key"])
    assert editor["last_accessed"] is not None and editor["source"] is None
    assert ["Helix", "Neovim"] == [h["value"].split()[-1].rstrip(".") for h in editor["history"]]
    assert ["tools", "Editor Pref"] == editor["history"][1]["tags"]
    archived = records["The old build server is build-01."]
    assert (True, "decommissioned") == (archived["archived"], archived["reason"])
    assert isinstance(archived["archived_at"], float)
    assert records["This reminder has already expired."]["expires_at"] is not None
    assert "repo/alpha" == records["Deploys run on Friday."]["scope"]
    older = records["the user prefers dark mode in every editor"]
    assert older["superseded_by"] == records["The user prefers dark mode in every editor!"]["id"]
    vpn = records["Staging deploys need the VPN turned on first."]
    assert records["The VPN profile lives in the ops vault."]["id"] in [
        link["to"] for link in vpn["links"]]
    assert UNICODE in records and MARKDOWN_VALUE in records


def test_export_header_order_and_determinism(rich, clock):
    """The header comes first; facts follow by id; two exports give the same records."""
    first, second = _export(rich), _export(rich)
    assert {"format": "ctxslots-facts", "version": 1} == {
        k: first[0][k] for k in ("format", "version")}
    assert first[0]["exported_at"].startswith("2027-")
    ids = [r["id"] for r in first[1:]]
    assert ids == sorted(ids)
    assert first == second


def test_export_filters(rich):
    """Slots, a scope (that scope only), no archive and no history narrow the export."""
    assert {"user"} == {r["slot"] for r in _export(rich, slots=["user"])[1:]}
    assert {"repo/alpha"} == {r["scope"] for r in _export(rich, scope="repo/alpha")[1:]}
    every_scope = {r["scope"] for r in _export(rich)[1:]}
    assert {None, "repo/alpha", "beta"} == every_scope
    assert not any(r["archived"] for r in _export(rich, include_archive=False)[1:])
    assert all("history" not in r for r in _export(rich, include_history=False)[1:])
    with pytest.raises(InvalidFactError):
        _export(rich, slots=["Not A Slot"])


def test_importing_twice_skips_duplicates(rich, tmp_path, clock):
    """A second import of the same file adds nothing and counts every fact as a duplicate."""
    records = _export(rich)
    with FactStore(tmp_path / "copy.db", clock=clock) as copy:
        copy.import_jsonl(_jsonl(records))
        counts = _table_counts(copy)
        report = copy.import_jsonl(_jsonl(records))
        assert (0, 0, len(records) - 1) == (report.added, report.archived,
                                            report.skipped_duplicates)
        assert counts == _table_counts(copy)


def test_duplicate_rule_keyed_by_key_free_by_value(store, tmp_path, clock):
    """A keyed fact is a duplicate by slot+scope+key (the stored value wins); a free one by value."""
    store.upsert("user", "editor", "The user edits code in Vim.")
    store.add("agent", "Run the linter before pushing.")
    with FactStore(tmp_path / "other.db", clock=clock) as other:
        other.upsert("user", "editor", "The user edits code in Emacs.")
        other.add("agent", "Run the linter before pushing.")
        other.add("agent", "Run the linter before pushing!")
        report = store.import_jsonl(_jsonl(_export(other)))
    assert (1, 2) == (report.added, report.skipped_duplicates)
    assert "The user edits code in Vim." == store.get_by_key("user", "editor").value


def test_one_file_of_many_users_keeps_each_users_facts(store):
    """Records of two users with the same key or the same text are two facts, not duplicates."""
    header = {"format": "ctxslots-facts", "version": 1}
    lines = [header]
    for user in ("ada", "bob"):
        lines += [{"slot": "user", "user": user, "key": "city", "value": f"{user} lives in Oslo."},
                  {"slot": "user", "user": user, "value": "Likes hiking."},
                  {"slot": "agent", "agent": user, "scope": "atlas", "value": "Ask first."}]
    report = store.import_jsonl(_jsonl(lines))
    assert (6, 0) == (report.added, report.skipped_duplicates)
    for user in ("ada", "bob"):
        assert f"{user} lives in Oslo." == store.get_by_key("user", "city", user=user).value
        assert ["Likes hiking."] == [h.fact.value for h in store.search("hiking", user=user)]
        assert ["Ask first."] == [h.fact.value for h in store.search(
            "ask first", scope="atlas", agent=user, slots=["agent"])]


def test_taken_ids_are_renumbered_and_links_follow(rich, tmp_path, clock):
    """Into a store whose ids are taken, facts get new ids; history, links and superseding follow."""
    records = _export(rich)
    with FactStore(tmp_path / "busy.db", clock=clock) as busy:
        for n in range(40):
            busy.add("agent", f"Existing fact number {n} about nothing.")
        report = busy.import_jsonl(_jsonl(records))
        assert report.renumbered == len(records) - 1
        copied = {r["value"]: r for r in _export(busy)[1:] if r["id"] > 40}
        assert len(records) - 1 == len(copied)
        newer = copied["The user prefers dark mode in every editor!"]["id"]
        assert newer == copied["the user prefers dark mode in every editor"]["superseded_by"]
        vpn = copied["Staging deploys need the VPN turned on first."]["id"]
        profile = copied["The VPN profile lives in the ops vault."]["id"]
        assert 1.0 == busy.links(vpn)[profile]
        assert _links_by_value(rich) == _links_by_value(busy)
        assert 2 == len(copied["The user edits code in Zed."]["history"])
        archived_id = copied["The old build server is build-01."]["id"]
        assert busy.add("agent", "A fact written after the import.").id > archived_id
        assert busy.doctor().ok


def test_only_the_ids_that_are_taken_are_renumbered(store, clock):
    """Ids 1, 2, 3 and 50 into a store holding fact 1: only the first record gets a new
    id; 2, 3 and 50 keep theirs, and a superseded_by naming the renumbered one follows it."""
    assert 1 == store.add("agent", "A fact already here.").id
    header = {"format": "ctxslots-facts", "version": 1}
    records = [header, {"id": 1, "slot": "agent", "value": "Apple one."},
               {"id": 2, "slot": "agent", "value": "Banana two.", "superseded_by": 1},
               {"id": 3, "slot": "agent", "value": "Cherry three."},
               {"id": 50, "slot": "agent", "value": "Date fifty."}]
    report = store.import_jsonl(_jsonl(records))
    assert (4, 1) == (report.added, report.renumbered)
    assert ["Banana two.", "Cherry three.", "Date fifty."] == [
        store.get(i).value for i in (2, 3, 50)]
    apple = store.get(2).superseded_by
    assert apple not in (1, 2, 3, 50) and "Apple one." == store.get(apple).value


def test_the_first_of_two_records_of_one_key_is_kept_when_its_id_is_taken(store):
    """The first record's id is taken, the second's (the same key) free: the first is
    still the one kept and the second skipped as its duplicate, as without the clash."""
    assert 1 == store.add("agent", "A fact already here.").id
    header = {"format": "ctxslots-facts", "version": 1}
    report = store.import_jsonl(_jsonl([
        header, {"id": 1, "slot": "user", "key": "city", "value": "Lisbon"},
        {"id": 50, "slot": "user", "key": "city", "value": "Porto"}]))
    assert (1, 1, 1) == (report.added, report.skipped_duplicates, report.renumbered)
    assert "Lisbon" == store.get_by_key("user", "city").value


def test_an_archived_id_is_never_handed_out_again(store, tmp_path, clock):
    """An imported archived fact's id is reserved: later facts never reuse it."""
    header = {"format": "ctxslots-facts", "version": 1}
    archived = {"id": 7, "slot": "agent", "value": "Old lesson.", "archived": True,
                "archived_at": clock.now, "reason": "stale"}
    report = store.import_jsonl(_jsonl([header, archived]))
    assert 1 == report.archived
    assert store.get(7, include_archive=True).archived
    assert store.add("agent", "New lesson.").id == 8


def test_minimal_records_take_defaults(store, clock):
    """Hand-written records need only slot and value; ISO 8601 times are accepted."""
    header = {"format": "ctxslots-facts", "version": 1}
    lines = [header, {"slot": "user", "value": "The user is called Ada."},
             {"slot": "user", "key": "tz", "value": "Europe/Paris", "tags": ["time"],
              "created_at": "2026-05-01T10:00:00Z"}]
    report = store.import_jsonl(_jsonl(lines))
    assert 2 == report.added
    fact = store.get_by_key("user", "tz")
    assert ("Europe/Paris", ("time",)) == (fact.value, fact.tags)
    assert "2026-05-01T10:00:00+00:00" == fact.created_at.isoformat()
    assert store.search("Ada")[0].fact.created_at.timestamp() == clock.now


HEADER = '{"format": "ctxslots-facts", "version": 1}\n'
GOOD = '{"slot": "user", "value": "The user is called Ada."}\n'


@pytest.mark.parametrize(("text", "line", "words"), [
    (HEADER + GOOD + '{"slot": "user", "value": \n', 3, "not JSON"),
    (HEADER + GOOD + '["slot", "user"]\n', 3, "JSON object"),
    (HEADER + '{"slot": "user", "value": 42}\n', 2, "value must be"),
    (HEADER + GOOD + json.dumps({"slot": "user", "value": "x" * 5000}) + "\n", 3, "over the limit"),
    (HEADER + '{"slot": "user", "value": "v", "colour": "red"}\n', 2, "unknown field"),
    (HEADER + '{"slot": "User Slot", "value": "v"}\n', 2, "invalid slot"),
    (HEADER + '{"slot": "user", "value": "v", "tags": "one"}\n', 2, "tags must be a list"),
    (HEADER + '{"slot": "user", "value": "v", "score": "high"}\n', 2, "score"),
    (HEADER + '{"slot": "user", "value": "v", "access_count": -1}\n', 2, "access_count"),
    (HEADER + '{"slot": "user", "value": "v", "created_at": "yesterday"}\n', 2, "created_at"),
    (HEADER + '{"slot": "user", "value": "v", "archived": "yes"}\n', 2, "archived"),
    (HEADER + '{"slot": "user", "value": "v", "reason": "r"}\n', 2, "only for archived"),
    (HEADER + '{"slot": "user", "value": "v", "history": [{"value": "old"}]}\n', 2,
     "valid_from"),
    (HEADER + '{"slot": "user", "value": "v", "links": [{"to": 0, "strength": 1}]}\n', 2, "to"),
    (HEADER + '{"slot": "user", "value": "v", "id": 9223372036854775808}\n', 2, "id must be"),
    (HEADER + '{"slot": "user", "value": "v", "created_at": 1' + "0" * 400 + "}\n", 2,
     "created_at"),
    (HEADER + '{"slot": "user", "value": "v", "confidence": 1e999}\n', 2, "confidence"),
    (HEADER + '{"slot": "user", "value": "v", "access_count": ' + "9" * 5000 + "}\n", 2,
     "not JSON"),
    (HEADER + "[" * 100_000 + "]" * 100_000 + "\n", 2, "not JSON"),
    (HEADER + '{"slot": "user", "value": "lone \\ud800 surrogate"}\n', 2, "Unicode"),
    (HEADER + '{"slot": "user", "value": "v", "source": "\\udfff"}\n', 2, "source"),
    (GOOD, 1, "header"),
    ('{"format": "ctxslots-facts", "version": 2}\n' + GOOD, 1, "newer"),
    ("\n\n", 1, "empty"),
])
def test_malformed_input_names_the_line_and_writes_nothing(store, text, line, words):
    """Each kind of bad line fails the whole import with its line number; nothing is written."""
    with pytest.raises(InvalidImportError) as caught:
        store.import_jsonl(io.StringIO(text))
    assert line == caught.value.line
    assert str(caught.value).startswith(f"line {line}: ")
    assert words in str(caught.value)
    assert isinstance(caught.value, ValueError)
    assert (0, 0, 0, 0) == _table_counts(store)


def test_unknown_slot_in_strict_mode(db_path, clock):
    """With strict slots, a record of an unknown slot fails the import."""
    with FactStore(db_path, clock=clock, limits=Limits(strict_slots=True)) as strict:
        with pytest.raises(InvalidImportError, match="line 3: unknown slot 'notes'"):
            strict.import_jsonl(io.StringIO(HEADER + GOOD + '{"slot": "notes", "value": "v"}\n'))
        assert 0 == strict.stats()["facts"]


def test_a_plugin_slot_moved_without_its_plugin_says_to_install_it(tmp_path, clock):
    """A store whose plugin registers a user-owned ``diary`` slot exports its facts. A store
    without the plugin refused them with "unknown slot 'diary' (known: ...)"; one accepting
    any slot told to "leave out user", which would have made each user's diary shared.
    Both now say to install the plugin, and write nothing; with it, the owners are kept."""
    from ctxslots import SlotOwners
    from ctxslots.stores.owners import BUILTIN_SLOT_OWNERS

    diary = Limits(slots=("user", "project", "agent", "diary"),
                   slot_owners={**BUILTIN_SLOT_OWNERS, "diary": SlotOwners.parse("user")})
    with FactStore(tmp_path / "plugin.db", clock=clock, limits=diary) as store:
        store.add("diary", "Bob ran 5 km.", user="bob")
        text = io.StringIO()
        store.export_jsonl(text)
    with FactStore(tmp_path / "strict.db", clock=clock) as strict:
        with pytest.raises(InvalidImportError, match=(
                r"^line 2: unknown slot 'diary' \(known: user, project, agent\): a plugin's "
                r"slot\? install the plugin that registers it, then import again$")):
            strict.import_jsonl(io.StringIO(text.getvalue()))
        assert 0 == strict.stats()["facts"]
    with FactStore(tmp_path / "free.db", clock=clock,
                   limits=Limits(strict_slots=False)) as free:
        with pytest.raises(InvalidImportError) as caught:
            free.import_jsonl(io.StringIO(text.getvalue()))
        assert ("line 2: diary is a slot no plugin here registers, so its facts belong to no "
                "user (user 'bob' given): install the plugin that registers diary (it says "
                "whose its facts are), then import again") == str(caught.value)
        assert 0 == free.stats()["facts"]
        with pytest.raises(InvalidFactError, match="install the plugin that registers diary"):
            free.import_markdown("- Bob ran 5 km.", slot="diary", user="bob")
    with FactStore(tmp_path / "moved.db", clock=clock, limits=diary) as moved:
        assert 1 == moved.import_jsonl(io.StringIO(text.getvalue())).added
        assert [("bob", None)] == [(f.user, f.scope) for f in moved.facts(slots=["diary"],
                                                                         user="bob")]


def test_text_that_is_not_utf8_names_its_line(store, tmp_path):
    """Bytes that are not UTF-8 fail with a clear error and write nothing."""
    path = tmp_path / "bad.jsonl"
    path.write_bytes(HEADER.encode() + GOOD.encode() + b'{"slot": "user", "value": "\xff"}\n')
    with path.open(encoding="utf-8") as fp, pytest.raises(InvalidImportError, match="UTF-8"):
        store.import_jsonl(fp)
    assert 0 == store.stats()["facts"]


def test_a_byte_that_is_not_utf8_on_line_5000_is_named_on_line_5000(store, tmp_path):
    """Read as the command line reads (a bad byte kept as a lone surrogate), the error names
    the very line, far into the file; nothing is written."""
    path = tmp_path / "bad.jsonl"
    path.write_bytes(HEADER.encode() + GOOD.encode() * 4998
                     + b'{"slot": "user", "value": "bad \xff byte"}\n' + GOOD.encode())
    with path.open(encoding="utf-8", errors="surrogateescape") as fp, \
            pytest.raises(InvalidImportError, match="line 5000: not UTF-8 text"):
        store.import_jsonl(fp)
    assert 0 == store.stats()["facts"]


def test_a_record_naming_a_field_twice_is_refused(store):
    """{"value": "x", "value": "y"} means x to some readers and y to others: refused, naming
    the field and the line, as any malformed record."""
    text = HEADER + GOOD + '{"slot": "user", "value": "Tea.", "value": "Coffee."}\n'
    with pytest.raises(InvalidImportError, match="line 3: the record names 'value' twice"):
        store.import_jsonl(io.StringIO(text))
    assert 0 == store.stats()["facts"]


def test_skip_invalid_imports_the_rest(store):
    """skip_invalid imports the valid lines and reports each bad one with its line."""
    text = (HEADER + GOOD + "{oops\n" + '{"slot": "user", "value": ""}\n'
            + '{"slot": "agent", "value": "Use ripgrep."}\n')
    report = store.import_jsonl(io.StringIO(text), skip_invalid=True)
    assert 2 == report.added
    assert [3, 4] == [e.line for e in report.errors]
    assert "2 invalid lines skipped" in report.summary()
    assert {"The user is called Ada.", "Use ripgrep."} == {f.value for f in store.facts()}


def test_on_duplicate_error_writes_nothing(store):
    """on_duplicate="error" fails on a fact already stored, leaving the store as it was."""
    store.add("user", "The user is called Ada.")
    text = HEADER + '{"slot": "agent", "value": "Use ripgrep."}\n' + GOOD
    with pytest.raises(InvalidImportError, match="line 3: fact already in the store"):
        store.import_jsonl(io.StringIO(text), on_duplicate="error")
    assert ["The user is called Ada."] == [f.value for f in store.facts()]
    with pytest.raises(InvalidFactError, match="on_duplicate"):
        store.import_jsonl(io.StringIO(text), on_duplicate="replace")


# -- Markdown ------------------------------------------------------------------


def test_markdown_export_is_readable(rich):
    """One heading per slot and scope, keyed bullets in bold, tags as code spans, no archive."""
    text = rich.export_markdown()
    assert text.startswith("# user\n\n- **editor**: The user edits code in Zed. `#tools`\n")
    assert "\n# project (scope: repo/alpha)\n" in text and "\n# agent\n" in text
    assert text.index("# user") < text.index("# project") < text.index("# agent")
    assert "- Beta uses pnpm, never npm. `#js`" in text
    assert "\n- # Not a heading\n  - not a bullet\n\n  ```python\n" in text
    assert "  ```\n  * star\n  `#markdown` `` #a`b tick `` `#with space`\n" in text
    assert "build-01" not in text                                # archived
    assert "already expired" not in text                          # expired


def _facts(store: FactStore, slot: str, scope: str | None) -> set[tuple]:
    """The facts of a slot and scope that searches show (Markdown writes no hidden one)."""
    return {(f.key, f.value, f.tags) for f in store.facts(slots=[slot], scope=scope)
            if f.scope == scope and f.superseded_by is None}


def _markdown_files(store: FactStore, directory: Path) -> dict[tuple[str, str | None], str]:
    """Each file of a Markdown export, by ``(slot, scope)``; its title names the scope."""
    files = {}
    for path in store.export_markdown(directory):
        text = path.read_text(encoding="utf-8")
        title = re.match(r"# (\S+)(?: \(scope: (.*)\))?$", text.splitlines()[0])
        assert title is not None
        files[title.group(1), title.group(2)] = text
    return files


def test_render_markdown_gives_the_files_by_slot_and_scope(rich, tmp_path):
    """``store.render_markdown()`` gives the text of each file a directory export writes,
    keyed by ``(slot, scope)``, in the order the one-text export joins them."""
    files = rich.render_markdown()
    assert _markdown_files(rich, tmp_path / "out") == files
    assert rich.export_markdown() == "\n".join(files.values())
    assert [("user", None)] == list(rich.render_markdown(slots=["user"]))


def test_markdown_round_trip_keeps_values_keys_and_tags(rich, tmp_path, clock):
    """Every exported file reads back to the same values, keys and tags."""
    with FactStore(tmp_path / "md.db", clock=clock) as copy:
        files = _markdown_files(rich, tmp_path / "rich")
        for (slot, scope), text in files.items():
            report = copy.import_markdown(text, slot=slot, scope=scope)
            assert report.ignored_lines == 0 and not report.errors
        for slot, scope in files:
            assert _facts(rich, slot, scope) == _facts(copy, slot, scope), (slot, scope)
        assert files == _markdown_files(copy, tmp_path / "copy")
        assert copy.doctor().ok
        again = copy.import_markdown(files[("user", None)], slot="user")
        assert (0, 3) == (again.added, again.skipped_duplicates)


def test_import_markdown_reads_the_scope_its_title_names(tmp_path):
    """Without ``scope=``, ``import_markdown`` put the facts of a ``# project (scope:
    repo)`` file in the global scope, where ``ctxslots import`` puts them in ``repo``; a
    file and a text now read into the title's scope, and a scope given wins, as
    ``--scope`` does."""
    text = "<!-- notes -->\n# project (scope: repo)\n\n- Deploys run on Friday.\n"
    path = tmp_path / "project.md"
    path.write_text(text, encoding="utf-8")
    with FactStore(tmp_path / "md.db") as store:
        assert 1 == store.import_markdown(path, slot="project").added
        assert 1 == store.import_markdown(text.replace("Friday", "Monday"), slot="project").added
        assert 1 == store.import_markdown(text.replace("Friday", "Sunday"), slot="project",
                                          scope="shop").added
        assert 1 == store.import_markdown("# project\n\n- Tests run nightly.\n",
                                          slot="project").added
        shown = sorted((f.value, f.scope) for f in store.facts(scope=ANY))
    assert [("Deploys run on Friday.", "repo"), ("Deploys run on Monday.", "repo"),
            ("Deploys run on Sunday.", "shop"), ("Tests run nightly.", None)] == shown


def _pipe_path(text: str) -> tuple[Path, threading.Thread]:
    """A path that reads ``text`` once, as bash's ``<(...)`` gives (``/dev/fd/N`` of a
    pipe), and the thread writing it."""
    read_end, write_end = os.pipe()

    def feed() -> None:
        with os.fdopen(write_end, "wb") as out:
            out.write(text.encode("utf-8"))

    writer = threading.Thread(target=feed)
    writer.start()
    return Path(f"/dev/fd/{read_end}"), writer


@pytest.mark.skipif(not os.path.isdir("/dev/fd"), reason="no /dev/fd")
def test_import_markdown_of_a_pipe_reads_every_fact_and_the_titles_scope(tmp_path):
    """Without ``scope=``, ``import_markdown`` opened a file twice: once for the scope its
    title names, once for its facts. A pipe (``/dev/fd/N``, as ``<(...)`` gives) gave the
    second reading nothing, so every fact was silently lost; now the title and the facts
    come from one reading."""
    text = "# project (scope: repo)\n\n" + "".join(
        f"- Deploy step {n} runs on Friday.\n" for n in range(5))
    with FactStore(tmp_path / "md.db") as store:
        path, writer = _pipe_path(text)
        try:
            report = store.import_markdown(path, slot="project")
        finally:
            writer.join()
            os.close(int(path.name))
        assert 5 == report.added
        assert 5 * ["repo"] == [f.scope for f in store.facts(scope=ANY)]


def test_markdown_directory_layout_round_trips(rich, tmp_path, clock):
    """A directory export writes slot files and scope subdirectories that import back."""
    paths = rich.export_markdown(tmp_path / "out")
    names = sorted(str(p.relative_to(tmp_path / "out")) for p in paths)
    assert ["agent.md", "scopes/beta/project.md", "scopes/repo%2Falpha/project.md",
            "user.md"] == names
    alpha = tmp_path / "out" / "scopes" / "repo%2Falpha" / "project.md"
    assert alpha.read_text(encoding="utf-8").startswith("# project (scope: repo/alpha)\n")
    with FactStore(tmp_path / "md.db", clock=clock) as copy:
        report = copy.import_markdown(alpha, slot="project", scope="repo/alpha")
        assert 3 == report.added
        assert _facts(rich, "project", "repo/alpha") == _facts(copy, "project", "repo/alpha")
        fact = copy.get_by_key("project", "deploy.day", scope="repo/alpha")
        assert "markdown:project.md" == fact.source



def test_markdown_file_of_user_facts_kept_in_a_scope_reads_back(store, tmp_path, clock):
    """A user fact an older release kept in a scope (a JSONL record carries it so) is
    exported to ``scopes/<scope>/user.md``; that file imports back into the scope, on
    either engine. It was refused with "user facts belong to a user, not to a workspace
    (scope)", so the export wrote a file no import could read."""
    value = "Bob prefers tabs in the shop-api repo."
    store.import_jsonl(_jsonl([{"format": "ctxslots-facts", "version": 1},
                               {"slot": "user", "user": "bob", "scope": "shop-api",
                                "value": value, "tags": ["style"]}]))
    paths = store.export_markdown(tmp_path / "out", user="bob")
    scoped = tmp_path / "out" / "scopes" / "shop-api" / "user.md"
    assert scoped in paths
    assert scoped.read_text(encoding="utf-8").startswith("# user (scope: shop-api)\n")
    with FactStore(tmp_path / "copy.db", clock=clock) as copy:
        report = copy.import_markdown(scoped, slot="user", scope="shop-api", user="bob")
        assert (1, 0) == (report.added, len(report.errors))
        [fact] = copy.facts(user="bob", scope="shop-api")
        assert ("user", "bob", "shop-api", value, ("style",)) == \
            (fact.slot, fact.user, fact.scope, fact.value, fact.tags)
        assert [fact.id] == [h.fact.id for h in copy.search("tabs", user="bob",
                                                            scope="shop-api")]
        assert [] == copy.search("tabs", user="bob")
        again = copy.import_markdown(scoped, slot="user", scope="shop-api", user="bob")
        assert (0, 1) == (again.added, again.skipped_duplicates)



def test_a_one_file_export_of_several_slots_is_refused_not_misfiled(rich, tmp_path, clock):
    """``export_markdown()`` without a folder (``export --format markdown -o all.md``) is one
    text of every slot's file. Imported into one slot, it filed every other slot's and
    scope's facts in that slot, as its owner's: the titles of the other slots became tags.
    Now the first title of another slot stops the import, named with its line, and nothing
    is written; a heading that only looks like a slot name stays a tag."""
    text = rich.export_markdown()
    lines = text.split("\n")
    assert lines[0] == "# user"
    first_other = next(n for n, line in enumerate(lines, start=1)
                       if line.startswith("# ") and line != "# user")
    with FactStore(tmp_path / "md.db", clock=clock) as copy:
        with pytest.raises(InvalidImportError) as caught:
            copy.import_markdown(text, slot="user")
        assert caught.value.line == first_other
        assert f"'{lines[first_other - 1]}' is the title of the " in str(caught.value)
        assert "export to a folder" in str(caught.value)
        with pytest.raises(InvalidImportError, match="line 1: '# user' is the title"):
            copy.import_markdown(text, slot="agent", skip_invalid=True)
        assert [] == copy.facts(scope=ANY, user=ANY, agent=ANY, include_expired=True)
        hand = "# Agent\n- Mind the agent's cache.\n# project notes\n- Deploys on Friday.\n"
        copy.import_markdown(hand, slot="user")
        assert [("agent",), ("project-notes",)] == [f.tags for f in copy.facts(slots=["user"])]



def test_a_one_file_export_of_one_slot_in_several_scopes_is_refused_not_merged(
        store, tmp_path, clock):
    """``export_markdown(slots=["project"])`` without a folder is one text of that slot's file
    of every scope. Imported, it filed the facts of every scope in the one given (the titles
    of the others are no tags), so the workspaces' facts were silently merged. Now a title of
    the slot naming another scope than the file's first title stops the import, named with
    its line, and nothing is written; one title per file, or a title repeated, still reads."""
    store.add("project", "The global style guide uses tabs.")
    store.add("project", "The shop deploys on Fridays.", scope="shop")
    store.add("project", "The blog deploys on push.", scope="blog")
    text = store.export_markdown(slots=["project"])
    lines = text.split("\n")
    second = next(n for n, line in enumerate(lines, start=1) if line.startswith("# project (scope:"))
    with FactStore(tmp_path / "md.db", clock=clock) as copy:
        for scope in (None, "shop"):
            with pytest.raises(InvalidImportError) as caught:
                copy.import_markdown(text, slot="project", scope=scope, skip_invalid=True)
            assert (second, "title") == (caught.value.line, caught.value.field)
            assert "export to a folder" in str(caught.value)
        assert [] == copy.facts(scope=ANY, include_expired=True)
        for scope in ("shop", "blog"):
            [one] = store.render_markdown(slots=["project"], scope=scope).values()
            assert 1 == copy.import_markdown(one + one, slot="project", scope=scope).added
        assert {("shop", "The shop deploys on Fridays."), ("blog", "The blog deploys on push.")} \
            == {(f.scope, f.value) for f in copy.facts(scope=ANY)}


def test_markdown_leaves_out_a_near_duplicate_a_newer_fact_hides(store, tmp_path, clock):
    """A fact hidden behind a newer near-duplicate is in no search and no prompt. The
    Markdown export wrote it as a bullet, so the file showed it, and a store that read
    the file back found and showed both. It is left out now (JSONL keeps it, hidden)."""
    header = json.dumps({"format": "ctxslots-facts", "version": 1})
    store.import_jsonl(io.StringIO("\n".join([
        header,
        json.dumps({"id": 1, "slot": "user", "value": "Alice lives in Lisbon.",
                    "superseded_by": 2}),
        json.dumps({"id": 2, "slot": "user", "value": "Alice lives in Lisbon by the river."}),
        ""])))
    shown = [h.fact.value for h in store.search("Alice Lisbon", track_access=False)]
    assert ["Alice lives in Lisbon by the river."] == shown
    text = store.export_markdown()
    assert "# user\n\n- Alice lives in Lisbon by the river.\n" == text
    with FactStore(tmp_path / "md.db", clock=clock) as copy:
        copy.import_markdown(text, slot="user")
        assert shown == [h.fact.value for h in copy.search("Alice Lisbon")]
    assert [1, 2] == [r["id"] for r in _export(store)[1:]]


MEMORY_MD = """\
# Project Memory

Notes the agent keeps between sessions. This paragraph is prose.

## Build & Test
- Run `make test` before pushing.
* **python**: 3.11, from the venv in `.venv`
- Integration tests need Docker running:
  start it with `systemctl start docker`

  and wait for the socket.
  - nested detail stays in the bullet

## Code Style
- Prefer small modules. `#style`
1. numbered lists are prose
```
- a bullet inside a fence is prose
```
---
### Deep Heading
- Deep fact.

| table | row |
"""


def test_memory_md_headings_become_tags(store):
    """The common MEMORY.md shape: headings tag the bullets, keyed bullets, prose counted."""
    report = store.import_markdown(MEMORY_MD, slot="project", scope="repo")
    assert (5, 0) == (report.added, report.skipped_duplicates)
    assert 7 == report.ignored_lines          # prose, numbered list, fence (3), rule, table
    facts = {f.value: f for f in store.facts(slots=["project"], scope="repo")}
    assert ("project-memory", "build-&-test") == facts["Run `make test` before pushing."].tags
    assert "python" == facts["3.11, from the venv in `.venv`"].key
    multi = ("Integration tests need Docker running:\nstart it with `systemctl start docker`\n\n"
             "and wait for the socket.\n- nested detail stays in the bullet")
    assert multi in facts
    assert ("project-memory", "code-style", "style") == facts["Prefer small modules."].tags
    assert ("project-memory", "code-style", "deep-heading") == facts["Deep fact."].tags
    assert store.search("Docker socket", scope="repo")[0].fact.value == multi
    assert store.doctor().ok
    again = store.import_markdown(MEMORY_MD, slot="project", scope="repo")
    assert (0, 5) == (again.added, again.skipped_duplicates)


def test_markdown_text_starting_with_a_byte_order_mark_keeps_its_first_bullet(store):
    """Text read from a file saved with a byte-order mark reads like the file itself."""
    report = store.import_markdown("\ufeff- First.\n- Second.\n", slot="agent")
    assert (2, 0) == (report.added, report.ignored_lines)
    assert ["First.", "Second."] == [f.value for f in store.facts(slots=["agent"])]


def test_a_bullet_marker_followed_by_a_tab_starts_a_fact(store):
    """An editor that indents with tabs writes ``-<tab>text``: a list item, so a fact."""
    report = store.import_markdown("# user\n\n-\tEdits in Zed.\n*\tPrefers French.\n",
                                   slot="user")
    assert (2, 0) == (report.added, report.ignored_lines)
    assert ["Edits in Zed.", "Prefers French."] == [f.value for f in store.facts(slots=["user"])]


def test_a_code_fence_closes_only_on_a_run_as_long_as_its_opening(store):
    """A ```` fence holding a ``` example (a shorter run, or one with an info string) is one
    code block: the bullet inside it is prose."""
    text = "````\n```python\n- shown as code\n```\n````\n- A fact.\n"
    report = store.import_markdown(text, slot="agent")
    assert (1, 5) == (report.added, report.ignored_lines)
    assert ["A fact."] == [f.value for f in store.facts(slots=["agent"])]


def test_a_bullet_commented_out_is_not_imported(store):
    """Bullets inside an HTML comment (a person disabling them) render as nothing and are
    not read; the comment's lines are ignored prose, and reading resumes after it."""
    text = ("# user\n\n- Kept.\n<!--\n- Disabled.\n  still disabled\n-->\n"
            "<!-- - disabled on one line -->\n<!-->\n- Kept too.\n")
    report = store.import_markdown(text, slot="user")
    assert (2, 6) == (report.added, report.ignored_lines)
    assert ["Kept.", "Kept too."] == [f.value for f in store.facts(slots=["user"])]


def test_a_fence_indented_four_spaces_does_not_close_a_code_block(store):
    """A ``` line indented by four spaces inside a code block is a line of the code, as in
    CommonMark: the bullet after it is still code, and only the one after the real closing
    fence is a fact."""
    text = "```\n    ```\n- shown as code\n```\n- A fact.\n"
    report = store.import_markdown(text, slot="agent")
    assert (1, 4) == (report.added, report.ignored_lines)
    assert ["A fact."] == [f.value for f in store.facts(slots=["agent"])]


def test_a_line_of_code_in_backticks_opens_no_code_block(store):
    """A line starting with three backticks that holds another backtick is code inside the
    line, as in CommonMark, not a fence: the bullets after it are facts."""
    text = "```make``` builds it.\n- A fact.\n- Another fact.\n"
    report = store.import_markdown(text, slot="agent")
    assert (2, 1) == (report.added, report.ignored_lines)
    assert ["A fact.", "Another fact."] == [f.value for f in store.facts(slots=["agent"])]


def test_markdown_invalid_bullet_names_its_line(store):
    """An over-size bullet fails the import with its line, or is skipped with skip_invalid."""
    text = "# Notes\n- A fine fact.\n- " + "x" * 5000 + "\n"
    with pytest.raises(InvalidImportError, match="line 3: value is 5000 bytes"):
        store.import_markdown(text, slot="agent")
    assert 0 == store.stats()["facts"]
    report = store.import_markdown(text, slot="agent", skip_invalid=True)
    assert (1, [3]) == (report.added, [e.line for e in report.errors])
    with pytest.raises(InvalidFactError):
        store.import_markdown(text, slot="Bad Slot")
    with pytest.raises(InvalidFactError, match="cannot read"):
        store.import_markdown(Path("/nonexistent/x.md"), slot="agent")


_CHAR = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\r")
_TAG_CHAR = st.characters(blacklist_categories=("Cs", "Cc"))
_VALUES = st.text(st.one_of(_CHAR, st.sampled_from(list("`#*-_ \n<!>:"))), min_size=1,
                  max_size=40).map(str.rstrip).filter(bool)
_TAGS = st.lists(st.text(st.one_of(_TAG_CHAR, st.sampled_from(list("`# "))), min_size=1,
                         max_size=10).filter(str.strip), max_size=3, unique=True)
_KEYS = st.one_of(st.none(), st.text(st.one_of(_TAG_CHAR, st.sampled_from(list("*: "))),
                                     min_size=1, max_size=10)
                  .filter(lambda k: k.strip() and "**:" not in k))


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_KEYS, _VALUES, _TAGS), min_size=1, max_size=4))
def test_any_bullet_reads_back_as_written(facts):
    """Whatever the value (markdown syntax, backticks, separators), its bullet reads back exactly."""
    text = render_file("agent", None, [render_bullet(v, key=k, tags=t) for k, v, t in facts])
    parsed = parse_markdown(text, slot="agent", max_tag_chars=1000)
    assert [(k, v, t) for k, v, t in facts] == [(b.key, b.value, list(b.tags))
                                                for b in parsed.bullets]
    assert 0 == parsed.ignored_lines


# -- contexts in Markdown --------------------------------------------------------


QUESTION = "Who did you meet at the robotics conference?"


def _contexts(store: FactStore, scope: str) -> set[tuple]:
    return {(f.key, f.value, f.tags, f.context)
            for f in store.facts(slots=["project"], scope=scope) if f.scope == scope}


def test_markdown_shows_a_context_as_a_quote_and_reads_it_back(store):
    """A context closes its bullet as a quote a person can read and edit; importing the
    export restores every value, key, tag and context."""
    store.upsert("project", "met", "It was Ilse Varga.", scope="a", tags=["people"],
                 context=QUESTION)
    store.add("project", "Line one\n> not a quote, part of the value", scope="a",
              context="user: first line\n\n  indented line\n> quoted in the context")
    store.add("project", "No context here.", scope="a")
    text = store.export_markdown(scope="a")
    assert text == (
        "# project (scope: a)\n\n"
        f"- **met**: It was Ilse Varga. `#people`\n  > {QUESTION}\n"
        "- Line one\n  <!---->> not a quote, part of the value\n"
        "  > user: first line\n  >\n  >   indented line\n  > > quoted in the context\n"
        "- No context here.\n")
    report = store.import_markdown(text, slot="project", scope="b")
    assert (3, 0) == (report.added, len(report.errors))
    assert _contexts(store, "a") == _contexts(store, "b")
    assert {"b"} == {h.fact.scope for h in store.search("robotics conference", scope="b")}
    assert text.replace("scope: a", "scope: b") == store.export_markdown(scope="b")


def test_a_windows_line_break_in_a_value_reads_back_from_markdown_as_a_line_break(
        store, tmp_path):
    """A carriage return ending a line of a value or context (``\r\n``) reads back from a
    Markdown export as the line break alone, as documented (a file's lines may end so); a
    carriage return elsewhere, and every other character, reads back as it was, and JSONL
    keeps the value and context whole."""
    value = "Line one\r\nLine two\rstill two \u062e\u0648\u0627\u0647\u0645"
    store.add("project", value, scope="a", context="user: first\r\nuser: second")
    path = store.export_markdown(tmp_path / "md")[0]
    store.import_markdown(path, slot="project", scope="b")
    [back] = store.facts(scope="b")
    assert ("Line one\nLine two\rstill two \u062e\u0648\u0627\u0647\u0645",
            "user: first\nuser: second") == (back.value, back.context)
    exported = io.StringIO()
    store.export_jsonl(exported, scope="a")
    with FactStore(tmp_path / "copy.db") as copy:
        copy.import_jsonl(io.StringIO(exported.getvalue()))
        assert [(value, "user: first\r\nuser: second")] == [
            (f.value, f.context) for f in copy.facts(scope="a")]


def test_a_quote_added_by_hand_becomes_the_context(store):
    """A person adds a context by ending a bullet with a quote (blank line before it or
    not); a quote inside the value, or an over-size one, is handled with the line named."""
    text = ("# Notes\n"
            "- The VPN profile lives in the ops vault.\n\n"
            "  > Where is the VPN profile kept?\n"
            "- A quote\n  > in the middle\n  stays in the value.\n"
            "- Too long.\n  > " + "é" * 3000 + "\n")
    with pytest.raises(InvalidImportError, match="line 8: context is 6000 bytes"):
        store.import_markdown(text, slot="project", scope="s")
    report = store.import_markdown(text, slot="project", scope="s", skip_invalid=True)
    assert (2, [8]) == (report.added, [e.line for e in report.errors])
    facts = {f.value: f.context for f in store.facts(slots=["project"], scope="s")}
    assert {"The VPN profile lives in the ops vault.": "Where is the VPN profile kept?",
            "A quote\n> in the middle\nstays in the value.": None} == facts


_CONTEXTS = st.one_of(st.none(), st.text(st.one_of(_CHAR, st.sampled_from(list("> \n`#<!-"))),
                                         min_size=1, max_size=40).filter(str.strip))


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_KEYS, _VALUES, _TAGS, _CONTEXTS), min_size=1, max_size=4))
def test_any_bullet_with_a_context_reads_back_as_written(facts):
    """Whatever the value and the context (quotes, blank lines, markdown syntax), both read
    back exactly."""
    text = render_file("agent", None, [render_bullet(v, key=k, tags=t, context=c)
                                       for k, v, t, c in facts])
    parsed = parse_markdown(text, slot="agent", max_tag_chars=1000)
    assert [(k, v, t, c) for k, v, t, c in facts] == [
        (b.key, b.value, list(b.tags), b.context) for b in parsed.bullets]
    assert 0 == parsed.ignored_lines


def test_a_mark_naming_a_record_the_file_lacks_is_dropped_and_reported(store):
    """A superseded_by pointing at no record of the file cannot hide the fact behind
    anything: it is imported shown, and the report says how many were."""
    lines = [json.dumps({"format": "ctxslots-facts", "version": 1}),
             json.dumps({"id": 5, "slot": "agent", "value": "Rerun flaky tests once.",
                         "superseded_by": 99}),
             json.dumps({"id": 6, "slot": "agent", "value": "Rerun flaky tests twice.",
                         "superseded_by": 7}),
             json.dumps({"id": 7, "slot": "agent", "value": "Rerun flaky tests, never more."})]
    report = store.import_jsonl(io.StringIO("\n".join(lines) + "\n"))
    assert report.unhidden == 1
    assert report.summary().endswith(
        "; 1 fact imported shown (the near-duplicate that hid it is not in the file)")
    by_value = {f.value: f for f in store.facts()}
    assert by_value["Rerun flaky tests once."].superseded_by is None
    assert by_value["Rerun flaky tests twice."].superseded_by == \
        by_value["Rerun flaky tests, never more."].id


def test_a_binary_file_given_for_the_jsonl_file_is_refused_naming_the_mode(tmp_path: Path) -> None:
    """A file open in binary mode (``open(path, "rb")``, ``io.BytesIO``) is an
    InvalidArgumentError saying a text-mode file is taken (a TypeError from deep inside
    before); nothing is written to the file or the store."""
    from ctxslots import InvalidArgumentError

    backup = tmp_path / "backup.jsonl"
    with FactStore(tmp_path / "old.db") as old:
        old.add("user", "The user lives in Lisbon.")
        with backup.open("wb") as raw, pytest.raises(
                InvalidArgumentError, match=r"open\(path, 'w'\).*not a file open in binary mode"):
            old.export_jsonl(raw)
        assert b"" == backup.read_bytes()
        with pytest.raises(InvalidArgumentError, match="binary mode"):
            old.export_jsonl(io.BytesIO())
        with backup.open("w") as fp:
            assert 1 == old.export_jsonl(fp)
    with FactStore(tmp_path / "new.db") as new:
        for binary in (backup.open("rb"), io.BytesIO(backup.read_bytes())):
            with binary, pytest.raises(
                    InvalidArgumentError, match=r"open\(path, 'r'\).*not a file open in binary mode"):
                new.import_jsonl(binary)
        assert [] == new.facts()
        with backup.open(encoding="utf-8") as fp:
            assert 1 == new.import_jsonl(fp).added


def test_a_path_given_for_the_jsonl_file_is_refused_naming_what_is_taken(tmp_path: Path) -> None:
    """``import_jsonl("backup.jsonl")`` and ``export_jsonl("backup.jsonl")`` (a path, as
    ``import_markdown`` takes) are an InvalidArgumentError saying an open file is taken
    (they failed with an AttributeError from deep inside); nothing is written."""
    from ctxslots import InvalidArgumentError

    backup = tmp_path / "backup.jsonl"
    with FactStore(tmp_path / "old.db") as old:
        old.add("user", "The user lives in Lisbon.")
        with pytest.raises(InvalidArgumentError, match=r"open\(path, 'w'\)"):
            old.export_jsonl(str(backup))
        assert not backup.exists()
        with backup.open("w") as fp:
            assert 1 == old.export_jsonl(fp)
    with FactStore(tmp_path / "new.db") as new:
        with pytest.raises(InvalidArgumentError, match=r"open\(path, 'r'\)"):
            new.import_jsonl(str(backup))
        assert [] == new.facts()


@pytest.mark.parametrize("encoding", ["latin-1", "ascii", "euc-jp"])
def test_jsonl_export_to_a_file_in_another_encoding_is_utf8_all_the_same(tmp_path, encoding):
    """A file opened with the locale's encoding (``open(path, "w")`` in a Latin-1 locale)
    receives ASCII JSON: UTF-8 as documented, no UnicodeEncodeError for a character the
    encoding lacks, and the values read back the same in a UTF-8 process."""
    wide = ["Café 東京 😀 שלום e\u0301", "Crème brûlée"]
    with FactStore(tmp_path / "a.db") as store:
        for value in wide:
            store.add("user", value, tags=["thé"])
        with open(tmp_path / "facts.jsonl", "w", encoding=encoding) as fp:
            assert store.export_jsonl(fp) == 2
    data = (tmp_path / "facts.jsonl").read_bytes()
    assert data.isascii()
    with FactStore(tmp_path / "b.db") as back, \
            open(tmp_path / "facts.jsonl", encoding="utf-8") as fp:
        assert back.import_jsonl(fp).added == 2
        assert sorted(f.value for f in back.facts()) == sorted(wide)
        assert {tuple(f.tags) for f in back.facts()} == {("thé",)}
