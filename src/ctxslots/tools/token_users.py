"""One MCP server for a team: each bearer token names the user whose memory it reaches.

The map comes from a file only its owner can read, one ``USER TOKEN`` pair per
line (UTF-8, a byte-order mark skipped; blank lines and comments skipped: a ``#`` at
the start of a line or after a space starts one, a ``#`` inside a token is part of it), or
from an environment variable holding ``USER=TOKEN`` pairs separated by spaces,
commas or line breaks. A user name or token holding a control or invisible
character (a zero-width space, a byte-order mark) is refused. A
request is matched against every token in constant time; the user it maps to
is put on the request for the tool call to read, so a client reaches its own
user facts and the shared workspace, never another user's.
"""

from __future__ import annotations

import codecs
import hmac
import json
import os
import re
import stat
import unicodedata
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from pathlib import Path
from typing import Any

import attrs

from .._json_fields import DECODER, DuplicateFieldError
from ..errors import InvalidArgumentError
from ._http_guard import BEARER, bearer_token, refuse

__all__ = ["SCOPE_KEY", "TokenUserGuard", "TokenUsers", "check_token"]

#: Where :class:`TokenUserGuard` puts the user of a request, in its ASGI scope.
SCOPE_KEY = "ctxslots.user"

#: The shortest token accepted: a guessable token would hand out a user's memory.
MIN_TOKEN_CHARS = 16

_Scope = MutableMapping[str, Any]
_Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
_Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
_ASGIApp = Callable[[_Scope, _Receive, _Send], Awaitable[None]]

#: A comment of a token file: from a ``#`` that starts the line or follows a space (as in
#: a shell) to the line's end; a ``#`` inside a token is part of the token.
_COMMENT = re.compile(r"(?:^|\s)#.*")


def _hidden(text: str, *, inner_spaces: bool = False) -> str | None:
    """The first character of ``text`` a reader cannot see or type for sure, as ``U+XXXX``:
    a control or format character (a byte-order mark, a zero-width space), a separator
    (a space, unless ``inner_spaces`` allows plain ones), or a private or unassigned one;
    ``None`` when there is none."""
    for char in text:
        kind = unicodedata.category(char)
        if kind[0] in "CZ" and not (inner_spaces and char == " "):
            return f"U+{ord(char):04X}"
    return None


def check_token(token: str) -> str:
    """``token`` if it is a bearer token hard to guess (at least :data:`MIN_TOKEN_CHARS`
    characters, no space, control or invisible character), else
    :class:`InvalidArgumentError`."""
    if not isinstance(token, str) or len(token) < MIN_TOKEN_CHARS or _hidden(token):
        raise InvalidArgumentError(
            f"the token must be at least {MIN_TOKEN_CHARS} characters without spaces, "
            "control or invisible characters (a short one is guessed; "
            "python -c 'import secrets; print(secrets.token_urlsafe())' makes one)",
            field="token", value=None)
    return token


def _pair_problem(user: str, token: str) -> str | None:
    """What is wrong with giving ``token`` to ``user`` (naming the user, never the token),
    or ``None``."""
    if len(token) < MIN_TOKEN_CHARS or _hidden(token):
        return (f"the token of user {user!r} must be at least {MIN_TOKEN_CHARS} characters "
                "without spaces, control or invisible characters")
    hidden = _hidden(user, inner_spaces=True)
    if not user or user != user.strip() or hidden:
        return ("a user name must be non-empty, without spaces around it or control or "
                f"invisible characters{f' (it holds {hidden})' if hidden else ''}, "
                f"not {user!r}")
    return None


def _check_pairs(pairs: Mapping[str, str]) -> dict[str, str]:
    tokens: dict[str, str] = {}
    for token, user in pairs.items():
        problem = _pair_problem(user, token)
        if problem is not None:
            raise InvalidArgumentError(problem, field="tokens", value=user)
        tokens[token] = user
    if not tokens:
        raise InvalidArgumentError("the token map names no user", field="tokens", value=None)
    return tokens


@attrs.frozen
class TokenUsers:
    """Which user each bearer token stands for.

    Attributes:
        by_token: ``{token: user}``; a token is at least :data:`MIN_TOKEN_CHARS`
            characters, and two users never share one.
    """

    by_token: Mapping[str, str] = attrs.field(converter=_check_pairs, repr=False)

    @property
    def users(self) -> list[str]:
        """The users, sorted (what the server may print; never the tokens)."""
        return sorted(set(self.by_token.values()))

    def user_of(self, token: bytes) -> str | None:
        """The user ``token`` stands for, or ``None``; every token is compared, each in
        constant time, so the answer's timing tells nothing of the others."""
        found = None
        for known, user in self.by_token.items():
            if hmac.compare_digest(token, known.encode("utf-8")):
                found = user
        return found

    @classmethod
    def parse_lines(cls, text: str, where: str) -> TokenUsers:
        """``USER TOKEN`` per line (blank lines and comments skipped: a ``#`` that starts
        the line or follows a space starts one; a ``#`` inside a token is part of it).

        :raises InvalidArgumentError: A line is not two words, a token is taken twice
            or too short, a user or token holds a control or invisible character, or
            there is no pair; the message names the line, never a token.
        """
        pairs: dict[str, str] = {}
        for number, line in enumerate(text.splitlines(), start=1):
            words = _COMMENT.sub("", line, count=1).split()
            if not words:
                continue
            if len(words) != 2:
                raise InvalidArgumentError(f"{where} line {number}: write USER TOKEN",
                                           field="tokens", value=number)
            user, token = words
            problem = _pair_problem(user, token)
            if problem is not None:
                raise InvalidArgumentError(f"{where} line {number}: {problem}",
                                           field="tokens", value=number)
            if token in pairs:
                raise InvalidArgumentError(f"{where} line {number}: this token is already "
                                           f"given to {pairs[token]!r}", field="tokens",
                                           value=number)
            pairs[token] = user
        return cls(pairs)

    @classmethod
    def parse_variable(cls, text: str, name: str) -> TokenUsers:
        """``USER=TOKEN`` pairs separated by spaces, commas or line breaks (a JSON object
        ``{"USER": "TOKEN"}`` too).

        :raises InvalidArgumentError: A pair is malformed, a token is taken twice or
            too short, a user or token holds a control or invisible character, or there
            is none.
        """
        if text.lstrip().startswith("{"):
            try:
                data = DECODER.decode(text)
            except DuplicateFieldError as exc:
                raise InvalidArgumentError(f"${name} names user {exc.args[0]!r} twice",
                                           field="tokens", value=name) from None
            except json.JSONDecodeError:
                raise InvalidArgumentError(f"${name} is not a valid JSON object",
                                           field="tokens", value=name) from None
            if not isinstance(data, dict) or not all(
                    isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
                raise InvalidArgumentError(f"${name} must map user names to tokens",
                                           field="tokens", value=name)
            pairs = list(data.items())
        else:
            pairs = []
            for n, item in enumerate(re.split(r"[\s,]+", text.strip()), start=1):
                user, sep, token = item.partition("=")
                if not sep or not user or not token:
                    raise InvalidArgumentError(f"${name} pair {n}: write USER=TOKEN",
                                               field="tokens", value=n)
                pairs.append((user, token))
        by_token: dict[str, str] = {}
        for user, token in pairs:
            if token in by_token:
                raise InvalidArgumentError(f"${name}: users {by_token[token]!r} and {user!r} "
                                           "share a token", field="tokens", value=name)
            by_token[token] = user
        return cls(by_token)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> TokenUsers:
        """Read the map from a file that only its owner may read or write.

        :raises InvalidArgumentError: The file is missing, not a regular file, open to
            its group or others, owned by another user, or malformed.
        """
        where = Path(path)
        try:
            # Not blocking: a named pipe would wait for a writer before it is refused below.
            fd = os.open(where, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
                         | getattr(os, "O_NONBLOCK", 0))
        except OSError as exc:
            raise InvalidArgumentError(f"cannot read the token file {where}: "
                                       f"{exc.strerror or exc}", field="tokens",
                                       value=str(where)) from None
        with os.fdopen(fd, "rb") as fp:
            info = os.fstat(fp.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise InvalidArgumentError(f"the token file {where} is not a regular file",
                                           field="tokens", value=str(where))
            if info.st_mode & 0o077:
                raise InvalidArgumentError(
                    f"the token file {where} may be read by others (mode "
                    f"{stat.S_IMODE(info.st_mode):04o}): chmod 600 it", field="tokens",
                    value=str(where))
            if hasattr(os, "geteuid") and info.st_uid != os.geteuid():
                raise InvalidArgumentError(f"the token file {where} belongs to another user",
                                           field="tokens", value=str(where))
            # A byte-order mark (as Notepad saves) is not part of the first user.
            data = fp.read().removeprefix(codecs.BOM_UTF8)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = data.count(b"\n", 0, exc.start) + 1
            raise InvalidArgumentError(f"{where} line {line}: not UTF-8 text ({exc.reason}); "
                                       "save the token file in UTF-8", field="tokens",
                                       value=str(where)) from None
        return cls.parse_lines(text, str(where))


@attrs.frozen
class TokenUserGuard:
    """ASGI middleware: a request's bearer token must be one of ``users``' tokens
    (else 401, nothing run); the user it stands for goes on the request.

    Attributes:
        app: The application it guards.
        users: The tokens and their users.
    """

    app: _ASGIApp
    users: TokenUsers = attrs.field(repr=False)

    async def __call__(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        """Pass a request with a known token on, naming its user; refuse the others."""
        if scope["type"] == "http":
            scope.pop(SCOPE_KEY, None)  # never taken from the outside
            token = bearer_token(scope)
            user = None if token is None else self.users.user_of(token)
            if user is None:
                await refuse(send, 401, "a bearer token of a known user is required", BEARER)
                return
            scope[SCOPE_KEY] = user
        await self.app(scope, receive, send)
