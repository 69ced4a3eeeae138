"""A tiny code repository's entities table, written by hand, and logs over it: what the mapper
tests (test_mapper.py, test_loc_outputs.py) read.

    pkg/a.py  60 lines: class Shape 1-30 (__init__ 2-5, area 7-20), function biggest 35-50,
              module-level code after 50
    pkg/b.py  20 lines: function helper defined twice, 3-10 and 12-18 (an if/else def)
    pkg/c.py  20 lines: functions f 1-10 and g 11-20
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from duckscore.fusion.code_plan import CodeTarget, LocTopK
from duckscore.fusion.pipeline import fuse

REVISION = "r1"
DEFAULT_TOP_K = LocTopK()
ENTITY_ROWS = [
    # file_path, kind, qualified_name, module_id, entity_id, start, end
    ("pkg/a.py", "file", "", None, "pkg/a.py", 1, 60),
    ("pkg/a.py", "class", "Shape", "pkg/a.py:Shape", "pkg/a.py:Shape", 1, 30),
    ("pkg/a.py", "method", "Shape.__init__", "pkg/a.py:Shape", "pkg/a.py:Shape.__init__", 2, 5),
    ("pkg/a.py", "method", "Shape.area", "pkg/a.py:Shape", "pkg/a.py:Shape.area", 7, 20),
    ("pkg/a.py", "function", "biggest", "pkg/a.py:biggest", "pkg/a.py:biggest", 35, 50),
    ("pkg/b.py", "file", "", None, "pkg/b.py", 1, 20),
    ("pkg/b.py", "function", "helper", "pkg/b.py:helper", "pkg/b.py:helper", 3, 10),
    ("pkg/b.py", "function", "helper", "pkg/b.py:helper", "pkg/b.py:helper", 12, 18),
    ("pkg/c.py", "file", "", None, "pkg/c.py", 1, 20),
    ("pkg/c.py", "function", "f", "pkg/c.py:f", "pkg/c.py:f", 1, 10),
    ("pkg/c.py", "function", "g", "pkg/c.py:g", "pkg/c.py:g", 11, 20),
]
COLUMNS = [
    "file_path",
    "kind",
    "qualified_name",
    "module_id",
    "entity_id",
    "start_line",
    "end_line",
]


def entities(revision: str | None = REVISION) -> pd.DataFrame:
    frame = pd.DataFrame(ENTITY_ROWS, columns=COLUMNS)
    frame.insert(0, "revision", pd.Series([revision] * len(frame), dtype="object"))
    return frame


def hits(rows: list[tuple[str, str, str, float]], revision: str | None = REVISION) -> pd.DataFrame:
    """A log of (query_id, source, item_id, score) rows: a block's id is `path:start:end` (its
    file_path, start_line and end_line columns say the same), a file's its path (granularity
    file); ranked within each (query, source) by score."""
    records: list[dict[str, Any]] = []
    for query_id, source, item_id, score in rows:
        path, *lines = item_id.split(":")
        block = bool(lines)
        records.append(
            {
                "query_id": query_id,
                "source": source,
                "item_id": item_id,
                "parent_id": path,
                "score": score,
                "granularity": "block" if block else "file",
                "file_path": path,
                "start_line": int(lines[0]) if block else None,
                "end_line": int(lines[1]) if block else None,
                "revision": revision,
            }
        )
    frame = pd.DataFrame(records)
    frame["start_line"] = frame["start_line"].astype("Int64")
    frame["end_line"] = frame["end_line"].astype("Int64")
    frame["revision"] = frame["revision"].astype("object")
    frame["rank"] = (
        frame.groupby(["query_id", "source"])["score"].rank(ascending=False, method="first")
    ).astype(int)
    return frame


def fused_code(
    log: pd.DataFrame,
    out: Path,
    recipe: str = "code_rrf_v1",
    sets: list[str] | None = None,
    table: pd.DataFrame | None = None,
    top_k: LocTopK = DEFAULT_TOP_K,
) -> Path:
    """`duckscore fuse --entities` of `log` into `out` (the hand-built entities by default)."""
    target = CodeTarget(entities() if table is None else table, top_k)
    fuse(log, out, recipe, sets, code=target)
    return out
