"""The exceptions ctxslots raises.

Every error derives from :class:`CtxslotsError`. Errors caused by bad input are
also :class:`ValueError` subclasses, so callers that already catch ``ValueError``
keep working. Each error carries the offending object where there is one.
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from typing import Any, Protocol

__all__ = [
    "FLUSH_FAILURES",
    "ArgumentError",
    "BudgetExceededError",
    "CtxslotsError",
    "DuplicateKeyError",
    "EmbedderError",
    "EmbedderSpecError",
    "EncodingError",
    "FactNotFoundError",
    "FlushError",
    "ImportLine",
    "IntegrationUnavailableError",
    "InvalidArgumentError",
    "InvalidFactError",
    "InvalidImportError",
    "InvalidRequestError",
    "InvalidToolArgumentsError",
    "LLMClientError",
    "MCPUnavailableError",
    "MemoryUnavailableError",
    "PluginError",
    "ReadOnlyStoreError",
    "ReplyFormatError",
    "StoreBusyError",
    "StoreClosedError",
    "StoreDamagedError",
    "StoreError",
    "StoreFullError",
    "TemplateError",
]


def _rebuilt(kind: type[BaseException], args: tuple[Any, ...]) -> BaseException:
    """An error made again from the arguments it passed to :class:`Exception`, without
    calling its ``__init__`` (whose arguments are others); pickle then sets its
    attributes."""
    return kind.__new__(kind, *args)


def _portable(state: Any) -> Any:
    """An error's attributes with each one that does not pickle (a generator, a lock, a
    connection passed as the offending value) replaced by its repr."""
    if not isinstance(state, dict):
        return state
    portable = {}
    for name, value in state.items():
        try:
            pickle.dumps(value)
        except Exception:  # noqa: BLE001 - whatever pickling raises, the repr is sent
            value = repr(value)
        portable[name] = value
    return portable


class CtxslotsError(Exception):
    """Base class of every error raised by ctxslots.

    Every one pickles and copies with its message and attributes, so an error
    raised in a worker process reaches the parent (``multiprocessing``,
    ``concurrent.futures``) as the error it is. An attribute that does not pickle
    (the offending value was a generator, a lock...) is pickled as its repr;
    :func:`copy.copy` keeps it as it is.
    """

    def __reduce__(self) -> tuple[Any, ...]:
        # Exception's own, (type, args[, attributes]), but made again without __init__.
        reduced = super().__reduce__()
        state = reduced[2:] if isinstance(reduced, tuple) else ()
        return _rebuilt, (type(self), self.args), *(_portable(part) for part in state)

    def __copy__(self) -> CtxslotsError:
        copied = _rebuilt(type(self), self.args)
        copied.__dict__.update(self.__dict__)
        return copied  # type: ignore[return-value]


class StoreError(CtxslotsError):
    """The fact store could not be opened or used (driver, extension, schema).

    Attributes:
        path: The database path involved, when known.
    """

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class ReadOnlyStoreError(StoreError):
    """The store can be read but not written (a read-only file, a read replica, a file
    deleted or replaced by another while the store had it open).

    Nothing was written. Searches of such a store still answer; they do not
    count accesses.
    """


class StoreBusyError(StoreError):
    """Another connection held the store's write lock longer than a write waits for it.

    Nothing was written. The lock belongs to another writer (a process in a
    long :meth:`~ctxslots.FactStore.batch`, a large import); run the call again
    once it is done, or wait longer (``$CTXSLOTS_BUSY_TIMEOUT``).

    Attributes:
        waited: The seconds the write waited.
        holder: Who holds the lock (``"process 4242 (python agent.py)"``), when known.
    """

    def __init__(self, message: str, *, path: str | None = None, waited: float = 0.0,
                 holder: str | None = None) -> None:
        super().__init__(message, path=path)
        self.waited = waited
        self.holder = holder


class StoreFullError(StoreError):
    """The disk holding the store is full (on PostgreSQL: the server's disk), or the
    store's file reached the process's file size limit (``ulimit -f``), so the write
    could not be made.

    Nothing was written, except by an erasure: when the rows are gone but the
    write-ahead log, which still holds their earlier pages, could not be copied back
    into the file, the message says so. Searches still answer; the accesses they
    count are written once there is room again.
    """


class StoreClosedError(StoreError):
    """The store was closed; nothing can be read or written through it any more."""


class StoreDamagedError(StoreError):
    """A page of the store's file is damaged: its bytes are not what SQLite wrote (a disk
    fault, a copy made mid-write, another program's writes).

    Nothing more of that page can be read or written. ``ctxslots doctor`` reports what it
    can still check; restore the file from a backup, or copy what is readable into a new
    file (``sqlite3 FILE .recover``) and open that.
    """


class DuplicateKeyError(StoreError):
    """A storage engine was asked to insert a keyed fact whose slot, scope and key are taken.

    Nothing was written and the open transaction stays usable. The facade
    reads the key with the engine's ``get_by_key`` inside the same transaction
    before writing; where an engine does not lock a key with no row
    (PostgreSQL), another writer may store it in between, and the facade then
    reads it again and replaces its value.

    Attributes:
        slot: The slot of the key.
        scope: Its scope.
        key: The key.
    """

    def __init__(self, slot: str, scope: str, key: str, *, path: str | None = None) -> None:
        super().__init__(f"a fact with slot {slot!r}, scope {scope!r} and key {key!r} already "
                         "exists: read it with get_by_key inside the transaction and update it",
                         path=path)
        self.slot = slot
        self.scope = scope
        self.key = key


class InvalidFactError(CtxslotsError, ValueError):
    """A fact was rejected before anything was written (slot, key, value, tags...).

    Attributes:
        field: The name of the offending field (``"slot"``, ``"value"``...).
        value: The offending value (long strings are kept whole; only the
            message is shortened).
    """

    def __init__(self, message: str, *, field: str, value: Any = None) -> None:
        super().__init__(message)
        self.field = field
        self.value = value


class InvalidArgumentError(InvalidFactError):
    """An argument that is not part of a fact was rejected: a query, a limit, a
    conversation, a policy value, an option. Nothing was written.

    It subclasses :class:`InvalidFactError` because such arguments used to raise
    that error: code catching ``InvalidFactError`` keeps catching them. Catch
    ``InvalidArgumentError`` to tell a bad argument from a bad fact.

    Attributes:
        field: The name of the offending argument (``"query"``, ``"limit"``...).
        value: The offending value.
    """


class ImportLine(Protocol):
    """What an import says of one line it could not use
    (:class:`~ctxslots.stores.ImportIssue` is one)."""

    @property
    def line(self) -> int:
        """The line (1-based)."""

    @property
    def message(self) -> str:
        """What is wrong with it."""

    @property
    def field(self) -> str | None:
        """The offending field, when one is to blame."""

    @property
    def value(self) -> Any:
        """The offending value."""


class InvalidImportError(InvalidFactError):
    """An import file has a malformed line; nothing was imported.

    Attributes:
        line: The first bad line (1-based).
        field: The offending field (``"json"`` for a line that is not JSON).
        value: The offending value.
        errors: Every bad line found, as :class:`~ctxslots.stores.ImportIssue`.
    """

    def __init__(self, issue: ImportLine, errors: Sequence[ImportLine] = ()) -> None:
        more = len(errors) - 1
        suffix = ""
        if more > 0:
            suffix = f" (and {more} more invalid line{'' if more == 1 else 's'})"
        super().__init__(f"line {issue.line}: {issue.message}{suffix}", field=issue.field or "",
                         value=issue.value)
        self.line = issue.line
        self.errors = tuple(errors) or (issue,)


class InvalidRequestError(CtxslotsError, ValueError):
    """An assembly request, or an argument of the assembler, a contributor or a
    dump, is malformed.

    Attributes:
        field: The name of the offending argument or field.
        value: The offending value.
    """

    def __init__(self, message: str, *, field: str, value: Any = None) -> None:
        super().__init__(message)
        self.field = field
        self.value = value


class EncodingError(CtxslotsError, ValueError):
    """A tiktoken encoding is unknown, or its bundled vocabulary failed its checksum.

    Attributes:
        encoding: The encoding name that was asked for.
    """

    def __init__(self, message: str, *, encoding: Any) -> None:
        super().__init__(message)
        self.encoding = encoding


class InvalidToolArgumentsError(CtxslotsError, ValueError):
    """A tool call's arguments do not match the tool's definition."""


#: The former name of :class:`InvalidToolArgumentsError` (``ctxslots.tools``), kept working.
ArgumentError = InvalidToolArgumentsError


class PluginError(CtxslotsError, ValueError):
    """A plugin registered something invalid (bad or duplicate name, wrong type).

    Attributes:
        plugin: The name of the plugin at fault.
    """

    def __init__(self, message: str, *, plugin: str) -> None:
        super().__init__(message)
        self.plugin = plugin


class FactNotFoundError(CtxslotsError, LookupError):
    """No live fact has the requested id.

    Attributes:
        fact_id: The id that was asked for.
    """

    def __init__(self, fact_id: int) -> None:
        super().__init__(f"no fact with id {fact_id}")
        self.fact_id = fact_id


class BudgetExceededError(CtxslotsError, ValueError):
    """The sticky sections alone do not fit into the token budget.

    Attributes:
        prompt: The :class:`~ctxslots.model.AssembledPrompt` that was built with
            every non-sticky section dropped, for inspection and dumping.
    """

    def __init__(self, message: str, *, prompt: Any = None) -> None:
        super().__init__(message)
        self.prompt = prompt


class TemplateError(CtxslotsError):
    """A jinja2 template is missing or failed to render.

    Attributes:
        template: The template name.
    """

    def __init__(self, message: str, *, template: str) -> None:
        super().__init__(message)
        self.template = template


class LLMClientError(CtxslotsError):
    """A language-model backend failed (HTTP error, timeout, malformed reply).

    Attributes:
        status: The HTTP status code, when there was one.
        body: The raw response body, when there was one.
    """

    def __init__(self, message: str, *, status: int | None = None, body: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


class ReplyFormatError(CtxslotsError, ValueError):
    """A model's reply is not one JSON object of the operations schema.

    Attributes:
        raw: The reply text as received.
    """

    def __init__(self, message: str, *, raw: str) -> None:
        super().__init__(message)
        self.raw = raw


#: Why a flush failed, as :attr:`FlushError.reason` says it (see there).
FLUSH_FAILURES = ("model", "reply", "conflict", "erased", "store_closed", "store")


class FlushError(CtxslotsError):
    """A flush failed; the store was left unchanged.

    Attributes:
        report: The :class:`~ctxslots.flusher.FlushReport` with the raw model
            output and the reason, for inspection.
        reason: Why, as a word a program can act on (one of :data:`FLUSH_FAILURES`):
            ``"model"`` (the model call failed: try again later), ``"reply"`` (the
            model's reply could not be read after one retry), ``"conflict"`` (another
            flush of the conversation finished first: flush again), ``"erased"`` (its
            user's or agent's memory was erased meanwhile: nothing was written, and
            flushing again writes the conversation anew), ``"store_closed"`` (the store
            was closed during the flush), ``"store"`` (applying the operations failed
            otherwise); ``None`` when whoever raised it gave none.
    """

    def __init__(self, message: str, *, report: Any = None, reason: str | None = None
                 ) -> None:
        super().__init__(message)
        self.report = report
        self.reason = reason


class EmbedderError(CtxslotsError):
    """An embedder could not be loaded, or failed to embed.

    Missing package or model, HTTP error, timeout, malformed reply, wrong
    number of vectors or wrong dimension.

    Attributes:
        model_id: The embedder's model id, when known.
        status: The HTTP status code, when there was one.
        body: The raw response body, when there was one.
        refused_input: Whether the embedder answered that it cannot embed what it
            was sent (HTTP 400, 413 or 422, or a vector of NaN): the same texts fail
            again, other texts may not. The store then embeds the others and keeps
            the refused ones without a vector (found by their words).
    """

    def __init__(
        self,
        message: str,
        *,
        model_id: str | None = None,
        status: int | None = None,
        body: str | None = None,
        refused_input: bool = False,
    ) -> None:
        super().__init__(message)
        self.model_id = model_id
        self.status = status
        self.body = body
        self.refused_input = refused_input


class EmbedderSpecError(EmbedderError, ValueError):
    """An embedder spec string is malformed, names an unknown kind, or lacks a part.

    Attributes:
        spec: The offending spec.
    """

    def __init__(self, message: str, *, spec: str) -> None:
        super().__init__(message)
        self.spec = spec


class MCPUnavailableError(CtxslotsError, ImportError):
    """The ``mcp`` SDK (2.x) is not installed."""


class IntegrationUnavailableError(CtxslotsError, ImportError):
    """An agent framework integration was imported without its framework installed.

    Attributes:
        extra: The extra that installs it (``pip install 'ctxslots[EXTRA]'``).
    """

    def __init__(self, module: str, extra: str) -> None:
        super().__init__(f"{module} needs the {extra!r} extra: pip install 'ctxslots[{extra}]'")
        self.extra = extra


class MemoryUnavailableError(CtxslotsError):
    """Memory could not be read or written during an agent run, and the framework
    integration was asked to be strict (without ``strict`` it logs and the run goes on).

    Attributes:
        step: What failed (``"assembling the context"``, ``"flushing the conversation"``...).
    """

    def __init__(self, message: str, *, step: str) -> None:
        super().__init__(message)
        self.step = step
