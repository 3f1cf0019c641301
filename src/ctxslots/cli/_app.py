"""The root ``ctxslots`` group, its options, and the store every command opens.

The group's options become a :class:`CliContext` in the click context; commands
take it with :data:`pass_cli_context` and open the store through it, so no
command module depends on another.
"""

from __future__ import annotations

import ast
import contextlib
import errno
import inspect
import logging
import os
import re
import signal
import sys
import textwrap
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn, TextIO

import attrs
import click
import pluggy

from .._files import make_private_dirs
from .._secrets import scrub
from ..errors import CtxslotsError
from ..stores import FactStore, Limits, default_db_path
from ._output import echo, silence_stdout_if_broken, terminal_safe
from ._signals import Interrupted, interrupted

__all__ = ["CliContext", "Interrupted", "cli", "pass_cli_context"]

@attrs.frozen
class CliContext:
    """What the root options say, handed to every command.

    Attributes:
        db: The ``--db`` file path (a leading ``~`` expanded) or ``postgresql://`` URL
            (or ``$CTXSLOTS_DB``), ``None`` for the default.
        embedder: The ``--embedder`` spec, ``None`` for the store's default.
        embed_base_url: The ``--embed-base-url`` for an ``openai:`` embedder.
        free_slots: ``--free-slots``: accept any well-formed slot name, not only
            the built-in slots and those plugins register.
    """

    db: str | None = None
    embedder: str | None = None
    embed_base_url: str | None = None
    free_slots: bool = False
    _cache: dict[str, Any] = attrs.field(factory=dict, eq=False, repr=False)

    @property
    def db_path(self) -> str:
        """Where the store lives: ``--db``, else the default under the user data directory."""
        return self.db or str(default_db_path())

    def refuse_store_file(self, output: Path) -> None:
        """Refuse, in one line, an ``output`` that is the store's own file or one of its
        SQLite companions (``-wal``, ``-shm``, ``-journal``): writing it would replace
        the memory with what was written.

        :raises click.ClickException: It is.
        """
        from ..stores.postgres import is_postgres_url

        if is_postgres_url(self.db_path):
            return
        store = os.path.realpath(self.db_path)
        target = os.path.realpath(output)
        try:
            same = os.path.samefile(output, self.db_path)  # a hard link to it too
        except OSError:  # one of them does not exist (yet)
            same = False
        if same or target in (store, *(store + end for end in ("-wal", "-shm", "-journal"))):
            raise click.ClickException(
                f"cannot write {output}: it is the store's own file ({self.db_path}); "
                "writing it would replace the memory, so name another file")

    def plugin_manager(self) -> pluggy.PluginManager:
        """The built-in and installed plugins (entry points, ``CTXSLOTS_LOAD_PLUGINS`` applies),
        loaded once per command."""
        from ..plugins import make_plugin_manager

        if "pm" not in self._cache:
            self._cache["pm"] = make_plugin_manager(entry_points=True)
        pm: pluggy.PluginManager = self._cache["pm"]
        return pm

    @contextmanager
    def open_store(self, *, long_running: bool = False, create: bool = False,
                   undo_create: bool = False) -> Iterator[FactStore]:
        """Open the store with the chosen embedder (a plugin's too, through
        ``register_embedders``) and the plugins' ``rerank_hits``; close it afterwards.

        :param long_running: Keep the in-memory vector copy (a server); a
            one-shot command reads the vector table directly.
        :param create: Create a missing store (commands that write); otherwise
            a missing store is one error line naming it, and nothing is created.
        :param undo_create: With ``create``, for a command that writes in one
            transaction (so a failed one wrote nothing): when it fails (an error,
            Ctrl-C) on a SQLite file this call made, and the store holds nothing, the
            file is removed again, with the folders made for it (those still empty), so
            a bad input leaves no empty store behind. A file or folder that existed
            before is never removed.
        """
        made = self._made_paths() if create and undo_create else []
        empty = True
        try:
            with self._opened(long_running, create) as store:
                try:
                    yield store
                except BaseException:
                    if made:
                        empty = _holds_nothing(store)
                    raise
        except BaseException:
            if made and empty:
                _remove_made(made)
            raise

    def _made_paths(self) -> list[Path]:
        """Create the store's SQLite file, empty and readable by its owner only, if it is
        missing, in its folder, made ``0700`` with its missing parents; the folders and
        the file this call made, outermost first (none for a URL, ``:memory:``, an
        existing file, or one that cannot be made here: the store then makes it, or says
        why it cannot)."""
        from ..stores.postgres import is_postgres_url

        if is_postgres_url(self.db_path) or self.db_path == ":memory:":
            return []
        made: list[Path] = []
        try:
            made = make_private_dirs(os.path.dirname(os.path.abspath(self.db_path)))
            os.close(os.open(self.db_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except OSError:
            _remove_made(made)
            return []
        return [*made, Path(self.db_path)]

    @contextmanager
    def _opened(self, long_running: bool, create: bool) -> Iterator[FactStore]:
        """The store, as :meth:`open_store` describes."""
        from ..plugins import embedder_factories, reranker_from_plugins
        from ..stores.embedders import EmbedderChoice

        pm = self.plugin_manager()
        # Without --embedder, the store is made again with the embedder it records,
        # which may be a plugin's: the choice carries the plugins' factories.
        embedder = EmbedderChoice(self.embedder or None, base_url=self.embed_base_url,
                                  factories=embedder_factories(pm))
        # A one-shot command searches once or twice: sqlite-vec's scan (30 ms at 100k facts) beats
        # loading the in-memory vector copy first (1.6 s). A server keeps the copy.
        with FactStore(self.db_path, embedder=embedder, vector_cache=long_running, create=create,
                       rerank=reranker_from_plugins(pm), limits=self.limits()) as store:
            yield store

    def limits(self) -> Limits:
        """The store's limits: the slots the built-ins and installed plugins register
        (``CTXSLOTS_LOAD_PLUGINS`` applies), or any slot with ``--free-slots``."""
        from ..plugins import slot_owners

        owners = slot_owners(self.plugin_manager())
        return Limits(slots=tuple(owners), strict_slots=not self.free_slots,
                      slot_owners=owners)


def _remove_made(made: list[Path]) -> None:
    """Remove what :meth:`CliContext._made_paths` made, innermost first: the store's file
    with the files SQLite keeps beside it, then each folder, unless another process
    put something in it meanwhile."""
    for path in reversed(made):
        if path.is_dir() and not path.is_symlink():
            with contextlib.suppress(OSError):  # not empty: no longer only ours
                os.rmdir(path)
            continue
        for end in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(f"{path}{end}")


def _holds_nothing(store: FactStore) -> bool:
    """Whether ``store`` holds no fact, archived fact or replaced value (``False`` when it
    cannot tell)."""
    try:
        counts = store.stats()
    except CtxslotsError:
        return False
    return not (counts["facts"] or counts["archived"] or counts["history"])


#: Decorator giving a command the :class:`CliContext` as its first argument.
pass_cli_context = click.make_pass_decorator(CliContext)


class _EchoHandler(logging.Handler):
    """Shows the library's warnings (a retried request, a plugin not found) as one
    ``warning: ...`` line on stderr, wherever stderr points at the time."""

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            # What went wrong, not where: a traceback folded into one line reads as noise.
            error = record.exc_info[1]
            text = f"{text}: {type(error).__name__}: {error}"
        echo(f"{record.levelname.lower()}: {_one_line(scrub(text))}", err=True)


def _show_warnings() -> None:
    logger = logging.getLogger("ctxslots")
    if not any(isinstance(h, _EchoHandler) for h in logger.handlers):
        logger.addHandler(_EchoHandler(logging.WARNING))


#: A run of line breaks.
_BREAKS = re.compile(r"[\r\n\v\f\x1c-\x1e\x85\u2028\u2029]+")


def _one_line(text: str) -> str:
    # Line breaks go, with the indentation around them; spaces inside a line stay, so a
    # quoted value ('  2020-01-01') is shown as it was given. The blanks are stripped
    # from each line, not matched around each break: a pattern that did so tried every
    # blank of a long run, in time growing with the square of the run.
    return " ".join(line.strip(" \t") for line in _BREAKS.split(text)).strip()


def _show_warning(message: Warning | str, category: type[Warning], filename: str,
                  lineno: int, file: TextIO | None = None, line: str | None = None) -> None:
    """A Python warning (a read-only store, a failed background write) as one
    ``warning: ...`` line, without the file, line and source Python shows."""
    echo(f"warning: {_error_line(str(message))}", err=True)


def _error_line(text: str) -> str:
    """An error message as shown: one line, no credential, no control character."""
    return terminal_safe(_one_line(scrub(text)))


class _UsageLine(click.UsageError):
    """A usage error shown as one line, with where to find help (click shows four)."""

    def show(self, file: Any = None) -> None:
        hint = f" (see '{self.ctx.command_path} --help')" if self.ctx is not None else ""
        echo(f"Error: {self.format_message()}{hint}", file=file, err=file is None)


def _usage_line(exc: click.UsageError) -> click.UsageError:
    if isinstance(exc, (_UsageLine, click.exceptions.NoArgsIsHelpError)):
        return exc  # a bare group or command still shows its help
    return _UsageLine(_one_line(exc.format_message()), exc.ctx)


def _source_docstring(callback: Any) -> str | None:
    """The docstring of ``callback`` as written in its source file."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(callback)))
    except (OSError, TypeError, SyntaxError):
        return None
    node = tree.body[0] if tree.body else None
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return ast.get_docstring(node)
    return None


def _keep_help(command: click.Command) -> None:
    """Give ``command`` its help back under ``python -OO`` (or ``PYTHONOPTIMIZE=2``), which
    drops the docstrings click takes help from: it is read from the source instead."""
    if sys.flags.optimize >= 2 and command.help is None and command.callback is not None:
        command.help = _source_docstring(command.callback)


class _Group(click.Group):
    """A click group that prints every error as one line: library errors, usage
    errors (a mistyped command, a bad value, a missing file) and the commands' own."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _keep_help(self)

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        """Add ``cmd``, with its help kept under ``python -OO``."""
        _keep_help(cmd)
        super().add_command(cmd, name)

    def make_context(self, info_name: str | None, args: list[str],
                     parent: click.Context | None = None, **extra: Any) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as exc:
            raise _usage_line(exc) from exc

    def invoke(self, ctx: click.Context) -> Any:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            return self._invoke(ctx)

    def _invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            raise _usage_line(exc) from exc
        except CtxslotsError as exc:
            raise click.ClickException(_error_line(str(exc))) from exc
        except click.ClickException as exc:
            if _error_line(exc.message) == exc.message:
                raise
            raise click.ClickException(_error_line(exc.message)) from exc  # exit status 1
        except OSError as exc:
            _write_failed(exc)
        except MemoryError as exc:
            # A memory limit (`ulimit -v`, a container's) or the machine's memory: a
            # traceback says no more than this. Each write is one transaction, so one
            # under way is rolled back; what committed before it stays.
            raise click.ClickException(
                "out of memory (this process's limit, `ulimit -v`, or the machine's): the "
                "command stopped, and a write it had begun is rolled back") from exc
        except KeyboardInterrupt as exc:
            # Not click's "Aborted!" and status 1, the status of any error: a script tells
            # an interrupted command by 130 (143 for SIGTERM), as a shell reports the
            # signal. A write stopped so is rolled back (each is one transaction); what
            # committed before it stays.
            raise interrupted(exc) from None
        except BaseExceptionGroup as group:
            # A server's tasks (`mcp` over stdio) fail together, wrapped in groups, when
            # its output does (a client gone, a full disk): that one error, as above.
            failed = _only_os_error(group)
            if failed is None:
                raise
            _write_failed(failed)


def _only_os_error(group: BaseExceptionGroup[BaseException]) -> OSError | None:
    """The first ``OSError`` of ``group`` when it holds nothing else, else ``None``."""
    failed, rest = group.split(OSError)
    if failed is None or rest is not None:
        return None
    leaf: BaseException = failed
    while isinstance(leaf, BaseExceptionGroup):
        leaf = leaf.exceptions[0]
    return leaf if isinstance(leaf, OSError) else None


def _write_failed(exc: OSError) -> NoReturn:
    """End the command whose output failed: quietly with the status a shell gives a
    program SIGPIPE ends when its reader went away (`export | head -1`, an MCP client
    that stopped reading; Python ignores the signal itself, and click's status 1 read as
    failure: `doctor` finding problems), else in one line naming what could not be
    written."""
    if exc.errno == errno.EPIPE:
        silence_stdout_if_broken(broken=True)
        raise SystemExit(128 + signal.SIGPIPE) from None
    silence_stdout_if_broken()
    where = f": {exc.filename}" if exc.filename else " (the output)"
    raise click.ClickException(_error_line(f"cannot write{where}: "
                                           f"{exc.strerror or exc}")) from exc


@click.group(cls=_Group)
@click.option(
    "--db",
    envvar="CTXSLOTS_DB",
    help="The store: a SQLite file (a leading ~ is your home folder), or a postgresql:// URL "
         "(default: $CTXSLOTS_DB, else a file in the user data directory).",
)
@click.option(
    "--embedder",
    envvar="CTXSLOTS_EMBEDDER",
    help="hash, sentence-transformers:PATH_OR_PACKAGE, openai:MODEL or a plugin's kind; "
         "a store remembers the one that built its vectors (the default when not given; "
         "or $CTXSLOTS_EMBEDDER).",
)
@click.option(
    "--embed-base-url",
    envvar="CTXSLOTS_EMBED_BASE_URL",
    help="API root of an OpenAI-compatible embeddings server (for --embedder openai:MODEL; "
         "or $CTXSLOTS_EMBED_BASE_URL).",
)
@click.option(
    "--free-slots",
    is_flag=True,
    envvar="CTXSLOTS_FREE_SLOTS",
    help="Accept any slot name, not only user, project, agent and the slots plugins register "
         "(or $CTXSLOTS_FREE_SLOTS=1).",
)
@click.version_option(package_name="ctxslots")
@click.pass_context
def cli(
    ctx: click.Context, db: str | None, embedder: str | None, embed_base_url: str | None,
    free_slots: bool,
) -> None:
    """Memory slots for LLM agents: store facts, search them, assemble prompts."""
    from_variable = ctx.get_parameter_source("db") is click.core.ParameterSource.ENVIRONMENT
    if db is not None and not db.strip() and not from_variable:
        # An unset shell variable (--db "$STORE") would otherwise write to the default store.
        raise click.UsageError("--db is empty: name a SQLite file or a postgresql:// URL, "
                               "or leave --db out for the default store")
    if (db is None and os.environ.get("CTXSLOTS_DB") == "") or \
            (db is not None and not db.strip()):
        # click reads an empty variable as an unset one: CTXSLOTS_DB=${STORE} in a unit file
        # or an env file, with STORE unset, would write to the default store just the same.
        raise click.UsageError("$CTXSLOTS_DB is set but empty: set it to a SQLite file or a "
                               "postgresql:// URL, or unset it for the default store")
    if embedder is not None and not embedder.strip() and \
            ctx.get_parameter_source("embedder") is click.core.ParameterSource.ENVIRONMENT:
        # As FactStore() reads it: a blank $CTXSLOTS_EMBEDDER is no choice, the store's own.
        embedder = None
    if db is not None and db.startswith("~"):
        # No shell expands it in an MCP client's "args", a unit file or an env file: the
        # store would go to a folder named ~ under whatever directory the command ran in.
        db = os.path.expanduser(db)
    _show_warnings()
    ctx.obj = CliContext(db=db, embedder=embedder, embed_base_url=embed_base_url,
                         free_slots=free_slots)
