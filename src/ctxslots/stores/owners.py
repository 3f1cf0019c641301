"""Whose memory a fact is: its owners, what each slot holds, and what a request sees.

A fact has up to three owners: a **user** (``user`` facts: who the user is), an
**agent** (``agent`` facts: what an agent learned) and a **scope** (the
workspace: ``project`` facts, shared by everyone working in it; agent facts may
belong to one too). Each slot declares which owners its facts carry
(:class:`SlotOwners`); a write that names an owner its slot does not have is
refused, so nothing is stored where no contributor looks.

Stored, an owner the fact does not have is the empty string. A request names
who is asking (:class:`Owners`: a user, an agent, a scope; ``None`` is the
store's default user and agent, and the global scope), and sees the facts each
of whose owners is the one asked or none: a user's own facts and the shared
ones, never another user's.
"""

from __future__ import annotations

from typing import TypedDict

import attrs

from ..errors import InvalidFactError

__all__ = [
    "ANY",
    "BUILTIN_SLOT_OWNERS",
    "DEFAULT_AGENT",
    "DEFAULT_USER",
    "OWNER_KINDS",
    "OwnerArgs",
    "Owners",
    "SlotOwners",
]

#: The user a store's facts belong to when no user is named (every fact of a
#: single-user store, and every user fact of a store written before owners existed).
DEFAULT_USER = "default"
#: The agent a store's agent facts belong to when no agent is named.
DEFAULT_AGENT = "default"
#: The kinds of owner, in the order they are named.
OWNER_KINDS = ("user", "agent", "scope")


class _Any(str):
    """The owner argument that selects every owner (listing, export, erasure by slot)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ANY"

    def __reduce__(self) -> str:
        # Pickled and copied as the one ANY: the store tests it by identity, and an
        # equal string would name the owner "*" (a pool job's arguments, a deep copy).
        return "ANY"


#: Pass as ``user``, ``agent`` or ``scope`` to a listing or an export to select every
#: owner of that kind (``store.facts(user=ANY)`` lists every user's facts).
ANY = _Any("*")


@attrs.frozen
class SlotOwners:
    """Which owners the facts of a slot carry.

    Attributes:
        user: Each fact belongs to a user.
        agent: Each fact belongs to an agent.
        scope: A fact may belong to a workspace (``None`` when written: global).
    """

    user: bool = False
    agent: bool = False
    scope: bool = True

    @classmethod
    def parse(cls, text: str) -> SlotOwners:
        """``"user"``, ``"scope"``, ``"agent"``, ``"agent+scope"``, ``"user+scope"``...

        :raises InvalidFactError: ``text`` is not a string, a part is not an owner kind,
            or none is given.
        """
        if not isinstance(text, str):
            raise InvalidFactError(f"a slot's owners are '+'-joined of {', '.join(OWNER_KINDS)}, "
                                   f"not {text!r}", field="owners", value=text)
        parts = {p.strip() for p in text.split("+")}
        unknown = sorted(parts - set(OWNER_KINDS))
        if unknown or not text.strip():
            raise InvalidFactError(
                f"a slot's owners are '+'-joined of {', '.join(OWNER_KINDS)}, not {text!r}",
                field="owners", value=text)
        return cls(user="user" in parts, agent="agent" in parts, scope="scope" in parts)

    def describe(self) -> str:
        """``"user"``, ``"agent+scope"``...: the owner kinds, in :data:`OWNER_KINDS` order."""
        kinds = [k for k in OWNER_KINDS if getattr(self, k)]
        return "+".join(kinds) or "nobody"


#: Whose facts the built-in slots hold: a user's, a workspace's, an agent's
#: (optionally within a workspace). Plugin slots declare theirs when registered;
#: a slot that declares nothing holds a workspace's facts.
BUILTIN_SLOT_OWNERS: dict[str, SlotOwners] = {
    "user": SlotOwners(user=True, scope=False),
    "project": SlotOwners(scope=True),
    "agent": SlotOwners(agent=True, scope=True),
}


@attrs.frozen
class Owners:
    """Who a request is for.

    Attributes:
        user: The user (``None``: the store's default user).
        agent: The agent (``None``: the store's default agent).
        scope: The workspace (``None``: the global scope only).
    """

    user: str | None = None
    agent: str | None = None
    scope: str | None = None


class OwnerArgs(TypedDict):
    """The owner keywords of a read or a write, to pass as ``**owners``."""

    user: str | None
    agent: str | None
    scope: str | None
