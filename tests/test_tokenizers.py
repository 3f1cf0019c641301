"""Any tokenizer: the counter protocol, a real HuggingFace tokenizer.json built with the
``tokenizers`` package, and the CLI options that choose and budget for it."""

from __future__ import annotations

import json
import multiprocessing
import pickle
import re
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import jinja2
import pytest
from click.testing import CliRunner

from _assembler_helpers import make_store
from ctxslots import (
    AssemblyRequest,
    EncodingError,
    HuggingFaceCounter,
    InvalidRequestError,
    Item,
    ProjectMemoryContributor,
    PromptAssembler,
    Section,
    StaticContributor,
    TokenCounter,
    TokenCounterProtocol,
    UserMemoryContributor,
    count_tokens,
    hookimpl,
)
from ctxslots.cli import cli
from ctxslots.tokens import counter_from_spec

tokenizers = pytest.importorskip("tokenizers")

CORPUS = [
    "The shop deploys on Fridays after the freeze window closes.",
    "Deploy rules: run the checklist, warm the cache, then tag the release.",
    "The user edits code in Neovim and prefers short answers.",
] * 20

FACTS = [("project", "shop", (f"Deploy rule {i}: the shop deploy waits for the freeze window "
          f"and the checklist step {i} before tagging.")) for i in range(12)]
FACTS += [("user", None, "The user deploys shop releases from a Linux laptop.")]


@pytest.fixture(name="tokenizer_file", scope="module")
def fixture_tokenizer_file(tmp_path_factory) -> Path:
    """A real byte-level BPE tokenizer.json, trained here on a tiny corpus (so it splits words
    into more pieces than o200k_base does), adding a BOS token around every sequence."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(CORPUS, trainer=trainer)
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", tokenizer.token_to_id("<s>"))])
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    tokenizer.save(str(path))
    return path


SAMPLES = ["", "hello world", "The shop deploys on Fridays.", "Ünïcödé ✓ 日本語 🙂",
           "<s> looks like a special token", "x" * 500, "line\n\n  indented\ttab"]


def test_counts_match_the_tokenizer_itself(tokenizer_file):
    """The counter agrees with tokenizers' own encoding (without the BOS it adds) on every sample."""
    reference = tokenizers.Tokenizer.from_file(str(tokenizer_file))
    counter = HuggingFaceCounter(tokenizer_file)
    for text in SAMPLES:
        expected = len(reference.encode(text, add_special_tokens=False).ids)
        assert expected == counter.count(text) == counter.count_exact(text)
    assert len(reference.encode("hello world").ids) == counter.count("hello world") + 1
    assert isinstance(counter, TokenCounterProtocol)
    assert "hf:tok0/tokenizer.json" == counter.name


def _count(counter: HuggingFaceCounter, text: str) -> int:
    return counter.count(text)


def test_a_counter_pickles_as_its_settings_for_a_worker_process(tokenizer_file):
    """A counter failed to pickle (``Can't pickle <functools._lru_cache_wrapper ...>``), and
    two counters of one file compared unequal (their tokenizer objects differ)."""
    counter = HuggingFaceCounter(tokenizer_file, name="mine", cache_size=8)
    expected = counter.count("The shop deploy waits for the freeze window.")
    again = pickle.loads(pickle.dumps(counter))
    assert again == counter == HuggingFaceCounter(tokenizer_file, name="mine", cache_size=8)
    assert ("mine", 8) == (again.name, again.cache_size)
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(1, mp_context=context) as pool:
        counted = pool.submit(_count, counter, "The shop deploy waits for the freeze window.")
        assert expected == counted.result(120)


def test_o200k_fitted_prompt_is_over_budget_for_another_tokenizer(tokenizer_file, tmp_path):
    """Fitted with o200k the prompt overflows the budget as the other tokenizer counts it; fitted
    with that tokenizer's counter it fits, and the prompt names the counter."""
    hf = HuggingFaceCounter(tokenizer_file)
    store = make_store(tmp_path / "t.db", FACTS)
    contributors = [UserMemoryContributor(store), ProjectMemoryContributor(store, limit=12)]
    request = AssemblyRequest("deploy shop freeze checklist", scope="shop", budget=150)
    default = PromptAssembler(store, contributors=contributors).assemble(request)
    fitted = PromptAssembler(store, contributors=contributors, counter=hf).assemble(request)
    store.close()
    assert count_tokens(default.text) <= 150 < hf.count(default.text)
    assert hf.count(fitted.text) == fitted.total_tokens <= 150
    assert len(fitted.kept) < len(default.kept)
    assert "hf:tok0/tokenizer.json" == fitted.encoding == json.loads(fitted.dump("json"))["encoding"]


def test_truncation_and_padding_the_file_sets_do_not_change_counts(tokenizer_file, tmp_path):
    """A tokenizer.json may set truncation (to a model's input length) or padding: the counter
    counts every token of the text all the same, so a prompt fitted with a truncating file
    fits the budget as the tokenizer counts the whole text, and padding adds no token."""
    reference = tokenizers.Tokenizer.from_file(str(tokenizer_file))
    truncating = tokenizers.Tokenizer.from_file(str(tokenizer_file))
    truncating.enable_truncation(max_length=16)
    (tmp_path / "trunc").mkdir()
    truncating.save(str(tmp_path / "trunc" / "tokenizer.json"))
    padding = tokenizers.Tokenizer.from_file(str(tokenizer_file))
    padding.enable_padding(length=64, pad_id=0, pad_token="<s>")
    (tmp_path / "pad").mkdir()
    padding.save(str(tmp_path / "pad" / "tokenizer.json"))
    text = " ".join(CORPUS[:6])
    expected = len(reference.encode(text, add_special_tokens=False).ids)
    assert 16 < expected
    for folder in ("trunc", "pad"):
        counter = HuggingFaceCounter(tmp_path / folder / "tokenizer.json")
        assert expected == counter.count(text) == counter.count_exact(text)
        short = len(reference.encode("hello world", add_special_tokens=False).ids)
        assert short == counter.count("hello world") < 64

    store = make_store(tmp_path / "t.db", FACTS)
    request = AssemblyRequest("deploy shop freeze checklist", scope="shop", budget=150)
    prompt = PromptAssembler(store, counter=HuggingFaceCounter(
        tmp_path / "trunc" / "tokenizer.json")).assemble(request)
    store.close()
    whole = len(reference.encode(prompt.text, add_special_tokens=False).ids)
    assert 16 < whole == prompt.total_tokens <= 150


class RawLines:
    """A plugin contributor whose own item template shows each value as it is (no
    ``bullet`` filter), with a value holding a lone surrogate."""

    name, priority, sticky = "raw", 50, False

    @hookimpl
    def prepare_jinja2_environment(self, env):
        env.loader = jinja2.ChoiceLoader(
            [env.loader, jinja2.DictLoader({"raw_item.md.j2": "- {{ item.text }}\n"})])

    def contribute(self, request):
        return Section(title="Raw", items=(Item("half \ud800 a pair"),),
                       item_template="raw_item.md.j2")


def test_a_lone_surrogate_counts_as_a_replacement_character(tokenizer_file):
    """The tokenizers package refuses a string holding a lone surrogate; the counter counts it
    as U+FFFD, as tiktoken does, so a plugin template that shows such a value unfiltered does
    not make assemble fail with "TextInputSequence must be str"."""
    import asyncio

    reference = tokenizers.Tokenizer.from_file(str(tokenizer_file))
    counter = HuggingFaceCounter(tokenizer_file)
    expected = len(reference.encode("a \ufffd b", add_special_tokens=False).ids)
    assert expected == counter.count("a \ud800 b") == counter.count_exact("a \ud800 b")

    raw = RawLines()
    rules = StaticContributor("rules", "Rules", ["Answer briefly."], priority=40)
    assembler = PromptAssembler(None, contributors=[raw, rules], plugins=[raw], counter=counter)
    for prompt in (assembler.assemble(AssemblyRequest("hi")),
                   asyncio.run(assembler.aassemble(AssemblyRequest("hi")))):
        assert "## Raw\n- half \ud800 a pair\n\n## Rules\n- Answer briefly.\n" == prompt.text
        assert ["kept", "kept"] == [s.status for s in prompt.sections]
        replaced = prompt.text.replace("\ud800", "\ufffd")
        assert len(reference.encode(replaced, add_special_tokens=False).ids) == prompt.total_tokens


class Words:
    """A counter of whitespace-separated words: anything with count() will do."""

    def count(self, text: str) -> int:
        return len(text.split())


class WordsAndTemplate:
    """Words plus the 3 tokens a chat template adds to any text, the empty one too."""

    def count(self, text: str) -> int:
        return len(text.split()) + 3


def test_a_counter_that_counts_an_empty_prompt_over_the_budget_is_a_clear_error(tmp_path):
    """The empty prompt counts 3 against 2 available: InvalidRequestError naming the budget
    (not a StopIteration); with room for the 3, the prompt fits by the counter's count."""
    store = make_store(tmp_path / "w.db", FACTS)
    assembler = PromptAssembler(store, counter=WordsAndTemplate())
    with pytest.raises(InvalidRequestError, match="counts 3 tokens for an empty prompt, "
                                                  "more than the 2"):
        assembler.assemble(AssemblyRequest("deploy shop freeze", scope="shop", budget=2))
    prompt = assembler.assemble(AssemblyRequest("deploy shop freeze", scope="shop", budget=40))
    store.close()
    assert len(prompt.text.split()) + 3 == prompt.total_tokens <= 40


def test_any_object_with_count_is_a_counter(tmp_path):
    """A plain object with count(text) fits the prompt by its own counts and names itself."""
    store = make_store(tmp_path / "w.db", FACTS)
    prompt = PromptAssembler(store, contributors=[ProjectMemoryContributor(store, limit=12)],
                             counter=Words()).assemble(
        AssemblyRequest("deploy shop freeze", scope="shop", budget=60))
    store.close()
    assert len(prompt.text.split()) == prompt.total_tokens <= 60
    assert "Words" == prompt.encoding


def test_a_counter_without_count_is_refused(tmp_path):
    """An object without count() is a clear InvalidRequestError at construction."""
    with pytest.raises(InvalidRequestError, match="count"):
        PromptAssembler(None, contributors=[], counter=object())


@pytest.mark.parametrize("text", ["o200k_base", b"o200k_base"])
def test_text_given_as_the_counter_is_refused(tmp_path, text):
    """An encoding's name given as the counter had a count() (str.count, a substring count)
    and counted every piece as 0 tokens: a prompt of any size fitted a budget of 5. It is
    refused, naming counter_from_spec for a name."""
    store = make_store(tmp_path / "w.db", FACTS)
    try:
        with pytest.raises(InvalidRequestError, match="not the text") as raised:
            PromptAssembler(store, counter=text)
    finally:
        store.close()
    assert "counter" == raised.value.field
    assert isinstance(text, bytes) or "counter_from_spec('o200k_base')" in str(raised.value)


def test_a_cache_size_past_what_a_cache_takes_is_refused_by_name(tokenizer_file):
    """cache_size=10**30 raised a bare OverflowError from functools; it is an
    InvalidRequestError naming the range, on both counters."""
    with pytest.raises(InvalidRequestError, match="from 0 to 2,147,483,647"):
        TokenCounter(cache_size=10**30)
    with pytest.raises(InvalidRequestError, match="from 0 to 2,147,483,647"):
        HuggingFaceCounter(tokenizer_file, cache_size=10**30)


def test_spec_names_an_encoding_or_a_file(tokenizer_file, tmp_path):
    """A tokenizer spec is an encoding name or a tokenizer.json path; anything else is refused."""
    assert "cl100k_base" == counter_from_spec("cl100k_base").name
    assert isinstance(counter_from_spec(str(tokenizer_file)), HuggingFaceCounter)
    with pytest.raises(EncodingError, match="unknown tokenizer 'Qwen/Qwen2.5-7B'"):
        counter_from_spec("Qwen/Qwen2.5-7B")                 # a hub name: never downloaded
    for spec, said in [(str(tmp_path / "nope" / "tokenizer.json"), "does not exist"),
                       ("./missing.json", "does not exist"), (str(tmp_path), "is a folder")]:
        # A path meant: what is wrong with it, not that the name is unknown.
        with pytest.raises(EncodingError, match=f"tokenizer file '{re.escape(spec)}' {said}"):
            counter_from_spec(spec)
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(EncodingError, match="not a tokenizer.json file"):
        HuggingFaceCounter(bad)


def test_without_the_package_says_how_to_install(tokenizer_file, monkeypatch):
    """Without the tokenizers package the counter names the extra to install."""
    monkeypatch.setitem(sys.modules, "tokenizers", None)
    with pytest.raises(EncodingError, match=r"pip install 'ctxslots\[tokenizers\]'"):
        HuggingFaceCounter(tokenizer_file)


def test_cli_tokenizer_safety_margin_and_answer_reserve(tokenizer_file, tmp_path):
    """assemble --tokenizer PATH --safety-margin --answer-reserve fits the prompt to what is left,
    counted by that tokenizer."""
    db = tmp_path / "c.db"
    make_store(db, FACTS).close()
    result = CliRunner().invoke(cli, [
        "--db", str(db), "assemble", "deploy shop freeze", "--scope", "shop", "--budget", "200",
        "--tokenizer", str(tokenizer_file), "--safety-margin", "20", "--answer-reserve", "60",
        "--dump", "json"], catch_exceptions=False)
    assert 0 == result.exit_code, result.output
    data = json.loads(result.output)
    assert (200, 20, 60, 120) == (data["budget"], data["safety_margin"], data["answer_reserve"],
                                  data["available"])
    assert "hf:tok0/tokenizer.json" == data["encoding"]
    assert HuggingFaceCounter(tokenizer_file).count(data["text"]) == data["total_tokens"] <= 120


@pytest.mark.parametrize(("args", "message"), [
    (["--tokenizer", "llama-3"], "Error: unknown tokenizer 'llama-3'"),
    (["--budget", "50", "--answer-reserve", "50"], "Error: budget 50 leaves no room"),
])
def test_cli_bad_tokenizer_options_are_one_line(tmp_path, args, message):
    """A bad --tokenizer or a budget with no room left is one error line, exit status 1."""
    result = CliRunner().invoke(cli, ["--db", str(tmp_path / "e.db"), "assemble", "hi", *args])
    assert 1 == result.exit_code
    assert result.output.startswith(message) and 1 == len(result.output.splitlines())


class Returns:
    """A counter that returns a fixed kind of answer for every text."""

    def __init__(self, answer) -> None:
        self.answer = answer

    def count(self, text: str):
        return self.answer(text)


@pytest.mark.parametrize("answer", [
    lambda text: len(text) / 4,          # an estimate left as a float
    lambda text: -len(text),
    lambda text: None,
    lambda text: str(len(text)),
    lambda text: bool(text),
], ids=["float", "negative", "none", "str", "bool"])
def test_a_counter_that_returns_no_whole_number_is_a_clear_error(tmp_path, answer):
    """A count that is not a whole number >= 0 is an InvalidRequestError naming the counter,
    from assemble and aassemble alike (not a TypeError, nor a prompt of fractional tokens)."""
    import asyncio

    store = make_store(tmp_path / "c.db", FACTS)
    assembler = PromptAssembler(store, counter=Returns(answer))
    request = AssemblyRequest("deploy shop freeze", scope="shop", budget=200)
    try:
        with pytest.raises(InvalidRequestError, match="token counter Returns returned") as sync:
            assembler.assemble(request)
        with pytest.raises(InvalidRequestError, match="whole number >= 0") as concurrent:
            asyncio.run(assembler.aassemble(request))
    finally:
        store.close()
    assert "counter" == sync.value.field == concurrent.value.field
