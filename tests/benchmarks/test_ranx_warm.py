"""The benchmark warms ranx fully (issue 34): after `warm_ranx(log)`, ranx's timed RRF of the
same log compiles no numba kernel — numba compiles one per width of the doc ids, which a warm-up
on short ids, as before, left inside the clock."""

from __future__ import annotations

import sys

import pytest

from benchmarks.bench import ranx_rrf, warm_ranx

from ..helpers import SCIFACT

pytestmark = [pytest.mark.slow, pytest.mark.extended]  # a minute of numba compilation


def compiled() -> dict[str, list[str]]:
    """Every numba kernel of ranx, with the signatures compiled so far."""
    from numba.core.registry import CPUDispatcher

    return {
        f"{name}.{attribute}": [str(signature) for signature in value.signatures]
        for name, module in list(sys.modules.items())
        if name.startswith("ranx")
        for attribute, value in vars(module).items()
        if isinstance(value, CPUDispatcher)
    }


@pytest.mark.filterwarnings("ignore::numba.core.errors.NumbaTypeSafetyWarning")
def test_the_timed_run_compiles_nothing_after_the_warm_up() -> None:
    log = SCIFACT / "retrieval_log.parquet"
    warm_ranx(log)
    warmed = compiled()
    assert any(warmed.values())
    assert len(ranx_rrf(log)) == 300
    assert compiled() == warmed
