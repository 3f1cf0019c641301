"""Narrowing a read by tags, source and the time a memory was said."""

from __future__ import annotations

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
    """

    tags: Iterable[str] | str = ()
    source: str | None = None
    said_after: Any = None
    said_before: Any = None

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
        return attrs.evolve(flt, tags=tags, source=limits.source(self.source),
                            observed_after=after, observed_before=before)
