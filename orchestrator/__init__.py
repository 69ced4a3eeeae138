"""duckscore: SQL-first confidence scoring for retrieval-augmented generation logs.

From Python, `import duckscore as ds`: ds.fuse, ds.score, ds.run, ds.eval, ds.eval_loc,
ds.answers, ds.connect (duckscore/api/functions.py), ds.scorer (duckscore/api/scorer.py: live
decisions) and ds.Batcher (duckscore/api/batcher.py: live requests scored together), imported on first use so that the command line starts fast; ds.DuckscoreError, the
base of every error a user can fix (core/errors.py, which imports nothing).
"""

import logging
from typing import TYPE_CHECKING, Any

from .core.errors import DuckscoreError

__version__ = "0.1.0"
# steps and warnings are logging (core/reporting.py): silent unless the caller configures it
logging.getLogger(__name__).addHandler(logging.NullHandler())
__all__ = [
    "Batcher", "DuckscoreError", "answers", "connect", "eval", "eval_loc", "fuse", "run", "score", "scorer"
]  # fmt: skip
API = ("answers", "connect", "eval", "eval_loc", "fuse", "run", "score", "scorer")

if TYPE_CHECKING:  # what an IDE and a type checker see: the functions, not the subpackages
    from .api.batcher import Batcher
    from .api.functions import answers, connect, eval, eval_loc, fuse, run, score
    from .api.scorer import scorer


def __getattr__(name: str) -> Any:
    """The API's functions, imported on first use (PEP 562): no subpackage bears their names
    (fusion/, scoring/, runner/, answering/), so nothing an import binds here hides them."""
    if name == "scorer":
        from .api.scorer import scorer

        return scorer
    if name == "Batcher":
        from .api.batcher import Batcher

        return Batcher
    if name in API:
        from .api import functions

        return getattr(functions, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
