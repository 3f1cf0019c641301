"""Hand-written material for generated shop-api distractors (project and agent slots)."""

SCOPE = "shop-api"
TICKET = "SHOP"
TICKET_RANGE = (1200, 2600)
PR_RANGE = (900, 2400)

PEOPLE = [
    ("Priya Raman", "tech lead"),
    ("Marcus Oyelaran", "backend engineer on billing"),
    ("Lena Fischer", "backend engineer on catalog and search"),
    ("Tomás Ibarra", "backend engineer on orders and fulfilment"),
    ("Hiro Tanaka", "SRE for the shop platform"),
    ("Beatriz Nunes", "QA engineer"),
]

PEOPLE_FACTS = [
    "Marcus Oyelaran knows the Stripe integration best and wrote the reconciliation worker.",
    "Lena Fischer is based in Berlin, one hour ahead of Lisbon.",
    "Tomás Ibarra works four days a week and is off on Fridays.",
    "Hiro Tanaka maintains the Terraform for shop-api in the infra-live repository.",
    "Beatriz Nunes writes the regression checklist for each release and keeps it in Notion.",
    "Lena Fischer is on parental leave from 1 July to 30 September 2024; Tomás Ibarra covers catalog reviews.",
    "Marcus Oyelaran prefers to review billing PRs in the afternoon and batches them.",
    "Hiro Tanaka owns the Grafana dashboards for shop-api and reviews any alert rule change.",
    "Beatriz Nunes keeps a list of test customer accounts with different loyalty tiers in 1Password.",
    "Priya Raman runs the fortnightly architecture review on Thursdays at 14:00.",
    "Tomás Ibarra wrote the fulfilment integration with the Manhattan WMS in 2022.",
    "Marcus Oyelaran joined Fernhill Goods in September 2021 from a fintech startup.",
]

# (path, verb phrase describing what it does)
MODULES = [
    (
        "services/billing/invoices.py",
        "renders PDF invoices with WeasyPrint and stores them in S3",
    ),
    (
        "services/billing/ledger.py",
        "writes double-entry ledger rows for every payment event",
    ),
    ("services/billing/payouts.py", "schedules weekly payouts to marketplace sellers"),
    (
        "services/billing/coupons.py",
        "validates coupon codes and computes the discount for a cart",
    ),
    (
        "services/billing/chargebacks.py",
        "handles Stripe dispute events and freezes the affected orders",
    ),
    (
        "services/billing/gift_cards.py",
        "issues gift cards and tracks their remaining balance",
    ),
    (
        "services/orders/checkout.py",
        "orchestrates checkout by reserving stock, creating the payment intent and confirming the order",
    ),
    (
        "services/orders/fulfillment.py",
        "hands paid orders to the warehouse and tracks packing status",
    ),
    ("services/orders/cancellation.py", "cancels orders and releases reserved stock"),
    (
        "services/orders/returns.py",
        "creates return labels and RMA numbers for returned parcels",
    ),
    (
        "services/orders/shipping_rates.py",
        "computes shipping prices from carrier quotes and caches them per postcode",
    ),
    (
        "services/catalog/pricing.py",
        "applies price lists, sale prices and rounding rules",
    ),
    (
        "services/catalog/variants.py",
        "maps product variants such as size and colour to SKUs",
    ),
    (
        "services/catalog/bundles.py",
        "prices product bundles as the sum of their parts minus a bundle discount",
    ),
    (
        "services/catalog/indexer.py",
        "pushes product changes to the search index in batches of 500",
    ),
    ("services/accounts/auth.py", "issues and verifies customer JWTs"),
    (
        "services/accounts/addresses.py",
        "stores customer addresses and normalises postcodes",
    ),
    (
        "services/accounts/loyalty.py",
        "awards loyalty points at one point per euro spent",
    ),
    ("services/accounts/gdpr.py", "exports and erases customer data for GDPR requests"),
    ("api/routes/cart.py", "exposes the cart endpoints under /v1/cart"),
    ("api/routes/orders.py", "exposes order history and order detail endpoints"),
    (
        "api/routes/admin.py",
        "holds the internal back-office endpoints behind staff SSO",
    ),
    ("api/routes/products.py", "serves product listings, filters and product detail"),
    ("workers/emails.py", "renders transactional email templates with Jinja2"),
    (
        "workers/reconcile.py",
        "reconciles Stripe balance transactions with the ledger every night",
    ),
    ("workers/exports.py", "builds CSV exports for the merchandising team"),
    (
        "workers/abandoned_cart.py",
        "sends abandoned-cart reminders 24 hours after the last cart update",
    ),
    ("middleware/request_id.py", "adds an X-Request-ID header to every response"),
    ("middleware/cors.py", "configures CORS for the storefront and admin origins"),
    (
        "settings/base.py",
        "loads configuration from environment variables with pydantic-settings",
    ),
    (
        "services/common/http.py",
        "wraps httpx with retries, timeouts and request logging",
    ),
]

TEST_DIRS = {
    "services": "tests/unit",
    "api": "tests/api",
    "workers": "tests/workers",
    "middleware": "tests/api",
    "settings": "tests/unit",
}

# (file suffixes it applies to, reason)
REFACTOR_REASONS = [
    (".py", "move it to async SQLAlchemy sessions"),
    (".py", "split one 600-line function into smaller steps"),
    (".py", "remove a circular import with the orders package"),
    (".py", "add full type hints for mypy strict"),
    (".py", "replace hand-rolled retries with tenacity"),
    (".py", "drop the Python 3.9 compatibility shims"),
]

# (problem, how it was fixed)
PROBLEMS = [
    (
        "checkout returns 500 when the cart contains a gift card",
        "treating gift cards as a payment method in checkout",
    ),
    (
        "duplicate confirmation emails go out when Stripe retries a webhook",
        "deduplicating on the Stripe event id",
    ),
    (
        "the order history page times out for customers with more than 500 orders",
        "switching the endpoint to cursor pagination",
    ),
    (
        "VAT is rounded per line instead of per invoice for Spanish orders",
        "rounding once on the invoice total",
    ),
    (
        "loyalty points are not revoked after a full refund",
        "listening for the refund.completed event in the loyalty service",
    ),
    (
        "product search ignores accents, so cafe does not match café",
        "adding an asciifolding filter to the analyzer",
    ),
    (
        "coupon usage counters drift when two checkouts finish at the same moment",
        "locking the coupon row with SELECT ... FOR UPDATE",
    ),
    (
        "shipping prices for the Azores are missing from the quote",
        "adding the island postcodes to the zone table",
    ),
    (
        "stock goes negative when the inventory sync overlaps with a checkout",
        "making the sync skip SKUs with open reservations",
    ),
    (
        "password reset links expire after 5 minutes instead of 60",
        "reading the expiry from settings instead of a hard-coded constant",
    ),
    (
        "the /v1/products endpoint returns draft products to anonymous visitors",
        "filtering on published_at in the base query",
    ),
    (
        "Sentry is flooded with ConnectionResetError from the Loqate client",
        "retrying once and downgrading the log level",
    ),
    (
        "the abandoned-cart email reaches customers who already bought the items",
        "checking for a paid order before sending",
    ),
    (
        "invoice PDFs print the company address twice",
        "removing the duplicated header partial",
    ),
    (
        "order cancellation does not release reserved stock for bundles",
        "expanding bundles into components before releasing",
    ),
    (
        "the cart merges incorrectly when a guest logs in",
        "merging by SKU and keeping the higher quantity",
    ),
    ("RMA numbers collide across years", "adding the year to the RMA prefix"),
    (
        "the rate limiter counts CORS preflight requests",
        "skipping OPTIONS requests in the middleware",
    ),
    (
        "the price list import rejects rows with trailing spaces",
        "stripping whitespace in the CSV reader",
    ),
    (
        "dispute webhooks arrive before the charge exists in the ledger",
        "retrying the dispute handler with backoff",
    ),
    (
        "the health check endpoint queries the database on every call",
        "caching the database check for 10 seconds",
    ),
    (
        "queries on order_items are slow without an index on product_id",
        "adding a concurrent index on product_id",
    ),
    (
        "orders placed after 23:00 Lisbon show the next day's date in the back office",
        "converting to Europe/Lisbon before formatting",
    ),
    (
        "GDPR erasure leaves saved addresses behind",
        "cascading the erasure to the addresses table",
    ),
    (
        "admin users can see card fingerprints in the order detail view",
        "removing the fingerprint from the admin serializer",
    ),
    (
        "the bundle discount is applied twice when a coupon is also used",
        "applying coupons after bundle pricing",
    ),
    (
        "the merchandising CSV export uses semicolons on some machines",
        "forcing the comma delimiter explicitly",
    ),
    (
        "gift card balances can go below zero with concurrent orders",
        "using a database check constraint on balance",
    ),
    (
        "the seller payout report double-counts Stripe fees",
        "taking fees only from balance transactions",
    ),
    (
        "product slugs with emoji break the sitemap generator",
        "slugifying with ASCII transliteration",
    ),
    (
        "the returns endpoint accepts items from cancelled orders",
        "validating order state before creating an RMA",
    ),
    (
        "search suggestions show out-of-stock products first",
        "boosting in-stock products in the query",
    ),
    (
        "prices in the cart are stale after a price list update",
        "invalidating cart totals when the price list changes",
    ),
    (
        "order confirmation emails show prices without VAT",
        "passing gross amounts to the email template",
    ),
    (
        "the admin order search is case-sensitive for customer names",
        "using ILIKE with a trigram index",
    ),
]

STATUSES = [
    "open",
    "in progress",
    "in review",
    "blocked on the Stripe upgrade",
    "needs a reproduction",
    "scheduled for the next sprint",
    "parked until after peak season",
]

DEPS = [
    (
        "sqlalchemy",
        "2.0.29",
        "2.0.30 changed how hybrid properties are typed and broke the mypy run",
    ),
    (
        "pydantic",
        "2.6.4",
        "2.7 emits warnings on our Config classes and CI treats warnings as errors",
    ),
    (
        "celery",
        "5.3.6",
        "5.4 changed the scheduler integration and needs a config rewrite",
    ),
    (
        "stripe",
        "8.8.0",
        "newer SDK releases default to a later API version than the one we pin",
    ),
    (
        "fastapi",
        "0.110.0",
        "0.111 pulls in a Starlette release that changes middleware ordering",
    ),
    ("uvicorn", "0.29.0", "it matches the version baked into the base Docker image"),
    ("redis", "5.0.3", "5.0.4 leaks pooled connections when TLS is enabled"),
    (
        "boto3",
        "1.34.69",
        "it is pinned together with botocore to keep the Lambda layer small",
    ),
    ("pytest", "8.1.1", "8.2 broke the pytest-postgresql fixtures"),
    ("jinja2", "3.1.4", "it contains the fix for the xmlattr filter advisory"),
    ("weasyprint", "61.2", "invoice PDFs render fonts differently in 62"),
    ("opensearch-py", "2.4.2", "it matches the 2.x server API we run"),
    ("sentry-sdk", "1.44.0", "2.x renamed the integrations API"),
    (
        "tenacity",
        "8.2.3",
        "8.3 changed the retry statistics attributes used in our logging",
    ),
    (
        "python-jose",
        "3.3.0",
        "it is only used by the legacy admin login and will be removed",
    ),
]

ENV = [
    (
        "SHOP_DB_URL",
        "the Postgres connection string",
        "postgresql://shop:shop@localhost:5432/shop",
    ),
    (
        "REDIS_URL",
        "the Redis instance used for caching and rate limiting",
        "redis://localhost:6379/0",
    ),
    ("SHOP_ENV", "which settings profile is loaded", "local"),
    (
        "LOQATE_API_KEY",
        "the address validation credential",
        "empty, which skips validation locally",
    ),
    (
        "UNLEASH_URL",
        "the feature flag server",
        "https://flags.internal.fernhill.example/api",
    ),
    ("SENTRY_DSN", "where exceptions are reported", "empty, which disables reporting"),
    (
        "CHECKOUT_RESERVATION_MINUTES",
        "how long stock stays reserved during checkout",
        "15",
    ),
    ("INVOICE_BUCKET", "where invoice PDFs are written", "fernhill-invoices-dev"),
    ("MAX_CART_ITEMS", "the maximum number of lines in a cart", "50"),
    ("ORDER_EXPORT_CRON", "when the merchandising export runs", "0 6 * * *"),
    (
        "JWT_PRIVATE_KEY_PATH",
        "where the RS256 signing key is read from",
        "/run/secrets/jwt.pem",
    ),
    (
        "TAXJAR_API_TOKEN",
        "the TaxJar credential",
        "unset in tests, where tax falls back to a flat 23%",
    ),
    (
        "CORS_ORIGINS",
        "the comma-separated list of allowed origins",
        "http://localhost:5173",
    ),
    ("CELERY_BROKER_URL", "the Celery broker", "redis://localhost:6379/1"),
    ("PASSWORD_RESET_TTL_MINUTES", "how long password reset links stay valid", "60"),
]

# (date, what happened, cause, follow-up)
INCIDENTS = [
    (
        "2024-01-12",
        "checkout was down for 22 minutes",
        "an expired TLS certificate on the payments proxy",
        "cert-manager renews certificates and alerts 14 days ahead",
    ),
    (
        "2023-11-24",
        "Black Friday traffic pushed checkout p99 to 4 seconds",
        "a missing index on order_items.product_id",
        "the index exists and load tests include Black Friday volumes",
    ),
    (
        "2024-03-03",
        "41 customers were charged twice",
        "a webhook retry racing the synchronous confirmation",
        "payment confirmation is idempotent on the payment intent id",
    ),
    (
        "2023-09-18",
        "product images disappeared for an hour",
        "an S3 lifecycle rule that deleted originals",
        "the rule only targets the thumbnails/ prefix",
    ),
    (
        "2024-02-20",
        "the WELCOME10 coupon was redeemed without limit",
        "a cached usage counter that was never invalidated",
        "usage counters live in Postgres behind a row lock",
    ),
    (
        "2023-12-05",
        "transactional emails stopped for six hours",
        "the notifications worker crashing on a malformed template",
        "template errors go to a dead-letter queue with an alert",
    ),
    (
        "2024-04-09",
        "the back office was reachable without SSO",
        "a misconfigured ingress path",
        "ingress rules are covered by a CI test",
    ),
    (
        "2023-10-30",
        "public order numbers skipped about 2,000 values",
        "the sequence cache after a database failover",
        "gaps were accepted as harmless and documented",
    ),
    (
        "2024-05-14",
        "search returned nothing for Portuguese queries",
        "a new index created without the analyzer settings",
        "indices are only created through scripts/create_index.py",
    ),
    (
        "2024-01-29",
        "refund requests timed out for 40 minutes",
        "a latency spike in the payment provider's EU region",
        "refund calls retry with exponential backoff",
    ),
]

CONVENTIONS = [
    "Service functions raise domain exceptions from services/common/errors.py; only the API layer turns them into HTTP responses.",
    "Database sessions are opened per request by a FastAPI dependency; background workers open one session per task.",
    "All timestamps in shop-api are timezone-aware UTC; conversion to Lisbon time happens only in templates.",
    "IDs exposed in URLs are UUIDv7 values, never the integer primary key.",
    "Public API field names are camelCase in JSON and snake_case in Python, converted by a Pydantic alias generator.",
    "Pagination uses opaque cursors; offset pagination was removed from all public endpoints.",
    "Soft deletes use a deleted_at column; hard deletes only happen in the GDPR erasure job.",
    "Every outgoing HTTP call must set a timeout; the shared client defaults to 5 seconds.",
    "Amounts are never formatted in Python; the storefront formats them with the customer's locale.",
    "Product slugs are generated once and never change, because marketing links depend on them.",
    "Admin actions are written to the audit_log table with the staff member's email and before/after values.",
    "The orders table has been partitioned by month since January 2024.",
    "Pull requests need one approval, or two when they touch services/billing/.",
    "Integration tests that talk to Stripe use the stripe-mock container, never the real test-mode API.",
    "Celery tasks must be idempotent because the broker can deliver a message twice.",
    "Carts expire after 30 days of inactivity for logged-in customers and after 7 days for guests.",
    "Gift cards are modelled as a payment method, not as a discount.",
    "Prices shown in the storefront include VAT; prices stored in the catalog exclude it.",
    "Back-office staff log in through Google Workspace SSO; there are no local admin passwords.",
    "Every Alembic migration must be reversible; a downgrade() that raises NotImplementedError fails review.",
    "The product catalog is the source of truth for parcel weights; shipping code never guesses a weight.",
    "Customer emails are compared case-insensitively through a CITEXT column.",
    "API errors follow RFC 7807 problem+json with a stable code field.",
    "Feature branches are named after the ticket, like SHOP-2310-gift-card-refunds.",
    "Release notes for shop-api are generated from commit messages by release-please.",
    "The shop-api codebase is about 84,000 lines of Python across roughly 610 files.",
    "Average order value was 64 euros in the March 2024 business review.",
    "The storefront is a separate Next.js repository; shop-api only serves JSON.",
    "Webhook handlers must acknowledge quickly and push the real work onto a Celery task.",
    "Guest checkout creates a shadow account that is merged if the customer registers later.",
]

ADRS = [
    "ADR-007: shop-api stays a modular monolith; splitting out services needs a written case.",
    "ADR-011: we chose FastAPI over Django REST Framework in 2021 for async support and typed schemas.",
    "ADR-014: background work goes through Celery with Redis as the broker rather than RabbitMQ.",
    "ADR-018: monetary values are integers in minor units everywhere, including the ledger.",
    "ADR-021: OpenSearch replaced Postgres full-text search for the product catalog.",
    "ADR-023: each bounded context owns its tables; cross-context joins go through service functions.",
    "ADR-026: idempotency keys are required on every POST that creates a payment or an order.",
    "ADR-029: the back office moved from server-rendered Jinja pages to a separate React app.",
    "ADR-031: configuration comes only from environment variables; no YAML config files in the image.",
    "ADR-034: public API responses never include internal numeric ids.",
]

# (method, route, behaviour)
ENDPOINTS = [
    (
        "GET",
        "/v1/cart",
        "returns the current cart with computed totals and applied discounts",
    ),
    (
        "POST",
        "/v1/cart/items",
        "adds a SKU to the cart and answers 409 when stock is insufficient",
    ),
    ("POST", "/v1/checkout", "starts checkout and returns a Stripe client secret"),
    ("GET", "/v1/orders", "lists the customer's orders with cursor pagination"),
    (
        "GET",
        "/v1/orders/{id}",
        "returns one order with its line items and shipment tracking",
    ),
    (
        "POST",
        "/v1/orders/{id}/cancel",
        "cancels an order and answers 409 when it can no longer be cancelled",
    ),
    ("POST", "/v1/orders/{id}/returns", "opens a return and emails a prepaid label"),
    (
        "GET",
        "/v1/products",
        "lists published products with filters for category, price and colour",
    ),
    (
        "GET",
        "/v1/products/{slug}",
        "returns product detail including variants and stock per variant",
    ),
    ("GET", "/v1/search", "proxies product search with typo tolerance and facets"),
    (
        "POST",
        "/v1/auth/login",
        "exchanges email and password for an access and refresh token pair",
    ),
    (
        "POST",
        "/v1/auth/refresh",
        "rotates the refresh token and returns a new access token",
    ),
    ("GET", "/v1/me/addresses", "lists saved addresses for the logged-in customer"),
    (
        "GET",
        "/v1/me/loyalty",
        "returns the loyalty balance and the last 20 point movements",
    ),
    (
        "POST",
        "/v1/coupons/validate",
        "checks a coupon code against the current cart without applying it",
    ),
    (
        "GET",
        "/v1/shipping/quote",
        "returns shipping options for a postcode and cart weight",
    ),
    ("GET", "/healthz", "reports liveness without touching the database"),
    (
        "GET",
        "/readyz",
        "checks the database, Redis and OpenSearch before reporting ready",
    ),
    (
        "POST",
        "/internal/admin/orders/{id}/refund",
        "lets support staff issue a refund from the back office",
    ),
    (
        "GET",
        "/internal/admin/exports",
        "lists generated CSV exports available for download",
    ),
]

# free-form agent lessons for shop-api
AGENT_NOTES = [
    "The stripe-mock container ignores idempotency keys, so tests for duplicate payments must assert on our own table.",
    "`make schemas` regenerates the OpenAPI file; forgetting it makes the contract test fail with a long diff.",
    "The admin app's CORS origin in local development is http://localhost:5173, not 3000.",
    "Use `make shell` to get an IPython shell with the app context and a database session already set up.",
    "Priya asks for a short PR description with the ticket id in the title; PRs without it get a comment within minutes.",
    "The local OpenSearch container needs at least 2 GB of memory or it exits with code 137.",
    "`alembic revision --autogenerate` misses changes to server defaults; check the generated migration by hand.",
    "Loading the full product fixture takes about 40 seconds; use the small fixture set with SEED_SIZE=small.",
    "pytest-xdist with -n auto overwhelms the local Postgres; -n 4 is the sweet spot on the sandbox.",
    "Marcus wants billing tests to assert exact cent amounts, never approximate comparisons.",
    "The orders partition for next month is created by a cron job on the 25th; local databases may lack it until you run `make partitions`.",
    "When the Loqate sandbox key is missing, address tests are skipped silently rather than failing.",
    "Coverage for services/billing must stay above 90%; the CI job fails the PR below that.",
    "Running `ruff check --fix` also reorders imports; run it before committing to avoid a second CI round.",
    "The seller payouts code has no tests for currencies other than EUR; be careful when touching it.",
    "Celery beat schedules live in settings/celery_schedule.py, not in the worker modules.",
]

FLAKY_TESTS = [
    ("test_cart_merge_guest", "tests/unit/test_cart.py"),
    ("test_order_history_pagination", "tests/api/test_orders.py"),
    ("test_invoice_pdf_render", "tests/unit/test_invoices.py"),
    ("test_coupon_usage_counter", "tests/unit/test_coupons.py"),
    ("test_inventory_sync_overlap", "tests/workers/test_inventory.py"),
    ("test_shipping_quote_cache", "tests/unit/test_shipping_rates.py"),
    ("test_loyalty_points_award", "tests/unit/test_loyalty.py"),
    ("test_webhook_signature_tolerance", "tests/api/test_webhooks.py"),
    ("test_password_reset_expiry", "tests/api/test_auth.py"),
    ("test_gdpr_erasure_addresses", "tests/unit/test_gdpr.py"),
    ("test_abandoned_cart_schedule", "tests/workers/test_abandoned_cart.py"),
    ("test_bundle_pricing", "tests/unit/test_bundles.py"),
    ("test_admin_sso_redirect", "tests/api/test_admin.py"),
    ("test_search_accents", "tests/api/test_search.py"),
    ("test_export_csv_delimiter", "tests/workers/test_exports.py"),
    ("test_ledger_balance_after_dispute", "tests/unit/test_ledger.py"),
    ("test_chargeback_freezes_order", "tests/unit/test_chargebacks.py"),
    ("test_readyz_opensearch_down", "tests/api/test_health.py"),
]

ERRORS = [
    (
        "sqlalchemy.exc.MissingGreenlet: greenlet_spawn has not been called",
        "when a lazy-loaded relationship is touched inside async code",
        "load it eagerly with selectinload() in the query",
    ),
    (
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for OrderOut",
        "after adding a column to the Order model",
        "add the field to the OrderOut schema and run `make schemas`",
    ),
    (
        "redis.exceptions.ConnectionError: Error 111 connecting to localhost:6379. Connection refused.",
        "when tests run without the redis container",
        "start it with `docker compose up -d redis`",
    ),
    (
        "stripe.error.InvalidRequestError: No such payment_intent",
        "in tests that reuse ids from recorded fixtures",
        "switch those tests to the stripe-mock container",
    ),
    (
        "alembic.util.exc.CommandError: Can't locate revision identified by 'a1b2c3d4e5f6'",
        "after switching to a branch with fewer migrations",
        "downgrade on the other branch first or recreate the local database",
    ),
    (
        "jwt.exceptions.InvalidSignatureError: Signature verification failed",
        "when the local signing key differs from the one in .env.test",
        "run `make keys` to regenerate both",
    ),
    (
        "celery.exceptions.NotRegistered: 'workers.emails.send_order_confirmation'",
        "when the worker started before the task module was imported",
        "restart the worker with `-A shop.celery_app`",
    ),
    (
        "asyncpg.exceptions.TooManyConnectionsError: sorry, too many clients already",
        "when pytest-xdist runs with more than 8 workers",
        "limit the run to -n 4",
    ),
    (
        "ModuleNotFoundError: No module named 'shop'",
        "when pytest is run from the repository root without an editable install",
        "run `uv pip install -e .` first",
    ),
    (
        "Fontconfig error: Cannot load default config file",
        "when invoice tests run in the slim Docker image",
        "install fontconfig in the image or deselect them with -m 'not pdf'",
    ),
    (
        "opensearchpy.exceptions.ConnectionTimeout",
        "while the search container is still starting",
        "wait until cluster health reports yellow",
    ),
    (
        'IntegrityError: duplicate key value violates unique constraint "uq_coupon_code"',
        "when the seed script runs twice",
        "truncate the coupons table before seeding again",
    ),
]

# --- more material ---------------------------------------------------------

MODULES += [
    ("services/billing/receipts.py", "emails a receipt after each successful payment"),
    (
        "services/billing/credit_notes.py",
        "creates credit notes when an invoiced order is refunded",
    ),
    (
        "services/orders/split_shipments.py",
        "splits an order into several parcels when items ship from different warehouses",
    ),
    (
        "services/orders/tracking.py",
        "polls carrier APIs for tracking updates every 30 minutes",
    ),
    ("services/orders/notes.py", "stores internal support notes on orders"),
    (
        "services/catalog/reviews.py",
        "stores product reviews and computes average ratings",
    ),
    (
        "services/catalog/recommendations.py",
        "returns related products based on co-purchase counts",
    ),
    ("services/catalog/media.py", "uploads product images and records their S3 keys"),
    (
        "services/catalog/stock_alerts.py",
        "emails customers who asked to be told when a product is back in stock",
    ),
    ("services/accounts/wishlist.py", "stores wishlists shared with the mobile app"),
    (
        "services/accounts/consent.py",
        "records marketing consent with a timestamp and source",
    ),
    ("services/accounts/sessions.py", "lists and revokes a customer's active sessions"),
    (
        "api/routes/returns.py",
        "exposes the returns endpoints used by the storefront and support",
    ),
    (
        "api/routes/partners.py",
        "serves the partner API for marketplaces with its own authentication",
    ),
    (
        "workers/search_reindex.py",
        "rebuilds the product search index from scratch every Sunday night",
    ),
    ("workers/sitemap.py", "generates the sitemap XML files for the storefront"),
    (
        "workers/price_import.py",
        "imports price lists uploaded as CSV by the merchandising team",
    ),
    (
        "scripts/create_index.py",
        "creates a new search index with the right analyzer settings",
    ),
    ("scripts/anonymise_dump.py", "anonymises a production dump for local debugging"),
]

# (path, function, what it does)
FUNCTIONS = [
    (
        "services/orders/checkout.py",
        "reserve_stock()",
        "locks the SKU rows and creates reservations that expire",
    ),
    (
        "services/orders/checkout.py",
        "confirm_order()",
        "marks the order paid once the payment intent succeeds",
    ),
    (
        "services/billing/coupons.py",
        "apply_coupon()",
        "returns a new cart total and raises CouponExpired for old codes",
    ),
    (
        "services/billing/invoices.py",
        "render_invoice_pdf()",
        "builds the PDF from the invoice.html template",
    ),
    (
        "services/billing/ledger.py",
        "post_entry()",
        "writes balanced debit and credit rows in one transaction",
    ),
    (
        "services/orders/shipping_rates.py",
        "quote_for_postcode()",
        "returns cached quotes or calls the carriers",
    ),
    (
        "services/catalog/pricing.py",
        "effective_price()",
        "picks the lowest active price list entry for a SKU",
    ),
    (
        "services/accounts/auth.py",
        "issue_tokens()",
        "creates the access and refresh token pair for a customer",
    ),
    (
        "services/accounts/gdpr.py",
        "erase_customer()",
        "anonymises a customer and their orders but keeps invoice totals",
    ),
    (
        "services/accounts/loyalty.py",
        "award_points()",
        "adds points after an order is delivered, not when it is paid",
    ),
    (
        "services/orders/returns.py",
        "create_rma()",
        "allocates an RMA number and emails a prepaid label",
    ),
    (
        "services/catalog/variants.py",
        "sku_for()",
        "builds a SKU from the product code, colour and size",
    ),
    (
        "workers/reconcile.py",
        "reconcile_day()",
        "compares one day of Stripe balance transactions with ledger rows",
    ),
    (
        "services/common/http.py",
        "make_client()",
        "returns an httpx client with a 5 second timeout and retries",
    ),
    (
        "api/routes/cart.py",
        "add_item()",
        "validates the quantity against MAX_CART_ITEMS",
    ),
    (
        "services/orders/cancellation.py",
        "cancel_order()",
        "raises OrderNotCancellable when the order state does not allow it",
    ),
    (
        "workers/abandoned_cart.py",
        "find_abandoned_carts()",
        "selects carts untouched for 24 hours that have a known email",
    ),
    (
        "services/billing/chargebacks.py",
        "freeze_order()",
        "blocks fulfilment while a dispute is open",
    ),
]

FEATURES = [
    ("guest checkout", "live for 100% of customers"),
    ("gift card refunds", "in development behind the shop_gift_card_refunds flag"),
    (
        "the one-page checkout",
        "rolled out to 50% of traffic behind shop_onepage_checkout",
    ),
    ("MB WAY payments", "live since March 2024"),
    ("Klarna pay-later", "on hold until the legal review finishes"),
    ("partner API v2", "in design, with Priya owning the proposal"),
    ("saved payment methods", "live, using Stripe customer objects"),
    (
        "order editing after payment",
        "rejected for now because of fulfilment complexity",
    ),
    ("multi-currency prices", "planned for Q4 2024"),
    ("click and collect", "piloting in the Chiado store"),
    ("B2B invoicing", "in progress with the finance team"),
    ("subscription boxes", "paused after the 2023 pilot"),
    ("back-in-stock emails", "live and sending about 3,000 emails a week"),
    ("product bundles", "live since November 2023"),
]

PROBLEMS += [
    (
        "the sitemap misses products with more than 50 variants",
        "paginating variants in the sitemap query",
    ),
    (
        "tracking updates stop for DHL parcels after 7 days",
        "extending the polling window to 21 days",
    ),
    (
        "review ratings round 4.45 up in some places and down in others",
        "using one shared rounding helper",
    ),
    (
        "wishlist items disappear when a product is renamed",
        "referencing products by id instead of slug",
    ),
    (
        "marketing consent is recorded twice at signup",
        "making the consent write idempotent",
    ),
    (
        "the price import silently skips rows with a comma in the product name",
        "using the csv module instead of str.split",
    ),
    ("credit notes carry the wrong tax date", "using the refund date as the tax point"),
    (
        "the partner API returns 500 for unknown SKUs instead of 404",
        "mapping NotFound to 404 in the partner router",
    ),
    (
        "back-in-stock emails go out before stock is actually sellable",
        "waiting for the inventory sync to confirm",
    ),
    (
        "MB WAY payments stay pending forever when the customer ignores the phone prompt",
        "expiring them after 5 minutes",
    ),
    (
        "the anonymised dump still contains phone numbers",
        "adding the phones table to the anonymiser",
    ),
    ("split shipments charge shipping twice", "charging shipping once per order"),
]

EXTRA = [
    "Support staff can issue refunds up to 200 euros without approval; larger ones need a team lead.",
    "Order confirmation emails are sent in the customer's language, defaulting to Portuguese.",
    "Product reviews are moderated by customer support within one business day.",
    "Marketplace sellers are paid weekly on Wednesdays, minus a 12% commission.",
    "The partner API uses HMAC-signed requests with a per-partner secret.",
    "About 1,800 orders are placed on an average weekday, peaking around 21:00 Lisbon.",
    "The support team works 08:00-20:00 Lisbon on weekdays and 10:00-18:00 on Saturdays.",
    "Stock reservations are released automatically if checkout is abandoned.",
    "Orders over 500 euros are flagged for a manual fraud check before packing.",
    "Customer passwords are hashed with argon2id.",
    "Staging uses Stripe test mode and the MB WAY sandbox.",
    "Postgres connections go through PgBouncer in transaction mode, so session-level features like advisory locks are off limits.",
    "The back office is only reachable over the company VPN.",
    "Merchandising can schedule price changes up to 30 days ahead.",
]

ENDPOINTS += [
    ("GET", "/v1/me/wishlist", "returns wishlist items with current prices"),
    ("POST", "/v1/me/consent", "records marketing consent changes"),
    ("GET", "/v1/products/{slug}/reviews", "lists approved reviews with pagination"),
    (
        "POST",
        "/v1/stock-alerts",
        "subscribes an email address to a back-in-stock alert",
    ),
    ("GET", "/v1/orders/{id}/tracking", "returns carrier tracking events for an order"),
    ("GET", "/partner/v1/catalog", "exports the catalog for marketplace partners"),
    (
        "POST",
        "/partner/v1/orders",
        "creates an order on behalf of a marketplace partner",
    ),
    (
        "GET",
        "/v1/me/sessions",
        "lists active sessions so customers can sign out other devices",
    ),
]

AGENT_NOTES += [
    "`make test-fast` skips the PDF and search tests and finishes in about 3 minutes.",
    "The anonymised dump is 4 GB; restoring it locally takes about 12 minutes with pg_restore -j 4.",
    "Local emails are caught by Mailpit at http://localhost:8025; nothing is actually sent.",
    "Tomás asks for a sequence diagram in the PR when a change touches the order state machine.",
    "Running OpenSearch locally is optional; SEARCH_BACKEND=memory switches to an in-memory fake.",
    "The partner API has its own test suite under tests/partner/ that CI runs only when api/routes/partners.py changes.",
    "Hiro wants every new Celery queue to come with an alert rule on queue length.",
    "Adding a column with a default to the orders table locks it; add it nullable first and backfill.",
    "CI runs `uv sync --frozen`; if that fails locally, the lock file is out of date.",
    "The back-office e2e tests use Playwright and need `npx playwright install chromium` once.",
]

FLAKY_TESTS += [
    ("test_sitemap_pagination", "tests/workers/test_sitemap.py"),
    ("test_tracking_poll_window", "tests/unit/test_tracking.py"),
    ("test_price_import_commas", "tests/workers/test_price_import.py"),
    ("test_mbway_expiry", "tests/unit/test_payments_mbway.py"),
    ("test_partner_hmac", "tests/partner/test_auth.py"),
    ("test_split_shipment_shipping", "tests/unit/test_split_shipments.py"),
]

ERRORS += [
    (
        'pg_restore: error: could not execute query: ERROR: role "shop_ro" does not exist',
        "when restoring the anonymised dump",
        "create the role first or pass --no-owner",
    ),
    (
        "playwright._impl._errors.Error: Executable doesn't exist",
        "when running the back-office e2e tests",
        "run `npx playwright install chromium`",
    ),
    (
        "httpx.ReadTimeout",
        "when tests call the Loqate sandbox",
        "mark them with @pytest.mark.network so they are skipped offline",
    ),
    (
        "KeyError: 'STRIPE_API_KEY'",
        "when settings load in a fresh shell",
        "copy .env.example to .env",
    ),
]

HANDLES = {
    "Priya Raman": "priyar",
    "Marcus Oyelaran": "moyelaran",
    "Lena Fischer": "lfischer-dev",
    "Tomás Ibarra": "tibarra",
    "Hiro Tanaka": "hiro-t",
    "Beatriz Nunes": "bnunes-qa",
}

OLD_PINS = [
    ("sqlalchemy", "1.4.52"),
    ("pydantic", "1.10.13"),
    ("celery", "5.2.7"),
    ("stripe", "5.5.0"),
    ("fastapi", "0.95.2"),
    ("pytest", "7.4.4"),
    ("weasyprint", "57.2"),
]

RETRO = [
    "stop merging on Friday afternoons after 15:00 unless it is a hotfix",
    "write the migration and the code change in separate PRs when a table has more than a million rows",
    "keep the shared test fixtures in tests/conftest.py small and move scenario data into factories",
    "rotate who runs the weekly dependency update instead of leaving it to whoever is on call",
    "add a runbook link to every new alert",
    "time-box investigations of flaky tests to one hour before quarantining them",
    "review the error budget for checkout at every planning meeting",
    "demo finished work to support every other Thursday",
]

COMMANDS = [
    ("make lint", "about 20 seconds"),
    ("make typecheck", "about 70 seconds with a warm mypy cache"),
    ("make test", "about 9 minutes"),
    ("make schemas", "about 15 seconds"),
    ("docker compose build", "about 4 minutes from a cold cache"),
    ("make seed", "about 40 seconds"),
]

CHANNELS = [
    ("#shop-dev", "day-to-day questions about shop-api"),
    ("#shop-alerts", "Sentry and Grafana alerts for shop-api"),
    ("#shop-releases", "release notes and deploy announcements"),
    ("#payments-ops", "coordination with finance about refunds and payouts"),
    ("#support-escalations", "bugs escalated by customer support"),
]

INCIDENTS += [
    (
        "2024-05-31",
        "the partner API rejected every request for an hour",
        "HMAC secrets rotated on our side without notifying partners",
        "secret rotation has a 7-day overlap window",
    ),
    (
        "2024-03-22",
        "back-in-stock emails went out for products that were not yet sellable",
        "the alert job reading stock before the inventory sync finished",
        "the job waits for the sync to complete",
    ),
    (
        "2023-08-14",
        "the sitemap served 404 for a day",
        "the sitemap worker writing to the wrong S3 prefix",
        "the sitemap URL is part of the synthetic checks",
    ),
]

GLOSSARY = [
    "RMA means return merchandise authorisation; every return gets one before a label is issued.",
    "A reservation is a temporary hold on stock created when checkout starts.",
    "In shop-api, a SKU is one sellable variant, such as a blue cushion cover in 50x50.",
    "A price list is a dated set of prices; several can be active, and the lowest wins.",
    "A shadow account is the account created for a guest checkout.",
    "Payout in shop-api means money sent to marketplace sellers, not refunds to customers.",
    "A dispute is Stripe's word for a chargeback opened by the card holder's bank.",
    "The merch team is the merchandising team that owns prices, categories and collections.",
]
