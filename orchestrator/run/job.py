"""`Job`: what a run decides with — recipe, policy, their overrides, top-n, explanations, engine
settings — built once by whoever is asked (`duckscore run`, its partitions and Spark shards,
`ds.run`, `ds.scorer`, `duckscore serve`) and handed down whole (issue 33, item 5)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

from ..common.defaults import DEFAULT_POLICY
from ..core.connection import EngineSettings
from ..core.errors import DuckscoreError
from ..core.policy import Policy, load_policy
from ..fuse.policy_recipe import recipe_for_policy, recipe_name_for
from ..score.policy import SCORE_POLICY


class Loaded(NamedTuple):
    recipe: Policy
    policy: Policy


@dataclass(frozen=True)
class Job:
    """`recipe` None: the recipe the policy was calibrated on, else the default recipe; a
    recipe that is not the policy's is refused unless `allow_recipe_mismatch`."""

    recipe: str | None = None
    policy: str = DEFAULT_POLICY
    recipe_overrides: tuple[str, ...] = ()
    policy_overrides: tuple[str, ...] = ()
    top_n: int = 5
    explain: bool = True
    allow_recipe_mismatch: bool = False
    settings: EngineSettings | None = None
    sorted_outputs: bool = True  # False: fused, parent_features, parents in the engine's order

    def load(self) -> Loaded:
        """The recipe and the policy, loaded and checked: one line naming what is wrong."""
        if self.top_n < 1:
            raise DuckscoreError(f"--top-n must be at least 1, got {self.top_n}")
        policy = load_policy(SCORE_POLICY, self.policy, list(self.policy_overrides))
        recipe = recipe_for_policy(
            policy, self.recipe, list(self.recipe_overrides), self.allow_recipe_mismatch
        )
        return Loaded(recipe, policy)

    def resolved(self) -> Job:
        """The job with its recipe named (checked against the policy once, here): for the
        paths that hand it on to partitions and Spark executors."""
        name = recipe_name_for(self.load().policy, self.recipe)
        return replace(self, recipe=name, allow_recipe_mismatch=True)


DEFAULT_JOB = Job()  # the default policy, its recipe, top 5, explanations, DuckDB's settings
