"""A setting declared once with its field (core/setting.py, issue 48 §2): bounds with open or
closed ends, a maximum alone, and checks across the fields that the dataclass names; the same
constraint holds from Python keywords (`check_settings`) and from the flags `dataclass_options`
makes of it (cli/declared.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import click
import pytest
from click.testing import CliRunner, Result

from duckscore.cli.declared import dataclass_options
from duckscore.core.errors import OptionError
from duckscore.core.setting import CrossCheck, check_settings, setting


def _low_not_above_high(chosen: Band) -> str | None:
    if chosen.low > chosen.high:
        return f"--low ({chosen.low}) is above --high ({chosen.high})"
    return None


@dataclass(frozen=True)
class Band:
    closed: float = setting(0.6, "--closed", "Both ends allowed.", minimum=0.5, maximum=0.7)
    open_ends: float = setting(
        0.5, "--open-ends", "Neither end.", minimum=0, maximum=1, min_open=True, max_open=True
    )
    above: float = setting(1.0, "--above", "Above 0.", minimum=0, min_open=True)
    below: float = setting(0.0, "--below", "Below 1.", maximum=1, max_open=True)
    count: int = setting(3, "--count", "At most 9.", maximum=9)
    low: float = setting(0.2, "--low", "The low end.", minimum=0)
    high: float = setting(0.8, "--high", "The high end.", minimum=0)

    cross_checks: ClassVar[tuple[CrossCheck, ...]] = (_low_not_above_high,)

    def __post_init__(self) -> None:
        check_settings(self)


def _invoke(*args: str) -> Result:
    """A command built of Band's options, given `args`; it echoes the Band it is handed."""

    @click.command()
    @dataclass_options(Band, "band")
    def command(band: Band) -> None:
        click.echo(repr(band))

    return CliRunner().invoke(command, list(args))


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"closed": 0.49}, "--closed must be in [0.5, 0.7], got 0.49"),
        ({"closed": 0.71}, "--closed must be in [0.5, 0.7], got 0.71"),
        ({"open_ends": 0}, "--open-ends must be in (0, 1), got 0"),
        ({"open_ends": 1.0}, "--open-ends must be in (0, 1), got 1.0"),
        ({"above": 0.0}, "--above must be above 0, got 0.0"),
        ({"below": 1.0}, "--below must be below 1, got 1.0"),
        ({"count": 10}, "--count must be at most 9, got 10"),
    ],
)
def test_a_value_out_of_bounds_is_refused_in_one_line(given: dict[str, Any], message: str) -> None:
    with pytest.raises(OptionError) as refused:
        Band(**given)
    assert str(refused.value) == message


@pytest.mark.parametrize(
    "given",
    [{"closed": 0.5}, {"closed": 0.7}, {"open_ends": 1e-9}, {"open_ends": 1 - 1e-9},
     {"above": 1e-9}, {"below": 1 - 1e-9}, {"count": 9}, {"count": -5}],
)  # fmt: skip
def test_a_closed_end_is_allowed_and_an_open_one_only_from_inside(given: dict[str, Any]) -> None:
    Band(**given)


@pytest.mark.parametrize(
    ("flag", "shown"),
    [("--closed", "[default: 0.6; 0.5<=x<=0.7]"), ("--open-ends", "[default: 0.5; 0<x<1]"),
     ("--above", "[default: 1.0; x>0]"), ("--below", "[default: 0.0; x<1]"),
     ("--count", "[default: 3; x<=9]")],
)  # fmt: skip
def test_the_flags_show_the_bounds(flag: str, shown: str) -> None:
    listed = " ".join(_invoke("--help").output.split())
    assert f"{flag} {'INTEGER' if flag == '--count' else 'FLOAT'} RANGE" in listed
    assert shown in listed[listed.index(flag) :]


@pytest.mark.parametrize(
    ("args", "range_shown"),
    [(["--closed", "0.8"], "0.5<=x<=0.7"), (["--open-ends", "1"], "0<x<1"),
     (["--above", "0"], "x>0"), (["--below", "1"], "x<1"), (["--count", "10"], "x<=9")],
)  # fmt: skip
def test_the_flags_refuse_what_the_setting_refuses(args: list[str], range_shown: str) -> None:
    done = _invoke(*args)
    assert done.exit_code == 2 and f"not in the range {range_shown}" in done.output


def test_the_flags_build_what_they_give() -> None:
    done = _invoke("--closed", "0.7", "--open-ends", "0.999", "--count", "9")
    assert done.output == f"{Band(closed=0.7, open_ends=0.999, count=9)!r}\n"


def test_a_check_across_fields_runs_after_each_field_is_checked() -> None:
    with pytest.raises(OptionError) as refused:
        Band(low=0.9, high=0.3)
    assert str(refused.value) == "--low (0.9) is above --high (0.3)"
    with pytest.raises(OptionError) as first:
        Band(low=0.9, high=0.3, count=10)  # both refused: the field's own bound is said
    assert str(first.value) == "--count must be at most 9, got 10"
    Band(low=0.5, high=0.5)


def test_the_flags_meet_the_check_across_fields() -> None:
    done = _invoke("--low", "0.9", "--high", "0.3")
    assert isinstance(done.exception, OptionError)
    assert str(done.exception) == "--low (0.9) is above --high (0.3)"


def test_the_options_come_in_the_order_named_and_each_is_named() -> None:
    order = ["high", "low", "count", "below", "above", "open_ends", "closed"]

    @click.command()
    @dataclass_options(Band, "band", order=order)
    def command(band: Band) -> None:
        """Nothing."""

    assert [param.name for param in command.params] == order
    with pytest.raises(TypeError, match=r"^order \['high', 'low'\] does not name each option"):
        dataclass_options(Band, "band", order=order[:2])
