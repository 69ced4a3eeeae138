"""Reports as returned values (issue 48): a command's report is a frozen dataclass, built once its
parts are known and returned by the function that makes it. Its JSON form (report.json, a
policy's metadata, what an HTML page reads) is `as_record()`: the fields in declaration order,
which is the order the report's page documents."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

# `field(default=None, metadata=OMITTED_WHEN_NONE)`: a field only some runs have (a tuned
# comparison, a linear model's weights), which the record leaves out when None, not null
OMITTED_WHEN_NONE = {"omitted_when_none": True}


class Report:
    """Mixed into a report's dataclass: `as_record()` is its JSON form."""

    def as_record(self) -> dict[str, Any]:
        """The fields in declaration order, a nested report by its own record, a field whose
        metadata is OMITTED_WHEN_NONE left out when None."""
        record = {}
        for spec in fields(self):  # type: ignore[arg-type]
            value = getattr(self, spec.name)
            if value is None and spec.metadata == OMITTED_WHEN_NONE:
                continue
            record[spec.name] = recorded(value)
        return record


def recorded(value: Any) -> Any:
    """A report as its record, a list of them as a list of records; any other value as it is."""
    if isinstance(value, Report):
        return value.as_record()
    if isinstance(value, list):
        return [recorded(item) for item in value]
    return value
