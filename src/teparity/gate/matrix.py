"""The compatibility table: parity reports of many environments in two markdown views.

By stack: a row per (thunder, TE, executor, ranks) and a column per check group, each cell a word with
a footnote that says what failed, why it skipped, or which registered defect it was. By executor: a row
per stack that answers "does executor X work with TE Y, and if not, why?".
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from packaging.version import InvalidVersion, Version

from teparity.gate.known_defects import BY_ID
from teparity.gate.report import NO_EXECUTOR, Cell, ParityReport

#: Check name (without its parameters) -> the column it belongs to, in column order.
CHECK_GROUPS: dict[str, str] = {
    "bwd-sync-placement": "backward sync",
    "bwd-sync-runs-once": "backward sync",
    "fwd-has-no-sync": "backward sync",
    "te-claims-every-linear": "TE claims",
    "te-trace-invariants": "trace invariants",
    "numerics": "numerics",
    "numerics-fp32-bias": "fp32 + bias",
    "ddp-first-step": "ddp",
    "ddp": "ddp",
    "ddp-grad-accumulation": "grad accumulation",
    "ddp-fp8-group-per-rank": "fp8 groups",
    "ddp-fp8-group-subgroups-of-2": "fp8 groups",
    "ddp-transform-matches-torch-ddp": "ddp transform",
}
FOOTNOTE_CHARS = 400
#: Groups whose checks pass with no linear run by TE (the legacy sync symbol's place and count; thunder's
#: DDP transform on the CPU), so they never show that an executor works.
TRACE_ONLY_GROUPS = frozenset({"backward sync", "ddp transform"})

Row = tuple[str, ParityReport]  # (the report's label, markdown allowed; the report)


def group_of(check: str) -> str:
    base = check.split("[", 1)[0]
    return CHECK_GROUPS.get(base, base)


def _groups(reports: Iterable[ParityReport]) -> list[str]:
    order = list(dict.fromkeys(CHECK_GROUPS.values()))
    found = {group_of(check) for report in reports for check in report.checks()}
    return sorted(found, key=lambda g: (order.index(g) if g in order else len(order), g))


def _group_cell(report: ParityReport, executor: str, group: str) -> tuple[Cell, list[str]] | None:
    """The group's tests merged into one cell, with the check of each test (for footnotes)."""
    checks = [c for c in report.checks() if group_of(c) == group and (c, executor) in report.cells]
    if not checks:
        return None
    merged = Cell()
    names = []
    for check in checks:
        merged.tests += report.cells[(check, executor)].tests
        names += [check] * len(report.cells[(check, executor)].tests)
    return merged, names


def _markdown(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _headline(evidence: str) -> str:
    """The part of a failure that says what differs: no exception class, no "N difference(s), first:"."""
    evidence = re.sub(r"^[\w.]*(Error|Failed|Fallback|Eager|Group): ", "", evidence)
    evidence = re.sub(r"^\[known upstream defect [^]]*\] ", "", evidence)
    return re.sub(r"^\d+ [\w ]*?\(s\), first: ", "", evidence)


class Footnotes:
    """Numbered footnotes, one per distinct text."""

    def __init__(self) -> None:
        self.texts: dict[str, int] = {}

    def mark(self, text: str) -> str:
        text = _markdown(text)
        if len(text) > FOOTNOTE_CHARS:
            text = text[: FOOTNOTE_CHARS - 3] + "..."
        return f"[{self.texts.setdefault(text, len(self.texts) + 1)}]"

    def render(self) -> list[str]:
        return [f"{number}. {text}" for text, number in self.texts.items()]


def _known_note(defect: str) -> str:
    entry = BY_ID.get(defect)
    return f"known `{defect}`: {entry.summary}" if entry else f"known `{defect}` (not in this registry)"


def _cell_text(cell: Cell, checks: list[str], notes: Footnotes) -> str:
    outcome = cell.outcome
    if outcome == "pass":
        return "pass"
    if outcome == "known":
        return "known " + "".join(notes.mark(_known_note(d)) for d in cell.known_defects())
    first = next(i for i, t in enumerate(cell.tests) if t.outcome == outcome)
    what = cell.tests[first].evidence if outcome == "skip" else f"{checks[first]}: {_headline(cell.tests[first].evidence)}"
    return f"{outcome} {notes.mark(what)}"


def _version_key(text: str | None) -> tuple[int, Version | str]:
    try:
        return (0, Version(text or ""))
    except InvalidVersion:
        return (1, text or "")


def _stack(report: ParityReport) -> tuple[str, str, str, str]:
    env = report.environment
    versions = env.get("versions", {})
    ranks = f"{env.get('world_size', '?')} {env.get('backend', '?')}"
    return versions.get("thunder") or "-", versions.get("torch") or "-", versions.get("transformer_engine") or "-", ranks


def by_stack(rows: list[Row], notes: Footnotes) -> list[str]:
    """Markdown lines: a row per (report, executor), a column per check group."""
    groups = _groups(report for _, report in rows)
    header = ["thunder", "torch", "TE", "executor", "ranks", "report", *groups]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for label, report in rows:
        for executor in report.executors():
            row = [*_stack(report)[:3], executor, _stack(report)[3], label]
            for group in groups:
                found = _group_cell(report, executor, group)
                row.append(_cell_text(*found, notes) if found else "")
            lines.append("| " + " | ".join(row) + " |")
    return lines


def by_executor(rows: list[Row], notes: Footnotes) -> list[str]:
    """Markdown lines: per executor, a row per stack (by TE, then thunder): does it work there, and if not, why."""
    lines = ["| executor | TE | thunder | ranks | report | verdict | why |", "|---|---|---|---|---|---|---|"]
    executors = sorted({e for _, r in rows for e in r.executors() if e != NO_EXECUTOR})
    for executor in executors:
        stacks = sorted(
            ((label, report) for label, report in rows if executor in report.executors()),
            key=lambda r: (_version_key(_stack(r[1])[2]), _version_key(_stack(r[1])[0])),
        )
        for label, report in stacks:
            thunder, _, te, ranks = _stack(report)
            verdict, why = _verdict(report, executor, notes)
            lines.append(f"| {executor} | {te} | {thunder} | {ranks} | {label} | {verdict} | {why} |")
    return lines


def _verdict(report: ParityReport, executor: str, notes: Footnotes) -> tuple[str, str]:
    cells = {group: found for group in _groups([report]) if (found := _group_cell(report, executor, group))}
    outcomes = {group: cell.outcome for group, (cell, _) in cells.items()}
    failing = [g for g, o in outcomes.items() if o in ("FAIL", "XPASS")]
    if failing:
        return "**FAIL**", "; ".join(f"{g} {_cell_text(*cells[g], notes)}" for g in failing)
    if outcomes and all(o == "skip" for o in outcomes.values()):
        first = next(iter(cells.values()))
        return "not run", _cell_text(*first, notes)
    known = sorted({d for cell, _ in cells.values() for d in cell.known_defects()})
    if known:
        te_passed = any(o == "pass" for g, o in outcomes.items() if g not in TRACE_ONLY_GROUPS)
        verdict = "works, with known defects" if te_passed else "no check that runs TE passed: known defects"
        return verdict, ", ".join(f"`{d}`" for d in known)
    return "works", ""


def compatibility_matrix(rows: list[Row]) -> str:
    """Both views, by stack and then by executor, and their footnotes."""
    notes = Footnotes()
    return "\n".join([*by_stack(rows, notes), "", "By executor:", "", *by_executor(rows, notes), "", *notes.render()])
