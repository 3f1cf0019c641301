"""``ctxslots export`` and ``ctxslots import``: copy facts out of and into a store.

JSONL keeps every field, the archive and the history; Markdown is for people
(one bullet per fact, one file per slot). See ``docs/transfer.md``.
"""

from __future__ import annotations

import errno
import io
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO, cast
from urllib.parse import unquote

import click

from .._files import write_private
from ..errors import InvalidImportError
from ..stores import FactStore, ImportReport
from ..stores.owners import OwnerArgs
from ..stores.transfer.markdown_import import stream_lines
from ..stores.transfer.markdown_memory import heading_scope, scope_dirname
from ._app import CliContext, pass_cli_context
from ._format import count as _count
from ._output import SafeWriter, document_stdout, echo, echo_json
from ._owners import owner_options, scope_option
from ._progress import CountingReader, CountingWriter, Progress
from ._signals import interrupted

__all__ = ["export", "import_", "register"]

_FORMATS = ("jsonl", "markdown")
_SUFFIXES = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl",
             ".md": "markdown", ".markdown": "markdown"}


@click.command()
@click.option("--format", "fmt", type=click.Choice(_FORMATS), default="jsonl", show_default=True,
              help="jsonl keeps everything; markdown is one readable file per slot.")
@click.option("-o", "--output", "output_name", type=click.Path(),
              help="JSONL: a file. Markdown: a directory of one file per slot, or one file "
                   "when the name ends in .md (default, or -: standard output).")
@click.option("--slot", "slots", multiple=True, help="Only this slot (repeatable).")
@scope_option("Only this scope (default: every scope, global facts included).")
@owner_options("JSONL: only this user's own facts (default: every user's). Markdown: this "
               + "user's view, their facts and the shared ones (default: the default user).",
               "As --user, for an agent's lessons.")
@click.option("--no-archive", is_flag=True, help="Leave out archived facts (JSONL).")
@click.option("--no-history", is_flag=True, help="Leave out earlier values (JSONL).")
@pass_cli_context
def export(
    app: CliContext, fmt: str, output_name: str | None, slots: Sequence[str],
    scope: str | None, user: str | None, agent: str | None, no_archive: bool, no_history: bool,
) -> None:
    """Write the store's facts as JSONL (lossless) or Markdown (for people)."""
    # Only "-" itself is standard output, as for import: "./-" names a file.
    output = None if output_name in (None, "-") else Path(output_name)
    if output is not None:
        app.refuse_store_file(output)

    with app.open_store() as store, Progress("exporting", unit="lines") as bar:
        try:
            if fmt == "markdown":
                _export_markdown(store, output, {"slots": list(slots) or None, "scope": scope,
                                                 "user": user, "agent": agent})
                return
            options: dict[str, Any] = {
                "slots": list(slots) or None, "scope": scope, "user": user, "agent": agent,
                "include_archive": not no_archive, "include_history": not no_history}
            if output is None:
                store.export_jsonl(_counted(cast(TextIO, SafeWriter(document_stdout())), bar),
                                   **options)
                return
            count = write_private(
                output, lambda fp: store.export_jsonl(_counted(fp, bar), **options))
        except OSError as exc:
            if exc.errno == errno.EPIPE:
                raise  # the reader went away: click exits quietly
            raise click.ClickException(
                f"cannot write {exc.filename or output or 'the standard output'}: "
                f"{exc.strerror or exc}") from exc
    echo(f"exported {_count(count, 'fact')} to {output}", err=True)


def _counted(fp: TextIO, bar: Progress) -> TextIO:
    return cast(TextIO, CountingWriter(fp, bar))


def _export_markdown(store: FactStore, output: Path | None, options: dict[str, Any]) -> None:
    if output is None or output.suffix.lower() in (".md", ".markdown"):
        text = str(store.export_markdown(**options))
        if output is None:
            # For reading: control characters escaped (-o keeps them); UTF-8 in any locale,
            # as `import - --format markdown` reads it.
            echo(text, nl=False, file=document_stdout())
        else:
            write_private(output, lambda fp: fp.write(text))
            echo(f"wrote {output}", err=True)
        return
    paths = store.export_markdown(output, **options)
    echo(f"wrote {_count(len(paths), 'file')} to {output}", err=True)


def _format_of(path: Path, stdin: bool, fmt: str | None) -> str:
    if fmt is not None:
        return fmt
    if stdin:
        return "jsonl"
    found = _SUFFIXES.get(path.suffix.lower())
    if found is None:
        raise click.UsageError(f"cannot tell the format of {path.name!r} from its suffix: "
                               "give --format jsonl or --format markdown")
    return found


@click.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option("--format", "fmt", type=click.Choice(_FORMATS),
              help="Default: from the suffix (.jsonl, .md); jsonl for standard input.")
@click.option("--slot", help="Markdown: the slot to import into (default: the file name, "
                             "as in user.md).")
@scope_option("Markdown: the scope to import into (default: the one the "
                              "file's title names, '# project (scope: NAME)', else the one "
                              "its folder scopes/NAME/ names, else global).")
@owner_options("The user of every user fact imported (default: JSONL, each record's own; "
               + "Markdown, the store's default user).",
               "The agent of every agent fact imported (as --user).")
@click.option("--skip-invalid", is_flag=True,
              help="Import the valid facts and list the invalid lines, instead of failing.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@pass_cli_context
def import_(
    app: CliContext, file: str, fmt: str | None, slot: str | None, scope: str | None,
    user: str | None, agent: str | None, skip_invalid: bool, as_json: bool,
) -> None:
    """Import facts from FILE (JSONL from `ctxslots export`, or Markdown bullets).

    Facts already in the store are skipped. A malformed line stops the import
    with nothing written, unless --skip-invalid.
    """

    # Only "-" itself is standard input: "./-" names a file (a Path drops the "./").
    stdin, path = file == "-", Path(file)
    fmt = _format_of(path, stdin, fmt)
    if fmt == "jsonl" and (slot is not None or scope is not None):
        raise click.UsageError("--slot and --scope apply to Markdown imports only")
    try:
        report = _import(app, path, stdin, fmt, slot,
                         OwnerArgs(scope=scope, user=user, agent=agent), skip_invalid)
    except KeyboardInterrupt as exc:
        # The import is one transaction: rolled back on the way out of the store.
        raise interrupted(exc, "nothing was imported, the store is as it was") from None
    _show(report, as_json)


def _import(app: CliContext, file: Path, stdin: bool, fmt: str, slot: str | None,
            owners: OwnerArgs, skip_invalid: bool) -> ImportReport:
    # One transaction: a failed import leaves no new store file behind.
    with app.open_store(create=True, undo_create=True) as store, Progress("importing") as bar:
        try:
            if fmt == "jsonl":
                report = _import_jsonl(store, file, stdin, {"skip_invalid": skip_invalid,
                                                            "user": owners["user"],
                                                            "agent": owners["agent"]}, bar)
            else:
                target = file.stem if slot is None else slot
                if slot is None and target not in store.limits.slots:
                    raise click.UsageError(f"{file.name!r} does not name a slot: give --slot")
                text = _stdin_markdown(store.limits.max_import_line_chars) if stdin \
                    else file
                # The scope an export's title names is read by import_markdown; a file in
                # an export's scopes/ folder whose title names none is in that folder's.
                # (Only such a file is read twice: a pipe's lines are read once.)
                if owners["scope"] is None and not stdin and _in_scope_folder(file):
                    found = heading_scope(_head(file), target) or _folder_scope(file)
                    owners = OwnerArgs(user=owners["user"], agent=owners["agent"], scope=found)
                bar.relabel(f"importing {file.name}", unit="")
                report = store.import_markdown(text, slot=target, **owners,
                                               skip_invalid=skip_invalid,
                                               progress=_counted_records(bar))
        except InvalidImportError as exc:
            raise click.ClickException(f"{file}: {exc}") from exc
    return report


def _check_stdin() -> None:
    """:raises click.ClickException: Standard input is closed (``<&-``)."""
    if sys.stdin is None or sys.stdin.closed:
        raise click.ClickException("standard input is closed: nothing to import")


def _stdin_markdown(longest: int) -> str:
    """Standard input as Markdown text, whatever the locale: UTF-8, checked line by line
    as a file is (see :func:`~ctxslots.stores.transfer.markdown_import.stream_lines`).

    :param longest: The most bytes a line may hold (``Limits.max_import_line_chars``).
    :raises click.ClickException: Standard input is closed.
    :raises InvalidImportError: A line is not UTF-8, or is longer than ``longest``.
    """
    _check_stdin()
    # A last line break, there or not: the text, even one line, is never the name of a
    # file to read instead.
    return "".join(line + "\n" for line in stream_lines(sys.stdin.buffer, longest))


def _in_scope_folder(file: Path) -> bool:
    """Whether ``file`` is in a folder of ``scopes/``, as an export writes a scope's files."""
    return file.absolute().parent.parent.name == "scopes"


def _folder_scope(file: Path) -> str | None:
    """The scope whose folder an export writes ``file`` in (``DIR/scopes/<scope>/``), so a
    file whose title was edited away stays in its scope; ``None`` outside such a folder.

    :raises click.UsageError: The folder's name is a shortened one, which names no scope.
    """
    folder = file.absolute().parent
    if folder.parent.name != "scopes":
        return None
    try:
        scope = unquote(folder.name, errors="strict")
    except UnicodeDecodeError:
        scope = ""
    if not scope or scope_dirname(scope) != folder.name:
        raise click.UsageError(
            f"{file.name!r} is in the folder of a scope its name does not spell out, and its "
            "title names none ('# slot (scope: NAME)'): give --scope")
    return scope


def _head(file: Path) -> list[str]:
    """The lines of the first 64 kB of ``file`` (none if it cannot be read: the import
    says why)."""
    try:
        with file.open(encoding="utf-8", errors="replace") as fp:
            return fp.read(65536).split("\n")
    except OSError:
        return []


def _counted_records(bar: Progress) -> Callable[[int], None]:
    return lambda done: bar.set_note(f"{done:,} record{'' if done == 1 else 's'}")


def _import_jsonl(store: FactStore, file: Path, stdin: bool, options: dict[str, Any],
                  bar: Progress) -> ImportReport:
    # Records are read, checked and written a thousand at a time in one transaction:
    # the bar follows the bytes read, the note the records written, then the commit.
    then = "linking and committing"
    progress = _counted_records(bar)
    # A byte that is not UTF-8 is kept as a lone surrogate, so the import names its line.
    if stdin:
        _check_stdin()
        bar.relabel("importing standard input", unit="bytes")
        text = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="surrogateescape")
        reader = cast(TextIO, CountingReader(text, bar, then))
        return store.import_jsonl(reader, progress=progress, **options)
    try:
        with file.open(encoding="utf-8", errors="surrogateescape") as fp:
            bar.relabel(f"importing {file.name}", total=file.stat().st_size, unit="bytes")
            return store.import_jsonl(cast(TextIO, CountingReader(fp, bar, then)),
                                      progress=progress, **options)
    except OSError as exc:
        raise click.ClickException(f"cannot read {file}: {exc.strerror or exc}") from exc


def _show(report: ImportReport, as_json: bool) -> None:
    if as_json:
        echo_json(report.to_dict())
        return
    for issue in report.errors:
        echo(f"skipped line {issue.line}: {issue.message}", err=True)
    echo(report.summary())


def register(cli: click.Group) -> None:
    """Add ``export`` and ``import`` to the ``ctxslots`` group."""
    cli.add_command(export)
    cli.add_command(import_)
