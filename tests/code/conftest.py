"""The repositories the tests of code/ read."""

from .repos import repository

__all__ = ["repository"]
