"""ctxslots export and ctxslots import, on real store files."""

from __future__ import annotations

import json
import os
import threading

import pytest
from click.testing import CliRunner

from ctxslots import ANY, FactStore
from ctxslots.cli import cli
from ctxslots.errors import InvalidImportError


def run(*args, input=None):
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


@pytest.fixture(name="filled")
def fixture_filled(db_path, clock):
    """A store file with keyed, free, scoped, multi-line, reinforced and archived facts."""
    with FactStore(db_path, clock=clock) as store:
        store.upsert("user", "editor", "The user edits code in Helix.", tags=["tools"])
        clock.advance(days=1)
        store.upsert("user", "editor", "The user edits code in Zed.", tags=["tools"])
        store.add("user", "Prefers answers in French 🇫🇷, or العربية.")
        store.add("project", "Deploys run on Friday.\n```sh\nmake deploy\n```", scope="repo")
        lesson = store.add("agent", "The CI cache is cold on Mondays.")
        store.reinforce(lesson.id)
        gone = store.add("agent", "The old build server is build-01.")
        store.forget(gone.id, reason="decommissioned")
    return db_path


def test_jsonl_round_trip_through_the_cli(filled, tmp_path):
    """export to a file, import into a new store file, export again: the same records."""
    out = tmp_path / "facts.jsonl"
    result = run("--db", str(filled), "export", "-o", str(out))
    assert 0 == result.exit_code
    assert f"exported 5 facts to {out}" in result.stderr
    copy = tmp_path / "copy.db"
    result = run("--db", str(copy), "import", str(out))
    assert 0 == result.exit_code
    assert result.stdout.startswith("imported 4 facts, 1 archived, 1 history entry; "
                                    "skipped 0 duplicates")
    again = run("--db", str(copy), "export")
    assert out.read_text(encoding="utf-8").splitlines()[1:] == again.stdout.splitlines()[1:]
    doctor = run("--db", str(copy), "doctor")
    assert 0 == doctor.exit_code and doctor.stdout.strip().endswith("ok")
    found = run("--db", str(copy), "search", "cache Mondays", "--json")
    assert "The CI cache is cold on Mondays." == json.loads(found.stdout)[0]["value"]


def test_export_to_stdout_with_filters(filled):
    """Without -o the JSONL goes to stdout; --slot, --scope and --no-archive narrow it."""
    result = run("--db", str(filled), "export", "--slot", "agent", "--no-archive")
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert "ctxslots-facts" == records[0]["format"]
    assert ["The CI cache is cold on Mondays."] == [r["value"] for r in records[1:]]
    scoped = run("--db", str(filled), "export", "--scope", "repo", "--no-history")
    records = [json.loads(line) for line in scoped.stdout.splitlines()[1:]]
    assert [("project", "repo")] == [(r["slot"], r["scope"]) for r in records]
    assert "history" not in records[0]


def test_markdown_directory_export_and_import(filled, tmp_path):
    """Markdown with -o writes one file per slot; importing user.md needs no --slot."""
    out = tmp_path / "md"
    result = run("--db", str(filled), "export", "--format", "markdown", "-o", str(out))
    assert 0 == result.exit_code and "wrote 3 files" in result.stderr
    user_md = (out / "user.md").read_text(encoding="utf-8")
    assert "- **editor**: The user edits code in Zed. `#tools`" in user_md
    project_md = (out / "scopes" / "repo" / "project.md").read_text(encoding="utf-8")
    assert "# project (scope: repo)\n\n- Deploys run on Friday.\n  ```sh\n" in project_md

    copy = tmp_path / "copy.db"
    result = run("--db", str(copy), "import", str(out / "user.md"), "--json")
    assert 0 == result.exit_code
    assert {"added": 2, "skipped_duplicates": 0} == {
        k: json.loads(result.stdout)[k] for k in ("added", "skipped_duplicates")}
    result = run("--db", str(copy), "import", str(out / "scopes" / "repo" / "project.md"),
                 "--scope", "repo")
    assert result.stdout.startswith("imported 1 fact,")
    with FactStore(copy) as store:
        assert "Deploys run on Friday.\n```sh\nmake deploy\n```" == store.facts(
            slots=["project"], scope="repo")[0].value
        assert ("tools",) == store.get_by_key("user", "editor").tags
    again = run("--db", str(copy), "import", str(out / "user.md"))
    assert "skipped 2 duplicates" in again.stdout


def test_a_scoped_markdown_file_imports_into_the_scope_its_title_names(filled, tmp_path):
    """`import DIR/scopes/repo/project.md` without --scope put the workspace's facts in the
    global scope, where every workspace's prompts show them. The scope now comes from the
    file's title, as the slot comes from its name; --scope still chooses another."""
    out = tmp_path / "md"
    run("--db", str(filled), "export", "--format", "markdown", "-o", str(out))
    scoped = out / "scopes" / "repo" / "project.md"
    copy = tmp_path / "copy.db"
    result = run("--db", str(copy), "import", str(scoped))
    assert result.stdout.startswith("imported 1 fact,")
    piped = run("--db", str(copy), "import", "-", "--format", "markdown", "--slot", "project",
                input=scoped.read_text(encoding="utf-8"))
    assert "skipped 1 duplicate" in piped.stdout
    elsewhere = run("--db", str(copy), "import", str(scoped), "--scope", "other")
    assert elsewhere.stdout.startswith("imported 1 fact,")
    with FactStore(copy) as store:
        assert [] == store.facts(slots=["project"])
        assert ["repo", "other"] == [f.scope for f in store.facts(slots=["project"],
                                                                  scope=ANY)]


def test_a_scoped_markdown_file_whose_title_was_edited_stays_in_its_scope(filled, tmp_path,
                                                                         monkeypatch):
    """A person who renames or deletes the title of DIR/scopes/repo/project.md still means
    the workspace's facts: without --scope they go to the scope its folder names, not to
    the global one where every workspace's prompts would show them."""
    out = tmp_path / "md"
    run("--db", str(filled), "export", "--format", "markdown", "-o", str(out))
    scoped = out / "scopes" / "repo" / "project.md"
    scoped.write_text("# Deploy notes\n\n- Deploys run on Friday.\n  ```sh\n  make deploy\n"
                      "  ```\n- Tag releases from main.\n", encoding="utf-8")
    result = run("--db", str(filled), "import", str(scoped))
    assert result.stdout.startswith("imported 1 fact,") and "skipped 1 duplicate" in result.stdout
    monkeypatch.chdir(scoped.parent)
    copy = tmp_path / "copy.db"
    assert run("--db", str(copy), "import", "project.md").stdout.startswith("imported 2 facts,")
    for db in (filled, copy):
        with FactStore(db) as store:
            assert [] == store.facts(slots=["project"])
            assert "Tag releases from main." in [f.value for f in store.facts(
                slots=["project"], scope="repo")]
    shortened = out / "scopes" / ("x" * 60 + "~0123456789ab") / "project.md"
    shortened.parent.mkdir()
    shortened.write_text("- A fact.\n", encoding="utf-8")
    refused = CliRunner().invoke(cli, ["--db", str(copy), "import", str(shortened)])
    assert 2 == refused.exit_code and "give --scope" in refused.stderr


def test_a_note_above_a_scoped_title_keeps_the_file_in_its_scope(filled, tmp_path):
    """A comment or a blank line a person adds above `# project (scope: repo)` does not send
    the file's facts to the global scope: the title is the first heading, not line one."""
    one = tmp_path / "project.md"
    run("--db", str(filled), "export", "--format", "markdown", "--slot", "project",
        "--scope", "repo", "-o", str(one))
    one.write_text("<!-- reviewed in November -->\n\n" + one.read_text(encoding="utf-8")
                   + "- Deploys need a green build.\n", encoding="utf-8")
    copy = tmp_path / "copy.db"
    assert run("--db", str(copy), "import", str(one)).stdout.startswith("imported 2 facts,")
    piped = run("--db", str(filled), "import", "-", "--format", "markdown", "--slot",
                "project", input=one.read_text(encoding="utf-8"))
    assert piped.stdout.startswith("imported 1 fact,") and "skipped 1 duplicate" in piped.stdout
    for db in (filled, copy):
        with FactStore(db) as store:
            assert [] == store.facts(slots=["project"])
            assert "Deploys need a green build." in [f.value for f in store.facts(
                slots=["project"], scope="repo")]


@pytest.mark.parametrize("above", [
    "<!--\n# project (scope: old)\n-->\n",
    "Set up with:\n```sh\n# install the tools\n```\n",
    "#draft to tidy\n",
], ids=["heading-in-comment", "comment-in-code", "hashtag-note"])
def test_the_scoped_title_is_read_past_code_and_comments_above_it(tmp_path, above):
    """A heading inside an HTML comment or a code block above `# project (scope: repo)`, or a
    line starting with '#' that is no heading, is not the file's title: the facts go to
    repo, read from a file or piped, as the reader skips those lines too."""
    one = tmp_path / "project.md"
    one.write_text(above + "# project (scope: repo)\n\n- Deploys need a green build.\n",
                   encoding="utf-8")
    read = tmp_path / "read.db"
    piped = tmp_path / "piped.db"
    assert run("--db", str(read), "import", str(one)).stdout.startswith("imported 1 fact,")
    assert run("--db", str(piped), "import", "-", "--format", "markdown", "--slot", "project",
               input=one.read_text(encoding="utf-8")).stdout.startswith("imported 1 fact,")
    for db in (read, piped):
        with FactStore(db) as store:
            assert [("repo", "Deploys need a green build.")] == [
                (f.scope, f.value) for f in store.facts(slots=["project"], scope=ANY)]


def test_markdown_to_stdout_and_to_one_file(filled, tmp_path):
    """Markdown without -o prints every slot; -o NAME.md writes that text to one file."""
    printed = run("--db", str(filled), "export", "--format", "markdown").stdout
    assert printed.index("# user") < printed.index("# project (scope: repo)") < printed.index(
        "# agent")
    one = tmp_path / "all.md"
    run("--db", str(filled), "export", "--format", "markdown", "-o", str(one))
    assert printed == one.read_text(encoding="utf-8")


def test_memory_md_needs_a_slot(tmp_path, db_path):
    """A file not named after a slot needs --slot; with it, headings become tags."""
    memory = tmp_path / "MEMORY.md"
    memory.write_text("# Tools\n- Use ripgrep for code search.\nSome prose.\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["--db", str(db_path), "import", str(memory)])
    assert 2 == result.exit_code and "give --slot" in result.output
    result = run("--db", str(db_path), "import", str(memory), "--slot", "agent")
    assert "imported 1 fact," in result.stdout and "1 prose line ignored" in result.stdout
    with FactStore(db_path) as store:
        assert ("tools",) == store.facts(slots=["agent"])[0].tags


def test_a_jsonl_export_named_md_is_refused_as_markdown_not_imported_as_nothing(
        filled, tmp_path):
    """`export -o backup.md` writes JSONL (the default format); imported by its name, the
    file was read as Markdown: every line prose, 0 facts imported and exit status 0."""
    backup, db_path = tmp_path / "backup.md", tmp_path / "new.db"
    assert 0 == run("--db", str(filled), "export", "-o", str(backup)).exit_code
    result = CliRunner().invoke(cli, ["--db", str(db_path), "import", str(backup),
                                      "--slot", "project"])
    assert 1 == result.exit_code
    assert result.output.startswith(f"Error: {backup}: line 1: the header of a JSONL export")
    assert "--format jsonl" in result.output
    with FactStore(db_path) as store:
        assert 0 == store.stats()["facts"]
    result = run("--db", str(db_path), "import", str(backup), "--format", "jsonl")
    assert result.stdout.startswith("imported 4 facts, 1 archived")


@pytest.mark.parametrize("text", [
    "\n\n" + json.dumps({"format": "ctxslots-facts", "version": 1}) + "\n- a bullet\n",
    json.dumps({"format": "ctxslots-facts", "version": 1}),
])
def test_markdown_text_opening_with_a_jsonl_header_is_refused(db_path, text):
    with FactStore(db_path) as store:
        with pytest.raises(InvalidImportError, match="JSONL export") as info:
            store.import_markdown(text, slot="project")
        assert 0 == store.count_facts()
    assert info.value.line == text.count("\n", 0, text.index("{")) + 1


def test_a_jsonl_header_after_other_markdown_is_prose(db_path):
    """Only a file that opens with the header is a JSONL export; a note quoting one later is
    Markdown."""
    header = json.dumps({"format": "ctxslots-facts", "version": 1})
    with FactStore(db_path) as store:
        report = store.import_markdown(f"# Notes\n\n{header}\n- a bullet\n", slot="project")
    assert (report.added, report.ignored_lines) == (1, 1)


def test_malformed_import_is_one_error_line_and_writes_nothing(tmp_path, db_path):
    """A bad line exits 1 with one Error: line naming file and line; the store stays empty."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"format": "ctxslots-facts", "version": 1}\n'
                   '{"slot": "user", "value": "The user is Ada."}\n'
                   '{"slot": "user", "value": 7}\n', encoding="utf-8")
    result = CliRunner().invoke(cli, ["--db", str(db_path), "import", str(bad)])
    assert 1 == result.exit_code
    errors = [line for line in result.output.splitlines() if line.startswith("Error: ")]
    assert [f"Error: {bad}: line 3: value must be a non-empty string"] == errors
    assert "Traceback" not in result.output
    with FactStore(db_path) as store:
        assert 0 == store.stats()["facts"]

    result = run("--db", str(db_path), "import", str(bad), "--skip-invalid")
    assert 0 == result.exit_code
    assert "skipped line 3: value must be a non-empty string" in result.stderr
    assert "imported 1 fact," in result.stdout


def test_a_failed_import_or_remember_leaves_no_new_store_file(tmp_path):
    """A malformed file imported into a new --db (or a refused remember) made an empty
    store file there before failing; now the file the command made is removed again,
    and a store that was there before stays, empty or not."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"format": "ctxslots-facts", "version": 1}\n{"slot": "user", "value": 7}\n',
                   encoding="utf-8")
    new = tmp_path / "new.db"
    result = CliRunner().invoke(cli, ["--db", str(new), "import", str(bad)])
    assert 1 == result.exit_code and "line 2: value must be a non-empty string" in result.output
    assert [] == sorted(p.name for p in tmp_path.glob("new.db*"))
    result = CliRunner().invoke(cli, ["--db", str(new), "remember", "nope", "A value."])
    assert 1 == result.exit_code and "unknown slot 'nope'" in result.output
    assert not new.exists()

    FactStore(new).close()  # an empty store made before: kept
    result = CliRunner().invoke(cli, ["--db", str(new), "import", str(bad)])
    assert 1 == result.exit_code and new.exists()
    result = CliRunner().invoke(cli, ["--db", str(new), "remember", "nope", "A value."])
    assert 1 == result.exit_code and new.exists()
    assert 0 == run("--db", str(new), "remember", "user", "The user is Ada.").exit_code


def test_a_failed_import_into_a_new_folder_leaves_no_folder_and_memory_makes_no_file(
        tmp_path, monkeypatch):
    """A failed import into a --db whose folder is missing (the default store's, on first
    use) left the store and the folders the store made; `--db :memory:` left an empty file
    named ":memory:" in the working directory. Now the folders made for the failed import
    are removed with its file, a folder holding another file stays, and an in-memory store
    makes no file."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"format": "ctxslots-facts", "version": 1}\n{"slot": "user", "value": 7}\n',
                   encoding="utf-8")
    new = tmp_path / "data" / "ctxslots" / "new.db"
    result = CliRunner().invoke(cli, ["--db", str(new), "import", str(bad)])
    assert 1 == result.exit_code and "line 2: value must be a non-empty string" in result.output
    assert ["bad.jsonl"] == sorted(p.name for p in tmp_path.iterdir())

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "notes.txt").write_text("mine", encoding="utf-8")
    result = CliRunner().invoke(cli, ["--db", str(new), "remember", "nope", "A value."])
    assert 1 == result.exit_code and "unknown slot 'nope'" in result.output
    assert ["notes.txt"] == sorted(p.name for p in (tmp_path / "data").iterdir())

    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["--db", ":memory:", "remember", "user", "Ada codes."])
    assert 0 == result.exit_code and "Ada codes." in result.output
    assert ["bad.jsonl", "data"] == sorted(p.name for p in tmp_path.iterdir())


@pytest.mark.skipif(not os.path.isdir("/dev/fd"), reason="no /dev/fd")
def test_import_of_a_pipe_path_reads_every_fact(tmp_path):
    """`ctxslots import <(cat project.md) --format markdown --slot project` read the pipe
    once for the title's scope and again for the facts, which it then no longer held:
    "imported 0 facts". Now the facts are all imported, in the title's scope."""
    read_end, write_end = os.pipe()
    text = "# project (scope: repo)\n\n- Deploys run on Friday.\n- Tests run nightly.\n"

    def feed() -> None:
        with os.fdopen(write_end, "wb") as out:
            out.write(text.encode("utf-8"))

    writer = threading.Thread(target=feed)
    writer.start()
    db = tmp_path / "s.db"
    try:
        result = CliRunner().invoke(cli, ["--db", str(db), "import", f"/dev/fd/{read_end}",
                                          "--format", "markdown", "--slot", "project"])
    finally:
        writer.join()
        os.close(read_end)
    assert 0 == result.exit_code, result.output
    assert "imported 2 facts," in result.output
    with FactStore(db) as store:
        assert [("repo", "Deploys run on Friday."), ("repo", "Tests run nightly.")] == sorted(
            (f.scope, f.value) for f in store.facts(scope=ANY))


@pytest.mark.parametrize(("args", "words"), [
    (["import", "facts.txt"], "--format"),
    (["import", "facts.jsonl", "--scope", "repo"], "Markdown imports only"),
])
def test_usage_errors(tmp_path, db_path, args, words):
    """An unknown suffix or Markdown-only options on JSONL are usage errors (exit 2)."""
    for name in ("facts.txt", "facts.jsonl"):
        (tmp_path / name).write_text('{"format": "ctxslots-facts", "version": 1}\n',
                                     encoding="utf-8")
    args = [str(tmp_path / a) if a.startswith("facts.") else a for a in args]
    result = CliRunner().invoke(cli, ["--db", str(db_path), *args])
    assert 2 == result.exit_code and words in result.output


def test_import_from_stdin(db_path):
    """FILE may be -, read as JSONL from standard input."""
    text = ('{"format": "ctxslots-facts", "version": 1}\n'
            '{"slot": "agent", "value": "Use ripgrep."}\n')
    result = run("--db", str(db_path), "import", "-", "--json", input=text)
    assert 1 == json.loads(result.stdout)["added"]


def test_dash_alone_is_a_stream_and_dot_slash_dash_a_file(filled, tmp_path, monkeypatch):
    """export -o - writes to standard output and import - reads standard input; ./- names
    the file called "-" both ways, never a stream."""
    monkeypatch.chdir(tmp_path)
    streamed = run("--db", str(filled), "export", "-o", "-", "--slot", "agent", "--no-archive")
    assert 0 == streamed.exit_code
    assert ["The CI cache is cold on Mondays."] == [
        json.loads(line)["value"] for line in streamed.stdout.splitlines()[1:]]
    assert not (tmp_path / "-").exists()
    written = run("--db", str(filled), "export", "-o", "./-", "--slot", "agent", "--no-archive")
    assert "exported 1 fact to -" in written.stderr
    assert streamed.stdout.splitlines()[1:] == (tmp_path / "-").read_text().splitlines()[1:]
    other = ('{"format": "ctxslots-facts", "version": 1}\n'
             '{"slot": "agent", "value": "From standard input."}\n')
    copy = tmp_path / "copy.db"
    result = run("--db", str(copy), "import", "./-", "--format", "jsonl", input=other)
    assert 0 == result.exit_code, result.output
    with FactStore(copy) as store:
        assert ["The CI cache is cold on Mondays."] == [f.value for f in store.facts()]


@pytest.mark.parametrize("fmt", ["jsonl", "markdown"])
def test_an_export_is_never_written_over_the_store(filled, fmt):
    """-o naming the store's own file is refused in one line, and the store keeps its facts."""
    with FactStore(filled) as store:
        before = len(store.facts(scope=ANY))
    result = CliRunner().invoke(cli, ["--db", str(filled), "export", "--format", fmt,
                                      "-o", str(filled)])
    assert 1 == result.exit_code
    assert [(f"Error: cannot write {filled}: it is the store's own file ({filled}); writing "
            "it would replace the memory, so name another file")] == result.output.splitlines()
    with FactStore(filled) as store:
        assert before == len(store.facts(scope=ANY)) > 0
