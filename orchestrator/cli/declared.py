"""Options made from settings declared with their fields (core/setting.py): a run's `Job` and
`Engine` (runner/job.py, which loads nothing heavy), a calibration's `CalibrationSettings`
(calibrate/settings.py), so that a flag, its help and its constraint are written once, and a
command that builds one gets it built (`job_options`, `dataclass_options`)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import click

from ..core.setting import Setting, settings_of
from ..runner.job import RECIPE_OVERRIDE_HELP, Job
from .options import F, engine_options

if TYPE_CHECKING:
    from ..core.connection import EngineSettings


def setting_option(declared: Setting, name: str, default: Any) -> Callable[[F], F]:
    """The click option of a declared setting (core/setting.py), given to the command as
    `name`; an inverted flag gives True when given (`dataclass_options` turns it over)."""
    options: dict[str, Any] = {"help": declared.help, "metavar": declared.metavar}
    if declared.repeated:
        options["multiple"] = True
    elif isinstance(default, bool) and "/" not in declared.flag:
        options["is_flag"] = True
    else:
        options |= {"default": default, "show_default": default is not None}
    if declared.minimum is not None or declared.maximum is not None:
        options["type"] = _range(declared, default)
    if declared.choices is not None:
        options["type"] = click.Choice(declared.choices)
    return click.option(declared.flag, name, **options)


def _range(declared: Setting, default: Any) -> click.FloatRange | click.IntRange:
    """The click type of a bounded setting: a FloatRange for a float's, else an IntRange."""
    bounds = (declared.minimum, declared.maximum, declared.min_open, declared.max_open)
    if isinstance(default, float):
        return click.FloatRange(*bounds)
    return click.IntRange(*bounds)  # type: ignore[arg-type]  # an int setting's bounds are ints


def dataclass_options(
    cls: type,
    param: str,
    leave_out: Collection[str] = (),
    helps: Mapping[str, str] | None = None,
    order: Sequence[str] | None = None,
) -> Callable[[F], F]:
    """An option for each declared setting of the dataclass `cls` but those left out (in the
    fields' order, or as `order` names them all; `helps` replacing a declared help); the
    command gets `param`, the instance built of them."""
    declared = {
        name: dataclasses.replace(setting, help=(helps or {}).get(name, setting.help))
        for name, setting in settings_of(cls).items()
        if name not in leave_out
    }
    if order is not None:
        if sorted(order) != sorted(declared):
            raise TypeError(f"order {list(order)} does not name each option of {cls.__name__}")
        declared = {name: declared[name] for name in order}
    defaults = {f.name: f.default for f in dataclasses.fields(cls)}

    def decorate(command: F) -> F:
        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            given = {name: kwargs.pop(name) for name in declared}
            for name, setting in declared.items():
                if setting.inverted:
                    given[name] = not given[name]
            return command(*args, **{param: cls(**given)}, **kwargs)

        decorated: Any = wrapper
        for name, setting in reversed(declared.items()):
            decorated = setting_option(setting, name, defaults[name])(decorated)
        return decorated  # type: ignore[no-any-return]

    return decorate


def job_options(*leave_out: str) -> Callable[[F], F]:
    """The options of a run's `Job` (runner/job.py) but those left out, --threads … last
    (engine_options) unless `settings` is left out: the command gets `job`. Without
    --allow-recipe-mismatch, --set-recipe's help does not send the user to it."""
    mismatch = "allow_recipe_mismatch" not in leave_out
    helps = {} if mismatch else {"recipe_overrides": RECIPE_OVERRIDE_HELP}
    options = dataclass_options(Job, "job", {*leave_out, "settings"}, helps)

    def decorate(command: F) -> F:
        if "settings" in leave_out:
            return options(command)

        @functools.wraps(command)
        def with_settings(*args: Any, job: Job, settings: EngineSettings, **kwargs: Any) -> Any:
            return command(*args, job=dataclasses.replace(job, settings=settings), **kwargs)

        return options(engine_options(cast(F, with_settings)))

    return decorate


def declared_option(cls: type, name: str, help: str | None = None) -> Callable[[F], F]:
    """The option of one declared setting of the dataclass `cls` (its help replaced by `help`)
    on a command that builds no `cls`: a Job's --top-n on `score`, a calibration's --folds on
    `recalibrate`."""
    declared = settings_of(cls)[name]
    default = next(f.default for f in dataclasses.fields(cls) if f.name == name)
    return setting_option(dataclasses.replace(declared, help=help or declared.help), name, default)


allow_recipe_mismatch_option = declared_option(Job, "allow_recipe_mismatch")
explain_option = declared_option(Job, "explain")
top_n_option = declared_option(Job, "top_n")
