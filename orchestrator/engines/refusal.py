"""The one exception of the dialect rewrites: a construct a dialect cannot express exactly."""


class Refusal(Exception):
    """A construct the dialect cannot express exactly (message without the location)."""
