"""Hand-written material for generated user facts and global agent lessons."""

# (title, author)
BOOKS = [
    ("Designing Data-Intensive Applications", "Martin Kleppmann"),
    ("A Philosophy of Software Design", "John Ousterhout"),
    ("The Pragmatic Programmer", "Andrew Hunt and David Thomas"),
    ("Working Effectively with Legacy Code", "Michael Feathers"),
    ("Accelerate", "Nicole Forsgren, Jez Humble and Gene Kim"),
    ("Site Reliability Engineering", "Betsy Beyer and others"),
    ("Domain-Driven Design Distilled", "Vaughn Vernon"),
    ("The Staff Engineer's Path", "Tanya Reilly"),
    ("Fluent Python", "Luciano Ramalho"),
    ("Database Internals", "Alex Petrov"),
    ("Thinking in Systems", "Donella Meadows"),
    ("Team Topologies", "Matthew Skelton and Manuel Pais"),
    ("Release It!", "Michael Nygard"),
    ("An Elegant Puzzle", "Will Larson"),
    ("The Manager's Path", "Camille Fournier"),
    ("Crafting Interpreters", "Robert Nystrom"),
    ("Project Hail Mary", "Andy Weir"),
    ("Klara and the Sun", "Kazuo Ishiguro"),
    ("The Three-Body Problem", "Liu Cixin"),
    ("Blindness", "José Saramago"),
]

FICTION = {
    "Project Hail Mary",
    "Klara and the Sun",
    "The Three-Body Problem",
    "Blindness",
}
FICTION_OPINIONS = [
    "loved it",
    "found the ending rushed",
    "read it in one weekend on holiday",
    "recommended it to her book club",
    "struggled with the first hundred pages",
]

BOOK_OPINIONS = [
    "recommends it to every new hire",
    "found the second half much weaker than the first",
    "keeps a heavily annotated copy on her desk",
    "quotes it in design reviews more than anyone would like",
    "gave up halfway through",
    "reread it last winter and liked it more the second time",
    "thinks it is overrated but useful for vocabulary",
    "lent her copy to Marcus and never got it back",
]

# free-form facts about the user that no query targets
USER_FACTS = [
    "The user grew up in Porto and moved to Lisbon in 2016 for her first job.",
    "The user's partner Inês is a nurse who works night shifts twice a week.",
    "The user's older kid, Tomé, is eight and likes building Lego Technic sets.",
    "The user's younger kid, Alice, is five and goes to the same school as her brother.",
    "The user plays five-a-side football with former colleagues on Wednesday evenings.",
    "The user organises the Lisbon Python meetup together with two friends and hosts it at the Fernhill office.",
    "The user mentors two junior engineers, Rafael and Joana, with a 30-minute check-in every other week.",
    "The user cycles to the office on a cargo bike when the weather is dry.",
    "The user watches Formula 1 races but skips qualifying sessions.",
    "The user bakes sourdough bread on Sunday mornings and shares photos in the #random channel.",
    "The user's favourite restaurant for team dinners is a tasca in Campo de Ourique.",
    "The user volunteers at a coding club for teenagers on one Saturday a month.",
    "The user went to the Web Summit in 2022 and 2023 but found it too crowded.",
    "The user has a standing desk and switches to standing after lunch.",
    "The user's first programming language was Pascal, at secondary school.",
    "The user wrote her master's thesis on consistency in distributed key-value stores.",
    "The user is allergic to pollen and works from home on high-pollen days in spring.",
    "The user listens to podcasts about urban planning while commuting.",
    "The user's brother runs a small surf school in Ericeira.",
    "The user plans a family trip to Japan in spring 2025.",
    "The user has a YubiKey on her keyring for work logins.",
    "The user buys technical books in paper and novels as ebooks.",
    "The user once ran the Lisbon half marathon in just under two hours.",
    "The user prefers trains to flights for trips within the Iberian peninsula.",
    "The user is a member of the Python Software Foundation.",
    "The user contributes small fixes to the SQLAlchemy documentation now and then.",
    "The user's home internet is 1 Gbit fibre, and she works from the spare room on remote days.",
    "The user's desk has two monitors, one of them rotated vertically for reading code.",
    "The user watched every season of The Expanse twice.",
    "The user took a course on negotiation in 2023 paid for by Fernhill's learning budget.",
    "The user's annual learning budget at Fernhill is 1,500 euros.",
    "The user collects vintage Portuguese tiles and has a small wall of them at home.",
    "The user keeps a paper notebook for meeting notes and scans it on Fridays.",
    "The user's favourite conference talk is Rich Hickey's Simple Made Easy.",
    "The user started at Fernhill Goods in March 2020, two weeks before the first lockdown.",
    "The user was one of the first three backend engineers at Fernhill Goods.",
    "The user interviews backend candidates and runs the system design round.",
    "The user wrote the internal guide to idempotent APIs that new hires read in their first week.",
    "The user sits on the architecture review group with Priya Raman and Aisha Karimi.",
    "The user's performance review cycle is in January and July.",
    "The user joined the incident commander rotation in 2024.",
    "The user's team celebrates releases with pastéis de nata on Friday afternoons.",
    "The user plays chess online and is rated about 1600 in rapid.",
    "The user dislikes open-plan offices and books a focus room on office days.",
    "The user's calendar is shared with the team, but private events show only as busy.",
    "The user has a standing Friday lunch with the mobile team lead, Sofia Marino.",
    "The user renewed her Portuguese citizen card in May 2024.",
    "The user's car is an old electric Renault Zoe she mostly uses on weekends.",
    "The user supports Boavista, her home town football club.",
]

# (technology, the user's opinion)
OPINIONS = [
    ("GraphQL", "adds more complexity than it removes for a single frontend"),
    ("Kubernetes", "is worth it for the shop platform but overkill for side projects"),
    ("microservices", "should be earned by team size, not adopted up front"),
    ("Go", "is pleasant for small CLIs but too verbose for business logic"),
    (
        "Kafka",
        "is the right tool for clickstream but the wrong one for commands between services",
    ),
    (
        "serverless functions",
        "are great for image resizing and glue, not for core APIs",
    ),
    (
        "ORMs",
        "are fine for CRUD as long as the generated SQL is reviewed for hot paths",
    ),
    ("Tailwind CSS", "is readable enough in small components"),
    ("Terraform", "beats clicking around in the console even for small changes"),
    ("event sourcing", "is rarely worth the operational cost"),
    (
        "Jupyter notebooks",
        "are fine for exploration but should never be scheduled in production",
    ),
    ("pair programming", "works well for onboarding and tricky bugs but not all day"),
    ("story points", "are mostly theatre; she prefers counting tickets"),
    ("monorepos", "help small teams but need good tooling to scale"),
    ("code coverage targets", "create useless tests when set above about 80%"),
    (
        "AI pair programmers",
        "are useful for boilerplate and tests but need careful review",
    ),
    ("Redis", "is a cache first and should not hold anything that cannot be rebuilt"),
    ("feature flags", "need an expiry date or they turn into permanent configuration"),
    (
        "stand-up meetings",
        "should be under ten minutes and skipped when there is nothing to say",
    ),
    ("YAML", "is acceptable for configuration but painful for anything with logic"),
    ("Elixir", "is elegant and she would like to try it on a side project"),
    ("Bazel", "is too heavy for a company of Fernhill's size"),
    ("Scrum", "works worse for platform teams than a simple kanban board"),
    ("SQLite", "is underrated for tools and small services"),
]

OPINION_TEMPLATES = [
    "The user thinks {tech} {opinion}.",
    "In the user's view, {tech} {opinion}.",
    "The user's opinion: {tech} {opinion}.",
    "According to the user, {tech} {opinion}.",
]

# (city, what happened)
TRIPS = [
    (
        "Berlin",
        "visited Lena Fischer and the office for a planning week in October 2023",
    ),
    ("Dublin", "gave an internal workshop on payments at the office in 2023"),
    ("Amsterdam", "attended a PostgreSQL conference in 2022"),
    ("Madrid", "spent a long weekend with her kids in May 2024"),
    (
        "London",
        "interviewed with two companies in 2019 before choosing to stay in Portugal",
    ),
    ("Kyoto", "spent two weeks in 2019 and wants to go back"),
    ("São Paulo", "has family she visits every other Christmas"),
    ("Barcelona", "went to a Python conference in 2023"),
    ("Oslo", "visited Ingrid Solberg's team for a data contracts workshop in 2024"),
]

TRIP_TEMPLATES = [
    "The user {what} in {city}.",
    "In {city}, the user {what}.",
    "{city}: the user {what}.",
]

# (weekday, recurring commitment)
CALENDAR = [
    ("Monday", "has a 30-minute planning session with Ruth Abernathy at 14:00"),
    ("Tuesday", "runs the backend guild meeting at 16:00 every other week"),
    ("Wednesday", "has lunch with the data team when she is in the office"),
    ("Thursday", "holds an open review hour at 15:00 for anyone's pull requests"),
    ("Friday", "blocks the afternoon for writing and documentation"),
    ("Saturday", "takes her kids to swimming lessons at 16:00"),
    ("Sunday", "does not check Slack at all"),
]

CALENDAR_TEMPLATES = [
    "Every {day} the user {what}.",
    "On {day}s the user {what}.",
    "Recurring: on {day} the user {what}.",
]

# (year, what the user did)
HISTORY = [
    ("2017", "built the SEPA direct debit integration at Banco Atlântico"),
    ("2018", "led the migration of a card authorisation service from Java 6 to Java 8"),
    ("2019", "wrote a fraud rules engine prototype in Python during a bank hackathon"),
    ("2020", "designed the first version of shop-api's order model"),
    ("2021", "moved shop-api from Django to FastAPI with two colleagues"),
    ("2023", "introduced idempotency keys across all payment endpoints"),
    ("2022", "ran the project that replaced Adyen with Stripe"),
    (
        "2024",
        "started the internal platform for sharing feature flags between web and mobile",
    ),
    ("2016", "interned for three months at a logistics startup in Porto"),
    ("2015", "taught an introductory programming course as a teaching assistant"),
]

HISTORY_TEMPLATES = [
    "In {year} the user {what}.",
    "Back in {year}, the user {what}.",
    "The user {what} in {year}.",
]

# small preferences on topics that no query asks about
USER_PREFS = [
    "The user likes error messages that say what to do next, not just what went wrong.",
    "The user prefers dataclasses over plain dicts for anything passed between modules.",
    "The user wants log lines to be structured with key=value pairs.",
    "The user prefers explicit imports over star imports, even in tests.",
    "The user likes small helper functions at the bottom of a module, below the public API.",
    "The user prefers pathlib over os.path in new code.",
    "The user prefers f-strings for formatting, except in logging calls.",
    "The user avoids Python's global state and module-level singletons.",
    "The user likes enums for status fields instead of bare strings.",
    "The user prefers HTTP 422 for validation errors rather than 400.",
    "The user wants README files to start with a two-line description and one runnable example.",
    "The user likes changelog entries written for users, not for developers.",
    "The user prefers GitHub issues to be closed by the PR that fixes them, with a Fixes line.",
    "The user wants CLI tools to print machine-readable JSON behind a --json flag.",
    "The user prefers UUIDv7 over UUIDv4 for new primary keys.",
    "The user likes benchmarks reported with the median and p95, never the mean alone.",
    "The user wants new scripts to have a --dry-run option when they change data.",
    "The user prefers one assertion topic per test, even if that means more tests.",
    "The user likes Makefiles as the entry point for common project commands.",
    "The user wants TODO comments to include a ticket id.",
    "The user prefers guard clauses and early returns over nested if blocks.",
    "The user wants configuration validated at startup, failing fast on missing values.",
    "The user likes retry logic to log each attempt with the delay.",
    "The user prefers timestamps stored as timestamptz in Postgres.",
    "The user prefers kebab-case for CLI flags and snake_case for config keys.",
    "The user wants docstrings on public functions only, in Google style.",
    "The user prefers semantic versioning for internal libraries, with a CHANGELOG.md in each.",
    "The user dislikes decorators that hide control flow, such as automatic retries on every method.",
    "The user prefers composition over inheritance for service classes.",
    "The user wants each PR description to say how the change was tested.",
]

# global agent lessons: tools, the sandbox, the way Dana works
AGENT_NOTES = [
    "`git stash` in the sandbox also stashes untracked files only with -u; plain stash left new files behind once.",
    "sed -i behaves differently on macOS and Linux; the sandbox is Linux, so `sed -i 's/a/b/' file` works without a backup suffix.",
    "Python in the sandbox is 3.11 by default; use `uv python install 3.12` when a project needs 3.12.",
    "The sandbox home directory is wiped between sessions; anything worth keeping goes into the repository or a memory note.",
    "`pip install` outside a virtual environment fails with externally-managed-environment; always use uv venv first.",
    "Large files over 1 MB should be read in ranges; reading them whole fills the context quickly.",
    "The GitHub CLI is authenticated as fernhill-bot with read access to all repos and write access only to feature branches.",
    "Opening a PR as draft first avoids pinging CODEOWNERS before the work is ready.",
    "`git log --oneline -20` is enough context for recent history; the full log wastes tokens.",
    "The user reads PR descriptions on her phone, so the first three lines matter most.",
    "Rebasing onto main requires `git fetch origin main` first; the sandbox clone is shallow.",
    "The sandbox clone is shallow with depth 50; `git fetch --unshallow` is needed for blame on old lines.",
    "`make` targets differ per repository; read the Makefile before assuming a target exists.",
    "Tests that need Docker cannot run in the lightweight sandbox profile; say so instead of skipping silently.",
    "Dana prefers being told about a failing test up front rather than after a long explanation.",
    "When a task is ambiguous, listing two interpretations and picking one worked better than asking open questions.",
    "The Slack integration posts as the agent in #agent-log only; it cannot send direct messages.",
    "Search in the wiki (Notion) is not reachable from the sandbox; ask the user to paste pages.",
    "Timestamps in log files are UTC; the user's messages use Lisbon time.",
    "pytest output is easier to read with -q and --tb=short; full tracebacks filled the context twice.",
    "The sandbox has 4 CPU cores and 8 GB of memory; parallel test runs above 4 workers slow down.",
    "Renaming files with `git mv` keeps history readable in reviews; plain mv shows delete and add.",
    "The pre-push hook runs the full type check and takes about a minute; do not interrupt it.",
    "When the user says 'ship it', she means open the PR, not merge it.",
    "When the user writes 'nit:', the comment is optional and can be skipped if it conflicts with something else.",
    "The user sometimes replies with a single thumbs up; that counts as approval for the proposed plan only.",
    "Generated files like openapi.yaml and lock files should be regenerated, never edited by hand.",
    "Ruth Abernathy asked that agent-authored PRs carry the agent-authored label.",
    "The internal PyPI mirror lags upstream by about a day; brand new releases may be missing.",
    "Dependabot PRs should not be modified by the agent; comment on them instead.",
    "`docker system prune` frees space when builds fail with no space left on device, but it removes cached images too.",
    "The user likes a one-line status update before long-running commands start.",
    "Markdown tables render badly in the user's terminal client; use lists for anything wider than three columns.",
    "Secrets in .env files are real even in development; never paste their contents into chat.",
    "Node is version 20 in the sandbox; mobile-app tooling expects 18 and warns but works.",
    "The sandbox DNS cannot resolve *.internal hosts except the PyPI mirror and the Git server.",
]

# (error text, context, fix) for global tools
AGENT_ERRORS = [
    (
        "fatal: refusing to merge unrelated histories",
        "after cloning with depth 1 and pulling",
        "fetch with more depth instead of forcing the merge",
    ),
    (
        "error: externally-managed-environment",
        "when running pip install against the system Python",
        "create a virtual environment with `uv venv`",
    ),
    (
        "OSError: [Errno 28] No space left on device",
        "during Docker image builds",
        "run `docker builder prune` to clear the build cache",
    ),
    (
        "Permission denied (publickey)",
        "when pushing over SSH",
        "push over HTTPS with the gh credential helper",
    ),
    (
        "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xe3",
        "when reading legacy CSV exports",
        "open the file with encoding='latin-1'",
    ),
    (
        "Killed",
        "when a test run exceeds the sandbox memory",
        "run fewer workers or split the test selection",
    ),
    (
        "fatal: not a git repository (or any of the parent directories): .git",
        "after changing into a generated folder",
        "cd back to the repository root",
    ),
    (
        "ssl.SSLCertVerificationError: certificate verify failed",
        "when calling internal hosts",
        "point REQUESTS_CA_BUNDLE at /etc/ssl/certs/fernhill-ca.pem",
    ),
]

# --- more material ---------------------------------------------------------

AGENT_NOTES += [
    "The Jira integration can read tickets but cannot transition them; ask the user to move tickets.",
    "Tickets like SHOP-123, DATA-45 and MOB-67 live in Jira; Linear is not used at Fernhill.",
    "Links to Grafana dashboards need the VPN; the sandbox cannot open them.",
    "sudo is not available in the sandbox; needing it usually means the approach is wrong.",
    "The user reviews agent PRs between 11:00 and 12:00 on most days.",
    "Writing a short plan into PLAN.md on the branch helped the user follow multi-day work.",
    "Git LFS is used for design assets in mobile-app; run `git lfs pull` after cloning.",
    "The user prefers the narrowest test selection first and the full suite only before pushing.",
    "Code copied from Stack Overflow needs a link in a comment because of the licence.",
    "The agent's GitHub token expires every 30 days; a 401 from gh means Ruth has to renew it.",
    "Commands that open a pager (git log, less) hang; set GIT_PAGER=cat or pass --no-pager.",
    "Emoji in commit messages break the release-please parser.",
    "Watch processes like `yarn start` must run in the background with output redirected to a file.",
]

USER_FACTS += [
    "The user keeps a running list of tech debt items in a pinned Slack message.",
    "The user's favourite Python feature is structural pattern matching.",
    "The user thinks the best meetings end with a written decision posted in the channel.",
    "The user has given the shop-api architecture talk to every new backend hire since 2021.",
    "The user wrote the first version of the incident response runbook.",
    "The user is the technical contact for the data protection officer on GDPR requests.",
    "The user's 2025 budget request for the backend team includes a second SRE.",
    "The user prefers to pair on incidents over a call rather than in chat threads.",
    "The user turned off GitHub email notifications and works from the notifications inbox instead.",
    "The user lives in Arroios and walks her kids to school most mornings.",
    "The user owns a 3D printer and prints cable organisers for the office.",
    "The user's goals for 2024 include mentoring a staff engineer candidate.",
    "The user starts each week by clearing her GitHub review queue on Monday afternoon.",
    "The user gets headaches from bright screens and lowers the brightness in the evening.",
]

AGENT_ERRORS += [
    (
        "error: RPC failed; HTTP 413 curl 22 The requested URL returned error: 413",
        "when pushing a branch with large binaries",
        "move the files to Git LFS",
    ),
    (
        "zsh: command not found: python",
        "in the minimal sandbox image",
        "use python3 or the project's virtual environment",
    ),
    (
        "gh: Resource not accessible by integration (HTTP 403)",
        "when the agent tries to edit repository settings",
        "ask the user; the bot token cannot do that",
    ),
    (
        "npm ERR! code EINTEGRITY",
        "after the internal npm mirror rebuilt a package",
        "delete node_modules and the lock entry, then reinstall",
    ),
]

USER_FACTS += [
    "The user is currently reading The Phoenix Project again for a book club at work.",
    "The user listens to the Software Engineering Daily podcast at double speed.",
    "The user's favourite pastry shop is in Alvalade, near her old flat.",
    "The user watches football with her brother on Sunday evenings when Boavista plays.",
    "The user built a small CLI in 2023 that reports which Fernhill services use outdated Python.",
    "The user has a stack of unread RFCs printed out on her desk.",
    "The user believes postmortems should never name individuals.",
    "The user once debugged a payments outage from a train between Lisbon and Porto.",
]

SANDBOX_TOOLS = [
    "The sandbox has git 2.43 and the GitHub CLI 2.49.",
    "ripgrep 14.1 and fd 9.0 are installed in the sandbox; fzf is not.",
    "The sandbox ships uv 0.2 and Python 3.11; Python 3.12 can be installed with uv.",
    "Node 20.11 and yarn 1.22 are available in the sandbox image.",
    "The sandbox image includes the AWS CLI v2 but no credentials.",
    "psql 16 is installed in the sandbox and can reach local Docker databases only.",
    "The sandbox image is rebuilt every Monday; tool versions can change then.",
    "The sandbox has Docker Compose v2.27 through colima.",
]

BOOKS += [
    ("Refactoring", "Martin Fowler"),
    ("Observability Engineering", "Charity Majors, Liz Fong-Jones and George Miranda"),
    ("Software Engineering at Google", "Titus Winters and others"),
    ("The Phoenix Project", "Gene Kim, Kevin Behr and George Spafford"),
    ("Shape Up", "Ryan Singer"),
    ("Staff Engineer", "Will Larson"),
]
