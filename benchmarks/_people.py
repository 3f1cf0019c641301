"""The users of one service and what an agent keeps about each, for the owners benchmark.

    people = People.load("conversations-dev.json")   # the public LoCoMo layout
    for record in people.records(Layout(users=1000)):  # export records, ready to import
        ...
    people.questions(people.user(42), 20)               # what that user asks

The facts are the kind an agent's flusher writes about a person: short
sentences about the user, by name. Most are the observations of the dev set
(``session_N_observation``: what an LLM wrote down about each speaker of a
long conversation), each given to a user with the speaker's name replaced by
the user's first name and every other speaker's name by a friend's; about one
in five is a keyed profile fact (where the user lives, works, is allergic to...)
from the templates below, with a key the flusher would use. Users belong to
workspaces (scopes) of ``users_per_scope`` people, and each workspace holds a
few shared project facts and facts of its agent (from ``_corpus.py``). The
questions are the dev set's questions about a speaker (categories 1 to 4),
asked about the user.

Everything is drawn from ``random.Random(seed)``: the same file, layout and seed
give the same facts.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _corpus import _CITIES, _MONTHS, _NAMES, generate_facts
from _inputs import read_conversations

__all__ = ["AGENT", "EPOCH", "Layout", "People", "User"]

#: The agent of every workspace's agent facts.
AGENT = "assistant"
#: Facts are said over the year before this moment (Unix seconds, 2026-01-01).
EPOCH = 1_767_225_600.0
_YEAR = 365 * 86400.0

_FOODS = ("shellfish", "peanuts", "gluten", "dairy", "spicy food", "mushrooms", "eggs",
          "red meat", "cilantro", "olives")
_DIETS = ("vegetarian", "vegan", "pescatarian", "on a low-sugar diet", "keeping kosher",
          "eating halal", "trying intermittent fasting")
_JOBS = ("nurse", "teacher", "software engineer", "accountant", "architect", "chef",
         "product manager", "data analyst", "pharmacist", "graphic designer", "lawyer",
         "electrician", "physiotherapist", "journalist", "student")
_COMPANIES = ("a hospital", "a primary school", "a bank", "a start-up", "the city council",
              "a logistics firm", "a bakery", "a law firm", "a museum", "a games studio")
_PETS = ("dog", "cat", "parrot", "rabbit", "tortoise", "hamster")
_PET_NAMES = ("Biscuit", "Luna", "Max", "Pepper", "Tilly", "Milo", "Nala", "Oscar", "Rex")
_SPORTS = ("tennis", "basketball", "chess", "badminton", "football", "volleyball", "golf",
           "table tennis", "squash", "rugby")
_GENRES = ("jazz", "lo-fi beats", "classical music", "podcasts", "metal", "K-pop", "folk")
_CHANNELS = ("email", "text message", "phone", "the chat app")
_EVENTS = ("marathon", "half marathon", "triathlon", "cycling tour", "swimming race")
_LANGS = ("English", "Spanish", "French", "German", "Portuguese", "Hindi", "Japanese")
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

#: Keyed profile facts: (key, template). ``{first}`` is the user, ``{other}`` someone else.
_PROFILE: tuple[tuple[str, str], ...] = (
    ("home.city", "{first} lives in {city}."),
    ("work.job", "{first} works as a {job} at {company}."),
    ("work.manager", "{first}'s manager at work is {other}."),
    ("family.partner", "{first}'s partner is called {other}."),
    ("family.kids", "{first} has {n} kids and the youngest just started school."),
    ("pet", "{first} has a {pet} named {pet_name}."),
    ("diet", "{first} is {diet}."),
    ("health.allergy", "{first} is allergic to {food}."),
    ("birthday", "{first}'s birthday is on {month} {day_n}."),
    ("vacation", "{first} is on vacation until {month} {day_n}."),
    ("travel.next", "{first} is flying to {city} in {month} to visit {other}."),
    ("hobby.sport", "{first} plays {sport} every {day}."),
    ("goal.training", "{first} is training for a {event} in {month}."),
    ("music.work", "{first} listens to {genre} while working."),
    ("reply.language", "{first} prefers replies in {lang}."),
    ("reply.style", "{first} wants short answers with the main point first."),
    ("contact.channel", "{first} prefers to be reached by {channel} after {hour} pm."),
    ("schedule.busy", "{first} is busy every {day} morning with {other}."),
    ("home.moving", "{first} is moving to a bigger flat in {city} in {month}."),
    ("friend.best", "{first}'s best friend is {other}, who lives in {city}."),
)


@dataclass(frozen=True)
class Layout:
    """How many users, facts and workspaces.

    Attributes:
        users: Users in the store.
        facts_per_user: User facts each user has.
        users_per_scope: Users sharing one workspace.
        project_facts: Shared project facts per workspace.
        agent_facts: The agent's facts per workspace.
        seed: The draw.
    """

    users: int
    facts_per_user: int = 100
    users_per_scope: int = 50
    project_facts: int = 20
    agent_facts: int = 5
    seed: int = 0

    @property
    def scopes(self) -> int:
        """Workspaces in the store."""
        return -(-self.users // self.users_per_scope)

    @property
    def total(self) -> int:
        """Facts in the store."""
        return self.users * self.facts_per_user + self.scopes * (self.project_facts
                                                                 + self.agent_facts)


@dataclass(frozen=True)
class User:
    """One user: the id facts are stored under, a first name, a workspace."""

    index: int
    user_id: str
    first: str
    scope: str


def _scope(index: int, layout: Layout) -> str:
    return f"team-{index // layout.users_per_scope:04d}"


@dataclass
class People:
    """The dev set's observations and questions, with the names of their speakers marked."""

    observations: list[tuple[str, str]]
    questions: list[tuple[str, str]]
    speakers: tuple[str, ...]

    @classmethod
    def load(cls, path: str | Path) -> People:
        """Read a conversation file in the LoCoMo layout (``session_N_observation``, ``qa``).

        :raises SystemExit: The file is missing, not JSON or not in the layout.
        :raises ValueError: The file holds no observations.
        """
        data = read_conversations(path)
        observations: list[tuple[str, str]] = []
        questions: list[tuple[str, str]] = []
        speakers: set[str] = set()
        for sample in data:
            talk = sample["conversation"]
            pair = (talk["speaker_a"], talk["speaker_b"])
            speakers.update(pair)
            for name, value in talk.items():
                if name.endswith("_observation"):
                    for speaker, items in value.items():
                        observations.extend((speaker, text) for text, *_ in items)
            for qa in sample.get("qa", []):
                asked = [s for s in pair if s in qa["question"]]
                if qa.get("category") in (1, 2, 3, 4) and len(asked) == 1:
                    questions.append((asked[0], qa["question"]))
        if not observations:
            raise ValueError(f"{path}: no session_N_observation in the file")
        return cls(observations, questions, tuple(sorted(speakers)))

    def user(self, index: int, layout: Layout) -> User:
        """User number ``index`` (the same name every time)."""
        draw = random.Random(f"{layout.seed}-name-{index}")
        return User(index, f"user-{index:05d}", draw.choice(_NAMES), _scope(index, layout))

    def _renamer(self, subject: str, first: str, draw: random.Random) -> Any:
        others = {s: draw.choice(_NAMES) for s in self.speakers if s != subject}
        others[subject] = first
        pattern = re.compile(r"\b(" + "|".join(map(re.escape, others)) + r")\b")
        return lambda text: pattern.sub(lambda m: others[m.group(1)], text)

    def user_facts(self, user: User, layout: Layout) -> list[dict[str, Any]]:
        """The user's facts as import records: profile facts with keys, then observations."""
        draw = random.Random(f"{layout.seed}-facts-{user.index}")
        keyed = min(len(_PROFILE), layout.facts_per_user // 5)
        records = []
        for key, template in draw.sample(_PROFILE, keyed):
            records.append(self._record(user, key, template.format(**_fill(user, draw)), draw))
        for speaker, text in draw.sample(self.observations,
                                         min(len(self.observations),
                                             layout.facts_per_user - keyed)):
            records.append(self._record(user, None, self._renamer(speaker, user.first, draw)(text),
                                        draw))
        return records

    @staticmethod
    def _record(user: User, key: str | None, value: str, draw: random.Random) -> dict[str, Any]:
        said = EPOCH - draw.random() * _YEAR
        record: dict[str, Any] = {"slot": "user", "user": user.user_id, "value": value,
                                  "source": "flush", "created_at": said, "updated_at": said,
                                  "observed_at": said}
        if key is not None:
            record["key"] = key
        return record

    def shared_facts(self, scope_index: int, layout: Layout) -> list[dict[str, Any]]:
        """A workspace's project facts and its agent's facts, as import records."""
        draw = random.Random(f"{layout.seed}-scope-{scope_index}")
        scope = f"team-{scope_index:04d}"
        records = []
        wanted = {"project": layout.project_facts, "agent": layout.agent_facts}
        for fact in generate_facts(4 * sum(wanted.values()) + 20, seed=layout.seed * 7919
                                   + scope_index):
            if wanted.get(fact.slot, 0) <= 0:
                continue
            wanted[fact.slot] -= 1
            said = EPOCH - draw.random() * _YEAR
            record = {"slot": fact.slot, "scope": scope, "value": fact.value,
                      "tags": list(fact.tags), "created_at": said, "updated_at": said,
                      "observed_at": said}
            if fact.slot == "agent":
                record["agent"] = AGENT
            records.append(record)
        return records

    def records(self, layout: Layout) -> Iterator[dict[str, Any]]:
        """Every fact of the store, users' facts interleaved as if written over time.

        Users are taken in blocks of 500 whose facts are shuffled together, so a
        user's rows are spread through the tables as a service's would be, while
        only one block is held at a time.
        """
        for scope_index in range(layout.scopes):
            yield from self.shared_facts(scope_index, layout)
        block = 500
        for start in range(0, layout.users, block):
            batch = [r for i in range(start, min(start + block, layout.users))
                     for r in self.user_facts(self.user(i, layout), layout)]
            random.Random(f"{layout.seed}-order-{start}").shuffle(batch)
            yield from batch

    def solo_records(self, user: User, layout: Layout) -> list[dict[str, Any]]:
        """What a store holding only ``user`` has: their facts and their workspace's."""
        scope_index = int(user.scope.rsplit("-", 1)[1])
        return self.shared_facts(scope_index, layout) + self.user_facts(user, layout)

    def questions_for(self, user: User, count: int, seed: int = 0) -> list[str]:
        """``count`` questions of the dev set, asked about ``user`` (names replaced)."""
        draw = random.Random(f"{seed}-questions-{user.index}")
        chosen = draw.sample(self.questions, min(count, len(self.questions)))
        return [self._renamer(subject, user.first, draw)(text) for subject, text in chosen]


def _fill(user: User, draw: random.Random) -> dict[str, Any]:
    return {"first": user.first, "other": draw.choice(_NAMES),
            "city": draw.choice(_CITIES).replace("-", " "), "job": draw.choice(_JOBS),
            "company": draw.choice(_COMPANIES), "n": draw.randint(2, 4),
            "pet": draw.choice(_PETS), "pet_name": draw.choice(_PET_NAMES),
            "diet": draw.choice(_DIETS), "food": draw.choice(_FOODS),
            "month": draw.choice(_MONTHS), "day_n": draw.randint(1, 28),
            "sport": draw.choice(_SPORTS), "day": draw.choice(_DAYS),
            "event": draw.choice(_EVENTS), "genre": draw.choice(_GENRES),
            "lang": draw.choice(_LANGS), "channel": draw.choice(_CHANNELS),
            "hour": draw.randint(5, 9)}
