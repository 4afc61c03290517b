"""The parity report as markdown for a CI job's summary (``$GITHUB_STEP_SUMMARY``): what ran, the table with its
footnotes, and every failure's evidence."""

from __future__ import annotations

from teparity.report.parity import ParityReport, red
from teparity.report.table import COLUMN_NOTES, HEADINGS, Footnotes, cell_text
from teparity.stack.versions import Versions


def markdown_summary(report: ParityReport, exit_status: int | None = None) -> str:
    env = report.environment
    versions = Versions(**{key: value for key, value in env.get("versions", {}).items()
                           if key in ("torch", "thunder", "transformer_engine", "sources")})
    lines = [
        f"## teparity: {report.verdict(exit_status)}",
        "",
        *_what_the_change_did(report),
        f"{versions.describe()}; teparity {env.get('teparity_commit')}; world size {env.get('world_size')}, backend "
        f"{env.get('backend')}",
        *(f"- placed by its source: {placed}" for placed in versions.placements()),
        *([f"- {used}"] if (used := report.references()) else []),
    ]
    notes = Footnotes()
    executors = report.executors()
    if executors:
        lines += ["", "| check | " + " | ".join(HEADINGS.get(e, e) for e in executors) + " |", "|---" * (len(executors) + 1) + "|"]
    for check in report.checks():
        cells = [cell_text(cell, notes) if (cell := report.cells.get((check, e))) else "" for e in executors]
        lines.append(f"| `{check}` | " + " | ".join(cells) + " |")
    lines += ["", *(f"{COLUMN_NOTES[e]}  " for e in executors if e in COLUMN_NOTES), *(f"{line}  " for line in notes.render(10_000))]
    failing = [(check, t) for (check, _), cell in sorted(report.cells.items()) for t in cell.tests if t.outcome in ("FAIL", "XPASS")]
    if failing:
        lines += ["", f"### {len(failing)} failing test(s)"]
        for check, test in failing:
            # The report's excerpt whole (``teparity.report.evidence``): each failed rank's exception is in it.
            lines += ["", f"**{test.outcome}** `{test.nodeid}` ({check})", "", "```", test.evidence, "```"]
    return "\n".join(lines) + "\n"


def _what_the_change_did(report: ParityReport) -> list[str]:
    """A run against its base opens with its change's verdict: what it broke, what was red already, what it fixed."""
    if (base := report.against_base) is None:
        return []
    return [f"**What this change did** (against the base `{base['base']}`): {base['summary']}", "",
            *(f"- {line}" for line in base.get("lines", [])), ""]


def missing_report(path: str, why: str, exit_status: int | None, *, is_base: bool = False) -> str:
    """What the summary says where there is no report to read (the gate stopped before it wrote one: a usage error,
    an interrupted start; or the file is no report). Where the base's report is what is missing, it names that file
    and what to do, not the run's report that could not be written because of it."""
    if is_base:
        return (f"## teparity: {red(exit_status, 'no base report')}\n\nThe base's report `{path}`: {why}. The gate stopped "
                "at start-up, before it tested. Run the gate on the base first, writing that file (the step with "
                "`report:` set to it), or leave `base-report` empty to judge the run on its own.\n")
    return f"## teparity: {red(exit_status, 'no parity report')}\n\n`{path}`: {why}. The gate's log says what happened.\n"


def gate_not_run(failed_step: str | None) -> str:
    """What the summary says where the gate did not run (a CI step before it failed): red, whatever an older report
    at the path says."""
    said = failed_step or "the step that runs it did not run"
    first, _, rest = said.partition("\n")
    return f"## teparity: {red(None, first)}\n" + (f"\n```\n{rest.strip()}\n```\n" if rest.strip() else "")
