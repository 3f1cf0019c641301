"""Hand-written query/fact blocks: the project slot (see _blocks_user.py for the format)."""

BLOCKS = r"""
@ project shop-api

Q p: when do we ship to customers?
Q l: what day are shop-api production deploys?
F key=deploy.day age=40: Production deploys for shop-api go out on Fridays after the 15:00 code freeze, never on public holidays.
D stale age=330: Production deploys for shop-api used to happen on Tuesday mornings before the support team came online.
D: Hotfix branches for shop-api are cut from the last release tag, not from main.

Q p: which relational engine and host keep the store's records?
Q x: shop-db-prod.cluster-c9x2.eu-west-1.rds.amazonaws.com
F key=db.primary: shop-api runs on PostgreSQL 15 on RDS; the primary endpoint is shop-db-prod.cluster-c9x2.eu-west-1.rds.amazonaws.com.
D: The read replica shop-db-replica-1 lags the primary by up to 30 seconds during the nightly export.

Q p: where is the logic that gives money back to shoppers?
Q x: services/billing/refunds.py
F key=code.refunds: Refund calculation lives in services/billing/refunds.py; partial refunds are computed per line item.
D: services/billing/refund_export.py builds the monthly CSV of refunds for the accounting firm.
D: The refunds admin page in the back office only shows the last 90 days of refunds.

Q p: which company handles card charges for the store?
Q x: Stripe API version 2023-10-16
F key=payments.provider: shop-api takes payments through Stripe; the API version is pinned to 2023-10-16 in settings/payments.py.
D stale age=380: Payments went through Adyen until the migration to a new provider finished in 2022.

Q p: who signs off on schema changes?
Q x: what must Priya Raman approve?
F key=people.lead: Priya Raman is the tech lead for shop-api and must approve any Alembic migration touching the orders table.

Q p: how do I boot the backend on my laptop?
Q x: docker compose up db redis then make dev
F key=dev.run: To run shop-api locally, start dependencies with `docker compose up db redis` and then `make dev`, which serves on port 8010.
D: The admin frontend for shop-api runs separately with `npm run dev` on port 5173.

Q p: what tool toggles experimental behaviour on and off?
Q x: shop_new_checkout
F key=flags: Feature flags in shop-api are managed with Unleash; flag names use the prefix shop_ (for example shop_new_checkout).
D: The shop_express_shipping flag was removed in March after the rollout reached 100%.

Q l: what is the rate limit on the public API?
Q x: middleware/ratelimit.py
F key=api.ratelimit: The public API is rate limited to 600 requests per minute per API key, enforced in middleware/ratelimit.py via Redis.
D: Partner API keys have a separate quota negotiated per contract and stored in the partners table.

Q p: where can I see crashes from the backend?
Q l: which Sentry project does shop-api report exceptions to?
F key=monitoring.errors: shop-api reports exceptions to Sentry project fernhill-shop-api; alerts go to #shop-alerts.

Q p: how are prices represented to avoid rounding bugs?
Q x: services/common/money.py
F key=money: All money amounts are stored as integer cents in the Money type (services/common/money.py); never use floats.

Q l: how is VAT calculated for Portuguese orders?
Q x: services/billing/tax_pt.py
F key=tax: VAT is calculated by the TaxJar integration except for Portuguese orders, which use the local table in services/billing/tax_pt.py.
D: The VAT registration number for Fernhill Goods is printed on invoices by services/billing/invoices.py.

Q l: what Python version does shop-api run on?
Q x: SHOP-2291
F key=python: shop-api runs on Python 3.11; the upgrade to 3.12 is blocked by the celery-redbeat dependency (SHOP-2291).

Q p: how often does the test environment get wiped with fresh data?
Q x: staging.shop.fernhill.example
F key=staging: Staging for shop-api is at https://staging.shop.fernhill.example and is reset from a prod snapshot every Sunday at 02:00 UTC.

Q l: when can an order be cancelled?
Q p: up to which point may a purchase still be called off?
F key=orders.states: An order moves through pending, paid, packed, shipped and delivered; cancellation is only allowed before packed.

Q x also=stripe.local_secret: STRIPE_WEBHOOK_SECRET
Q l: how are Stripe webhooks verified and how fast must the handler respond?
F key=webhooks: Stripe webhooks are verified with STRIPE_WEBHOOK_SECRET; the handler is api/routes/webhooks.py and must return 200 within 10 seconds.

Q p: which background job lane handles outgoing mail?
Q l: which Celery queue sends emails?
F: Emails are sent by the Celery worker on the notifications queue; the worker concurrency is 8.
D: The Celery worker for the exports queue runs with concurrency 2 because exports are memory hungry.

Q l: which linter and line length does shop-api use?
F key=lint: shop-api uses ruff for linting and formatting with line length 100; CI fails on any ruff warning.

Q p: how long do we keep item pages in memory before refetching?
Q x: product:v2 cache key
F key=cache.products: Product detail responses are cached in Redis for 300 seconds under keys like product:v2:{id}.
D: Category listing responses are not cached because the merchandising team edits them too often.

Q p: how frequently do stock levels update from the depot?
Q x: workers/inventory_sync.py
F key=inventory: Inventory counts sync from the warehouse system (Manhattan WMS) every 15 minutes via workers/inventory_sync.py.

Q l: how long until a customer session JWT expires?
F key=auth.tokens: Customer sessions use JWTs signed with RS256; access tokens expire after 30 minutes and refresh tokens after 14 days.
D stale age=290: Customer sessions used opaque tokens stored in Redis with a 24-hour expiry.

Q p: can I change a schema revision file after it lands?
Q x: alembic upgrade head
F key=db.migrations: Database migrations use Alembic; run `alembic upgrade head` and never edit a migration that has been merged to main.

Q p: at what point does the weekly emergency duty switch over?
Q l: when is the shop-api on-call handover?
F key=oncall.handover: shop-api on-call rotation is managed in the PagerDuty schedule Shop Primary; handover is Monday 10:00 Lisbon.

Q l: until when will the v1 API be supported?
Q x: /v1/ 2025-06-30
F key=api.versioning: Breaking API changes require a new version prefix (/v2/); /v1/ will be supported until 2025-06-30.

Q p: what engine powers the item finder on the storefront?
Q x: services/catalog/search_index.json
F key=search: Product search uses OpenSearch 2.11 with a custom analyzer for Portuguese stemming, configured in services/catalog/search_index.json.

Q l: which carriers do we use for shipping rates?
F key=shipping.carriers: Shipping rates come from the CTT and DHL APIs; DHL is used only for parcels over 2 kg.

Q p: can shoppers combine several discount vouchers?
Q x: SHOP-1840
F key=coupons: Coupon codes are case-insensitive and limited to one per order; stacking was removed in SHOP-1840.

Q p: what throughput should the buying flow survive during stress exercises?
Q x: loadtests/locustfile.py
F: Load tests live in loadtests/locustfile.py and target 250 checkouts per minute.

Q p: where do credentials like passwords and keys live?
Q l: where are shop-api secrets stored?
F key=secrets: Secrets for shop-api are stored in AWS Secrets Manager under the prefix /shop-api/prod/; never commit .env files.

Q x: fernhill-product-media
Q l: where are product images stored and resized?
F: Product images go to the S3 bucket fernhill-product-media and are resized by a Lambda to 320, 640 and 1280 px.

Q p: where can I read the service's output records?
Q l: where do shop-api logs go and how do I query them?
F key=logging: shop-api logs are JSON to stdout and shipped to Grafana Loki; query with {app="shop-api"}.

Q p: how long do buyers have to send purchases back?
Q x: RETURN_WINDOW_DAYS
F key=returns.window: Customers can return items within 30 days; the window is configured by RETURN_WINDOW_DAYS.
D stale age=360: Customers could return items within 14 days before the 2023 consumer-law review.

Q l: when will the legacy XML export be removed?
F: The legacy XML export for the accounting firm (workers/legacy_export.py) is scheduled for removal in Q3 2024.

Q p: what's our response speed target for paying?
Q l: what is the checkout latency SLO?
F key=slo.checkout: The checkout endpoint has an SLO of p99 under 800 ms; the dashboard is "Shop / Checkout latency" in Grafana.

Q l: when is the httpx pin lifted and why is httpx pinned?
Q x: httpx 0.28 proxies
F key=deps.httpx: httpx is pinned to 0.27.0 because 0.28 dropped the `proxies` argument our Stripe client wrapper uses.

Q p: when is the daily sync for the store backend crew?
Q l: when is the shop-api team standup?
F: The shop-api team has standup at 09:45 on weekdays and a planning meeting every other Wednesday.

Q l: what happens when address validation fails?
F: Address validation calls the Loqate API; failures fall back to accepting the address with a warning flag.

Q p: why isn't the suite backed by a lightweight embedded store?
Q l: why do tests run against Postgres instead of SQLite?
F: Tests run against a throwaway Postgres started by pytest-postgresql, not SQLite, because the code uses JSONB.

Q p: where does the storefront's translated copy come from?
F: Customer-facing texts for shop-api are managed in Lokalise and pulled into locales/ by `make i18n-pull`.

Q l: how are order numbers generated?
F: Order numbers look like FG-24-000123: prefix, two-digit year and a zero-padded sequence from the order_number_seq sequence.

Q x: FG-24-004517
F: Order FG-24-004517 is the test order used for the Stripe 3DS regression checks; keep it out of refund reports.

@ project data-pipeline

Q p: which scheduler coordinates the batch jobs?
Q l: what version of Airflow runs the DAGs?
F key=orchestrator: data-pipeline is orchestrated by Airflow 2.8 on MWAA; DAG files live in dags/ and are synced from main every 5 minutes.
D stale age=395: DAGs were deployed by copying files to the Airflow 1.10 EC2 box with an rsync cron job.

Q l: which warehouse database and schemas do we use?
F key=warehouse: The warehouse is Snowflake, database ANALYTICS, with schemas RAW, STAGING and MARTS.

Q p: by what hour should the nightly sales load be complete?
Q x: daily_orders DAG
F key=dag.daily_orders: The daily_orders DAG runs at 03:30 UTC and must finish before 07:00 when the finance dashboard refreshes.
D: The daily_customers DAG runs at 04:15 UTC and has no downstream deadline.

Q l: how are dbt models named?
Q x: which dbt selector does CI build with, state:modified+?
F key=dbt.conventions: dbt models are in models/, with staging models prefixed stg_ and facts prefixed fct_; CI runs `dbt build --select state:modified+`.

Q p: who is in charge of the analytics transformations?
Q x: which repo does Aisha Karimi own?
F key=people.owner: Aisha Karimi owns the data-pipeline repo and reviews every change to models/marts/.

Q p: where does browsing telemetry get written first?
Q x: web.events.v3
F key=events.source: Clickstream events arrive via Kafka topic web.events.v3 and land in s3://fernhill-raw/events/ partitioned by dt and hour.
D stale age=310: Clickstream events came from the web.events.v2 topic, which had no schema registry.

Q p: how do we protect personal information in the analytics layer?
Q x: /data/pii-salt
F key=pii: Customer emails are hashed with SHA-256 and a salt from SSM parameter /data/pii-salt before reaching STAGING; raw PII never leaves RAW.

Q l: how do I run an Airflow backfill?
Q p: what's the process for reprocessing historical dates?
F key=backfill: Backfills are run with `airflow dags backfill -s <start> -e <end>` and must be announced in #data-eng first; max 30 days per run.

Q x: r6g.2xlarge
Q l: which EMR and Spark versions do Spark jobs run on?
F: Spark jobs run on EMR 6.15 with Spark 3.4.1; the sessionize job needs r6g.2xlarge nodes.

Q p: how up to date do reporting tables need to be?
Q l: what is the freshness limit for marts?
F key=sla.freshness: Marts must be no more than 6 hours stale; freshness is checked by dbt source freshness and alerts #data-alerts.

Q l: where are the Great Expectations suites and what happens when one fails?
F: Data quality checks use Great Expectations suites in gx/expectations/; a failing suite blocks the downstream DAG.

Q p: how do we control compute spend?
Q x: TRANSFORM_WH
F key=cost: Snowflake warehouse TRANSFORM_WH is X-Small and auto-suspends after 60 seconds to keep credits under 400 a month.

Q l: what timezone are warehouse timestamps stored in?
F: All timestamps in the warehouse are stored in UTC; the dim_date table has a Lisbon-local date column for reports.

Q p: how long is unprocessed clickstream retained before archiving?
Q l: how long is raw event data kept in S3?
F key=retention: Raw event data in S3 is kept for 400 days and then moved to Glacier by a lifecycle rule.

Q x: dbt-core 1.7.9
Q l: why is dbt pinned to 1.7?
F key=deps.dbt: dbt-core is pinned to 1.7.9 with dbt-snowflake 1.7.3; 1.8 changes the unit test syntax we rely on.

Q l: what does net revenue exclude in fct_orders?
Q p: what gets subtracted to arrive at the sales figure after deductions?
F key=metric.revenue: Net revenue in fct_orders excludes VAT, shipping fees and refunded lines; gross_revenue includes shipping.

Q p: how do audience groups get pushed to the messaging platform?
Q l: how does the customer_segments model reach Braze?
F: Hightouch syncs the customer_segments model to Braze every hour for marketing campaigns.

Q x: aws_fernhill
Q l: which Airflow connection ids should DAGs use?
F key=connections: Airflow connection ids: snowflake_default for Snowflake, aws_fernhill for S3; never hardcode credentials in DAGs.

Q p: what happens to telemetry that shows up after a delay?
Q l: how are late-arriving events handled?
F key=late.events: Late-arriving events up to 3 days are handled by reprocessing the last 3 partitions on every run of hourly_events.

Q l: how do I run the tests for plugins and dbt models?
F: Run `make test` to execute pytest on plugins/ and `dbt test` for model tests; CI needs both.

Q x: Marta Sousa
Q p: who in accounting depends on our numbers each morning, and by when?
F key=finance.contact: The finance team (contact: Marta Sousa) consumes fct_revenue_daily and needs it by 08:00 Lisbon on business days.

Q l: why do queries on fct_events without a date filter fail?
F: fct_events is clustered by event_date and event_type; queries without an event_date filter are rejected by a row access policy.

Q x: redshift_conn
Q l: when was Redshift decommissioned?
F: The old Redshift cluster was decommissioned on 2024-02-01; anything referencing redshift_conn is dead code.
D stale age=398: Marts are built in Redshift and exported to S3 for the BI tool each night.

Q p: how do upstream groups announce edits to the shape of what they send us?
Q x: contracts/*.yaml
F: Producer teams declare schemas in contracts/*.yaml; a schema change without a contract version bump fails the contract-check job.

Q p: which reporting front end do business people use?
Q x: fernhill/looker-models
F key=bi: Looker is the BI tool; the LookML project lives in a separate repo fernhill/looker-models.

Q p: which checker polices the formatting of our transformation queries?
Q l: which sqlfluff dialect and rules does the project use?
F: SQL is linted with sqlfluff using the snowflake dialect; keywords are uppercase and trailing commas are required.

Q l: how are dbt model owners recorded?
F: Every dbt model declares an owner in its schema.yml meta block; CI fails if meta.owner is missing.

Q p: where do the jobs that run every sixty minutes park temporary data between steps?
F key=scratch: Intermediate Parquet for hourly_events goes to s3://fernhill-tmp/hourly/ and is deleted by a 7-day lifecycle rule.

@ project mobile-app

Q p: what framework builds both phone clients?
Q l: which React Native version is the app on?
F key=stack: mobile-app is React Native 0.73 with TypeScript; iOS and Android share about 90% of the code.
D stale age=370: mobile-app was two separate native codebases in Swift and Kotlin until the 2021 rewrite.

Q p: what's the cadence for shipping to iPhone users?
Q x: fastlane ios beta
F key=release.ios: iOS builds are uploaded to TestFlight by `fastlane ios beta`; App Store releases go out every second Tuesday.

Q p: where's the credential file for publishing Google packages?
Q l: where is the Android upload keystore kept?
F key=android.keystore: The Android upload keystore is in the 1Password item "Fernhill Android upload key"; Play App Signing holds the real key.

Q l: what is the minimum supported Android and iOS version?
Q x: API 26
F key=min.versions: Minimum supported versions are iOS 15 and Android 8.0 (API 26).
D stale age=340: Minimum supported versions were iOS 13 and Android 6.0 before the 2023 cleanup.

Q p: what share of user visits must end without the program dying?
Q l: what is the crash-free sessions target in Sentry?
F key=quality.crashfree: mobile-app uses Sentry for crash reporting; the crash-free sessions target is 99.5%.

Q p: which library holds global client data?
Q x: MOB-412
F key=state: App state uses Zustand stores in app/state/; Redux was removed in MOB-412.

Q x: app/navigation/RootTabs.tsx
Q l: where is the bottom tab navigator defined?
F: Navigation uses React Navigation 6 with a bottom tab navigator defined in app/navigation/RootTabs.tsx.

Q p: why aren't the full UI flows checked on every pull request?
Q l: when do the Detox end-to-end tests run?
F: End-to-end tests use Detox and run only on the nightly workflow because they take about 40 minutes.

Q p: when does the Apple alert credential run out?
Q x: APNs key
F: Push notifications go through Firebase Cloud Messaging for both platforms; the APNs key expires 2025-01-15.

Q x: where do UI components come from, @fernhill/ui?
Q p: can I invent my own palette for a fresh page?
F: UI components come from the internal @fernhill/ui package; do not add new colors outside theme/tokens.ts.

Q x: fernhill:// deep links
Q l: how are deep links and universal links routed?
F: Deep links use the fernhill:// scheme and universal links on shop.fernhill.example/app/*; routing is in app/linking.ts.

Q p: which server endpoint does the pre-release version point at?
Q l: which API base URL do beta builds use?
F key=api.base: The app talks to shop-api at https://api.fernhill.example/v1 in production and to staging.shop.fernhill.example in beta builds.

Q p: does the basket stay after closing and reopening?
Q x: MMKV cart persistence
F: The cart is persisted with MMKV so it survives app restarts and offline use.

Q l: does the project use Expo?
F: We do not use Expo; the project was ejected in 2022 and native modules are managed by hand.

Q l: who owns the Android build and who owns iOS?
Q x: what does Jake Whitman own?
F key=people: Sofia Marino leads mobile; Jake Whitman owns the Android build and Noor Haddad owns iOS.

Q l: how are screen views tracked in Segment?
F: Screen views are tracked with Segment using the event name "Screen Viewed" and the screen name as a property.

Q p: why can't the JavaScript engine be switched to JSC?
Q l: is Hermes enabled?
F: Hermes is enabled on both platforms; turning it off breaks the Intl polyfills.

Q p: what's required for screen reader support on buttons?
Q x: accessibilityLabel
F: All tappable elements need an accessibilityLabel; the lint rule react-native-a11y/has-valid-accessibility-descriptors enforces it.

Q p: how are new editions labelled?
Q x: yarn release:bump
F key=versioning: Version numbers follow YEAR.MINOR.PATCH (e.g. 24.7.1) and are bumped by `yarn release:bump`.

Q x: merchant.example.fernhill
Q l: how does in-app checkout take Apple Pay payments?
F: In-app checkout uses Stripe PaymentSheet; the Apple Pay merchant id is merchant.example.fernhill.

Q l: how large is the FastImage disk cache?
F: Product images load via FastImage with a 200 MB disk cache.

Q x: what is mob-ci-01?
Q p: why don't we rely on GitHub's rented Apple machines for continuous integration?
F key=ci.ios: iOS CI builds run on a self-hosted Mac mini (M1, macOS 14) named mob-ci-01 because the cloud runners were too slow.

Q l: which prefix do mobile feature flags use?
F: Mobile feature flags come from the same Unleash instance as shop-api but use the prefix mob_.

Q p: which tongues does the interface come in?
Q l: which languages are supported and where are strings translated?
F key=i18n: Strings are translated in Lokalise; supported languages are Portuguese, English and Spanish.

Q p: how can a JavaScript patch reach phones without a store review?
Q x: CodePush over-the-air JS updates
F: Over-the-air JS updates use CodePush (App Center) for bug fixes only; App Center retires in March 2025.

Q l: what image formats and sizes does the app request from the CDN?
F: The app requests product images as WebP at 2x the rendered size from the CDN, falling back to JPEG on Android 8.
"""

BLOCKS += r"""
@ project shop-api

Q l also=payments.provider,webhooks: how do Stripe payments and Stripe webhooks work in shop-api?
Q l also=oncall.handover,monitoring.errors: how are shop-api on-call and exception alerts set up?
Q p also=cache.products,auth.tokens: which lifetimes apply to stored item pages and to shopper logins?

@ project data-pipeline

Q l also=warehouse,cost: which Snowflake database, schemas and warehouse size does data-pipeline use?
Q l also=backfill,late.events: how do backfills work and how are late-arriving events reprocessed?
Q l also=dag.daily_orders,finance.contact: when must the daily orders and finance revenue numbers be ready?

@ project mobile-app

Q l also=release.ios,ci.ios: how are iOS builds released and where does iOS CI run?
Q p also=min.versions,quality.crashfree: which oldest handsets do we still cover, and how stable must launches be?
"""
