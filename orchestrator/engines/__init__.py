"""duckscore's SQL beyond DuckDB. dialects: the rendered SQL transpiled for Spark, PostgreSQL,
BigQuery, Snowflake and Trino (`duckscore sql … --dialect`). (`run --engine spark`, the
unchanged DuckDB pipeline per query_id shard on Spark executors, is runner/spark.py.)

The dialect names live here, apart from dialects.py, so that the command line can offer them
without importing sqlglot at start-up.
"""

DIALECTS = ("spark", "postgres", "bigquery", "snowflake", "trino")
