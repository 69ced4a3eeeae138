"""What one process learnt and the next may reuse: a folder of small files, each named by the
sha256 of everything its answer depends on, written whole (a temporary file renamed) or not at
all.

The folder is $DUCKSCORE_CACHE_DIR, else $XDG_CACHE_HOME/duckscore, else ~/.cache/duckscore;
DUCKSCORE_CACHE_DIR set to the empty string turns the cache off. A cache that cannot be read or
written is no cache: the work is done again, nothing fails. Keys include the code that computed
the answer (`code_id`), so an upgraded duckscore or sqlglot never reads an older answer.
Jinja's compiled templates live there too (`template_code`), in files Jinja names and checks.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import jinja2
from jinja2.bccache import Bucket

VARIABLE = "DUCKSCORE_CACHE_DIR"


def cache_folder() -> Path | None:
    """The cache folder, or None when the cache is off."""
    given = os.environ.get(VARIABLE)
    if given is not None:
        return Path(given) if given else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "duckscore"


def digest(*parts: str) -> str:
    """The sha256 of the parts, each length-prefixed (so ('ab', 'c') and ('a', 'bc') differ)."""
    hashed = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8")
        hashed.update(f"{len(data)}:".encode())
        hashed.update(data)
    return hashed.hexdigest()


def code_id(*files: str) -> str:
    """The sha256 of source files (and of what they name, e.g. a library's version)."""
    return digest(*(Path(f).read_text(encoding="utf-8") if os.path.isfile(f) else f for f in files))


def read(kind: str, key: str) -> Any | None:
    """The JSON value stored under (kind, key), or None."""
    folder = cache_folder()
    if folder is None:
        return None
    try:
        return json.loads((folder / kind / key).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def write(kind: str, key: str, value: Any) -> None:
    """Store `value` (JSON) under (kind, key), whole or not at all."""
    folder = cache_folder()
    if folder is None:
        return
    target = folder / kind
    try:
        target.mkdir(parents=True, exist_ok=True)
        handle, scratch = tempfile.mkstemp(dir=target, prefix=".", suffix=".tmp")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as file:
                json.dump(value, file)
            os.replace(scratch, target / key)
        except BaseException:
            os.unlink(scratch)
            raise
    except OSError:
        return


class _TemplateCode(jinja2.FileSystemBytecodeCache):
    """Jinja's compiled templates, by template file and checked against its text (Jinja's own
    rule); a file it cannot read or write is no cache."""

    def load_bytecode(self, bucket: Bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except OSError:  # Jinja skips a missing file; a damaged one's header fails its check
            bucket.reset()

    def dump_bytecode(self, bucket: Bucket) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError:
            return


def template_code(code: str) -> jinja2.BytecodeCache | None:
    """Where an environment built by `code` (its code_id: options such as trim_blocks shape the
    compiled code) keeps its compiled templates; None when the cache is off or not writable.
    Compiling the templates is a tenth of a second of every command."""
    folder = cache_folder()
    if folder is None:
        return None
    target = folder / "templates" / code
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return _TemplateCode(str(target))
