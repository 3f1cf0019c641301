"""Regenerate facts.jsonl and queries.jsonl (deterministic, seeded).

    python benchmarks/data/_make.py && python benchmarks/_dataset.py

Material:

- ``_blocks_*.py``: hand-written queries, each with its relevant facts (F) and
  some hand-written near-miss distractors (D). See _blocks_user.py for the format.
- ``_pools_*.py``: hand-written entities (modules, tickets, dependencies,
  incidents, conventions, people, user life, agent lessons) that are turned
  into distractor facts with varied sentence templates.

Ages: every fact gets ``age_days`` drawn from its slot's distribution, so
relevant facts are as old as anything else on average; ``D stale`` lines are
outdated versions of a relevant fact and are made older than it (there decay
helps), and many distractors are recent (there decay hurts).
"""

from __future__ import annotations

import json
import random
import re
import sys
from datetime import date
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import _blocks_agent
import _blocks_project
import _blocks_user
import _pools_data
import _pools_global
import _pools_mobile
import _pools_shop

from _dataset import FACTS_PATH, QUERIES_PATH, SCOPES, _clash, content_tokens

SEED = 20240611
KIND = {"p": "paraphrase", "l": "lexical", "x": "exact_token"}
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]


# ---------------------------------------------------------------------------
# ages and tags
# ---------------------------------------------------------------------------


def draw_age(rng: random.Random, slot: str) -> float:
    if slot == "user":
        a = rng.uniform(1, 400)
    elif slot == "project":
        a = rng.uniform(0, 400) if rng.random() < 0.55 else rng.expovariate(1 / 70)
    else:  # agent notes: mostly recent, a long tail of old ones
        a = rng.expovariate(1 / 35) if rng.random() < 0.6 else rng.uniform(0, 400)
    return round(min(a, 400.0), 1)


_I = re.IGNORECASE
TAG_RULES = [
    (
        "deploy",
        re.compile(
            r"\bdeploy|\brelease|rollout|testflight|app store|fastlane|codepush|\bship(s|ped)?\b",
            _I,
        ),
    ),
    ("ci", re.compile(r"\bci\b|github actions|pre-commit|pre-push|\bworkflow\b", _I)),
    (
        "testing",
        re.compile(
            r"\btests?\b|pytest|\bjest\b|detox|flaky|fixture|\be2e\b|coverage|regression",
            _I,
        ),
    ),
    (
        "database",
        re.compile(
            r"postgres|sqlite|alembic|migration|database|\bdb\b|\brds\b|\bsql\b|\bindex on\b",
            _I,
        ),
    ),
    (
        "payments",
        re.compile(
            r"stripe|payment|refund|invoice|\bvat\b|coupon|ledger|payout|apple pay|gift card|chargeback|dispute",
            _I,
        ),
    ),
    (
        "auth",
        re.compile(
            r"\bjwts?\b|\btokens?\b(?![.:])|\bsso\b|\blog ?in\b|password|keychain|\bauth\b|ssh key|\bsecrets?\b",
            _I,
        ),
    ),
    (
        "config",
        re.compile(
            r"environment variable|\bsettings\b|\bconfig\b|(?<![.\w])[A-Z]{3,}_[A-Z_]{3,}\b"
        ),
    ),
    (
        "git",
        re.compile(
            r"\bgit\b|\bcommits?\b|rebase|\bbranch|pull request|\bprs?\b|\bmerg", _I
        ),
    ),
    ("incident", re.compile(r"incident|postmortem|root cause|outage|\bwas down\b", _I)),
    (
        "performance",
        re.compile(r"latency|\bp9[59]\b|\bslow|\bcached?\b|timed? out|memory", _I),
    ),
    (
        "dependencies",
        re.compile(r"\bpinned\b|\bpin\b|\bbump|\bupgrade|==|dependenc", _I),
    ),
    ("docs", re.compile(r"documentation|readme|\bdocs\b|markdown|diagram|openapi", _I)),
    (
        "style",
        re.compile(
            r"\bformat(ted|ting)?\b|\bruff\b|\blint|\bnaming\b|\bstyle\b|spelling", _I
        ),
    ),
    (
        "mobile",
        re.compile(r"\bios\b|android|react native|simulator|xcode|gradle|iphone", _I),
    ),
    (
        "pipeline",
        re.compile(
            r"\bdbt\b|airflow|\bdags?\b|spark|kafka|parquet|warehouse|snowflake|\bmarts?\b",
            _I,
        ),
    ),
    ("search", re.compile(r"opensearch|\bsearch", _I)),
    (
        "tooling",
        re.compile(
            r"sandbox|docker|\buv\b|\bpip\b|\bcli\b|terminal|\bshell\b|editor", _I
        ),
    ),
    (
        "schedule",
        re.compile(
            r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|vacation|leave from|on call",
            _I,
        ),
    ),
]
DEFAULT_TAG = {"user": "profile", "project": "project", "agent": "lesson"}


def derive_tags(value: str, slot: str) -> list[str]:
    tags = [t for t, rx in TAG_RULES if rx.search(value)]
    return tags[:3] or [DEFAULT_TAG[slot]]


# ---------------------------------------------------------------------------
# hand-written blocks
# ---------------------------------------------------------------------------


def parse_blocks(text: str) -> list[dict]:
    blocks: list[dict] = []
    slot = scope = None
    cur: dict | None = None

    def flush():
        nonlocal cur
        if cur and (cur["queries"] or cur["facts"] or cur["distractors"]):
            if any(not cur["facts"] and not q["also"] for q in cur["queries"]):
                raise ValueError(f"query without relevant facts: {cur['queries']}")
            blocks.append(cur)
        cur = None

    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            flush()
            continue
        if line.startswith("@ "):
            flush()
            _, slot, sc = line.split()
            scope = None if sc == "-" else sc
            continue
        if cur is None:
            cur = {
                "slot": slot,
                "scope": scope,
                "queries": [],
                "facts": [],
                "distractors": [],
            }
        head, sep, body = line.partition(": ")
        if not sep:
            raise ValueError(f"bad line: {line}")
        parts = head.split()
        tag, opts = parts[0], parts[1:]
        if tag == "Q":
            kind, qscope, also = KIND[opts[0]], "inherit", []
            for o in opts[1:]:
                k, _, v = o.partition("=")
                if k == "scope":
                    qscope = None if v == "-" else v
                elif k == "also":
                    also = v.split(",")
                else:
                    raise ValueError(f"unknown option {o} in: {line}")
            cur["queries"].append(
                {"query": body.strip(), "kind": kind, "scope": qscope, "also": also}
            )
        elif tag in ("F", "D"):
            fact = {
                "slot": slot,
                "scope": scope,
                "key": None,
                "value": body.strip(),
                "tags": None,
                "age": None,
                "stale": False,
            }
            for o in opts:
                if o == "stale":
                    fact["stale"] = True
                    continue
                k, _, v = o.partition("=")
                if k == "key":
                    fact["key"] = v
                elif k == "age":
                    fact["age"] = float(v)
                elif k == "tags":
                    fact["tags"] = v.split(",")
                elif k == "scope":
                    fact["scope"] = None if v == "-" else v
                elif k == "slot":
                    fact["slot"] = v
                else:
                    raise ValueError(f"unknown option {o} in: {line}")
            if fact["slot"] == "project" and fact["scope"] is None:
                raise ValueError(f"project fact without scope: {line}")
            if fact["slot"] == "user":
                fact["scope"] = None
            cur["facts" if tag == "F" else "distractors"].append(fact)
        else:
            raise ValueError(f"bad line: {line}")
    flush()
    return blocks


# ---------------------------------------------------------------------------
# generated distractors
# ---------------------------------------------------------------------------


class Gen:
    def __init__(self, rng: random.Random):
        self.rng = rng
        self.facts: list[dict] = []

    def add(self, slot, scope, value, key=None, age=None):
        self.facts.append(
            {
                "slot": slot,
                "scope": scope,
                "key": key,
                "value": value,
                "tags": None,
                "age": age,
                "stale": False,
            }
        )

    def pick(self, seq):
        return self.rng.choice(seq)

    def fill(self, templates, **kw):
        return self.pick(templates).format(**kw)


def cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def test_path(path: str, scope: str) -> str:
    p = Path(path)
    if scope == "shop-api":
        top = path.split("/")[0]
        d = _pools_shop.TEST_DIRS.get(top, "tests/unit")
        return f"{d}/test_{p.stem}.py"
    if scope == "data-pipeline":
        if p.suffix == ".sql":
            return f"{p.parent}/schema.yml"
        return f"tests/{path.split('/')[0]}/test_{p.stem}.py"
    if p.suffix in (".ts", ".tsx"):
        return f"{p.parent}/__tests__/{p.stem}.test{p.suffix}"
    return "e2e/smoke.e2e.ts"


FLAKY_CAUSES = {
    "shop-api": [
        (
            "when the suite runs in parallel with pytest-xdist",
            "marking it with @pytest.mark.serial fixes it",
        ),
        (
            "around midnight UTC because it compares calendar dates",
            "pinning the clock with time_machine avoids it",
        ),
        (
            "when Redis still holds keys from a previous run",
            "adding the flush_redis fixture makes it stable",
        ),
        (
            "on the first run after the database container starts",
            "waiting for the Postgres healthcheck avoids it",
        ),
        (
            "when pytest-randomly puts it after the coupon tests",
            "it depends on state left by an earlier test; run it alone to confirm",
        ),
        ("if LANG is not a UTF-8 locale", "exporting LANG=C.UTF-8 fixes it"),
        (
            "when the OpenSearch container is still indexing",
            "calling the index refresh API in the fixture fixes it",
        ),
        (
            "when the stripe-mock container was started with an old image",
            "pulling the latest stripe-mock image fixes it",
        ),
    ],
    "data-pipeline": [
        (
            "when the local Airflow metadata database is not reset",
            "running `airflow db reset -y` first avoids it",
        ),
        (
            "when Spark picks a UI port that is already taken",
            "setting spark.ui.enabled=false avoids it",
        ),
        (
            "around the daylight saving change",
            "it hard-codes Lisbon offsets; rerun it after the change weekend",
        ),
        (
            "when moto's S3 mock is shared between tests",
            "using a fresh mock per test makes it stable",
        ),
        (
            "when it runs after the DAG import tests",
            "the import cache leaks between tests; run it in a separate process",
        ),
        (
            "when the Kafka test container needs more than 30 seconds to start",
            "raising the fixture timeout to 90 seconds fixes it",
        ),
    ],
    "mobile-app": [
        ("on the first simulator boot of the day", "running it a second time passes"),
        (
            "when animations are enabled in the simulator",
            "disabling animations in the Detox config fixes it",
        ),
        (
            "with a non-English simulator locale",
            "setting the locale to en-US in .detoxrc.js fixes it",
        ),
        (
            "when Jest runs with more than 4 workers",
            "running with --maxWorkers=50% avoids it",
        ),
        ("because it uses real timers", "switching the test to fake timers fixes it"),
        (
            "when the beta API is slow to answer",
            "mocking the network layer with msw makes it stable",
        ),
    ],
}

FLAKY_TEMPLATES = [
    "{test} in {file} fails intermittently {cond}; {remedy}.",
    "{test} is flaky {cond}. {Remedy}.",
    "Seen several times: {test} ({file}) breaks {cond}; {remedy}.",
    "Don't trust a red {test} {cond}: {remedy}.",
    "{test} flakes {cond}; {remedy}.",
]

ERROR_TEMPLATES = [
    "`{err}` shows up {ctx}; {fix}.",
    "If you see {err} {ctx}, {fix}.",
    "{err}: this happens {ctx}. Fix: {fix}.",
    "Lesson: {ctx}, expect {err}; {fix}.",
    "Got `{err}` {ctx}. What worked: {fix}.",
]

TICKET_TEMPLATES = [
    "{T} tracks a bug where {problem}; status: {status}.",
    "{Problem} (filed as {T}, assigned to {person}).",
    "{person} opened {T} after noticing that {problem}.",
    "{T} ({status}): {problem}.",
    "Known issue {T}: {problem}. {person} is looking into it.",
    "Bug {T}, reported by {reporter}: {problem}.",
]
PR_TEMPLATES = [
    "PR #{n} by {person} fixed {T} by {fix}.",
    "{T} was closed by PR #{n}; the fix was {fix}.",
    "The fix for {T}, where {problem}, was {fix} (PR #{n}).",
    "{person} merged PR #{n} for {T}: {fix}.",
]
EPISODE_TEMPLATES = [
    "Worked on {T} ({problem}); the fix was {fix}, and {after}.",
    "Fixed {T} on {date} by {fix}; {after}.",
    "{T} looked like a one-liner but {after}; the final change was {fix}.",
]
REPORTERS = {
    "shop-api": [
        "customer support",
        "Beatriz during regression testing",
        "a customer through Trustpilot",
        "the finance team",
        "a Sentry alert",
    ],
    "data-pipeline": [
        "finance",
        "the marketing analysts",
        "an Elementary alert",
        "Olu while building a dashboard",
        "a dbt test failure",
    ],
    "mobile-app": [
        "App Store reviews",
        "Kenji during regression testing",
        "a Sentry crash alert",
        "customer support",
        "a beta tester",
    ],
}
EPISODE_AFTER = {
    "shop-api": [
        "it needed a data fix for existing rows",
        "reproducing it required two concurrent requests",
        "Priya asked for a follow-up ticket to remove the old code path",
        "the regression test had to use the Postgres fixture, not a mock",
        "the change shipped in the next Friday deploy",
    ],
    "data-pipeline": [
        "it needed a backfill of 30 days",
        "Ingrid asked for a row count comparison before merging",
        "reproducing it required the prod manifest",
        "the Looker view had to change in the other repo",
        "the model needed a full refresh once",
    ],
    "mobile-app": [
        "it only reproduced on a physical Android 8 device",
        "Noor asked for screenshots on both platforms",
        "the fix also needed a CodePush release",
        "it required a new Detox scenario",
        "the change had to wait for the next store release",
    ],
}
REVIEW_ASKS = [
    "a test for the failure path",
    "the ticket id in the PR title",
    "smaller commits",
    "a note on how the change was tested",
    "updated docs",
    "a log line for the new branch",
    "type annotations on the new helpers",
    "a rollback plan",
    "numbers before and after the change",
    "the debug prints removed",
    "clearer names for the new variables",
    "a feature flag around the change",
]
REVIEW_TEMPLATES = [
    "In review of a change to {path}, {person} asked for {ask}.",
    "{person}'s review feedback on {path}: include {ask} next time.",
    "Lesson from a review by {person}: changes to {path} should come with {ask}.",
]
DEP_TEMPLATES = [
    "{lib} is pinned to {ver} because {reason}.",
    "We keep {lib} at {ver}: {reason}.",
    "Do not bump {lib} past {ver} yet; {reason}.",
    "The current pin for {lib} is {ver} ({reason}).",
]
ENV_TEMPLATES = [
    "{var} sets {meaning}; it defaults to {default}.",
    "The {var} environment variable controls {meaning} (default: {default}).",
    "{var} controls {meaning}. Default: {default}.",
    "Locally, {var} is {default}; it sets {meaning}.",
]
INCIDENT_TEMPLATES = [
    "On {date}, {what}; the root cause was {cause}. Follow-up: {action}.",
    "Incident {date}: {what}. Cause: {cause}. Since then, {action}.",
    "Postmortem {date}: {what} because of {cause}; now {action}.",
]
MODULE_TEMPLATES = [
    "{path} {desc}.",
    "The code that {desc} lives in {path}.",
    "{person} wrote most of {path}, which {desc}.",
    "If you need to change the part that {desc}, start in {path}.",
    "{path} ({loc} lines) {desc}.",
]
OWNER_TEMPLATES = [
    "{person} is the usual reviewer for {path}.",
    "Changes to {path} need a review from {person}.",
    "Ask {person} before restructuring {path}; they know its history.",
]
HISTORY_TEMPLATES = [
    "{path} was refactored in {month} {year} by {person} to {reason}.",
    "In {month} {year}, {person} reworked {path} to {reason}.",
]
ROLE_TEMPLATES = [
    "{name} is the {role} on {scope}.",
    "{name} works on {scope} as the {role}.",
    "On the {scope} team, {name} is the {role}.",
]
FEATURE_TEMPLATES = [
    "Status as of {date}: {feature}, {status}.",
    "Status of {feature} ({date}): {status}.",
    "{Feature}: {status} (as of {date}).",
]


NOW = date(2024, 6, 30)  # the day the memory store is evaluated
_MONTH_NUM = {m.lower(): i for i, m in enumerate(MONTHS, 1)}


def newest_date_cap(value: str) -> float | None:
    """Days between NOW and the latest past date named in value (None if none)."""
    found: list[date] = []
    for y, m, d in re.findall(r"\b(20\d\d)-(\d\d)-(\d\d)\b", value):
        found.append(date(int(y), int(m), int(d)))
    for d, mon, y in re.findall(
        r"\b(?:(\d{1,2}) )?(" + "|".join(MONTHS) + r") (20\d\d)\b", value
    ):
        found.append(date(int(y), _MONTH_NUM[mon.lower()], int(d) if d else 28))
    for y in re.findall(r"\b(202[4-9])\b", value):
        found.append(date(int(y), 1, 1))
    past = [d for d in found if d <= NOW]
    if not past:
        return None
    return float((NOW - max(past)).days)


def rand_date(rng, start=(2023, 6), end=(2024, 6)) -> str:
    y0, m0 = start
    y1, m1 = end
    months = (y1 - y0) * 12 + (m1 - m0)
    k = rng.randint(0, months)
    y, m = y0 + (m0 - 1 + k) // 12, (m0 - 1 + k) % 12 + 1
    return f"{y}-{m:02d}-{rng.randint(1, 28):02d}"


def gen_scope(g: Gen, pool, protected_names: set[str]):
    rng, scope = g.rng, pool.SCOPE
    people = [n for n, _ in pool.PEOPLE]
    P = "project"

    # people
    for name, role in pool.PEOPLE:
        if name in protected_names:
            continue
        g.add(P, scope, g.fill(ROLE_TEMPLATES, name=name, role=role, scope=scope))
    for s in pool.PEOPLE_FACTS:
        g.add(P, scope, s)

    # modules: purpose plus one or two more aspects
    for path, desc in pool.MODULES:
        loc = (
            rng.randrange(30, 300, 5)
            if path.endswith(".sql")
            else rng.randrange(80, 900, 10)
        )
        g.add(
            P,
            scope,
            g.fill(
                MODULE_TEMPLATES, path=path, desc=desc, person=g.pick(people), loc=loc
            ),
        )
        reasons = [
            r for suffixes, r in pool.REFACTOR_REASONS if path.endswith(suffixes)
        ]
        kinds = ["owner", "tests", "history"] if reasons else ["owner", "tests"]
        aspects = rng.sample(kinds, k=rng.choice([2, len(kinds)]))
        for a in aspects:
            if a == "owner":
                g.add(
                    P, scope, g.fill(OWNER_TEMPLATES, path=path, person=g.pick(people))
                )
            elif a == "history":
                g.add(
                    P,
                    scope,
                    g.fill(
                        HISTORY_TEMPLATES,
                        path=path,
                        person=g.pick(people),
                        month=g.pick(MONTHS),
                        year=rng.choice([2022, 2023, 2024]),
                        reason=g.pick(reasons),
                    ),
                )
            else:
                tp = test_path(path, scope)
                n, cov = rng.randint(4, 60), rng.randint(55, 98)
                if tp.endswith("schema.yml"):
                    g.add(P, scope, f"{path} has {n} dbt tests declared in {tp}.")
                elif rng.random() < 0.5:
                    g.add(
                        P,
                        scope,
                        f"{path} is covered by {tp} ({n} tests, {cov}% line coverage).",
                    )
                else:
                    g.add(
                        P,
                        scope,
                        f"Tests for {path} live in {tp}; coverage sits around {cov}%.",
                    )

    # tickets, their fixes (project) and agent episodes
    lo, hi = pool.TICKET_RANGE
    tickets = rng.sample(range(lo, hi), len(pool.PROBLEMS))
    prs = rng.sample(range(*pool.PR_RANGE), len(pool.PROBLEMS))
    for (problem, fix), num, pr in zip(pool.PROBLEMS, tickets, prs):
        T = f"{pool.TICKET}-{num}"
        g.add(
            P,
            scope,
            g.fill(
                TICKET_TEMPLATES,
                T=T,
                problem=problem,
                Problem=cap(problem),
                status=g.pick(pool.STATUSES),
                person=g.pick(people),
                reporter=g.pick(REPORTERS[scope]),
            ),
        )
        if rng.random() < 0.65:
            g.add(
                P,
                scope,
                g.fill(
                    PR_TEMPLATES,
                    n=pr,
                    person=g.pick(people),
                    T=T,
                    fix=fix,
                    problem=problem,
                ),
            )
        if rng.random() < 0.55:
            g.add(
                "agent",
                scope,
                g.fill(
                    EPISODE_TEMPLATES,
                    T=T,
                    problem=problem,
                    fix=fix,
                    date=rand_date(rng),
                    after=g.pick(EPISODE_AFTER[scope]),
                ),
            )

    for lib, ver, reason in pool.DEPS:
        g.add(
            P,
            scope,
            g.fill(DEP_TEMPLATES, lib=lib, ver=ver, reason=reason),
            key=f"deps.{lib}",
        )
    for var, meaning, default in pool.ENV:
        g.add(
            P,
            scope,
            g.fill(ENV_TEMPLATES, var=var, meaning=meaning, default=default),
            key=f"env.{var}",
        )
    for when, what, cause, action in pool.INCIDENTS:
        g.add(
            P,
            scope,
            g.fill(
                INCIDENT_TEMPLATES, date=when, what=what, cause=cause, action=action
            ),
        )
    for s in pool.CONVENTIONS + pool.ADRS:
        g.add(P, scope, s)

    # scope-specific entities
    if hasattr(pool, "ENDPOINTS"):
        for m, route, behaviour in pool.ENDPOINTS:
            ep = f"{m} {route}"
            g.add(
                P,
                scope,
                g.pick(["{ep} {b}.", "The {ep} endpoint {b}."]).format(
                    ep=ep, b=behaviour
                ),
                key=f"endpoint.{ep}",
            )
            if rng.random() < 0.7:
                ms = rng.choice([18, 25, 40, 60, 85, 120, 160, 240, 350])
                g.add(
                    P,
                    scope,
                    g.pick(
                        [
                            "p95 latency for {ep} is about {ms} ms over the last 30 days.",
                            "{ep} peaks at about {rps} requests per second, with p95 around {ms} ms.",
                        ]
                    ).format(ep=ep, ms=ms, rps=rng.choice([3, 8, 15, 40, 90, 150])),
                )
            if rng.random() < 0.6:
                if route.startswith("/internal"):
                    auth = "a staff SSO session"
                elif route.startswith("/partner"):
                    auth = "an HMAC-signed partner request"
                elif route.startswith(
                    (
                        "/v1/me",
                        "/v1/orders",
                        "/v1/cart",
                        "/v1/checkout",
                        "/v1/auth/refresh",
                    )
                ):
                    auth = "a customer access token"
                else:
                    auth = "no authentication"
                g.add(
                    P,
                    scope,
                    g.pick(["{ep} requires {a}.", "Auth for {ep}: {a}."]).format(
                        ep=ep, a=auth
                    ),
                )
            if rng.random() < 0.5:
                caller = g.pick(
                    [
                        "the storefront",
                        "the mobile app",
                        "the back office",
                        "both the storefront and the mobile app",
                        "the partner integrations",
                    ]
                )
                g.add(P, scope, f"{ep} is called mainly by {caller}.")
    if hasattr(pool, "TABLES"):
        for table, grain, purpose in pool.TABLES:
            g.add(
                P,
                scope,
                g.pick(
                    [
                        "{t} has {g}; it is used for {p}.",
                        "The grain of {t} is {g}, built for {p}.",
                    ]
                ).format(t=table, g=grain, p=purpose),
                key=f"table.{table.lower()}",
            )
            g.add(
                P,
                scope,
                g.pick(
                    [
                        "{t} holds about {n} million rows and is refreshed {f}.",
                        "{t}: roughly {n} million rows, refreshed {f}.",
                    ]
                ).format(
                    t=table,
                    n=rng.choice([0.4, 2, 6, 13, 41, 88, 240, 1300]),
                    f=g.pick(
                        [
                            "hourly",
                            "nightly",
                            "every morning at 05:00 UTC",
                            "on every dbt run",
                        ]
                    ),
                ),
            )
            if rng.random() < 0.8:
                g.add(P, scope, f"Questions about {table} go to {g.pick(people)}.")
    if hasattr(pool, "SCREENS"):
        for name, desc in pool.SCREENS:
            g.add(
                P,
                scope,
                g.pick(["The {n} screen shows {d}.", "{n}Screen renders {d}."]).format(
                    n=name, d=desc
                ),
            )
            g.add(
                P,
                scope,
                f"The {name} screen is opened about {rng.choice([4, 12, 35, 80, 160, 310])}k times a week; median time to interactive is {rng.choice([180, 260, 340, 420, 610])} ms.",
            )
            if rng.random() < 0.5:
                event = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", name) + " Viewed"
                g.add(
                    P,
                    scope,
                    f'Opening the {name} screen sends the Segment event "{event}".',
                )
    for path, func, desc in getattr(pool, "FUNCTIONS", []):
        g.add(
            P,
            scope,
            g.pick(
                [
                    "`{f}` in {p} {d}.",
                    "{p}: {f} {d}.",
                    "The function {f} ({p}) {d}.",
                ]
            ).format(f=func, p=path, d=desc),
        )
    for feature, status in getattr(pool, "FEATURES", []):
        g.add(
            P,
            scope,
            g.fill(
                FEATURE_TEMPLATES,
                feature=feature,
                Feature=cap(feature),
                status=status,
                date=rand_date(rng, (2024, 1), (2024, 6)),
            ),
        )
    for s in getattr(pool, "EXTRA", []) + getattr(pool, "GLOSSARY", []):
        g.add(P, scope, s)
    for name, handle in getattr(pool, "HANDLES", {}).items():
        g.add(
            P,
            scope,
            g.pick(
                ["{n}'s GitHub handle is @{h}.", "{n} is @{h} on GitHub and Slack."]
            ).format(n=name, h=handle),
        )
    for lib, old in getattr(pool, "OLD_PINS", []):
        g.add(
            P,
            scope,
            g.pick(
                [
                    "{l} was pinned to {v} until the {y} upgrade.",
                    "Older note: {l} stays at {v} until the tests are fixed.",
                ]
            ).format(l=lib, v=old, y=rng.choice([2022, 2023])),
            age=round(rng.uniform(220, 400), 1),
        )
    for decision in getattr(pool, "RETRO", []):
        g.add(
            P,
            scope,
            g.pick(
                [
                    "In the {d} retro, the {s} team agreed to {x}.",
                    "Retro decision ({d}): {x}.",
                    "The team decided at the {d} retrospective to {x}.",
                ]
            ).format(d=rand_date(rng), s=scope, x=decision),
        )
    for channel, purpose in getattr(pool, "CHANNELS", []):
        g.add(
            P,
            scope,
            g.pick(["{c} is the Slack channel for {p}.", "Use {c} for {p}."]).format(
                c=channel, p=purpose
            ),
        )

    # agent lessons
    A = "agent"
    for s in pool.AGENT_NOTES:
        g.add(A, scope, s)
    for cmd, took in getattr(pool, "COMMANDS", []):
        g.add(
            A,
            scope,
            g.pick(
                [
                    "`{c}` takes {t} in the sandbox.",
                    "Expect `{c}` to take {t}.",
                    "Timing note: `{c}` needs {t}.",
                ]
            ).format(c=cmd, t=took),
        )
    for test, file in pool.FLAKY_TESTS:
        cond, remedy = g.pick(FLAKY_CAUSES[scope])
        g.add(
            A,
            scope,
            g.fill(
                FLAKY_TEMPLATES,
                test=test,
                file=file,
                cond=cond,
                remedy=remedy,
                Remedy=cap(remedy),
            ),
        )
    for err, ctx, fix in pool.ERRORS:
        g.add(A, scope, g.fill(ERROR_TEMPLATES, err=err, ctx=ctx, fix=fix))
    paths = [p for p, _ in pool.MODULES]
    for person in people:
        for path in rng.sample(paths, 5):
            g.add(
                A,
                scope,
                g.fill(
                    REVIEW_TEMPLATES,
                    person=person.split()[0],
                    path=path,
                    ask=g.pick(REVIEW_ASKS),
                ),
            )


def gen_global(g: Gen):
    rng, G = g.rng, _pools_global
    for title, author in G.BOOKS:
        ops = G.FICTION_OPINIONS if title in G.FICTION else G.BOOK_OPINIONS
        g.add(
            "user",
            None,
            g.pick(
                [
                    "The user read {t} by {a} in {y} and {o}.",
                    "{t} ({a}): the user read it in {y} and {o}.",
                    "The user read {a}'s {t} in {y}; she {o}.",
                ]
            ).format(
                t=title,
                a=author,
                y=rng.choice([2019, 2020, 2021, 2022, 2023, 2024]),
                o=g.pick(ops),
            ),
        )
    for s in G.USER_FACTS + G.USER_PREFS:
        g.add("user", None, s)
    for tech, op in G.OPINIONS:
        g.add("user", None, g.fill(G.OPINION_TEMPLATES, tech=tech, opinion=op))
    for city, what in G.TRIPS:
        g.add("user", None, g.fill(G.TRIP_TEMPLATES, city=city, what=what))
    for day, what in G.CALENDAR:
        g.add("user", None, g.fill(G.CALENDAR_TEMPLATES, day=day, what=what))
    for year, what in G.HISTORY:
        g.add("user", None, g.fill(G.HISTORY_TEMPLATES, year=year, what=what))
    for s in G.AGENT_NOTES + G.SANDBOX_TOOLS:
        g.add("agent", None, s)
    for err, ctx, fix in G.AGENT_ERRORS:
        g.add("agent", None, g.fill(ERROR_TEMPLATES, err=err, ctx=ctx, fix=fix))


# ---------------------------------------------------------------------------
# assembly
# ---------------------------------------------------------------------------


def build():
    rng = random.Random(SEED)
    blocks = []
    for mod in (_blocks_user, _blocks_project, _blocks_agent):
        blocks += parse_blocks(mod.BLOCKS)

    protected: dict[str | None, set[str]] = {}
    pools = (_pools_shop, _pools_data, _pools_mobile)
    for pool in pools:
        names = set()
        for b in blocks:
            for f in b["facts"]:
                if f["scope"] == pool.SCOPE:
                    names |= {n for n, _ in pool.PEOPLE if n in f["value"]}
        protected[pool.SCOPE] = names

    g = Gen(rng)
    for pool in pools:
        gen_scope(g, pool, protected[pool.SCOPE])
    gen_global(g)

    # ages for hand-written facts
    all_facts: list[dict] = []
    queries: list[dict] = []
    for b in blocks:
        has_stale = any(d["stale"] for d in b["distractors"])
        for f in b["facts"]:
            if f["age"] is None:
                f["age"] = (
                    round(rng.uniform(0, 120), 1)
                    if has_stale
                    else draw_age(rng, f["slot"])
                )
        newest = max((f["age"] for f in b["facts"]), default=0.0)
        for d in b["distractors"]:
            if d["age"] is None:
                if d["stale"]:
                    d["age"] = round(min(400.0, newest + rng.uniform(90, 300)), 1)
                else:
                    d["age"] = draw_age(rng, d["slot"])
            if d["stale"] and d["age"] <= newest:
                raise ValueError(
                    f"stale distractor not older than its fact: {d['value']}"
                )
        all_facts += b["facts"] + b["distractors"]
    for f in g.facts:
        if f["age"] is None:
            f["age"] = draw_age(rng, f["slot"])
        all_facts.append(f)

    # a fact cannot be older than a past date it mentions
    for f in all_facts:
        cap_days = newest_date_cap(f["value"])
        if cap_days is not None and f["age"] > cap_days:
            f["age"] = round(rng.uniform(0, cap_days), 1)
    for b in blocks:
        for d in b["distractors"]:
            if d["stale"]:
                for f in b["facts"]:
                    if f["age"] >= d["age"]:
                        f["age"] = round(d["age"] * rng.uniform(0.2, 0.6), 1)

    for f in all_facts:
        if f["tags"] is None:
            f["tags"] = derive_tags(f["value"], f["slot"])

    # relevant facts of each query: its block's F facts plus `also=` references by key
    by_key: dict[str, dict] = {}
    for b in blocks:
        for f in b["facts"]:
            if f["key"]:
                if f["key"] in by_key:
                    raise ValueError(f"hand-written key used twice: {f['key']}")
                by_key[f["key"]] = f
    for b in blocks:
        for q in b["queries"]:
            q["rel_facts"] = b["facts"] + [by_key[k] for k in q["also"]]

    # drop derived tags that would make a paraphrase query lexically matchable
    dropped = 0
    for b in blocks:
        for q in b["queries"]:
            if q["kind"] != "paraphrase":
                continue
            qt = content_tokens(q["query"])
            for f in q["rel_facts"]:
                keep = [
                    t
                    for t in f["tags"]
                    if not any(_clash(a, t2) for a in qt for t2 in content_tokens(t))
                ]
                if len(keep) != len(f["tags"]):
                    dropped += len(f["tags"]) - len(keep)
                    f["tags"] = keep or ["note"]

    # ids
    order = list(range(len(all_facts)))
    rng.shuffle(order)
    width = max(4, len(str(len(all_facts))))
    for i, idx in enumerate(order, 1):
        all_facts[idx]["id"] = f"f{i:0{width}d}"

    for b in blocks:
        for q in b["queries"]:
            rel = [f["id"] for f in q["rel_facts"]]
            scopes = {f["scope"] for f in q["rel_facts"]} - {None}
            if len(scopes) > 1:
                raise ValueError(f"query mixes scopes: {q['query']}")
            if q["scope"] != "inherit":
                qs = q["scope"]
            elif scopes:
                qs = next(iter(scopes))
            else:  # only global facts: ask from no workspace, or from inside one
                qs = None if rng.random() < 0.55 else rng.choice(SCOPES)
            queries.append(
                {"query": q["query"], "scope": qs, "relevant": rel, "kind": q["kind"]}
            )
    rng.shuffle(queries)
    for i, q in enumerate(queries, 1):
        q["id"] = f"q{i:03d}"

    facts_out = sorted(
        (
            {
                "id": f["id"],
                "slot": f["slot"],
                "scope": f["scope"],
                "key": f["key"],
                "value": f["value"],
                "tags": f["tags"],
                "age_days": f["age"],
            }
            for f in all_facts
        ),
        key=lambda f: f["id"],
    )
    queries_out = [
        {
            "id": q["id"],
            "query": q["query"],
            "scope": q["scope"],
            "relevant": q["relevant"],
            "kind": q["kind"],
        }
        for q in queries
    ]
    return facts_out, queries_out, dropped


def main():
    facts, queries, dropped = build()
    with FACTS_PATH.open("w", encoding="utf-8") as fh:
        for f in facts:
            fh.write(json.dumps(f, ensure_ascii=False) + "\n")
    with QUERIES_PATH.open("w", encoding="utf-8") as fh:
        for q in queries:
            fh.write(json.dumps(q, ensure_ascii=False) + "\n")
    print(
        f"wrote {len(facts)} facts, {len(queries)} queries ({dropped} clashing tags dropped)"
    )


if __name__ == "__main__":
    main()
