"""Hand-written material for generated data-pipeline distractors (project and agent slots)."""

SCOPE = "data-pipeline"
TICKET = "DATA"
TICKET_RANGE = (300, 1100)
PR_RANGE = (200, 1300)

PEOPLE = [
    ("Aisha Karimi", "data engineering lead"),
    ("Bruno Costa", "data engineer for Spark and EMR"),
    ("Ingrid Solberg", "analytics engineer for finance marts"),
    ("Wei Zhang", "data engineer for ingestion and Kafka"),
    ("Olu Adebayo", "analytics engineer for Looker and marketing models"),
]

PEOPLE_FACTS = [
    "Bruno Costa maintains the EMR cluster configuration and the bootstrap scripts in emr/bootstrap/.",
    "Ingrid Solberg is the person to ask about how refunds are allocated in the finance marts.",
    "Wei Zhang wrote the Kafka-to-S3 sink and is the only one who has restarted it in production.",
    "Olu Adebayo keeps the Looker explores in sync with dbt exposures.",
    "Aisha Karimi holds office hours for analysts on Tuesdays at 15:00.",
    "Bruno Costa is on vacation from 12 to 30 August 2024; Wei Zhang covers Spark questions.",
    "Ingrid Solberg works from Oslo and starts at 08:00 Lisbon.",
    "Wei Zhang is migrating the ingestion jobs from Python consumers to Kafka Connect.",
    "Olu Adebayo previously worked on the marketing team and still owns the attribution model.",
    "Aisha Karimi presents the data platform roadmap at the quarterly engineering all-hands.",
]

MODULES = [
    (
        "dags/hourly_events.py",
        "loads clickstream partitions from S3 into RAW.EVENTS every hour",
    ),
    ("dags/daily_customers.py", "rebuilds the customer dimension and loyalty tiers"),
    ("dags/fx_rates.py", "loads ECB exchange rates every weekday at 17:00 CET"),
    (
        "dags/marketing_spend.py",
        "pulls ad spend from Google Ads and Meta into RAW.MARKETING",
    ),
    (
        "dags/inventory_snapshots.py",
        "copies a nightly snapshot of stock levels from the shop database",
    ),
    ("dags/sessionize.py", "triggers the Spark sessionization job on EMR"),
    (
        "dags/common/defaults.py",
        "defines default retries, owners and Slack callbacks for every DAG",
    ),
    ("dags/common/snowflake.py", "wraps the Snowflake hook with query tagging"),
    (
        "models/staging/stg_orders.sql",
        "cleans order rows from RAW.SHOP_ORDERS and casts amounts to decimals",
    ),
    ("models/staging/stg_events.sql", "deduplicates clickstream events on event_id"),
    ("models/staging/stg_refunds.sql", "maps raw refund records to order lines"),
    ("models/staging/stg_customers.sql", "hashes emails and normalises country codes"),
    (
        "models/intermediate/int_order_attribution.sql",
        "assigns each order to a marketing channel",
    ),
    (
        "models/intermediate/int_sessions.sql",
        "joins Spark sessions with the first order in each session",
    ),
    (
        "models/marts/fct_orders.sql",
        "builds one row per order line with revenue columns",
    ),
    (
        "models/marts/fct_revenue_daily.sql",
        "aggregates revenue per day and channel for finance",
    ),
    (
        "models/marts/dim_customer.sql",
        "keeps the SCD type 2 history of customer attributes",
    ),
    ("models/marts/fct_inventory_daily.sql", "computes daily stock cover per SKU"),
    (
        "models/marts/fct_sessions.sql",
        "exposes sessions with conversion flags for Looker",
    ),
    (
        "jobs/spark/sessionize.py",
        "groups events into sessions with a 30-minute inactivity gap",
    ),
    ("jobs/spark/compact_events.py", "compacts small Parquet files into 256 MB files"),
    (
        "plugins/operators/s3_to_snowflake.py",
        "implements the COPY INTO operator used by the ingestion DAGs",
    ),
    (
        "plugins/sensors/partition_sensor.py",
        "waits for an S3 partition to contain a _SUCCESS marker",
    ),
    (
        "macros/cents_to_euros.sql",
        "converts integer cents to euros with two decimal places",
    ),
    (
        "macros/generate_schema_name.sql",
        "overrides schema naming so dev runs go to per-user schemas",
    ),
    (
        "ingestion/kafka_sink/consumer.py",
        "writes Kafka messages to S3 in hourly batches",
    ),
]

# (file suffixes it applies to, reason)
REFACTOR_REASONS = [
    (".py", "move hard-coded dates into Airflow params"),
    (".py", "use the TaskFlow API"),
    (".py", "drop a dependency on the retired Redshift hook"),
    (".py", "add type hints and a unit test per function"),
    (".sql", "split the model into staging and intermediate layers"),
    (".sql", "make it incremental instead of a full refresh"),
    (".sql", "replace nested subqueries with CTEs"),
]

PROBLEMS = [
    (
        "fct_orders double counts orders with two refunds",
        "joining refunds at line level before aggregating",
    ),
    (
        "the hourly_events DAG misses the 23:00 partition on daylight saving days",
        "using UTC hours for partition names",
    ),
    (
        "stg_events keeps duplicate events sent by the mobile app after a retry",
        "deduplicating on event_id and sent_at",
    ),
    (
        "the marketing_spend DAG fails when Meta returns an empty page",
        "treating an empty page as the end of results",
    ),
    (
        "dim_customer creates a new version every day even without changes",
        "comparing a hash of tracked columns",
    ),
    (
        "exchange rates are missing on Portuguese bank holidays",
        "forward-filling the last known rate",
    ),
    (
        "fct_sessions shows conversion rates above 100% for some campaigns",
        "counting distinct sessions instead of orders",
    ),
    (
        "the Spark sessionize job runs out of executor memory on Black Friday data",
        "repartitioning by user before sorting",
    ),
    (
        "Looker shows revenue in cents for the Spain explore",
        "applying the cents_to_euros macro in the mart",
    ),
    (
        "the inventory snapshot copies soft-deleted SKUs",
        "filtering on deleted_at in the extract query",
    ),
    (
        "Airflow sends two Slack alerts for every failed task",
        "removing the duplicated on_failure_callback",
    ),
    (
        "the Kafka sink writes empty files when the topic is idle",
        "skipping the flush when the batch is empty",
    ),
    (
        "dbt source freshness warns on weekends for the B2B orders source",
        "setting a longer threshold for weekends",
    ),
    (
        "int_order_attribution assigns direct traffic when UTM parameters are uppercase",
        "lowercasing UTM values in staging",
    ),
    (
        "the partition sensor waits forever when the producer skips an hour",
        "adding a timeout and soft_fail",
    ),
    (
        "fct_inventory_daily reports negative stock cover",
        "clamping cover at zero and flagging the SKU",
    ),
    (
        "compact_events deletes source files before the compacted file is written",
        "deleting only after a successful commit",
    ),
    (
        "stg_customers fails on country codes like UK instead of GB",
        "mapping legacy codes in a seed",
    ),
    (
        "the daily_customers DAG holds a Snowflake lock that blocks analysts",
        "using a transient table and a swap",
    ),
    (
        "revenue in fct_revenue_daily differs from the finance export by a few cents",
        "rounding per line before summing",
    ),
    (
        "dbt docs generation takes 20 minutes",
        "excluding the raw sources from catalog generation",
    ),
    (
        "Great Expectations emails every analyst on failure",
        "routing alerts only to #data-alerts",
    ),
    (
        "the fx_rates DAG stores rates with the wrong date when ECB publishes late",
        "using the publication date from the payload",
    ),
    (
        "sessions split at midnight UTC instead of after inactivity",
        "removing the date from the session window key",
    ),
    (
        "the s3_to_snowflake operator ignores the ON_ERROR option",
        "passing copy options through to the COPY statement",
    ),
    (
        "mobile events have client timestamps from the future",
        "capping event time at received time",
    ),
    (
        "Airflow pools are exhausted when backfills run in parallel",
        "giving backfills their own pool with 4 slots",
    ),
    (
        "the marketing spend numbers include VAT for Meta",
        "removing VAT using the invoice country",
    ),
    ("the dim_date table stops in 2025", "extending it to 2035 with a generator macro"),
    (
        "Snowflake credits spiked after a full refresh of fct_events",
        "adding a guard against full refreshes in prod",
    ),
]

STATUSES = [
    "open",
    "in progress",
    "in review",
    "blocked on the Kafka Connect migration",
    "needs a reproduction",
    "scheduled for next sprint",
    "waiting on finance sign-off",
]

DEPS = [
    ("apache-airflow", "2.8.1", "MWAA only supports a fixed list of versions"),
    (
        "apache-airflow-providers-snowflake",
        "5.3.0",
        "5.4 requires a newer snowflake-connector than MWAA ships",
    ),
    (
        "snowflake-connector-python",
        "3.7.1",
        "it is the latest version that works with the pinned pyarrow",
    ),
    ("pyarrow", "14.0.2", "it is the newest version the MWAA constraints file allows"),
    ("great-expectations", "0.18.12", "1.0 is a rewrite of the API"),
    ("sqlfluff", "2.3.5", "3.0 changed the rule codes in our config"),
    ("pyspark", "3.4.1", "it matches the Spark version on the EMR release"),
    ("confluent-kafka", "2.3.0", "newer wheels need a glibc that the sink image lacks"),
    ("dbt-utils", "1.1.1", "it matches the dbt 1.7 line"),
    (
        "pandas",
        "2.1.4",
        "2.2 changes the default for copy-on-write warnings in our plugins",
    ),
    ("boto3", "1.33.13", "MWAA constraints files pin it"),
    ("elementary-data", "0.13.2", "the monitoring dashboards were built against it"),
]

ENV = [
    ("DBT_TARGET", "which dbt profile target is used", "dev"),
    ("DBT_PROFILES_DIR", "where profiles.yml is read from", "./profiles"),
    ("SNOWFLAKE_ACCOUNT", "the Snowflake account locator", "fernhill-eu1"),
    (
        "SNOWFLAKE_ROLE",
        "the role used by dbt runs",
        "TRANSFORMER in CI and REPORTER locally",
    ),
    (
        "AIRFLOW__CORE__LOAD_EXAMPLES",
        "whether example DAGs load in local Airflow",
        "False",
    ),
    ("RAW_BUCKET", "the S3 bucket for raw data", "fernhill-raw"),
    (
        "KAFKA_BOOTSTRAP",
        "the Kafka brokers the sink connects to",
        "kafka-1.internal:9092",
    ),
    ("SINK_FLUSH_SECONDS", "how often the Kafka sink flushes a batch", "300"),
    ("SPARK_EXECUTOR_MEMORY", "executor memory for local Spark runs", "4g"),
    (
        "GX_DATA_DOCS_BUCKET",
        "where Great Expectations publishes data docs",
        "fernhill-gx-docs",
    ),
    (
        "SLACK_ALERT_WEBHOOK",
        "the webhook used for DAG failure alerts",
        "unset locally, which disables alerts",
    ),
    ("DBT_DEV_SCHEMA_PREFIX", "the prefix for per-user development schemas", "dev_"),
]

INCIDENTS = [
    (
        "2024-03-31",
        "the finance dashboard showed zero revenue for a day",
        "the daily_orders DAG skipped a run on the daylight saving change",
        "the schedule is defined in UTC",
    ),
    (
        "2023-11-27",
        "Snowflake spend tripled over the Black Friday weekend",
        "a full refresh of fct_events running every hour",
        "full refreshes in prod need a manual flag",
    ),
    (
        "2024-02-14",
        "clickstream data was lost for three hours",
        "the Kafka sink running out of disk during a retry storm",
        "the sink writes to S3 multipart uploads without local buffering",
    ),
    (
        "2024-01-08",
        "marketing saw duplicated campaign spend",
        "the marketing_spend DAG being triggered twice by a manual run",
        "the DAG uses max_active_runs=1",
    ),
    (
        "2023-10-16",
        "analysts could read unhashed emails in STAGING",
        "a new model selecting from RAW without the hashing macro",
        "a CI check blocks email columns outside RAW",
    ),
    (
        "2024-04-22",
        "Looker dashboards timed out all morning",
        "the REPORTER warehouse being resized to X-Small by mistake",
        "warehouse sizes are managed in Terraform",
    ),
    (
        "2024-05-06",
        "the sessionize job failed for four nights in a row",
        "an EMR release upgrade that changed the default Python",
        "the bootstrap script pins Python 3.10",
    ),
    (
        "2023-12-18",
        "the fx rates were a week old",
        "the ECB endpoint changing its URL",
        "the DAG alerts when rates are older than two business days",
    ),
]

CONVENTIONS = [
    "Every DAG sets catchup=False unless it exists specifically for backfilling.",
    "DAG ids match the file name, so dags/hourly_events.py defines the hourly_events DAG.",
    "Incremental dbt models use the merge strategy keyed on the natural key plus event_date.",
    "Surrogate keys are built with dbt_utils.generate_surrogate_key, never with raw MD5 calls.",
    "Staging models only rename, cast and deduplicate; business logic belongs in intermediate or mart models.",
    "Snowflake roles follow LOADER, TRANSFORMER and REPORTER; humans get REPORTER by default.",
    "Column names are snake_case and booleans start with is_ or has_.",
    "Each mart has a primary key test (unique and not_null) in its schema.yml.",
    "Spark jobs write Parquet with snappy compression and aim for 256 MB files.",
    "Airflow tasks retry twice with a 10 minute delay by default.",
    "Seeds are only for small static mappings like country codes; anything larger goes through RAW.",
    "Currency conversion uses the ECB daily rates; non-euro amounts are converted at the order date.",
    "dim_customer is SCD type 2 with valid_from and valid_to columns.",
    "A PR that changes a mart's grain needs a changelog entry and a heads-up in #analytics.",
    "dbt docs are published to an internal site on every merge to main.",
    "Unit test fixtures for plugins live in tests/fixtures/ as small CSV files.",
    "Kafka consumers commit offsets only after the S3 write succeeds.",
    "The events schema registry runs with BACKWARD compatibility.",
    "Airflow Variables are read through a caching helper to avoid hammering the metadata database.",
    "Python code in plugins/ is formatted with ruff and type-checked by mypy in non-strict mode.",
    "Mobile app events arrive through Segment and land in RAW.SEGMENT_EVENTS.",
    "Orders are attributed to channels with a last non-direct click model.",
    "The warehouse is cloned to ANALYTICS_DEV every Monday; development clones older than a week are dropped.",
    "Every model in marts is exposed to Looker through a dbt exposure with an owner.",
    "Query tags include the DAG id and task id, so Snowflake cost can be traced back to Airflow.",
    "B2B orders come from a separate ERP export and are flagged with is_b2b in fct_orders.",
    "The RAW schema is append-only; corrections arrive as new rows with a later loaded_at.",
    "About 38 million clickstream events arrive on an average day, and three times that on Black Friday.",
]

ADRS = [
    "ADR-D03: Snowflake replaced Redshift because of separate compute for analysts and pipelines.",
    "ADR-D05: dbt runs inside Airflow with the Cosmos integration instead of dbt Cloud.",
    "ADR-D08: sessionization stays in Spark because window functions over a full day of events were too slow in Snowflake.",
    "ADR-D09: raw data is stored as Parquet in S3 and loaded with COPY INTO rather than Snowpipe.",
    "ADR-D12: data contracts are enforced at ingestion, not in dbt.",
    "ADR-D14: business metrics are defined once in dbt and Looker only aggregates them.",
    "ADR-D15: PII stays in RAW and is hashed on the way into STAGING.",
    "ADR-D17: we do not build real-time dashboards; hourly is the freshest tier we support.",
]

# (table, grain, what it is for)
TABLES = [
    (
        "RAW.SHOP_ORDERS",
        "one row per order change event",
        "the CDC feed from the shop database",
    ),
    ("RAW.EVENTS", "one row per clickstream event", "web events loaded hourly from S3"),
    ("RAW.SEGMENT_EVENTS", "one row per Segment track call", "mobile app analytics"),
    (
        "RAW.MARKETING",
        "one row per campaign, day and platform",
        "ad spend from Google Ads and Meta",
    ),
    (
        "STAGING.STG_ORDERS",
        "one row per order line",
        "cleaned orders with amounts as decimals",
    ),
    (
        "MARTS.FCT_ORDERS",
        "one row per order line",
        "revenue reporting and refunds analysis",
    ),
    ("MARTS.FCT_REVENUE_DAILY", "one row per day and channel", "the finance dashboard"),
    (
        "MARTS.DIM_CUSTOMER",
        "one row per customer version",
        "segmentation and lifetime value",
    ),
    ("MARTS.FCT_SESSIONS", "one row per session", "conversion funnels in Looker"),
    (
        "MARTS.FCT_INVENTORY_DAILY",
        "one row per SKU and day",
        "stock cover and out-of-stock reporting",
    ),
    ("MARTS.FCT_MARKETING_ROI", "one row per campaign and week", "return on ad spend"),
    (
        "MARTS.DIM_PRODUCT",
        "one row per SKU",
        "product attributes joined from the catalog",
    ),
    ("MARTS.CUSTOMER_SEGMENTS", "one row per customer", "marketing audiences"),
    (
        "MARTS.FCT_RETURNS",
        "one row per returned item",
        "return rates by product and reason",
    ),
]

AGENT_NOTES = [
    "`dbt ls --select state:modified+` needs the prod manifest downloaded first, otherwise it lists every model.",
    "Running the whole dbt project locally takes about 25 minutes; select a single model with its parents using +model_name.",
    "The local Airflow docker-compose stack needs 8 GB of memory; with less, the scheduler restarts in a loop.",
    "Ingrid asks for a row count comparison before and after any change to a finance mart.",
    "`dbt run-operation generate_model_yaml` writes column docs; it is faster than typing schema.yml by hand.",
    "MWAA takes about 20 minutes to apply a requirements.txt change; batch dependency updates together.",
    "The Snowflake web UI shows times in the user's timezone but the query history API returns UTC.",
    "Spark local tests need JAVA_HOME pointing to Java 11; Java 17 fails with module access errors.",
    "Aisha wants new DAGs to be paused on creation; merging an unpaused DAG triggered a surprise backfill once.",
    "sqlfluff fix can rewrite Jinja blocks badly; review the diff before committing.",
    "The CI dbt job uses a zero-copy clone per PR; clones are dropped after 48 hours.",
    "When a model is renamed, also update the Looker view, or the LookML validator fails in the other repo.",
    "The row access policy on fct_events also applies to the agent role; always filter on event_date.",
    "EMR step logs take about 5 minutes to appear in S3 after a failure.",
]

FLAKY_TESTS = [
    ("test_partition_sensor_timeout", "tests/plugins/test_partition_sensor.py"),
    ("test_s3_to_snowflake_copy_options", "tests/plugins/test_s3_to_snowflake.py"),
    ("test_kafka_sink_flush", "tests/ingestion/test_consumer.py"),
    ("test_fx_rates_holiday_fill", "tests/dags/test_fx_rates.py"),
    ("test_dag_integrity", "tests/dags/test_dag_integrity.py"),
    ("test_compact_events_commit", "tests/spark/test_compact_events.py"),
    ("test_marketing_spend_pagination", "tests/dags/test_marketing_spend.py"),
    ("test_query_tagging", "tests/plugins/test_snowflake_hook.py"),
    ("test_slack_callback_format", "tests/dags/test_defaults.py"),
    ("test_attribution_utm_case", "tests/dbt/test_attribution.py"),
]

ERRORS = [
    (
        "snowflake.connector.errors.ProgrammingError: 002003 (42S02): Object 'ANALYTICS.STAGING.STG_ORDERS' does not exist or not authorized",
        "when running dbt with the REPORTER role",
        "switch to TRANSFORMER with SNOWFLAKE_ROLE",
    ),
    (
        "airflow.exceptions.AirflowNotFoundException: The conn_id `snowflake_default` isn't defined",
        "in a fresh local Airflow",
        "import connections with `airflow connections import connections.json`",
    ),
    (
        "Py4JJavaError: An error occurred while calling o123.parquet",
        "when Spark reads from S3 without the hadoop-aws jar",
        "start the session with the packages option from jobs/spark/common.py",
    ),
    (
        "Database Error in model stg_events: 100038 (22018): Numeric value '' is not recognized",
        "when the mobile app sends empty price strings",
        "cast with TRY_TO_NUMBER in staging",
    ),
    (
        "KafkaException: KafkaError{code=_TRANSPORT,val=-195}",
        "when the local sink starts before the broker",
        "wait for the broker container healthcheck",
    ),
    (
        "Runtime Error: Could not find profile named 'fernhill'",
        "when DBT_PROFILES_DIR is not set",
        "export DBT_PROFILES_DIR=./profiles",
    ),
    (
        "botocore.exceptions.NoCredentialsError: Unable to locate credentials",
        "when running S3 operators locally",
        "use `aws-vault exec data-dev --` in front of the command",
    ),
    (
        "sqlfluff: TMP: Undefined jinja template variable: 'is_incremental'",
        "when linting incremental models",
        "use the dbt templater instead of the jinja one",
    ),
    (
        "great_expectations.exceptions.DataContextError: Unable to find a Great Expectations context",
        "when running checkpoints from the repo root",
        "run them from the gx/ directory",
    ),
]

# --- more material ---------------------------------------------------------

MODULES += [
    (
        "dags/returns_daily.py",
        "loads return records from the shop database every night",
    ),
    ("dags/b2b_erp_export.py", "ingests the ERP export with B2B orders from SFTP"),
    ("dags/segment_ingest.py", "copies Segment events from S3 into RAW.SEGMENT_EVENTS"),
    (
        "dags/looker_pdts.py",
        "triggers Looker persistent derived table rebuilds after the marts finish",
    ),
    ("dags/gdpr_deletes.py", "applies customer erasure requests to the warehouse"),
    (
        "models/staging/stg_returns.sql",
        "normalises return reasons into eight categories",
    ),
    (
        "models/staging/stg_marketing_spend.sql",
        "unifies ad spend from Google Ads and Meta into one shape",
    ),
    (
        "models/intermediate/int_customer_orders.sql",
        "computes first and last order dates per customer",
    ),
    (
        "models/marts/fct_returns.sql",
        "builds one row per returned item with reason and refund amount",
    ),
    (
        "models/marts/fct_marketing_roi.sql",
        "joins spend with attributed revenue per campaign and week",
    ),
    (
        "models/marts/dim_product.sql",
        "joins catalog attributes with the category hierarchy",
    ),
    ("models/marts/customer_segments.sql", "assigns each customer to an RFM segment"),
    (
        "jobs/spark/product_affinity.py",
        "computes co-purchase pairs for the recommendations endpoint",
    ),
    (
        "ingestion/erp_sftp/client.py",
        "downloads ERP files over SFTP with key-based auth",
    ),
    (
        "tests/dags/test_dag_integrity.py",
        "imports every DAG and fails on cycles or missing owners",
    ),
]

FUNCTIONS = [
    (
        "plugins/operators/s3_to_snowflake.py",
        "S3ToSnowflakeOperator.execute()",
        "builds the COPY INTO statement and records loaded files",
    ),
    (
        "plugins/sensors/partition_sensor.py",
        "PartitionSensor.poke()",
        "lists the partition prefix and looks for a _SUCCESS marker",
    ),
    (
        "dags/common/defaults.py",
        "default_args()",
        "returns retries=2, a 10 minute retry delay and the Slack callback",
    ),
    (
        "dags/common/snowflake.py",
        "run_query()",
        "adds a query tag with dag_id and task_id before executing",
    ),
    (
        "jobs/spark/sessionize.py",
        "assign_sessions()",
        "uses a lag window over event_time per anonymous_id",
    ),
    (
        "jobs/spark/compact_events.py",
        "compact_partition()",
        "rewrites one hour of small files into 256 MB files",
    ),
    (
        "ingestion/kafka_sink/consumer.py",
        "flush_batch()",
        "uploads the current batch and then commits offsets",
    ),
    (
        "macros/cents_to_euros.sql",
        "cents_to_euros()",
        "divides by 100 and casts to NUMBER(12,2)",
    ),
    (
        "macros/generate_schema_name.sql",
        "generate_schema_name()",
        "prefixes schemas with DBT_DEV_SCHEMA_PREFIX and the user name in dev",
    ),
    (
        "dags/gdpr_deletes.py",
        "apply_erasures()",
        "deletes rows by customer id in STAGING and MARTS within 30 days of the request",
    ),
    (
        "ingestion/erp_sftp/client.py",
        "fetch_new_files()",
        "downloads only files newer than the last processed timestamp",
    ),
    (
        "plugins/hooks/hightouch.py",
        "trigger_sync()",
        "starts a Hightouch sync by id and waits for it to complete",
    ),
]

FEATURES = [
    (
        "the move to Kafka Connect for ingestion",
        "about half done, with the events topic migrated",
    ),
    ("Elementary data observability", "live for marts but not yet for staging"),
    ("a semantic layer in dbt", "being evaluated against LookML-only metrics"),
    ("the customer lifetime value model", "in review with finance"),
    ("real-time stock dashboards", "rejected, since hourly is enough (see ADR-D17)"),
    ("dbt unit tests", "waiting for the dbt 1.8 upgrade"),
    ("Iceberg tables for raw events", "in a proof of concept"),
    ("the returns mart", "live since April 2024"),
    ("marketing mix modelling", "on hold until a data scientist is hired"),
    ("column-level lineage in the docs site", "live"),
    ("automated PII scanning", "in progress with the security team"),
    ("the Airflow 2.9 upgrade", "blocked until MWAA supports it"),
]

PROBLEMS += [
    ("fct_returns counts exchanges as returns", "excluding exchange RMAs"),
    ("the ERP export DAG fails on files with a UTF-8 BOM", "decoding with utf-8-sig"),
    (
        "customer_segments puts brand-new customers in the lapsed segment",
        "using the signup date when there are no orders",
    ),
    (
        "GDPR deletes miss customers who changed their email",
        "deleting by customer id rather than email",
    ),
    (
        "product affinity pairs include the same product twice",
        "filtering pairs where both sides are equal",
    ),
    (
        "Looker PDT rebuilds start before the marts finish",
        "adding an ExternalTaskSensor on the dbt run",
    ),
    (
        "fct_marketing_roi is empty for the current week",
        "only reporting completed weeks",
    ),
    (
        "the Segment ingest loads the same file twice after a retry",
        "tracking loaded files in a metadata table",
    ),
    (
        "dim_product has no category for products created today",
        "running the catalog extract before the model",
    ),
    (
        "stg_marketing_spend reports Google Ads costs in micros",
        "dividing by one million in staging",
    ),
]

EXTRA = [
    "The analytics team has about 25 Looker users, mostly in marketing and finance.",
    "The Snowflake bill was about 2,100 dollars in May 2024.",
    "Finance closes the month on the third business day and needs revenue numbers frozen by then.",
    "The REPORTER warehouse is Small and scales out to 3 clusters during business hours.",
    "A full dbt run in prod takes about 35 minutes end to end.",
    "There are about 420 dbt models: 90 staging, 180 intermediate and 150 marts.",
    "Airflow has 23 active DAGs; 6 of them feed the finance dashboard.",
    "The ERP export arrives on SFTP at 02:00 Lisbon, usually a few minutes late.",
    "Marketing uses Braze for email and push campaigns.",
    "Return reasons are grouped into eight categories agreed with customer support.",
    "Data requests from other teams go through the #data-requests channel and a Jira form.",
    "The dbt project uses Python models only for the forecasting experiment; everything else is SQL.",
    "Event volumes from the mobile app grew 40% after the 24.3 release.",
]

TABLES += [
    (
        "MARTS.FCT_PRODUCT_AFFINITY",
        "one row per product pair",
        "the recommendations endpoint",
    ),
    ("RAW.ERP_B2B_ORDERS", "one row per B2B order line", "B2B revenue"),
    ("STAGING.STG_RETURNS", "one row per returned item", "return analysis"),
    (
        "RAW.GDPR_REQUESTS",
        "one row per erasure request",
        "applying deletions to the warehouse",
    ),
    ("MARTS.FCT_CUSTOMER_LTV", "one row per customer", "lifetime value estimates"),
]

AGENT_NOTES += [
    "The ERP SFTP server only accepts connections from the MWAA NAT IP; it cannot be reached from the sandbox.",
    "`dbt build -s fct_returns+` also rebuilds the Looker PDT trigger model; use --exclude tag:pdt when iterating.",
    "Olu asks for a screenshot of the Looker explore whenever a mart column is renamed.",
    "`elementary monitor` needs the prod profile; locally it shows only stale results.",
    "When a DAG test fails on import, the cause is usually a provider missing from requirements-dev.txt.",
    "Spark tests start a local session that takes 25 seconds; reuse the session fixture instead of creating new ones.",
    "Bruno prefers EMR changes as Terraform plans attached to the PR.",
    "dbt seeds with more than 1,000 rows slow CI noticeably; Aisha rejected a 5,000-row seed once.",
]

FLAKY_TESTS += [
    ("test_erp_bom_decoding", "tests/ingestion/test_erp_sftp.py"),
    ("test_segment_ingest_idempotent", "tests/dags/test_segment_ingest.py"),
    ("test_gdpr_delete_by_id", "tests/dags/test_gdpr_deletes.py"),
    ("test_product_affinity_pairs", "tests/spark/test_product_affinity.py"),
]

ERRORS += [
    (
        "paramiko.ssh_exception.SSHException: Error reading SSH protocol banner",
        "when the ERP SFTP client runs from outside the NAT",
        "run it only from MWAA",
    ),
    (
        "Runtime Error: dbt_project.yml does not parse to a dictionary",
        "after a bad merge in dbt_project.yml",
        "fix the YAML indentation and rerun",
    ),
    (
        "ModuleNotFoundError: No module named 'looker_sdk'",
        "when local Airflow imports dags/looker_pdts.py",
        "install requirements-dev.txt",
    ),
]

HANDLES = {
    "Aisha Karimi": "akarimi",
    "Bruno Costa": "brunoc",
    "Ingrid Solberg": "isolberg",
    "Wei Zhang": "weizhang-data",
    "Olu Adebayo": "oadebayo",
}

OLD_PINS = [
    ("apache-airflow", "2.6.3"),
    ("pyspark", "3.3.2"),
    ("great-expectations", "0.17.23"),
    ("sqlfluff", "2.1.4"),
    ("pandas", "1.5.3"),
    ("dbt-utils", "1.0.0"),
]

RETRO = [
    "announce every schema change to a mart in #analytics at least two days ahead",
    "require a row count comparison in PRs that touch finance marts",
    "stop adding columns to fct_orders and build narrower marts instead",
    "give every DAG an owner in default_args before it is merged",
    "review Snowflake cost per DAG at the monthly ops review",
    "pair on Spark changes because only Bruno knows the cluster well",
    "document every backfill in the #data-eng channel with its date range",
]

COMMANDS = [
    ("dbt build -s +fct_orders", "about 8 minutes against the dev clone"),
    ("make test", "about 4 minutes"),
    ("sqlfluff lint models", "about 3 minutes"),
    ("dbt docs generate", "about 5 minutes after the catalog fix"),
    ("docker compose up airflow", "about 2 minutes to a healthy scheduler"),
]

CHANNELS = [
    ("#data-eng", "questions about data-pipeline and backfill announcements"),
    ("#data-alerts", "Airflow failures and freshness alerts"),
    ("#analytics", "changes that affect Looker users"),
    ("#data-requests", "requests from other teams"),
]

INCIDENTS += [
    (
        "2024-06-03",
        "customer segments synced to Braze were empty for a morning",
        "the customer_segments model failing a uniqueness test and Hightouch syncing the empty result",
        "Hightouch syncs skip when the row count drops by more than 20%",
    ),
    (
        "2023-09-05",
        "Looker showed returns as negative revenue",
        "a sign error in stg_refunds",
        "a dbt test checks refund amounts are positive",
    ),
]

GLOSSARY = [
    "In data-pipeline, a mart is a table in the MARTS schema meant for reporting.",
    "Grain means what one row of a table represents, such as one order line.",
    "Freshness is the time between an event happening and it being queryable in the marts.",
    "A PDT is a Looker persistent derived table, rebuilt after the marts finish.",
    "RFM stands for recency, frequency and monetary value, the basis of customer_segments.",
    "Last non-direct click gives an order to the last marketing channel that was not direct traffic.",
    "A zero-copy clone is a Snowflake copy of a database that shares storage until it changes.",
    "The CDC feed is the stream of row changes captured from the shop database.",
]
