"""`duckscore eval` and `duckscore labels`: retrieval metrics of a run against relevance judgments,
and good / ambiguous / bad labels for calibration, in SQL. catalog: the metric names; tables: the
run and qrels inputs; retrieval: `evaluate()`, the metrics; labels: `make_labels()`."""
