"""The optional extras (pyproject.toml's [project.optional-dependencies]) and the one text every
command prints when one is missing: what needs it, the extra's name, and the pip command that
installs it (tests/cli/test_help_examples.py checks each extra exists and holds what is imported).
"""

# extra -> the modules its commands import (what is missing when the extra is not installed)
EXTRAS = {
    "serve": ("starlette", "uvicorn"),
    "phoenix": ("phoenix.client",),
    "spark": ("pyspark",),
    "postgres": ("psycopg",),
    "ltr": ("lightgbm",),
}
INSTALL_HINT = "{what} needs the {extra} extra: pip install 'duckscore[{extra}]'"


def needs_extra(what: str, extra: str) -> str:
    """`duckscore serve needs the serve extra: pip install 'duckscore[serve]'`."""
    if extra not in EXTRAS:
        raise ValueError(f"no extra {extra!r} (extras: {', '.join(EXTRAS)})")
    return INSTALL_HINT.format(what=what, extra=extra)
