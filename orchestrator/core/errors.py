"""The one exception family the command line turns into a one-line message and exit status 2."""


class DuckscoreError(Exception):
    """A problem the user can fix: bad input, bad policy, bad option. Message is one line."""


class InputError(DuckscoreError):
    """An input table is missing, unreadable or violates its contract."""


class PolicyError(DuckscoreError):
    """A policy file or override is unknown, malformed or out of range."""


class TemplateError(DuckscoreError):
    """A template failed to render, parse, qualify or lint."""


class QueryError(DuckscoreError):
    """A checked query failed while DuckDB ran it (out of memory, a failing cast, …)."""


class OptionError(DuckscoreError):
    """An option's value is not one the command can use."""


class OutputError(DuckscoreError):
    """The outputs could not be written."""


class WhitelistError(DuckscoreError):
    """A user-supplied condition or formula steps outside the whitelisted grammar."""
