"""RE2 patterns (DuckDB's regular-expression engine) that match policy words literally."""

import string

import duckdb

WORD_CHARACTERS = frozenset(string.ascii_letters + string.digits + "_")


def term_regex(term: str) -> str:
    """An RE2 pattern matching `term` literally. ASCII punctuation and spaces become \\x{..}
    escapes; an end that is an ASCII letter, digit or underscore must sit at a word boundary."""
    escaped = "".join(
        ch if not ch.isascii() or ch.isalnum() else f"\\x{{{ord(ch):02x}}}" for ch in term
    )
    before = r"\b" if term[0] in WORD_CHARACTERS else ""
    after = r"\b" if term[-1] in WORD_CHARACTERS else ""
    return before + escaped + after


def re2_problem(pattern: str) -> str | None:
    """Why DuckDB's RE2 refuses `pattern`, or None when it compiles (asked of DuckDB itself, so
    the answer is the engine's, not Python's `re`)."""
    con = duckdb.connect()
    try:
        con.execute("SELECT regexp_matches('', ?)", [pattern]).fetchall()
    except duckdb.Error as exc:
        message = str(exc).strip().splitlines()[0]
        return message.removeprefix("Invalid Input Error: ")
    finally:
        con.close()
    return None
