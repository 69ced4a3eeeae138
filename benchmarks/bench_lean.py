"""The lean-SQL measuring device of benchmarks/bench.py (issue 34): hand-written DuckDB SQL for
`duckscore run`'s and `duckscore fuse`'s outputs, read from a folder given on the command line
(`--lean-sql DIR`; never from the project, no default), run as configs i, j, k beside a to h.

  i lean_sql            DIR/run_explain.sql: what `duckscore run` (b) writes
  j lean_sql_noexplain  DIR/run_noexplain.sql: what `duckscore run --no-explain` (f) writes
  k lean_rrf            DIR/rrf_fused_parquet.sql: what `duckscore fuse --recipe canonical_rrf
                        --no-explain --no-features` (g) writes

A file's `${LOG}` is the log's path and `${OUT}` the config's output folder (both inside SQL
string literals: a quote in a path is doubled). Its statements end with `;` at a line end and
run in order on one DuckDB connection opened with the bench's --threads, --memory-limit and
--temp-dir; a comment line `-- @if SQL` before a statement runs it only when SQL's first value is
true. A statement `SET threads = K` with K > 1 runs as `SET threads = <--threads>`: the files
write their JSON on one thread and then restore the thread count they were written for (2);
`SET threads = 1` stays.

Only the standard library at module level: bench.py's workers import this module, and a worker's
peak RSS should hold what its config needs.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

LEAN_FILES = {
    "lean_sql": "run_explain.sql",
    "lean_sql_noexplain": "run_noexplain.sql",
    "lean_rrf": "rrf_fused_parquet.sql",
}
# the lean config -> the duckscore config whose outputs it reproduces
LEAN_PAIRS = {"lean_sql": "duckscore", "lean_sql_noexplain": "lean", "lean_rrf": "fuse_lean"}
OUTPUT_FILES = (
    "fused.parquet",
    "parent_features.parquet",
    "parents.parquet",
    "queries.parquet",
    "contract.jsonl",
)
SET_THREADS = re.compile(
    r"SET\s+(?:GLOBAL\s+|SESSION\s+)?threads\s*(?:=|TO)\s*(\d+)\s*;?", re.IGNORECASE
)
CONDITION = "-- @if "

Statement = tuple[str | None, str]  # (the `-- @if` condition or None, the statement)


def sql_string(path: Path | str) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def split_statements(text: str) -> list[Statement]:
    """A SQL file's statements, each ending with `;` at a line end; comment lines between
    statements are dropped, and `-- @if SQL` makes the next statement conditional."""
    statements: list[Statement] = []
    current: list[str] = []
    condition: str | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if not current and (not stripped or stripped.startswith("--")):
            if stripped.startswith(CONDITION):
                condition = stripped[len(CONDITION) :]
            continue
        current.append(line)
        if line.rstrip().endswith(";"):
            statement = "\n".join(current).strip()
            if statement.rstrip(";").strip():
                statements.append((condition, statement))
            current, condition = [], None
    if "\n".join(current).strip():
        statements.append((condition, "\n".join(current).strip()))
    return statements


def with_threads(statement: str, threads: int) -> str:
    """`SET threads = K` (K > 1) as `SET threads = threads`; anything else unchanged."""
    match = SET_THREADS.fullmatch(statement.strip())
    if match and int(match.group(1)) > 1:
        return f"SET threads = {threads};"
    return statement


def lean_statements(sql_file: Path, log: Path, out: Path, threads: int) -> list[Statement]:
    """The file's statements with `${LOG}` and `${OUT}` substituted and its thread count the
    bench's."""
    text = sql_file.read_text(encoding="utf-8")
    text = text.replace("${LOG}", sql_string(log)[1:-1]).replace("${OUT}", sql_string(out)[1:-1])
    return [
        (condition, with_threads(statement, threads))
        for condition, statement in split_statements(text)
    ]


def load_lean_sql(
    sql_file: Path, log: Path, out: Path, duckdb_config: dict[str, Any], threads: int
) -> Callable[[], dict[str, int]]:
    """duckdb imported and the statements prepared before the clock; the timed run opens the
    connection (as the floor does) and runs the statements in order."""
    import duckdb

    statements = lean_statements(sql_file, log, out, threads)
    out.mkdir(parents=True, exist_ok=True)

    def run() -> dict[str, int]:
        connection = duckdb.connect(config=duckdb_config)
        ran = 0
        for condition, statement in statements:
            if condition is not None:
                row = connection.execute(condition).fetchone()
                if not (row and row[0]):
                    continue
            connection.execute(statement)
            ran += 1
        connection.close()
        written = sum(p.stat().st_size for p in out.glob("*.*"))
        return {"statements": ran, "output_bytes": written}

    return run


def lean_sql_problem(folder: Path, configs: list[str]) -> str | None:
    """Why `folder` cannot serve `configs` (a one-line message), or None."""
    if not folder.is_dir():
        return f"--lean-sql {folder}: not a folder"
    missing = [
        LEAN_FILES[c] for c in configs if c in LEAN_FILES and not (folder / LEAN_FILES[c]).is_file()
    ]
    if missing:
        return f"--lean-sql {folder}: missing {', '.join(missing)}"
    return None


# ---------------------------------------------------------------- outputs compared


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def compare_parquet(connection: Any, ours: Path, lean: Path) -> dict[str, Any]:
    a, b = sql_string(ours), sql_string(lean)
    schema_a = [
        row[:2] for row in connection.execute(f"DESCRIBE FROM read_parquet({a})").fetchall()
    ]
    schema_b = [
        row[:2] for row in connection.execute(f"DESCRIBE FROM read_parquet({b})").fetchall()
    ]
    if schema_a != schema_b:
        return {"ok": False, "reason": "schemas differ", "duckscore": schema_a, "lean": schema_b}

    def count(sql: str) -> int:
        (n,) = connection.execute(f"SELECT count(*) FROM ({sql})").fetchone()
        return int(n)

    numbered = "read_parquet({}, file_row_number = true)"
    summary = {
        "rows": count(f"FROM read_parquet({a})"),
        "lean_rows": count(f"FROM read_parquet({b})"),
        "only_in_duckscore": count(f"FROM read_parquet({a}) EXCEPT ALL FROM read_parquet({b})"),
        "only_in_lean": count(f"FROM read_parquet({b}) EXCEPT ALL FROM read_parquet({a})"),
        # information only: the same rows in another order still match
        "rows_out_of_order": count(
            f"FROM {numbered.format(a)} EXCEPT ALL FROM {numbered.format(b)}"
        ),
    }
    summary["ok"] = summary["only_in_duckscore"] == summary["only_in_lean"] == 0
    return summary


def compare_outputs(ours: Path, lean: Path, threads: int) -> dict[str, Any]:
    """The lean SQL's output files against duckscore's of the same names: every Parquet file
    EXCEPT ALL both ways, contract.jsonl by sha256. A file the lean SQL did not write is not
    compared (lean_rrf writes fused.parquet only)."""
    import duckdb

    names = [name for name in OUTPUT_FILES if (lean / name).exists()]
    if not names:
        return {"ok": False, "reason": f"the lean SQL wrote none of {', '.join(OUTPUT_FILES)}"}
    files: dict[str, Any] = {}
    connection = duckdb.connect(config={"threads": str(threads)})
    try:
        for name in names:
            if not (ours / name).exists():
                files[name] = {"ok": False, "reason": "not in duckscore's output"}
            elif name.endswith(".parquet"):
                files[name] = compare_parquet(connection, ours / name, lean / name)
            else:
                equal = sha256(ours / name) == sha256(lean / name)
                files[name] = {"ok": equal, "sha256_equal": equal}
    except duckdb.Error as error:
        return {
            "ok": False,
            "reason": f"{type(error).__name__}: {error}".splitlines()[0],
            "files": files,
        }
    finally:
        connection.close()
    return {"ok": all(f["ok"] for f in files.values()), "files": files}


def file_problem(file: dict[str, Any]) -> str:
    if "reason" in file:
        return str(file["reason"])
    if "sha256_equal" in file:
        return "sha256 differs"
    return f"only in duckscore {file['only_in_duckscore']}, only in lean {file['only_in_lean']}"


def describe_comparison(comparison: dict[str, Any]) -> str:
    """One line: 'outputs equal (…)' or what differs."""
    files = comparison.get("files", {})
    if comparison["ok"]:
        return f"outputs equal ({', '.join(files)})"
    problems = [f"{name}: {file_problem(file)}" for name, file in files.items() if not file["ok"]]
    if "reason" in comparison:
        problems.insert(0, comparison["reason"])
    return "outputs DIFFER: " + "; ".join(problems)
