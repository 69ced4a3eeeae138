"""A development overlay whose `duckscore` loads the checkout's code but a scratch copy of sql/.

`duckscore.core.resources` finds the templates beside its own resolved file, so the overlay holds
a real copy of that one module; every other module and package is a link into the checkout's
orchestrator/, and `macros`, `fixtures` links to the checkout's. Tests run with PYTHONPATH set to
the overlay's folder (`import duckscore` loads it), from the checkout (so `tests.*` imports), and
the subprocesses they start inherit it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "orchestrator"
SQL = ROOT / "sql"
_REAL_FILES = {"resources.py"}
_DATA = ("macros", "fixtures")


class Overlay:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.package = folder / "duckscore"
        self.sql = self.package / "sql"

    def build(self) -> Overlay:
        if self.folder.exists():
            shutil.rmtree(self.folder)
        self.package.mkdir(parents=True)
        for entry in sorted(PACKAGE.iterdir()):
            if entry.name in ("sql", "__pycache__", *_DATA):
                continue
            if entry.name == "core":
                self._core(entry)
            else:
                (self.package / entry.name).symlink_to(entry.resolve())
        shutil.copytree(SQL, self.sql, ignore=shutil.ignore_patterns("__pycache__"))
        # resources.py finds them beside the copied sql/: the checkout's own, at its top level
        for name in _DATA:
            (self.package / name).symlink_to(ROOT / name)
        return self

    def _core(self, source: Path) -> None:
        core = self.package / "core"
        core.mkdir()
        for entry in sorted(source.iterdir()):
            if entry.name == "__pycache__":
                continue
            if entry.name in _REAL_FILES:
                shutil.copy2(entry, core / entry.name)
            else:
                (core / entry.name).symlink_to(entry.resolve())

    def write(self, template: str, text: str) -> None:
        (self.sql / template).write_text(text, encoding="utf-8")
