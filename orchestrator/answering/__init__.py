"""`duckscore answers` (seed 001): the confidence of logged answers. policy: what an answer
policy may say and its RE2 patterns; tables: the inputs; stages: the SQL; pipeline:
`score_answers()`, what the command runs."""
