"""The `duckscore` group: one-line errors, exit statuses, progress, --version."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from ..core.errors import DuckscoreError
from ..core.interrupts import catch_sigterm, command_started, interrupt_message
from .reporting import reporting


class DuckscoreGroup(click.Group):
    """Every failure is one line, `duckscore: error: …`, on stderr, with exit status 2:
    DuckscoreError from the runner and click's own usage errors alike."""

    def invoke(self, ctx: click.Context) -> Any:
        command_started()
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as exc:
            _interrupted(exc)
        except BrokenPipeError:
            _reader_gone()
        except DuckscoreError as exc:
            _fail(str(exc))
        except RuntimeError as exc:
            # DuckDB stops a query on a pending signal and raises this instead of the signal's
            # own exception (the Ctrl-C of the user, or the Terminated of SIGTERM below)
            if str(exc).strip() != "Query interrupted":
                raise
            _interrupted(exc)
        except Exception as exc:  # duckdb is imported lazily (a fast --help), so match its module
            if not type(exc).__module__.lstrip("_").startswith("duckdb"):
                raise
            _fail(
                f"DuckDB failed: {str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}"
            )

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        try:
            code = super().main(*args, **kwargs)
        except click.exceptions.Abort:
            _interrupted()
        except click.exceptions.NoArgsIsHelpError as exc:
            click.echo(exc.format_message(), err=True)
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            command = (
                exc.ctx.command_path
                if isinstance(exc, click.UsageError) and exc.ctx
                else "duckscore"
            )
            _fail(f"{exc.format_message()} (see `{command} --help`)", status=exc.exit_code)
        sys.exit(code if isinstance(code, int) else 0)


def _reader_gone() -> None:
    """The reader of stdout stopped reading (`duckscore status | head`): it has what it wanted,
    so exit 0 (click's own answer is a silent 1), and let no later flush complain of the pipe."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(0)


def _interrupted(interrupted: BaseException | None = None) -> None:
    message, status = interrupt_message(interrupted)
    _fail(message, status=status)


def _fail(message: str, status: int = 2) -> None:
    click.echo(f"duckscore: error: {' '.join(message.split())}", err=True)
    sys.exit(status)


@click.group(cls=DuckscoreGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="duckscore", prog_name="duckscore")  # looked up on use
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Progress lines on stderr (default: only when stderr is a terminal); --no-progress "
    "also silences the lines a command prints when it succeeds (not its warnings).",
)
@click.option(
    "-q",
    "--quiet",
    is_flag=True,
    help="No progress lines, no success line and no warnings; errors still print.",
)
@click.pass_context
def cli(ctx: click.Context, progress: bool | None, quiet: bool) -> None:
    """SQL-first confidence scoring for RAG retrieval logs, on DuckDB.

    Every decision comes from a versioned policy rendered to SQL; every output folder carries a
    manifest.json with the policy, its parameters, the SQL hash and the input fingerprints.
    """
    if progress is None:
        progress = sys.stderr.isatty()
    if ctx.invoked_subcommand not in OWN_LOG:
        ctx.with_resource(reporting(progress=progress and not quiet, warnings=not quiet))


# commands whose records go to a log of their own: a server's (serve/server.py, on the root logger)
OWN_LOG = frozenset({"serve"})


# the group's own options, also taken where users type them: after the command
GLOBAL_FLAGS = frozenset({"-q", "--quiet", "--progress", "--no-progress"})


def hoist_global_flags(args: list[str]) -> list[str]:
    """`args` with the global flags moved before the command (up to a `--`, after which every
    argument is a value)."""
    end = args.index("--") if "--" in args else len(args)
    options = args[:end]
    flags = [arg for arg in options if arg in GLOBAL_FLAGS]
    return flags + [arg for arg in options if arg not in GLOBAL_FLAGS] + args[end:]


def main() -> None:
    catch_sigterm()
    cli(args=hoist_global_flags(sys.argv[1:]), prog_name="duckscore")
