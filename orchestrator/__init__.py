"""duckscore: SQL-first confidence scoring for retrieval-augmented generation logs."""

__version__ = "0.1.0"
