"""The periods a query names, as intervals of time."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from datetime import UTC, date, datetime

import pytest

from ctxslots.stores.periods import query_periods

NOW = datetime(2024, 1, 10, tzinfo=UTC).timestamp()


def days(text: str) -> list[tuple[str, str]]:
    return [(datetime.fromtimestamp(a, UTC).date().isoformat(),
             datetime.fromtimestamp(b, UTC).date().isoformat()) for a, b in query_periods(text, NOW)]


@pytest.mark.parametrize("text", ["What did she show on October 13, 2023?",
                                  "What did she show on 13 October, 2023?",
                                  "What did she show on the 13th of Oct 2023?"])
def test_a_named_day_reaches_a_day_back_and_a_week_after(text: str) -> None:
    """A day, however written, covers the day before it to eight days after it."""
    assert [("2023-10-12", "2023-10-22")] == days(text)


def test_a_month_with_a_year_and_a_year_alone() -> None:
    """A month and year runs to a month after its end; a year to the end of next January."""
    assert [("2023-07-01", "2023-09-01")] == days("what happened in July 2023?")
    assert [("2023-01-01", "2024-02-01")] == days("trips in 2023")


def test_a_month_alone_means_the_last_ones_that_began_by_now() -> None:
    """``in July`` asked in January 2024 means the Julys of 2021, 2022 and 2023."""
    assert ["2021-07-01", "2022-07-01", "2023-07-01"] == [a for a, _ in days("camping in July?")]
    assert "2024-01-01" == days("in January")[-1][0]


@pytest.mark.parametrize("text", ["May I ask what you did?", "what did Jan say", "the pride march",
                                  " \n May I ask what you did?",
                                  "you may go", "a 31st birthday", "call 555 1234"])
def test_words_that_only_look_like_dates_name_no_period(text: str) -> None:
    """Verbs, names and numbers that are not years give no period."""
    assert [] == days(text)


def test_dates_named_many_times_are_each_one_period() -> None:
    """A long text naming the same dates again and again (a pasted changelog) gives each
    period once, in the order first named: ranking checks every hit against each."""
    text = "Deployed on 12 May 2023. Then May came. " * 500 + "Released in July 2023; " * 500
    assert [("2023-05-11", "2023-05-21"), ("2021-05-01", "2021-07-02"),
            ("2022-05-01", "2022-07-02"), ("2023-05-01", "2023-07-02"),
            ("2023-07-01", "2023-09-01")] == days(text)


def test_capitalised_may_inside_a_sentence_is_the_month() -> None:
    """"in May" is the month; an impossible day falls back to its month and year."""
    assert date(2023, 5, 1).isoformat() == days("what did we do in May")[-1][0]
    assert [("2023-02-01", "2023-04-01")] == days("on 31 February 2023")


def test_december_at_the_last_year_a_datetime_holds_ends_with_it(store) -> None:
    """A month named in December 9999 ends where datetimes do; a search then finds it."""
    now = datetime(9999, 12, 15, tzinfo=UTC)
    periods = query_periods("what happened in December?", now.timestamp())
    december = datetime(9999, 12, 1, tzinfo=UTC).timestamp()
    assert any(start == december and end > december for start, end in periods)
    store.add("agent", "the party happened in December",
              observed_at=datetime(9999, 12, 1, tzinfo=UTC))
    hits = store.search("what happened in December?", now=now, track_access=False)
    assert [h.fact.value for h in hits] == ["the party happened in December"]


_IN_GERMAN = """
import datetime as dt, locale, sys
locale.setlocale(locale.LC_ALL, "de_DE.UTF-8")
from ctxslots import AssemblyRequest, FactStore, PromptAssembler
from ctxslots.flusher.flusher import _date_line
from ctxslots.stores.periods import query_periods
now = 1_700_000_000.0
with FactStore(":memory:", clock=lambda: now) as store:
    store.add("agent", "The deploy runs on Friday.", observed_at=1683504000.0)
    prompt = PromptAssembler(store).assemble(AssemblyRequest("deploy friday", now=now))
print(repr(query_periods("what happened in July 2023?", now)))
print(_date_line(dt.datetime(2023, 5, 8, tzinfo=dt.UTC)))
print(prompt.text)
"""


def test_month_and_weekday_names_are_english_in_any_locale(tmp_path):
    """A program that sets a German locale still reads "July" in a question and gets
    "8 May 2023" in its prompt and "Monday" in the flusher's date line."""
    localedef = shutil.which("localedef")
    if localedef is None or subprocess.run(
            [localedef, "-i", "de_DE", "-f", "UTF-8", str(tmp_path / "de_DE.UTF-8")],
            capture_output=True, check=False).returncode != 0:
        pytest.skip("no de_DE locale can be compiled here")
    done = subprocess.run([sys.executable, "-c", _IN_GERMAN], capture_output=True, text=True,
                          env={**os.environ, "LOCPATH": str(tmp_path)}, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    july = datetime(2023, 7, 1, tzinfo=UTC).timestamp()
    august_end = datetime(2023, 9, 1, tzinfo=UTC).timestamp()
    assert done.stdout.splitlines()[0] == repr([(july, august_end)])
    assert "2023-05-08 (Monday)" in done.stdout
    assert "8 May 2023:\n- The deploy runs on Friday." in done.stdout
