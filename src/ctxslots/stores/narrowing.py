"""Narrowing a read by tags, source and the time a memory was said."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import attrs

from ..errors import InvalidFactError
from .backend import FactFilter
from .writes.limits import Limits

__all__ = ["Narrowing"]


@attrs.frozen
class Narrowing:
    """What a search or a listing keeps besides slots and owners; every engine applies
    it before any cut.

    Attributes:
        tags: Only facts that carry every one of these tags.
        source: Only facts with this source.
        said_after: Only memories said (observed) at or after this moment (a
            datetime or Unix seconds).
        said_before: Only memories said before this moment.
        until: Only memories said at or before this moment (Unix seconds): the
            ``now`` a caller reads the store at, so a replay never sees what was
            said later. ``None``: no cut (reading at the clock).
    """

    tags: Iterable[str] | str = ()
    source: str | None = None
    said_after: Any = None
    said_before: Any = None
    until: float | None = None

    def apply(self, flt: FactFilter, limits: Limits) -> FactFilter:
        """``flt`` narrowed, each part checked.

        :raises InvalidFactError: A tag, the source or a moment is malformed, or
            ``said_after`` is not before ``said_before``.
        """
        tags = tuple(t for t in limits.tags(self.tags).split("\n") if t)
        after = None if self.said_after is None else limits.moment(self.said_after, "said_after")
        before = None if self.said_before is None else limits.moment(self.said_before,
                                                                     "said_before")
        if after is not None and before is not None and after >= before:
            raise InvalidFactError("said_after must be before said_before", field="said_after",
                                   value=self.said_after)
        if self.until is not None:  # said at ``until`` counts: the cut is just after it
            cut = math.nextafter(self.until, math.inf)
            before = cut if before is None else min(before, cut)
        return attrs.evolve(flt, tags=tags, source=limits.source(self.source),
                            observed_after=after, observed_before=before)
