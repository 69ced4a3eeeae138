"""Where the packaged SQL templates, macros, policies, contract schemas, HTML report templates
and demo data live.

pyproject.toml installs `orchestrator/` as the package `duckscore` and nests `sql/`, `macros/` and
`fixtures/` inside it, so they are found from any working directory. A source checkout keeps them
beside `orchestrator/`, at the repository's top level, and there an editable install (`pip install
-e .`, setuptools' default and strict modes) finds them: its finder maps the package names to the
checkout's folders, but the folders stay where they are (tests/project/test_editable_install.py).
"""

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parents[1]
_DATA = _PACKAGE if (_PACKAGE / "sql").is_dir() else _PACKAGE.parent


def sql_dir() -> Path:
    return _DATA / "sql"


def macros_dir() -> Path:
    return _DATA / "macros"


def fixtures_dir() -> Path:
    return _DATA / "fixtures"


def policies_dir(capability: str, folder: str = "policies") -> Path:
    return sql_dir() / capability / folder


def report_templates_dir() -> Path:
    """The Jinja templates of the HTML reports (calibrate, instincts): inside the package."""
    return _PACKAGE / "templates"


def contract_schema(capability: str) -> Path:
    """The JSON Schema of a capability's contract.jsonl lines (score, answers, bids), in the
    capability's package (scoring/, answering/, bids/)."""
    package = {"score": "scoring", "answers": "answering"}.get(capability, capability)
    return _PACKAGE / package / "contract.schema.json"
