"""The parity report as markdown for a CI job's summary (``$GITHUB_STEP_SUMMARY``): what ran, the table with its
footnotes, and every failure's evidence."""

from __future__ import annotations

from teparity.gate.report import ParityReport
from teparity.gate.table import HEADINGS, Footnotes, cell_text

EVIDENCE_LINES = 12


def markdown_summary(report: ParityReport, exit_status: int | None = None) -> str:
    env = report.environment
    versions = env.get("versions", {})
    status = report.exitstatus if exit_status is None else exit_status
    verdict = "green: every cell is a pass, a known defect or a skip" if status == 0 else f"RED (exit {status})"
    lines = [
        f"## teparity: {verdict}",
        "",
        f"torch {versions.get('torch')}, lightning-thunder {versions.get('thunder')}, TransformerEngine "
        f"{versions.get('transformer_engine') or 'absent'}; teparity {env.get('teparity_commit')}; world size "
        f"{env.get('world_size')}, backend {env.get('backend')}",
        "",
    ]
    notes = Footnotes()
    executors = report.executors()
    lines += ["| check | " + " | ".join(HEADINGS.get(e, e) for e in executors) + " |", "|---" * (len(executors) + 1) + "|"]
    for check in report.checks():
        cells = [cell_text(cell, notes) if (cell := report.cells.get((check, e))) else "" for e in executors]
        lines.append(f"| `{check}` | " + " | ".join(cells) + " |")
    lines += ["", *(f"{line}  " for line in notes.render(10_000))]
    failing = [(check, t) for (check, _), cell in sorted(report.cells.items()) for t in cell.tests if t.outcome in ("FAIL", "XPASS")]
    if failing:
        lines += ["", f"### {len(failing)} failing test(s)"]
        for check, test in failing:
            evidence = "\n".join(test.evidence.splitlines()[:EVIDENCE_LINES])
            lines += ["", f"**{test.outcome}** `{test.nodeid}` ({check})", "", "```", evidence, "```"]
    return "\n".join(lines) + "\n"


def missing_report(path: str, exit_status: int | None) -> str:
    """What the summary says where the gate wrote no report (a usage error, an interrupted start)."""
    return (f"## teparity: RED (exit {exit_status})\n\nNo parity report at `{path}`: the gate stopped before it "
            "wrote one; its log says why.\n")
