"""PromptAssembler: ask every contributor, fit their sections, keep the trace."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs
import jinja2
import pluggy

from .._secrets import safe_url
from ..contributors.base import Contributor, SearchableStore, check_contributor
from ..errors import (
    BudgetExceededError,
    InvalidArgumentError,
    InvalidFactError,
    InvalidRequestError,
    PluginError,
    StoreClosedError,
)
from ..model import AssembledPrompt, Section
from ..plugins import (
    check_manager,
    collect,
    make_plugin_manager,
    prepare_environment,
    reranker_from_plugins,
    slot_owners,
)
from ..prompts import Templates, make_environment
from ..request import AssemblyRequest
from ..stores.writes.limits import MAX_TIMESTAMP, Limits
from ..tokens import (
    DEFAULT_ENCODING,
    TokenCounter,
    TokenCounterProtocol,
    counter_name,
    joined_count,
)
from ..tokens.protocol import check_counter, checked_counts
from ._lines import SECTION_SEPARATOR
from ._placer import Placer
from ._plan import (
    Preparer,
    build_reports,
    collect_sections,
    extra_sections,
    order_sections,
    placement_key,
    prepare,
    section_of,
)
from ._run import call_async, call_sync, report_failure, unsaid
from .fit import Prepared, drop_section, fit, verify

__all__ = ["PromptAssembler"]

logger = logging.getLogger("ctxslots.assembler")


def _check_store(_instance: Any, _attribute: Any, store: Any) -> None:
    if store is not None and not callable(getattr(store, "search", None)):
        raise InvalidRequestError("store must be a FactStore or None", field="store", value=store)


def _as_tuple(value: Any, field: str) -> tuple[Any, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise InvalidRequestError(f"{field} must be a list", field=field, value=value)
    return tuple(value)


def _check_timeout(_instance: Any, _attribute: Any, timeout: Any) -> None:
    if timeout is None:
        return
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) \
            or not math.isfinite(timeout) or not 0 < timeout <= threading.TIMEOUT_MAX:
        raise InvalidRequestError(
            "contributor_timeout must be a positive number of seconds (at most "
            f"{threading.TIMEOUT_MAX:.0f}) or None", field="contributor_timeout", value=timeout)


def _plugins(value: Iterable[object]) -> tuple[Any, ...]:
    return _as_tuple(value, "plugins")


def _contributors(value: Iterable[Contributor] | None) -> tuple[Contributor, ...] | None:
    return None if value is None else _as_tuple(value, "contributors")


def _plugin_contributor(obj: Any, plugin: str) -> Contributor:
    """A contributor a plugin registered, checked.

    :raises PluginError: It is not shaped like a contributor; names the plugin.
    """
    try:
        return check_contributor(obj)
    except InvalidRequestError as exc:
        raise PluginError(f"plugin {plugin} registered a bad contributor: {exc}",
                          plugin=plugin) from exc


@attrs.define
class PromptAssembler:
    """Builds the context of one turn from every contributor, within a token budget.

    ::

        with FactStore("memory.db") as store:
            assembler = PromptAssembler(store)
            prompt = assembler.assemble(AssemblyRequest("how do I deploy?", scope="shop-api"))
            print(prompt.text)
            open("dump.html", "w", encoding="utf-8").write(prompt.dump("html"))

    Attributes:
        store: The fact store the memory contributors search (``None``: no memory).
        plugins: Plugin objects or modules to register, besides the built-ins.
        contributors: Exactly these contributors; ``None`` uses every contributor
            registered through ``register_contributors`` (the three memory slots
            and plugins').
        encoding: The tiktoken encoding that counts tokens (when no ``counter`` is
            given; with one, the counter's name).
        counter: What counts tokens: any object with ``count(text) -> int``
            (:class:`~ctxslots.tokens.TokenCounterProtocol`), such as a
            :class:`~ctxslots.tokens.HuggingFaceCounter` for a model whose
            tokenizer is not OpenAI's. Default: a :class:`TokenCounter` for
            ``encoding``, which remembers the count of each rendered piece.
        templates: Template overrides by name (mapping of name to source, or a directory).
        loader: Another jinja2 loader, tried after ``templates``, before the built-ins.
        load_entry_points: Also load plugins from the ``ctxslots`` entry-point group.
        plugin_manager: The pluggy manager holding the plugins: the one given (an
            application's, made by :func:`ctxslots.plugins.make_plugin_manager`, with
            its plugins already loaded; then ``plugins`` and ``load_entry_points`` must
            be left out; one without ctxslots' hook specs, a bare
            ``pluggy.PluginManager``, is an ``InvalidRequestError``), else a new one. Its
            ``rerank_hits`` implementations rerank the store's searches when the
            store has no reranker of its own (``FactStore.rerank`` is set).
        environment: The jinja2 environment of every template.
        contributor_timeout: Seconds each contributor has to answer (``None``, the
            default: no limit). One that has not answered in time is reported like one
            that raised: its section is left out and the dump shows
            ``TimeoutError: no section within N s``. An ``async`` contributor is
            cancelled; a plain one cannot be stopped, so its call goes on in a thread of
            its own and what it returns is not used. In :meth:`assemble` each contributor
            then runs on its own thread (one thread start each, about a tenth of a
            millisecond). Inside a ``batch()`` of the store the calling thread has open
            there is no limit: the contributors run on that thread (on another, their
            searches would wait for the batch to end, and all time out).

    :raises InvalidRequestError: An argument is malformed, or a slot the plugins
        register is kept by the store with other owners than they declare (open the
        store with ``Limits(slot_owners=ctxslots.plugins.slot_owners(...))``).
    :raises PluginError: A plugin's hook failed, or a plugin registered a contributor
        without a name, an integer ``priority`` from -10**6 to 10**6, a boolean
        ``sticky`` or a ``contribute`` method; names the plugin.
    """

    store: SearchableStore | None = attrs.field(validator=_check_store)
    plugins: tuple[Any, ...] = attrs.field(default=(), kw_only=True, converter=_plugins)
    contributors: tuple[Contributor, ...] | None = attrs.field(
        default=None, kw_only=True, converter=_contributors
    )
    encoding: str = attrs.field(default=DEFAULT_ENCODING, kw_only=True)
    _counter: TokenCounterProtocol | None = attrs.field(default=None, kw_only=True, repr=False,
                                                        alias="counter")
    templates: Templates | None = attrs.field(default=None, kw_only=True)
    loader: jinja2.BaseLoader | None = attrs.field(default=None, kw_only=True)
    load_entry_points: bool = attrs.field(default=False, kw_only=True)
    _given_pm: pluggy.PluginManager | None = attrs.field(default=None, kw_only=True, repr=False,
                                                         alias="plugin_manager")
    plugin_manager: pluggy.PluginManager = attrs.field(init=False, repr=False)
    environment: jinja2.Environment = attrs.field(init=False, repr=False)
    contributor_timeout: float | None = attrs.field(default=None, kw_only=True,
                                                    validator=_check_timeout)
    _measure: TokenCounterProtocol = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        if self._counter is None:
            self._counter = TokenCounter(self.encoding)
        else:
            check_counter(self._counter)
            self.encoding = counter_name(self._counter)
        self._measure = checked_counts(self._counter)
        if self._given_pm is not None:
            if self.plugins or self.load_entry_points:
                raise InvalidRequestError("give plugin_manager, or plugins and load_entry_points, "
                                          "not both", field="plugin_manager", value=self._given_pm)
            try:
                check_manager(self._given_pm)
            except InvalidArgumentError as exc:
                raise InvalidRequestError(str(exc), field="plugin_manager",
                                          value=self._given_pm) from None
            self.plugin_manager = self._given_pm
        else:
            self.plugin_manager = make_plugin_manager(
                self.plugins, entry_points=bool(self.load_entry_points)
            )
        if self.store is not None and getattr(self.store, "rerank", False) is None:
            rerank = reranker_from_plugins(self.plugin_manager)
            if rerank is not None:
                setattr(self.store, "rerank", rerank)  # noqa: B010 - a public attribute
        pm = self.plugin_manager
        _check_slot_owners(pm, self.store)
        self.environment = make_environment(
            templates=self.templates, loader=self.loader,
            prepare=lambda env: prepare_environment(pm, env))
        if self.contributors is None:
            found = collect(self.plugin_manager, "register_contributors", store=self.store)
            self.contributors = tuple(
                _plugin_contributor(obj, plugin) for _, (obj, plugin) in sorted(found.items())
            )
        else:
            names: set[str] = set()
            for obj in self.contributors:
                check_contributor(obj)
                if obj.name in names:
                    raise InvalidRequestError(f"two contributors are named {obj.name!r}",
                                              field="contributors", value=obj)
                names.add(obj.name)

    @property
    def counter(self) -> TokenCounterProtocol:
        """What counts tokens (the ``counter`` given, else a :class:`TokenCounter`)."""
        assert self._counter is not None  # set in __attrs_post_init__
        return self._counter

    def _contributors(self) -> tuple[Contributor, ...]:
        return self.contributors or ()

    def assemble(self, request: AssemblyRequest, *, record_shown: bool = True
                 ) -> AssembledPrompt:
        """Ask every contributor, fit their sections to the budget, and return the result.

        Contributors are asked one by one in placement order (sticky first, then
        by priority), each with :attr:`AssemblyRequest.room` set to the tokens
        the sections placed before it left (see :mod:`._placer`).

        :param record_shown: Tell each contributor which of its items reached the
            prompt (memory contributors count those facts as accessed); ``False``
            for a trial that no model sees (the inspector's prompt lab, ``ctxslots why``).

        :raises InvalidRequestError: ``request`` is not an :class:`AssemblyRequest`, or
            names a scope, user or agent the store refuses, or the ``counter`` returned a
            count that is not a whole number >= 0 (``field`` is ``"counter"``).
        :raises BudgetExceededError: The sticky sections alone do not fit; its
            ``prompt`` holds the result with them cut to fit and nothing else.
        :raises TemplateError: A template is missing or fails to render.
        :raises StoreClosedError: The store was closed, before the assembly or while its
            contributors were asked (its sections would all fail).
        """
        _check_request(request, self.store)
        timeout = None if self._in_batch() else self.contributor_timeout
        moment = self._moment(request)
        contributors = self._contributors()
        extras = extra_sections(request, (c.name for c in contributors))
        placer = Placer(Preparer(self.environment, self._measure), request.available,
                        self._measure.count(SECTION_SEPARATOR))
        sources: list[tuple[tuple[bool, int, str], int]] = [
            ((not c.sticky, -c.priority, c.name), n) for n, c in enumerate(contributors)]
        sources += [(placement_key(s), len(contributors) + n) for n, s in enumerate(extras)]
        entries: dict[int, tuple[Section, str | None] | None] = {}
        nothing: list[Contributor] = []
        rooms: dict[str, int] = {}  # the room each contributor that offered nothing was told
        for key, n in sorted(sources):
            room = None
            if n < len(contributors):
                room = placer.room()
                asked = request if room is None else attrs.evolve(request, room=room)
                outcome = call_sync(contributors[n], asked, timeout)
                entries[n] = section_of(outcome)
                if entries[n] is None:
                    nothing.append(contributors[n])
                    if room is not None:
                        rooms[contributors[n].name] = room
            else:
                entries[n] = (extras[n - len(contributors)], None)
            entry = entries[n]
            if entry is not None:
                placer.add(entry, key, room=room)
            # Lines repeating an earlier section's took none of the room it was told of;
            # asked again only with more room than it was last told (the same room would
            # bring the same answer).
            told = room or 0  # the most room its contributor was told
            while room is not None and entry is not None \
                    and (wider := placer.room_for_more(room)) is not None and wider > told:
                told = wider
                # A failure now is no warning: the first answer stands, nothing is left out.
                again = section_of(call_sync(contributors[n], attrs.evolve(request, room=wider),
                                             timeout, unsaid))
                if again is None or again[1] is not None \
                        or len(again[0].items) <= len(entry[0].items):
                    break  # nothing more to offer (or it failed now): the first answer stands
                entries[n] = entry = again
                placer.replace_last(entry, room=room)
        sections = order_sections([e for _, e in sorted(entries.items()) if e is not None])
        return self._finish(request, placer.final(sections), record_shown=record_shown,
                            offered_nothing=nothing, rooms=rooms, now=moment)

    async def aassemble(self, request: AssemblyRequest) -> AssembledPrompt:
        """:meth:`assemble` for async agent loops: contributors run concurrently.

        ``async`` contributors are awaited; plain ones run in worker threads.
        Being asked at once, none is told the room the others leave
        (:attr:`AssemblyRequest.room` is ``None``): a memory slot offers what
        could fill the whole budget.

        Inside a ``batch()`` of the store the calling thread has open, the
        contributors are asked one by one on this thread, with no limit: a plain
        one called, an async one awaited on this loop (on other threads, or another
        loop's, their searches would wait for the batch to end, for ever on SQLite).

        :raises StoreClosedError: As :meth:`assemble`.
        """
        here = self._in_batch()
        _check_request(request, self.store)
        moment = self._moment(request)
        if here:
            outcomes = [await call_async(c, request, here=True) for c in self._contributors()]
        else:
            outcomes = await asyncio.gather(*(call_async(c, request, self.contributor_timeout)
                                              for c in self._contributors()))
        sections = collect_sections(list(outcomes), request)
        nothing = [o.contributor for o in outcomes if o.section is None and o.error is None]

        def finish() -> AssembledPrompt:
            return self._finish(request, prepare(sections, self.environment, self._measure),
                                offered_nothing=nothing, now=moment)

        return finish() if here else await asyncio.to_thread(finish)

    def _in_batch(self) -> bool:
        """Whether the calling thread has a ``batch()`` of the store open."""
        return getattr(self.store, "in_batch", False) is True

    def dump(self, prompt: AssembledPrompt, format: str = "json") -> str:
        """``prompt.dump(format)``, rendered with this assembler's templates.

        :raises InvalidRequestError: Unknown format, or ``prompt`` is not an
            :class:`~ctxslots.AssembledPrompt`.
        """
        if not isinstance(prompt, AssembledPrompt):
            raise InvalidRequestError("prompt must be an AssembledPrompt", field="prompt",
                                      value=prompt)
        return prompt.dump(format, environment=self.environment)

    def _moment(self, request: AssemblyRequest) -> float | None:
        """The moment the memories are ranked at: the request's ``now``, else the store's
        clock as the assembly begins (``None`` without a store that has one, or when its
        reading is no time a store keeps or it raises: the memory sections, which search
        with that clock, then fail naming it, and the rest of the prompt still goes out)."""
        if request.now is not None:
            return request.now
        clock = getattr(self.store, "clock", None)
        if not callable(clock):
            return None
        try:
            moment = float(clock())
        except Exception:  # noqa: BLE001 - the memory sections report it
            return None
        return moment if math.isfinite(moment) and 0.0 <= moment <= MAX_TIMESTAMP else None

    def _finish(self, request: AssemblyRequest, prepared: list[Prepared], *,
                record_shown: bool = True, offered_nothing: Sequence[Contributor] = (),
                rooms: Mapping[str, int] | None = None, now: float | None = None
                ) -> AssembledPrompt:
        # Closed while the contributors were asked (a server shutting down): their
        # memory sections failed, and the prompt would hold none of them.
        _check_open(self.store)
        available = request.available
        for prep in prepared:
            if prep.template_failed and prep.error is not None:
                report_failure(prep.section.name, prep.error)
        separator_tokens = self._measure.count(SECTION_SEPARATOR)
        count = joined_count(self._measure)
        fit(prepared, available, separator_tokens)
        text, total = verify(prepared, available, SECTION_SEPARATOR, count)
        overflow = _cut_sticky(prepared)
        if overflow and any(not p.section.sticky for p in prepared):
            # A sticky section's fill yields to the other sections' matches (a sticky
            # memory section may offer nothing else): cut so, the sticky sections have
            # not overflowed unless they are cut when fitted alone.
            sticky = [p for p in prepared if p.section.sticky]
            fit(sticky, available, separator_tokens)
            verify(sticky, available, SECTION_SEPARATOR, count)
            overflow = _cut_sticky(sticky)
            if overflow:  # the sticky sections as they fitted alone, nothing else
                for prep in prepared:
                    if not prep.section.sticky and prep.kept:
                        drop_section(prep, "the sticky sections did not fit")
            else:
                fit(prepared, available, separator_tokens)
            text, total = verify(prepared, available, SECTION_SEPARATOR, count)
        prompt = AssembledPrompt(
            text=text, total_tokens=total, budget=request.budget,
            safety_margin=request.safety_margin, answer_reserve=request.answer_reserve,
            encoding=self.encoding, message=request.message, scope=request.scope,
            sections=build_reports(prepared, offered_nothing, rooms or {}),
            sticky_overflow=overflow,
            user=request.user,
            agent=request.agent,
            now=now,
        )
        if overflow:
            names = ", ".join(p.section.name for p in prepared if p.section.sticky and p.cut)
            raise BudgetExceededError(
                f"the sticky sections ({names}) do not fit into {available} tokens "
                f"(budget {request.budget} - safety margin {request.safety_margin} - "
                f"answer reserve {request.answer_reserve})",
                prompt=prompt,
            )
        if record_shown:
            self._record_shown(prepared)
        return prompt

    def _record_shown(self, prepared: Sequence[Prepared]) -> None:
        by_name = {c.name: c for c in self._contributors()}
        # The sections searching this store count their facts in one write, not one each.
        together = getattr(self.store, "counts_together", None)
        try:
            with together() if callable(together) else contextlib.nullcontext():
                for prep in prepared:
                    contributor = by_name.get(prep.section.name)
                    record = getattr(contributor, "record_shown", None)
                    if prep.kept and callable(record):
                        try:
                            record(prep.kept_items())
                        except Exception:  # the prompt is built; a failed note must not lose it
                            logger.warning("record_shown of %r failed", prep.section.name,
                                           exc_info=True)
        except Exception:
            logger.warning("the access counts of the facts shown were not written", exc_info=True)


def _cut_sticky(prepared: Sequence[Prepared]) -> bool:
    """Whether fitting cut a sticky section. One that fills (offers more than may fit)
    is cut only when it kept nothing; its last items falling to the budget is how it
    stops."""
    return any(p.section.sticky and p.cut is not None and not (p.section.fills and p.kept)
               for p in prepared)


def _check_slot_owners(pm: pluggy.PluginManager, store: Any) -> None:
    """Each slot the plugins register holds, in the store read, the owners they declare:
    a user slot the store kept as a workspace's would show one user's facts to another."""
    limits = getattr(store, "limits", None)
    if not isinstance(limits, Limits):
        return
    for name, declared in slot_owners(pm).items():
        try:
            limits.slot(name)
        except InvalidFactError:
            continue  # a slot the store refuses: its section fails and says so
        kept = limits.owners_of(name)
        if kept != declared:
            raise InvalidRequestError(
                f"slot {name!r} is registered with owners {declared.describe()!r}, but the "
                f"store keeps its facts with owners {kept.describe()!r}: open the store with "
                "Limits(slot_owners=ctxslots.plugins.slot_owners(plugin_manager))",
                field="store", value=name)


def _check_open(store: Any) -> None:
    """The store is open: a closed store makes every memory section fail, and the
    prompt come back without memory as if nothing were remembered."""
    if getattr(store, "closed", False) is True:
        path = safe_url(str(getattr(store, "path", "")))
        raise StoreClosedError(f"the store at {path} is closed", path=path)


def _check_request(request: Any, store: Any) -> None:
    """``request`` is an :class:`AssemblyRequest` whose owners the store takes, and the
    store is open: one it refuses, or a closed store, would make every memory section
    fail, and the prompt come back empty as if nothing were remembered."""
    if not isinstance(request, AssemblyRequest):
        raise InvalidRequestError(
            f"request must be an AssemblyRequest, not {type(request).__name__}",
            field="request", value=request,
        )
    _check_open(store)
    limits = getattr(store, "limits", None)
    if not isinstance(limits, Limits):
        return
    try:
        limits.scope(request.scope)
        for kind in ("user", "agent"):
            if getattr(request, kind) is not None:
                limits.owner(getattr(request, kind), kind)
    except InvalidFactError as exc:
        raise InvalidRequestError(str(exc), field=exc.field, value=exc.value) from exc
