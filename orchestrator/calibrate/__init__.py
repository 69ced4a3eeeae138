"""`duckscore calibrate` (seed 000 §9): labels → a new, versioned score policy. settings: what a
calibration is asked; tables: the labels; folds; ablation: §9.3 and the thresholds' SQL;
calibration_metrics: AUROC, PR-AUC, Brier, ECE … in SQL; report; policy_file: §9.4; pipeline:
`calibrate()`, what the command runs."""
