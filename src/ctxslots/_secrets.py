"""Credentials in text: one catalogue of their shapes, one rule for taking them out.

Two users: every error, log line and ``repr`` that may carry a credential
passes through :func:`scrub` (an echoed ``Authorization`` header, a key the
client holds, a password in a URL); every value on its way into memory passes
through :func:`find_secrets` (the store's secret policy: a memory must not
become a secret store). Both read :data:`PATTERNS`, so what counts as a
credential is decided once.

:func:`scrub` also finds a credential echoed out of shape, as a model may echo
one: a key it holds only in part (its start cut off), split by a line break, or
written with JSON escapes (``\\n``, ``\\u0073``). It reads the text a second
time with the escapes decoded and the line breaks left out, looks there
for every :data:`MIN_FRAGMENT`-character piece of each key it holds and for the
credential shapes, and takes out what it finds from the text as written.

The shapes are those of real credentials (a provider's key prefix and length,
a PEM private key block, a JSON web token, a token after ``Bearer``, a password
in a URL or after ``password=``), so ordinary text such as a commit hash, a
UUID, ``sk-learn`` or "Basic authentication" is left alone.
"""

from __future__ import annotations

import base64
import re
import urllib.parse
from collections.abc import Iterable, Sequence

import attrs

__all__ = [
    "MIN_FRAGMENT",
    "PATTERNS",
    "SecretFinding",
    "find_secrets",
    "redact",
    "safe_url",
    "scrub",
    "split_credentials",
]

_B = r"(?<![A-Za-z0-9_])"  # no word character before
_E = r"(?![A-Za-z0-9_])"   # nor after
# A value after "password=" that is a placeholder, not a secret: ${VAR}, <yours>, {{x}}, ***,
# [redacted ...] (so redacting twice changes nothing).
_PLACEHOLDER = r"(?![$<{%*[])"
# How far an API key's checks for a digit and a letter look: a bound, so that a run of
# many places the pattern may start at ("sk-sk-sk-...") is read in linear time; each
# unbounded look read the rest of the run again, and a 120 KB line took 40 s. A key has
# both near its start.
_LOOK_AHEAD = 256
# A URL scheme: a run of letters, digits, "+", "." and "-" holding a letter that starts a
# word (a scheme may follow other text of the run: "1.http://"). Read once from the run's
# start, committed once a letter is found (atomic groups): tried from each word start, a
# run of "a.b.c..." or "sk-sk-..." not followed by "://" was read again from each.
_SCHEME = (r"(?<![A-Za-z0-9+.-])(?>(?<!\w)[A-Za-z]|[A-Za-z0-9+.-]*?[+.-][A-Za-z])"
           r"(?>[A-Za-z0-9+.-]*)")

#: ``(kind, pattern)``; the pattern's group ``s`` (when present) is the secret
#: itself, else the whole match is.
PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(pattern)) for kind, pattern in (
        ("private key", (r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
                         r"(?s:.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|.*)")),
        ("API key", _B + r"sk-(?:ant-|proj-|svcacct-|admin-)?"
                    rf"(?=[A-Za-z0-9_-]{{0,{_LOOK_AHEAD}}}\d)"
                    rf"(?=[A-Za-z0-9_-]{{0,{_LOOK_AHEAD}}}[A-Za-z])[A-Za-z0-9_-]{{20,}}" + _E),
        ("API key", _B + r"(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}" + _E),
        ("GitHub token", _B + r"(?:gh[pousr]_[A-Za-z0-9]{30,255}|github_pat_[A-Za-z0-9_]{22,255})"
                         + _E),
        ("GitLab token", _B + r"glpat-[A-Za-z0-9_-]{20,}" + _E),
        ("AWS access key", _B + r"(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}" + _E),
        ("Google API key", _B + r"AIza[0-9A-Za-z_-]{35}" + _E),
        ("Slack token", _B + r"xox[abposr]-[A-Za-z0-9-]{10,}" + _E),
        ("Hugging Face token", _B + r"hf_[A-Za-z0-9]{30,}" + _E),
        ("npm token", _B + r"npm_[A-Za-z0-9]{36}" + _E),
        ("PyPI token", _B + r"pypi-[A-Za-z0-9_-]{50,}"),
        ("JSON web token", _B + r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
        ("bearer token", (r"(?i:\b(?:bearer|token)\s+)(?P<s>(?=[A-Za-z0-9._~+/=-]*\d)"
                          r"[A-Za-z0-9._~+/-]{16,}=*)")),
        ("basic credentials", r"(?i:\bbasic\s+)(?P<s>(?=[A-Za-z0-9+/]*\d)[A-Za-z0-9+/]{12,}=*)"),
        ("password in a URL", _SCHEME + r"://[^/\s:@]*:(?P<s>[^/\s@]+)@"),
        ("password", r"(?i:(?<![A-Za-z])(?:password|passwd|pwd|passphrase|secret|client[_-]?secret|"
                     r"api[_-]?key|access[_-]?key|secret[_-]?access[_-]?key|"
                     r"(?:access|auth|refresh)[_-]?token)\b[\"']?\s*[:=]\s*[\"']?)"
                     + _PLACEHOLDER + r"(?P<s>[^\s\"',;]{8,})"),
    ))


#: Every pattern needs one of these in the text (as is, or lower-cased): a cheap test
#: that spares almost every value the patterns themselves (about 2 us against 40 us).
_ANCHORS = ("-----BEGIN", "sk-", "sk_", "rk_", "pk_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_",
            "github_pat_", "glpat-", "AKIA", "ASIA", "ABIA", "ACCA", "AIza", "xox", "hf_",
            "npm_", "pypi-", "eyJ", "://")
_LOWER_ANCHORS = ("bearer", "token", "basic", "pass", "pwd", "secret", "key")


def _might_hold_secret(text: str) -> bool:
    for anchor in _ANCHORS:
        if anchor in text:
            return True
    lower = text.lower()
    for anchor in _LOWER_ANCHORS:
        if anchor in lower:
            return True
    return False


@attrs.frozen
class SecretFinding:
    """One credential-shaped string in a text.

    Attributes:
        kind: What it looks like ("GitHub token", "private key"...).
        start: Where the secret starts (an index into the text).
        end: Where it ends.
    """

    kind: str
    start: int
    end: int


def find_secrets(text: str) -> list[SecretFinding]:
    """Every credential-shaped string in ``text``, in order, without overlaps."""
    if not _might_hold_secret(text):
        return []
    found: list[SecretFinding] = []
    for kind, pattern in PATTERNS:
        for match in pattern.finditer(text):
            group = "s" if "s" in pattern.groupindex and match.group("s") else 0
            found.append(SecretFinding(kind, match.start(group), match.end(group)))
    found.sort(key=lambda f: (f.start, -f.end))
    kept: list[SecretFinding] = []
    for finding in found:
        if kept and finding.start < kept[-1].end:
            continue  # inside one already found (a key inside a PEM block, a URL's password)
        kept.append(finding)
    return kept


def redact(text: str, *, label: bool = True) -> tuple[str, tuple[str, ...]]:
    """``text`` with each credential-shaped string replaced, and the kinds replaced.

    :param label: Say what was there (``[redacted GitHub token]``); else ``[redacted]``.
    """
    findings = find_secrets(text)
    if not findings:
        return text, ()
    out: list[str] = []
    at = 0
    for finding in findings:
        out.append(text[at:finding.start])
        out.append(f"[redacted {finding.kind}]" if label else "[redacted]")
        at = finding.end
    out.append(text[at:])
    return "".join(out), tuple(f.kind for f in findings)


def _variants(secret: str) -> set[str]:
    """A held secret as it may be echoed: itself, percent-encoded, and within Basic auth."""
    out = {secret, urllib.parse.quote(secret, safe="")}
    if ":" in secret:
        out.add(base64.b64encode(secret.encode("utf-8")).decode("ascii"))
    return {v for v in out if len(v) >= 4}


#: The shortest piece of a held secret that counts as the secret when found alone: 12
#: characters of a random key are found by chance in no text.
MIN_FRAGMENT = 12

# A line break as written or JSON-escaped, with the spaces around it (a wrapped line).
_BREAK = re.compile(r"[ \t]*(?:\r\n|[\r\n]|\\r\\n|\\[rn])[ \t]*")
# A JSON escape inside a text: \uXXXX, or a backslash and one of "\/bft.
_JSON_ESCAPE = re.compile(r'\\u([0-9a-fA-F]{4})|\\(["\\/bft])')
_ESCAPED = {"b": "\b", "f": "\f", "t": "\t"}


def _flattened(text: str) -> tuple[str, Sequence[int], Sequence[int]]:
    """``text`` with line breaks (and the spaces around them) left out and JSON escapes
    decoded, and where each kept character starts and ends in ``text``."""
    chars: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    at = 0
    while at < len(text):
        if text[at] in " \t\r\n\\":
            gap = _BREAK.match(text, at)
            if gap is not None and gap.end() > at:
                at = gap.end()
                continue
        found = _JSON_ESCAPE.match(text, at) if text[at] == "\\" else None
        if found is None:
            char, end = text[at], at + 1
        elif found.group(1) is not None:
            char, end = chr(int(found.group(1), 16)), found.end()
        else:
            char, end = _ESCAPED.get(found.group(2), found.group(2)), found.end()
        if char not in "\r\n":
            chars.append(char)
            starts.append(at)
            ends.append(end)
        at = end
    return "".join(chars), starts, ends


def _pieces(secret: str) -> set[str]:
    """What of ``secret`` counts as a leak: every :data:`MIN_FRAGMENT`-character piece
    of it (the whole of a shorter one)."""
    flat = _flattened(secret)[0]
    if len(flat) <= MIN_FRAGMENT:
        return {flat} if len(flat) >= 4 else set()
    return {flat[i:i + MIN_FRAGMENT] for i in range(len(flat) - MIN_FRAGMENT + 1)}


def _hidden_spans(text: str, secrets: Iterable[str]) -> list[tuple[int, int]]:
    """Where ``text`` holds a held secret or a credential shape out of shape: spans of
    ``text`` as written."""
    plain = not any(c in text for c in "\\\r\n")
    if plain and not secrets:
        return []  # nothing to put back together, and the shapes are already found
    starts: Sequence[int]
    ends: Sequence[int]
    if plain:
        flat, starts, ends = text, range(len(text)), range(1, len(text) + 1)
    else:
        flat, starts, ends = _flattened(text)
    found: list[tuple[int, int]] = []
    for secret in secrets:
        for piece in _pieces(secret):
            at = flat.find(piece)
            while at >= 0:
                found.append((at, at + len(piece)))
                at = flat.find(piece, at + 1)
    if not plain:
        found += [(f.start, f.end) for f in find_secrets(flat)]
    return [(starts[a], ends[b - 1]) for a, b in found]


def scrub(text: str, secrets: Iterable[str | None] = ()) -> str:
    """The one rule for errors, log lines and reprs: ``text`` without the given
    secrets (also percent-encoded, inside Basic credentials, in part, split by a line
    break or JSON-escaped) and without any credential-shaped string (also split or
    escaped), each replaced by ``[redacted]``."""
    held = [s for s in secrets if s]
    for secret in sorted({v for s in held for v in _variants(s)}, key=len, reverse=True):
        text = text.replace(secret, "[redacted]")
    spans = sorted([(f.start, f.end) for f in find_secrets(text)] + _hidden_spans(text, held))
    if not spans:
        return text
    out: list[str] = []
    at = 0
    for start, end in spans:
        if end <= at:
            continue  # inside a span already taken out
        out += [text[at:max(start, at)], "[redacted]" if start >= at else ""]
        at = end
    return "".join(out) + text[at:]


def split_credentials(url: str) -> tuple[str, tuple[str, str] | None]:
    """``url`` without the ``user:password@`` part, and that part (decoded) if it had one.

    A URL that cannot be parsed (a broken IPv6 address) comes back as it is, without
    credentials: nothing is sent to it, and :func:`safe_url` still hides its password.
    """
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return url, None
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, host = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    clean = urllib.parse.urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
    return clean, (urllib.parse.unquote(user), urllib.parse.unquote(password))


def safe_url(url: str) -> str:
    """``url`` fit to print: credentials in it become ``[redacted]@``."""
    clean, credentials = split_credentials(url)
    if credentials is None:
        return scrub(url)
    parts = urllib.parse.urlsplit(clean)
    return scrub(urllib.parse.urlunsplit((parts.scheme, f"[redacted]@{parts.netloc}", parts.path,
                                          parts.query, parts.fragment)))
