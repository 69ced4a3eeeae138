"""`duckscore instincts` (seed 004): composite confidence of learned behaviours in a DuckDB store.
policy: the update rules, bins, tiers, decay; tables: the inputs; scores: the SQL and the pure
functions over DataFrames; store: init, ingest, recompute, decay, top; report: the dashboard."""
