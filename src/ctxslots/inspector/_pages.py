"""The inspector's pages: each handler reads the request, asks the store or the assembler,
and renders one template (see :mod:`.app`). Every handler that asks the store runs in a
worker thread (Starlette runs a plain function there): a page waiting for the store, a
write waiting for another process's lock or the doctor reading the whole store, keeps no
other page waiting."""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import jinja2
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from ..errors import (
    BudgetExceededError,
    CtxslotsError,
    FactNotFoundError,
    ReadOnlyStoreError,
    StoreError,
)
from ..model import AssembledPrompt
from ..prompts.dump import html_helpers
from ..request import AssemblyRequest
from ..stores import FactStore
from ..stores.owners import ANY
from ..stores.stemming import fold
from .why import explain

__all__ = ["Pages"]

#: The largest fact id (a signed 64-bit integer).
_MAX_ID = 2**63 - 1

#: Most facts a memory page lists: a page stays quick to read and to render; the
#: filters narrow it.
_SHOWN = 300

#: Owner and filter fields a memory page and the prompt lab carry from page to page
#: (``expired``: any value lists expired facts too).
_FIELDS = ("user", "agent", "scope", "slot", "tag", "q", "expired")
#: The fields that name an owner, read as typed.
_OWNERS = ("user", "agent", "scope")


def _value(params: Mapping[str, str], name: str) -> str | None:
    """A form or query value, stripped; ``None`` when blank."""
    value = (params.get(name) or "").strip()
    return value or None


def _owner(params: Mapping[str, str], name: str) -> str | None:
    """An owner field (user, agent, scope) as typed: an owner is named exactly as stored,
    so ``"Ana "`` is not ``"Ana"``; ``None`` when blank."""
    value = params.get(name) or ""
    return value if value.strip() else None


def _number(text: str | None, default: float, kind: type = float) -> Any:
    """``text`` as a number, the default when blank, else the text itself (the store
    refuses it with its own error, so the page says what the library says)."""
    if text is None:
        return default
    try:
        return kind(text)
    except ValueError:
        return text


#: What the prompt lab and the why page are asked for: a request as ``ctxslots assemble``
#: takes it, and the fact to explain.
_LAB_FIELDS = ("message", "user", "agent", "scope", "budget", "safety_margin", "answer_reserve",
               "fact")


def _unavailable(exc: CtxslotsError) -> bool:
    """Whether ``exc`` says the store cannot be used now (down, damaged, busy, closed),
    which the app answers with its 503 page, rather than that this request was refused."""
    return isinstance(exc, StoreError) and not isinstance(exc, ReadOnlyStoreError)


def _lines(text: str) -> str:
    """Text a browser sent from a textarea, its line ends as the page showed them: a
    browser sends each as CR LF, and an HTML parser reads a stored CR as LF."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _tags(text: str) -> list[str]:
    """The tags of the form's one-per-line field: a tag holds no line break (nor any other
    control character), and may hold a comma or spaces at either end, as the store keeps
    them; blank lines are no tag."""
    return [line for line in _lines(text).split("\n") if line.strip()]


def _confidence(text: str) -> Any:
    """The confidence field as a number (1 when blank), else as typed, for the store to
    refuse."""
    return _number(text.strip() or None, 1.0)


async def _form(request: Request) -> dict[str, str]:
    """A POSTed form (urlencoded), each field's first value."""
    body = (await request.body()).decode("utf-8", "replace")
    return {k: v[0] for k, v in urllib.parse.parse_qs(body, keep_blank_values=True).items()}


@attrs.define
class Pages:
    """The handlers, over one store, one jinja2 environment and one assembler."""

    store: FactStore
    env: jinja2.Environment
    assembler: Any

    def render(self, name: str, *, status: int = 200, **context: Any) -> HTMLResponse:
        """Template ``name`` as an HTML response."""
        html = self.env.get_template(name).render(**context)
        return HTMLResponse(html, status_code=status, headers={
            "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; "
                                       "img-src 'self' data:; form-action 'self'; "
                                       "frame-ancestors 'none'; base-uri 'none'",
            "x-content-type-options": "nosniff", "referrer-policy": "same-origin",
            "cache-control": "no-store"})

    # Memory and the timeline ---------------------------------------------------------

    def _listed(self, params: Mapping[str, str], order: str, number: int
                ) -> tuple[list[Any], str | None, int]:
        """Page ``number`` of the facts the filters select, newest first (by id, or by
        when each was said); an error message; how many matched. Without a text to look
        for, the store counts the facts and reads one page of them; a text is looked for
        in every fact the other filters select."""
        f = {name: _owner(params, name) if name in _OWNERS else _value(params, name)
             for name in _FIELDS}
        if f["tag"] is not None:  # as stored: a tag may begin or end with a space
            f["tag"] = params["tag"]
        chosen: dict[str, Any] = {
            "slots": None if f["slot"] is None else [f["slot"]],
            "scope": ANY if f["scope"] is None else f["scope"],
            "user": ANY if f["user"] is None else f["user"],
            "agent": ANY if f["agent"] is None else f["agent"],
            "tags": () if f["tag"] is None else [f["tag"]],
            "include_expired": f["expired"] is not None}
        start = (number - 1) * _SHOWN
        try:
            if f["q"] is None:
                matched = self.store.count_facts(**chosen)
                if not 0 <= start < max(matched, 1):
                    return [], None, matched
                return self.store.facts(**chosen, order=order, newest_first=True,
                                        limit=_SHOWN, offset=start), None, matched
            facts = self.store.facts(**chosen, order=order, newest_first=True)
        except CtxslotsError as exc:
            if _unavailable(exc):
                raise
            return [], str(exc), 0
        needle = fold(f["q"])  # folded as search folds words: istanbul finds İstanbul
        facts = [x for x in facts if needle in fold(" ".join(
            filter(None, (x.value, x.key, x.context))))]
        return facts[start:start + _SHOWN], None, len(facts)

    def memory(self, request: Request) -> Response:
        """``/``: the facts the filters select (owners, scope, slot, tag, text)."""
        return self._list_page("memory", request.query_params, "id",
                               done=request.query_params.get("done"))

    def timeline(self, request: Request) -> Response:
        """``/timeline``: the same facts, by when they were said, newest first."""
        return self._list_page("timeline", request.query_params, "said", done=None)

    def _list_page(self, page: str, params: Mapping[str, str], order: str,
                   done: str | None) -> Response:
        """One page of ``_SHOWN`` facts (``?page=N``, from 1), with links to the others
        carrying the filters."""
        try:
            number = int(params.get("page") or 1)
        except ValueError:
            number = 0
        facts, error, matched = self._listed(params, order, max(number, 1))
        pages = max(1, -(-matched // _SHOWN))
        if not 1 <= number <= pages:
            return self.render("error.html.j2", page=page, status=404,
                               message=f"no page {params.get('page')!r}: the pages are 1 to "
                                       f"{pages}")
        kept = {n: params[n] for n in _FIELDS if params.get(n)}

        def link(to: int) -> str:
            return "?" + urllib.parse.urlencode({**kept, "page": to})

        start = (number - 1) * _SHOWN
        return self.render("memory.html.j2", page=page, facts=facts,
                           matched=matched, shown=_SHOWN, first=start + 1, number=number,
                           pages=pages, newer=link(number - 1) if number > 1 else None,
                           older=link(number + 1) if number < pages else None, error=error,
                           f={n: params.get(n, "") for n in _FIELDS}, done=done,
                           status=400 if error else 200)

    # One fact ------------------------------------------------------------------------

    def _fact_page(self, fact_id: int, *, status: int = 200, error: str | None = None,
                   form: Mapping[str, str] | None = None, done: str | None = None) -> Response:
        store = self.store
        fact = store.get(fact_id, include_archive=True, include_expired=True)
        if fact is None:
            return self.render("error.html.j2", page="memory", status=404,
                               message=f"no fact with id {fact_id}")
        links = []
        for other, strength in sorted(store.links(fact_id).items(), key=lambda p: -p[1]):
            linked = store.get(other, include_archive=True, include_expired=True)
            links.append((other, strength, None if linked is None else linked.value))
        try:
            nearby = store.timeline(fact_id, before=3, after=3, scope=ANY, user=ANY, agent=ANY)
        except FactNotFoundError:  # archived or expired: not on the live timeline
            nearby = []
        return self.render("fact.html.j2", page="memory", status=status, fact=fact,
                           history=store.history(fact_id), links=links, nearby=nearby,
                           vector=store.vector_status(fact_id).describe(), error=error,
                           form=form or {}, done=done)

    def fact(self, request: Request) -> Response:
        """``/fact/ID``: one fact, its history, links, accesses, vector and neighbours."""
        fact_id = _fact_id(request)
        if fact_id is None:
            return self.render("error.html.j2", page="memory", status=404,
                               message=_NO_ID)
        return self._fact_page(fact_id, done=request.query_params.get("done"))

    async def change(self, request: Request) -> Response:
        """``POST /fact/ID/ACTION``: edit, forget, delete, reinforce or demote, through the
        store's own methods; a refusal shows the store's error, the values kept."""
        form = await _form(request)
        return await run_in_threadpool(self._change, request, form)

    def _change(self, request: Request, form: dict[str, str]) -> Response:
        action = request.path_params["action"]
        fact_id = _fact_id(request)
        if fact_id is None:
            return self.render("error.html.j2", page="memory", status=404,
                               message=_NO_ID)
        store = self.store
        try:
            if action == "edit":
                changes, moved = self._edits(fact_id, form)
                if moved:
                    return self._fact_page(fact_id, status=409, form={
                        n: v for n, v in form.items() if n in changes}, error=(
                        f"nothing was saved: the {' and the '.join(moved)} of fact "
                        f"{fact_id} changed since this page was shown; the form now shows "
                        "what is stored, with what you typed in the fields you changed: "
                        "save again to write it"))
                if not changes:
                    return RedirectResponse(f"/fact/{fact_id}?done=nothing+changed",
                                            status_code=303)
                store.update(fact_id, **changes)
            elif action == "forget":
                store.forget(fact_id, reason=_value(form, "reason"))
            elif action == "delete":
                if form.get("confirm") != "yes":
                    return self._fact_page(fact_id, status=400, form=form, error=(
                        "nothing was deleted: tick 'yes, for good' to delete the fact"))
                store.delete(fact_id)
                return RedirectResponse(f"/?done=deleted+fact+{fact_id}", status_code=303)
            elif action == "reinforce":
                store.reinforce(fact_id, _number(_value(form, "amount"), 3.0))
            elif action == "demote":
                store.demote(fact_id, _number(_value(form, "amount"), 1.0))
            else:
                return self.render("error.html.j2", page="memory", status=404,
                                   message=f"no action {action!r}")
        except CtxslotsError as exc:
            status = 404 if isinstance(exc, FactNotFoundError) else \
                503 if _unavailable(exc) else 400
            if store.get(fact_id, include_archive=True, include_expired=True) is None:
                return self.render("error.html.j2", page="memory", status=status,
                                   message=str(exc))
            return self._fact_page(fact_id, status=status, error=str(exc), form=form)
        done = {"edit": "saved", "forget": "forgotten"}.get(action, action + "d")
        return RedirectResponse(f"/fact/{fact_id}?done={done}", status_code=303)

    def _edits(self, fact_id: int, form: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
        """The fields of the edit form the person changed, as
        :meth:`~ctxslots.FactStore.update` takes them, and those of them that another
        writer changed since the page was shown.

        A field counts as changed when it differs from what the page showed (its
        ``shown_`` twin; the stored fact's when the form has none): a form sent untouched
        changes nothing, whatever line ends or tags the fact holds, and a field left as
        shown never writes the page's old value over a newer one."""
        fact = self.store.get(fact_id)  # a live fact, as update changes
        if fact is None:
            raise FactNotFoundError(fact_id)
        stored = {"value": _lines(fact.value), "context": _lines(fact.context or ""),
                  "tags": list(fact.tags), "confidence": fact.confidence}
        read: dict[str, Callable[[str], Any]] = {
            "value": _lines, "context": _lines, "tags": _tags, "confidence": _confidence}
        changes: dict[str, Any] = {}
        moved = []
        for name, parse in read.items():
            sent = form.get(name)
            if sent is None and name != "confidence":
                continue
            new = parse(sent or "")
            shown = form.get("shown_" + name)
            before = stored[name] if shown is None else parse(shown)
            if new != before and new != stored[name]:
                changes[name] = new
                if before != stored[name]:
                    moved.append(name)
        return changes, moved

    # The prompt lab and why ------------------------------------------------------------

    def _request(self, params: Mapping[str, str]) -> AssemblyRequest:
        return AssemblyRequest(params.get("message", ""), user=_owner(params, "user"),
                               agent=_owner(params, "agent"), scope=_owner(params, "scope"),
                               budget=_number(_value(params, "budget"), 2000, int),
                               safety_margin=_number(_value(params, "safety_margin"), 0, int),
                               answer_reserve=_number(_value(params, "answer_reserve"), 0, int))

    def _assemble(self, request: AssemblyRequest) -> AssembledPrompt:
        try:
            prompt: AssembledPrompt = self.assembler.assemble(request, record_shown=False)
        except BudgetExceededError as exc:
            prompt = exc.prompt
        return prompt

    def lab(self, request: Request) -> Response:
        """``/lab``: a message, owners, a budget, a safety margin and an answer reserve; the prompt with every item kept or
        dropped and why, each found fact linked to its explanation. A form sent with a
        blank message assembles the prompt without one, as ``ctxslots assemble ""``
        does (what is always shown, the profile); a page opened without the field shows
        the form only."""
        params = dict(request.query_params)
        fields = {n: params.get(n, "") for n in _LAB_FIELDS}
        fields["budget"] = fields["budget"] or "2000"
        data, error = None, None
        if "message" in params:
            try:
                data = self._assemble(self._request(params)).to_dict()
            except CtxslotsError as exc:
                if _unavailable(exc):
                    raise
                error = str(exc)

        def why_url(fact_id: int) -> str:
            keep = {k: v for k, v in fields.items() if k != "fact" and v}
            return "/why?" + urllib.parse.urlencode({"fact": fact_id, **keep})

        return self.render("lab.html.j2", page="lab", f=fields, d=data, error=error,
                           why_url=why_url, status=400 if error else 200, **html_helpers())

    def why(self, request: Request) -> Response:
        """``/why``: why fact ``fact`` is, or is not, in the prompt for ``message``."""
        params = dict(request.query_params)
        fields = {n: params.get(n, "") for n in _LAB_FIELDS}
        answer, error, status = None, None, 200
        try:
            fact_id = int(fields["fact"])
        except ValueError:
            error, status = f"a fact id is a whole number, not {fields['fact']!r}", 400
        else:
            try:
                answer = explain(self.assembler, self._request(params), fact_id)
            except CtxslotsError as exc:
                if _unavailable(exc):
                    raise
                # No such fact: 404, as its own page answers; a request the store refuses: 400.
                error, status = str(exc), 404 if isinstance(exc, FactNotFoundError) else 400
        return self.render("why.html.j2", page="lab", f=fields, answer=answer, error=error,
                           status=status)

    # Health ----------------------------------------------------------------------------

    def health(self, request: Request) -> Response:
        """``/health``: the doctor's report, with the repairs it proposes, and the counts."""
        report, stats, error = self._checked()
        return self.render("health.html.j2", page="health", report=report, stats=stats,
                           stats_error=error, location=stats and stats.get("path"),
                           status=200 if error is None else 503)

    def _checked(self) -> tuple[Any, dict[str, Any] | None, str | None]:
        """The doctor's report, then the counts, or why they could not be read (a
        damaged store the doctor reports on may not be countable)."""
        report = self.store.doctor()
        try:
            return report, self.store.stats(), None
        except StoreError as exc:
            if not _unavailable(exc):
                raise
            return report, None, str(exc)

    def no_page(self, request: Request, exc: Exception) -> Response:
        """An address no page answers (404), or a form's address opened as a page (405):
        a page that says so, with the navigation, rather than the server's bare text."""
        status = getattr(exc, "status_code", 404)
        path = request.url.path
        if status == 404:
            message = f"no page at {path}"
        elif request.method == "GET":
            message = f"{path} takes the form on a fact's page; it is no page to open"
        else:
            message = f"{path} does not take a {request.method} request"
        response = self.render("error.html.j2", page=None, status=status, message=message,
                               heading="Not found" if status == 404 else "Not a page")
        response.headers.update(getattr(exc, "headers", None) or {})
        return response

    def unavailable(self, request: Request, exc: Exception) -> Response:
        """Any page whose store cannot be used now (a server that does not answer, a
        damaged file, a lock held too long): the store's own error, with a 503."""
        return self.render("error.html.j2", page="memory", status=503,
                           heading="The store cannot be used now", message=str(exc))


_NO_ID = "a fact id is a whole number that fits in 64 bits"


def _fact_id(request: Request) -> int | None:
    """The fact id in the address, or ``None`` when it is no id a fact can have."""
    try:
        fact_id = int(request.path_params["fact_id"])
    except ValueError:
        return None
    return fact_id if -_MAX_ID - 1 <= fact_id <= _MAX_ID else None
