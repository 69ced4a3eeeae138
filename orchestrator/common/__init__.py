"""Helpers two or more capabilities share that are not part of the kernel (core/): RE2 literal
patterns, and the figures and HTML of the self-contained reports."""
