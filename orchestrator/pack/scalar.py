"""duckscore as SQL: the building blocks of macros/*.sql as DuckDB macros.

Each macro's body is the Jinja building block rendered with its parameters as the DuckDB macro's
own (ColumnParameter renders as an identifier, and arithmetic on it writes SQL), so the formula
exists once; the policy gives the defaulted parameters their values (`ds_rrf(rank, k := 60)`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..core.errors import OptionError
from ..core.policy import Policy
from ..core.render import column, lit, render_expression
from ..core.version import __version__

DEFAULT_PREFIX = "ds_"
_PREFIX = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
GEOMEAN_TERMS = 6  # ds_weighted_geomean(x1, w1, x2, w2 [, x3, w3 … x6, w6])


@dataclass(frozen=True)
class ScalarMacro:
    """One DuckDB scalar macro: `name(required…, optional := default…) AS body`."""

    name: str
    doc: str
    required: tuple[str, ...]
    optional: tuple[tuple[str, object], ...]
    call: str  # the Jinja call of the building block, its parameters named as the macro's

    def body(self) -> str:
        names = [*self.required, *(name for name, _ in self.optional)]
        return render_expression(self.call, **{name: column(name) for name in names})

    def statement(self, prefix: str) -> str:
        parameters = [*self.required, *(f"{name} := {lit(value)}" for name, value in self.optional)]
        return (
            f"-- {prefix}{self.name}: {self.doc}\n"
            f"CREATE OR REPLACE MACRO {prefix}{self.name}({', '.join(parameters)}) AS\n"
            f"{self.body()};\n"
        )


def scalar_macros(score: Policy, recipe: Policy, instincts: Policy) -> list[ScalarMacro]:
    """The building blocks with the policies' values as their defaults."""
    normalization = score.parameters["normalization"]
    z = float(instincts.parameters["effectiveness"]["z"])
    geomean_terms = [(f"x{i}", f"w{i}") for i in range(1, GEOMEAN_TERMS + 1)]
    geomean_call = ", ".join(f"('x{i}', w{i})" for i in range(1, GEOMEAN_TERMS + 1))
    return [
        ScalarMacro(
            "rrf",
            "one source's reciprocal-rank-fusion term, weight / (k + rank), rank 1-based",
            ("rank",),
            (("k", float(recipe.parameters["fusion"]["k"])), ("weight", 1.0)),
            "{{ rrf('rank', k=k, weight=weight) }}",
        ),
        ScalarMacro(
            "log_scale",
            "ln(x + shift), NULL where x + shift <= 0",
            ("x",),
            (("shift", 1.0),),
            "{{ log_scale('x', shift) }}",
        ),
        ScalarMacro(
            "clamp",
            "x bounded to [lo, hi]; NULL stays NULL",
            ("x",),
            (("lo", 0.0), ("hi", 1.0)),
            "{{ clamp('x', lo, hi) }}",
        ),
        ScalarMacro(
            "quantile_norm",
            "(x - lo) / (hi - lo + eps) clamped to [0, 1]; zero_spread_value where hi = lo = x",
            ("x", "lo", "hi"),
            (
                ("eps", float(normalization["eps"])),
                ("zero_spread_value", float(normalization["zero_spread_value"])),
            ),
            "{{ quantile_norm('x', 'lo', 'hi', eps, zero_spread_value) }}",
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
                ("floor", float(score.parameters["subscore_floor"])),
            ),
            f"{{{{ weighted_geomean([{geomean_call}], floor) }}}}",
        ),
        *(
            ScalarMacro(
                f"wilson_{bound}",
                f"the {bound} end of the Wilson score interval of successes / trials",
                ("successes", "trials"),
                (("z", z),),
                f"{{{{ wilson_interval('successes', 'trials', z, '{bound}') }}}}",
            )
            for bound in ("lower", "upper")
        ),
    ]


def macro_script(
    score: Policy, recipe: Policy, instincts: Policy, prefix: str = DEFAULT_PREFIX
) -> str:
    """The whole pack as a DuckDB script: `.read` it, or run it on a connection."""
    check_prefix(prefix)
    macros = scalar_macros(score, recipe, instincts)
    versions = {
        "duckscore": __version__,
        "score_policy": score.version,
        "recipe": recipe.version,
        "instinct_policy": instincts.version,
    }
    header = (
        f"-- duckscore {versions['duckscore']} macro pack (prefix {prefix}): score policy "
        f"{score.version}, recipe {recipe.version}, instinct policy {instincts.version}\n"
        "-- generated from macros/*.sql by `duckscore sql macros`; every statement is idempotent\n"
    )
    policy = (
        f"-- {prefix}policy(): the versions the defaults below come from\n"
        f"CREATE OR REPLACE MACRO {prefix}policy() AS "
        f"{{{', '.join(f'{lit(key)}: {lit(value)}' for key, value in versions.items())}}};\n"
    )
    return "\n".join([header + policy, *(m.statement(prefix) for m in macros)])


def check_prefix(prefix: str) -> None:
    """A prefix that keeps every macro name a plain identifier."""
    if not _PREFIX.fullmatch(prefix):
        raise OptionError(
            f"--prefix {prefix!r}: a macro name prefix is letters, digits and _, not starting "
            "with a digit (e.g. ds_)"
        )
