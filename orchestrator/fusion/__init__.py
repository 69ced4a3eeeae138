"""`duckscore fuse` (seed 003): multi-source fusion of a retrieval log, and the seed-000 parent
features of every candidate. recipe: what a recipe may say and `plan`; log: the retrieval_log
input; stages: the SQL on a Session; pipeline: `fuse()`, what the command runs.

The log formats live here, apart from traces.py, so that the command line can offer them without
importing DuckDB at start-up.
"""

LOG_FORMATS = ("retrieval_log", "openinference", "otel-genai")
