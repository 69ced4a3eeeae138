"""duckscore inside DuckDB: the macro pack (`duckscore sql macros`, `duckscore macros install`)."""
