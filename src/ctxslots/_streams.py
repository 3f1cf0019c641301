"""What a text stream's encoding is: the command line's output and the JSONL exports and
imports read it to stay UTF-8 whatever the locale."""

from __future__ import annotations

import codecs

__all__ = ["speaks_utf8"]


def speaks_utf8(stream: object) -> bool:
    """Whether ``stream`` encodes (or decodes) its text as UTF-8; one that names no
    encoding (``io.StringIO``, a stream of str alone) is taken as UTF-8, and one that names
    an encoding Python does not know is not."""
    encoding = getattr(stream, "encoding", None)
    if not isinstance(encoding, str):
        return True
    try:
        return codecs.lookup(encoding).name == "utf-8"
    except LookupError:
        return False
