"""The parity report in the terminal, within ``WIDTH`` columns: a row per check, a short column per executor,
each cell's outcome with its details as numbered footnotes that every row shares (a skip's reason, the known
defect, an XPASS's entry, a near miss), the checks that skip in every column for one reason on one line, and
what a column without a TE executor holds."""

from __future__ import annotations

import textwrap

from teparity.report.parity import NO_EXECUTOR, Cell, ParityReport
from teparity.known import repro

WIDTH = 120
#: Column headings of executors with long or no names.
HEADINGS = {NO_EXECUTOR: "no TE"}
#: What a column holds, where its heading does not say (under the table, in the terminal and the job summary).
COLUMN_NOTES = {NO_EXECUTOR: "no TE: the checks that run no TE executor (thunder's DDP and FSDP transforms, against torch's)"}
#: The widest a check's column may be; a longer name wraps its row.
CHECK_WIDTH = 56


class Footnotes:
    """Numbered footnotes, one per distinct text, in the order they are first marked."""

    def __init__(self) -> None:
        self.texts: dict[str, int] = {}

    def mark(self, text: str) -> str:
        number = self.texts.setdefault(text, len(self.texts) + 1)
        return f"[{number}]"

    def render(self, width: int) -> list[str]:
        return [line for text, number in self.texts.items()
                for line in wrapped(f"[{number}] {text}", width)]


#: How a wrapped line of the header and of the time line continues.
HEADER_INDENT, CONTINUED_INDENT = "teparity:     ", "    "


def wrapped(text: str, width: int = WIDTH, indent: str = CONTINUED_INDENT) -> list[str]:
    """``text`` in lines of at most ``width``, the later ones indented; a name is never broken at its hyphens, nor a
    word longer than a line (a path: it stays whole on a line of its own, to copy)."""
    return textwrap.wrap(text, width, subsequent_indent=indent, break_on_hyphens=False, break_long_words=False)


def unwrapped(output: str, indent: str = HEADER_INDENT) -> str:
    """``output`` with the lines that ``wrapped`` continued with ``indent`` joined again: what was said, to grep."""
    return output.replace("\n" + indent, " ")


def _known_note(cell: Cell, defect: str) -> str:
    """A known defect's footnote: the entry, and how its tests were held beyond the signature (its model's verdict,
    or a bounded signature; "signature only" where neither), and the command that writes its standalone reproduction
    where it has one (``teparity.known.repro``)."""
    held = sorted({t.held_by() or "signature only" for t in cell.tests
                   if t.outcome == "known" and (t.known_defect or "unregistered") == defect})
    said = f"known upstream defect {defect}" + (f"; {', '.join(held)}" if defect != "unregistered" else "")
    return said + (f"; reproduce it alone: python -m teparity repro {defect}" if defect in repro.available() else "")


def cell_text(cell: Cell, notes: Footnotes) -> str:
    """A cell in a few words, its details as footnotes."""
    outcome, tests = cell.outcome, cell.tests
    if outcome == "skip":
        return f"skip {notes.mark(tests[0].evidence)}"
    if outcome == "known":
        return "known " + "".join(notes.mark(_known_note(cell, defect)) for defect in cell.known_defects())
    count = f"({sum(1 for t in tests if t.outcome == outcome)}/{len(tests)})"
    if outcome == "XPASS":
        entries = sorted({entry for t in tests if t.outcome == "XPASS" for entry in t.did_not_show or ()})
        said = [f"{entry} did not show: fixed upstream? retire it" for entry in entries] or ["an expected failure did not show"]
        return f"XPASS {count} " + "".join(notes.mark(text) for text in said)
    if outcome == "FAIL":
        near = sorted({t.near_miss for t in tests if t.outcome == "FAIL" and t.near_miss})
        return f"FAIL {count}" + "".join(f" {notes.mark(f'matches {entry} outside its range')}" for entry in near)
    return f"pass ({len(tests)})" if len(tests) > 1 else "pass"


def _skipped_alike(report: ParityReport, check: str, executors: list[str]) -> str | None:
    """The one reason every cell of the row skips for, or None."""
    cells = [cell for executor in executors if (cell := report.cells.get((check, executor))) is not None]
    reasons = {cell.tests[0].evidence for cell in cells if cell.outcome == "skip"}
    return reasons.pop() if len(reasons) == 1 and all(cell.outcome == "skip" for cell in cells) else None


def terminal_table(report: ParityReport, width: int = WIDTH) -> list[str]:
    """The report's lines, none wider than ``width``."""
    notes = Footnotes()
    executors = report.executors()
    rows, alike = [], {}
    for check in report.checks():
        if (reason := _skipped_alike(report, check, executors)) is not None:
            alike.setdefault(notes.mark(reason), []).append(check)
            continue
        rows.append([check, *(cell_text(cell, notes) if (cell := report.cells.get((check, e))) else "" for e in executors)])
    header = ["check", *(HEADINGS.get(executor, executor) for executor in executors)]
    lines = _columns([header, *rows], width)
    lines += [line for executor in executors if executor in COLUMN_NOTES for line in wrapped(COLUMN_NOTES[executor], width)]
    for mark, checks in alike.items():
        lines += wrapped(f"skip {mark} in every column: {', '.join(checks)}", width)
    counts = {outcome: sum(1 for cell in report.cells.values() if cell.outcome == outcome)
              for outcome in ("pass", "FAIL", "XPASS", "known", "skip")}
    lines.append("cells: " + ", ".join(f"{n} {outcome}" for outcome, n in counts.items()))
    lines += notes.render(width)
    return lines


def json_note(json_path: str | None) -> str:
    """Where the run's JSON report went."""
    return f"parity report JSON: {json_path}" if json_path else "parity report JSON: none (--teparity-report PATH writes one)"


def _columns(rows: list[list[str]], width: int) -> list[str]:
    """Left-aligned columns, the first no wider than ``CHECK_WIDTH`` (a longer check stands on a line of its own)."""
    first = min(CHECK_WIDTH, max(len(row[0]) for row in rows))
    widths = [first, *(max(len(row[i]) for row in rows) for i in range(1, len(rows[0])))]
    lines = []
    for row in rows:
        if len(row[0]) > first:
            lines.append(row[0])
            row = ["", *row[1:]]
        lines.append("  ".join(value.ljust(w) for value, w in zip(row, widths)).rstrip()[:width])
    lines.insert(1, "  ".join("-" * w for w in widths)[:width])
    return lines
