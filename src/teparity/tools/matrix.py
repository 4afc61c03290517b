"""The compatibility table: parity reports of many environments as markdown.

On top, a line per executor that answers "does executor X work with TE Y, and if not, why?". Then a row
per span of stacks (ranges.py: consecutive TE versions, or thunder builds, whose verdicts are identical)
and a column per check group, each cell a word with footnotes that say what failed, why it skipped, or
which registered defect it was.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from teparity import checks
from teparity.report.parity import NO_EXECUTOR, Cell, ParityReport
from teparity.known.registry import BY_ID
from teparity.tools.ranges import Axis, Run, Span, collapse

#: Check name (without its parameters) -> the column it belongs to, in column order.
FOOTNOTE_CHARS = 240
#: Groups whose checks pass with no linear run by TE (the legacy sync symbol's place and count; thunder's
#: DDP transform on the CPU), so they never show that an executor works.
TRACE_ONLY_GROUPS = frozenset({"backward sync", "ddp transform"})


def group_of(row: str) -> str:
    check = checks.base(row)
    return checks.GROUPS.get(check, check)


def _groups(reports: Iterable[ParityReport]) -> list[str]:
    order = list(dict.fromkeys(checks.GROUPS.values()))
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


def _cell_parts(cell: Cell, checks: list[str], notes: Footnotes) -> tuple[str, list[str]]:
    """The cell's word and its footnote marks."""
    outcome = cell.outcome
    if outcome == "pass":
        return "pass", []
    if outcome == "known":
        return "known", [notes.mark(_known_note(d)) for d in cell.known_defects()]
    first = next(i for i, t in enumerate(cell.tests) if t.outcome == outcome)
    what = cell.tests[first].evidence if outcome == "skip" else f"{checks[first]}: {_headline(cell.tests[first].evidence)}"
    return outcome, [notes.mark(what)]


def _joined(parts: Iterable[tuple[str, list[str]]]) -> str:
    """One word with the marks of every part, each once: a span's runs share the word, not the evidence."""
    parts = list(parts)
    marks = dict.fromkeys(mark for _, run_marks in parts for mark in run_marks)
    return f"{parts[0][0]} {''.join(marks)}" if marks else parts[0][0]


def by_stack(spans: list[Span], notes: Footnotes) -> list[str]:
    """Markdown lines: a row per span, a column per check group."""
    groups = _groups(run.report for span in spans for run in span.runs)
    header = ["thunder", "torch", "TE", "executor", "ranks", "reports", *groups]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for span in spans:
        executor = "none (no TE executor)" if span.executor == NO_EXECUTOR else span.executor
        row = [span.field("thunder"), span.field("torch"), span.field("te"), executor, span.field("ranks"), span.links()]
        for group in groups:
            found = [cell for run in span.runs if (cell := _group_cell(run.report, span.executor, group))]
            row.append(_joined(_cell_parts(*cell, notes) for cell in found) if found else "")
        lines.append("| " + " | ".join(row) + " |")
    return lines


def by_executor(spans: list[Span], notes: Footnotes) -> list[str]:
    """Markdown lines: per executor, one line: each verdict, and the stacks where it holds (with their
    reports where one stack has two verdicts)."""
    several_ranks = len({span.field("ranks") for span in spans}) > 1
    lines = []
    for executor in sorted({span.executor for span in spans if span.executor != NO_EXECUTOR}):
        mine = [span for span in spans if span.executor == executor]
        stacks = [_stack_words(span, several_ranks) for span in mine]
        where: dict[tuple[str, str], list[str]] = {}
        for span, stack in zip(mine, stacks):
            verdict = _verdict([run.report for run in span.runs], executor, notes)
            where.setdefault(verdict, []).append(stack + (f" ({span.links()})" if stacks.count(stack) > 1 else ""))
        clauses = [f"{verdict}{f' ({why})' if why else ''} on {'; '.join(at)}" for (verdict, why), at in where.items()]
        lines.append(f"- **{executor}**: " + " ".join(c[0].upper() + c[1:] + "." for c in clauses))
    return lines


def _stack_words(span: Span, ranks: bool) -> str:
    te = span.field("te")
    words = f"thunder {span.field('thunder')} " + ("without TE" if te == "-" else f"with TE {te}")
    return words + (f", {span.field('ranks')} ranks" if ranks else "")


def _verdict(reports: list[ParityReport], executor: str, notes: Footnotes) -> tuple[str, str]:
    """Does the executor work in these runs (one span: their verdicts are identical), and if not, why;
    each cell quoted with the footnotes of every run."""
    first = reports[0]
    cells = {group: found for group in _groups([first]) if (found := _group_cell(first, executor, group))}
    outcomes = {group: cell.outcome for group, (cell, _) in cells.items()}

    def text(group: str) -> str:
        return _joined(_cell_parts(*found, notes) for report in reports if (found := _group_cell(report, executor, group)))

    failing = [g for g, o in outcomes.items() if o in ("FAIL", "XPASS")]
    if failing:
        return "**FAIL**", "; ".join(f"{g} {text(g)}" for g in failing)
    if outcomes and all(o == "skip" for o in outcomes.values()):
        return "not run", text(next(iter(cells)))
    known = sorted({d for cell, _ in cells.values() for d in cell.known_defects()})
    if known:
        te_passed = any(o == "pass" for g, o in outcomes.items() if g not in TRACE_ONLY_GROUPS)
        verdict = "works, with known defects" if te_passed else "no check that runs TE passed: known defects"
        return verdict, ", ".join(f"`{d}`" for d in known)
    return "works", ""


def compatibility_matrix(runs: list[Run], axis: Axis = "te") -> str:
    """The verdict per executor, then the table by span, then their footnotes."""
    notes = Footnotes()
    spans = collapse(runs, axis)
    verdicts = by_executor(spans, notes)
    return "\n".join([*verdicts, "", *by_stack(spans, notes), "", *notes.render()])
