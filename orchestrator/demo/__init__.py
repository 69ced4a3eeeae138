"""`duckscore demo`: the bundled data end to end. scifact: the SciFact log fused, scored and
checked against its human judgments; tender: the bundled tender through `duckscore bids`."""
