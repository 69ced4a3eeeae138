"""`duckscore score` (seed 000): parent OverallScores, confidence levels, risk flags, HITL and
web fallback from parent features. policy: the score policy's parameters; tables: the inputs;
stages: the SQL on a Session; pipeline: `score()`, what the command runs."""
