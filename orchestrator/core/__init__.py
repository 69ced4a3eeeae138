"""The kernel every capability runs on; it imports no capability and no click.

connection (DuckDB settings, connections, error lines), tables and inputs (table contracts,
typed views over files), policy (versioned YAML parameters; frozen: their read-only views),
render (Jinja SQL, the `lit` filter), check (sqlglot parse, qualify and lint), session
(render → check → run → record → publish), outputs and manifest (atomic writes, manifest.json),
errors, reporting (progress and warnings as logging), resources, version.
"""
