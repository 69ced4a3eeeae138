"""Where the packaged SQL templates, macros, policies, schemas and demo data live.

They are installed inside the package (pyproject maps sql/, macros/ and fixtures/ under
`duckscore`), so they are found from any working directory.
"""

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def sql_dir() -> Path:
    return _PACKAGE / "sql"


def macros_dir() -> Path:
    return _PACKAGE / "macros"


def schemas_dir() -> Path:
    return _PACKAGE / "schemas"


def fixtures_dir() -> Path:
    return _PACKAGE / "fixtures"


def policies_dir(capability: str, folder: str = "policies") -> Path:
    return sql_dir() / capability / folder
