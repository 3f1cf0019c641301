"""The secret catalogue: credential-shaped strings that must never land in memory or a message,
and look-alikes that must be left alone.

Each secret is built here from pieces (so no real-looking key sits in the repository as one
string) and is fake. ``tests/test_secret_scanning.py`` writes every secret through every way
into the store; ``tests/test_secret_messages.py`` has clients echo them in errors; ``tests/test_secret_echoes.py``
has a model echo them out of shape (:data:`ECHOES`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

__all__ = ["ECHOES", "LOOK_ALIKES", "SECRETS", "leaked_pieces"]

_A = "a1B2c3D4e5F6g7H8i9J0"  # 20 mixed characters
_PEM_BODY = "\n".join(["MIIEowIBAAKCAQEA" + _A * 3] * 3)

#: ``(kind, secret, text around it)``: ``{}`` in the text is where the secret goes.
SECRETS: tuple[tuple[str, str, str], ...] = (
    ("API key", "sk-" + _A + "XyZ", "The OpenAI key is {} for the staging bot."),
    ("API key", "sk-proj-" + _A + _A, "Use {} in CI."),
    ("API key", "sk-ant-api03-" + _A + _A, "Anthropic key: {}"),
    ("API key", "sk_live_" + _A, "Stripe live key {} (rotate monthly)."),
    ("GitHub token", "ghp_" + _A + _A[:16], "The user pasted their token {} by mistake."),
    ("GitHub token", "github_pat_11ABCDEFG0" + _A + "_" + _A, "Fine-grained token: {}"),
    ("GitLab token", "glpat-" + _A, "GitLab: {}"),
    ("AWS access key", "AKIA" + "IOSFODNN7EXAMPLE", "AWS key id {} in us-east-1."),
    ("Google API key", "AIza" + _A + "abcdefghijklmno", "Maps key {}."),
    ("Slack token", "xoxb-" + "1234567890-" + _A, "Slack bot token {}"),
    ("Hugging Face token", "hf_" + _A + "abcdefghijklm", "HF token {}"),
    ("npm token", "npm_" + _A + "abcdefghijklmnop", "npm publish with {}"),
    ("PyPI token", "pypi-AgEIcHlwaS5vcmc" + _A + _A, "twine token {}"),
    ("JSON web token", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0." + _A,
     "Session cookie {} expires hourly."),
    ("bearer token", "4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c", "curl -H 'Authorization: Bearer {}'"),
    ("basic credentials", "dXNlcjpzM2NyZXRwYXNzMTIz", "The proxy wants Basic {} on every call."),
    ("password in a URL", "s3cretpass", "The database is postgresql://ada:{}@db.internal/prod."),
    ("password", "hunter2hunter2", "In .env: DB_PASSWORD={}"),
    ("password", "Tr0ub4dor&3", "password: {}"),
    ("password", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
     "aws_secret_access_key = {}"),
    ("private key", "-----BEGIN RSA PRIVATE KEY-----\n" + _PEM_BODY
     + "\n-----END RSA PRIVATE KEY-----", "The deploy key:\n{}\nkeep it safe."),
    ("private key", "-----BEGIN OPENSSH PRIVATE KEY-----\n" + _PEM_BODY,
     "Pasted, cut off:\n{}"),
)

#: Text that looks a little like a credential and must be stored as it is.
LOOK_ALIKES: tuple[str, ...] = (
    "The model was trained with sk-learn 1.4 and pandas.",
    "See the ask-me-anything thread from Tuesday.",
    "Commit 3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a3f fixed the deploy.",
    "Request id 123e4567-e89b-12d3-a456-426614174000 failed.",
    "GitHub tokens start with ghp_ and are 40 characters long.",
    "AWS key ids start with AKIA.",
    "He is the bearer of bad news about the release.",
    "Basic authentication is enough for the intranet wiki.",
    "Set password: <your password> in the config template.",
    "The config reads api_key = ${OPENAI_API_KEY} from the environment.",
    "-----BEGIN PUBLIC KEY----- blocks are fine to share.",
    "Write to ada@example.com or visit https://example.com/docs?page=2.",
    "The token budget is 2000 tokens per turn.",
    "Version 2.14.0-rc1 shipped on 2024-05-01.",
)


def _halves(secret: str) -> tuple[str, str]:
    middle = len(secret) // 2
    return secret[:middle], secret[middle:]


#: How a model may echo a secret out of shape: ``(name, form, held_only)``, ``form(secret)`` the
#: text it writes. ``held_only`` forms are found only for a secret the scrubber holds (the
#: API key a client sends): cut short, a credential has no recognisable shape left.
ECHOES: tuple[tuple[str, Callable[[str], str], bool], ...] = (
    ("as is", lambda s: s, False),
    ("its first 8 characters cut", lambda s: s[8:], True),
    ("split by a newline", lambda s: "\n".join(_halves(s)), False),
    ("wrapped and indented", lambda s: "\n    ".join(_halves(s)), False),
    ("JSON-escaped with a newline", lambda s: json.dumps("\n".join(_halves(s)))[1:-1], False),
    ("every character \\u-escaped", lambda s: "".join(f"\\u{ord(c):04x}" for c in s), False),
)

#: The shortest piece of a secret that counts as leaked when it shows in a text.
PIECE = 12


def _readings(text: str) -> list[str]:
    """``text`` as written, without white space, and with JSON escapes decoded then white
    space taken out: the ways a reader could put a secret back together."""
    decoded = re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), text)
    decoded = re.sub(r"\\[nrt]", "", decoded).replace('\\"', '"').replace("\\/", "/")
    return [text, re.sub(r"\s+", "", text), re.sub(r"\s+", "", decoded)]


def leaked_pieces(text: str, secret: str) -> list[str]:
    """The pieces of ``secret`` (:data:`PIECE` characters, or all of a shorter one, white
    space left out) that ``text`` shows in any of its readings."""
    flat = re.sub(r"\s+", "", secret)
    size = min(PIECE, len(flat))
    pieces = {flat[i:i + size] for i in range(len(flat) - size + 1)}
    return sorted(p for p in pieces if any(p in reading for reading in _readings(text)))
