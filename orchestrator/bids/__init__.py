"""`duckscore bids` (seed 002): supplier bids scored with tenant-safe retrieval, evidence packing,
rules, confidence, human-review triggers, citation checks and acceptance gates. policy; tables:
the --input folder; whitelist: user conditions and formulas compiled to bound SQL; rules; gates;
pipeline: `score_bids()`, what the command runs."""
