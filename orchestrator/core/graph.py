"""The stage graph: a command's chain of SQL as data, declared once (issue 48 §1).

A `Stage` is one relation a template makes: its name, its template, what it reads (each key of
the template's `inputs` bound to a stage before it or to an input of the graph), how it renders
once told which relation each of those names stands for, and what its consumers need to know of
it: whether a Session keeps it as a table or a view or only streams it into its outputs, the
outputs it is published as, and what to ask of its inputs before it runs. A `Graph` orders the
stages, checks that every read is an earlier stage or a declared input, and is compiled by its
consumers:

- `Session.materialise` (core/session.py): each stage a temp table or view, in order, checked
  and recorded, its outputs copied into the output folder when it exists;
- `Graph.chain`: one statement, each stage a named CTE (the live scorer, the macro pack, dbt);
- `Graph.render`: one stage on its own, reading its inputs by name (`duckscore sql`, tune).

Core knows no capability: `fusion/stages.py` and `scoring/stages.py` export their stages, and
`runner/graph.py` joins them into the chain of `duckscore run`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, NamedTuple, Protocol

from .errors import TemplateError
from .render import RenderedSQL, ident

if TYPE_CHECKING:
    from .session import Session

Keep = Literal["table", "view", "stream"]


class Render(Protocol):
    def __call__(
        self, inputs: Mapping[str, str], *, final: str | None = None, ordered: bool = False
    ) -> RenderedSQL:
        """The stage's SQL reading `inputs` (each key of its `reads`, as the relation it stands
        for); `final` another CTE of its template to select (to inspect it), `ordered` with the
        ORDER BY its template writes when it is selected last."""
        ...


@dataclass(frozen=True)
class Publication:
    """An output file of a stage: its rows (`columns`, or all), ordered by `order`. A streamed
    stage is written straight from its SQL, ordered as its template orders (when `order` is
    given). `records`: JSON Lines written by Python's json.dumps, a line per row, its keys the
    columns in order (a format other tools compare byte for byte: loc_outputs.jsonl), where
    DuckDB's writer leaves out the spaces."""

    file: str
    columns: tuple[str, ...] = ()
    order: tuple[str, ...] = ()
    records: bool = False

    def query(self, relation: str) -> str:
        columns = ", ".join(map(ident, self.columns)) or "*"
        order = f" ORDER BY {', '.join(map(ident, self.order))}" if self.order else ""
        return f"SELECT {columns} FROM {ident(relation)}{order}"


@dataclass(frozen=True)
class Stage:
    """One relation of the chain. `reads` binds each key of its template's `inputs` to the stage
    or graph input it reads; `keep` is how a Session holds it (a `stream` is never held: it is
    run into its outputs only, read by no stage); `transient`: a table dropped once the last
    stage reading it has run; `step`: what a run says it is doing while the stage runs; `before`:
    what a Session asks of the stage's inputs, once they exist — it may refuse them, or return
    the stage rendered for what they hold (a CTE chain, which has no data, never asks);
    `parameters`: the column parameters its SQL reads, with their SQL types (a macro's
    arguments, dbt's vars)."""

    name: str
    template: str
    reads: tuple[tuple[str, str], ...]
    render: Render = field(compare=False)
    keep: Keep = "table"
    transient: bool = False
    publications: tuple[Publication, ...] = ()
    step: str | None = None
    before: Callable[[Session, Mapping[str, str]], Stage] | None = field(
        default=None, compare=False
    )
    parameters: tuple[tuple[str, str], ...] = ()

    @property
    def sources(self) -> tuple[str, ...]:
        """The stages and inputs it reads, in the order of its template's keys."""
        return tuple(dict.fromkeys(source for _, source in self.reads))

    def bound(self, relations: Mapping[str, str]) -> dict[str, str]:
        """Its template's inputs: each key as the relation its source stands for."""
        return {key: relations.get(source, source) for key, source in self.reads}


class Chain(NamedTuple):
    """A stage as one statement: the stages it needs as CTEs, in order, then its own SQL."""

    stages: tuple[tuple[str, RenderedSQL], ...]
    query: RenderedSQL

    def sql(self, before: Sequence[str] = ()) -> str:
        """`WITH <before>, <stage> AS (…), … SELECT * FROM (<query>)`; `before` are CTEs the
        chain's inputs stand for (a macro's typed views of its arguments)."""
        ctes = [*before, *(f"{ident(name)} AS (\n{sql.text})" for name, sql in self.stages)]
        if not ctes:
            return self.query.text
        return "WITH\n" + ",\n".join(ctes) + f"\nSELECT * FROM (\n{self.query.text})"


@dataclass(frozen=True)
class Graph:
    """Stages in the order they run; `inputs` the relations they read that no stage makes."""

    stages: tuple[Stage, ...]
    inputs: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        known = set(self.inputs)
        for stage in self.stages:
            if stage.name in known:
                raise TemplateError(f"stage {stage.name}: the name is taken in its graph")
            for key, source in stage.reads:
                if source not in known:
                    raise TemplateError(
                        f"stage {stage.name} ({stage.template}) reads {source!r} as {key}, "
                        "which is neither a stage before it nor an input of its graph"
                    )
            readers = [s.name for s in self.stages if stage.name in s.sources]
            if stage.keep == "stream" and readers:
                raise TemplateError(f"stage {stage.name} is streamed, but {readers[0]} reads it")
            known.add(stage.name)

    def __iter__(self) -> Iterator[Stage]:
        return iter(self.stages)

    def __contains__(self, name: object) -> bool:
        return any(stage.name == name for stage in self.stages)

    def __getitem__(self, name: str) -> Stage:
        for stage in self.stages:
            if stage.name == name:
                return stage
        raise KeyError(name)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(stage.name for stage in self.stages)

    def then(self, other: Graph) -> Graph:
        """This graph followed by `other`, whose inputs this graph's stages make are joined."""
        inputs = [
            *self.inputs,
            *(i for i in other.inputs if i not in self and i not in self.inputs),
        ]
        return Graph((*self.stages, *other.stages), tuple(inputs))

    def subgraph(self, targets: Iterable[str], given: Iterable[str] = ()) -> Graph:
        """The stages `targets` need, in order (the targets included); stages named in `given`
        exist already, and are inputs of the subgraph."""
        given = set(given)
        needed: set[str] = set()
        pending = [name for name in targets if name not in given]
        while pending:
            name = pending.pop()
            if name in needed or name not in self:
                continue
            needed.add(name)
            pending += [s for s in self[name].sources if s not in given]
        stages = tuple(stage for stage in self.stages if stage.name in needed)
        read = {source for stage in stages for source in stage.sources}
        inputs = [i for i in (*self.inputs, *self.names) if i in read and i not in needed]
        return Graph(stages, tuple(inputs))

    def render(
        self,
        name: str,
        relations: Mapping[str, str] | None = None,
        *,
        final: str | None = None,
        ordered: bool = False,
    ) -> RenderedSQL:
        """Stage `name` reading each stage and input as the relation of its name (or as
        `relations` names it)."""
        stage = self[name]
        return stage.render(stage.bound(relations or {}), final=final, ordered=ordered)

    def chain(
        self, final: str, relations: Mapping[str, str] | None = None, *, ordered: bool = False
    ) -> Chain:
        """Stage `final` as one statement: every stage it needs a CTE named as the stage (but
        those `relations` names, which it reads as they are), its inputs read as `relations`
        names them."""
        relations = dict(relations or {})
        needed = self.subgraph([final], given=[n for n in relations if n in self])
        ctes = tuple(
            (stage.name, stage.render(stage.bound(relations)))
            for stage in needed
            if stage.name != final
        )
        return Chain(ctes, self.render(final, relations, ordered=ordered))

    def readers(self, name: str) -> tuple[str, ...]:
        """The stages that read `name`, in order."""
        return tuple(stage.name for stage in self.stages if name in stage.sources)
