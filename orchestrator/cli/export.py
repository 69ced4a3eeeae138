"""`duckscore export annotations`."""

from __future__ import annotations

from pathlib import Path

import click

from ..core.errors import OptionError
from .app import DuckscoreGroup, cli
from .options import OutputPath
from .summary import done

ANNOTATION_FORMATS = ("phoenix",)


@cli.group(name="export", cls=DuckscoreGroup)
def export_group() -> None:
    """A run's decisions in the shapes other tools import."""


@export_group.command("annotations")
@click.option(
    "--scored",
    required=True,
    metavar="DIR",
    type=click.Path(file_okay=False, path_type=Path),
    help="The output folder of `duckscore run` on a trace export (--log-format openinference "
    "or otel-genai): queries.parquet, spans.parquet, contract.jsonl, or their partitions.",
)
@click.option(
    "--format",
    "annotation_format",
    type=click.Choice(ANNOTATION_FORMATS),
    default="phoenix",
    show_default=True,
    help="phoenix: the body of Arize Phoenix's POST /v1/span_annotations.",
)
@click.option(
    "--out",
    "out_path",
    metavar="FILE",
    type=OutputPath(dir_okay=False, path_type=Path),
    help="Where to write the annotations, one JSON document (replaced atomically).",
)
@click.option(
    "--to",
    "url",
    metavar="URL",
    help="Post them to the Phoenix server at URL (http://HOST:PORT) instead, as span and trace "
    "annotations; posting again updates them.",
)
def export_annotations(
    scored: Path, annotation_format: str, out_path: Path | None, url: str | None
) -> None:
    """Write each trace's decisions as span annotations, to show them beside the traces.

    \b
    Three annotations per trace (annotator_kind CODE), on its root span, or on its first
    retrieval span when the export did not hold the root:
      duckscore.confidence    label low | medium | high, score best_overall_score
      duckscore.need_hitl     label true | false, score 1 | 0
      duckscore.web_fallback  label true | false, score 1 | 0
    metadata: query_id, best_parent_id, best_overall_score, top2_ratio,
    score_policy_version; identifier duckscore:<score policy version>.
    With --to, the same three go on the trace as trace annotations too.

    \b
    duckscore export annotations --scored traced --out annotations.json
    curl -X POST -H 'Content-Type: application/json' \\
         --data @annotations.json http://localhost:6006/v1/span_annotations
    duckscore export annotations --scored traced --to http://localhost:6006
    """
    if url is not None and out_path is None:
        _post(scored, url)
        return
    if out_path is None or url is not None:
        raise OptionError("give one of --out FILE (write the annotations) and --to URL (post them)")
    from ..export.annotations import phoenix_annotations

    exported = phoenix_annotations(scored, out_path)
    done(
        f"wrote {exported.annotations:,} {annotation_format} annotations of "
        f"{exported.traces:,} traces to {out_path}{_left_out(exported.without_spans)}"
    )


def _post(scored: Path, url: str) -> None:
    from ..phoenix.post import post_annotations

    posted = post_annotations(scored, url)
    done(
        f"posted {posted.span_annotations:,} span annotations and {posted.trace_annotations:,} "
        f"trace annotations of {posted.traces:,} traces to {url}{_left_out(posted.without_spans)}"
    )


def _left_out(missing: int) -> str:
    plural = "queries" if missing != 1 else "query"
    return f"; left out {missing:,} {plural} without spans" if missing else ""
