"""Where the packaged SQL templates, macros, policies, contract schemas and demo data live.

pyproject.toml installs `orchestrator/` as the package `duckscore` and nests `sql/`, `macros/` and
`fixtures/` inside it, so they are found from any working directory.
"""

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parents[1]


def sql_dir() -> Path:
    return _PACKAGE / "sql"


def macros_dir() -> Path:
    return _PACKAGE / "macros"


def fixtures_dir() -> Path:
    return _PACKAGE / "fixtures"


def policies_dir(capability: str, folder: str = "policies") -> Path:
    return sql_dir() / capability / folder


def contract_schema(capability: str) -> Path:
    """The JSON Schema of a capability's contract.jsonl lines (score, answers, bids)."""
    return _PACKAGE / capability / "contract.schema.json"
