"""`PolicyView`: a loaded policy read once into typed, frozen attributes, the base of each
capability's view (fusion/recipe_view.py's Recipe, scoring/policy_view.py's ScorePolicy,
answering's AnswerPolicy, bids' BidPolicy, instincts' InstinctPolicy).

A view declares the keys Python reads, not every key: the templates render the plain mapping
(`parameters`, thawed by render) and read what they need from it. The loaded Policy under a view
keeps its version, source, overrides, metadata and record; the view passes on the ones every
consumer (and the public API) reads of a policy."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .frozen import FrozenMap
from .policy import Policy


@dataclass(frozen=True)
class PolicyView:
    policy: Policy

    @property
    def version(self) -> str:
        return self.policy.version

    @property
    def source(self) -> str:
        return self.policy.source

    @property
    def parameters(self) -> FrozenMap:
        """The plain (frozen) parameter tree: what templates render and records hash."""
        return self.policy.parameters

    @property
    def parameters_sha256(self) -> str:
        return self.policy.parameters_sha256

    def as_record(self) -> dict[str, Any]:
        return self.policy.as_record()

    def __getattr__(self, name: str) -> Any:
        """The loaded Policy's other fields (metadata, overrides, base_version, description …):
        a view stands where a Policy stood, for the public API's readers too."""
        if name == "policy" or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.policy, name)
