"""`duckscore instincts init|ingest|recompute|decay|evolve|archive|top|report`."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING

import click

from .app import DuckscoreGroup, cli
from .options import OutputPath, db_option, now_option
from .summary import done

if TYPE_CHECKING:
    from ..instincts.workspace import Store


@cli.group(cls=DuckscoreGroup)
def instincts() -> None:
    """Seed 004: composite confidence of learned behaviours in a store — a DuckDB file, or a
    PostgreSQL database for many writers — update rules, weekly decay, tiers, dashboard."""


@instincts.command("init")
@db_option
@click.option(
    "--policy",
    default="instinct_v1",
    show_default=True,
    metavar="NAME|PATH",
    help="The instinct policy the store is bound to (its composite column uses its weights).",
)
def instincts_init(db: Store, policy: str) -> None:
    """Create the store (the seed's four tables) or check an existing one is up to date; on
    PostgreSQL by versioned migrations, recorded in duckscore_migrations."""
    from ..instincts.store import init_store
    from ..instincts.workspace import shown

    done(f"{shown(db)}: {init_store(db, policy)}")


@instincts.command("ingest")
@db_option
@click.option(
    "--instincts",
    "new_instincts",
    metavar="PATH",
    help="New instincts: id, trigger_text, action_text, domain, user_id [, project_id, source].",
)
@click.option(
    "--events",
    metavar="PATH",
    help="Events: event_id, instinct_id, event_type (an update rule), occurred_at "
    "[, session_id, outcome, description, signals]. Already ingested event ids are skipped.",
)
@now_option
def instincts_ingest(
    db: Store, new_instincts: str | None, events: str | None, now: dt.datetime | None
) -> None:
    """Add instincts and apply events in event order, in one transaction (UPDATE_RULES deltas,
    clamped to [0, 1] after each event; a history row per event)."""
    from ..instincts.store import ingest

    if new_instincts is None and events is None:
        raise click.UsageError("give --instincts and/or --events")
    counts = ingest(db, events, new_instincts, now)
    done(", ".join(f"{value:,} {name.replace('_', ' ')}" for name, value in counts.items()))


@instincts.command("migrate")
@click.option(
    "--from",
    "source",
    required=True,
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="The DuckDB store to copy.",
)
@click.option(
    "--to", "target", required=True, metavar="URL", help="A new PostgreSQL store: postgresql://…"
)
def instincts_migrate(source: Path, target: str) -> None:
    """Copy a DuckDB store — instincts, applications, evidence, history, ingested event ids,
    decay weeks, its policy — into a new, empty PostgreSQL store, in one transaction."""
    from ..instincts.store import migrate_store
    from ..instincts.workspace import shown

    copied = migrate_store(source, target)
    rows = ", ".join(f"{count:,} {table}" for table, count in copied.items())
    done(f"{source} -> {shown(target)}: {rows}")


@instincts.command("recompute")
@db_option
@now_option
def instincts_recompute(db: Store, now: dt.datetime | None) -> None:
    """Overwrite the three scores with their values from the counts (frequency bins, Wilson lower
    bound, the human score's loop); a history row for each instinct that changes."""
    from ..instincts.store import recompute

    counts = recompute(db, now)
    done(f"{counts['changed']:,} of {counts['instincts']:,} instincts changed")


@instincts.command("decay")
@db_option
@now_option
def instincts_decay(db: Store, now: dt.datetime | None) -> None:
    """The weekly job: decay the inactive, deprecate below the threshold, delete the deprecated
    after 30 days. Once per ISO week of --now; transactional."""
    from ..instincts.store import decay

    result = decay(db, now)
    if result.already_ran:
        done(f"Decay job already ran for the week of {result.week_start}: nothing changed")
    else:
        archived = "" if result.archived is None else f", {result.archived} archived"
        done(
            f"Decay job complete: {result.decayed} decayed, {result.deprecated} deprecated, "
            f"{result.deleted} deleted{archived}"
        )


ids_option = click.option(
    "--id", "ids", multiple=True, metavar="UUID", help="An instinct (repeat for more)."
)


@instincts.command("evolve")
@db_option
@ids_option
@click.option(
    "--eligible", is_flag=True, help="Every active instinct the policy's evolve rule accepts."
)
@now_option
def instincts_evolve(
    db: Store, ids: tuple[str, ...], eligible: bool, now: dt.datetime | None
) -> None:
    """Move mature instincts to `evolved` (the policy's lifecycle.evolve rule: composite,
    successes, a /reflect approval); an --id that does not meet it is refused."""
    from ..instincts.lifecycle import evolve

    if bool(ids) == eligible:
        raise click.UsageError("give --id (one or more) or --eligible")
    moved = evolve(db, ids, eligible, now)
    done(f"{len(moved):,} instinct{'s' * (len(moved) != 1)} evolved")


@instincts.command("archive")
@db_option
@ids_option
@now_option
def instincts_archive(db: Store, ids: tuple[str, ...], now: dt.datetime | None) -> None:
    """Move instincts to `archived`: kept with their history, never decayed nor deleted."""
    from ..instincts.lifecycle import archive

    if not ids:
        raise click.UsageError("give --id (one or more)")
    counts = archive(db, ids, now)
    done(f"{counts['archived']:,} archived, {counts['already_archived']:,} already archived")


@instincts.command("top")
@db_option
@click.option("--tier", help="Only this tier (core, strong, moderate, tentative, deprecated).")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(min=1))
@click.option(
    "--format", "fmt", type=click.Choice(["table", "jsonl"]), default="table", show_default=True
)
def instincts_top(db: Store, tier: str | None, limit: int, fmt: str) -> None:
    """Active instincts by composite confidence, with tier and injection method."""
    from ..instincts.store import top

    frame = top(db, tier, limit)
    if fmt == "jsonl":
        for line in frame.to_json(orient="records", lines=True, force_ascii=False).splitlines():
            click.echo(line)
    else:
        click.echo(frame.to_string(index=False) if len(frame) else "no instincts")


@instincts.command("report")
@db_option
@click.option("--out", "out_dir", required=True, type=OutputPath(file_okay=False, path_type=Path))
@click.option("--limit", default=12, show_default=True, type=click.IntRange(min=1))
def instincts_report(db: Store, out_dir: Path, limit: int) -> None:
    """The dashboard: radar charts of the three scores and confidence trends, in report.html."""
    from ..instincts.report import write_report

    report = write_report(db, out_dir, limit)
    count = len(report.instincts)
    files = ", ".join(["report.html", "report.json", *report.figures])
    done(f"wrote the dashboard of {count:,} instinct{'s' * (count != 1)} into {out_dir}/ ({files})")
