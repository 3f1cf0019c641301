"""The benchmark harness: sides timed in turn, ratios and their spread, the headline block, the
corpus stores' resumed builds and the offline guard."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
if str(BENCHMARKS) not in sys.path:  # the benchmark helpers live beside tests/, not in src/
    sys.path.insert(0, str(BENCHMARKS))

import _stores
from _sql import raw
from _timing import Load, Ratio, Turns, in_turn, percentile
from ctxslots import FactStore
from headline import BEGIN, END, write_block


def test_sides_take_turns_query_by_query_and_each_goes_first_as_often():
    """Every side runs on a query before any side runs on the next; the first side rotates."""
    calls: list[tuple[str, int]] = []
    sides = {name: (lambda i, name=name: calls.append((name, i))) for name in "abc"}
    turns = in_turn(sides, 6, repeat=2, warm=0)
    assert [i for _, i in calls] == [i for i in list(range(6)) * 2 for _ in range(3)]
    firsts = [calls[k][0] for k in range(0, len(calls), 3)]
    assert {"a": 4, "b": 4, "c": 4} == {name: firsts.count(name) for name in "abc"}
    assert [[2, 2, 2, 2, 2, 2]] * 3 == [[len(r) for r in turns.times[s]] for s in "abc"]


def test_warm_up_calls_are_not_timed():
    """The warm-up calls run before timing, on the last queries, and are not among the times."""
    calls: list[int] = []
    turns = in_turn({"a": calls.append}, 4, warm=2)
    assert [2, 3, 0, 1, 2, 3] == calls
    assert 4 == len(turns.calls("a"))


def test_the_ratio_is_the_median_of_per_query_ratios_with_its_percentiles():
    """Each query's median time on one side over its median on the floor; then their median
    and 10th and 90th percentiles."""
    times = {"side": [[2.0, 4.0, 3.0], [10.0], [1.0], [8.0], [5.0]],
             "floor": [[1.0], [5.0], [1.0], [2.0], [1.0]]}
    turns = Turns(times, Load((0.0,) * 3, (0.0,) * 3))
    assert [3.0, 2.0, 1.0, 4.0, 5.0] == turns.ratios("side", "floor")
    assert Ratio(3.0, 1.4, 4.6, 5) == turns.ratio("side", "floor")
    assert [1.5, 1.0, 0.5, 2.0, 2.5] == turns.ratios("side", ["floor", "floor"])


def test_percentiles_interpolate_between_ranks():
    """The percentile is linear between ranks, as statistics.quantiles' inclusive method."""
    values = [5.0, 1.0, 3.0, 2.0, 4.0]
    assert (1.0, 3.0, 5.0, 1.4) == tuple(percentile(values, q) for q in (0, 50, 100, 10))
    with pytest.raises(ValueError, match="no values"):
        percentile([], 50)


def test_the_headline_block_replaces_only_what_is_between_its_markers(tmp_path):
    """A file with the markers keeps everything around them; one without gets the block after
    its title."""
    path = tmp_path / "BENCHMARKS.md"
    path.write_text("# Benchmarks\n\nIntro.\n\n## Older runs\n\nKept.\n")
    write_block(path, f"{BEGIN}\nfirst\n{END}")
    assert f"# Benchmarks\n\n{BEGIN}\nfirst\n{END}\n\nIntro.\n\n## Older runs\n\nKept.\n" \
        == path.read_text()
    write_block(path, f"{BEGIN}\nsecond\n{END}")
    assert f"# Benchmarks\n\n{BEGIN}\nsecond\n{END}\n\nIntro.\n\n## Older runs\n\nKept.\n" \
        == path.read_text()


def test_an_interrupted_corpus_build_resumes_to_the_same_store(tmp_path, monkeypatch):
    """A build stopped after its first committed chunk goes on from there when asked again and
    ends with the facts of a build that was never stopped."""
    monkeypatch.setattr(_stores, "CHUNK", 100)
    monkeypatch.setattr(_stores, "OUT", tmp_path / "straight")
    straight = _stores.corpus_store(300)
    monkeypatch.setattr(_stores, "OUT", tmp_path / "stopped")
    write = _stores.write_facts
    calls = []

    def stop_at_the_second_chunk(*args):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        write(*args)

    monkeypatch.setattr(_stores, "write_facts", stop_at_the_second_chunk)
    with pytest.raises(KeyboardInterrupt):
        _stores.corpus_store(300)
    monkeypatch.setattr(_stores, "write_facts", write)
    resumed = _stores.corpus_store(300)

    def values(path: Path) -> list[tuple[object, ...]]:
        with FactStore(path) as store:
            conn = raw(store)
            try:
                return conn.execute("SELECT slot, scope, key, value, tags FROM facts "
                                    "ORDER BY id").fetchall()
            finally:
                conn.close()

    assert 2 == len(calls)
    assert 300 == len(values(resumed))
    assert values(straight) == values(resumed)


def test_the_offline_guard_refuses_other_machines_and_lets_local_ones_through():
    """After forbid_network, a lookup of another host fails inside the caller; a connection to
    127.0.0.1 goes through to the closed port."""
    script = (
        "import socket\n"
        "from _offline import NetworkForbidden, forbid_network\n"
        "forbid_network()\n"
        "try:\n"
        "    socket.create_connection(('example.com', 443), timeout=1)\n"
        "except NetworkForbidden as exc:\n"
        "    print('refused:', exc)\n"
        "try:\n"
        "    socket.create_connection(('127.0.0.1', 9), timeout=1)\n"
        "except ConnectionRefusedError:\n"
        "    print('local: refused by the closed port')\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=BENCHMARKS, capture_output=True,
                          text=True, check=True)
    assert ("refused: benchmark processes stay offline: lookup of 'example.com'\n"
            "local: refused by the closed port\n") == done.stdout


def test_a_benchmarks_record_makes_headline_rows(tmp_path):
    """store_search.py and file_size.py write records (command, date, commit, load, figures)
    that the headline turns into rows with their ratios."""
    from _headline_rows import rows_of
    from _record import Record

    env = {**os.environ, "CTXSLOTS_BENCHMARKS_OUT": str(tmp_path / "out")}
    runs = {"store_search": ["--sizes", "600", "--queries", "12", "--repeat", "1"],
            "file_size": ["--facts", "300"]}
    rows = []
    for name, options in runs.items():
        path = tmp_path / f"{name}.json"
        subprocess.run([sys.executable, str(BENCHMARKS / f"{name}.py"), *options, "--json",
                        str(path)], env=env, capture_output=True, check=True)
        record = Record.read(path)
        assert name == record.benchmark
        assert f"--json {path}" in record.command
        assert {"start", "end"} == set(record.load)
        rows += rows_of(record)
    assert ["store search, words only, 600 facts",
            "store search, lexical copy (`lexical_cache=True`), 600 facts"] == [
        r.figure for r in rows[:2]]
    assert all(r.ratio.startswith("**") and "of raw FTS5" in r.ratio for r in rows[:2])
    assert rows[2].measured.endswith(" B/fact")


def _run(script: str, *options: str, env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(BENCHMARKS / script), *options],
                          capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, **(env or {})})


@pytest.mark.parametrize(("script", "options", "said"), [
    ("store_search.py", ["--sizes", "1000,0"], "argument --sizes: '0': must be at least 1"),
    ("store_search.py", ["--sizes", "-5"], "argument --sizes: '-5': must be at least 1"),
    ("store_search.py", ["--queries", "0"], "argument --queries: '0': must be at least 1"),
    ("store_search.py", ["--sizes", "ten"], "argument --sizes: 'ten' is not a whole number"),
    ("assemble.py", ["--facts", "0"], "argument --facts: '0': must be at least 1"),
    ("file_size.py", ["--facts", "0"], "argument --facts: '0': must be at least 1"),
    ("writes.py", ["--model", "none", "--round", "0"],
     "argument --round: '0': must be at least 1"),
    ("cold_commands.py", ["store.db", "--rounds", "-1"],
     "argument --rounds: '-1': must be at least 1"),
    ("import_scale.py", ["data", "--sizes", "0"], "argument --sizes: '0': must be at least 1"),
    ("many_scopes.py", ["--scopes", "-1"], "argument --scopes: '-1': must be at least 0"),
    ("store_search.py", ["--query-shares", "1,x"], "argument --query-shares: 'x' is not a number"),
    ("conversations.py", ["x.json", "--budgets", "0"],
     "argument --budgets: '0': must be at least 1"),
    ("file_size.py", ["--embedder", "nope:3"], "argument --embedder: unknown embedder kind"),
    ("assemble.py", ["--model", "no-such-model-here"],
     "argument --model: no sentence-transformers model 'no-such-model-here'"),
])
def test_a_size_of_nothing_or_an_unknown_value_is_refused_before_any_store_is_built(
        tmp_path, script, options, said):
    """A size, count or round of 0 or less, a size that is not a number, an embedder spec or
    model that names nothing: one argparse error line, no traceback, nothing built."""
    out = tmp_path / "out"
    done = _run(script, *options, env={"CTXSLOTS_BENCHMARKS_OUT": str(out)})
    assert 2 == done.returncode, done.stderr
    assert "Traceback" not in done.stderr
    assert said in done.stderr.splitlines()[-1]
    assert not out.exists()


_LOADERS = [("conversations.py", ["{path}"]),
            ("stemmers.py", ["--agreement", "{path}"]),
            ("postgres_lexical.py", ["{path}", "--url", "postgresql://bench@127.0.0.1:1/x"]),
            ("owners_scale.py", ["{out}", "--dev-set", "{path}", "--engines", "sqlite"]),
            ("postgres_pending.py", ["{out}", "--dev-set", "{path}",
                                     "--url", "postgresql://bench@127.0.0.1:1/x"]),
            ("ranking_headroom.py", ["{path}"])]
_BAD_FILES = {"empty.json": ("[]", "expected a non-empty list of conversations"),
              "missing.json": (None, "cannot read the conversation file"),
              "text.json": ("not json\n", "not a JSON conversation file"),
              "object.json": ('{"conversation": {}}', "not the LoCoMo layout"),
              "no-qa.json": ('[{"sample_id": "a", "conversation": {}}]',
                             "not the LoCoMo layout: a sample has no qa"),
              "turns.json": (('[{"sample_id": "a", "qa": [], "conversation": '
                             '{"session_1": [{"dia_id": "D1:1", "text": "Hi"}]}}]'),
                             "session_1 is not a list of turns with speaker, dia_id and text")}


def _bad_file(folder: Path, name: str) -> tuple[Path, str]:
    text, said = _BAD_FILES[name]
    path = folder / name
    if text is not None:
        path.write_text(text)
    return path, said


@pytest.mark.parametrize("name", sorted(_BAD_FILES))
def test_the_conversation_reader_names_the_file_and_what_is_wrong(tmp_path, name):
    """The reader every benchmark loads a dev set through stops with one line naming the
    file and what is wrong, whether it is missing, not JSON or another layout."""
    from _inputs import read_conversations

    path, said = _bad_file(tmp_path, name)
    with pytest.raises(SystemExit) as stopped:
        read_conversations(path)
    assert str(stopped.value).startswith(f"{path}: ") and said in str(stopped.value)
    assert 1 == len(str(stopped.value).splitlines())


@pytest.mark.parametrize(("script", "options", "name"), [
    (script, options, name) for (script, options), name in zip(_LOADERS, sorted(_BAD_FILES),
                                                               strict=True)])
def test_a_conversation_file_that_is_missing_or_not_the_locomo_layout_ends_in_one_line(
        tmp_path, script, options, name):
    """Each benchmark reading a dev set (each given another bad file: the reader above says
    what is wrong with each) stops in one line naming the file, without a traceback."""
    path, said = _bad_file(tmp_path, name)
    done = _run(script, *(o.format(path=path, out=tmp_path / "out") for o in options))
    assert 1 == done.returncode, (name, done.stderr)
    assert [f"{path}: "] == [line[:len(str(path)) + 2] for line in
                             done.stderr.strip().splitlines()], (name, done.stderr)
    assert said in done.stderr, (name, done.stderr)


def test_the_conversation_loaders_read_the_locomo_layout(tmp_path):
    """A file in the layout of locomo10.json (sessions with their dates, turns, observations,
    questions with evidence) gives the turns, questions and observations the benchmarks use."""
    from _people import People
    from conversations import load_conversations

    turns = [{"speaker": "Ada", "dia_id": "D1:1", "text": "I joined a chess club."},
             {"speaker": "Bo", "dia_id": "D1:2", "text": "How was it?",
              "blip_caption": "a photo of a cup"}]
    conversation = {"speaker_a": "Ada", "speaker_b": "Bo",
                    "session_1_date_time": "10:15 am on 3 March, 2021", "session_1": turns,
                    "session_1_observation": {
                        "Ada": [["Ada joined a chess club.", "D1:1"]]}}
    qa = [{"question": "What did Ada join?", "answer": "a chess club",
           "evidence": ["D1:1"], "category": 4},
          {"question": "Unanswerable?", "adversarial_answer": "x", "evidence": ["D1:2"],
           "category": 5}]
    sample = {"sample_id": "conv-1", "conversation": conversation, "qa": qa}
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([sample]))
    [conversation] = load_conversations(path)
    assert ["D1:1", "D1:2"] == [t.dia_id for t in conversation.turns]
    assert "[shares a photo of a cup]" in conversation.turns[1].text
    assert [("What did Ada join?", ("D1:1",))] == [(q.text, q.evidence)
                                                      for q in conversation.questions]
    people = People.load(path)
    assert [("Ada", "Ada joined a chess club.")] == people.observations
    assert [("Ada", "What did Ada join?")] == people.questions


def test_a_postgresql_url_no_server_answers_at_ends_in_one_line(tmp_path):
    """A benchmark given a PostgreSQL URL on a closed port says so in one line, before it
    times anything, instead of a psycopg traceback."""
    url = "postgresql://bench@127.0.0.1:1/x"
    for script, options in [("postgres_search.py", ["--url", url, "--sizes", "1000"]),
                            ("stemmers.py", ["--facts", "1000", "--url", url]),
                            ("import_scale.py", [str(tmp_path / "data"), "--sizes", "1000",
                                                 "--db", url])]:
        done = _run(script, *options, env={"CTXSLOTS_BENCHMARKS_OUT": str(tmp_path / "out")})
        assert 1 == done.returncode, done.stderr
        [line] = done.stderr.strip().splitlines()
        assert line.startswith("cannot reach PostgreSQL: ")
        assert '"127.0.0.1", port 1' in line
        assert "facts" not in done.stdout  # nothing was timed first


def _invented_conversation(sample: str, person: str, other: str) -> dict[str, object]:
    hobbies = ["chess", "rowing", "pottery", "archery", "baking", "fencing"]
    turns = [{"speaker": person, "dia_id": f"D1:{i + 1}",
              "text": f"I took up {hobby} with my cousin last week."}
             for i, hobby in enumerate(hobbies)]
    turns += [{"speaker": other, "dia_id": f"D1:{len(hobbies) + i + 1}",
               "text": f"The weather at the harbour was grey on day {i}."} for i in range(6)]
    qa = [{"question": f"What did {person} take up with a cousin, {hobby}?",
           "answer": hobby, "evidence": [f"D1:{i + 1}"], "category": 4}
          for i, hobby in enumerate(hobbies)]
    return {"sample_id": sample, "qa": qa, "conversation": {
        "speaker_a": person, "speaker_b": other,
        "session_1_date_time": "10:15 am on 3 March, 2021", "session_1": turns}}


def test_the_ranking_headroom_orders_each_conversation_by_what_the_others_taught(tmp_path):
    """The learned order of each conversation comes from a model fitted on the others; the
    table gives both orders' recall@10 and the store's recall deeper, each a share, the
    deeper never less; one conversation alone is refused in one line."""
    pytest.importorskip("sklearn", reason="scikit-learn fits the learned order")
    path = tmp_path / "two.json"
    path.write_text(json.dumps([_invented_conversation("conv-a", "Rosaline", "Otto"),
                                _invented_conversation("conv-b", "Imogen", "Greta")]))
    done = _run("ranking_headroom.py", str(path))
    assert 0 == done.returncode, done.stderr
    rows = [line.split(" | ") for line in done.stdout.splitlines()
            if line.startswith("| words only |")]
    assert ["the store's", "learned, other conversations"] == [r[1] for r in rows]
    for row in rows:
        r10, r30, r100 = (float(row[i].strip(" |")) for i in (2, 7, 8))
        assert 0.0 <= r10 <= r30 <= r100 <= 1.0
    # Every question names its hobby, so the store finds each one's turn first.
    assert "1.000" == rows[0][2]
    alone = _run("ranking_headroom.py", str(path), "--only", "conv-a")
    assert 2 == alone.returncode
    assert "Traceback" not in alone.stderr
    assert "needs at least two conversations" in alone.stderr.splitlines()[-1]
