"""Hand-written query/fact blocks: the agent slot (see _blocks_user.py for the format)."""

BLOCKS = r"""
@ agent shop-api

Q x: test_refund_retry
Q p: which check sometimes fails at random when the machine is busy?
F: test_refund_retry in tests/billing/test_refunds.py is flaky under load; rerun it once before investigating.
D: test_refund_rounding in tests/billing/test_refunds.py failed for real after the Money type change; it is not flaky.

Q l: why does pytest fail with a read-only cache error in the sandbox?
Q x: -p no:cacheprovider
F: pytest in shop-api needs `-p no:cacheprovider` in the sandbox because .pytest_cache is on a read-only mount.

Q x: Address already in use
Q p: the server quits immediately on startup without explanation, what's wrong?
F: `make dev` silently uses port 8010; if it is taken, uvicorn exits with "Address already in use" and no other hint.

Q x: Multiple head revisions are present
Q p: what should I do when the schema history has forked into two branches?
F: When Alembic says "Multiple head revisions are present", run `alembic merge heads -m merge` instead of deleting files.

Q x: psycopg2.OperationalError: could not connect to server
Q l: why can't the shop-api tests connect to the database server?
F: psycopg2.OperationalError: could not connect to server in shop-api tests means the db container is not up; run `docker compose up -d db` first.
D: psycopg2.errors.UniqueViolation in test_checkout_idempotency means the fixture ran twice; use the function-scoped db fixture.

Q x: --forward-to localhost:8010/api/webhooks/stripe
Q l: how do I forward Stripe webhook events to the local server?
F: The Stripe CLI `stripe listen` only reaches the local server if you pass --forward-to localhost:8010/api/webhooks/stripe.

Q p: how many schema revision files should a single change request contain?
Q l: does Priya accept two migrations in one PR?
F: Priya prefers one migration per PR; two migrations in one PR got sent back twice.

Q p: how do I iterate faster on payment code verification?
Q l: how long does the full shop-api test suite take and how do I run only billing tests?
F: Running the full shop-api test suite takes about 9 minutes; use `pytest -k billing -x` for billing changes.

Q x: hybrid_property
Q l: how should I silence the mypy false positive on SQLAlchemy models?
F: mypy reports a false positive on SQLAlchemy hybrid_property; suppress it with `# type: ignore[misc]` rather than changing the model.

Q x: scripts/seed_dev.py
Q p: why do sample catalogue records blow up with a referential integrity complaint?
F: The seed script scripts/seed_dev.py must run after migrations, or the product fixtures fail with a foreign key error.

Q x: CELERY_TASK_ALWAYS_EAGER
Q p: background work never finishes during the suite, why?
F: Celery tasks in tests run eagerly only if CELERY_TASK_ALWAYS_EAGER=1 is set; otherwise they hang waiting for a broker.

Q l: can I edit requirements txt files by hand?
Q x: pip-compile
F: requirements/*.txt are compiled with pip-compile; hand edits get overwritten by the nightly dependency update job.

Q p: the token lifetime checks fail when I fake a different timezone, which library should replace it?
Q x: freezegun tz_offset time_machine
F: freezegun breaks the JWT expiry tests when used with tz_offset; use time_machine instead.

Q l: why does the checkout test fail with a Stripe signature error locally?
F key=stripe.local_secret: Locally the webhook signature check fails unless STRIPE_WEBHOOK_SECRET matches the whsec_ value printed by `stripe listen`.

Q p: where do reviewers expect freshly created routes to be described?
F: New endpoints must be added to docs/openapi.yaml in the same PR; Priya rejected two PRs that skipped it.

@ agent data-pipeline

Q x: dbt found two models with the name stg_orders
Q l: how do I fix the dbt duplicate model compilation error?
F: dbt compile fails with "Compilation Error: dbt found two models with the name stg_orders" when an old target/ folder is cached; run `dbt clean`.

Q p: how can I find out why a workflow definition won't load?
Q l: where do Airflow DAG import errors show up?
F: Airflow DAG import errors only show in the UI; run `python dags/<file>.py` locally to see the traceback.

Q x: spark.master=local[2]
Q x: test_sessionize_boundaries
F: test_sessionize_boundaries is flaky when Spark local mode uses more than 2 cores; set spark.master=local[2].

Q p: my warehouse investigations keep getting killed partway through, what helps?
Q l: why do Snowflake queries time out from the sandbox?
F: Snowflake queries from the agent sandbox time out after 5 minutes; add LIMIT when exploring big tables like fct_events.

Q x: JWT token is invalid
Q l: which private key format does Snowflake key-pair auth need?
F: Snowflake key-pair auth needs the private key in PKCS8 format; a PKCS1 key gives "JWT token is invalid".

Q x: s3://fernhill-dbt-artifacts/prod/
Q l: where do I get the prod manifest.json for dbt --defer?
F: `dbt build` in CI uses --defer against the prod manifest; locally you must download manifest.json from s3://fernhill-dbt-artifacts/prod/.

Q p: the SQL style checker is slow, how do I limit it?
F: sqlfluff takes about 3 minutes on the whole project; run it only on changed files with `sqlfluff lint $(git diff --name-only main -- models)`.

Q l: are Great Expectations deprecation warnings real failures?
F: Great Expectations 0.18 prints deprecation warnings that look like failures; only the final "success: false" line matters.

Q x: pyarrow<15
Q p: why does the process crash hard when it opens the old columnar datasets?
F: pyarrow 15 segfaults when reading the legacy Parquet files in s3://fernhill-raw/legacy/; pin pyarrow<15 for that job.

Q p: why doesn't my laptop's scheduler notice freshly written workflow definitions?
Q l: why does the local Airflow not see new DAG files?
F: Local Airflow only rescans dags/ every 300 seconds; run `airflow dags reserialize` to see new DAG files immediately.

Q p: which login should I pick when poking around production reporting data?
F: Use the read-only role ANALYST_RO for exploration; Aisha revoked TRANSFORMER access from the agent after a DROP on a dev schema.

@ agent mobile-app

Q x: ffi_c.bundle
Q l: why does pod install fail on Apple Silicon?
F: pod install fails on Apple Silicon with "ffi_c.bundle" errors unless you run it via `arch -x86_64` or reinstall ffi.

Q p: the JavaScript packager serves outdated code after I check out another git line of work, fix?
Q x: yarn start --reset-cache
F: Metro bundler caches stale modules after switching branches; run `yarn start --reset-cache`.

Q x: checkout_flow.e2e.ts
Q p: which virtual phone model keeps the purchase scenario from failing at random?
F: Detox test checkout_flow.e2e.ts is flaky on the iPhone 15 simulator because of the keyboard animation; use iPhone 14.

Q x: Java heap space
Q l: how do I fix Gradle running out of memory?
F: Gradle builds OOM with "Java heap space"; org.gradle.jvmargs=-Xmx4g in android/gradle.properties fixes it.

Q x: legacyFakeTimers
Q l: why do the Countdown component Jest tests hang?
F: Jest tests for the Countdown component need `jest.useFakeTimers({legacyFakeTimers: true})` or they hang.

Q x: NO_FLIPPER=1
Q l: why is Flipper disabled in the iOS build?
F: Xcode 15.3 breaks the Flipper pod, so Flipper is disabled via NO_FLIPPER=1.

Q x: yarn tokens:build
Q p: after changing design colours, the Google-platform look is outdated, what did I miss?
F: After editing app/theme/tokens.ts, run `yarn tokens:build` or the Android styles stay stale.

Q p: the Google-platform virtual device can't talk to my laptop's backend, what address works?
Q l: which host does the Android emulator use for localhost?
F: The Android emulator reaches the host machine at 10.0.2.2, not localhost; the iOS simulator can use localhost directly.

Q l: how long does a clean iOS build take on mob-ci-01?
F: A clean iOS build on mob-ci-01 takes about 18 minutes; incremental builds with ccache take about 4.

Q p: how should I prove a visual tweak works before asking the Apple-platform engineer to look?
F: Noor wants screenshots for both iOS and Android in every UI PR description; PRs without them wait days for review.

@ agent -

Q p: can I get onto the public web from the workspace?
Q x: pypi.internal.fernhill.example
F: The sandbox has no outbound network except the internal PyPI mirror at https://pypi.internal.fernhill.example/simple.

Q x: gh pr create --fill
Q p: why does starting a change request from the terminal freeze?
F: `gh pr create` needs --fill or --body, otherwise it opens an editor and hangs in non-interactive shells.

Q p: my code grep utility overlooks compiled artifacts, why?
Q x: rg --no-ignore
F: ripgrep skips files ignored by .gitignore; pass --no-ignore when searching build output.

Q p: what annoys Dana most in a patch I send?
Q l: does the user accept unrelated formatting changes in PRs?
F: The user rejects PRs with unrelated formatting changes; keep diffs minimal and touch only what the task needs.

Q l: how long can a bash tool command run before it times out?
Q p: what happens to really lengthy terminal jobs I start?
F: Bash tool commands time out after 10 minutes; long test runs should be split or backgrounded.

Q x: pre-commit install-hooks
Q l: why do pre-commit hooks fail on first use?
F: pre-commit needs network access the first time it installs hooks; run `pre-commit install-hooks` while the mirror is reachable.

Q x: docker-compose
Q l: which docker compose syntax works in the sandbox?
F: Docker in the sandbox runs on colima; only the `docker compose` v2 syntax works, `docker-compose` is not installed.

Q x: dos2unix
Q p: why can't my patching utility change certain Windows-origin sources?
F: The file editing tool fails on files with CRLF line endings; convert them with dos2unix first.

Q p: how do I nicely indent structured data without the usual command-line helper?
Q x: python -m json.tool
F: jq is not installed in the sandbox; use `python -m json.tool` for pretty printing JSON.

Q p: the workspace's hour and Dana's hour differ, by how much?
Q l: what time zone is the sandbox clock in?
F: The sandbox clock is UTC while the user talks in Lisbon time, which is UTC+1 in summer.

Q x: terraform apply
Q p: am I permitted to roll out infrastructure edits myself?
F key=rules.terraform: Never run `terraform apply`; only `terraform plan` is allowed, and the user applies changes herself.

Q p: is it worth checking with her before a sweeping restructure?
Q l: did asking clarifying questions before refactors help?
F: Asking clarifying questions before large refactors saved time; the user prefers agreeing on scope first.

Q l: how far behind is the CI status API?
Q p: a pipeline result seems absent right after pushing, should I assume it never ran?
F: The CI status API lags about 2 minutes behind; wait before concluding that a check is missing.

Q x: ~/.cache/uv
Q l: where is the uv cache and can it be shared?
F: The uv cache lives in ~/.cache/uv and is shared between workspaces; `uv cache clean` slows every project afterwards.

Q p: what's the safest way to inspect huge console results without flooding the chat?
F: Pipe long command output through `tail -n 200` or write it to a file; dumping full logs filled the context and lost earlier instructions.

Q l: which git author identity should commits use?
F: Commits made by the agent must use the author "Fernhill Bot <bot@fernhill.example>" so they are easy to filter.

Q x: who approves CODEOWNERS changes?
Q l: who must review changes to CODEOWNERS?
F: Changes to CODEOWNERS need approval from Ruth Abernathy; the agent once got a PR blocked for editing it in passing.
"""
