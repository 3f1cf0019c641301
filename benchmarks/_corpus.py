"""Deterministic synthetic corpus of agent memory facts and user queries.

    python benchmarks/_corpus.py        # samples, distinct ratio, 1M timing

Facts and queries are assembled from sentence templates filled with words drawn
from sizeable vocabularies (people, services, libraries, tools, paths, error
strings, tests, versions, dates...). Word choice within each vocabulary is
Zipf-like (probability of the k-th entry ~ 1/k), so term frequencies are
long-tailed the way real notes are: a few services, names and files come up
all the time, most come up rarely. Numbers (dates, versions, line numbers,
ticket ids, durations) make most values distinct even at a million facts.

Everything is pure Python driven by ``random.Random(seed)``: the same ``n`` and
``seed`` always give the same output, with no download and no network. Nothing
is imported from ``ctxslots``.
"""

from __future__ import annotations

import random
import string
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

__all__ = ["SCOPES", "SLOTS", "CorpusFact", "generate_facts", "generate_queries"]

SLOTS: tuple[str, str, str] = ("user", "project", "agent")
"""The three memory slots a generated fact can belong to."""

SCOPES: tuple[str, str] = ("repo-alpha", "repo-beta")
"""The scopes of project and agent facts (user facts are global: scope ``None``)."""

# Cumulative slot shares: 20% user, 45% project, 35% agent.
_USER_SHARE = 0.20
_PROJECT_SHARE = 0.65
_KEY_SHARE = 0.30


@dataclass(frozen=True, slots=True)
class CorpusFact:
    """One generated memory fact.

    ``scope`` is ``None`` for user facts and one of :data:`SCOPES` otherwise.
    ``key`` is ``None`` for about 70% of facts; when set it is unique per
    ``(slot, scope)`` over everything one :func:`generate_facts` call yields.
    """

    slot: str
    scope: str | None
    key: str | None
    value: str
    tags: tuple[str, ...]


# ---------------------------------------------------------------------------
# Vocabularies. Order matters: earlier entries are drawn more often.
# ---------------------------------------------------------------------------

def _w(text: str) -> tuple[str, ...]:
    return tuple(text.split())


_NAMES = _w("""
Alice Bob Priya Marco Chen Sofia Omar Lena Diego Yuki Fatima Jonas Aisha Tom
Mei Carlos Hannah Ravi Elena Kwame Ines Lucas Noor Pavel Grace Hiro Amara Felix
Zara Mateo Ingrid Tariq Chloe Dmitri Leila Sam Nadia Oscar Rosa Kenji Maya Ahmed
Clara Viktor Anya Bruno Isla Femi Greta Raj Sven Lucia Ayo Mila Tobias Sana
Hugo Keiko Nikolai Emma Arjun Beatriz Finn Olga Kofi Rania Stefan Yara Malik
Daria Jamal Ines Petra Ibrahim Wen Luca Marta Kai Selin Andre Vera Idris
Johanna Ali Ruth Emil Zoe Nils Farah Lars Mina Rafael Tess Bilal Ana Jun
Helga Musa Lotte Cyrus Rhea Anton Dalia Ezra Gia Henrik Ivy Jakob Kira Leon
Maren Nico Odette Pia Quentin Rita Silas Talia Uma Vlad Wanda Xavier Yusuf Zeno
""")

_SERVICES = _w("""
billing auth payments search checkout gateway notifications inventory users
orders shipping analytics reporting ingest scheduler mailer webhooks catalog
pricing invoicing accounts sessions uploads media thumbnails recommendations
ledger fraud onboarding support chat audit exports imports sync indexer crawler
feeds profiles subscriptions refunds tax coupons loyalty reviews ratings
geocoder routing dispatch tracking metrics alerts logging tracing billing-worker
auth-proxy admin dashboard portal cms translations i18n payroll timesheets
contracts quotes leads campaigns segments experiments flags config secrets
vault registry builder deployer runner queue cache-warmer pdf-renderer
""")

_LANGS = _w("""
Python TypeScript Go Rust JavaScript Java Kotlin Ruby SQL Bash C++ Swift
Elixir Scala C# PHP Haskell Lua Zig OCaml Clojure Dart Terraform YAML
""")

_EXT_BY_KIND = _w("py py py ts ts go rs js tsx java kt rb sql sh yaml toml json md")

_LIBS = _w("""
pytest requests numpy pandas FastAPI Django Flask SQLAlchemy pydantic celery
redis-py boto3 httpx aiohttp uvicorn gunicorn alembic psycopg2 asyncpg mypy
ruff black isort poetry React Next.js Vite webpack Jest Vitest Playwright
Cypress Express NestJS Prisma Zod axios lodash Tailwind Storybook ESLint
Prettier tokio serde reqwest clap anyhow thiserror sqlx axum hyper tracing
gin cobra viper testify zap gorm grpc-go protobuf Spring Hibernate Gradle
Maven JUnit Mockito Kafka RabbitMQ Elasticsearch OpenSearch Postgres MySQL
SQLite MongoDB DynamoDB Redis Memcached ClickHouse Snowflake BigQuery dbt
Airflow Dagster Spark Flink Ray PyTorch TensorFlow scikit-learn transformers
LangChain OpenTelemetry Prometheus Grafana Sentry Datadog Loki Jaeger
Terraform Pulumi Ansible Helm Kustomize ArgoCD Flux Istio Envoy nginx
Traefik Caddy Docker Podman Kubernetes Nomad Consul Vault Packer Bazel
pnpm yarn npm pip uv conda tox nox pre-commit hypothesis factory_boy
freezegun responses vcrpy Faker marshmallow attrs structlog loguru rich
click typer jinja2 Pillow opencv lxml BeautifulSoup Scrapy Selenium
""")

_TOOLS = _w("""
git docker make kubectl pytest npm pnpm terraform helm curl jq grep ripgrep
fzf tmux ssh rsync psql redis-cli aws gcloud az gh poetry uv pip cargo go
bazel gradle mvn yarn tox pre-commit black ruff mypy eslint prettier tsc
jest vitest playwright k9s stern lazygit htop strace gdb lldb valgrind perf
wireshark tcpdump nmap openssl sqlite3 duckdb httpie ngrok minikube kind
""")

_EDITORS: tuple[str, ...] = (
    "VS Code", "Neovim", "Vim", "Emacs", "PyCharm", "IntelliJ", "Zed", "Sublime Text",
    "Helix", "Cursor", "GoLand", "WebStorm", "RustRover", "Xcode", "nano",
)

_THEMES: tuple[str, ...] = (
    "dark", "Solarized", "Gruvbox", "Dracula", "One Dark", "Nord", "Monokai",
    "light", "Catppuccin", "Tokyo Night", "GitHub", "Material", "Ayu", "Everforest",
)

_INDENTS: tuple[str, ...] = (
    "tabs over spaces", "four spaces over tabs", "two-space indentation",
    "spaces over tabs", "tabs for indentation and spaces for alignment",
)

_SHELLS = _w("zsh bash fish nushell PowerShell")

_OSES = _w("macOS Ubuntu Fedora Arch Debian Windows NixOS Pop!_OS")

_ENVS = _w("staging production dev qa canary preview sandbox perf demo")

_DAYS = _w("Friday Monday Tuesday Thursday Wednesday Saturday Sunday")

_MONTHS = _w("""
January February March April May June July August September October
November December
""")

_CITIES = _w("""
Berlin London Lisbon Toronto Bangalore Tokyo Austin Seattle Nairobi Madrid
Paris Amsterdam Singapore Sydney Warsaw Stockholm Dublin Zurich Lagos Denver
Chicago Boston Montreal Seoul Istanbul Cairo Mexico-City Bogota Oslo Prague
""")

_TIMEZONES = _w("""
UTC CET PST EST IST JST GMT BST AEST EET CST MST
""")

_DIRS = _w("""
src src/api src/core src/models src/utils app lib internal pkg cmd services
tests scripts deploy infra web frontend backend src/db src/auth src/jobs
src/workers src/handlers src/routes src/schemas config migrations tools docs
packages/ui packages/shared apps/web apps/mobile src/services src/clients
""")

_MODULES = _w("""
routes models views handlers utils client server config settings schema
schemas serializers tasks worker workers db database session auth middleware
cache queue events consumer producer retry backoff pagination validators forms
admin urls main app cli commands helpers errors exceptions types constants
loader parser formatter renderer exporter importer storage repository service
controller gateway adapter mapper factory registry scheduler cron jobs
webhook notifier mailer templates fixtures conftest factories migrations
metrics logging tracing health readiness rate_limit throttle permissions
policies tokens crypto hashing signing payments invoices refunds ledger
orders cart checkout inventory search indexer ranking feed profile users
accounts billing sync uploads thumbnails pdf reports dashboard charts
""")

_NOUNS = _w("""
test build deploy release migration config cache queue database index schema
endpoint request response token session cookie header timeout retry lock
transaction connection pool worker job task branch commit pipeline container
image cluster node pod service dependency package version module function
class method variable flag feature bug fix regression error warning log
metric alert dashboard trace span query table column row key value file
directory path script command hook webhook event message payload batch stream
buffer socket port certificate secret credential permission role user account
invoice refund payment order cart customer subscription plan price discount
coupon report export import upload download thumbnail template layout page
component route handler middleware controller model view serializer
validator parser fixture mock stub snapshot benchmark profile memory CPU disk
network latency throughput quota limit budget backlog ticket sprint review
changelog readme doc comment type annotation lint formatter linter compiler
runtime interpreter binary artifact registry mirror proxy gateway load-balancer
DNS record domain bucket volume replica shard partition offset consumer
producer topic channel cron schedule window freeze rollback hotfix patch
""")

_VERBS = _w("""
fails breaks times-out hangs crashes passes flakes leaks retries blocks
slows-down spikes drops duplicates corrupts skips ignores overrides
""")

_ACTIONS = _w("""
run restart rebuild redeploy rollback bump pin upgrade downgrade cache clear
reindex migrate seed rotate revoke refresh invalidate scale drain cordon
rerun retry backfill vacuum compact prune squash rebase cherry-pick tag
""")

_ADJS = _w("""
flaky slow broken stale legacy new old deprecated experimental internal
public private shared async sync cached nightly weekly manual automatic
critical optional noisy silent duplicate missing empty large small
""")

_TEST_ADJS = _w("flaky failing broken slow hanging red intermittent skipped")

_FLAGS = _w("""
-x -v -k -q -s --no-cache --force --dry-run --verbose --parallel -n auto
--lf --maxfail=1 --rebuild --no-verify --frozen-lockfile --strict
--timeout=60 --watch --fix --check --diff --all --prune --reuse-db
""")

_TAGS = _w("""
deploy testing preference ci db infra style security billing auth perf
workflow bug onboarding tooling release docs oncall api frontend backend
debugging migration env secrets monitoring flaky config git review
""")

_ERRORS: tuple[str, ...] = (
    "ConnectionResetError: [Errno 104] Connection reset by peer",
    "KeyError: '{ident}'",
    "TimeoutError: operation timed out after {n}s",
    "ModuleNotFoundError: No module named '{module}'",
    "ImportError: cannot import name '{ident}'",
    "AttributeError: 'NoneType' object has no attribute '{ident}'",
    "TypeError: unsupported operand type(s)",
    "ValueError: invalid literal for int() with base 10",
    "psycopg2.OperationalError: could not connect to server",
    "sqlite3.OperationalError: database is locked",
    "RecursionError: maximum recursion depth exceeded",
    "OSError: [Errno 28] No space left on device",
    "PermissionError: [Errno 13] Permission denied",
    "HTTP 502 Bad Gateway",
    "HTTP 429 Too Many Requests",
    "HTTP 500 Internal Server Error",
    "ECONNREFUSED 127.0.0.1:{port}",
    "ETIMEDOUT",
    "OOMKilled",
    "CrashLoopBackOff",
    "SIGSEGV",
    "exit code {code}",
    "panic: runtime error: index out of range",
    "java.lang.NullPointerException",
    "UnicodeDecodeError: 'utf-8' codec can't decode byte",
    "AssertionError: expected {n} but got {n2}",
    "TS2345: Argument of type 'string' is not assignable",
    "error[E0382]: borrow of moved value",
    "deadlock detected",
    "certificate verify failed",
)


# ---------------------------------------------------------------------------
# Templates. ``{field}`` placeholders name generator fields (see _Gen).
# Each fact template has a key stem used when the fact gets a key.
# ---------------------------------------------------------------------------

_USER_TEMPLATES: tuple[tuple[str, str], ...] = (
    ("The user prefers {editor} with the {theme} theme for {lang} files and wants {tool} configured the same way on every machine", "user.editor"),
    ("The user prefers {indent} in {lang} files and a line width of {width} columns enforced by {tool}", "user.style"),
    ("{name} is the user's manager and reviews every change to the {service} service before the {day} release at {hour}", "user.manager"),
    ("The user works from {city} in the {tz} timezone and is usually offline after {hour} except on {day}s", "user.timezone"),
    ("The user uses {shell} on {os} with {tool} aliases copied from {handle} and does not want them changed without asking", "user.shell"),
    ("The user dislikes long explanations and wants short answers with a {lang} snippet first when asking about the {service} {noun}", "user.answers"),
    ("The user's name is {name} and they lead the {service} team since {month} {year}", "user.name"),
    ("The user asked to never run {tool} {flag} against {path} on the {env} cluster without explicit confirmation", "user.safety"),
    ("The user prefers {lib} over {lib2} for new {lang} projects because it is easier to test", "user.library"),
    ("The user wants commit messages in the imperative mood and a ticket id like {ticket} in every subject", "user.commits"),
    ("The user is on vacation from {month} {dom} to {month2} {dom2} and {name} covers the {service} on-call", "user.vacation"),
    ("The user reads code on a small laptop screen so keep diffs to {path} under {lines} lines when possible", "user.diffs"),
    ("The user is learning {lang} since {month} {year} and likes a short note about {noun} idioms when the agent writes {lang} code", "user.learning"),
    ("The user prefers to review pull requests before {hour} and to pair with {name} on the {service} {noun} every {day}", "user.schedule"),
    ("The user's GitHub handle is {handle} and their email alias is {handle}@example.com", "user.handle"),
    ("The user wants {tool} output from {cmd} summarized rather than pasted in full when it is longer than {lines} lines", "user.output"),
)

_PROJECT_TEMPLATES: tuple[tuple[str, str], ...] = (
    ("Deploys of {service} to {env} run every {day} after the {hour} freeze and need approval from {name}", "deploy.day"),
    ("The {service} service is written in {lang} and lives in {path} with its tests under tests/{module}", "service.layout"),
    ("The project pins {version} because the next release breaks the {module} module in {path}", "deps.pin"),
    ("Database migrations for {service} live in {path} and are applied with {cmd} before every {env} deploy", "db.migrations"),
    ("The {service} API is served by {lib} behind {proxy} on port {port} in the {env} environment", "service.stack"),
    ("CI runs {cmd} on every pull request to {service} and blocks the merge if coverage of {path} drops below {pct}%", "ci.coverage"),
    ("The release branch {branch} was cut on {date} and only accepts hotfixes approved by {name}", "release.branch"),
    ("{name} owns the {service} service and is the person to ask about the {noun} in {path}", "owner.service"),
    ("The {env} database is {db} {major}.{minor} and is backed up nightly at {hour} {tz}", "db.version"),
    ("Feature flags live in {path} and the {service} team removes stale flags every {day}", "flags.location"),
    ("The {service} worker consumes the {topic} topic with a batch size of {n} and a {n2} second timeout", "queue.consumer"),
    ("Secrets for {env} are stored in {lib} and rotated every {n} days by {name}", "secrets.rotation"),
    ("The project uses {lib} for {noun} handling and {lib2} for structured logging across all services", "stack.libs"),
    ("Code style in {path} is enforced with {tool} and {tool2} in pre-commit and the line length is {width}", "style.tools"),
    ("The {service} dashboard in Grafana is at {url} and alerts page {name} when p99 latency exceeds {ms}ms", "monitoring.dashboard"),
    ("The {module} module in {path} is legacy code and should not be refactored until ticket {ticket} lands", "legacy.module"),
    ("Staging data for {service} is refreshed from a sanitized {env} snapshot every {day} at {hour} by {cmd}", "data.refresh"),
    ("The {service} service talks to {service2} over gRPC and retries {n} times with exponential backoff", "service.deps"),
    ("Release notes for {version} are written in CHANGELOG.md and reviewed by {name} before tagging", "release.notes"),
    ("The on-call rotation for {service} switches every {day} at {hour} and the runbook is at {url}", "oncall.rotation"),
    ("Local development uses {cmd} to start {db} and {lib} in containers before running the {service} tests", "dev.setup"),
    ("The team decided on {date} to move the {service} service from {lib} to {lib2} by the end of {month}", "decision.migration"),
    ("Integration tests for {service} in {path} need the {env} VPN and take about {n} minutes to run", "tests.integration"),
    ("The {noun} limit for the {service} API is {n} requests per minute per {noun2}", "api.limits"),
)

_AGENT_TEMPLATES: tuple[tuple[str, str], ...] = (
    ("Running {cmd} in {path} hides the {test_adj} {test} failure so run it without {flag} first", "learned.test"),
    ("The test {test} fails with {error} when the {service} container is not running", "learned.failure"),
    ("Fixed the import error in {path} on {date} by moving the {module} import inside the function", "fix.import"),
    ("The {test_adj} {test} in {path} is caused by a race in the {noun} cleanup and was reported as {ticket}", "learned.flaky"),
    ("When {tool} reports {error} on {env}, restarting the {service} pod with kubectl rollout restart usually fixes it", "learned.restart"),
    ("Last time the agent bumped {version} the {service} build broke with {error}", "learned.bump"),
    ("The agent should {action} the {noun} before running {cmd} or the {service} tests will use stale data", "procedure.stale"),
    ("{name} asked the agent to {action} the {service} {noun} every {day} and report the result in {channel}", "task.recurring"),
    ("The agent learned that {path} line {line} swallows {error} and logs it as a warning only", "learned.swallow"),
    ("Do not edit {path} by hand because it is generated by {cmd} from the {noun} schema", "rule.generated"),
    ("The {service} logs in {env} are noisy with {error} and the team agreed to ignore it until {date}", "learned.noise"),
    ("Running {cmd} takes about {n} minutes so the agent should use {flag} to run only the {module} tests", "procedure.fast"),
    ("The agent opened pull request #{pr} to {action} the {noun} in {path} and {name} requested changes", "task.pr"),
    ("To reproduce {error} locally, set {envvar}={n} and run {cmd} against the {service} fixtures", "learned.repro"),
    ("The agent tried to {action} the {noun} with {tool} on {date} but it failed because the {noun2} was locked", "learned.attempt"),
    ("The test {test} is skipped on CI since {date} because it depends on the {adj} {service} sandbox", "learned.skip"),
    ("The {service} health check at {url} returns {code} during deploys and that is expected", "learned.health"),
    ("Before touching {path}, the agent must read the notes from {name} about the {noun} invariants", "rule.read"),
)

# Qualifiers an agent appends to a note (source, date, ticket); added to some
# facts when the sentence stays within 30 words.
_SUFFIX_TEMPLATES: tuple[str, ...] = (
    ", according to {name}",
    " as of {date}",
    " since {date}",
    " (see {ticket})",
    ", noted on {date}",
    " per {name} in {channel}",
    ", confirmed by {name} on {date}",
    " until further notice",
    " for the {service} repo",
    ", see {url}",
)
_SUFFIX_SHARE = 0.4
_MAX_WORDS = 30

_QUERY_TEMPLATES: tuple[str, ...] = (
    "how do we deploy the {service} service on {day_l}s?",
    "why does {test} fail with {error_short}",
    "what editor does the user prefer",
    "fix the import error in {path}",
    "{test} is {test_adj} again",
    "who owns {service}?",
    "which version of {lib} are we pinned to and why",
    "can you {action} the {noun} in {path} before the {day} freeze",
    "run `{cmd}` and tell me what breaks",
    "the {service} build fails with \"{error}\" on {env}, any idea?",
    "where are the feature flags for {service}",
    "what's the on-call runbook for {service}? I think it's at {url}",
    "bump {lib} to {major}.{minor}.{patch}",
    "is it safe to {action} the {env} database right now",
    "{service} p99 latency spiked after the last deploy - can you check the {noun}",
    "what timezone is the user in",
    "how long do the {service} integration tests take",
    "add a retry with backoff to the {module} client in {path} so {error_short} stops killing the worker",
    "why is `{envvar}` set to {n} in {env}?",
    "migrate {service} from {lib} to {lib2}",
    "what did {name} say about the {noun} in {path}",
    "please write a {lang} test for {module}.{ident} that covers the {adj} case",
    "{error}",
    "{path}",
    "{service} {noun}",
    "rate limit for the {service} api?",
    "how do I start {db} locally for the {service} tests",
    "ugh, {test} is flaking again on CI - re-run it with {flag} and tell me if it's the {noun} race",
    "summarize what we know about the {service}-to-{service2} retry logic",
    "is {ticket} fixed yet? the {adj} {noun} in {path} still looks broken to me",
    "can you review PR #{pr} for {name}",
    "what's the line length for {tool}",
    "when was {branch} cut",
    "set up {tool} on my {os} laptop the way I like it",
    "does the user want tabs or spaces in {lang}",
    "open {url} and compare it with the {service} dashboard numbers from {day}",
)


# ---------------------------------------------------------------------------
# Generator
# ---------------------------------------------------------------------------

_FORMATTER = string.Formatter()


def _compile(template: str) -> tuple[str, tuple[str, ...]]:
    """Turn ``"a {x} b {y}"`` into ``("a {} b {}", ("x", "y"))``."""
    parts: list[str] = []
    names: list[str] = []
    for literal, field, _spec, _conv in _FORMATTER.parse(template):
        parts.append(literal.replace("{", "{{").replace("}", "}}"))
        if field is not None:
            parts.append("{}")
            names.append(field)
    return "".join(parts), tuple(names)


class _Gen:
    """Field generators bound to one ``random.Random`` instance."""

    def __init__(self, seed: int) -> None:
        rng = random.Random(seed)
        self.random = rnd = rng.random

        def randrange(start: int, stop: int | None = None) -> int:
            # Cheaper than Random.randrange; the tiny float bias does not matter here.
            if stop is None:
                return int(rnd() * start)
            return start + int(rnd() * (stop - start))

        def zipf(items: tuple[str, ...]) -> Callable[[], str]:
            # int(n ** U) for uniform U in [0, 1) has density ~ 1/x on [1, n):
            # a Zipf (s = 1) rank distribution for the price of one pow().
            n = len(items)

            def pick() -> str:
                return items[int(n ** rnd()) - 1]

            return pick

        name, service, lang, lib, tool = (
            zipf(_NAMES), zipf(_SERVICES), zipf(_LANGS), zipf(_LIBS), zipf(_TOOLS))
        noun, module, adj, action = zipf(_NOUNS), zipf(_MODULES), zipf(_ADJS), zipf(_ACTIONS)
        d, ext, flag, env = zipf(_DIRS), zipf(_EXT_BY_KIND), zipf(_FLAGS), zipf(_ENVS)
        verb = zipf(_VERBS)
        error_tpl = zipf(_ERRORS)
        day, month = zipf(_DAYS), zipf(_MONTHS)

        def path() -> str:
            r = rnd()
            if r < 0.35:
                return f"{d()}/{module()}.{ext()}"
            if r < 0.6:
                return f"services/{service()}/{module()}.{ext()}"
            if r < 0.8:
                return f"{d()}/{module()}/{module()}.{ext()}"
            return f"tests/{module()}/test_{module()}.py"

        def test() -> str:
            r = rnd()
            if r < 0.5:
                return f"test_{module()}_{noun().replace('-', '_').lower()}"
            if r < 0.8:
                return f"test_{noun().replace('-', '_').lower()}_{verb().replace('-', '_')}"
            return f"test_{service().replace('-', '_')}_{module()}_{randrange(1, 40)}"

        def ident() -> str:
            r = rnd()
            if r < 0.5:
                return f"{noun().replace('-', '_').lower()}_id"
            return f"{module()}_{noun().replace('-', '_').lower()}"

        def error() -> str:
            e = error_tpl()
            if "{" not in e:
                return e
            return e.format(ident=ident(), n=randrange(1, 120), n2=randrange(1, 120),
                            module=module(), port=randrange(3000, 9999),
                            code=randrange(1, 140))

        def error_short() -> str:
            return error().split(":", 1)[0]

        def version() -> str:
            return f"{lib()} {int(6 ** rnd())}.{randrange(0, 30)}.{randrange(0, 15)}"

        def cmd() -> str:
            r = rnd()
            if r < 0.3:
                return f"pytest {flag()} tests/{module()}"
            if r < 0.5:
                return f"make {action()}-{service()}"
            if r < 0.65:
                return f"npm run {action()}"
            if r < 0.8:
                return f"docker compose up {service()}"
            return f"{tool()} {action()} {flag()}"

        def date() -> str:
            if rnd() < 0.6:
                return f"{2021 + randrange(5)}-{randrange(1, 13):02d}-{randrange(1, 29):02d}"
            return f"{month()} {randrange(1, 29)}"

        def hour() -> str:
            h = randrange(1, 13)
            r = rnd()
            if r < 0.6:
                return f"{h}pm"
            if r < 0.8:
                return f"{h}am"
            return f"{h + 6}:{randrange(0, 4) * 15:02d}"

        def url() -> str:
            r = rnd()
            if r < 0.4:
                return f"https://grafana.example.com/d/{service()}-{randrange(100, 999)}"
            if r < 0.7:
                return f"https://wiki.example.com/{service()}/runbook"
            return f"https://github.com/example/{service()}/issues/{randrange(1, 5000)}"

        def ticket() -> str:
            return f"{('OPS', 'BILL', 'PLAT', 'CORE', 'WEB')[int(5 ** rnd()) - 1]}-{randrange(1, 9999)}"

        def branch() -> str:
            r = rnd()
            if r < 0.5:
                return f"release/{int(6 ** rnd())}.{randrange(0, 20)}"
            return f"feature/{service()}-{noun().lower()}"

        def envvar() -> str:
            return f"{service().upper().replace('-', '_')}_{noun().upper().replace('-', '_')}"

        def handle() -> str:
            return f"{name().lower()}{randrange(1, 999)}"

        self.fields: dict[str, Callable[[], str]] = {
            "name": name, "name2": name, "service": service, "service2": service,
            "lang": lang, "lib": lib, "lib2": lib, "tool": tool, "tool2": tool,
            "editor": zipf(_EDITORS), "shell": zipf(_SHELLS), "os": zipf(_OSES),
            "city": zipf(_CITIES), "tz": zipf(_TIMEZONES), "env": env,
            "day": day, "day_l": lambda: day().lower(), "month": month, "month2": month,
            "dom": lambda: str(randrange(1, 29)), "dom2": lambda: str(randrange(1, 29)),
            "year": lambda: str(2018 + randrange(8)),
            "hour": hour, "date": date, "noun": noun, "noun2": noun, "module": module,
            "adj": adj, "action": action, "flag": flag, "path": path, "test": test,
            "ident": ident, "error": error, "error_short": error_short,
            "version": version, "cmd": cmd, "url": url, "ticket": ticket,
            "branch": branch, "envvar": envvar, "handle": handle,
            "db": zipf(_w("Postgres MySQL SQLite MongoDB Redis ClickHouse DynamoDB")),
            "topic": lambda: f"{service()}.{noun().lower()}.v{randrange(1, 4)}",
            "channel": lambda: f"#{service()}-{('dev', 'alerts', 'oncall', 'team')[randrange(4)]}",
            "n": lambda: str(randrange(2, 240)),
            "lines": lambda: str(randrange(2, 60) * 10),
            "width": zipf(_w("100 88 120 80 79 110 99 140")),
            "theme": zipf(_THEMES), "test_adj": zipf(_TEST_ADJS),
            "proxy": zipf(_w("nginx Envoy Traefik Caddy HAProxy Kong")), "indent": zipf(_INDENTS), "n2": lambda: str(randrange(1, 90)),
            "pct": lambda: str(randrange(60, 96)), "ms": lambda: str(randrange(1, 40) * 50),
            "port": lambda: str(randrange(3000, 9999)), "line": lambda: str(randrange(1, 900)),
            "code": lambda: str((200, 404, 503, 500, 301, 429)[int(6 ** rnd()) - 1]),
            "pr": lambda: str(randrange(100, 9999)),
            "major": lambda: str(int(17 ** rnd())), "minor": lambda: str(randrange(0, 20)),
            "patch": lambda: str(randrange(0, 12)),
        }
        self.tags = zipf(_TAGS)

    def compile_all(
        self, templates: tuple[str, ...]
    ) -> tuple[tuple[str, tuple[Callable[[], str], ...]], ...]:
        """Pre-resolve each template to ``(format string, field callables)``."""
        out = []
        for t in templates:
            fmt, names = _compile(t)
            out.append((fmt, tuple(self.fields[n] for n in names)))
        return tuple(out)


def _capitalize(s: str) -> str:
    return s[:1].upper() + s[1:]


def generate_facts(n: int, seed: int = 0) -> Iterator[CorpusFact]:
    """Yield ``n`` deterministic, realistic memory facts.

    Slots are ~20% user / 45% project / 35% agent; project and agent facts are
    split about evenly between the two :data:`SCOPES`; ~30% of facts carry a
    key (``"<stem>.<counter>"``, unique per ``(slot, scope)``); each value is
    one English sentence of 8-30 words; each fact has 0-3 tags.
    """
    if n < 0:
        raise ValueError("n must be >= 0")
    g = _Gen(seed)
    rnd = g.random
    tag = g.tags
    _Entry = tuple[str, tuple[Callable[[], str], ...], str]
    tables: list[tuple[_Entry, ...]] = []
    for tpls in (_USER_TEMPLATES, _PROJECT_TEMPLATES, _AGENT_TEMPLATES):
        compiled = g.compile_all(tuple(t for t, _ in tpls))
        tables.append(tuple((fmt, fs, stem) for (fmt, fs), (_, stem) in zip(compiled, tpls)))
    user_t, project_t, agent_t = tables

    # Template choice is skewed towards the first templates (U ** 1.6), yet every one shows up.
    def template_picker(table: tuple[_Entry, ...]) -> Callable[[], _Entry]:
        m = len(table)
        return lambda: table[int(m * rnd() ** 1.6)]

    pick_user, pick_project, pick_agent = (
        template_picker(user_t), template_picker(project_t), template_picker(agent_t))
    suffixes = g.compile_all(_SUFFIX_TEMPLATES)
    n_suffixes = len(suffixes)
    alpha, beta = SCOPES
    counter = 0
    for _ in range(n):
        r = rnd()
        if r < _USER_SHARE:
            slot, scope = "user", None
            fmt, fs, stem = pick_user()
        else:
            scope = alpha if rnd() < 0.5 else beta
            if r < _PROJECT_SHARE:
                slot = "project"
                fmt, fs, stem = pick_project()
            else:
                slot = "agent"
                fmt, fs, stem = pick_agent()
        value = _capitalize(fmt.format(*[f() for f in fs]))
        if rnd() < _SUFFIX_SHARE:
            sfmt, sfs = suffixes[int(n_suffixes * rnd() ** 1.5)]
            suffix = sfmt.format(*[f() for f in sfs])
            if value.count(" ") + suffix.count(" ") < _MAX_WORDS:
                value += suffix
        key = None
        if rnd() < _KEY_SHARE:
            counter += 1
            key = f"{stem}.{counter}"
        t = rnd()
        if t < 0.25:
            tags: tuple[str, ...] = ()
        elif t < 0.65:
            tags = (tag(),)
        elif t < 0.9:
            a, b = tag(), tag()
            tags = (a,) if a == b else (a, b)
        else:
            tags = tuple(dict.fromkeys((tag(), tag(), tag())))
        yield CorpusFact(slot, scope, key, value, tags)


def generate_queries(n: int = 200, seed: int = 1) -> list[str]:
    """Return ``n`` deterministic user messages an agent might receive.

    Drawn from the same vocabularies as :func:`generate_facts`, so many match
    some facts: questions, commands, bare paths or error strings, with
    punctuation, backticked code, hyphenated words, quotes and a few URLs;
    3-25 words long.
    """
    if n < 0:
        raise ValueError("n must be >= 0")
    g = _Gen(seed)
    rnd = g.random
    compiled = g.compile_all(_QUERY_TEMPLATES)
    m = len(compiled)
    out: list[str] = []
    while len(out) < n:
        fmt, fs = compiled[int(m * rnd())]
        q = fmt.format(*[f() for f in fs])
        words = len(q.split())
        if words < 3:
            # Bare paths / errors: give them a short lead-in so they reach 3 words.
            q = ("look at " if rnd() < 0.5 else "what about ") + q
        elif words > 25:
            continue
        if rnd() < 0.3:
            q = _capitalize(q)
        out.append(q)
    return out


def _main() -> int:
    facts = list(generate_facts(200_000))
    for f in facts[:5]:
        print(f)
    print()
    for q in generate_queries(5):
        print(q)
    print()
    distinct = len({f.value for f in facts}) / len(facts)
    print(f"distinct values over 200k facts: {distinct:.4f}")
    del facts
    t0 = time.perf_counter()
    count = 0
    for _ in generate_facts(1_000_000):
        count += 1
    print(f"generated {count:,} facts in {time.perf_counter() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(_main())
