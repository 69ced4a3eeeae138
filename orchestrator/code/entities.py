"""One Python file's rows of the entities table: the file, its classes, their methods and its
functions, with their line spans (docs/code.md#the-entities-table).

- The scopes read are the module's and each class's: a class or function is top level when it is
  defined at module scope, also inside an `if`, `try`, `with`, `for`, `while` or `match` there
  (`if WIN: def getchar(): …`); a method is a function defined likewise in a top-level class's
  scope. A def inside a function, or a class inside a class, is not a row: its lines belong to
  the entity that encloses it. (LocAgent's `ast.walk` lists nested functions and classes too.)
- A span is `node.lineno .. node.end_lineno`, 1-based and inclusive: from the `def` or `class`
  line, its decorators outside, as the benchmarks read it; the file row spans every line (an
  empty file has one).
- `__init__` stays `Class.__init__`: merging it into its class is the evaluation's rule.
- A name defined twice (an `@overload`, a def in each branch of an `if`) is a row per
  definition, each with its own span and the same ids.
- A file that does not decode or parse is a file row alone, with a warning naming the file and
  the line.
"""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from ..core.reporting import module_logger

logger = module_logger(__name__)

FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
Defined = ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True)
class Entity:
    """A row of the entities table (its columns, in order)."""

    revision: str | None  # the revision read; None for a folder
    file_path: str  # posix, relative to the root
    kind: str  # file | class | method | function
    qualified_name: str  # '' for the file; Class, Class.method, function
    module_id: str | None  # path:Class or path:function; None for the file
    entity_id: str  # path:Class.method, path:function, path:Class; the path for the file
    start_line: int
    end_line: int

    def sort_key(self) -> tuple[str, str, int, str]:
        """The table's order: revision, file_path, start_line, entity_id."""
        return self.revision or "", self.file_path, self.start_line, self.entity_id


COLUMNS = tuple(Entity.__dataclass_fields__)


def source_entities(data: bytes, path: str, revision: str | None = None) -> list[Entity]:
    """The rows of a file's bytes, decoded as Python decodes source (a coding cookie, else
    UTF-8)."""
    try:
        text = importlib.util.decode_source(data)
    except (SyntaxError, UnicodeDecodeError, LookupError) as exc:
        line = data[: exc.start].count(b"\n") + 1 if isinstance(exc, UnicodeDecodeError) else 1
        _unread(path, revision, line, f"does not decode ({exc})")
        return [file_row(data.decode("utf-8", errors="replace"), path, revision)]
    return file_entities(text, path, revision)


def file_entities(text: str, path: str, revision: str | None = None) -> list[Entity]:
    """The file row, then the entities of `text` in the table's order."""
    row = file_row(text, path, revision)
    try:
        tree = ast.parse(text, filename=path)
    except (SyntaxError, ValueError) as exc:  # ValueError: a null byte, on older Pythons
        line = getattr(exc, "lineno", None) or 1
        _unread(path, revision, line, f"does not parse ({getattr(exc, 'msg', exc)})")
        return [row]
    found = sorted(_entities(tree, path, revision), key=Entity.sort_key)
    return [row, *found]


def file_row(text: str, path: str, revision: str | None) -> Entity:
    return Entity(revision, path, "file", "", None, path, 1, line_count(text))


def line_count(text: str) -> int:
    """The lines of `text` as Python numbers them (`\\n`, `\\r\\n` and `\\r` end a line); an
    empty text has one."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n")
    return lines.count("\n") + (not lines.endswith("\n"))


def _entities(tree: ast.Module, path: str, revision: str | None) -> Iterator[Entity]:
    for node in _scope(tree.body):
        if isinstance(node, ast.ClassDef):
            yield _entity(node, "class", node.name, node.name, path, revision)
            for method in _scope(node.body):
                if isinstance(method, FUNCTIONS):
                    name = f"{node.name}.{method.name}"
                    yield _entity(method, "method", name, node.name, path, revision)
        else:
            yield _entity(node, "function", node.name, node.name, path, revision)


def _scope(nodes: Iterable[ast.AST]) -> Iterator[Defined]:
    """The classes and functions defined in one scope: among `nodes`, and inside the compound
    statements that open no scope of their own (if, try, with, for, while, match)."""
    for node in nodes:
        if isinstance(node, (ast.ClassDef, *FUNCTIONS)):
            yield node
        elif isinstance(node, (ast.stmt, ast.excepthandler, ast.match_case)):
            yield from _scope(ast.iter_child_nodes(node))


def _entity(
    node: Defined, kind: str, qualified: str, module: str, path: str, revision: str | None
) -> Entity:
    end = node.end_lineno if node.end_lineno is not None else node.lineno
    return Entity(
        revision, path, kind, qualified, f"{path}:{module}", f"{path}:{qualified}", node.lineno, end
    )


def _unread(path: str, revision: str | None, line: int, problem: str) -> None:
    where = f"{revision}:{path}" if revision is not None else path
    logger.warning(f"{where}:{line}: {problem}: kept as a file row, its entities unknown")
