"""duckscore as SQL: the building blocks of macros/*.sql as DuckDB macros.

Each macro's body is the Jinja building block rendered with its parameters as the DuckDB macro's
own (ColumnParameter renders as an identifier, and arithmetic on it writes SQL), so the formula
exists once; the policy gives the defaulted parameters their values (`ds_rrf(rank, k := 60)`).

A number parameter is read as NULL when it is NaN (issue 35): DuckDB orders NaN above every
number, so `greatest(0, least(1, NaN))` would be 1.0 and a NaN score would rank first. The
commands refuse NaN in their inputs; a scalar macro cannot refuse one row, so a NaN argument
gives what a NULL gives — a NULL result, ranked last by `ds_rank_desc` — never a number.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..core.render import SqlExpression, ident, lit, render_expression
from ..core.tables import nan_as_null_sql
from ..fusion.recipe_view import Recipe
from ..instincts.policy import InstinctPolicy
from ..scoring.policy_view import ScorePolicy


@dataclass(frozen=True)
class _NanAsNull(SqlExpression):
    """A macro parameter with NaN read as NULL: SQL wherever the building block puts it, as
    text (`{{ x }}`) or through `lit` (`{{ k | lit }}`), and in arithmetic."""

    def __str__(self) -> str:
        return self.sql


def nan_as_null(name: str) -> _NanAsNull:
    quoted = ident(name)
    return _NanAsNull(f"({nan_as_null_sql(quoted)})")


GEOMEAN_TERMS = 6  # ds_weighted_geomean(x1, w1, x2, w2 [, x3, w3 … x6, w6])
BANDS = 6  # ds_band_points(x, t1, p1 [, t2, p2 … t6, p6], otherwise := 0)


@dataclass(frozen=True)
class ScalarMacro:
    """One DuckDB scalar macro: `name(required…, optional := default…) AS body`."""

    name: str
    doc: str
    required: tuple[str, ...]
    optional: tuple[tuple[str, object], ...]
    call: str  # the Jinja call of the building block, its parameters named as the macro's
    not_numbers: tuple[str, ...] = ()  # parameters passed as they are (names, partitions)

    def body(self) -> str:
        names = [*self.required, *(name for name, _ in self.optional)]
        bands = [
            {"at_least": nan_as_null(f"t{i}"), "points": nan_as_null(f"p{i}")}
            for i in range(1, BANDS + 1)
        ]
        return render_expression(
            self.call,
            bands=[*bands, {"at_least": None, "points": nan_as_null("otherwise")}],
            **{name: nan_as_null(name) for name in names if name not in self.not_numbers},
        )

    def statement(self, prefix: str) -> str:
        head = macro_head(prefix, self.name, self.doc, self.required, self.optional)
        return f"{head}\n{self.body()};\n"


def macro_head(
    prefix: str,
    name: str,
    doc: str,
    required: Sequence[str],
    optional: Sequence[tuple[str, object]],
    table: bool = False,
) -> str:
    """`-- doc` and `CREATE OR REPLACE MACRO name(required, optional := default) AS [TABLE]`."""
    parameters = [*required, *(f"{key} := {lit(value)}" for key, value in optional)]
    return (
        f"-- {prefix}{name}: {doc}\n"
        f"CREATE OR REPLACE MACRO {prefix}{name}({', '.join(parameters)}) AS"
        + (" TABLE" if table else "")
    )


def scalar_macros(
    score: ScorePolicy, recipe: Recipe, instincts: InstinctPolicy
) -> list[ScalarMacro]:
    """The building blocks with the policies' values as their defaults."""
    normalization = score.normalization
    z = float(instincts.wilson_z)
    geomean_terms = [(f"x{i}", f"w{i}") for i in range(1, GEOMEAN_TERMS + 1)]
    geomean_call = ", ".join(f"(x{i}, w{i})" for i in range(1, GEOMEAN_TERMS + 1))
    return [
        ScalarMacro(
            "rrf",
            "one source's reciprocal-rank-fusion term, weight / (k + rank), rank 1-based",
            ("rank",),
            (("k", float(recipe.fusion.k)), ("weight", 1.0)),
            "{{ rrf(rank, k=k, weight=weight) }}",
        ),
        ScalarMacro(
            "log_scale",
            "ln(x + shift), NULL where x + shift <= 0",
            ("x",),
            (("shift", 1.0),),
            "{{ log_scale(x, shift) }}",
        ),
        ScalarMacro(
            "clamp",
            "x bounded to [lo, hi]; NULL stays NULL",
            ("x",),
            (("lo", 0.0), ("hi", 1.0)),
            "{{ clamp(x, lo, hi) }}",
        ),
        ScalarMacro(
            "quantile_norm",
            "(x - lo) / (hi - lo + eps) clamped to [0, 1]; zero_spread_value where hi = lo = x",
            ("x", "lo", "hi"),
            (
                ("eps", float(normalization.eps)),
                ("zero_spread_value", float(normalization.zero_spread_value)),
            ),
            "{{ quantile_norm(x, lo, hi, eps, zero_spread_value) }}",
        ),
        ScalarMacro(
            "weighted_geomean",
            f"exp(Σ w·ln(max(x, floor)) / Σ w) over up to {GEOMEAN_TERMS} (x, w) pairs; 0 when "
            "a weighted x <= 0, NULL when a weighted x is NULL",
            ("x1", "w1", "x2", "w2"),
            (
                *(
                    (name, value)
                    for x, w in geomean_terms[2:]
                    for name, value in ((x, None), (w, 0.0))
                ),
                ("floor", float(score.subscore_floor)),
            ),
            f"{{{{ weighted_geomean([{geomean_call}], floor) }}}}",
        ),
        ScalarMacro(
            "band_points",
            f"the points of the first band (of up to {BANDS}, highest threshold first) whose "
            "threshold x reaches, else `otherwise`; NULL stays NULL",
            ("x", "t1", "p1"),
            (
                *((name, None) for i in range(2, BANDS + 1) for name in (f"t{i}", f"p{i}")),
                ("otherwise", 0.0),
            ),
            "{{ band_points(x, bands) }}",
        ),
        ScalarMacro(
            "rank_desc",
            "row_number() by score descending within a partition (a column, or a struct of "
            "several), ties by tie_breaker ascending, NULLs last",
            ("score", "partition_by", "tie_breaker"),
            (),
            "{{ rank_desc(score, ['partition_by'], 'tie_breaker') }}",
            not_numbers=("partition_by", "tie_breaker"),
        ),
        *(
            ScalarMacro(
                f"wilson_{bound}",
                f"the {bound} end of the Wilson score interval of successes / trials",
                ("successes", "trials"),
                (("z", z),),
                f"{{{{ wilson_interval(successes, trials, z, '{bound}') }}}}",
            )
            for bound in ("lower", "upper")
        ),
    ]
