"""`duckscore run`: fuse a retrieval log, then score its parents, on one Session (pipeline.py)."""
