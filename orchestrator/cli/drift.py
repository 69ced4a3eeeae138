"""`duckscore drift`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..common.defaults import DEFAULT_POLICY
from .app import cli
from .options import given_and_format, log_options

if TYPE_CHECKING:
    from ..calibrate.drift import Drift


@cli.command()
@click.option(
    "--run",
    "run_dir",
    type=click.Path(path_type=Path),
    metavar="DIR",
    help="The output folder of `duckscore run` or `score`: its queries.parquet, and the policy "
    "its manifest.json names.",
)
@log_options(required=False, purpose="Instead of --run: score this log first (nothing written); ")
@click.option(
    "--policy",
    metavar="NAME|PATH",
    help="With --log: the calibrated policy to score it with (default: the default policy). "
    "With --run: the policy file the run was scored with, when it is no longer where its "
    "manifest says (it must hash to the run's parameters).",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
@click.option(
    "--check",
    is_flag=True,
    help="Exit with status 1 when the log's scores have moved from the calibration's (any "
    "shift but none), for a nightly job.",
)
def drift(run_dir: Path | None, log: Any, policy: str | None, as_json: bool, check: bool) -> None:
    """Does a calibrated policy still fit the log it scores? Compares the log's best scores with
    the policy's calibration (metadata.score_distribution, split by its p_good map): KS and PSI
    with their noise at the log's size, the shift they show (none, rate, scale, inseparable,
    other) and the rates of good answers consistent with the log; beside it the shipped map's
    mean p_good on the log and the calibration's rate, and what to do — nothing, the `duckscore
    recalibrate` command to run, or label 30 queries."""
    from ..calibrate.drift import calibration_of, drift_of_run
    from ..calibrate.drift import drift as drift_of

    if (run_dir is None) == (log is None):
        raise click.UsageError("give one of --run and --log")
    if run_dir is not None:
        found = drift_of_run(run_dir, policy)
    else:
        from ..api.functions import run
        from ..scoring.policy_view import load_score_policy

        chosen = policy or DEFAULT_POLICY
        calibration = calibration_of(load_score_policy(chosen))  # before the log is scored
        ran = run(log, policy=chosen, explain=False)
        found = drift_of(ran.policy, calibration, ran.queries.df(), given_and_format(log)[0])
    if as_json:
        click.echo(json.dumps(found.as_record()))
    else:
        for line in drift_lines(found):
            click.echo(line)
    if check and found.shifted:
        sys.exit(1)


def drift_lines(found: Drift) -> list[str]:
    """What drift found, a figure a line."""
    from ..calibrate.shift import SHIFT_MEANING

    d = found.diagnosis
    estimate = "-" if d.rate_estimate is None else f"{d.rate_estimate:.3f}"
    lines = [
        f"{'policy':28s} {found.policy} on {found.log or 'the log'} ({d.log_queries} queries; "
        f"calibrated on {d.reference_queries})",
        f"{'shift':28s} {d.shift}: {SHIFT_MEANING[d.shift]}",
        f"{'best_score_ks':28s} {d.ks:7.3f}  (noise {d.ks_noise:.3f} at {d.log_queries} and "
        f"{d.reference_queries} queries)",
        f"{'best_score_psi':28s} {d.psi:7.3f}  (noise {d.psi_noise:.3f})",
    ]
    if d.ratio_ks is not None and d.ratio_ks_noise is not None:
        lines.append(f"{'top2_ratio_ks':28s} {d.ratio_ks:7.3f}  (noise {d.ratio_ks_noise:.3f})")
    return lines + [
        f"{'rate_estimate':28s} {estimate:>7s}  ({_rates(d.rates_scale_held, d.rates_location_scale)})",
        f"{'p_good_mean':28s} {found.p_good_mean:7.3f}  (the shipped map on this log; the "
        f"calibration's rate {found.calibration_rate:.3f})",
        f"{'adapt':28s} {found.choice.adapt}  ({found.choice.reason})",
        f"{'todo':28s} {found.advice}",
    ]


def _rates(held: tuple[float, float] | None, moved: tuple[float, float] | None) -> str:
    def span(rates: tuple[float, float] | None) -> str:
        return "none" if rates is None else f"{rates[0]:.2f}–{rates[1]:.2f}"

    return f"rates consistent with the log: {span(held)} with the scale held, {span(moved)} moved"
