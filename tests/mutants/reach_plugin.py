"""The reach pass's recorder (`pytest -p tests.mutants.reach_plugin`, see reach.py): every
Jinja render's output is searched for the markers of the lines it holds, and each test's
markers are written to the file named by DUCKSCORE_REACH_OUT when the session ends. A test is
given what it rendered, what every fixture it used rendered when it was set up (a module's
fixture is set up in its first test only; each instance of a fixture adds to its name's;
`request.getfixturevalue` counts), and
what was rendered outside any test (at import). A test that fails, or starts a subprocess
(whose renders this process cannot see), is recorded as one that must always run."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Generator
from pathlib import Path
from typing import Any

import jinja2
import pytest

from .reach import Reach, markers_in

_record = Reach()
_current: list[str] = []  # the node id of the test running now, if any
_open: list[set[str]] = []  # the records of the test and the fixtures being set up now
_by_fixture: dict[str, set[str]] = {}
_fixtures_of: dict[str, list[str]] = {}
_outside: set[str] = set()


def _seen(rendered: str) -> None:
    found = markers_in(rendered)
    for record in _open or [_outside]:
        record.update(found)


def pytest_configure(config: pytest.Config) -> None:
    render = jinja2.Template.render

    def recording_render(self: jinja2.Template, *args: Any, **kwargs: Any) -> str:
        rendered = render(self, *args, **kwargs)
        _seen(rendered)
        return rendered

    popen_init = subprocess.Popen.__init__

    def noting_popen(self: subprocess.Popen[Any], *args: Any, **kwargs: Any) -> None:
        if _current:
            _record.always.add(_current[0])
        popen_init(self, *args, **kwargs)

    jinja2.Template.render = recording_render  # type: ignore[method-assign]
    subprocess.Popen.__init__ = noting_popen  # type: ignore[method-assign]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    _current[:] = [item.nodeid]
    _open[:] = [_record.tests.setdefault(item.nodeid, set())]
    yield
    _current.clear()
    _open.clear()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    yield
    request = getattr(item, "_request", None)  # its fixtures include getfixturevalue's
    _fixtures_of[item.nodeid] = list(getattr(request or item, "fixturenames", []))


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef[Any]) -> Generator[None, None, None]:
    record = _by_fixture.setdefault(fixturedef.argname, set())
    _open.append(record)
    yield
    _open.pop()  # fixtures are set up one inside another


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.failed:
        _record.always.add(report.nodeid)


def pytest_sessionfinish(session: pytest.Session) -> None:
    for test, seen in _record.tests.items():
        seen.update(_outside, *(_by_fixture.get(n, set()) for n in _fixtures_of.get(test, [])))
    _record.write(Path(os.environ["DUCKSCORE_REACH_OUT"]))
