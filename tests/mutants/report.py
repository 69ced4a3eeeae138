"""The Markdown report of a mutation run: the kill rate per capability, then every survivor."""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

_ORDER = ("fuse", "score", "answers", "bids", "instincts", "metrics")


def kill_rate(counts: Counter[str]) -> str:
    """Killed (a test failed, or the run timed out) over killed + survived; equivalent mutants
    and harness errors are left out."""
    killed = counts["killed"] + counts["timeout"]
    scored = killed + counts["survived"]
    return f"{100 * killed / scored:.1f} %" if scored else "–"


# the operators that stand for a policy or recipe option: not bound, or ignored
OPTION_OPERATORS = ("param", "cond")


def markdown(results: list[dict[str, Any]]) -> str:
    lines = _table("capability", results, lambda r: r["template"].split("/", 1)[0], _ORDER)
    lines += [""] + _table("operator", results, lambda r: r["operator"], ())
    options = [r for r in results if r["operator"] in OPTION_OPERATORS]
    if options:
        counts = Counter(r["status"] for r in options)
        lines += ["", f"Options (param: a bound value made 1.0; cond: a Jinja condition made "
                      f"true or false): {len(options)} mutants, {kill_rate(counts)} killed."]  # fmt: skip
    survivors = [r for r in results if r["status"] in ("survived", "equivalent", "error")]
    if survivors:
        lines += ["", "| mutant | status | edit | reason |", "|---|---|---|---|"]
        for r in sorted(survivors, key=lambda r: r["id"]):
            edit = f"line {r['line']}: `{_cell(r['original'])}` → `{_cell(r['replacement'])}`"
            lines.append(f"| `{r['id']}` | {r['status']} | {edit} | {_cell(r['reason'])} |")
    return "\n".join(lines) + "\n"


def _table(
    name: str,
    results: list[dict[str, Any]],
    group: Callable[[dict[str, Any]], str],
    order: tuple[str, ...],
) -> list[str]:
    """A row of counts per group (in `order`, then by name), then the total."""
    by_group: dict[str, Counter[str]] = {}
    for r in results:
        by_group.setdefault(group(r), Counter())[r["status"]] += 1
    lines = [
        f"| {name} | mutants | killed | timeout | survived | equivalent | error | kill rate |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    total: Counter[str] = Counter()
    for key in sorted(by_group, key=lambda g: (order.index(g) if g in order else len(order), g)):
        total.update(by_group[key])
        lines.append(_row(key, by_group[key]))
    lines.append(_row("**all**", total))
    return lines


def _row(name: str, counts: Counter[str]) -> str:
    cells = [counts[s] for s in ("killed", "timeout", "survived", "equivalent", "error")]
    return (
        f"| {name} | {sum(counts.values())} | "
        + " | ".join(map(str, cells))
        + f" | {kill_rate(counts)} |"
    )


def _cell(text: str) -> str:
    flat = " ".join(text.split()).replace("|", "\\|")
    return flat if len(flat) <= 80 else flat[:77] + "…"


def merged(paths: list[Path], equivalent: dict[str, str]) -> list[dict[str, Any]]:
    """The results of several runs' results.jsonl, a later run's result of a mutant replacing an
    earlier one's (a re-run after a new test); survivors now in equivalent.yaml marked so."""
    by_id: dict[str, dict[str, Any]] = {}
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                result = json.loads(line)
                by_id[result["id"]] = result
    for result in by_id.values():
        if result["status"] == "survived" and result["id"] in equivalent:
            result["status"], result["reason"] = "equivalent", equivalent[result["id"]]
    return list(by_id.values())


def against_catalogue(
    results: list[dict[str, Any]], ids: dict[str, str]
) -> tuple[list[dict[str, Any]], str]:
    """The results of mutants still in the catalogue (`ids`: id -> capability), and a note of
    those left out (their template line changed since) and of the mutants not run yet."""
    kept = [r for r in results if r["id"] in ids]
    ran = {r["id"] for r in kept}
    missing = Counter(capability for i, capability in ids.items() if i not in ran)
    notes = [f"{len(results) - len(kept)} results of mutants no longer in the catalogue left out"]
    if missing:
        order = sorted(missing, key=lambda c: _ORDER.index(c) if c in _ORDER else 99)
        notes.append("not run: " + ", ".join(f"{c} {missing[c]}" for c in order))
    return kept, "; ".join(notes) + "."


def main(argv: list[str]) -> None:
    """python -m tests.mutants.report RUN/results.jsonl [LATER/results.jsonl …]: the report so
    far, a later file's result of a mutant replacing an earlier one's."""
    import yaml

    from .run import CAPABILITIES, catalogue

    known = yaml.safe_load((Path(__file__).parent / "equivalent.yaml").read_text()) or {}
    ids = {m.id: m.capability for m in catalogue(list(CAPABILITIES), [])}
    kept, note = against_catalogue(merged([Path(p) for p in argv], known), ids)
    print(markdown(kept) + "\n" + note)


if __name__ == "__main__":
    main(sys.argv[1:])
