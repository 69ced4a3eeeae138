"""One run of a capability: its DuckDB connection, and what it read, ran and wrote.

Every capability runs its SQL through a Session, in four steps:

- **read**: `open` checks an input table against its contract (core/inputs.py), creates the typed
  view the templates read, and remembers the input for the manifest;
- **check and run**: `create` checks a rendered stage against the schema of the tables it reads
  (core/check.py) and materialises it as a temp table or view; `materialise` does so for every
  stage of a graph (core/graph.py), in order, publishing each one's outputs as it exists; `rows`
  checks and fetches; a DuckDB failure is one QueryError naming the template;
- **record**: every template that ran is kept, one entry per template file (a template rendered
  for several stages is recorded as its last rendering: the stages differ only in their final
  SELECT);
- **publish**: `publish` yields an Output whose files appear in --out all at once or not at all;
  `Output.copy` streams a query into a Parquet or JSON Lines file, `Output.manifest` writes the
  recorded SQL and manifest.json.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from decimal import Decimal
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import duckdb

from .check import check_sql, tables_read
from .connection import (
    EngineSettings,
    connect,
    first_line,
    first_row,
    make_room,
    remove_spill,
    spill_folder,
)
from .errors import QueryError, TemplateError
from .graph import Graph
from .inputs import Table, input_paths, open_input, schema_of
from .manifest import build_manifest
from .outputs import atomic_output_dir, write_json
from .render import RenderedSQL, ident, lit
from .reporting import module_logger
from .tables import OpenedInput, TableContract

if TYPE_CHECKING:
    import pandas as pd

logger = module_logger(__name__)

Params = Mapping[str, Any] | Sequence[Any] | None  # named ($name) or positional (?) values


class Session:
    """A DuckDB connection (in memory with `settings`, or the one given) and the run's record."""

    def __init__(
        self,
        settings: EngineSettings | None = None,
        *,
        connection: duckdb.DuckDBPyConnection | None = None,
    ) -> None:
        self.settings = settings or EngineSettings()
        self._owns_connection = connection is None
        self._spill = spill_folder(self.settings) if connection is None else None
        try:
            self.con = connect(self.settings, self._spill) if connection is None else connection
        except BaseException:  # a failure or a signal after connect made the folder: no __exit__
            if self._spill is not None:
                remove_spill(self._spill)
            raise
        self.inputs: dict[str, OpenedInput] = {}
        self.sql: dict[str, RenderedSQL] = {}

    def __enter__(self) -> Session:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        try:
            if self._owns_connection:
                self.con.close()
        finally:
            if self._spill is not None:
                remove_spill(self._spill)

    # -- read ---------------------------------------------------------------------------------
    def open(
        self, name: str, contract: TableContract, given: Table, label: str | None = None
    ) -> OpenedInput:
        """The typed view `contract.name` over `given`, checked; recorded as input `name`."""
        opened = open_input(self.con, contract, given, label)
        self.inputs[name] = opened
        return opened

    def schema(self, table: str) -> dict[str, str]:
        return schema_of(self.con, table)

    def register(self, name: str, frame: pd.DataFrame) -> None:
        """Copy a DataFrame into the temp table `name`."""
        staged = f"{name}_frame"
        self.con.register(staged, frame)
        try:
            self.con.execute(
                f"CREATE OR REPLACE TEMP TABLE {ident(name)} AS SELECT * FROM {ident(staged)}"
            )
        finally:
            self.con.unregister(staged)

    # -- check and run ------------------------------------------------------------------------
    def check(self, rendered: RenderedSQL) -> None:
        """Parse, lint and qualify `rendered` against the tables it reads, as they are now."""
        schema = {}
        for table in tables_read(rendered):
            try:
                schema[table] = self.schema(table)
            except duckdb.Error:
                raise TemplateError(
                    f"sql/{rendered.template}: reads {table!r}, which is not a table or view here"
                ) from None
        check_sql(rendered, schema)

    def create(
        self,
        name: str,
        rendered: RenderedSQL,
        *,
        view: bool = False,
        params: Params = None,
        check: bool = True,
    ) -> None:
        """Materialise `rendered` as the temp table (or view) `name`. `check=False` only where
        an identical set of stages was checked already (stages differing in the final SELECT)."""
        if check:
            self.check(rendered)
        make_room(self.con, name, view)
        kind = "VIEW" if view else "TABLE"
        self.execute(
            f"CREATE OR REPLACE TEMP {kind} {ident(name)} AS {rendered.text}",
            rendered=rendered,
            params=params,
        )

    def materialise(
        self,
        graph: Graph,
        out: Destination | None = None,
        relations: Mapping[str, str] | None = None,
    ) -> None:
        """Every stage of `graph`, in order, checked against the tables it reads, run and
        recorded: a temp table or view as the stage keeps, named as the stage; a streamed stage
        only checked, unless `out` is given, where it is run into its outputs. With `out`, each
        stage's outputs are copied as soon as it exists (and its step said). A transient table is
        dropped once the last stage reading it has run. `relations` names the relation a graph
        input (or a stage made already) stands for, when not its own name.

        A Session owning its connection stops preserving insertion order first: outputs are
        written with ORDER BY, and letting DuckDB drop scan order lets it stream and spill (its
        advice for larger-than-memory work); validation, which numbers rows in file order, has
        run by now."""
        names = dict(relations or {})
        if self._owns_connection:
            self.execute("SET preserve_insertion_order = false")
        pending = {stage.name: len(graph.readers(stage.name)) for stage in graph}
        for declared in graph:
            if out is not None and declared.step and declared.publications:
                logger.info(declared.step)
            inputs = declared.bound(names)
            stage = declared if declared.before is None else declared.before(self, inputs)
            if stage.keep == "stream" and (out is None or not stage.publications):
                self.check(stage.render(inputs))
            elif stage.keep == "stream" and out is not None:
                for output in stage.publications:
                    rendered = stage.render(inputs, ordered=bool(output.order))
                    self.check(rendered)
                    out.copy(output.file, rendered.text, rendered)
            else:
                self.create(stage.name, stage.render(inputs), view=stage.keep == "view")
            for source in stage.sources:
                pending[source] = pending.get(source, 0) - 1
                if pending[source] == 0 and source in graph and graph[source].transient:
                    self.execute(f"DROP TABLE {ident(names.get(source, source))}")
            if stage.keep != "stream" and out is not None:
                for output in stage.publications:
                    if output.records:
                        out.records(output.file, self._records(output.query(stage.name)))
                    else:
                        out.copy(output.file, output.query(stage.name))

    def rows(self, rendered: RenderedSQL, params: Params = None) -> list[dict[str, Any]]:
        """Check and run `rendered`; its rows as dicts of JSON-ready values (NaN as None)."""
        self.check(rendered)
        cursor = self._run(rendered.text, rendered, params)
        names = [d[0] for d in cursor.description or ()]
        return [{k: _plain(v) for k, v in zip(names, row)} for row in cursor.fetchall()]

    def _records(self, query: str) -> list[dict[str, Any]]:
        cursor = self._run(query, None, None)
        names = [d[0] for d in cursor.description or ()]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def execute(
        self, statement: str, *, rendered: RenderedSQL | None = None, params: Params = None
    ) -> None:
        """Run `statement` (built from `rendered`, when given: the template is recorded)."""
        self._run(statement, rendered, params)

    def first_row(self, statement: str, params: Params = None) -> tuple[Any, ...] | None:
        return first_row(self.con, statement, params)

    def frame(self, query: str | RenderedSQL, params: Params = None) -> pd.DataFrame:
        """The rows of `query` as a DataFrame; a rendered template is checked first."""
        if isinstance(query, RenderedSQL):
            self.check(query)
            return self._run(query.text, query, params).df()
        return self._run(query, None, params).df()

    def _run(
        self, statement: str, rendered: RenderedSQL | None, params: Params
    ) -> duckdb.DuckDBPyConnection:
        try:
            cursor = self.con.execute(statement, params or None)
        except duckdb.Error as exc:
            where = f"sql/{rendered.template}: " if rendered else ""
            raise QueryError(f"{where}DuckDB failed: {first_line(exc)}") from None
        if rendered is not None:
            self.sql[rendered.template] = rendered
        return cursor

    # -- publish ------------------------------------------------------------------------------
    @contextmanager
    def publish(self, out_dir: str | Path | Relations) -> Iterator[Destination]:
        """An Output staged beside `out_dir`, moved into it when the block succeeds; or, given
        Relations, the outputs kept as tables of this session's connection."""
        if isinstance(out_dir, Relations):
            yield out_dir.attach(self)
            return
        inputs = [path for opened in self.inputs.values() for path in input_paths(opened)]
        with atomic_output_dir(out_dir, inputs=inputs) as stage:
            yield Output(self, stage)


class Output:
    """The files of one output folder, staged; `counts` holds the rows of each table written."""

    def __init__(self, session: Session, folder: Path) -> None:
        self.session = session
        self.folder = folder
        self.counts: dict[str, int] = {}

    def copy(self, name: str, query: str, rendered: RenderedSQL | None = None) -> int:
        """Stream `query` into the file `name` (.parquet, or .jsonl as JSON Lines); its rows."""
        rows = copy_to(self.session.con, query, self.folder / name, rendered)
        if rendered is not None:
            self.session.sql[rendered.template] = rendered
        self.counts[name] = rows
        return rows

    def json(self, name: str, document: Any) -> None:
        write_json(self.folder / name, document)

    def records(self, name: str, rows: list[dict[str, Any]]) -> None:
        """JSON Lines, each row as json.dumps writes it (Publication.records)."""
        with open(self.folder / name, "w", encoding="utf-8") as lines:
            lines.writelines(json.dumps(row) + "\n" for row in rows)
        self.counts[name] = len(rows)

    def manifest(
        self, command: str, policy: dict[str, Any], options: dict[str, Any], **extra: Any
    ) -> dict[str, Any]:
        """sql/ (the recorded templates, one file each) and manifest.json; returns the manifest."""
        (self.folder / "sql").mkdir(exist_ok=True)
        for sql in self.session.sql.values():
            (self.folder / "sql" / sql.template.replace("/", "_")).write_text(
                sql.text, encoding="utf-8"
            )
        return _record_manifest(self, command, policy, options, extra)


class Relations:
    """Outputs kept in the connection instead of a folder (the Python API without `out`): each
    table `name` is the temp table `<prefix>_<stem of name>`, each document kept as it is."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.tables: dict[str, str] = {}
        self.documents: dict[str, Any] = {}
        self.counts: dict[str, int] = {}
        self._session: Session | None = None

    def attach(self, session: Session) -> Relations:
        self._session = session
        return self

    @property
    def session(self) -> Session:
        if self._session is None:
            raise RuntimeError("Relations used before a session published to them")
        return self._session

    def copy(self, name: str, query: str, rendered: RenderedSQL | None = None) -> int:
        """Materialise `query` as the temp table of `name`; its rows."""
        table = f"{self.prefix}_{Path(name).stem}"
        self.session.execute(
            f"CREATE OR REPLACE TEMP TABLE {ident(table)} AS {query}", rendered=rendered
        )
        row = self.session.first_row(f"SELECT count(*) FROM {ident(table)}")
        self.tables[name] = table
        self.counts[name] = int(row[0]) if row else 0
        return self.counts[name]

    def json(self, name: str, document: Any) -> None:
        self.documents[name] = document

    def records(self, name: str, rows: list[dict[str, Any]]) -> None:
        """The rows kept as the document `name`."""
        self.documents[name] = rows
        self.counts[name] = len(rows)

    def manifest(
        self, command: str, policy: dict[str, Any], options: dict[str, Any], **extra: Any
    ) -> dict[str, Any]:
        """The manifest an output folder would hold (its `outputs` name the tables' files)."""
        return _record_manifest(self, command, policy, options, extra)


Destination = Output | Relations  # where a pipeline's outputs go: a folder, or the connection


def _record_manifest(
    out: Destination,
    command: str,
    policy: dict[str, Any],
    options: dict[str, Any],
    extra: dict[str, Any],
) -> dict[str, Any]:
    """The run's manifest (inputs, the SQL that ran, the outputs' rows), kept as manifest.json."""
    rendered = list(out.session.sql.values())
    manifest = build_manifest(command, policy, rendered, out.session.inputs, out.counts, options)
    manifest.update(extra)
    out.json("manifest.json", manifest)
    return manifest


def folder_of(out_dir: str | Path | Relations) -> Path | None:
    """The output folder, or None for outputs kept as tables."""
    return None if isinstance(out_dir, Relations) else Path(out_dir)


def copy_to(
    con: duckdb.DuckDBPyConnection, query: str, path: Path, rendered: RenderedSQL | None = None
) -> int:
    """COPY a query's rows to one file, Parquet or (for .jsonl) JSON Lines; returns the row count.
    A failure names the file (and the template, when the query is one)."""
    fmt = "json" if path.suffix == ".jsonl" else "parquet"
    try:
        with _one_thread(con) if fmt == "json" else nullcontext():
            row = first_row(con, f"COPY ({query}) TO {lit(str(path))} (FORMAT {fmt})")
    except duckdb.Error as exc:
        source = f" from sql/{rendered.template}" if rendered else ""
        raise QueryError(f"writing {path.name}{source}: DuckDB failed: {first_line(exc)}") from None
    return int(row[0]) if row else 0


@contextmanager
def _one_thread(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    # DuckDB's parallel JSON writer reserves a 256 MiB buffer per thread: under --memory-limit 1GB
    # that ran out of memory at 30M log rows, and one thread writes the contract as fast.
    threads = first_row(con, "SELECT current_setting('threads')")
    con.execute("SET threads = 1")
    try:
        yield
    finally:
        con.execute(f"SET threads = {int(threads[0]) if threads else 1}")


def _plain(value: Any) -> Any:
    """A JSON-serialisable Python value: ints (HUGEINT sums included), floats (NaN → None)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, (float, Decimal)):
        number = float(value)
        return number if math.isfinite(number) else None
    return str(value)
