"""What every command uses when it is not told: one fusion recipe, one score policy (issue 32).

The policy records the recipe it was calibrated on (`metadata.recipe`), so a command given only
`--policy` fuses with that recipe; without either, these two, which belong together.
"""

DEFAULT_RECIPE = "canonical_rrf"  # document-level RRF(k=60): the peers' RRF, SciFact's reference
DEFAULT_POLICY = "overall_v3"  # overall_v2 calibrated on SciFact's labels with DEFAULT_RECIPE
